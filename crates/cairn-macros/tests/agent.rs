//! End to end: macro tools called by the agent loop.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use cairn_core::testing::{RecordedRequest, ScriptedClient};
use cairn_core::{Agent, ChatResponse, FunctionInvocationContext, FunctionResult, Kwargs, ToolSet};
use cairn_macros::{tool, tools};
use serde_json::json;

mod common;
use common::send_email;

/// An agent with `send_email` on a model that calls it with `arguments`, then answers `answer`;
/// the model, to read its requests.
fn email_agent(arguments: serde_json::Value, answer: &str) -> (ScriptedClient, Agent) {
    let client = ScriptedClient::from_responses([
        ChatResponse::tool_calls([("send_email", arguments)]),
        ChatResponse::text(answer),
    ]);
    let agent = Agent::builder(client.clone()).tool(send_email).build();
    (client, agent)
}

/// The first tool result the model saw in `request`.
fn first_result(request: &RecordedRequest) -> &FunctionResult {
    request
        .messages
        .iter()
        .flat_map(|m| m.function_results())
        .next()
        .unwrap()
}

/// Remember a topic.
#[tool]
async fn remember_topic(topic: String, ctx: &FunctionInvocationContext) -> String {
    match &ctx.session {
        Some(session) => {
            session.state().insert_value("topic", json!(topic));
            format!("Stored {topic:?} in session state.")
        }
        None => "No session available.".to_owned(),
    }
}

#[tokio::test]
async fn the_agent_loop_calls_a_macro_tool_with_kwargs() {
    let (client, agent) = email_agent(json!({"address": "finance@example.com"}), "Sent.");
    let response = agent
        .run("Email the launch update to finance@example.com")
        .function_invocation_kwargs(Kwargs::from([
            ("user_id", "user-123"),
            ("tenant", "contoso"),
        ]))
        .await
        .unwrap();
    assert_eq!(response.text(), "Sent.");

    let requests = client.requests();
    assert_eq!(requests.len(), 2);
    // The model saw the tool with a schema that has no context parameter.
    let spec = &requests[0].options.tools[0];
    assert_eq!(spec.name, "send_email");
    assert_eq!(spec.parameters["required"], json!(["address"]));
    assert!(!spec.parameters.to_string().contains("ctx"));
    // The tool's result (built from the kwargs) went back to the model.
    let result = first_result(&requests[1]);
    assert!(!result.is_error);
    assert_eq!(
        result.text(),
        "Queued email for finance@example.com from user-123 (contoso)"
    );
    // The kwargs bucket never reached the client.
    assert!(!requests[0].to_json().contains("user-123"));
    assert!(
        requests
            .iter()
            .all(|r| r.function_invocation_kwargs.is_empty())
    );
}

#[tokio::test]
async fn bad_arguments_become_an_error_result_and_the_run_goes_on() {
    let (client, agent) = email_agent(json!({"to": "x"}), "Sorry.");
    let response = agent.run("Email x").await.unwrap();
    assert_eq!(response.text(), "Sorry.");
    let requests = client.requests();
    let result = first_result(&requests[1]);
    assert!(result.is_error);
    assert!(result.text().contains("address"), "{}", result.text());
}

#[tokio::test]
async fn session_writes_are_visible_after_the_run() {
    let client = ScriptedClient::from_responses([
        ChatResponse::tool_calls([("remember_topic", json!({"topic": "budget review"}))]),
        ChatResponse::text("Noted."),
    ]);
    let agent = Agent::builder(client).tool(remember_topic).build();
    let session = agent.create_session();
    agent
        .run("Remember that the budget review is on Friday.")
        .session(&session)
        .await
        .unwrap();
    assert_eq!(
        session.state().get::<String>("topic").as_deref(),
        Some("budget review")
    );
}

struct Counter {
    n: AtomicU32,
}

#[tools]
impl Counter {
    /// Add to the counter.
    #[tool]
    fn add(&self, by: u32) -> u32 {
        self.n.fetch_add(by, Ordering::SeqCst) + by
    }
}

#[tokio::test]
async fn the_agent_loop_calls_a_tool_set() {
    let counter = Arc::new(Counter {
        n: AtomicU32::new(10),
    });
    let client = ScriptedClient::from_responses([
        ChatResponse::tool_calls([("add", json!({"by": 5})), ("add", json!({"by": 1}))]),
        ChatResponse::text("Done."),
    ]);
    let agent = Agent::builder(client)
        .tools(Arc::clone(&counter).tools())
        .build();
    let response = agent.run("Add").await.unwrap();
    assert_eq!(response.text(), "Done.");
    assert_eq!(counter.n.load(Ordering::SeqCst), 16);
}
