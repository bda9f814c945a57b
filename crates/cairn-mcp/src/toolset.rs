//! [`McpToolset`]: a set of MCP servers whose tools join an agent's runs.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use cairn_core::{AgentContext, BoxFuture, Middleware, Next, SharedTool};
use rmcp::model::{CallToolResult, JsonObject};

use crate::client::McpClient;
use crate::config::{McpConfig, ServerConfig, Transport};
use crate::error::ClientError;
use crate::tool::{McpTool, qualified_name, with_hash_suffix};

/// Called once for each server that fails to start: its name and why.
pub type FailureReporter = Arc<dyn Fn(&str, &ClientError) + Send + Sync>;

/// The servers of an [`McpConfig`], started on first use, whose tools join every run of the
/// agents it is given to.
///
/// As agent middleware (`builder.middleware(toolset.clone())`, or the deep builder's
/// `inherited_middleware` so subagents get them too) it adds the servers' tools to each run:
/// - **Lazily**: nothing starts until the first run (or [`tools`](Self::tools)); the servers
///   start concurrently, each within its start-up timeout.
/// - **Listed once, refreshed on change**: a server's tool list is kept until the server
///   announces `notifications/tools/list_changed`; the next run lists it again.
/// - **A server that fails to start is reported once** (through
///   [`on_failure`](Self::on_failure), else a `tracing` warning) and left out; the run goes on
///   with the others.
/// - **A server that dies** makes its calls end in `Error: …` results; the next run starts it
///   again (once per run at most).
///
/// Clones share the servers.
#[derive(Clone)]
pub struct McpToolset {
    inner: Arc<Inner>,
}

struct Inner {
    servers: Vec<Arc<ServerHandle>>,
    guard: bool,
    reporter: Option<FailureReporter>,
}

impl std::fmt::Debug for McpToolset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpToolset")
            .field(
                "servers",
                &self
                    .inner
                    .servers
                    .iter()
                    .map(|s| s.name())
                    .collect::<Vec<_>>(),
            )
            .field("guard", &self.inner.guard)
            .finish()
    }
}

/// What a server is doing, for `cairn mcp list`.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum ServerState {
    /// Not started yet.
    NotStarted,
    /// Connected, with its tools (model-visible name, description, needs approval).
    Running {
        /// The server's own name and version, when it gave them.
        server_info: Option<(String, String)>,
        /// The tools offered.
        tools: Vec<ToolInfo>,
    },
    /// It could not be started or listed.
    Failed(ClientError),
}

/// One offered tool, for listings.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ToolInfo {
    /// The model-visible name (`mcp__<server>__<tool>`).
    pub name: String,
    /// The server's name for it.
    pub remote_name: String,
    /// Its description.
    pub description: String,
    /// Whether calls need approval.
    pub needs_approval: bool,
}

/// A server's status.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ServerStatus {
    /// The config's name.
    pub name: String,
    /// How it is reached.
    pub transport: Option<Transport>,
    /// `command args…` or the URL.
    pub target: String,
    /// What it is doing.
    pub state: ServerState,
}

enum State {
    NotStarted,
    Running {
        client: Arc<McpClient>,
        tools: Vec<SharedTool>,
        infos: Vec<ToolInfo>,
    },
    Failed(ClientError),
}

/// One configured server and its connection, shared by its tools.
pub(crate) struct ServerHandle {
    name: String,
    config: ServerConfig,
    guard: bool,
    state: tokio::sync::Mutex<State>,
    /// The live connection, read by calls without waiting for a listing to finish.
    client: std::sync::RwLock<Option<Arc<McpClient>>>,
    reported: std::sync::atomic::AtomicBool,
}

impl ServerHandle {
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn config(&self) -> &ServerConfig {
        &self.config
    }

