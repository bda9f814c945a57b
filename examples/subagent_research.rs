//! Seed 001, "context isolation with subagents": a concise `researcher` subagent with its own
//! prompt and tools; the main agent receives only its final report.
//!
//! `cargo run -p cairn-examples --example subagent_research`

use cairn::{DeepAgent, IntoTool, SubAgent, tool};
use serde_json::json;

/// Search the web (a stand-in that returns canned results).
#[tool]
fn web_search(query: String) -> String {
    format!("[1] {query}: survey (2024)\n[2] {query}: benchmark results\n[3] {query}: critique")
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // Demo models: the main agent delegates; the researcher (with a model of its own) searches,
    // then reports.
    let main_model = cairn_examples::chat_client(vec![(
        "task",
        json!({"description": "Research retrieval-augmented generation. Return the essential summary.", "subagent_type": "researcher"}),
    )]);
    let research_model = cairn_examples::chat_client(vec![(
        "web_search",
        json!({"query": "retrieval-augmented generation"}),
    )]);
    let researcher = SubAgent::new("researcher", "Conducts research on a topic")
        .model(research_model)
        .system_prompt(
            "You are a research assistant.\n\
             IMPORTANT: Return only the essential summary (under 500 words).\n\
             Do NOT include raw search results or detailed tool outputs.",
        )
        .tools([web_search.into_tool()]);
    let agent = DeepAgent::builder()
        .model(main_model)
        .subagent(researcher)
        .build()?;
    let response = agent.run("What is RAG and does it work?").await?;
    println!("{}", response.text());
    let calls: Vec<String> = response.function_calls().map(|c| c.name.clone()).collect();
    println!("(main agent's own tool calls: {calls:?})");
    Ok(())
}
