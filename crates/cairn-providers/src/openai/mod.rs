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
//! Plain `http://` servers (local models, benchmarks' fake servers) are reached through a lean
//! transport: hyper's low-level HTTP/1.1 client connections (`hyper::client::conn::http1`) with
//! a small keep-alive pool, without reqwest's layers (connector stack, proxy matching, header
//! and URL conversions), which spends less CPU per call. hyper does all of the HTTP/1.1
//! protocol. `https://` servers, environments with an HTTP proxy, and clients given their own
//! [`reqwest::Client`] use `reqwest` (rustls with the `ring` provider).
//! [`OpenAIClientBuilder::hyper_http1`] turns the lean transport off.
//!
//! # Timeouts, caps and retries
//!
//! Connecting, waiting for the response head (first byte) and each gap between two pieces of a
//! body have their own timeouts, and every body and SSE event the client buffers is capped:
//! see [`HttpOptions`] (defaults, environment variables, why). Connection failures and HTTP
//! 408/429/5xx are retried ([`RetryPolicy`]) before the first byte of a successful response,
//! never after; a first-byte timeout only when the policy says so. A stream stops at its end
//! event (`[DONE]`, `response.completed`) instead of waiting for the server to close.
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
pub(crate) mod endpoint;
mod http1;
mod responses;
pub(crate) mod retry;
pub(crate) mod sse;
pub(crate) mod wire;

use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use cairn_core::{
    BoxFuture, ChatClient, ChatError, ChatErrorKind, ChatOptions, ChatRequest, ChatResponse,
    ChatResponseUpdate, ChatStream, Kwargs, Message,
};
use reqwest::Url;
use reqwest::header::{AUTHORIZATION, HeaderMap};

pub use retry::RetryPolicy;

use crate::common::{Lookup, Settings, config_error, process_env, settings_methods};
use crate::http_options::{self, ERROR_BODY_BYTES, HttpOptions};
use crate::redact::Redactor;
use endpoint::{Endpoint, Target};
use sse::{Flow, SseParser};
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

/// An API key. Its `Debug` and `Display` print `***`, never the key.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wraps a key.
    pub fn new(key: impl Into<String>) -> Self {
        ApiKey(key.into())
    }

    /// The key itself (for building a header; do not log it).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl fmt::Display for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl From<String> for ApiKey {
    fn from(s: String) -> Self {
        ApiKey(s)
    }
}

