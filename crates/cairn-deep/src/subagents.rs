//! Subagents and the `task` tool (SPEC R8).
//!
//! `task(description, subagent_type)` runs a subagent on `description` in a fresh context,
//! autonomously, and returns its final report (the last non-empty assistant text) as the tool
//! result; the caller's context receives only that report. Several `task` calls in one turn run
//! in parallel (the agent loop runs a turn's calls concurrently).
//!
//! # What a subagent shares with its caller
//! - **Runtime context, store and other extensions**: the same values (SPEC R6.3), and the same
//!   function-invocation kwargs.
//! - **Session state**: the subagent gets a session of its own whose state starts as a copy of
//!   the caller's, minus private keys (the todo list and the harness caches). When it finishes,
//!   what it changed is merged back key by key (and entry by entry inside JSON objects, so two
//!   parallel subagents writing different files of a [`StateBackend`](crate::StateBackend) both
//!   land). Files on shared backends (a directory, a store) are visible at once.
//! - **History**: none. The subagent starts from the task description alone.
//!
//! # Nesting
//! Subagents get their own `task` tool while their depth is below the builder's
//! `max_subagent_depth` (default 1: subagents do not delegate further, as in the Python
//! reference; raise it to allow deeper delegation).

use std::collections::BTreeMap;

use cairn_core::{
    Agent, AgentSession, BoxFuture, FunctionInvocationContext, SharedTool, Tool, ToolError,
    ToolOutput, ToolSpec,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::model::ModelChoice;

/// The name of the default subagent.
pub const GENERAL_PURPOSE: &str = "general-purpose";

/// What the general-purpose subagent is told.
pub const GENERAL_PURPOSE_PROMPT: &str = "You are a subagent working on one delegated task. \
Complete it autonomously with your tools. Your final message is the only thing the caller will \
see: make it a complete, self-contained report of what you found or did, with file paths for \
anything you wrote.";

const GENERAL_PURPOSE_DESCRIPTION: &str =
    "Has your tools; for multi-step work or research whose details you need not keep.";

/// A named subagent the `task` tool can launch.
#[derive(Clone, Default)]
pub struct SubAgent {
    /// Its name (the `subagent_type` the model passes).
    pub name: String,
    /// When to use it (shown in the `task` tool's description).
    pub description: String,
    /// Its system prompt.
    pub system_prompt: String,
    /// Its model; the caller's when unset.
    pub model: Option<ModelChoice>,
    /// Its own tools; the caller's user tools when unset. The harness's file tools are added.
    pub tools: Option<Vec<SharedTool>>,
    /// Its skill sources (not inherited).
    pub skills: Vec<String>,
}

impl SubAgent {
    /// A subagent with a name and a description.
    pub fn new(name: impl Into<String>, description: impl Into<String>) -> Self {
        SubAgent {
            name: name.into(),
            description: description.into(),
            ..Default::default()
        }
    }

    /// Sets the system prompt.
    pub fn system_prompt(mut self, p: impl Into<String>) -> Self {
        self.system_prompt = p.into();
        self
    }

    /// Sets the model (a client or a `provider:model` string).
    pub fn model(mut self, m: impl Into<ModelChoice>) -> Self {
        self.model = Some(m.into());
        self
    }

    /// Sets the tools (instead of inheriting the caller's user tools).
    pub fn tools(mut self, tools: impl IntoIterator<Item = SharedTool>) -> Self {
        self.tools = Some(tools.into_iter().collect());
        self
    }

    /// Adds a skill source.
    pub fn skill_source(mut self, path: impl Into<String>) -> Self {
        self.skills.push(path.into());
        self
    }

    pub(crate) fn general_purpose() -> Self {
        SubAgent {
            name: GENERAL_PURPOSE.into(),
            description: GENERAL_PURPOSE_DESCRIPTION.into(),
            system_prompt: GENERAL_PURPOSE_PROMPT.into(),
            ..Default::default()
        }
    }
}

impl std::fmt::Debug for SubAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SubAgent")
            .field("name", &self.name)
            .field("description", &self.description)
            .finish_non_exhaustive()
    }
}

/// Whether a session-state key stays with its agent (never copied into nor merged back from
/// a subagent).
pub fn is_private_state_key(key: &str) -> bool {
    key == crate::tools::todo::TODOS_KEY || key.starts_with("cairn.") || key.starts_with('_')
}

/// Merges what a subagent changed (`after` vs `before`) into `target`.
///
/// Keys the subagent left alone are untouched. A JSON object the subagent changed is merged
/// entry by entry (entries it added or changed are written, entries it removed are removed), so
/// parallel subagents writing different files both land. Other changed values are replaced.
fn merge_changes(
    target: &mut Map<String, Value>,
    before: &Map<String, Value>,
    after: &Map<String, Value>,
) {
    let empty = Map::new();
    for (k, new) in after {
        if is_private_state_key(k) || before.get(k) == Some(new) {
            continue;
        }
        let old_obj = match before.get(k) {
            Some(Value::Object(o)) => Some(o),
            None => Some(&empty),
            Some(_) => None,
        };
        match (old_obj, new, target.get_mut(k)) {
            (Some(old), Value::Object(new_obj), Some(Value::Object(t))) => {
                for (sk, sv) in new_obj {
                    if old.get(sk) != Some(sv) {
                        t.insert(sk.clone(), sv.clone());
                    }
                }
                for sk in old.keys() {
                    if !new_obj.contains_key(sk) {
                        t.remove(sk);
                    }
                }
            }
            _ => {
                target.insert(k.clone(), new.clone());
            }
        }
    }
    for k in before.keys() {
        if !after.contains_key(k) && !is_private_state_key(k) {
            target.remove(k);
        }
    }
}

