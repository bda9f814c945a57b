//! Status → error mapping shared by every provider: the error of a non-success HTTP answer
//! (message and code from OpenAI's error shape or a compatible server's, `Retry-After`, whether a
//! retry may help), of an error event inside a stream, and of a body that does not decode.

use std::time::Duration;

use cairn_core::{ChatError, ChatErrorKind};
use serde_json::Value;

/// What a non-success HTTP answer or an in-stream error event means.
pub(crate) struct ApiError {
    pub(crate) error: ChatError,
    /// Whether a retry may help (false for e.g. `insufficient_quota` despite HTTP 429).
    pub(crate) retry: bool,
}

fn value_str(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// The message and code of an error object in OpenAI's shape or a compatible server's.
pub(crate) fn error_parts(v: &Value) -> (Option<String>, Option<String>) {
    let inner = v.get("error").unwrap_or(v);
    match inner {
        Value::String(s) => (Some(s.clone()), value_str(v.get("code"))),
        Value::Object(_) => {
            let message = value_str(inner.get("message"))
                .or_else(|| value_str(inner.get("detail")))
                .or_else(|| value_str(v.get("message")))
                .or_else(|| value_str(v.get("detail")));
            let code = value_str(inner.get("code")).or_else(|| value_str(inner.get("type")));
            (message, code)
        }
        _ => (None, None),
    }
}

/// The error message with the server's code appended when the message does not contain it.
pub(crate) fn with_code(message: Option<String>, code: Option<&str>, fallback: &str) -> String {
    let mut m = message.unwrap_or_else(|| fallback.to_owned());
    if let Some(c) = code
        && !m.contains(c)
    {
        m.push_str(" [");
        m.push_str(c);
        m.push(']');
    }
    m
}

/// Builds the error for a non-success HTTP answer.
pub(crate) fn status_error(status: u16, body: &[u8], retry_after: Option<Duration>) -> ApiError {
    let parsed: Option<Value> = serde_json::from_slice(body).ok();
    let (message, code) = match &parsed {
        Some(v) => error_parts(v),
        None => (None, None),
    };
    let message = match message {
        Some(m) => Some(m),
        None if !body.is_empty() => Some(truncate(&String::from_utf8_lossy(body), 2000)),
        None => None,
    };
    let fallback = reqwest::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("error");
    let text = with_code(message, code.as_deref(), fallback);
    let error = ChatError::from_status(status, text).with_retry_after(retry_after);
    let no_retry_code = matches!(code.as_deref(), Some("insufficient_quota"));
    let retry =
        !no_retry_code && error.kind() != ChatErrorKind::ContextOverflow && error.is_retryable();
    ApiError { error, retry }
}

/// An error reported inside a successful stream or body (no HTTP status).
pub(crate) fn event_error(message: Option<String>, code: Option<String>) -> ChatError {
    let text = with_code(message, code.as_deref(), "the server reported an error");
    let kind = if cairn_core::error::is_context_overflow_message(&text) {
        ChatErrorKind::ContextOverflow
    } else {
        match code.as_deref() {
            Some("rate_limit_exceeded" | "rate_limit_error") => ChatErrorKind::RateLimited,
            Some("server_error" | "server_is_overloaded" | "overloaded_error") => {
                ChatErrorKind::StreamInterrupted
            }
            _ => ChatErrorKind::Other,
        }
    };
    ChatError::new(kind, text)
}

/// A decode error quoting (a prefix of) the offending text.
pub(crate) fn decode_error(what: &str, data: &[u8], e: serde_json::Error) -> ChatError {
    let snippet = truncate(&String::from_utf8_lossy(data), 200);
    ChatError::new(ChatErrorKind::Decode, format!("{what}: {e}: {snippet}")).with_source(e)
}

pub(crate) fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_errors_classified() {
        let body = br#"{"error":{"message":"Too long.","type":"invalid_request_error","code":"context_length_exceeded"}}"#;
        let e = status_error(400, body, None);
        assert!(e.error.is_context_overflow());
        assert!(!e.retry);
        let e = status_error(
            429,
            br#"{"error":{"message":"quota","code":"insufficient_quota"}}"#,
            None,
        );
        assert!(!e.retry);
        let e = status_error(503, b"upstream down", None);
        assert!(e.retry);
        assert!(e.error.message().contains("upstream down"));
        let e = status_error(502, b"", None);
        assert!(e.error.message().contains("Bad Gateway"));
    }
}
