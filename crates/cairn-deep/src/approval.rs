//! Human approval of tool calls (`interrupt_on`, SPEC R9), in process.
//!
//! Tools named in `interrupt_on` (and tools whose spec says `approval_mode = always_require`)
//! are reviewed before they run: an [`ApprovalHandler`] decides to approve, edit the arguments,
//! or reject with a message to the model. This is the in-process form used by the CLI; a durable
//! form that pauses the run into a checkpoint and resumes after a restart builds on the same
//! types. Without a handler, `interrupt_on` is recorded (and the prompt mentions approvals) but
//! calls are not held.

use std::collections::BTreeMap;
use std::sync::Arc;

use cairn_core::{
    ApprovalMode, BoxFuture, FunctionInvocationContext, Middleware, Next, ToolOutput,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A kind of decision a reviewer may make.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DecisionKind {
    /// Run the call as it is.
    Approve,
    /// Run it with changed arguments.
    Edit,
    /// Do not run it.
    Reject,
}

/// How calls of one tool are reviewed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InterruptOn {
    /// The decisions allowed (default: all three).
    pub allowed_decisions: Vec<DecisionKind>,
    /// Shown to the reviewer with the call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

impl Default for InterruptOn {
    fn default() -> Self {
        InterruptOn {
            allowed_decisions: vec![
                DecisionKind::Approve,
                DecisionKind::Edit,
                DecisionKind::Reject,
            ],
            description: None,
        }
    }
}

/// A reviewer's decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Decision {
    /// Run the call.
    Approve,
    /// Run the call with these arguments instead.
    Edit {
        /// The new arguments.
        arguments: Value,
    },
    /// Do not run the call; the model reads the message.
    Reject {
        /// Why, for the model.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    },
}

impl Decision {
    fn kind(&self) -> DecisionKind {
        match self {
            Decision::Approve => DecisionKind::Approve,
            Decision::Edit { .. } => DecisionKind::Edit,
            Decision::Reject { .. } => DecisionKind::Reject,
        }
    }
}

/// A call waiting for review.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovalRequest {
    /// The tool.
    pub tool: String,
    /// The call id.
    pub call_id: String,
    /// The arguments the model gave.
    pub arguments: Value,
    /// The configured description, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// What the reviewer may decide.
    pub allowed_decisions: Vec<DecisionKind>,
}

/// Decides on calls that need approval (a terminal prompt, a web UI, a policy).
pub trait ApprovalHandler: Send + Sync + 'static {
    /// The decision for one call.
    fn review<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, Decision>;
}

impl<F> ApprovalHandler for F
where
    F: Fn(&ApprovalRequest) -> Decision + Send + Sync + 'static,
{
    fn review<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, Decision> {
        let d = self(request);
        Box::pin(async move { d })
    }
}

/// Function middleware that holds configured calls for review.
pub struct ApprovalMiddleware {
    interrupt_on: BTreeMap<String, InterruptOn>,
    handler: Arc<dyn ApprovalHandler>,
}

impl ApprovalMiddleware {
    /// Reviews calls of the tools in `interrupt_on` (and of tools that always require
    /// approval) with `handler`.
    pub fn new(
        interrupt_on: BTreeMap<String, InterruptOn>,
        handler: Arc<dyn ApprovalHandler>,
    ) -> Self {
        ApprovalMiddleware {
            interrupt_on,
            handler,
        }
    }
}

impl Middleware<FunctionInvocationContext> for ApprovalMiddleware {
    fn process(
        &self,
        mut ctx: FunctionInvocationContext,
        next: Next<FunctionInvocationContext>,
    ) -> BoxFuture<'static, cairn_core::Result<FunctionInvocationContext>> {
        let name = ctx.tool_name().to_owned();
        let config = match self.interrupt_on.get(&name) {
            Some(c) => Some(c.clone()),
            None if ctx.function.spec().approval_mode == ApprovalMode::AlwaysRequire => {
                Some(InterruptOn::default())
            }
            None => None,
        };
        let Some(config) = config else {
            return next.run(ctx);
        };
        let handler = Arc::clone(&self.handler);
        Box::pin(async move {
            let request = ApprovalRequest {
                tool: name.clone(),
                call_id: ctx.call_id.clone(),
                arguments: ctx.arguments.clone(),
                description: config.description.clone(),
                allowed_decisions: config.allowed_decisions.clone(),
            };
            let decision = handler.review(&request).await;
            if !config.allowed_decisions.contains(&decision.kind()) {
                return Err(cairn_core::Error::InvalidInput(format!(
                    "the reviewer decided {:?} for {name}, which allows only {:?}",
                    decision.kind(),
                    config.allowed_decisions
                )));
            }
            match decision {
                Decision::Approve => next.run(ctx).await,
                Decision::Edit { arguments } => {
                    ctx.arguments = arguments;
                    let shown = ctx.arguments.to_string();
                    let mut ctx = next.run(ctx).await?;
                    if let Some(out) = &mut ctx.result {
                        out.parts.insert(
                            0,
                            cairn_core::Content::text(format!(
                                "(The user changed the arguments of this call to {shown}.)\n"
                            )),
                        );
                    }
                    Ok(ctx)
                }
                Decision::Reject { message } => {
                    let why = message
                        .map(|m| m.trim().trim_end_matches('.').to_owned())
                        .filter(|m| !m.is_empty())
                        .map(|m| format!(" Their reason: {m}."))
                        .unwrap_or_default();
                    ctx.result = Some(ToolOutput::error(format!(
                        "Error: the user rejected this {name} call, so it did not run.{why} Do not retry it unchanged; adjust your approach or ask the user."
                    )));
                    Ok(ctx)
                }
            }
        })
    }
}
