//! An OpenAI-compatible [`ChatClient`]: Chat Completions and Responses, plain and streaming.
//!
//! ```no_run
//! use cairn_providers::openai::{Api, OpenAIClient};
//! use std::time::Duration;
//!
//! # fn main() -> Result<(), cairn_core::ChatError> {
//! let client = OpenAIClient::builder()
//!     .base_url("http://localhost:8000/v1")
//!     .model("gpt-4.1")
//!     .api(Api::Responses)
//!     .timeout(Duration::from_secs(60))
//!     .max_retries(3)
//!     .build()?;
//! # Ok(()) }
//! ```
//!
//! # Wire mapping
//!
//! - `ChatOptions::instructions` become the first `system` message (chat completions) or the
//!   `instructions` field (Responses).
//! - Assistant function calls become `tool_calls` / `function_call` items; each function result
//!   becomes one `tool` message / `function_call_output` item. Images returned by tools follow
//!   the tool messages as a user message (chat completions only allows text there).
//! - Images are `image_url` / `input_image` parts. Reasoning from earlier turns is not resent.
//! - Tools are sent as `{"type":"function","function":{…}}` (chat) or flat (Responses, with
//!   `strict: false`); `tool_choice` and `parallel_tool_calls` only when there are tools.
//! - `response_format` holding a bare JSON schema is sent as a strict `json_schema` format (the
//!   schema rewritten with `cairn_core::schema::to_strict`); a value already in the API's shape
//!   is sent as it is.
//! - `ChatOptions::additional_properties` are merged into the body and replace fields of the
//!   same name. Streams ask for usage (`stream_options.include_usage`, chat completions).
//! - The Responses API has no `stop` or `seed`; they are not sent there.
//!
//! # Transport
//!
//! HTTP (the lean HTTP/1.1 path for `http://`, reqwest otherwise), timeouts, caps, retries and
//! SSE decoding are the shared [`crate::transport`]; this module only maps OpenAI's wire format.
//!
//! # Client kwargs
//!
//! The client-kwargs bucket of a call may carry:
//! - `extra_headers`: an object of header names to string values, added to the request;
//! - `extra_body`: an object merged into the request body (its fields replace cairn's own and
//!   those of `ChatOptions::additional_properties`).
//!
//! Function-invocation kwargs are never sent.

mod chat;
mod responses;
mod tools;
pub(crate) mod wire;

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use cairn_core::{
    BoxFuture, ChatClient, ChatError, ChatErrorKind, ChatRequest, ChatResponse, ChatStream,
};
use reqwest::header::AUTHORIZATION;

pub use crate::transport::{ApiKey, RetryPolicy};

pub(crate) use crate::transport::StreamDecoder;
use crate::transport::endpoint::Target;
use crate::transport::error::status_error;
use crate::transport::{ClientCore, Payload, ProviderEnv, Resp, Settings};
use crate::transport::{client_methods, settings_methods};
use wire::Extras;

/// The default base URL.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// Which OpenAI API a client speaks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Api {
    /// `POST /chat/completions` (the default; what most compatible servers offer).
    #[default]
    ChatCompletions,
    /// `POST /responses`.
    Responses,
}

/// What [`OpenAIClientBuilder::from_env`] reads.
static ENV: ProviderEnv = ProviderEnv {
    default_base_url: DEFAULT_BASE_URL,
    keys: &["OPENAI_API_KEY"],
    model: "OPENAI_MODEL",
    base_url: "OPENAI_BASE_URL",
    headers: &[
        ("OPENAI_ORG_ID", "OpenAI-Organization"),
        ("OPENAI_PROJECT_ID", "OpenAI-Project"),
    ],
    missing_key: "OPENAI_API_KEY is not set (set it, or OPENAI_BASE_URL for a local server)",
    key_required_for: Some(DEFAULT_BASE_URL),
};

/// Builds an [`OpenAIClient`].
#[derive(Debug, Clone)]
pub struct OpenAIClientBuilder {
    settings: Settings,
    api: Api,
    provider: String,
    legacy_max_tokens: bool,
    stream_usage: bool,
}

impl Default for OpenAIClientBuilder {
    fn default() -> Self {
        OpenAIClientBuilder {
            settings: Settings::new(&ENV),
            api: Api::ChatCompletions,
            provider: "openai".to_owned(),
            legacy_max_tokens: false,
            stream_usage: true,
        }
    }
}

