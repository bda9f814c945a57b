//! Seed 000, agents as tools: `research_agent.as_tool(...)` with `propagate_session`, so the
//! delegated agent sees the caller's session state; runtime kwargs flow through on their own.
//!
//! `cargo run -p cairn-examples --example agent_as_tool`

use cairn::{Agent, FunctionInvocationContext, ToolError, tool};
use serde_json::json;

/// Store findings for later steps.
#[tool]
fn store_findings(findings: String, ctx: &FunctionInvocationContext) -> Result<(), ToolError> {
    if let Some(session) = &ctx.session {
        session
            .state()
            .insert("findings", findings)
            .map_err(ToolError::failed)?;
    }
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let research_agent = Agent::builder(cairn_examples::chat_client(vec![(
        "store_findings",
        json!({"findings": "Rust agents can share session state across delegation."}),
    )]))
    .name("ResearchAgent")
    .instructions("Research the topic and store findings.")
    .tool(store_findings)
    .build();

    let research_tool = research_agent
        .as_tool()
        .name("research")
        .description("Research a topic and store findings.")
        .arg_name("query")
        .propagate_session(true);

    let coordinator = Agent::builder(cairn_examples::chat_client(vec![(
        "research",
        json!({"query": "session sharing in agent frameworks"}),
    )]))
    .name("Coordinator")
    .instructions("Delegate research, then summarize.")
    .tool(research_tool)
    .build();

    let session = coordinator.create_session();
    let response = coordinator
        .run("Find out how agents share sessions.")
        .session(&session)
        .await?;
    println!("{}", response.text());
    println!(
        "findings in the caller's session: {}",
        session
            .state()
            .get::<String>("findings")
            .unwrap_or_default()
    );
    Ok(())
}
