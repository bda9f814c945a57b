//! MCP in the CLI: the servers of `~/.config/cairn/mcp.json`, `.cairn/mcp.json` and
//! `--mcp-config FILE` join `run` and `chat` (and their subagents); `cairn mcp list` shows
//! them; `cairn mcp serve` serves cairn itself to MCP clients on stdin/stdout.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use anyhow::{Result, anyhow};
use cairn_core::{Agent, ApprovalHandler, BoxFuture, ChatClient, ThreadCursor};
use cairn_mcp::server::AgentHost;
use cairn_mcp::{McpConfig, McpToolset, ServerState, Transport};

use crate::app::{AgentSetup, build_agent};
use crate::args::GlobalArgs;
use crate::render::{JsonRenderer, Style, sanitize};
use crate::threads::Db;

static ACTIVE: OnceLock<McpToolset> = OnceLock::new();

/// The MCP servers of this process's runs, once [`activate`] has read the configuration.
pub fn active() -> Option<McpToolset> {
    ACTIVE.get().cloned()
}

/// The configuration for `root`: the user's file, the project's (which wins), then each
/// `--mcp-config` file.
pub fn load_config(root: &Path, extra: &[PathBuf]) -> Result<McpConfig> {
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from);
    McpConfig::load(root, home.as_deref(), extra).map_err(|e| anyhow!("MCP configuration: {e}"))
}

/// Reads the configuration and makes its servers the tools of this process's runs (started on
/// the first run). A server that fails to start is reported once on stderr and left out.
/// With `--yes` MCP tools run without approval, as file writes and commands do.
pub fn activate(root: &Path, g: &GlobalArgs) -> Result<()> {
    let config = load_config(root, &g.mcp_config)?;
    if config.is_empty() {
        return Ok(());
    }
    let json = g.json;
    let set = McpToolset::new(&config)
        .guarded(!g.yes)
        .on_failure(move |name, e| {
            let text = sanitize(&format!(
                "cairn: MCP server `{name}` is unavailable ({e}); going on without it"
            ));
            if json {
                JsonRenderer::print(&serde_json::json!({
                    "type": "mcp_server_failed", "server": name, "message": text,
                }));
            }
            eprintln!("{}", Style::for_stderr().warn(&text));
        });
    let _ = ACTIVE.set(set);
    Ok(())
}

/// `cairn mcp list`: each server's status and tools (starting each server to ask it).
pub async fn list(root: &Path, g: &GlobalArgs) -> Result<u8> {
    let config = load_config(root, &g.mcp_config)?;
    let set = McpToolset::new(&config)
        .guarded(!g.yes)
        .on_failure(|_, _| {});
    let status = set.status().await;
    set.shutdown().await;
    if g.json {
        let servers: Vec<serde_json::Value> = status
            .iter()
            .map(|s| {
                let (state, error, tools) = match &s.state {
                    ServerState::Running { tools, .. } => (
                        "running",
                        None,
                        tools
                            .iter()
                            .map(|t| {
                                serde_json::json!({
                                    "name": t.name, "server_name": t.remote_name,
                                    "description": t.description, "needs_approval": t.needs_approval,
                                })
                            })
                            .collect(),
                    ),
                    ServerState::Failed(e) => ("failed", Some(e.to_string()), Vec::new()),
                    _ => ("not_started", None, Vec::new()),
                };
                serde_json::json!({
                    "name": s.name, "transport": transport_name(s.transport), "target": s.target,
                    "status": state, "error": error, "tools": tools,
                })
            })
            .collect();
        println!("{}", serde_json::Value::Array(servers));
        return Ok(0);
    }
    let style = Style::for_stdout();
    if status.is_empty() {
        println!(
            "No MCP servers configured. Add an \"mcpServers\" object to .cairn/mcp.json or ~/.config/cairn/mcp.json, or pass --mcp-config FILE."
        );
        return Ok(0);
    }
    for s in &status {
        let head = format!(
            "{} ({}: {})",
            s.name,
            transport_name(s.transport),
            sanitize(&cairn_providers::redact_url(&s.target))
        );
        match &s.state {
            ServerState::Running { tools, server_info } => {
                let who = server_info
                    .as_ref()
                    .map(|(n, v)| format!(" · {n} {v}"))
                    .unwrap_or_default();
                println!(
                    "{head} · running{} · {} tool{}",
                    sanitize(&who),
                    tools.len(),
                    if tools.len() == 1 { "" } else { "s" }
                );
                for t in tools {
                    let first = t.description.lines().next().unwrap_or("");
                    let mut first = sanitize(first);
                    if first.chars().count() > 80 {
                        first = first.chars().take(79).collect::<String>() + "…";
                    }
                    println!(
                        "  {}{}  {}",
                        t.name,
                        if t.needs_approval { " (asks)" } else { "" },
                        style.dim(&first)
                    );
                }
            }
            ServerState::Failed(e) => {
                println!(
                    "{head} · {}",
                    style.warn(&format!("failed: {}", sanitize(&e.to_string())))
                );
            }
            _ => println!("{head} · not started"),
        }
    }
    Ok(0)
}

fn transport_name(t: Option<Transport>) -> &'static str {
    match t {
        Some(Transport::Stdio) => "stdio",
        Some(Transport::Http) => "http",
        None => "invalid",
    }
}

/// The agent and threads `cairn mcp serve` offers.
struct CliHost {
    client: Arc<dyn ChatClient>,
    setup: AgentSetup,
    db: Db,
    label: String,
}

impl AgentHost for CliHost {
    fn agent(&self, approver: Option<Arc<dyn ApprovalHandler>>) -> Result<Agent, String> {
        let mut setup = self.setup.clone();
        setup.approver = approver;
        build_agent(Arc::clone(&self.client), &setup).map_err(|e| format!("{e:#}"))
    }

    fn new_thread<'a>(&'a self, task: &'a str) -> BoxFuture<'a, Result<ThreadCursor, String>> {
        Box::pin(async move {
            let info = self
                .db
                .create(&self.setup.root, task, &self.label)
                .await
                .map_err(|e| format!("{e:#}"))?;
            Ok(self.db.cursor(&info.id))
        })
    }

    fn thread<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<ThreadCursor, String>> {
        Box::pin(async move {
            let info = self.db.find(id).await.map_err(|e| format!("{e:#}"))?;
            Ok(self.db.cursor(&info.id))
        })
    }
}

/// `cairn mcp serve`: serves the agent on stdin/stdout until the client hangs up. Guarded
/// calls are put to the client's user by elicitation when the client supports it; otherwise a
/// run pauses and its result says how to go on (`reply` with a decision, or `cairn resume`).
pub async fn serve(
    client: Arc<dyn ChatClient>,
    setup: &AgentSetup,
    db: &Db,
    label: &str,
) -> Result<u8> {
    eprintln!(
        "{}",
        Style::for_stderr().dim("cairn: serving MCP on stdin/stdout (tools: run, reply)")
    );
    let host = CliHost {
        client,
        setup: setup.clone(),
        db: db.clone(),
        label: label.to_owned(),
    };
    cairn_mcp::server::serve_stdio(host).await?;
    if let Some(set) = active() {
        set.shutdown().await;
    }
    Ok(0)
}
