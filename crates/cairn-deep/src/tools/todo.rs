//! `write_todos`: the agent's plan, kept in session state. See [`TodoTool`].

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

/// The `write_todos` tool: replaces the whole list in session state (key `"todos"`) and
/// returns it.
///
/// # Parallel calls
///
/// Two `write_todos` calls in one model turn would race to replace the list, so both are
/// rejected: each call sees the other calls of its turn
/// ([`FunctionInvocationContext::siblings`]) and refuses to run when one of them is a
/// `write_todos` call too. This holds whether the agent runs the turn's calls concurrently or
/// one after another, with or without a session.
///
/// ```
/// use cairn_core::{Agent, ChatResponse, testing::ScriptedClient};
/// use cairn_deep::tools::todo_tool;
/// let client = ScriptedClient::from_responses([ChatResponse::text("ok")]);
/// let agent = Agent::builder(client).tool(todo_tool()).build();
/// assert_eq!(agent.tools()[0].spec().name, "write_todos");
/// ```
pub struct TodoTool {
    inner: Builtin,
}

/// Creates the `write_todos` tool.
pub fn todo_tool() -> TodoTool {
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
    TodoTool { inner }
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
    /// No longer needed: the tool finds parallel calls itself (see [`TodoTool`]). Returns a
    /// middleware that only passes calls through, so code that installs it still builds.
    pub fn turn_guard(&self) -> TodoTurnGuard {
        TodoTurnGuard
    }

    async fn run(&self, ctx: &FunctionInvocationContext) -> Result<ToolOutput, ToolError> {
        if ctx.siblings().any(|c| c.name == NAME) {
            return Ok(parallel_error());
        }
        self.inner.invoke(ctx).await
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

/// What [`TodoTool::turn_guard`] returns: chat middleware that passes every call through.
/// Kept for code written when the tool needed it.
#[derive(Debug, Clone, Copy, Default)]
pub struct TodoTurnGuard;

impl Middleware<ChatContext> for TodoTurnGuard {
    fn process(
        &self,
        ctx: ChatContext,
        next: Next<ChatContext>,
    ) -> BoxFuture<'static, cairn_core::Result<ChatContext>> {
        next.run(ctx)
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