    pub(crate) async fn call_tool(
        &self,
        tool: &str,
        arguments: JsonObject,
        timeout: Duration,
    ) -> Result<CallToolResult, ClientError> {
        let client = self
            .client
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let Some(client) = client else {
            return Err(ClientError::Closed);
        };
        if client.is_closed() {
            return Err(ClientError::Closed);
        }
        client.call_tool(tool, arguments, timeout).await
    }

    fn set_client(&self, c: Option<Arc<McpClient>>) {
        *self.client.write().unwrap_or_else(|p| p.into_inner()) = c;
    }

    /// Starts the server if needed and returns its tools; `Err` when it cannot be started.
    async fn ensure(self: &Arc<Self>) -> Result<Vec<SharedTool>, ClientError> {
        let mut state = self.state.lock().await;
        let relist = match &*state {
            State::Running { client, tools, .. } => {
                if client.is_closed() {
                    tracing::info!(server = %self.name, "MCP server stopped; starting it again");
                    None
                } else if client.is_stale() {
                    Some(Arc::clone(client))
                } else {
                    return Ok(tools.clone());
                }
            }
            State::Failed(e) => return Err(e.clone()),
            State::NotStarted => None,
        };
        let client = match relist {
            Some(c) => c,
            None => match McpClient::connect(&self.name, &self.config).await {
                Ok(c) => Arc::new(c),
                Err(e) => {
                    self.set_client(None);
                    *state = State::Failed(e.clone());
                    return Err(e);
                }
            },
        };
        let listed =
            tokio::time::timeout(self.config.startup_timeout_duration(), client.list_tools())
                .await
                .unwrap_or(Err(ClientError::StartupTimeout(
                    self.config.startup_timeout_duration(),
                )));
        let defs = match listed {
            Ok(d) => d,
            Err(e) => {
                self.set_client(None);
                *state = State::Failed(e.clone());
                return Err(e);
            }
        };
        let mut seen = BTreeSet::new();
        let mut tools: Vec<SharedTool> = Vec::new();
        let mut infos = Vec::new();
        for def in defs.iter().filter(|d| self.config.offers(&d.name)) {
            let mut name = qualified_name(&self.name, &def.name);
            if !seen.insert(name.clone()) {
                // Two server names that clean to the same model name: the second gets a hash.
                name = with_hash_suffix(&name, &format!("{}\u{0}{}", self.name, def.name));
                seen.insert(name.clone());
            }
            let tool = McpTool::new(Arc::clone(self), def, name, self.guard);
            infos.push(ToolInfo {
                name: cairn_core::Tool::spec(&tool).name.clone(),
                remote_name: def.name.to_string(),
                description: cairn_core::Tool::spec(&tool).description.clone(),
                needs_approval: cairn_core::Tool::spec(&tool).approval_mode
                    == cairn_core::ApprovalMode::AlwaysRequire,
            });
            tools.push(Arc::new(tool));
        }
        self.set_client(Some(Arc::clone(&client)));
        *state = State::Running {
            client,
            tools: tools.clone(),
            infos,
        };
        Ok(tools)
    }
}

impl McpToolset {
    /// The servers of `config`, none started. Calls of tools that may change things need
    /// approval (see [`crate::tool::needs_approval`]).
    pub fn new(config: &McpConfig) -> Self {
        Self::build(config, true, None)
    }

    fn build(config: &McpConfig, guard: bool, reporter: Option<FailureReporter>) -> Self {
        let servers = config
            .servers
            .iter()
            .map(|(name, c)| {
                Arc::new(ServerHandle {
                    name: name.clone(),
                    config: c.clone(),
                    guard,
                    state: tokio::sync::Mutex::new(State::NotStarted),
                    client: std::sync::RwLock::new(None),
                    reported: std::sync::atomic::AtomicBool::new(false),
                })
            })
            .collect();
        McpToolset {
            inner: Arc::new(Inner {
                servers,
                guard,
                reporter,
            }),
        }
    }