impl From<&str> for ApiKey {
    fn from(s: &str) -> Self {
        ApiKey(s.to_owned())
    }
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

/// The `reqwest` client of an endpoint that was not given one.
fn http_client(options: &HttpOptions) -> Result<reqwest::Client, ChatError> {
    // rustls is built without a bundled crypto provider; install ring as the process default
    // unless another one already is.
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
    // The first-byte and idle timeouts are applied around each wait (see `endpoint` and
    // `Resp`), the same for both transports.
    reqwest::Client::builder()
        .connect_timeout(options.connect_timeout)
        .pool_idle_timeout(Duration::from_secs(90))
        .tcp_nodelay(true)
        .build()
        .map_err(|e| {
            ChatError::new(
                ChatErrorKind::Config,
                format!("could not build the HTTP client: {e}"),
            )
            .with_source(e)
        })
}

impl OpenAIClientBuilder {
    /// A builder with the defaults: `https://api.openai.com/v1`, chat completions, the
    /// [`HttpOptions`] defaults (connect 10 s, first byte 300 s, idle 120 s), 2 retries, no key.
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
        b.settings.api_key = Settings::var(lookup, "OPENAI_API_KEY").map(ApiKey);
        b.settings.model = Settings::var(lookup, "OPENAI_MODEL");
        if let Some(u) = Settings::var(lookup, "OPENAI_BASE_URL") {
            b.settings.base_url = u;
        }
        if let Some(org) = Settings::var(lookup, "OPENAI_ORG_ID") {
            b.settings.headers.push(("OpenAI-Organization".into(), org));
        }
        if let Some(p) = Settings::var(lookup, "OPENAI_PROJECT_ID") {
            b.settings.headers.push(("OpenAI-Project".into(), p));
        }
        b.settings.apply_env(lookup);
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

/// How requests reach the server.
#[derive(Clone)]
enum Transport {
    /// `reqwest` (TLS, proxies, HTTP/2).
    Reqwest(reqwest::Client),
    /// hyper's HTTP/1.1 client connections, pooled, for plain `http://` (see [`http1`]).
    Hyper(Arc<http1::Http1>),
}

fn path_of(url: &Url) -> String {
    match url.query() {
        Some(q) => format!("{}?{q}", url.path()),
        None => url.path().to_owned(),
    }
}

fn proxy_in_env() -> bool {
    ["HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"]
        .iter()
        .any(|v| std::env::var(v).is_ok_and(|x| !x.trim().is_empty()))
}

/// A response of either transport, with the limits its body is read under: every wait for a
/// piece of the body is bounded by the idle timeout, and a whole body by `max_body_bytes`.
pub(crate) struct Resp {
    body: RespBody,
    options: HttpOptions,
}

enum RespBody {
    Reqwest(reqwest::Response),
    Hyper(http1::Response),
}

fn hyper_body_error(e: std::io::Error) -> ChatError {
    let kind = match e.kind() {
        std::io::ErrorKind::TimedOut => ChatErrorKind::Timeout,
        std::io::ErrorKind::InvalidData => ChatErrorKind::Decode,
        _ => ChatErrorKind::StreamInterrupted,
    };
    ChatError::new(kind, format!("reading the response failed: {e}")).with_source(e)
}

impl Resp {
    pub(crate) fn reqwest(r: reqwest::Response, options: HttpOptions) -> Self {
        Resp {
            body: RespBody::Reqwest(r),
            options,
        }
    }

    pub(crate) fn hyper(r: http1::Response, options: HttpOptions) -> Self {
        Resp {
            body: RespBody::Hyper(r),
            options,
        }
    }

    fn status(&self) -> u16 {
        match &self.body {
            RespBody::Reqwest(r) => r.status().as_u16(),
            RespBody::Hyper(r) => r.status(),
        }
    }

    fn retry_after(&self) -> Option<Duration> {
        match &self.body {
            RespBody::Reqwest(r) => retry::retry_after(r.headers()),
            RespBody::Hyper(r) => r.retry_after(),
        }
    }

    /// The `Content-Length` the server announced, if any (only ever compared, never used to
    /// allocate).
    fn content_length(&self) -> Option<u64> {
        match &self.body {
            RespBody::Reqwest(r) => r.content_length(),
            RespBody::Hyper(r) => r.content_length(),
        }
    }

    /// The whole body (without copying when it arrives in one piece). Fails with a
    /// [`ChatErrorKind::Decode`] error when it is (or announces to be) larger than
    /// `max_body_bytes`.
    pub(crate) async fn bytes(mut self) -> Result<Bytes, ChatError> {
        let max = self.options.max_body_bytes;
        let too_large = || http_options::too_large("the response body", max, "max_body_bytes");
        if self.content_length().is_some_and(|n| n > max as u64) {
            return Err(too_large());
        }
        let Some(first) = self.chunk().await? else {
            return Ok(Bytes::new());
        };
        if first.len() > max {
            return Err(too_large());
        }
        let Some(second) = self.chunk().await? else {
            return Ok(first);
        };
        let mut out = bytes::BytesMut::with_capacity(first.len() + second.len());
        out.extend_from_slice(&first);
        let mut next = Some(second);
        while let Some(c) = next {
            if out.len() + c.len() > max {
                return Err(too_large());
            }
            out.extend_from_slice(&c);
            next = self.chunk().await?;
        }
        Ok(out.freeze())
    }

