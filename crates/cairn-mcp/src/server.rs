//! An agent as an MCP server: `run` starts a task on a new thread and answers with the
//! agent's answer *and the thread id*; `reply` continues a thread (codex removed its MCP server
//! after users asked for exactly that id).
//!
//! Approvals: when the client declares the elicitation capability, each guarded call is put
//! to the user through `elicitation/create` (approve, with an optional reason for a
//! rejection); otherwise the run pauses (its state committed to the thread) and the tool
//! result says so, naming the waiting calls and how to go on: `reply` with the thread id and
//! `decision: "approve"` or `"reject"`.
//!
//! The server does not know where threads live or how the agent is made: an [`AgentHost`]
//! says (the CLI's keeps threads in its database and builds its deep agent).

use std::sync::Arc;

use cairn_core::{
    Agent, AgentResponse, ApprovalHandler, ApprovalRequest, BoxFuture, Decision, Decisions,
    RunStatus, ThreadCursor,
};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerInfo, Tool as McpToolDef,
};
use rmcp::service::{ElicitationMode, RequestContext};
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler, ServiceExt};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::OnceCell;

/// What the MCP server needs from its embedder.
pub trait AgentHost: Send + Sync + 'static {
    /// The agent, with guarded calls decided by `approver` (`None`: a guarded call pauses the
    /// run). Called once per session, after the client said whether it supports elicitation.
    fn agent(&self, approver: Option<Arc<dyn ApprovalHandler>>) -> Result<Agent, String>;

    /// A new thread for a run of `task`.
    fn new_thread<'a>(&'a self, task: &'a str) -> BoxFuture<'a, Result<ThreadCursor, String>>;

    /// The thread `id` (the host may accept a unique prefix), or why not.
    fn thread<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<ThreadCursor, String>>;
}

/// The `run` and `reply` tools over an [`AgentHost`]; serve it with [`serve_stdio`] or any
/// rmcp transport (`AgentServer::new(host).serve(transport)`).
pub struct AgentServer {
    host: Arc<dyn AgentHost>,
    agent: OnceCell<Agent>,
    info: Implementation,
}

impl AgentServer {
    /// A server over `host`, introducing itself as `cairn`.
    pub fn new(host: impl AgentHost) -> Self {
        AgentServer {
            host: Arc::new(host),
            agent: OnceCell::new(),
            info: Implementation::new("cairn", env!("CARGO_PKG_VERSION")),
        }
    }
}

/// Serves `host` on this process's stdin and stdout until the client closes them.
pub async fn serve_stdio(host: impl AgentHost) -> Result<(), ServeError> {
    let running = AgentServer::new(host)
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| ServeError(e.to_string()))?;
    running
        .waiting()
        .await
        .map_err(|e| ServeError(e.to_string()))?;
    Ok(())
}

/// The MCP server could not start or stopped on an error.
#[derive(Debug, thiserror::Error)]
#[error("MCP server: {0}")]
pub struct ServeError(String);

#[derive(Debug, Deserialize)]
struct RunArgs {
    task: String,
    #[serde(default)]
    thread_id: Option<String>,
}

#[derive(Debug, Deserialize)]
struct ReplyArgs {
    thread_id: String,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    decision: Option<String>,
    #[serde(default)]
    reason: Option<String>,
}

/// What an elicitation asks the user about one guarded call.
#[derive(Debug, Deserialize, rmcp::schemars::JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
struct ApprovalAnswer {
    /// Run the call?
    approve: bool,
    /// Why not (sent to the agent when rejecting).
    #[serde(default)]
    reason: String,
}

rmcp::elicit_safe!(ApprovalAnswer);

/// Asks the MCP client's user about each guarded call.
struct ElicitApprover {
    peer: Peer<RoleServer>,
}

impl ApprovalHandler for ElicitApprover {
    fn review<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, Decision> {
        Box::pin(async move {
            let args = serde_json::to_string_pretty(&request.arguments).unwrap_or_default();
            let message = format!(
                "The agent wants to call `{}` with:\n{}\n{}Approve this call?",
                request.tool,
                args,
                request
                    .description
                    .as_deref()
                    .map(|d| format!("{d}\n"))
                    .unwrap_or_default()
            );
            match self.peer.elicit::<ApprovalAnswer>(message).await {
                Ok(Some(a)) if a.approve => Decision::Approve,
                Ok(Some(a)) => Decision::Reject {
                    message: Some(if a.reason.trim().is_empty() {
                        "The user rejected this call.".to_owned()
                    } else {
                        format!("The user rejected this call: {}", a.reason)
                    }),
                },
                Ok(None) => Decision::Reject {
                    message: Some("The user gave no answer; the call was not run.".into()),
                },
                Err(e) => Decision::Reject {
                    message: Some(format!("The call was not approved ({e}).")),
                },
            }
        })
    }
}

