//! Issue #16 item 14: a model reply with duplicate (or empty) tool-call ids. Every call is
//! executed and answered under an id of its own, consistently in the kept assistant message and
//! in its result.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};

use cairn_core::testing::{RecordedRequest, ScriptedClient};
use cairn_core::{
    Agent, AgentEventKind, ChatResponse, Content, FnTool, FunctionCall, Message, Role, ToolOutput,
};
use futures::StreamExt;
use serde_json::json;

/// `echo(text)`: returns its argument and records it.
fn echo_tool(seen: Arc<Mutex<Vec<String>>>) -> FnTool {
    FnTool::new(
        "echo",
        "Echo the text back.",
        json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
        move |ctx| {
            let seen = Arc::clone(&seen);
            async move {
                let t = ctx.arguments["text"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                seen.lock().unwrap().push(t.clone());
                Ok(ToolOutput::text(t))
            }
        },
    )
}

/// A model whose first reply calls `echo` once per `(id, text)`, then answers "done".
fn client(calls: &'static [(&'static str, &'static str)]) -> ScriptedClient {
    ScriptedClient::new(move |req: &RecordedRequest| {
        Ok(if req.tool_results() == 0 {
            let contents = calls
                .iter()
                .map(|(id, text)| {
                    Content::FunctionCall(FunctionCall::new(*id, "echo", &json!({ "text": text })))
                })
                .collect();
            ChatResponse {
                messages: vec![Message::new(Role::Assistant, contents)],
                ..Default::default()
            }
        } else {
            ChatResponse::text("done")
        })
    })
}

/// `(call id, text)` pairs.
type Pairs = Vec<(String, String)>;

/// The (id, text) of every call in the assistant messages and of every result.
fn calls_and_results(messages: &[Message]) -> (Pairs, Pairs) {
    let calls = messages
        .iter()
        .flat_map(Message::function_calls)
        .map(|c| {
            let args: serde_json::Value = serde_json::from_str(&c.arguments).unwrap();
            (c.call_id.clone(), args["text"].as_str().unwrap().to_owned())
        })
        .collect();
    let results = messages
        .iter()
        .flat_map(Message::function_results)
        .map(|r| {
            let text: String = r
                .output
                .iter()
                .filter_map(|c| match c {
                    Content::Text { text } => Some(text.as_str()),
                    _ => None,
                })
                .collect();
            (r.call_id.clone(), text)
        })
        .collect();
    (calls, results)
}

fn pairs(v: &[(&str, &str)]) -> Pairs {
    v.iter()
        .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
        .collect()
}

#[tokio::test]
async fn duplicate_ids_are_renamed_and_each_call_answered() {
    static CALLS: &[(&str, &str)] = &[("call_1", "a"), ("call_1", "b"), ("call_1", "c")];
    let seen = Arc::new(Mutex::new(Vec::new()));
    let client = client(CALLS);
    let agent = Agent::builder(client.clone())
        .tool(echo_tool(Arc::clone(&seen)))
        .build();
    let response = agent.run("go").await.unwrap();
    assert_eq!(response.text(), "done");
    let mut ran = seen.lock().unwrap().clone();
    ran.sort();
    assert_eq!(ran, ["a", "b", "c"]);

    let expected = pairs(&[("call_1", "a"), ("call_1_2", "b"), ("call_1_3", "c")]);
    // What the model is sent next: each call once, each answered under its own id.
    let requests = client.requests();
    assert_eq!(requests.len(), 2);
    let (calls, results) = calls_and_results(&requests[1].messages);
    assert_eq!(calls, expected);
    assert_eq!(results, expected);
    // The run's messages (what a session keeps) agree.
    let (calls, results) = calls_and_results(&response.messages);
    assert_eq!(calls, expected);
    assert_eq!(results, expected);
}

#[tokio::test]
async fn streamed_run_renames_too() {
    // A duplicate, and a duplicate whose natural suffix is already taken.
    static CALLS: &[(&str, &str)] = &[("x", "b"), ("x", "c"), ("x_2", "d")];
    let seen = Arc::new(Mutex::new(Vec::new()));
    let client = client(CALLS);
    let agent = Agent::builder(client.clone())
        .tool(echo_tool(Arc::clone(&seen)))
        .build();
    let mut stream = agent.run("go").stream();
    let mut result_ids = Vec::new();
    while let Some(u) = stream.next().await {
        if let AgentEventKind::ToolResult(r) = &u.kind {
            result_ids.push(r.call_id.clone());
        }
    }
    assert_eq!(seen.lock().unwrap().len(), 3);
    let requests = client.requests();
    assert!(requests[0].streaming);
    let (calls, results) = calls_and_results(&requests[1].messages);
    let expected = pairs(&[("x", "b"), ("x_3", "c"), ("x_2", "d")]);
    assert_eq!(calls, expected);
    assert_eq!(results, expected);
    result_ids.sort();
    let mut want: Vec<String> = expected.into_iter().map(|(id, _)| id).collect();
    want.sort();
    assert_eq!(result_ids, want);
}

#[tokio::test]
async fn empty_ids_get_one() {
    static CALLS: &[(&str, &str)] = &[("", "a"), ("call_2", "b"), ("", "c"), ("", "d")];
    let seen = Arc::new(Mutex::new(Vec::new()));
    let client = client(CALLS);
    let agent = Agent::builder(client.clone())
        .tool(echo_tool(Arc::clone(&seen)))
        .build();
    agent.run("go").await.unwrap();
    assert_eq!(seen.lock().unwrap().len(), 4);
    let (calls, results) = calls_and_results(&client.requests()[1].messages);
    let expected = pairs(&[
        ("call_1", "a"),
        ("call_2", "b"),
        ("call_3", "c"),
        ("call_4", "d"),
    ]);
    assert_eq!(calls, expected);
    assert_eq!(results, expected);
}

#[tokio::test]
async fn unique_ids_are_left_alone() {
    static CALLS: &[(&str, &str)] = &[("call_a", "a"), ("call_b", "b")];
    let client = client(CALLS);
    let agent = Agent::builder(client.clone())
        .tool(echo_tool(Arc::default()))
        .build();
    agent.run("go").await.unwrap();
    let (calls, results) = calls_and_results(&client.requests()[1].messages);
    let expected = pairs(&[("call_a", "a"), ("call_b", "b")]);
    assert_eq!(calls, expected);
    assert_eq!(results, expected);
}