impl OpenAIClientBuilder {
    /// A builder with the defaults: `https://api.openai.com/v1`, chat completions, the
    /// [`HttpOptions`](crate::HttpOptions) defaults (connect 10 s, first byte 300 s, idle
    /// 120 s), 2 retries, no key.
    pub fn new() -> Self {
        Self::default()
    }

    settings_methods!(
        "Authorization: Bearer …",
        ENV,
        /// A builder filled from the environment: `OPENAI_API_KEY`, `OPENAI_BASE_URL` (default
        /// `https://api.openai.com/v1`), `OPENAI_MODEL`, `OPENAI_ORG_ID` / `OPENAI_PROJECT_ID`
        /// (sent as `OpenAI-Organization` / `OpenAI-Project`) when set, and the timeouts
        /// `CAIRN_CONNECT_TIMEOUT`, `CAIRN_TIMEOUT`, `CAIRN_IDLE_TIMEOUT` (seconds; an invalid
        /// one makes [`build`](Self::build) fail).
    );

    /// Which API to speak.
    pub fn api(mut self, api: Api) -> Self {
        self.api = api;
        self
    }

    /// The provider name used by [`ChatClient::describe`] (`openai` by default).
    pub fn provider_name(mut self, name: impl Into<String>) -> Self {
        self.provider = name.into();
        self
    }

    /// Sends `options.max_tokens` as `max_tokens` instead of `max_completion_tokens` (chat
    /// completions), for older compatible servers.
    pub fn legacy_max_tokens(mut self, yes: bool) -> Self {
        self.legacy_max_tokens = yes;
        self
    }

    /// Whether streaming chat-completion requests ask for usage
    /// (`stream_options.include_usage`, default true). Turn it off for servers that reject
    /// `stream_options`.
    pub fn stream_usage(mut self, yes: bool) -> Self {
        self.stream_usage = yes;
        self
    }

    /// The former name of [`hyper_http1`](Self::hyper_http1) (the transport was a hand-written
    /// HTTP/1.1 client before it used hyper).
    #[deprecated(note = "renamed to `hyper_http1`")]
    pub fn builtin_http1(self, yes: bool) -> Self {
        self.hyper_http1(yes)
    }

    /// Builds the client.
    ///
    /// Fails with [`ChatErrorKind::Config`] on an invalid base URL, header or `CAIRN_*`
    /// timeout variable.
    pub fn build(self) -> Result<OpenAIClient, ChatError> {
        let core =
            self.settings
                .into_core(&ENV, |k| (AUTHORIZATION, format!("Bearer {k}")), &[])?;
        let chat = core.endpoint.target("chat/completions")?;
        let responses = core.endpoint.target("responses")?;
        Ok(OpenAIClient {
            inner: Arc::new(Inner {
                core,
                chat,
                responses,
                api: self.api,
                provider: self.provider,
                max_tokens_field: if self.legacy_max_tokens {
                    "max_tokens"
                } else {
                    "max_completion_tokens"
                },
                stream_usage: self.stream_usage,
                body_hint: AtomicUsize::new(1024),
            }),
        })
    }
}

/// A client for OpenAI's API and compatible servers (vLLM, Ollama, llama.cpp, LM Studio, …).
///
/// Cheap to clone: clones share one connection pool. Each [`build`](OpenAIClientBuilder::build)
/// makes a new pool, so build once and clone (or pass a shared
/// [`http_client`](OpenAIClientBuilder::http_client)). See the [module docs](self) for the
/// client kwargs it understands.
#[derive(Clone)]
pub struct OpenAIClient {
    inner: Arc<Inner>,
}

struct Inner {
    core: ClientCore,
    chat: Target,
    responses: Target,
    api: Api,
    provider: String,
    max_tokens_field: &'static str,
    stream_usage: bool,
    /// A capacity for the next request body: the last one's size plus some room.
    body_hint: AtomicUsize,
}

impl fmt::Debug for OpenAIClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (i, c) = (&self.inner, &self.inner.core);
        f.debug_struct("OpenAIClient")
            .field("provider", &i.provider)
            .field("base_url", &c.endpoint.display_url)
            .field("model", &c.model)
            .field("api", &i.api)
            .field("api_key", &c.api_key)
            .field("http", &c.endpoint.options)
            .field("retry", &c.endpoint.retry)
            .finish()
    }
}

