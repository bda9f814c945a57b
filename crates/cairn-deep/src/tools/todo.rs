//! `write_todos`: the agent's plan, kept in session state. See [`TodoTool`].

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

use cairn_core::{
    BoxFuture, ChatContext, FunctionInvocationContext, Middleware, Next, Tool, ToolError,
    ToolOutput, ToolSpec,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Builtin;

/// The session-state key of the todo list.
pub const TODOS_KEY: &str = "todos";

const NAME: &str = "write_todos";

/// Where a task stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TodoStatus {
    /// Not started.
    Pending,
    /// Being worked on.
    InProgress,
    /// Done.
    Completed,
}

/// One task of the plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TodoItem {
    /// The task.
    #[schemars(description = "")]
    pub content: String,
    /// Where it stands.
    #[schemars(description = "")]
    pub status: TodoStatus,
}

#[derive(Deserialize, JsonSchema)]
struct TodoArgs {
    /// The complete new list.
    todos: Vec<TodoItem>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[derive(Default)]
struct Bookkeeping {
    /// Per session id (`""` without a session): the call ids of the latest model response
    /// when it held several `write_todos` calls.
    rejected: Mutex<HashMap<String, HashSet<String>>>,
    /// Per session id: calls in flight, and whether they overlapped.
    in_flight: Mutex<HashMap<String, (usize, bool)>>,
}

/// The `write_todos` tool: replaces the whole list in session state (key `"todos"`) and
/// returns it.
///
/// # Parallel calls
///
/// Two `write_todos` calls in one model turn would race to replace the list, so both are
/// rejected. The tool sees one call at a time, so two mechanisms find the siblings:
///
/// - **Exact** — [`TodoTool::turn_guard`] is chat middleware that reads every model response; when
///   a response holds several `write_todos` calls it records their call ids, and the tool
///   rejects exactly those calls. Install it wherever the tool is used.
/// - **Fallback** — without the guard, the tool notices calls of one session that run at the
///   same time (the agent loop runs one turn's calls concurrently by default): each call
///   registers, yields once so its siblings register too, and all of them are rejected when
///   more than one is in flight. This cannot see siblings run one after another
///   (`LoopConfig::concurrent_tool_calls = false`) or runs without a session; use the guard.
///
/// ```
/// use cairn_core::{Agent, ChatResponse, testing::ScriptedClient};
/// use cairn_deep::tools::todo_tool;
/// let todos = todo_tool();
/// let client = ScriptedClient::from_responses([ChatResponse::text("ok")]);
/// let agent = Agent::builder(client).middleware(todos.turn_guard()).tool(todos).build();
/// assert_eq!(agent.tools()[0].spec().name, "write_todos");
/// ```
pub struct TodoTool {
    inner: Builtin,
    book: Arc<Bookkeeping>,
}

/// Creates the `write_todos` tool.
pub fn todo_tool() -> TodoTool {
    let book = Arc::new(Bookkeeping::default());
    let inner = Builtin::new(
        NAME,
        "Replace your todo list with this complete list. Keep one item in_progress; mark items completed as soon as they are done. One call per turn.",
        |a: TodoArgs, ctx: FunctionInvocationContext| async move {
            if let Some(session) = &ctx.session
                && let Err(e) = session.state().insert(TODOS_KEY, &a.todos)
            {
                return ToolOutput::error(format!("Error: the todo list could not be saved: {e}"));
            }
            ToolOutput::text(render(&a.todos))
        },
    );
    TodoTool { inner, book }
}

fn render(todos: &[TodoItem]) -> String {
    if todos.is_empty() {
        return "Todo list cleared.".to_owned();
    }
    let mut out = String::from("Todo list updated:");
    for t in todos {
        let s = match t.status {
            TodoStatus::Pending => "pending",
            TodoStatus::InProgress => "in_progress",
            TodoStatus::Completed => "completed",
        };
        out.push_str(&format!("\n- [{s}] {}", t.content));
    }
    out
}

fn parallel_error() -> ToolOutput {
    ToolOutput::error(
        "Error: write_todos was called more than once in one turn, so none of the calls was applied. Send a single write_todos call with the complete list.",
    )
}

impl TodoTool {
    /// Chat middleware that finds parallel `write_todos` calls exactly (see
    /// [`TodoTool`]). Register it on the agent with the tool.
    pub fn turn_guard(&self) -> TodoTurnGuard {
        TodoTurnGuard {
            book: Arc::clone(&self.book),
        }
    }

    async fn run(&self, ctx: &FunctionInvocationContext) -> Result<ToolOutput, ToolError> {
        let key = ctx.session.as_ref().map(|s| s.id()).unwrap_or_default();
        if lock(&self.book.rejected)
            .get_mut(key)
            .is_some_and(|ids| ids.remove(&ctx.call_id))
        {
            return Ok(parallel_error());
        }
        let Some(session) = ctx.session.as_ref().map(|s| s.id().to_owned()) else {
            return self.inner.invoke(ctx).await;
        };
        {
            let mut map = lock(&self.book.in_flight);
            let e = map.entry(session.clone()).or_insert((0, false));
            e.0 += 1;
            if e.0 > 1 {
                e.1 = true;
            }
        }
        tokio::task::yield_now().await;
        let overlapped = lock(&self.book.in_flight)
            .get(&session)
            .is_some_and(|e| e.1);
        let out = if overlapped {
            Ok(parallel_error())
        } else {
            self.inner.invoke(ctx).await
        };
        let mut map = lock(&self.book.in_flight);
        if let Some(e) = map.get_mut(&session) {
            e.0 -= 1;
            if e.0 == 0 {
                map.remove(&session);
            }
        }
        out
    }
}

impl Tool for TodoTool {
    fn spec(&self) -> &ToolSpec {
        self.inner.spec()
    }
    fn invoke<'a>(
        &'a self,
        ctx: &'a FunctionInvocationContext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(self.run(ctx))
    }
}

/// Chat middleware of [`TodoTool::turn_guard`]: records the call ids of model turns with
/// several `write_todos` calls so the tool rejects them.
pub struct TodoTurnGuard {
    book: Arc<Bookkeeping>,
}

impl Middleware<ChatContext> for TodoTurnGuard {
    fn process(
        &self,
        ctx: ChatContext,
        next: Next<ChatContext>,
    ) -> BoxFuture<'static, cairn_core::Result<ChatContext>> {
        let book = Arc::clone(&self.book);
        Box::pin(async move {
            let ctx = next.run(ctx).await?;
            if let Some(resp) = &ctx.result {
                let ids: HashSet<String> = resp
                    .messages
                    .iter()
                    .flat_map(|m| m.function_calls())
                    .filter(|c| c.name == NAME)
                    .map(|c| c.call_id.clone())
                    .collect();
                let key = ctx.session.as_ref().map(|s| s.id()).unwrap_or_default();
                // Each response replaces the previous turn's record for the session.
                let mut rejected = lock(&book.rejected);
                if ids.len() > 1 {
                    rejected.insert(key.to_owned(), ids);
                } else {
                    rejected.remove(key);
                }
            }
            Ok(ctx)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_the_list() {
        let todos = vec![
            TodoItem {
                content: "Plan".into(),
                status: TodoStatus::Completed,
            },
            TodoItem {
                content: "Build".into(),
                status: TodoStatus::InProgress,
            },
        ];
        assert_eq!(
            render(&todos),
            "Todo list updated:\n- [completed] Plan\n- [in_progress] Build"
        );
        assert_eq!(render(&[]), "Todo list cleared.");
    }
}
