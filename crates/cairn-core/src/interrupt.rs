//! Human in the loop (SPEC R9, issue #10): guarded tool calls wait for a person's decision.
//!
//! A call is **guarded** when its tool is named in the agent's `interrupt_on`
//! ([`AgentBuilder::interrupt_on`](crate::AgentBuilder::interrupt_on)) or its spec says
//! [`ApprovalMode::AlwaysRequire`](crate::ApprovalMode). The loop never runs a guarded call
//! without a [`Decision`]:
//! - with an in-process [`ApprovalHandler`] (a terminal prompt), it asks, commits the answer to
//!   the thread, then runs the call as decided;
//! - without one, the run **pauses**: it commits its state and ends with
//!   [`AgentResponse::interrupts`](crate::AgentResponse::interrupts) listing every pending
//!   guarded call of the step ([`Interrupt`]: id, namespace, tool, arguments, allowed
//!   decisions, description), and an [`AgentEventKind::Interrupted`](crate::AgentEventKind)
//!   event when streaming. [`Agent::resume`](crate::Agent::resume) with
//!   [`RunRequest::decisions`](crate::RunRequest::decisions) continues it, in this process or
//!   another one.
//!
//! A guarded call inside a subagent (a `task` call, an agent used as a tool) pauses the whole
//! run: the interrupt carries the subagent's namespace, and on resume the decision reaches the
//! subagent, which continues from its own committed steps.
//!
//! ```
//! use std::sync::Arc;
//! use cairn_core::testing::ScriptedClient;
//! use cairn_core::{Agent, ApprovalMode, ChatResponse, Checkpointer, Decision, FnTool,
//!     InMemoryCheckpointer, IntoTool, SharedCheckpointer, ThreadCursor, ToolOutput};
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let deploy = FnTool::new("deploy", "Deploy.", serde_json::json!({"type": "object"}), |_| async {
//!     Ok(ToolOutput::text("deployed"))
//! })
//! .approval_mode(ApprovalMode::AlwaysRequire)
//! .into_tool();
//! let agent = |client: ScriptedClient| Agent::builder(client).tools([deploy.clone()]).build();
//! let model = || ScriptedClient::from_responses([
//!     ChatResponse::tool_calls([("deploy", serde_json::json!({}))]),
//!     ChatResponse::text("Deployed."),
//! ]);
//! let threads: SharedCheckpointer = Arc::new(InMemoryCheckpointer::new());
//! let thread = threads.create_thread(None, Default::default()).await.unwrap();
//! let cursor = ThreadCursor::new(Arc::clone(&threads), thread.id);
//!
//! // No handler: the run pauses before `deploy` and says what waits.
//! let paused = agent(model()).run("ship it").thread(cursor.clone()).await.unwrap();
//! let waiting = &paused.interrupts[0];
//! assert_eq!(waiting.tool, "deploy");
//!
//! // Later (another process, after a restart): resume with the decision.
//! let model = ScriptedClient::from_responses([ChatResponse::text("Deployed.")]);
//! let done = agent(model)
//!     .resume(cursor)
//!     .decisions([(waiting.id.clone(), Decision::Approve)])
//!     .await
//!     .unwrap();
//! assert_eq!(done.text(), "Deployed.");
//! # });
//! ```
//!
//! An interrupt's id is the namespace its call's sub-run would have
//! ([`ThreadCursor::child`](crate::ThreadCursor::child)): `"<namespace>/<step>.<call id>"`,
//! unique in the thread and the same on every resume.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::client::BoxFuture;

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
        /// The new arguments (a JSON object matching the tool's schema).
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
    /// The decision's kind.
    pub fn kind(&self) -> DecisionKind {
        match self {
            Decision::Approve => DecisionKind::Approve,
            Decision::Edit { .. } => DecisionKind::Edit,
            Decision::Reject { .. } => DecisionKind::Reject,
        }
    }
}

/// Decisions by interrupt id.
pub type Decisions = BTreeMap<String, Decision>;

/// A guarded call waiting for a decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Interrupt {
    /// The id decisions name.
    pub id: String,
    /// The namespace of the run that made the call (`""` for the top agent).
    pub namespace: String,
    /// The tool.
    pub tool: String,
    /// The call id.
    pub call_id: String,
    /// The arguments the model gave.
    pub arguments: Value,
    /// What the reviewer may decide.
    pub allowed_decisions: Vec<DecisionKind>,
    /// The configured description, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

impl Interrupt {
    /// An interrupt of a top-level call `call_id` of `tool` (id `"/0.<call_id>"`, all three
    /// decisions allowed); set the other fields as needed.
    pub fn new(tool: impl Into<String>, call_id: impl Into<String>, arguments: Value) -> Self {
        let call_id = call_id.into();
        Interrupt {
            id: format!("/0.{call_id}"),
            namespace: String::new(),
            tool: tool.into(),
            call_id,
            arguments,
            allowed_decisions: InterruptOn::default().allowed_decisions,
            description: None,
        }
    }
}

/// What a tool says about one of its calls before the call runs
/// ([`Tool::review_call`](crate::Tool::review_call)), on top of `interrupt_on` and its
/// approval mode: a shell tool's exec policy, say, allows `git status` without asking, asks
/// for `rm -rf build`, and forbids `rm -rf /`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum CallReview {
    /// Reviewed as the agent configures the tool (`interrupt_on`, the approval mode).
    #[default]
    AsConfigured,
    /// Runs without a decision, even when the tool is guarded.
    Allow,
    /// Needs a decision even when the tool is not guarded (as if `interrupt_on` named it,
    /// with every decision allowed); `reason` becomes the interrupt's description when the
    /// guard has none.
    Ask {
        /// Why it needs a decision, for the reviewer.
        reason: String,
    },
    /// Never runs: the model reads an error that says so and why. Edited arguments are
    /// reviewed again, so an edit cannot run a forbidden call either.
    Forbid {
        /// Why, for the model.
        reason: String,
    },
}

