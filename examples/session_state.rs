//! Seed 000, "use `session=` for shared run state": a tool writes `ctx.session.state`, and the
//! caller reads it after the run.
//!
//! `cargo run -p cairn-examples --example session_state`

use cairn::{Agent, FunctionInvocationContext, ToolError, tool};
use serde_json::json;

#[tool(approval_mode = "never_require")]
fn remember_topic(
    /// Topic to remember.
    topic: String,
    ctx: &FunctionInvocationContext,
) -> Result<String, ToolError> {
    let Some(session) = &ctx.session else {
        return Ok("No session available.".to_owned());
    };
    session
        .state()
        .insert("topic", &topic)
        .map_err(ToolError::failed)?;
    Ok(format!("Stored {topic:?} in session state."))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let client = cairn_examples::chat_client(vec![(
        "remember_topic",
        json!({"topic": "budget review on Friday"}),
    )]);
    let agent = Agent::builder(client)
        .name("MemoryAgent")
        .instructions("Remember important topics.")
        .tool(remember_topic)
        .build();

    let session = agent.create_session();
    agent
        .run("Remember that the budget review is on Friday.")
        .session(&session)
        .await?;
    println!(
        "{}",
        session.state().get::<String>("topic").unwrap_or_default()
    );
    Ok(())
}
