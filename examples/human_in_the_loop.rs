//! Human in the loop, durable: a deep agent whose `writer` subagent must ask before it writes a
//! file. Without an approval handler the run pauses at that call, the process can go away, and
//! a later process resumes the thread with the decision (SPEC R9, issue #10).
//!
//! `cargo run -p cairn-examples --example human_in_the_loop`

use std::sync::Arc;

use cairn::deep::backend::StateBackend;
use cairn::{AgentSession, Decision, DeepAgent, InterruptOn, SubAgent, ThreadCursor};
use serde_json::json;

fn agent() -> anyhow::Result<cairn::Agent> {
    // Demo models: the main agent delegates; the writer writes a file, then reports.
    let main_model = cairn_examples::chat_client(vec![(
        "task",
        json!({"description": "Write the release notes to /notes.md.", "subagent_type": "writer"}),
    )]);
    let writer_model = cairn_examples::chat_client(vec![(
        "write_file",
        json!({"path": "/notes.md", "content": "# 0.2\n- durable threads\n"}),
    )]);
    let writer = SubAgent::new("writer", "Writes documents")
        .model(writer_model)
        .system_prompt("You write concise documents.");
    Ok(DeepAgent::builder()
        .model(main_model)
        .subagent(writer)
        .interrupt_on("write_file", InterruptOn::default())
        .build()?)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = std::env::temp_dir().join(format!("cairn-hitl-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let db_path = dir.join("threads.db");
    let db_path = db_path.to_string_lossy();

    // First process: the run pauses at the subagent's write.
    let thread_id = {
        let db = cairn::persistence::open(&db_path).await?;
        let checkpointer = db.checkpointer();
        let thread = checkpointer.create_thread(None, Default::default()).await?;
        let cursor = ThreadCursor::new(Arc::clone(&checkpointer), thread.id.clone());
        let response = agent()?
            .run("Write the release notes.")
            .thread(cursor)
            .await?;
        for i in &response.interrupts {
            println!(
                "paused: {} {} (asked by the subagent at {}; interrupt {})",
                i.tool, i.arguments["path"], i.namespace, i.id
            );
        }
        db.close().await;
        thread.id
    };

    // A later process: reopen the database and approve.
    let db = cairn::persistence::open(&db_path).await?;
    let cursor = ThreadCursor::new(db.checkpointer(), thread_id);
    let pending = cursor.load().await?.interrupts;
    let session = AgentSession::new();
    let response = agent()?
        .resume(cursor)
        .session(&session)
        .decisions(pending.iter().map(|i| (i.id.clone(), Decision::Approve)))
        .await?;
    println!("{}", response.text());
    let files = StateBackend::files(session.state());
    if let Some(notes) = files.get("/notes.md") {
        println!("/notes.md:\n{}", notes.content);
    }
    db.close().await;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
