//! Seed 001, "skills": only each `SKILL.md`'s frontmatter is read at start; the prompt lists the
//! skills, and the agent reads a skill's body with `read_file` when it is relevant.
//!
//! `cargo run -p cairn-examples --example deep_agent_skills`

use std::sync::Arc;

use cairn::{AgentSession, DeepAgent, StateBackend};
use serde_json::json;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let thread = AgentSession::new();
    StateBackend::insert_file(
        thread.state(),
        "/skills/research/literature-review/SKILL.md",
        "---\nname: literature-review\ndescription: Survey papers on a topic and summarize the consensus.\n---\n1. Search.\n2. Read abstracts.\n3. Summarize with citations.\n",
    )?;
    StateBackend::insert_file(
        thread.state(),
        "/skills/web-search/query-crafting/SKILL.md",
        "---\nname: query-crafting\ndescription: Turn a question into precise web search queries.\n---\nUse quotes and site: filters.\n",
    )?;

    // The demo model reads the relevant skill before answering, as the prompt tells it to.
    let client = cairn_examples::chat_client(vec![(
        "read_file",
        json!({"path": "/skills/research/literature-review/SKILL.md", "limit": 1000}),
    )]);
    let recorder = cairn_examples::Recorder::wrap(client);
    let agent = DeepAgent::builder()
        .model(recorder.client())
        .backend(Arc::new(StateBackend::new()))
        .skills("/skills/research/")
        .skills("/skills/web-search/")
        .build()?;
    let response = agent
        .run("Review the literature on sleep and memory.")
        .session(&thread)
        .await?;
    let prompt = recorder.first_instructions();
    let skills = prompt
        .split("## Skills")
        .nth(1)
        .and_then(|rest| rest.split("\n\n## ").next())
        .unwrap_or_default();
    println!("--- skills section ---\n## Skills{skills}");
    println!("--- answer ---\n{}", response.text());
    Ok(())
}