#[derive(Deserialize, JsonSchema)]
struct TaskArgs {
    /// The complete task: everything the subagent needs to know, and what its report must contain.
    description: String,
    /// Which subagent to use.
    subagent_type: String,
}

/// The `task` tool.
pub struct TaskTool {
    spec: ToolSpec,
    agents: BTreeMap<String, Agent>,
}

impl TaskTool {
    /// A `task` tool over named, already built subagents (`(name, description, agent)`).
    pub fn new(agents: Vec<(String, String, Agent)>) -> Self {
        let mut list = String::new();
        for (name, description, _) in &agents {
            list.push_str(&format!("\n- {name}: {description}"));
        }
        let description = format!(
            "Run a subagent in a fresh context; it returns one final report. Subagents:{list}"
        );
        let spec = ToolSpec::new(
            "task",
            description,
            cairn_core::schema::schema_for::<TaskArgs>(),
        );
        TaskTool {
            spec,
            agents: agents.into_iter().map(|(n, _, a)| (n, a)).collect(),
        }
    }

    /// The names of the subagents it can launch.
    pub fn subagent_names(&self) -> impl Iterator<Item = &str> {
        self.agents.keys().map(String::as_str)
    }

    async fn run(&self, ctx: &FunctionInvocationContext) -> Result<ToolOutput, ToolError> {
        let args: TaskArgs = ctx.parse_arguments()?;
        let Some(agent) = self.agents.get(&args.subagent_type) else {
            let allowed: Vec<&str> = self.agents.keys().map(String::as_str).collect();
            return Ok(ToolOutput::error(format!(
                "Error: there is no subagent type \"{}\". Use one of: {}.",
                args.subagent_type,
                allowed.join(", ")
            )));
        };
        let before = ctx
            .session
            .as_ref()
            .map(|s| s.state().snapshot())
            .unwrap_or_default();
        let child = AgentSession::new();
        child.state().with(|m| {
            for (k, v) in &before {
                if !is_private_state_key(k) {
                    m.insert(k.clone(), v.clone());
                }
            }
        });
        let copied = child.state().snapshot();
        let mut req = agent
            .run(args.description)
            .session(&child)
            .function_invocation_kwargs(ctx.kwargs.clone())
            .extensions(&ctx.extensions);
        if let Some(sink) = &ctx.updates {
            req = req.updates(sink.nested(
                format!("{}:{}", args.subagent_type, ctx.call_id),
                agent.name().map(str::to_owned),
            ));
        }
        let result = req.await;
        // Merge what the subagent changed even when it failed part-way: its files are real.
        if let Some(parent) = &ctx.session {
            let after = child.state().snapshot();
            parent.state().with(|m| merge_changes(m, &copied, &after));
        }
        let response =
            result.map_err(|e| ToolError::failed(format!("the subagent failed: {e}")))?;
        Ok(ToolOutput::text(response.last_text().unwrap_or_else(
            || "(The subagent finished without a report.)".to_owned(),
        )))
    }
}

impl Tool for TaskTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    fn invoke<'a>(
        &'a self,
        ctx: &'a FunctionInvocationContext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(self.run(ctx))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_keeps_parallel_writes_and_private_keys() {
        let before: Map<String, Value> = serde_json::from_value(json!({
            "files": {"/a": 1, "/b": 2}, "todos": [1], "topic": "x"
        }))
        .unwrap();
        let mut target = before.clone();
        // Another subagent already added /c.
        target["files"]["/c"] = json!(3);
        let after: Map<String, Value> = serde_json::from_value(json!({
            "files": {"/a": 10, "/d": 4}, "todos": [9], "topic": "x", "new": true
        }))
        .unwrap();
        merge_changes(&mut target, &before, &after);
        assert_eq!(target["files"], json!({"/a": 10, "/c": 3, "/d": 4}));
        assert_eq!(target["todos"], json!([1]), "private keys stay");
        assert_eq!(target["new"], json!(true));
        // Two subagents that each create the key merge instead of overwriting each other.
        let mut t = Map::new();
        let none = Map::new();
        merge_changes(
            &mut t,
            &none,
            &serde_json::from_value(json!({"files": {"/x": 1}})).unwrap(),
        );
        merge_changes(
            &mut t,
            &none,
            &serde_json::from_value(json!({"files": {"/y": 2}})).unwrap(),
        );
        assert_eq!(t["files"], json!({"/x": 1, "/y": 2}));
    }
}
