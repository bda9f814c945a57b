//! MCP server configuration: the `mcpServers` JSON object users already write for other
//! clients (Claude Code, Claude Desktop, VS Code, Cursor).
//!
//! ```json
//! {
//!   "mcpServers": {
//!     "fs": { "command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "."] },
//!     "docs": { "url": "http://127.0.0.1:3001/mcp", "headers": { "Authorization": "Bearer …" } }
//!   }
//! }
//! ```
//!
//! A server has either a `command` (a child process speaking MCP on stdin/stdout) or a `url`
//! (the streamable-HTTP transport). cairn's own keys, all optional: `allowedTools` and
//! `deniedTools` (server-side tool names), `startupTimeoutSec` (start plus listing, default
//! 30), `toolTimeoutSec` (one call, default 120), `trust` (`true`: none of its tools needs
//! approval) or `trustedTools` (these need none), `disabled`, and `cwd`. The snake_case
//! spellings codex uses (`enabled_tools`, `disabled_tools`, `startup_timeout_sec`,
//! `tool_timeout_sec`) are accepted too. Unknown keys are ignored, so a file written for
//! another client loads.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::ConfigError;

/// The default time a server has to start and list its tools.
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(30);

/// The default time one tool call may take.
pub const DEFAULT_TOOL_TIMEOUT: Duration = Duration::from_secs(120);

/// The project's configuration file, relative to the project root.
pub const PROJECT_CONFIG: &str = ".cairn/mcp.json";

/// The user's configuration file, relative to the home directory.
pub const USER_CONFIG: &str = ".config/cairn/mcp.json";

/// A set of MCP servers by name (the `mcpServers` object).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct McpConfig {
    /// The servers, by the name their tools are prefixed with (`mcp__<name>__<tool>`).
    #[serde(rename = "mcpServers", default)]
    pub servers: BTreeMap<String, ServerConfig>,
}

/// One server's entry.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ServerConfig {
    /// The program of a stdio server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Its arguments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Environment variables given to a stdio server, on top of the minimal environment
    /// ([`crate::client::BASE_ENV`]); cairn's own environment is never passed whole.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// The working directory of a stdio server (default: cairn's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<PathBuf>,
    /// The endpoint of a streamable-HTTP server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// HTTP headers sent with every request to `url`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// The transport, when given (`stdio`, `http`, `streamable-http`); otherwise it follows from
    /// `command` or `url`.
    #[serde(
        default,
        rename = "type",
        alias = "transport",
        skip_serializing_if = "Option::is_none"
    )]
    pub kind: Option<String>,
    /// Only these tools (server names) are offered; all when unset.
    #[serde(
        default,
        alias = "enabled_tools",
        alias = "enabledTools",
        skip_serializing_if = "Option::is_none"
    )]
    pub allowed_tools: Option<Vec<String>>,
    /// These tools (server names) are never offered.
    #[serde(
        default,
        alias = "disabled_tools",
        alias = "disabledTools",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub denied_tools: Vec<String>,
    /// Seconds the server has to start and list its tools.
    #[serde(
        default,
        alias = "startup_timeout_sec",
        skip_serializing_if = "Option::is_none"
    )]
    pub startup_timeout_sec: Option<f64>,
    /// Seconds one tool call may take.
    #[serde(
        default,
        alias = "tool_timeout_sec",
        skip_serializing_if = "Option::is_none"
    )]
    pub tool_timeout_sec: Option<f64>,
    /// Whether every tool of the server runs without approval.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub trust: bool,
    /// Tools (server names) that run without approval.
    #[serde(
        default,
        alias = "trusted_tools",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub trusted_tools: Vec<String>,
    /// Whether the server is left out.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub disabled: bool,
}

/// How a server is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// A child process on stdin/stdout.
    Stdio,
    /// The streamable-HTTP transport.
    Http,
}

impl ServerConfig {
    /// A stdio server running `command` with `args`.
    pub fn stdio(
        command: impl Into<String>,
        args: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        ServerConfig {
            command: Some(command.into()),
            args: args.into_iter().map(Into::into).collect(),
            ..Default::default()
        }
    }

    /// A streamable-HTTP server at `url`.
    pub fn http(url: impl Into<String>) -> Self {
        ServerConfig {
            url: Some(url.into()),
            ..Default::default()
        }
    }