/// A call waiting for review, as an in-process [`ApprovalHandler`] sees it.
pub type ApprovalRequest = Interrupt;

/// Decides on guarded calls in process (a terminal prompt, a policy).
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

/// Checks an edit's arguments against the tool's JSON schema: an object, with every required
/// property, no property the schema does not allow (when `additionalProperties` is false),
/// and each property of the JSON type its schema names.
pub fn check_arguments(schema: &Value, arguments: &Value) -> Result<(), String> {
    let Some(obj) = arguments.as_object() else {
        return Err(format!(
            "the arguments must be a JSON object, not {arguments}"
        ));
    };
    let props = schema.get("properties").and_then(Value::as_object);
    if let Some(required) = schema.get("required").and_then(Value::as_array) {
        for r in required.iter().filter_map(Value::as_str) {
            if !obj.contains_key(r) {
                return Err(format!("the required argument {r:?} is missing"));
            }
        }
    }
    let closed = schema.get("additionalProperties") == Some(&Value::Bool(false));
    for (k, v) in obj {
        let Some(p) = props.and_then(|p| p.get(k)) else {
            if closed {
                return Err(format!("{k:?} is not an argument of this tool"));
            }
            continue;
        };
        let types: Vec<&str> = match p.get("type") {
            Some(Value::String(t)) => vec![t.as_str()],
            Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
            _ => continue,
        };
        let ok = types.iter().any(|t| match *t {
            "string" => v.is_string(),
            "integer" => v.is_i64() || v.is_u64(),
            "number" => v.is_number(),
            "boolean" => v.is_boolean(),
            "array" => v.is_array(),
            "object" => v.is_object(),
            "null" => v.is_null(),
            _ => true,
        });
        if !ok {
            return Err(format!("{k:?} must be of type {}", types.join(" or ")));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn edits_are_checked_against_the_schema() {
        let schema = json!({"type": "object", "properties": {"path": {"type": "string"}, "n": {"type": ["integer", "null"]}}, "required": ["path"], "additionalProperties": false});
        assert!(check_arguments(&schema, &json!({"path": "/a"})).is_ok());
        assert!(check_arguments(&schema, &json!({"path": "/a", "n": null})).is_ok());
        assert!(
            check_arguments(&schema, &json!({}))
                .unwrap_err()
                .contains("required")
        );
        assert!(
            check_arguments(&schema, &json!({"path": 1}))
                .unwrap_err()
                .contains("string")
        );
        assert!(check_arguments(&schema, &json!({"path": "/a", "x": 1})).is_err());
        assert!(check_arguments(&schema, &json!([1])).is_err());
    }
}
