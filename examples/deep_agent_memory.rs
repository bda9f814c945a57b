//! Seed 001, "memory": AGENTS.md-style files are always loaded into the system prompt; a path
//! starting with `~` is read from the host, the others from the agent's backend.
//!
//! `cargo run -p cairn-examples --example deep_agent_memory`

use std::sync::Arc;

use cairn::{AgentSession, DeepAgent, StateBackend};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // The project memory lives in the thread's files; the user's preferences on the host.
    let thread = AgentSession::new();
    StateBackend::insert_file(
        thread.state(),
        "/project/AGENTS.md",
        "# Conventions\n- Rust 2024, no unwrap outside tests.\n- Every change gets a test.\n",
    )?;
    let home = std::env::temp_dir().join("cairn-example-home");
    std::fs::create_dir_all(home.join(".deepagents"))?;
    std::fs::write(
        home.join(".deepagents/preferences.md"),
        "The user prefers concise answers.\n",
    )?;

    let recorder = cairn_examples::Recorder::wrap(cairn_examples::chat_client(vec![]));
    let agent = DeepAgent::builder()
        .model(recorder.client())
        .backend(Arc::new(StateBackend::new()))
        .memory("/project/AGENTS.md")
        .memory("~/.deepagents/preferences.md")
        .home_dir(&home)
        .build()?;
    let response = agent
        .run("Add a function to parse dates.")
        .session(&thread)
        .await?;
    let prompt = recorder.last_instructions();
    let memory = prompt
        .split("## Memory")
        .nth(1)
        .and_then(|rest| rest.split("\n\n## ").next())
        .unwrap_or_default();
    println!("--- memory section ---\n## Memory{memory}");
    println!("--- answer ---\n{}", response.text());
    Ok(())
}