    /// At most `limit` bytes of the body, read for at most the idle timeout in all; what was
    /// read when the limit, the time, the body or the connection ends. For error answers, whose
    /// body only feeds a message.
    pub(crate) async fn prefix(mut self, limit: usize) -> Bytes {
        let mut out = bytes::BytesMut::new();
        let idle = self.options.idle_timeout;
        let read = async {
            while out.len() < limit {
                match self.chunk().await {
                    Ok(Some(c)) => {
                        let take = c.len().min(limit - out.len());
                        out.extend_from_slice(&c[..take]);
                    }
                    _ => break,
                }
            }
        };
        let _ = tokio::time::timeout(idle, read).await;
        out.freeze()
    }

    /// The next piece of the body, `None` at its end; each wait is bounded by the idle timeout.
    async fn chunk(&mut self) -> Result<Option<Bytes>, ChatError> {
        let idle = self.options.idle_timeout;
        let next = async {
            match &mut self.body {
                RespBody::Reqwest(r) => r.chunk().await.map_err(|e| transport_error(e, true)),
                RespBody::Hyper(r) => r.chunk().await.map_err(hyper_body_error),
            }
        };
        match tokio::time::timeout(idle, next).await {
            Ok(r) => r,
            Err(_) => Err(ChatError::new(
                ChatErrorKind::Timeout,
                format!(
                    "the server sent nothing for {idle:?} (the idle timeout) in the middle of its answer"
                ),
            )),
        }
    }