    /// Adds an environment variable (stdio).
    #[must_use]
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.insert(key.into(), value.into());
        self
    }

    /// Adds a header (HTTP).
    #[must_use]
    pub fn header(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.insert(key.into(), value.into());
        self
    }

    /// Offers only these tools.
    #[must_use]
    pub fn allow(mut self, tools: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.allowed_tools = Some(tools.into_iter().map(Into::into).collect());
        self
    }

    /// Never offers these tools.
    #[must_use]
    pub fn deny(mut self, tools: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.denied_tools.extend(tools.into_iter().map(Into::into));
        self
    }

    /// Sets the start-up timeout.
    #[must_use]
    pub fn startup_timeout(mut self, d: Duration) -> Self {
        self.startup_timeout_sec = Some(d.as_secs_f64());
        self
    }

    /// Sets the per-call timeout.
    #[must_use]
    pub fn tool_timeout(mut self, d: Duration) -> Self {
        self.tool_timeout_sec = Some(d.as_secs_f64());
        self
    }

    /// Trusts every tool of the server (no approvals).
    #[must_use]
    pub fn trusted(mut self, yes: bool) -> Self {
        self.trust = yes;
        self
    }

    /// The transport, or why there is none.
    pub fn transport(&self) -> Result<Transport, ConfigError> {
        let invalid = |m: &str| Err(ConfigError::Invalid(m.to_owned()));
        match self.kind.as_deref() {
            Some("sse") => invalid(
                "the SSE transport (deprecated in MCP 2025-03-26) is not supported; use the server's streamable-HTTP endpoint",
            ),
            Some("stdio") if self.command.is_some() => Ok(Transport::Stdio),
            Some("stdio") => invalid("a stdio server needs `command`"),
            Some("http" | "streamable-http" | "streamableHttp") if self.url.is_some() => {
                Ok(Transport::Http)
            }
            Some("http" | "streamable-http" | "streamableHttp") => {
                invalid("an HTTP server needs `url`")
            }
            Some(other) => Err(ConfigError::Invalid(format!(
                "unknown transport type `{other}` (stdio or http)"
            ))),
            None => match (&self.command, &self.url) {
                (Some(_), None) => Ok(Transport::Stdio),
                (None, Some(_)) => Ok(Transport::Http),
                (Some(_), Some(_)) => invalid("give either `command` or `url`, not both"),
                (None, None) => {
                    invalid("a server needs `command` (stdio) or `url` (streamable HTTP)")
                }
            },
        }
    }

    /// The start-up timeout (default [`DEFAULT_STARTUP_TIMEOUT`]).
    pub fn startup_timeout_duration(&self) -> Duration {
        seconds(self.startup_timeout_sec).unwrap_or(DEFAULT_STARTUP_TIMEOUT)
    }

    /// The per-call timeout (default [`DEFAULT_TOOL_TIMEOUT`]).
    pub fn tool_timeout_duration(&self) -> Duration {
        seconds(self.tool_timeout_sec).unwrap_or(DEFAULT_TOOL_TIMEOUT)
    }

    /// Whether the tool `name` (the server's name for it) is offered.
    pub fn offers(&self, name: &str) -> bool {
        self.allowed_tools
            .as_ref()
            .is_none_or(|a| a.iter().any(|t| t == name))
            && !self.denied_tools.iter().any(|t| t == name)
    }

    /// Whether the tool `name` runs without approval by configuration.
    pub fn trusts(&self, name: &str) -> bool {
        self.trust || self.trusted_tools.iter().any(|t| t == name)
    }
}

fn seconds(s: Option<f64>) -> Option<Duration> {
    s.filter(|s| s.is_finite() && *s > 0.0)
        .map(Duration::from_secs_f64)
}

impl McpConfig {
    /// Parses a configuration file's text.
    pub fn parse(text: &str) -> Result<Self, ConfigError> {
        let config: McpConfig =
            serde_json::from_str(text).map_err(|e| ConfigError::Parse(e.to_string()))?;
        for (name, server) in &config.servers {
            if name.is_empty() {
                return Err(ConfigError::Invalid("a server has an empty name".into()));
            }
            server
                .transport()
                .map_err(|e| ConfigError::Invalid(format!("server `{name}`: {e}")))?;
        }
        Ok(config)
    }

