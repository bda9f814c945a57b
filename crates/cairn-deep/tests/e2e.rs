//! An agent whose scripted model writes, reads, edits and greps a file.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use cairn_core::{Agent, AgentSession, ChatResponse, testing::ScriptedClient};
use cairn_deep::backend::{FilesystemBackend, SharedBackend, StateBackend};
use cairn_deep::tools::filesystem_tools;
use serde_json::json;

fn script() -> ScriptedClient {
    ScriptedClient::from_responses([
        ChatResponse::tool_calls([(
            "write_file",
            json!({"path": "/report/draft.md", "content": "# Draft\nstatus: todo\n"}),
        )]),
        ChatResponse::tool_calls([("read_file", json!({"path": "/report/draft.md"}))]),
        ChatResponse::tool_calls([(
            "edit_file",
            json!({"path": "/report/draft.md", "old_string": "status: todo", "new_string": "status: done"}),
        )]),
        ChatResponse::tool_calls([(
            "grep",
            json!({"pattern": "status: \\w+", "regex": true, "output_mode": "content"}),
        )]),
        ChatResponse::text("The draft is done."),
    ])
}

/// Runs the script and returns the tool results the model read, in order.
async fn run(backend: SharedBackend, session: &AgentSession) -> Vec<String> {
    let client = script();
    let agent = Agent::builder(client.clone())
        .tools(filesystem_tools(backend))
        .build();
    let response = agent
        .run("Write the report")
        .session(session)
        .await
        .unwrap();
    assert_eq!(response.last_text().as_deref(), Some("The draft is done."));
    assert_eq!(client.requests().len(), 5);
    response
        .messages
        .iter()
        .flat_map(|m| m.function_results())
        .map(|r| {
            assert!(!r.is_error, "{r:?}");
            r.output
                .iter()
                .filter_map(|c| match c {
                    cairn_core::Content::Text { text } => Some(text.clone()),
                    _ => None,
                })
                .collect()
        })
        .collect()
}

const EXPECTED: [&str; 4] = [
    "Created /report/draft.md",
    "1\t# Draft\n2\tstatus: todo",
    "Replaced 1 occurrence in /report/draft.md",
    "/report/draft.md:2:status: done",
];

#[tokio::test]
async fn with_a_state_backend_files_end_up_in_the_session() {
    let session = AgentSession::new();
    let results = run(Arc::new(StateBackend::new()), &session).await;
    assert_eq!(results, EXPECTED);
    let files = StateBackend::files(session.state());
    assert_eq!(files["/report/draft.md"].content, "# Draft\nstatus: done\n");
    // …and they survive a save/restore of the session.
    let restored = AgentSession::from_json(&session.to_json().unwrap()).unwrap();
    assert_eq!(
        StateBackend::files(restored.state())["/report/draft.md"].content,
        "# Draft\nstatus: done\n"
    );
}

#[tokio::test]
async fn with_a_filesystem_backend_files_end_up_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let session = AgentSession::new();
    let results = run(
        Arc::new(FilesystemBackend::new(dir.path()).unwrap()),
        &session,
    )
    .await;
    assert_eq!(results, EXPECTED);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("report/draft.md")).unwrap(),
        "# Draft\nstatus: done\n"
    );
    assert!(!session.state().contains_key("files"));
}
