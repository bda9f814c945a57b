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
pub(crate) mod wire;

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use cairn_core::{
    BoxFuture, ChatClient, ChatError, ChatErrorKind, ChatOptions, ChatRequest, ChatResponse,
    ChatStream, Kwargs, Message,
};
use reqwest::header::{AUTHORIZATION, HeaderMap};

pub use crate::transport::{ApiKey, RetryPolicy};

pub(crate) use crate::transport::StreamDecoder;
use crate::transport::endpoint::{Endpoint, Target};
use crate::transport::{Lookup, Resp, Settings, config_error, process_env, settings_methods};
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
            settings: Settings::new(DEFAULT_BASE_URL),
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

    /// A builder filled from the environment: `OPENAI_API_KEY`, `OPENAI_BASE_URL` (default
    /// `https://api.openai.com/v1`), `OPENAI_MODEL`, `OPENAI_ORG_ID` / `OPENAI_PROJECT_ID`
    /// (sent as `OpenAI-Organization` / `OpenAI-Project`) when set, and the timeouts
    /// `CAIRN_CONNECT_TIMEOUT`, `CAIRN_TIMEOUT`, `CAIRN_IDLE_TIMEOUT` (seconds; an invalid one
    /// makes [`build`](Self::build) fail).
    pub fn from_env() -> Self {
        Self::from_lookup(process_env)
    }

    /// Like [`from_env`](Self::from_env), reading the variables through `lookup` (e.g. a map
    /// of credentials taken out of the environment at start-up).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Self {
        let lookup: Lookup<'_> = &lookup;
        let mut b = Self::default();
        b.settings.read_env(
            lookup,
            &["OPENAI_API_KEY"],
            "OPENAI_MODEL",
            "OPENAI_BASE_URL",
        );
        if let Some(org) = Settings::var(lookup, "OPENAI_ORG_ID") {
            b.settings.headers.push(("OpenAI-Organization".into(), org));
        }
        if let Some(p) = Settings::var(lookup, "OPENAI_PROJECT_ID") {
            b.settings.headers.push(("OpenAI-Project".into(), p));
        }
        b
    }

    settings_methods!("Authorization: Bearer …");

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
    pub fn build(mut self) -> Result<OpenAIClient, ChatError> {
        let endpoint = self
            .settings
            .endpoint(|k| (AUTHORIZATION, format!("Bearer {k}")), &[])?;
        let chat = endpoint.target("chat/completions")?;
        let responses = endpoint.target("responses")?;
        Ok(OpenAIClient {
            inner: Arc::new(Inner {
                endpoint,
                api_key: self.settings.api_key,
                chat,
                responses,
                model: self.settings.model,
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
    endpoint: Endpoint,
    api_key: Option<ApiKey>,
    chat: Target,
    responses: Target,
    model: Option<String>,
    api: Api,
    provider: String,
    max_tokens_field: &'static str,
    stream_usage: bool,
    /// A capacity for the next request body: the last one's size plus some room.
    body_hint: AtomicUsize,
}

impl fmt::Debug for OpenAIClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let i = &self.inner;
        f.debug_struct("OpenAIClient")
            .field("provider", &i.provider)
            .field("base_url", &i.endpoint.display_url)
            .field("model", &i.model)
            .field("api", &i.api)
            .field("api_key", &i.api_key)
            .field("http", &i.endpoint.options)
            .field("retry", &i.endpoint.retry)
            .finish()
    }
}

impl OpenAIClient {
    /// A builder with the defaults (see [`OpenAIClientBuilder::new`]).
    pub fn builder() -> OpenAIClientBuilder {
        OpenAIClientBuilder::new()
    }

    /// A client configured from the environment (see [`OpenAIClientBuilder::from_env`]).
    ///
    /// Fails with [`ChatErrorKind::Config`] when `OPENAI_API_KEY` is missing while the base URL
    /// is OpenAI's own; a local server needs no key.
    pub fn from_env() -> Result<Self, ChatError> {
        let b = OpenAIClientBuilder::from_env();
        if b.settings.api_key.is_none()
            && b.settings.base_url.trim_end_matches('/') == DEFAULT_BASE_URL
        {
            return Err(ChatError::new(
                ChatErrorKind::Config,
                "OPENAI_API_KEY is not set (set it, or OPENAI_BASE_URL for a local server)",
            ));
        }
        b.build()
    }

    /// The API this client speaks.
    pub fn api(&self) -> Api {
        self.inner.api
    }

    /// The default model, if one was configured.
    pub fn model(&self) -> Option<&str> {
        self.inner.model.as_deref()
    }

    /// The API root as configured (with any `user:password@` in it; show it through
    /// [`redact_url`](crate::redact_url)).
    pub fn base_url(&self) -> &str {
        &self.inner.endpoint.base_url
    }

    /// A copy of this client speaking another API (sharing the connection pool).
    pub fn with_api(&self, api: Api) -> Self {
        let i = &self.inner;
        OpenAIClient {
            inner: Arc::new(Inner {
                endpoint: i.endpoint.clone(),
                api_key: i.api_key.clone(),
                chat: i.chat.clone(),
                responses: i.responses.clone(),
                model: i.model.clone(),
                api,
                provider: i.provider.clone(),
                max_tokens_field: i.max_tokens_field,
                stream_usage: i.stream_usage,
                body_hint: AtomicUsize::new(i.body_hint.load(Ordering::Relaxed)),
            }),
        }
    }
}

struct Prepared<'a> {
    target: &'a Target,
    body: Bytes,
    extra_headers: Option<HeaderMap>,
}

impl Inner {
    fn prepare(
        &self,
        messages: &[Message],
        options: &ChatOptions,
        client_kwargs: &Kwargs,
        stream: bool,
    ) -> Result<Prepared<'_>, ChatError> {
        let model = options
            .model
            .as_deref()
            .or(self.model.as_deref())
            .ok_or_else(|| {
                config_error(
                    "no model: set ChatOptions::model, the builder's model or OPENAI_MODEL",
                )
            })?;
        let (extra_body, extra_headers) = crate::transport::settings::client_extras(client_kwargs)?;
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
        Ok(Prepared {
            target: url,
            body: Bytes::from(body),
            extra_headers,
        })
    }

    /// Sends the request, retrying before the first byte of a successful response.
    async fn send(&self, p: &Prepared<'_>, stream: bool) -> Result<Resp, ChatError> {
        self.endpoint
            .send(
                p.target,
                &p.body,
                p.extra_headers.as_ref(),
                stream,
                crate::transport::error::status_error,
            )
            .await
    }

    async fn complete(
        &self,
        messages: &[Message],
        options: &ChatOptions,
        client_kwargs: &Kwargs,
    ) -> Result<ChatResponse, ChatError> {
        let p = self.prepare(messages, options, client_kwargs, false)?;
        let resp = self.send(&p, false).await?;
        let body = resp.bytes().await?;
        match self.api {
            Api::ChatCompletions => chat::parse_response(&body),
            Api::Responses => responses::parse_response(&body),
        }
    }

    async fn open_stream(
        &self,
        messages: &[Message],
        options: &ChatOptions,
        client_kwargs: &Kwargs,
    ) -> Result<Resp, ChatError> {
        let p = self.prepare(messages, options, client_kwargs, true)?;
        self.send(&p, true).await
    }
}

impl ChatClient for OpenAIClient {
    fn get_response<'a>(
        &'a self,
        request: ChatRequest<'a>,
    ) -> BoxFuture<'a, Result<ChatResponse, ChatError>> {
        let i = &self.inner;
        i.endpoint
            .respond(i.complete(request.messages, request.options, request.client_kwargs))
    }

    fn get_streaming_response<'a>(&'a self, request: ChatRequest<'a>) -> ChatStream<'a> {
        let i = &self.inner;
        let open = i.open_stream(request.messages, request.options, request.client_kwargs);
        match i.api {
            Api::ChatCompletions => i.endpoint.stream(open, chat::ChatStreamDecoder::default()),
            Api::Responses => i
                .endpoint
                .stream(open, responses::ResponsesStreamDecoder::default()),
        }
    }

    fn describe(&self) -> String {
        match &self.inner.model {
            Some(m) => format!("{}:{m}", self.inner.provider),
            None => self.inner.provider.clone(),
        }
    }
}
