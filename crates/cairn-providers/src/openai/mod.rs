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
//! # Timeouts and retries
//!
//! The request timeout ([`OpenAIClientBuilder::timeout`], default 600 s) bounds every wait for
//! the server (for the response head, and between two pieces of a body); with `reqwest` it also
//! bounds a whole non-streaming call. Connection failures, timeouts, HTTP 408/429/5xx are
//! retried ([`RetryPolicy`]) before the first byte of a successful response, never after.
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
    BoxFuture, ChatClient, ChatError, ChatErrorKind, ChatOptions, ChatResponse, ChatResponseUpdate,
    ChatStream, Kwargs, Message,
};
use reqwest::Url;
use reqwest::header::{AUTHORIZATION, HeaderMap};

pub use retry::RetryPolicy;

use crate::common::{DEFAULT_CONNECT_TIMEOUT, DEFAULT_TIMEOUT, config_error, env_nonempty};
use endpoint::{Endpoint, EndpointConfig, Target};
use sse::SseParser;
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
    api_key: Option<ApiKey>,
    base_url: String,
    model: Option<String>,
    api: Api,
    timeout: Duration,
    connect_timeout: Duration,
    retry: RetryPolicy,
    headers: Vec<(String, String)>,
    http: Option<reqwest::Client>,
    provider: String,
    legacy_max_tokens: bool,
    stream_usage: bool,
    hyper_http1: bool,
}

impl Default for OpenAIClientBuilder {
    fn default() -> Self {
        OpenAIClientBuilder {
            api_key: None,
            base_url: DEFAULT_BASE_URL.to_owned(),
            model: None,
            api: Api::ChatCompletions,
            timeout: DEFAULT_TIMEOUT,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            retry: RetryPolicy::default(),
            headers: Vec::new(),
            http: None,
            provider: "openai".to_owned(),
            legacy_max_tokens: false,
            stream_usage: true,
            hyper_http1: true,
        }
    }
}

