//! The HTTP transport every provider shares: each provider folder only maps its wire format
//! (request, response, stream events) and hands the transport a body and a decoder.
//!
//! - `endpoint`: the base URL, authentication and fixed headers of a server, and sending one
//!   request with retries (`retry`: `Retry-After`, backoff) before the first byte of a
//!   successful answer;
//! - `error`: status → error mapping (and errors inside streams and bodies);
//! - `sse`: server-sent-events parsing; `stream`: the driver turning a response body into a
//!   stream of updates through a provider's `StreamDecoder`;
//! - `settings`: the builder settings and methods every provider's builder shares, and the
//!   client kwargs every client understands; [`ApiKey`];
//! - [`http_options`]: timeouts and caps; [`redact`]: keeping keys and URL credentials out of
//!   errors.
//!
//! # HTTP/1.1 and reqwest
//!
//! Plain `http://` servers (local models, benchmarks' fake servers) are reached through a lean
//! transport: hyper's low-level HTTP/1.1 client connections (`hyper::client::conn::http1`) with
//! a small keep-alive pool, without reqwest's layers (connector stack, proxy matching, header
//! and URL conversions), which spends less CPU per call. hyper does all of the HTTP/1.1
//! protocol. `https://` servers, environments with an HTTP proxy, and clients given their own
//! [`reqwest::Client`] use `reqwest` (rustls with the `ring` provider).
//! [`OpenAIClientBuilder::hyper_http1`](crate::OpenAIClientBuilder::hyper_http1) turns the lean transport off.
//!
//! The lean path earns its ~250 lines (`http1.rs`): in the A/B of BENCHMARKS.md (§1, "Transport
//! A/B") it spends 35% fewer instructions per model call than reqwest alone for a plain agent
//! (26% for a deep agent), 20 M fewer at start-up, and 1.5 MB less memory.
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

pub(crate) mod endpoint;
pub(crate) mod error;
mod http1;
pub mod http_options;
pub mod redact;
pub(crate) mod retry;
pub(crate) mod settings;
pub(crate) mod sse;
pub(crate) mod stream;

use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use cairn_core::{ChatError, ChatErrorKind, ChatResponseUpdate};
use reqwest::Url;

pub(crate) use endpoint::Payload;
pub use retry::RetryPolicy;
pub(crate) use settings::{
    ClientCore, ProviderEnv, Settings, client_methods, config_error, process_env, settings_methods,
};
pub(crate) use stream::drive;

use http_options::{ERROR_BODY_BYTES, HttpOptions};

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

/// How requests reach the server.
#[derive(Clone)]
enum Transport {
    /// `reqwest` (TLS, proxies, HTTP/2).
    Reqwest(reqwest::Client),
    /// hyper's HTTP/1.1 client connections, pooled, for plain `http://` (see [`http1`](self::http1)).
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

/// The updates a [`StreamDecoder`] queues.
pub(crate) type Updates = VecDeque<ChatResponseUpdate>;

/// Turns the events of one streamed call into updates.
pub(crate) trait StreamDecoder: Send + 'static {
    /// The data of one SSE event (no provider needs the event name: the type is in the data).
    fn on_event(&mut self, data: &[u8], out: &mut Updates) -> Result<(), ChatError>;
    /// Whether the terminal event was seen (and `Finished` queued).
    fn is_done(&self) -> bool;
    /// The body ended; `pending` is an unterminated last event, if any.
    fn on_eof(&mut self, pending: Option<Vec<u8>>, out: &mut Updates) -> Result<(), ChatError>;
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
