//! write_todos: whole-list replace in session state; parallel calls rejected.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use cairn_core::{
    Agent, AgentSession, ChatResponse, LoopConfig, SharedTool, testing::ScriptedClient,
};
use cairn_deep::tools::{TodoItem, TodoStatus, todo_tool};
use common::call_tool;
use serde_json::json;

fn item(content: &str, status: &str) -> serde_json::Value {
    json!({"content": content, "status": status})
}

#[tokio::test]
async fn replaces_the_whole_list_in_session_state() {
    let tool: SharedTool = Arc::new(todo_tool());
    let session = AgentSession::new();
    let out = call_tool(
        &tool,
        json!({"todos": [item("Plan", "completed"), item("Build", "in_progress"), item("Test", "pending")]}),
        Some(&session),
    )
    .await;
    assert!(!out.is_error);
    assert_eq!(
        out.text_content(),
        "Todo list updated:\n- [completed] Plan\n- [in_progress] Build\n- [pending] Test"
    );
    let out = call_tool(
        &tool,
        json!({"todos": [item("Ship", "pending")]}),
        Some(&session),
    )
    .await;
    assert_eq!(out.text_content(), "Todo list updated:\n- [pending] Ship");
    let stored: Vec<TodoItem> = session.state().get("todos").unwrap();
    assert_eq!(
        stored,
        [TodoItem {
            content: "Ship".into(),
            status: TodoStatus::Pending
        }]
    );
    // A status outside the enum is an argument error.
    let err = tool
        .invoke(&cairn_core::FunctionInvocationContext::new(
            tool.clone(),
            "c",
            json!({"todos": [item("x", "done")]}),
        ))
        .await;
    assert!(err.is_err());
}

const PARALLEL_ERROR: &str = "Error: write_todos was called more than once in one turn, so none of the calls was applied. Send a single write_todos call with the complete list.";

fn parallel_script() -> ScriptedClient {
    ScriptedClient::from_responses([
        ChatResponse::tool_calls([
            ("write_todos", json!({"todos": [item("A", "pending")]})),
            ("write_todos", json!({"todos": [item("B", "pending")]})),
        ]),
        ChatResponse::tool_calls([("write_todos", json!({"todos": [item("C", "in_progress")]}))]),
        ChatResponse::text("done"),
    ])
}

async fn run_parallel(with_guard: bool, concurrent: bool) -> (Vec<(String, bool)>, AgentSession) {
    let todos = todo_tool();
    let mut builder = Agent::builder(parallel_script()).loop_config(LoopConfig {
        concurrent_tool_calls: concurrent,
        ..LoopConfig::default()
    });
    if with_guard {
        builder = builder.middleware(todos.turn_guard());
    }
    let agent = builder.tool(todos).build();
    let session = AgentSession::new();
    let response = agent.run("plan").session(&session).await.unwrap();
    let results = response
        .messages
        .iter()
        .flat_map(|m| m.function_results())
        .map(|r| {
            let text: String = r
                .output
                .iter()
                .filter_map(|c| match c {
                    cairn_core::Content::Text { text } => Some(text.as_str()),
                    _ => None,
                })
                .collect();
            (text, r.is_error)
        })
        .collect();
    (results, session)
}

#[tokio::test]
async fn parallel_calls_are_rejected_by_the_turn_guard_even_when_run_in_sequence() {
    let (results, session) = run_parallel(true, false).await;
    assert_eq!(results[0], (PARALLEL_ERROR.to_string(), true));
    assert_eq!(results[1], (PARALLEL_ERROR.to_string(), true));
    assert_eq!(
        results[2],
        ("Todo list updated:\n- [in_progress] C".to_string(), false)
    );
    let stored: Vec<TodoItem> = session.state().get("todos").unwrap();
    assert_eq!(stored[0].content, "C");
}

#[tokio::test]
async fn parallel_calls_are_rejected_without_the_guard_when_run_concurrently() {
    let (results, session) = run_parallel(false, true).await;
    assert_eq!(results[0], (PARALLEL_ERROR.to_string(), true));
    assert_eq!(results[1], (PARALLEL_ERROR.to_string(), true));
    assert!(!results[2].1);
    let stored: Vec<TodoItem> = session.state().get("todos").unwrap();
    assert_eq!(stored[0].content, "C");
}
