//! Error types.
//!
//! Three levels, kept apart so each layer says what happened in its own terms:
//! - [`ChatError`]: a model call failed (HTTP status, retryable or not, context overflow).
//! - [`ToolError`]: a tool failed; the agent loop turns it into an `Error: …` message for the
//!   model and goes on.
//! - [`Error`]: a run failed (a chat error that retries could not fix, middleware that failed,
//!   bad input from the caller).

use std::time::Duration;

/// A boxed error for sources.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What kind of failure a [`ChatError`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ChatErrorKind {
    /// The request could not be sent (connection refused, DNS, TLS).
    Connect,
    /// The request or the response took too long.
    Timeout,
    /// The server answered with an error status not covered by a more precise kind.
    Status,
    /// HTTP 429 or a provider's rate-limit error.
    RateLimited,
    /// HTTP 401/403.
    Auth,
    /// The prompt does not fit the model's context window.
    ContextOverflow,
    /// The response could not be decoded (malformed JSON, unexpected shape).
    Decode,
    /// A streamed response ended before it was complete.
    StreamInterrupted,
    /// The request was invalid before it was sent (bad configuration, unknown model string).
    Config,
    /// Anything else.
    Other,
}

/// A failed model call.
///
/// It says what happened ([`kind`](Self::kind)), the HTTP status when there was one, the server's
/// message, and whether a retry may succeed. It never holds an API key.
#[derive(Debug)]
pub struct ChatError {
    kind: ChatErrorKind,
    status: Option<u16>,
    message: String,
    retry_after: Option<Duration>,
    source: Option<BoxError>,
}

impl ChatError {
    /// A new error of `kind` with a human-readable message.
    pub fn new(kind: ChatErrorKind, message: impl Into<String>) -> Self {
        ChatError {
            kind,
            status: None,
            message: message.into(),
            retry_after: None,
            source: None,
        }
    }

    /// An error from an HTTP status and the server's message; the kind is derived from both
    /// (429 → rate limited, 401/403 → auth, context-overflow wording → context overflow).
    pub fn from_status(status: u16, message: impl Into<String>) -> Self {
        let message = message.into();
        let kind = if is_context_overflow_message(&message) {
            ChatErrorKind::ContextOverflow
        } else {
            match status {
                429 => ChatErrorKind::RateLimited,
                401 | 403 => ChatErrorKind::Auth,
                408 => ChatErrorKind::Timeout,
                _ => ChatErrorKind::Status,
            }
        };
        ChatError {
            kind,
            status: Some(status),
            message,
            retry_after: None,
            source: None,
        }
    }

    /// Attaches the server's `Retry-After` delay.
    pub fn with_retry_after(mut self, d: Option<Duration>) -> Self {
        self.retry_after = d;
        self
    }

    /// Attaches an underlying cause.
    pub fn with_source(mut self, source: impl Into<BoxError>) -> Self {
        self.source = Some(source.into());
        self
    }

    /// What kind of failure this is.
    pub fn kind(&self) -> ChatErrorKind {
        self.kind
    }

    /// The HTTP status, when the server answered.
    pub fn status(&self) -> Option<u16> {
        self.status
    }

    /// The server's (or cairn's) message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The delay the server asked for before a retry.
    pub fn retry_after(&self) -> Option<Duration> {
        self.retry_after
    }

    /// Whether the prompt was too long for the model.
    pub fn is_context_overflow(&self) -> bool {
        self.kind == ChatErrorKind::ContextOverflow
    }

    /// Whether sending the same request again may succeed: connection failures, timeouts, 429,
    /// 5xx, and streams cut off mid-way.
    pub fn is_retryable(&self) -> bool {
        match self.kind {
            ChatErrorKind::Connect
            | ChatErrorKind::Timeout
            | ChatErrorKind::RateLimited
            | ChatErrorKind::StreamInterrupted => true,
            ChatErrorKind::Status => matches!(self.status, Some(s) if s >= 500),
            _ => false,
        }
    }
}

impl std::fmt::Display for ChatError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = match self.kind {
            ChatErrorKind::Connect => "could not connect to the model server",
            ChatErrorKind::Timeout => "the model call timed out",
            ChatErrorKind::Status => "the model server returned an error",
            ChatErrorKind::RateLimited => "the model server is rate limiting requests",
            ChatErrorKind::Auth => "the model server rejected the credentials",
            ChatErrorKind::ContextOverflow => "the prompt exceeds the model's context window",
            ChatErrorKind::Decode => "the model server's response could not be decoded",
            ChatErrorKind::StreamInterrupted => "the response stream ended early",
            ChatErrorKind::Config => "the model client is misconfigured",
            ChatErrorKind::Other => "the model call failed",
        };
        write!(f, "{what}")?;
        if let Some(s) = self.status {
            write!(f, " (HTTP {s})")?;
        }
        if !self.message.is_empty() {
            write!(f, ": {}", self.message)?;
        }
        Ok(())
    }
}

