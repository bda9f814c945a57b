//! One live connection to one MCP server, over a child process's stdin/stdout or the
//! streamable-HTTP transport (rmcp's client).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientInfo, Implementation,
    JsonObject, Tool as McpToolDef,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::{ClientHandler, RoleClient, ServiceExt};

use crate::config::{ServerConfig, Transport};
use crate::error::ClientError;

/// The variables a stdio server gets from cairn's environment (when set): enough to find
/// programs, a home directory, a temporary directory and the locale. Everything else (API
/// keys above all) stays out; a server that needs more gets it from its config's `env`.
pub const BASE_ENV: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "TERM",
    "TMPDIR",
    "TZ",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "LC_MESSAGES",
    "SYSTEMROOT",
    "XDG_RUNTIME_DIR",
];

/// How many of a stdio server's last stderr lines are kept to explain a failure.
const STDERR_LINES: usize = 8;

/// Answers the server: records `tools/list_changed` and otherwise behaves as rmcp's default
/// client (no sampling, no elicitation, no roots).
struct Handler {
    info: ClientInfo,
    stale: Arc<AtomicBool>,
}

impl ClientHandler for Handler {
    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        self.stale.store(true, Ordering::Release);
        std::future::ready(())
    }

    fn get_info(&self) -> ClientInfo {
        self.info.clone()
    }
}

/// A connected MCP server.
pub struct McpClient {
    name: String,
    service: RunningService<RoleClient, Handler>,
    stale: Arc<AtomicBool>,
    stderr: Arc<Mutex<VecDeque<String>>>,
}

impl std::fmt::Debug for McpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpClient")
            .field("name", &self.name)
            .field("closed", &self.is_closed())
            .finish_non_exhaustive()
    }
}

impl McpClient {
    /// Starts (stdio) or reaches (HTTP) the server `name` and completes the MCP handshake,
    /// within the config's start-up timeout.
    pub async fn connect(name: &str, config: &ServerConfig) -> Result<Self, ClientError> {
        let timeout = config.startup_timeout_duration();
        match tokio::time::timeout(timeout, Self::connect_inner(name, config)).await {
            Ok(r) => r,
            Err(_) => Err(ClientError::StartupTimeout(timeout)),
        }
    }

    async fn connect_inner(name: &str, config: &ServerConfig) -> Result<Self, ClientError> {
        let stale = Arc::new(AtomicBool::new(false));
        let handler = Handler {
            info: ClientInfo::new(
                ClientCapabilities::default(),
                Implementation::new("cairn", env!("CARGO_PKG_VERSION")),
            ),
            stale: Arc::clone(&stale),
        };
        let stderr = Arc::new(Mutex::new(VecDeque::new()));
        let transport = config
            .transport()
            .map_err(|e| ClientError::Config(e.to_string()))?;
        let service = match transport {
            Transport::Stdio => {
                let (child, err) = spawn(name, config)?;
                if let Some(err) = err {
                    tokio::spawn(drain_stderr(name.to_owned(), err, Arc::clone(&stderr)));
                }
                let started = handler.serve(child).await;
                started.map_err(|e| {
                    let tail = tail(&stderr);
                    ClientError::Initialize(if tail.is_empty() {
                        e.to_string()
                    } else {
                        format!("{e}; its stderr ended with: {tail}")
                    })
                })?
            }
            Transport::Http => {
                let transport = http_transport(config)?;
                handler
                    .serve(transport)
                    .await
                    .map_err(|e| ClientError::Initialize(e.to_string()))?
            }
        };
        Ok(McpClient {
            name: name.to_owned(),
            service,
            stale,
            stderr,
        })
    }

    /// The server's name (the config's key).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The server's own name and version, from the handshake.
    pub fn server_info(&self) -> Option<(String, String)> {
        let info = self.service.peer_info()?;
        let s = info.server_info.as_ref()?;
        Some((s.name.clone(), s.version.clone()))
    }

    /// Lists every tool (all pages). Clears the `tools/list_changed` flag first, so a change
    /// announced while listing is seen by the next [`take_stale`](Self::take_stale).
    pub async fn list_tools(&self) -> Result<Vec<McpToolDef>, ClientError> {
        self.stale.store(false, Ordering::Release);
        self.service
            .list_all_tools()
            .await
            .map_err(ClientError::from_service)
    }

    /// Whether the server announced `tools/list_changed` since the last listing.
    pub fn is_stale(&self) -> bool {
        self.stale.load(Ordering::Acquire)
    }

    /// Calls the tool the server names `tool`, waiting at most `timeout`.
    pub async fn call_tool(
        &self,
        tool: &str,
        arguments: JsonObject,
        timeout: Duration,
    ) -> Result<CallToolResult, ClientError> {
        let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
        match tokio::time::timeout(timeout, self.service.call_tool(params)).await {
            Ok(Ok(r)) => Ok(r),
            Ok(Err(e)) => Err(ClientError::from_service(e)),
            Err(_) => Err(ClientError::Timeout(timeout)),
        }
    }

