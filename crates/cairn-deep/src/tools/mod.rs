//! The built-in tools of the deep-agent harness (SPEC R5.5): `ls`, `read_file`, `write_file`,
//! `edit_file`, `delete`, `glob`, `grep`, `execute` over a [`Backend`](crate::backend::Backend),
//! and `write_todos`.
//!
//! Each tool is a [`cairn_core::Tool`]; its parameter schema is derived with schemars from an
//! input struct and compacted (no `format`, optional fields typed without `null`). Usage
//! details live in the descriptions, kept short. Failures are `Error: …` results that say what
//! to do next.
//!
//! **Timeouts.** Every call of a built-in tool except `execute` (which has its own, per call)
//! is bounded by a [`ToolTimeout`]: the one in the run's extensions, else
//! [`DEFAULT_TOOL_TIMEOUT`] (60 s). A call that runs past it returns an `Error: …` result that
//! says it timed out. Backends run blocking file work on tokio's blocking pool, which cannot be
//! interrupted: an abandoned read finishes (or not) in the background, and an abandoned
//! `write_file`/`edit_file`/`delete` may still be applied, which its error says.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use cairn_core::{
    BoxFuture, FunctionInvocationContext, SharedTool, Tool, ToolError, ToolOutput, ToolSpec,
};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;

mod fs;
pub mod todo;

pub use fs::{
    appending_edit_file_tool, delete_tool, edit_file_tool, execute_tool, filesystem_tools,
    glob_tool, grep_tool, ls_tool, overwriting_write_file_tool, plain_read_file_tool,
    read_file_tool, write_file_tool,
};
pub use todo::{TODOS_KEY, TodoItem, TodoStatus, TodoTool, TodoTurnGuard, todo_tool};

type Handler = dyn Fn(FunctionInvocationContext) -> BoxFuture<'static, Result<ToolOutput, ToolError>>
    + Send
    + Sync;

/// How long a built-in tool call may run when the run sets no [`ToolTimeout`].
pub const DEFAULT_TOOL_TIMEOUT: Duration = Duration::from_secs(60);

/// The time limit of every built-in tool call but `execute`. Put one in the run's
/// [`Extensions`](cairn_core::Extensions) to change [`DEFAULT_TOOL_TIMEOUT`].
///
/// ```
/// use std::time::Duration;
/// use cairn_deep::tools::ToolTimeout;
/// let mut ext = cairn_core::Extensions::new();
/// ext.insert(ToolTimeout(Duration::from_secs(10)));
/// assert_eq!(ext.get::<ToolTimeout>(), Some(&ToolTimeout(Duration::from_secs(10))));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolTimeout(pub Duration);

impl Default for ToolTimeout {
    fn default() -> Self {
        ToolTimeout(DEFAULT_TOOL_TIMEOUT)
    }
}

/// What a built-in tool's time limit is, and what its timeout error says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Deadline {
    /// No limit here (the tool bounds itself, as `execute` does).
    None,
    /// The [`ToolTimeout`]; the call only reads.
    Reads,
    /// The [`ToolTimeout`]; the call changes files, so it may still land after the timeout.
    Changes,
}

impl Deadline {
    fn message(self, tool: &str, limit: Duration) -> String {
        match self {
            Deadline::Changes => format!(
                "Error: {tool} timed out after {limit:?}; the change may still be applied in the background. Check the file with read_file before trying again."
            ),
            _ => format!(
                "Error: {tool} timed out after {limit:?} and was abandoned. Try a narrower path or pattern, or a smaller file."
            ),
        }
    }
}

/// Reviews one call's arguments before it runs ([`Tool::review_call`]).
type Reviewer = dyn Fn(&Value) -> cairn_core::CallReview + Send + Sync;

/// A built-in tool: a spec from an input type `A` and an async handler.
pub(crate) struct Builtin {
    spec: ToolSpec,
    handler: Box<Handler>,
    reviewer: Option<Box<Reviewer>>,
}