impl std::error::Error for ChatError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// Whether an error message from a model server says the prompt is too long.
///
/// Covers OpenAI's `context_length_exceeded` and the wording of common compatible servers
/// (vLLM, llama.cpp, Ollama, LM Studio, Anthropic, Gemini).
pub fn is_context_overflow_message(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    const NEEDLES: &[&str] = &[
        "context_length_exceeded",
        "maximum context length",
        "context length exceeded",
        "context window",
        "exceeds the context",
        "exceed context",
        "prompt is too long",
        "too many tokens",
        "input is too long",
        "longer than the model's context length",
        "exceeds the available context size",
        "request exceeds the maximum",
        "input token count",
        "reduce the length of the messages",
    ];
    NEEDLES.iter().any(|n| m.contains(n))
}

/// A failed tool call.
///
/// The agent loop never lets it escape: it becomes an `Error: …` result the model reads.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    /// The arguments did not match the tool's parameters.
    #[error("invalid arguments: {0}")]
    InvalidArguments(String),
    /// The tool ran and failed.
    #[error("{0}")]
    Failed(String),
    /// A run inside the tool (a subagent) paused on guarded calls: the whole run pauses with
    /// them (see [`crate::interrupt`]).
    #[error("paused for approval of {} call(s)", .0.len())]
    Interrupted(Vec<crate::interrupt::Interrupt>),
}

impl ToolError {
    /// A failure with a message.
    pub fn failed(message: impl std::fmt::Display) -> Self {
        ToolError::Failed(message.to_string())
    }
}

/// A failed run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A model call failed and could not be recovered.
    #[error(transparent)]
    Chat(#[from] ChatError),
    /// Middleware failed. Errors returned by middleware abort the run (fail closed); middleware
    /// that wants the model to see a failure sets a result instead.
    #[error("middleware failed: {0}")]
    Middleware(String),
    /// Middleware returned without calling `next` and without setting a result. Short-circuiting
    /// is allowed only with a result (`ctx.result = Some(…)`); an empty answer is never made up.
    #[error(
        "{0} middleware returned without calling next or setting a result (set ctx.result to short-circuit)"
    )]
    MissingResult(MiddlewareKind),
    /// The caller passed something unusable.
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// The run was cancelled.
    #[error("the run was cancelled")]
    Cancelled,
    /// A session or other value could not be (de)serialized.
    #[error("serialization failed: {0}")]
    Serde(#[from] serde_json::Error),
    /// An internal task ended abnormally.
    #[error("internal error: {0}")]
    Internal(String),
    /// A tool's sub-run paused on guarded calls (carried up to the loop, which pauses the run).
    #[error("paused for approval of {} call(s)", .0.len())]
    Interrupted(Vec<crate::interrupt::Interrupt>),
    /// The thread could not be read or a step could not be committed (the run stops; the
    /// last committed step stays intact).
    #[error(transparent)]
    Checkpoint(#[from] crate::checkpoint::CheckpointError),
}

impl Error {
    /// A middleware failure with a message.
    pub fn middleware(message: impl std::fmt::Display) -> Self {
        Error::Middleware(message.to_string())
    }

    /// The chat error inside, if this is one.
    pub fn as_chat(&self) -> Option<&ChatError> {
        match self {
            Error::Chat(c) => Some(c),
            _ => None,
        }
    }
}

/// Which kind of middleware an [`Error::MissingResult`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MiddlewareKind {
    /// Agent middleware (around a run).
    Agent,
    /// Chat middleware (around a model call).
    Chat,
    /// Function middleware (around a tool call).
    Function,
}

impl std::fmt::Display for MiddlewareKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            MiddlewareKind::Agent => "agent",
            MiddlewareKind::Chat => "chat",
            MiddlewareKind::Function => "function",
        })
    }
}

/// `Result` with cairn's run [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_statuses() {
        assert!(ChatError::from_status(429, "slow down").is_retryable());
        assert!(ChatError::from_status(503, "busy").is_retryable());
        assert!(!ChatError::from_status(400, "bad").is_retryable());
        let e = ChatError::from_status(
            400,
            "This model's maximum context length is 8192 tokens. However, you requested 9000",
        );
        assert!(e.is_context_overflow());
        assert!(!e.is_retryable());
        assert_eq!(
            ChatError::from_status(401, "no").kind(),
            ChatErrorKind::Auth
        );
        assert!(e.to_string().contains("HTTP 400"));
    }
}