    /// After a stream's end event: reads what is left of the body for at most
    /// [`DRAIN_GRACE`](http_options::DRAIN_GRACE) (so a connection whose body ends is reused),
    /// then gives up on it instead of waiting for the server to close it.
    async fn drain(&mut self) {
        let grace = http_options::DRAIN_GRACE.min(self.options.idle_timeout);
        let mut left = ERROR_BODY_BYTES;
        let read = async {
            while let Ok(Some(c)) = self.chunk().await {
                left = left.saturating_sub(c.len());
                if left == 0 {
                    break;
                }
            }
        };
        let _ = tokio::time::timeout(grace, read).await;
    }
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

/// Turns the events of one streamed call into updates.
pub(crate) trait StreamDecoder: Send + 'static {
    /// One SSE event.
    fn on_event(
        &mut self,
        event: &[u8],
        data: &[u8],
        out: &mut VecDeque<ChatResponseUpdate>,
    ) -> Result<(), ChatError>;
    /// Whether the terminal event was seen (and `Finished` queued).
    fn is_done(&self) -> bool;
    /// The body ended; `pending` is an unterminated last event, if any.
    fn on_eof(
        &mut self,
        pending: Option<Vec<u8>>,
        out: &mut VecDeque<ChatResponseUpdate>,
    ) -> Result<(), ChatError>;
}

/// Maps a transport error; `reading` is true once the response headers arrived.
fn transport_error(e: reqwest::Error, reading: bool) -> ChatError {
    use std::error::Error as _;
    let mut msg = e.to_string();
    let mut src = e.source();
    while let Some(s) = src {
        msg.push_str(": ");
        msg.push_str(&s.to_string());
        src = s.source();
    }
    let kind = if e.is_timeout() {
        ChatErrorKind::Timeout
    } else if e.is_builder() {
        ChatErrorKind::Config
    } else if reading || e.is_body() || e.is_decode() {
        ChatErrorKind::StreamInterrupted
    } else if e.is_connect() || e.is_request() {
        ChatErrorKind::Connect
    } else {
        ChatErrorKind::Other
    };
    ChatError::new(kind, msg).with_source(e)
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
        let (extra_body, extra_headers) = crate::common::client_extras(client_kwargs)?;
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
                wire::status_error,
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

/// The state of a streamed call between two items.
struct Driver<D> {
    resp: Resp,
    sse: SseParser,
    decoder: D,
    queue: VecDeque<ChatResponseUpdate>,
    error: Option<ChatError>,
    phase: Phase,
}

#[derive(PartialEq, Eq)]
enum Phase {
    Reading,
    /// The terminal event was seen: read what is left of the body, briefly, so the connection
    /// may be reused (never wait for the server to close it).
    Draining,
    Done,
}

enum StreamState<'a, D> {
    Opening(BoxFuture<'a, Result<Resp, ChatError>>, D),
    Running(Box<Driver<D>>),
    Finished,
}

/// The stream of one call: opens it, feeds the body to the SSE parser and `decoder`, and
/// yields the updates. It ends right after the decoder's end event (see [`Resp::drain`]);
/// every error is passed through `redactor`.
pub(crate) fn drive<'a, D: StreamDecoder>(
    open: BoxFuture<'a, Result<Resp, ChatError>>,
    decoder: D,
    redactor: Arc<Redactor>,
) -> ChatStream<'a> {
    Box::pin(futures::stream::unfold(
        StreamState::Opening(open, decoder),
        move |state| {
            let redactor = Arc::clone(&redactor);
            async move {
                match next_item(state).await {
                    Some((Err(e), s)) => Some((Err(redactor.error(e)), s)),
                    other => other,
                }
            }
        },
    ))
}

async fn next_item<D: StreamDecoder>(
    state: StreamState<'_, D>,
) -> Option<(Result<ChatResponseUpdate, ChatError>, StreamState<'_, D>)> {
    let mut d = match state {
        StreamState::Finished => return None,
        StreamState::Opening(open, decoder) => match open.await {
            Ok(resp) => Box::new(Driver {
                sse: SseParser::new(resp.options.max_sse_event_bytes),
                resp,
                decoder,
                queue: VecDeque::new(),
                error: None,
                phase: Phase::Reading,
            }),
            Err(e) => return Some((Err(e), StreamState::Finished)),
        },
        StreamState::Running(d) => d,
    };
    loop {
        if let Some(u) = d.queue.pop_front() {
            return Some((Ok(u), StreamState::Running(d)));
        }
        if let Some(e) = d.error.take() {
            return Some((Err(e), StreamState::Finished));
        }
        match d.phase {
            Phase::Done => return None,
            Phase::Draining => {
                d.resp.drain().await;
                return None;
            }
            Phase::Reading => match d.resp.chunk().await {
                Ok(Some(bytes)) => {
                    let Driver {
                        sse,
                        decoder,
                        queue,
                        ..
                    } = &mut *d;
                    let fed = sse.feed(&bytes, |ev, data| {
                        decoder.on_event(ev, data, queue)?;
                        Ok(if decoder.is_done() {
                            Flow::Stop
                        } else {
                            Flow::Continue
                        })
                    });
                    if let Err(e) = fed {
                        d.error = Some(e);
                        d.phase = Phase::Done;
                    } else if d.decoder.is_done() {
                        d.phase = Phase::Draining;
                    }
                }
                Ok(None) => {
                    let pending = d.sse.pending_data();
                    if let Err(e) = d.decoder.on_eof(pending, &mut d.queue) {
                        d.error = Some(e);
                    }
                    d.phase = Phase::Done;
                }
                Err(e) => {
                    d.error = Some(e);
                    d.phase = Phase::Done;
                }
            },
        }
    }
}

impl ChatClient for OpenAIClient {
    fn get_response<'a>(
        &'a self,
        request: ChatRequest<'a>,
    ) -> BoxFuture<'a, Result<ChatResponse, ChatError>> {
        let ChatRequest {
            messages,
            options,
            client_kwargs,
            ..
        } = request;
        Box::pin(async move {
            self.inner
                .complete(messages, options, client_kwargs)
                .await
                .map_err(|e| self.inner.endpoint.redact(e))
        })
    }

    fn get_streaming_response<'a>(&'a self, request: ChatRequest<'a>) -> ChatStream<'a> {
        let ChatRequest {
            messages,
            options,
            client_kwargs,
            ..
        } = request;
        let open = Box::pin(self.inner.open_stream(messages, options, client_kwargs));
        let redactor = Arc::clone(&self.inner.endpoint.redactor);
        match self.inner.api {
            Api::ChatCompletions => drive(open, chat::ChatStreamDecoder::default(), redactor),
            Api::Responses => drive(open, responses::ResponsesStreamDecoder::default(), redactor),
        }
    }

    fn describe(&self) -> String {
        match &self.inner.model {
            Some(m) => format!("{}:{m}", self.inner.provider),
            None => self.inner.provider.clone(),
        }
    }
}
