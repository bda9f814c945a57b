//! Timeouts and size caps of the HTTP transport every provider client uses.
//!
//! # Timeouts
//!
//! Three separate waits are bounded; each has a default, a builder method, an environment
//! variable (whole or fractional seconds, read by the builders' `from_env`, by
//! [`client_for_model`](crate::client_for_model) and by [`HttpOptions::from_env`]) and a
//! `cairn` command-line flag:
//!
//! | wait | default | builder | environment | `cairn` flag |
//! |---|---|---|---|---|
//! | connecting (TCP, and TLS with `reqwest`) | 10 s | `connect_timeout` | `CAIRN_CONNECT_TIMEOUT` | `--connect-timeout` |
//! | first byte: from sending the request to the response head | 300 s | `first_byte_timeout` | `CAIRN_TIMEOUT` | `--timeout` |
//! | idle: the gap between two pieces of a body (streamed or not) | 120 s | `idle_timeout` | `CAIRN_IDLE_TIMEOUT` | `--idle-timeout` |
//!
//! Why these defaults: a server that does not accept a connection within 10 s is down or
//! unreachable. The first-byte wait is long because a non-streaming answer arrives whole (its
//! head comes when the model has finished writing) and a local server on a CPU may prefill a
//! long prompt for minutes before it answers at all. Between two pieces of a stream a working
//! server is rarely silent for long (tokens, keep-alive comments, `ping` events); 120 s also
//! covers a reasoning model thinking without streaming its thoughts, mostly. Raise the idle
//! timeout for models that think silently for longer.
//!
//! Retries ([`RetryPolicy`](crate::RetryPolicy)) repeat connection failures (connect timeouts
//! included) and retryable statuses. A first-byte timeout is not retried unless
//! [`RetryPolicy::retry_first_byte_timeouts`](crate::RetryPolicy::retry_first_byte_timeouts) is
//! set: the server has the request and may still be working on it, and repeating the wait
//! would multiply the time the caller asked to wait. Nothing is retried after the first byte
//! of a successful answer. So with the defaults a server that accepts and never answers is
//! given up on after 300 s (it was 600 s times 3 attempts before).
//!
//! A stream ends at its protocol's end (`data: [DONE]` or `response.completed` for OpenAI,
//! `message_stop` for Anthropic, the end of the body for Gemini): the client then waits at most
//! [`DRAIN_GRACE`] for the rest of the body (so the connection can be reused) and never for
//! the server to close the connection. A non-streaming body ends at its `Content-Length` (or
//! chunked end), not at the connection's close.
//!
//! # Size caps
//!
//! Every byte the client buffers is capped, so a hostile or broken server cannot make it
//! allocate without bound (a `Content-Length: 1000000000000` used to abort the process):
//!
//! - [`max_body_bytes`](HttpOptions::max_body_bytes) (default 32 MiB): a non-streaming
//!   response body. A larger `Content-Length` fails before anything is read; a body without one
//!   fails when it grows past the cap. Nothing is allocated from `Content-Length`.
//! - [`max_sse_event_bytes`](HttpOptions::max_sse_event_bytes) (default 8 MiB): one
//!   server-sent-events line, and the data of one event.
//! - The body of an error answer (a non-2xx status) is read only up to [`ERROR_BODY_BYTES`]
//!   and for at most the idle timeout; the message is built from that prefix.
//!
//! Going over a cap is a [`ChatErrorKind::Decode`] error
//! whose message names the cap and how to raise it; it is not retried.

use std::time::Duration;

use cairn_core::{ChatError, ChatErrorKind};

/// The default connect timeout.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The default first-byte timeout.
pub const DEFAULT_FIRST_BYTE_TIMEOUT: Duration = Duration::from_secs(300);
/// The default idle timeout.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(120);
/// The default cap of a non-streaming response body (32 MiB).
pub const DEFAULT_MAX_BODY_BYTES: usize = 32 << 20;
/// The default cap of one SSE line or event (8 MiB).
pub const DEFAULT_MAX_SSE_EVENT_BYTES: usize = 8 << 20;
/// How much of an error answer's body is read (64 KiB).
pub const ERROR_BODY_BYTES: usize = 64 << 10;
/// How long the rest of a stream's body is read after its end event, so the connection can be
/// reused; after that the connection is dropped.
pub const DRAIN_GRACE: Duration = Duration::from_millis(250);

/// The environment variable of the connect timeout (seconds).
pub const ENV_CONNECT_TIMEOUT: &str = "CAIRN_CONNECT_TIMEOUT";
/// The environment variable of the first-byte timeout (seconds).
pub const ENV_TIMEOUT: &str = "CAIRN_TIMEOUT";
/// The environment variable of the idle timeout (seconds).
pub const ENV_IDLE_TIMEOUT: &str = "CAIRN_IDLE_TIMEOUT";

/// The longest timeout accepted from text (a year); longer values are refused.
const MAX_TIMEOUT_SECS: f64 = 365.0 * 24.0 * 3600.0;