fn http_client(timeout: Duration, connect_timeout: Duration) -> Result<reqwest::Client, ChatError> {
    // rustls is built without a bundled crypto provider; install ring as the process default
    // unless another one already is.
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
    reqwest::Client::builder()
        .connect_timeout(connect_timeout)
        .read_timeout(timeout)
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
    /// A builder with the defaults: `https://api.openai.com/v1`, chat completions, a 600 s
    /// timeout, 2 retries, no key.
    pub fn new() -> Self {
        Self::default()
    }

    /// A builder filled from the environment: `OPENAI_API_KEY`, `OPENAI_BASE_URL` (default
    /// `https://api.openai.com/v1`), `OPENAI_MODEL`, and `OPENAI_ORG_ID` / `OPENAI_PROJECT_ID`
    /// (sent as `OpenAI-Organization` / `OpenAI-Project`) when set.
    pub fn from_env() -> Self {
        let mut b = OpenAIClientBuilder {
            api_key: env_nonempty("OPENAI_API_KEY").map(ApiKey),
            model: env_nonempty("OPENAI_MODEL"),
            ..Self::default()
        };
        if let Some(u) = env_nonempty("OPENAI_BASE_URL") {
            b.base_url = u;
        }
        if let Some(org) = env_nonempty("OPENAI_ORG_ID") {
            b.headers.push(("OpenAI-Organization".into(), org));
        }
        if let Some(p) = env_nonempty("OPENAI_PROJECT_ID") {
            b.headers.push(("OpenAI-Project".into(), p));
        }
        b
    }

    /// The API key (sent as `Authorization: Bearer …`). Without one no such header is sent,
    /// which suits local servers.
    pub fn api_key(mut self, key: impl Into<ApiKey>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// The API root, e.g. `http://localhost:11434/v1`; `/chat/completions` and `/responses` are
    /// appended.
    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = url.into();
        self
    }

    /// The default model (`ChatOptions::model` overrides it per call).
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.model = Some(model.into());
        self
    }

    /// Which API to speak.
    pub fn api(mut self, api: Api) -> Self {
        self.api = api;
        self
    }

    /// The request timeout: the longest silence (no byte received) tolerated from the server;
    /// over `reqwest` also the total time of a non-streaming call. Default 600 s.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The connect timeout. Default 10 s.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How many times a failed request is retried. Default 2.
    pub fn max_retries(mut self, n: u32) -> Self {
        self.retry.max_retries = n;
        self
    }

    /// The whole retry policy.
    pub fn retry_policy(mut self, policy: RetryPolicy) -> Self {
        self.retry = policy;
        self
    }

    /// A header sent with every request.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Uses this `reqwest::Client` (to share a connection pool). Its own timeouts then apply to
    /// streams; the builder's timeout still bounds non-streaming calls.
    pub fn http_client(mut self, client: reqwest::Client) -> Self {
        self.http = Some(client);
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

    /// Whether plain `http://` servers are reached through the lean transport (default true):
    /// hyper's HTTP/1.1 client connections with a small keep-alive pool, skipping reqwest's
    /// layers, which saves CPU per call against local servers. It is not used for `https://`,
    /// when an HTTP proxy is configured in the environment (`HTTP_PROXY`, `ALL_PROXY`), or with
    /// [`http_client`](Self::http_client); `reqwest` is used then.
    pub fn hyper_http1(mut self, yes: bool) -> Self {
        self.hyper_http1 = yes;
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
    /// Fails with [`ChatErrorKind::Config`] on an invalid base URL or header.
    pub fn build(self) -> Result<OpenAIClient, ChatError> {
        let auth = match &self.api_key {
            Some(k) if !k.0.is_empty() => Some((AUTHORIZATION, format!("Bearer {}", k.0))),
            _ => None,
        };
        let endpoint = Endpoint::new(EndpointConfig {
            base_url: &self.base_url,
            auth,
            headers: &self.headers,
            http: self.http,
            hyper_http1: self.hyper_http1,
            timeout: self.timeout,
            connect_timeout: self.connect_timeout,
            retry: self.retry,
        })?;
        let chat = endpoint.target("chat/completions")?;
        let responses = endpoint.target("responses")?;
        Ok(OpenAIClient {
            inner: Arc::new(Inner {
                endpoint,
                api_key: self.api_key,
                chat,
                responses,
                model: self.model,
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

/// A response of either transport.
pub(crate) enum Resp {
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
    fn status(&self) -> u16 {
        match self {
            Resp::Reqwest(r) => r.status().as_u16(),
            Resp::Hyper(r) => r.status(),
        }
    }

    fn retry_after(&self) -> Option<Duration> {
        match self {
            Resp::Reqwest(r) => retry::retry_after(r.headers()),
            Resp::Hyper(r) => r.retry_after(),
        }
    }

    pub(crate) async fn bytes(self) -> Result<Bytes, ChatError> {
        match self {
            Resp::Reqwest(r) => r.bytes().await.map_err(|e| transport_error(e, true)),
            Resp::Hyper(r) => r.bytes().await.map_err(hyper_body_error),
        }
    }

    async fn chunk(&mut self) -> Result<Option<Bytes>, ChatError> {
        match self {
            Resp::Reqwest(r) => r.chunk().await.map_err(|e| transport_error(e, true)),
            Resp::Hyper(r) => r.chunk().await.map_err(hyper_body_error),
        }
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
            .field("base_url", &i.endpoint.base_url)
            .field("model", &i.model)
            .field("api", &i.api)
            .field("api_key", &i.api_key)
            .field("timeout", &i.endpoint.timeout)
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
        if b.api_key.is_none() && b.base_url.trim_end_matches('/') == DEFAULT_BASE_URL {
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

    /// The API root.
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
    /// The terminal event was seen: read the rest of the body so the connection is reused.
    Draining,
    Done,
}

enum StreamState<'a, D> {
    Opening(BoxFuture<'a, Result<Resp, ChatError>>, D),
    Running(Box<Driver<D>>),
    Finished,
}

pub(crate) fn drive<'a, D: StreamDecoder>(
    open: BoxFuture<'a, Result<Resp, ChatError>>,
    decoder: D,
) -> ChatStream<'a> {
    Box::pin(futures::stream::unfold(
        StreamState::Opening(open, decoder),
        |state| async move {
            let mut d = match state {
                StreamState::Finished => return None,
                StreamState::Opening(open, decoder) => match open.await {
                    Ok(resp) => Box::new(Driver {
                        resp,
                        sse: SseParser::new(),
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
                        while let Ok(Some(_)) = d.resp.chunk().await {}
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
                            if let Err(e) =
                                sse.feed(&bytes, |ev, data| decoder.on_event(ev, data, queue))
                            {
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
        },
    ))
}

impl ChatClient for OpenAIClient {
    fn get_response<'a>(
        &'a self,
        messages: &'a [Message],
        options: &'a ChatOptions,
        _function_invocation_kwargs: &'a Kwargs,
        client_kwargs: &'a Kwargs,
    ) -> BoxFuture<'a, Result<ChatResponse, ChatError>> {
        Box::pin(self.inner.complete(messages, options, client_kwargs))
    }

    fn get_streaming_response<'a>(
        &'a self,
        messages: &'a [Message],
        options: &'a ChatOptions,
        _function_invocation_kwargs: &'a Kwargs,
        client_kwargs: &'a Kwargs,
    ) -> ChatStream<'a> {
        let open = Box::pin(self.inner.open_stream(messages, options, client_kwargs));
        match self.inner.api {
            Api::ChatCompletions => drive(open, chat::ChatStreamDecoder::default()),
            Api::Responses => drive(open, responses::ResponsesStreamDecoder::default()),
        }
    }

    fn describe(&self) -> String {
        match &self.inner.model {
            Some(m) => format!("{}:{m}", self.inner.provider),
            None => self.inner.provider.clone(),
        }
    }
}