    /// Reads a configuration file.
    pub fn read(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Read {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        Self::parse(&text).map_err(|e| e.in_file(path))
    }

    /// Reads `path` when it exists; an empty configuration when it does not.
    pub fn read_if_exists(path: &Path) -> Result<Self, ConfigError> {
        if path.exists() {
            Self::read(path)
        } else {
            Ok(McpConfig::default())
        }
    }

    /// `other`'s servers replace this one's of the same name; the others are added.
    pub fn merge(&mut self, other: McpConfig) {
        self.servers.extend(other.servers);
    }

    /// The configuration cairn uses in `project`: `~/.config/cairn/mcp.json` (under `home`),
    /// then the project's `.cairn/mcp.json` (a server of the same name wins), then each of
    /// `extra` (`--mcp-config FILE`, which must exist) in order. Disabled servers are dropped.
    pub fn load(
        project: &Path,
        home: Option<&Path>,
        extra: &[PathBuf],
    ) -> Result<Self, ConfigError> {
        let mut config = McpConfig::default();
        if let Some(home) = home {
            config.merge(Self::read_if_exists(&home.join(USER_CONFIG))?);
        }
        config.merge(Self::read_if_exists(&project.join(PROJECT_CONFIG))?);
        for path in extra {
            config.merge(Self::read(path)?);
        }
        config.servers.retain(|_, s| !s.disabled);
        Ok(config)
    }

    /// Whether there is no server.
    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_claude_code_shape_and_cairns_keys() {
        let c = McpConfig::parse(
            r#"{"mcpServers": {
                "fs": {"command": "npx", "args": ["-y", "srv", "."], "env": {"A": "1"}, "somethingElse": 3},
                "web": {"type": "http", "url": "http://127.0.0.1:1/mcp", "headers": {"X-Key": "k"},
                        "allowedTools": ["a", "b"], "deniedTools": ["b"], "toolTimeoutSec": 2.5, "trust": true},
                "codex": {"command": "x", "enabled_tools": ["a"], "startup_timeout_sec": 3}
            }, "other": true}"#,
        )
        .unwrap();
        let fs = &c.servers["fs"];
        assert_eq!(fs.transport().unwrap(), Transport::Stdio);
        assert_eq!(fs.args, ["-y", "srv", "."]);
        assert_eq!(fs.env["A"], "1");
        assert_eq!(fs.tool_timeout_duration(), DEFAULT_TOOL_TIMEOUT);
        let web = &c.servers["web"];
        assert_eq!(web.transport().unwrap(), Transport::Http);
        assert!(web.offers("a") && !web.offers("b") && !web.offers("c"));
        assert_eq!(web.tool_timeout_duration(), Duration::from_millis(2500));
        assert!(web.trusts("anything"));
        let codex = &c.servers["codex"];
        assert!(codex.offers("a") && !codex.offers("z"));
        assert_eq!(codex.startup_timeout_duration(), Duration::from_secs(3));
        assert!(!codex.trusts("a"));
    }

    #[test]
    fn rejects_servers_without_a_transport() {
        for bad in [
            r#"{"mcpServers": {"x": {}}}"#,
            r#"{"mcpServers": {"x": {"command": "a", "url": "http://b"}}}"#,
            r#"{"mcpServers": {"x": {"type": "sse", "url": "http://b"}}}"#,
            r#"{"mcpServers": {"x": {"type": "carrier-pigeon", "url": "http://b"}}}"#,
            r#"{"mcpServers": [1]}"#,
        ] {
            assert!(McpConfig::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_project_wins_over_the_user_and_extra_files_win_over_both() {
        let home = tempfile::tempdir().unwrap();
        let project = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(home.path().join(".config/cairn")).unwrap();
        std::fs::create_dir_all(project.path().join(".cairn")).unwrap();
        std::fs::write(
            home.path().join(USER_CONFIG),
            r#"{"mcpServers": {"a": {"command": "user-a"}, "b": {"command": "user-b"}, "off": {"command": "x"}}}"#,
        )
        .unwrap();
        std::fs::write(
            project.path().join(PROJECT_CONFIG),
            r#"{"mcpServers": {"a": {"command": "project-a"}, "off": {"command": "x", "disabled": true}}}"#,
        )
        .unwrap();
        let extra = project.path().join("extra.json");
        std::fs::write(&extra, r#"{"mcpServers": {"b": {"url": "http://x/mcp"}}}"#).unwrap();
        let c = McpConfig::load(project.path(), Some(home.path()), &[]).unwrap();
        assert_eq!(c.servers["a"].command.as_deref(), Some("project-a"));
        assert_eq!(c.servers["b"].command.as_deref(), Some("user-b"));
        assert!(!c.servers.contains_key("off"));
        let c = McpConfig::load(project.path(), Some(home.path()), &[extra]).unwrap();
        assert_eq!(c.servers["b"].url.as_deref(), Some("http://x/mcp"));
        let missing = project.path().join("nope.json");
        let e = McpConfig::load(project.path(), None, &[missing]).unwrap_err();
        assert!(e.to_string().contains("nope.json"), "{e}");
        std::fs::write(project.path().join(PROJECT_CONFIG), "{").unwrap();
        let e = McpConfig::load(project.path(), None, &[]).unwrap_err();
        assert!(e.to_string().contains("mcp.json"), "{e}");
    }
}