/// Timeouts and size caps of a provider client's HTTP transport (see the
/// [module docs](self) for what each bounds and why the defaults are what they are).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpOptions {
    /// The longest wait for a connection (TCP, and TLS with `reqwest`).
    pub connect_timeout: Duration,
    /// The longest wait from sending a request to the response head.
    pub first_byte_timeout: Duration,
    /// The longest gap between two pieces of a response body.
    pub idle_timeout: Duration,
    /// The largest non-streaming response body accepted.
    pub max_body_bytes: usize,
    /// The largest server-sent-events line, and event data, accepted.
    pub max_sse_event_bytes: usize,
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            first_byte_timeout: DEFAULT_FIRST_BYTE_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            max_sse_event_bytes: DEFAULT_MAX_SSE_EVENT_BYTES,
        }
    }
}

impl HttpOptions {
    /// The defaults overridden by `CAIRN_CONNECT_TIMEOUT`, `CAIRN_TIMEOUT` and
    /// `CAIRN_IDLE_TIMEOUT` (seconds) where set. Fails with
    /// [`ChatErrorKind::Config`] on a value that is not a positive number of seconds.
    pub fn from_env() -> Result<Self, ChatError> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// Like [`from_env`](Self::from_env), reading the variables through `lookup`.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ChatError> {
        let mut o = HttpOptions::default();
        o.apply_lookup(&lookup)?;
        Ok(o)
    }

    /// Overrides the timeouts whose variables `lookup` finds.
    pub(crate) fn apply_lookup(
        &mut self,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<(), ChatError> {
        for (name, slot) in [
            (ENV_CONNECT_TIMEOUT, &mut self.connect_timeout),
            (ENV_TIMEOUT, &mut self.first_byte_timeout),
            (ENV_IDLE_TIMEOUT, &mut self.idle_timeout),
        ] {
            if let Some(v) = lookup(name).filter(|v| !v.trim().is_empty()) {
                *slot = parse_seconds(&v).map_err(|why| {
                    ChatError::new(ChatErrorKind::Config, format!("{name}={v:?}: {why}"))
                })?;
            }
        }
        Ok(())
    }
}

/// Parses a timeout given in seconds (`30`, `0.5`): a positive, finite number up to a year.
///
/// The error says what is wrong, for messages such as `--timeout: …`.
pub fn parse_seconds(text: &str) -> Result<Duration, String> {
    let secs: f64 = text
        .trim()
        .parse()
        .map_err(|_| "not a number of seconds".to_owned())?;
    if !secs.is_finite() || secs <= 0.0 {
        return Err("the timeout must be a positive number of seconds".to_owned());
    }
    if secs > MAX_TIMEOUT_SECS {
        return Err("the timeout must be at most a year".to_owned());
    }
    Duration::try_from_secs_f64(secs).map_err(|e| e.to_string())
}

/// The error for a body or SSE line over its cap.
pub(crate) fn too_large(what: &str, limit: usize, option: &str) -> ChatError {
    ChatError::new(
        ChatErrorKind::Decode,
        format!(
            "{what} exceeds the limit of {} (raise `{option}` in the client's HttpOptions)",
            human_bytes(limit)
        ),
    )
}

fn human_bytes(n: usize) -> String {
    if n >= 1 << 20 && n.is_multiple_of(1 << 20) {
        format!("{} MiB", n >> 20)
    } else if n >= 1 << 10 && n.is_multiple_of(1 << 10) {
        format!("{} KiB", n >> 10)
    } else {
        format!("{n} bytes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_parse_and_env_overrides() {
        assert_eq!(parse_seconds("30"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_seconds(" 0.5 "), Ok(Duration::from_millis(500)));
        for bad in ["0", "-1", "abc", "inf", "NaN", "1e30"] {
            assert!(parse_seconds(bad).is_err(), "{bad}");
        }
        let o = HttpOptions::from_lookup(|k| match k {
            ENV_CONNECT_TIMEOUT => Some("2".into()),
            ENV_IDLE_TIMEOUT => Some("7.5".into()),
            _ => None,
        })
        .unwrap();
        assert_eq!(o.connect_timeout, Duration::from_secs(2));
        assert_eq!(o.first_byte_timeout, DEFAULT_FIRST_BYTE_TIMEOUT);
        assert_eq!(o.idle_timeout, Duration::from_millis(7500));
        let e =
            HttpOptions::from_lookup(|k| (k == ENV_TIMEOUT).then(|| "soon".into())).unwrap_err();
        assert_eq!(e.kind(), ChatErrorKind::Config);
        assert!(e.message().contains("CAIRN_TIMEOUT"), "{e}");
    }

    #[test]
    fn sizes_read_well() {
        assert_eq!(human_bytes(32 << 20), "32 MiB");
        assert_eq!(human_bytes(64 << 10), "64 KiB");
        assert_eq!(human_bytes(1000), "1000 bytes");
    }
}