impl Builtin {
    /// A read-only tool, bounded by the [`ToolTimeout`].
    pub(crate) fn new<A, F, Fut>(name: &str, description: &str, f: F) -> Self
    where
        A: DeserializeOwned + JsonSchema + Send + 'static,
        F: Fn(A, FunctionInvocationContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ToolOutput> + Send + 'static,
    {
        Self::with_deadline(name, description, Deadline::Reads, f)
    }

    /// A tool with the given time limit.
    pub(crate) fn with_deadline<A, F, Fut>(
        name: &str,
        description: &str,
        deadline: Deadline,
        f: F,
    ) -> Self
    where
        A: DeserializeOwned + JsonSchema + Send + 'static,
        F: Fn(A, FunctionInvocationContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ToolOutput> + Send + 'static,
    {
        let f = Arc::new(f);
        let mut parameters = cairn_core::schema::schema_for::<A>();
        compact_schema(&mut parameters);
        let tool = name.to_owned();
        let mut spec = ToolSpec::new(name, description, parameters);
        // The file tools' `file_path` is also accepted as `path` (`#[serde(alias)]`); an edited
        // call may use it too.
        if spec
            .parameters
            .value()
            .pointer("/properties/file_path")
            .is_some()
        {
            spec = spec.with_argument_alias("path", "file_path");
        }
        Builtin {
            spec,
            reviewer: None,
            handler: Box::new(move |ctx| {
                let f = Arc::clone(&f);
                let tool = tool.clone();
                Box::pin(async move {
                    let args: A = ctx.parse_arguments()?;
                    if deadline == Deadline::None {
                        return Ok(f(args, ctx).await);
                    }
                    let limit = ctx
                        .extensions
                        .get::<ToolTimeout>()
                        .copied()
                        .unwrap_or_default()
                        .0;
                    match tokio::time::timeout(limit, f(args, ctx)).await {
                        Ok(out) => Ok(out),
                        Err(_) => {
                            tracing::warn!(tool = %tool, ?limit, "built-in tool call timed out");
                            Ok(ToolOutput::error(deadline.message(&tool, limit)))
                        }
                    }
                })
            }),
        }
    }

    /// Reviews each call with `f` before it runs (see [`Tool::review_call`]).
    pub(crate) fn with_review(
        mut self,
        f: impl Fn(&Value) -> cairn_core::CallReview + Send + Sync + 'static,
    ) -> Self {
        self.reviewer = Some(Box::new(f));
        self
    }

    pub(crate) fn shared(self) -> SharedTool {
        Arc::new(self)
    }
}

impl Tool for Builtin {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    fn invoke<'a>(
        &'a self,
        ctx: &'a FunctionInvocationContext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        (self.handler)(ctx.clone())
    }
    fn review_call(&self, arguments: &Value) -> cairn_core::CallReview {
        self.reviewer
            .as_ref()
            .map(|r| r(arguments))
            .unwrap_or_default()
    }
}

/// Shrinks a derived schema without changing what it accepts in practice: drops `format`
/// (`uint`, …), `minimum: 0` on integers and `default: null`, types optional fields without
/// `null` (they are simply left out of `required`), and turns `oneOf` lists of constants into
/// a plain string `enum`.
pub(crate) fn compact_schema(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.remove("format");
            if m.get("default").is_some_and(Value::is_null) {
                m.remove("default");
            }
            if let Some(Value::Array(types)) = m.get("type") {
                let non_null: Vec<Value> = types
                    .iter()
                    .filter(|t| t.as_str() != Some("null"))
                    .cloned()
                    .collect();
                if non_null.len() == 1 {
                    m.insert("type".into(), non_null[0].clone());
                }
            }
            if let Some(Value::Array(any)) = m.get("anyOf") {
                let non_null: Vec<Value> = any
                    .iter()
                    .filter(|s| s.get("type").and_then(Value::as_str) != Some("null"))
                    .cloned()
                    .collect();
                if non_null.len() == 1
                    && let Value::Object(inner) = &non_null[0]
                {
                    let inner = inner.clone();
                    m.remove("anyOf");
                    for (k, val) in inner {
                        m.entry(k).or_insert(val);
                    }
                }
            }
            for key in ["oneOf", "anyOf"] {
                let consts: Option<Vec<Value>> = m.get(key).and_then(Value::as_array).map(|alts| {
                    alts.iter()
                        .filter_map(|a| a.get("const").cloned())
                        .collect()
                });
                let all_consts = m
                    .get(key)
                    .and_then(Value::as_array)
                    .is_some_and(|alts| alts.iter().all(|a| a.get("const").is_some()));
                if let Some(consts) = consts
                    && all_consts
                    && !consts.is_empty()
                {
                    m.remove(key);
                    m.insert("type".into(), Value::String("string".into()));
                    m.insert("enum".into(), Value::Array(consts));
                }
            }
            if m.get("type").and_then(Value::as_str) == Some("integer")
                && m.get("minimum").and_then(Value::as_f64) == Some(0.0)
            {
                m.remove("minimum");
            }
            for (_, child) in m.iter_mut() {
                compact_schema(child);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(compact_schema),
        _ => {}
    }
}

/// Total size in bytes of the JSON of `tools`' specs (name, description, parameters): what
/// they cost in every model request.
pub fn schema_size(tools: &[SharedTool]) -> usize {
    tools
        .iter()
        .map(|t| {
            let s = t.spec();
            serde_json::json!({
                "name": s.name,
                "description": s.description,
                "parameters": s.parameters,
            })
            .to_string()
            .len()
        })
        .sum()
}
