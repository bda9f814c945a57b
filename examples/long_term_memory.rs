//! Seed 001, "long-term memory": a composite backend routes `/memories/` to a store, so what
//! one thread saves there, the next thread can read; other files stay in their thread.
//!
//! `cargo run -p cairn-examples --example long_term_memory`

use std::sync::Arc;

use cairn::{AgentSession, CompositeBackend, DeepAgent, InMemoryStore, StateBackend, StoreBackend};
use serde_json::json;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let store = Arc::new(InMemoryStore::new());
    let backend =
        CompositeBackend::new(StateBackend::new()).route("/memories/", StoreBackend::new());
    let build = |demo: Vec<(&'static str, serde_json::Value)>| {
        DeepAgent::builder()
            .model(cairn_examples::chat_client(demo))
            .store(store.clone())
            .backend(Arc::new(backend.clone()))
            .system_prompt(
                "When users tell you their preferences, save them to /memories/user_preferences.txt \
                 so you remember them in future conversations.",
            )
            .build()
    };

    // Thread 1: the user states a preference; the agent saves it.
    let agent = build(vec![(
        "write_file",
        json!({"path": "/memories/user_preferences.txt", "content": "Prefers answers in bullet points.\n"}),
    )])?;
    agent
        .run("I like answers in bullet points.")
        .session(&AgentSession::new())
        .await?;

    // Thread 2, a new conversation: the agent reads what thread 1 saved.
    let agent = build(vec![(
        "read_file",
        json!({"path": "/memories/user_preferences.txt"}),
    )])?;
    let response = agent
        .run("How should you format answers for me?")
        .session(&AgentSession::new())
        .await?;
    println!("{}", response.text());
    Ok(())
}