fn tool_defs() -> Vec<McpToolDef> {
    let obj = |v: Value| match v {
        Value::Object(o) => o,
        _ => Default::default(),
    };
    vec![
        McpToolDef::new(
            "run",
            "Give the cairn agent a task; it works until done and answers. The result holds the \
             answer and the thread id: pass the id to `reply` to continue the conversation.",
            obj(json!({
                "type": "object",
                "properties": {
                    "task": {"type": "string", "description": "What the agent should do."},
                    "thread_id": {"type": "string", "description": "Continue this thread instead of starting a new one."}
                },
                "required": ["task"]
            })),
        ),
        McpToolDef::new(
            "reply",
            "Continue a thread of the cairn agent: send a new message, or, when its run paused \
             for approval, a decision (approve or reject) on the waiting calls.",
            obj(json!({
                "type": "object",
                "properties": {
                    "thread_id": {"type": "string", "description": "The thread id a `run` returned."},
                    "message": {"type": "string", "description": "The next message to the agent."},
                    "decision": {"type": "string", "enum": ["approve", "reject"], "description": "For a paused run: approve or reject every waiting call."},
                    "reason": {"type": "string", "description": "With reject: why, for the agent."}
                },
                "required": ["thread_id"]
            })),
        ),
    ]
}

/// The tool result for a finished or paused run.
fn outcome(thread_id: &str, response: &AgentResponse) -> CallToolResult {
    if !response.interrupts.is_empty() {
        let waiting: Vec<Value> = response
            .interrupts
            .iter()
            .map(|i| json!({"id": i.id, "tool": i.tool, "arguments": i.arguments}))
            .collect();
        let names: Vec<String> = response
            .interrupts
            .iter()
            .map(|i| format!("`{}`", i.tool))
            .collect();
        let text = format!(
            "The run paused: {} {} for approval. To go on, call `reply` with thread_id \"{thread_id}\" and decision \"approve\" or \"reject\" (with a reason); or from a shell: cairn resume {thread_id} --approve | --reject.",
            names.join(", "),
            if names.len() == 1 { "waits" } else { "wait" },
        );
        let mut r = CallToolResult::success(vec![
            ContentBlock::text(text),
            ContentBlock::text(format!("thread_id: {thread_id}")),
        ]);
        r.structured_content = Some(json!({
            "thread_id": thread_id,
            "status": "paused",
            "waiting": waiting,
        }));
        return r;
    }
    let answer = response.text();
    let mut r = CallToolResult::success(vec![
        ContentBlock::text(answer.clone()),
        ContentBlock::text(format!("thread_id: {thread_id}")),
    ]);
    r.structured_content = Some(json!({
        "thread_id": thread_id,
        "status": "completed",
        "answer": answer,
    }));
    r
}

fn failure(text: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text)])
}

impl AgentServer {
    async fn agent(&self, peer: &Peer<RoleServer>) -> Result<&Agent, String> {
        self.agent
            .get_or_try_init(|| async {
                let approver: Option<Arc<dyn ApprovalHandler>> = peer
                    .supported_elicitation_modes()
                    .contains(&ElicitationMode::Form)
                    .then(|| {
                        Arc::new(ElicitApprover { peer: peer.clone() }) as Arc<dyn ApprovalHandler>
                    });
                self.host.agent(approver)
            })
            .await
    }

    async fn run(&self, args: RunArgs, peer: &Peer<RoleServer>) -> CallToolResult {
        if let Some(id) = args.thread_id {
            return self
                .reply(
                    ReplyArgs {
                        thread_id: id,
                        message: Some(args.task),
                        decision: None,
                        reason: None,
                    },
                    peer,
                )
                .await;
        }
        let agent = match self.agent(peer).await {
            Ok(a) => a,
            Err(e) => return failure(format!("Error: the agent could not be made: {e}")),
        };
        let cursor = match self.host.new_thread(&args.task).await {
            Ok(c) => c,
            Err(e) => return failure(format!("Error: no thread could be made: {e}")),
        };
        match agent.run(args.task.as_str()).thread(cursor.clone()).await {
            Ok(r) => outcome(&cursor.thread_id, &r),
            Err(e) => failure(format!(
                "Error: the run failed: {e}. Its finished steps are kept; continue with `reply` and thread_id \"{}\".",
                cursor.thread_id
            )),
        }
    }