    /// The same servers' configuration with approvals on or off (`false`: no MCP tool asks,
    /// as with the CLI's `--yes`). Call before the first use: it makes a new, unstarted set.
    #[must_use]
    pub fn guarded(self, guard: bool) -> Self {
        let config = self.config();
        Self::build(&config, guard, self.inner.reporter.clone())
    }

    /// Reports each server that fails to start with `f` (once per server) instead of a
    /// `tracing` warning. Call before the first use: it makes a new, unstarted set.
    #[must_use]
    pub fn on_failure(self, f: impl Fn(&str, &ClientError) + Send + Sync + 'static) -> Self {
        let config = self.config();
        Self::build(&config, self.inner.guard, Some(Arc::new(f)))
    }

    fn config(&self) -> McpConfig {
        McpConfig {
            servers: self
                .inner
                .servers
                .iter()
                .map(|s| (s.name.clone(), s.config.clone()))
                .collect(),
        }
    }

    /// Whether there are no servers.
    pub fn is_empty(&self) -> bool {
        self.inner.servers.is_empty()
    }

    /// The tools of every server that runs, starting the servers not started yet and
    /// listing again those that announced a change.
    pub async fn tools(&self) -> Vec<SharedTool> {
        let results = futures::future::join_all(
            self.inner
                .servers
                .iter()
                .map(|s| async move { (s, s.ensure().await) }),
        )
        .await;
        let mut out = Vec::new();
        for (server, r) in results {
            match r {
                Ok(tools) => out.extend(tools),
                Err(e) => {
                    if !server
                        .reported
                        .swap(true, std::sync::atomic::Ordering::AcqRel)
                    {
                        match &self.inner.reporter {
                            Some(f) => f(&server.name, &e),
                            None => tracing::warn!(
                                server = %server.name,
                                error = %e,
                                "MCP server unavailable; going on without it"
                            ),
                        }
                    }
                }
            }
        }
        out
    }

    /// Each server's status (starting those not started yet).
    pub async fn status(&self) -> Vec<ServerStatus> {
        let _ = self.tools().await;
        let mut out = Vec::new();
        for s in &self.inner.servers {
            let state = match &*s.state.lock().await {
                State::NotStarted => ServerState::NotStarted,
                State::Running { client, infos, .. } => ServerState::Running {
                    server_info: client.server_info(),
                    tools: infos.clone(),
                },
                State::Failed(e) => ServerState::Failed(e.clone()),
            };
            let target = match (&s.config.command, &s.config.url) {
                (Some(c), _) => std::iter::once(c.as_str())
                    .chain(s.config.args.iter().map(String::as_str))
                    .collect::<Vec<_>>()
                    .join(" "),
                (None, Some(u)) => u.clone(),
                (None, None) => String::new(),
            };
            out.push(ServerStatus {
                name: s.name.clone(),
                transport: s.config.transport().ok(),
                target,
                state,
            });
        }
        out
    }

    /// Stops every server (stdio servers' stdin is closed; lingering ones are killed).
    pub async fn shutdown(&self) {
        for s in &self.inner.servers {
            let mut state = s.state.lock().await;
            s.set_client(None);
            if let State::Running { client, .. } = std::mem::replace(&mut *state, State::NotStarted)
                && let Ok(client) = Arc::try_unwrap(client)
            {
                client.close().await;
            }
        }
    }
}

impl Middleware<AgentContext> for McpToolset {
    fn process(
        &self,
        mut ctx: AgentContext,
        next: Next<AgentContext>,
    ) -> BoxFuture<'static, cairn_core::Result<AgentContext>> {
        let this = self.clone();
        Box::pin(async move {
            let tools = this.tools().await;
            for t in tools {
                // A run's own tool of the same name wins.
                if !ctx.tools.iter().any(|o| o.spec().name == t.spec().name) {
                    ctx.tools.push(t);
                }
            }
            next.run(ctx).await
        })
    }
}
