//! Seed 001, "runtime context": typed per-run values (user id, API key) that tools read through
//! their context; never put into the prompt, and passed to every subagent.
//!
//! `cargo run -p cairn-examples --example deep_agent_runtime_context`

use cairn::{DeepAgent, FunctionInvocationContext, ToolError, ToolRuntimeExt, tool};
use serde_json::json;

/// The runtime context of this agent (the seed's `contextSchema`).
struct UserContext {
    user_id: String,
    #[allow(dead_code)]
    api_key: String,
}

/// Fetch data for the current user
#[tool]
fn fetch_user_data(query: String, ctx: &FunctionInvocationContext) -> Result<String, ToolError> {
    let user = ctx.runtime_context::<UserContext>()?;
    Ok(format!("Data for user {}: {query}", user.user_id))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let client = cairn_examples::chat_client(vec![(
        "fetch_user_data",
        json!({"query": "recent activity"}),
    )]);
    let agent = DeepAgent::builder()
        .model(client)
        .tool(fetch_user_data)
        .context_type::<UserContext>()
        .build()?;

    let response = agent
        .run("Get my recent activity")
        .extension(UserContext {
            user_id: "user-123".into(),
            api_key: "sk-...".into(),
        })
        .await?;
    println!("{}", response.text());
    Ok(())
}