    async fn reply(&self, args: ReplyArgs, peer: &Peer<RoleServer>) -> CallToolResult {
        let agent = match self.agent(peer).await {
            Ok(a) => a,
            Err(e) => return failure(format!("Error: the agent could not be made: {e}")),
        };
        let cursor = match self.host.thread(&args.thread_id).await {
            Ok(c) => c,
            Err(e) => return failure(format!("Error: {e}")),
        };
        let transcript = match cursor.load().await {
            Ok(t) => t,
            Err(e) => return failure(format!("Error: the thread could not be read: {e}")),
        };
        let id = cursor.thread_id.clone();
        let message = args.message.filter(|m| !m.trim().is_empty());
        let result = if transcript.status == RunStatus::Interrupted {
            let decision = match args.decision.as_deref() {
                Some("approve") => Decision::Approve,
                Some("reject") => Decision::Reject {
                    message: args.reason.filter(|r| !r.trim().is_empty()),
                },
                Some(other) => {
                    return failure(format!(
                        "Error: decision must be \"approve\" or \"reject\", not {other:?}."
                    ));
                }
                None => {
                    let names: Vec<&str> = transcript
                        .interrupts
                        .iter()
                        .map(|i| i.tool.as_str())
                        .collect();
                    return failure(format!(
                        "Error: the thread's run is waiting for approval of {}; call `reply` with decision \"approve\" or \"reject\" first.",
                        names.join(", ")
                    ));
                }
            };
            let decisions: Decisions = transcript
                .interrupts
                .iter()
                .map(|i| (i.id.clone(), decision.clone()))
                .collect();
            let resumed = agent.resume(cursor.clone()).decisions(decisions).await;
            match (resumed, message) {
                (Ok(r), Some(m)) if r.interrupts.is_empty() => {
                    agent.run(m.as_str()).thread(cursor.clone()).await
                }
                (r, _) => r,
            }
        } else if matches!(transcript.status, RunStatus::Running | RunStatus::Failed)
            && transcript.steps > 0
        {
            // A cut-off run: finish it, then take the message.
            match (agent.resume(cursor.clone()).await, message) {
                (Ok(r), Some(m)) if r.interrupts.is_empty() => {
                    agent.run(m.as_str()).thread(cursor.clone()).await
                }
                (r, _) => r,
            }
        } else {
            let Some(m) = message else {
                return failure(
                    "Error: say something: `reply` needs a message (or a decision for a paused run)."
                        .into(),
                );
            };
            agent.run(m.as_str()).thread(cursor.clone()).await
        };
        match result {
            Ok(r) => outcome(&id, &r),
            Err(e) => failure(format!(
                "Error: the run failed: {e}. Its finished steps are kept; continue with `reply` and thread_id \"{id}\"."
            )),
        }
    }
}

impl ServerHandler for AgentServer {
    fn get_info(&self) -> ServerInfo {
        ServerInfo::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(self.info.clone())
            .with_instructions(
                "cairn, a coding agent working on a directory. `run` gives it a task and returns \
                 its answer with a thread id; `reply` continues that thread.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tool_defs()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = Value::Object(request.arguments.unwrap_or_default());
        let result = match request.name.as_ref() {
            "run" => match serde_json::from_value::<RunArgs>(args) {
                Ok(a) => self.run(a, &context.peer).await,
                Err(e) => failure(format!("Error: bad arguments for run: {e}")),
            },
            "reply" => match serde_json::from_value::<ReplyArgs>(args) {
                Ok(a) => self.reply(a, &context.peer).await,
                Err(e) => failure(format!("Error: bad arguments for reply: {e}")),
            },
            other => {
                return Err(ErrorData::invalid_params(
                    format!("no tool named {other}; the tools are run and reply"),
                    None,
                ));
            }
        };
        Ok(CallToolResponse::Complete(result))
    }
}
