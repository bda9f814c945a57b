//! Errors of configuration, connection and calls.

use std::path::PathBuf;
use std::time::Duration;

/// A configuration file could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read {}: {message}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// The text is not the JSON expected.
    #[error("not an mcpServers configuration: {0}")]
    Parse(String),
    /// A server's entry makes no sense.
    #[error("{0}")]
    Invalid(String),
    /// One of the above, in a file.
    #[error("{}: {source}", path.display())]
    InFile {
        /// The file.
        path: PathBuf,
        /// What was wrong in it.
        source: Box<ConfigError>,
    },
}

impl ConfigError {
    pub(crate) fn in_file(self, path: &std::path::Path) -> Self {
        ConfigError::InFile {
            path: path.to_path_buf(),
            source: Box::new(self),
        }
    }
}

/// A server could not be reached, or a request to it failed.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The server's configuration is unusable.
    #[error("{0}")]
    Config(String),
    /// The stdio server's program could not be started.
    #[error("cannot start `{command}`: {message}")]
    Spawn {
        /// The program.
        command: String,
        /// Why.
        message: String,
    },
    /// The MCP handshake failed (the server exited, spoke something else, refused).
    #[error("the MCP handshake failed: {0}")]
    Initialize(String),
    /// Start-up (handshake and listing the tools) took longer than allowed.
    #[error("it did not start within {}", secs(*.0))]
    StartupTimeout(Duration),
    /// A call took longer than allowed.
    #[error("no answer within {}", secs(*.0))]
    Timeout(Duration),
    /// The connection is gone: the server exited or closed it.
    #[error("the server closed the connection (it may have exited)")]
    Closed,
    /// The server answered with a protocol error.
    #[error("{0}")]
    Server(String),
    /// Anything else from the transport or the SDK.
    #[error("{0}")]
    Transport(String),
}

impl ClientError {
    /// Whether the connection is gone (a new one would have to be made).
    pub fn is_closed(&self) -> bool {
        matches!(self, ClientError::Closed)
    }

    /// Whether this was a timeout.
    pub fn is_timeout(&self) -> bool {
        matches!(
            self,
            ClientError::Timeout(_) | ClientError::StartupTimeout(_)
        )
    }

    pub(crate) fn from_service(e: rmcp::ServiceError) -> Self {
        use rmcp::ServiceError as S;
        match e {
            S::McpError(d) => ClientError::Server(d.message.to_string()),
            S::TransportClosed => ClientError::Closed,
            S::Timeout { timeout } => ClientError::Timeout(timeout),
            S::Cancelled { .. } => ClientError::Closed,
            other => ClientError::Transport(other.to_string()),
        }
    }
}

fn secs(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{s:.0} s")
    } else {
        format!("{s:.1} s")
    }
}