    /// Whether the connection is gone (the server exited or closed it).
    pub fn is_closed(&self) -> bool {
        self.service.is_transport_closed() || self.service.is_closed()
    }

    /// The last lines the (stdio) server wrote to stderr, joined with ` | `.
    pub fn stderr_tail(&self) -> String {
        tail(&self.stderr)
    }

    /// Ends the connection (a stdio server's stdin is closed; it is killed if it lingers).
    pub async fn close(self) {
        let _ = self.service.cancel().await;
    }
}

fn tail(lines: &Mutex<VecDeque<String>>) -> String {
    let lines = lines.lock().unwrap_or_else(|p| p.into_inner());
    lines.iter().cloned().collect::<Vec<_>>().join(" | ")
}

/// Reads a stdio server's stderr to its end (an undrained pipe can stall the server), logging
/// each line at debug level and keeping the last few.
async fn drain_stderr(
    name: String,
    err: tokio::process::ChildStderr,
    keep: Arc<Mutex<VecDeque<String>>>,
) {
    use tokio::io::AsyncBufReadExt;
    let mut lines = tokio::io::BufReader::new(err).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        tracing::debug!(target: "cairn_mcp::stderr", server = %name, "{line}");
        let mut keep = keep.lock().unwrap_or_else(|p| p.into_inner());
        if keep.len() == STDERR_LINES {
            keep.pop_front();
        }
        let mut line = line;
        if line.len() > 300 {
            let mut cut = 300;
            while !line.is_char_boundary(cut) {
                cut -= 1;
            }
            line.truncate(cut);
        }
        keep.push_back(line);
    }
}

/// The environment a stdio server starts with: [`BASE_ENV`] from `lookup`, then the config's
/// `env`.
pub fn server_env(
    config: &ServerConfig,
    lookup: impl Fn(&str) -> Option<String>,
) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = BASE_ENV
        .iter()
        .filter_map(|k| lookup(k).map(|v| ((*k).to_owned(), v)))
        .filter(|(k, _)| !config.env.contains_key(k))
        .collect();
    env.extend(config.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    env
}

fn spawn(
    name: &str,
    config: &ServerConfig,
) -> Result<
    (
        rmcp::transport::TokioChildProcess,
        Option<tokio::process::ChildStderr>,
    ),
    ClientError,
> {
    let program = config
        .command
        .as_deref()
        .ok_or_else(|| ClientError::Config(format!("server `{name}` has no command")))?;
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(&config.args)
        .env_clear()
        .envs(server_env(config, |k| std::env::var(k).ok()));
    if let Some(dir) = &config.cwd {
        cmd.current_dir(dir);
    }
    let mut wrapped = process_wrap::tokio::CommandWrap::from(cmd);
    // Its own process group: stopping the server stops what it started (`npx` runs `node`).
    #[cfg(unix)]
    wrapped.wrap(process_wrap::tokio::ProcessGroup::leader());
    rmcp::transport::TokioChildProcess::builder(wrapped)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| ClientError::Spawn {
            command: program.to_owned(),
            message: e.to_string(),
        })
}

fn http_transport(
    config: &ServerConfig,
) -> Result<rmcp::transport::StreamableHttpClientTransport<reqwest::Client>, ClientError> {
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let url = config
        .url
        .as_deref()
        .ok_or_else(|| ClientError::Config("no url".into()))?;
    let mut headers = std::collections::HashMap::new();
    for (k, v) in &config.headers {
        let name = http::HeaderName::from_bytes(k.as_bytes())
            .map_err(|e| ClientError::Config(format!("header `{k}`: {e}")))?;
        let value = http::HeaderValue::from_str(v)
            .map_err(|e| ClientError::Config(format!("header `{k}`: {e}")))?;
        headers.insert(name, value);
    }
    // rustls needs a process-wide crypto provider; ring, as cairn-providers installs.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .pool_max_idle_per_host(0)
        .build()
        .map_err(|e| ClientError::Config(format!("HTTP client: {e}")))?;
    let cfg = StreamableHttpClientTransportConfig::with_uri(url).custom_headers(headers);
    Ok(rmcp::transport::StreamableHttpClientTransport::with_client(
        client, cfg,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_is_the_base_plus_the_config() {
        let config = ServerConfig::stdio("x", ["y"])
            .env("TOKEN", "t")
            .env("HOME", "/srv");
        let host = |k: &str| match k {
            "PATH" => Some("/bin".to_owned()),
            "HOME" => Some("/home/me".to_owned()),
            "OPENAI_API_KEY" => Some("sk-secret".to_owned()),
            _ => None,
        };
        let env = server_env(&config, host);
        assert!(env.contains(&("PATH".into(), "/bin".into())));
        assert!(env.contains(&("TOKEN".into(), "t".into())));
        assert!(env.contains(&("HOME".into(), "/srv".into())));
        assert!(!env.iter().any(|(k, _)| k == "OPENAI_API_KEY"));
        assert_eq!(env.iter().filter(|(k, _)| k == "HOME").count(), 1);
    }
}