client_methods!(OpenAIClient, OpenAIClientBuilder, ENV,
    /// Fails with [`ChatErrorKind::Config`] when `OPENAI_API_KEY` is missing while the base URL
    /// is OpenAI's own; a local server needs no key.
);

impl OpenAIClient {
    /// The API this client speaks.
    pub fn api(&self) -> Api {
        self.inner.api
    }

    /// A copy of this client speaking another API (sharing the connection pool).
    pub fn with_api(&self, api: Api) -> Self {
        let i = &self.inner;
        OpenAIClient {
            inner: Arc::new(Inner {
                core: i.core.clone(),
                chat: i.chat.clone(),
                responses: i.responses.clone(),
                api,
                provider: i.provider.clone(),
                max_tokens_field: i.max_tokens_field,
                stream_usage: i.stream_usage,
                body_hint: AtomicUsize::new(i.body_hint.load(Ordering::Relaxed)),
            }),
        }
    }
}

impl Inner {
    /// The target and body of a call.
    fn prepare(&self, r: &ChatRequest<'_>, stream: bool) -> Result<(&Target, Payload), ChatError> {
        let (messages, options) = (r.messages, r.options);
        let model = self.core.model(options)?;
        let (extra_body, extra_headers) =
            crate::transport::settings::client_extras(r.client_kwargs)?;
        let extras = Extras {
            props: &options.additional_properties,
            body: extra_body,
        };
        // Serialize into a buffer sized like the previous request (conversations grow), which
        // saves the reallocations and copies of growing it from empty.
        let mut body = Vec::with_capacity(self.body_hint.load(Ordering::Relaxed));
        let (url, written) = match self.api {
            Api::ChatCompletions => (
                &self.chat,
                serde_json::to_writer(
                    &mut body,
                    &chat::ChatRequest {
                        model,
                        messages,
                        options,
                        stream,
                        stream_usage: self.stream_usage,
                        extras,
                        max_tokens_field: self.max_tokens_field,
                    },
                ),
            ),
            Api::Responses => (
                &self.responses,
                serde_json::to_writer(
                    &mut body,
                    &responses::ResponsesRequest {
                        model,
                        messages,
                        options,
                        stream,
                        extras,
                    },
                ),
            ),
        };
        written.map_err(|e| {
            ChatError::new(
                ChatErrorKind::Config,
                format!("the request could not be serialized: {e}"),
            )
            .with_source(e)
        })?;
        self.body_hint
            .store(body.len() + body.len() / 8 + 256, Ordering::Relaxed);
        let payload = Payload {
            body: Bytes::from(body),
            extra_headers,
        };
        Ok((url, payload))
    }

    /// Sends the request, retrying before the first byte of a successful response.
    async fn open(&self, r: &ChatRequest<'_>, stream: bool) -> Result<Resp, ChatError> {
        let (target, payload) = self.prepare(r, stream)?;
        let e = &self.core.endpoint;
        e.send(target, &payload, stream, status_error).await
    }

    async fn complete(&self, r: ChatRequest<'_>) -> Result<ChatResponse, ChatError> {
        let body = self.open(&r, false).await?.bytes().await?;
        match self.api {
            Api::ChatCompletions => chat::parse_response(&body),
            Api::Responses => responses::parse_response(&body),
        }
    }
}

impl ChatClient for OpenAIClient {
    fn get_response<'a>(
        &'a self,
        request: ChatRequest<'a>,
    ) -> BoxFuture<'a, Result<ChatResponse, ChatError>> {
        let i = &self.inner;
        i.core.endpoint.respond(i.complete(request))
    }

    fn get_streaming_response<'a>(&'a self, request: ChatRequest<'a>) -> ChatStream<'a> {
        let (i, e) = (&self.inner, &self.inner.core.endpoint);
        let open = async move { i.open(&request, true).await };
        match i.api {
            Api::ChatCompletions => e.stream(open, chat::ChatStreamDecoder::default()),
            Api::Responses => e.stream(open, responses::ResponsesStreamDecoder::default()),
        }
    }

    fn describe(&self) -> String {
        self.inner.core.describe(&self.inner.provider)
    }
}
