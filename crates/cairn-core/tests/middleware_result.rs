//! Middleware that neither calls `next` nor sets a result fails the run with a typed error
//! instead of producing an empty reply (issue #14).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use cairn_core::testing::ScriptedClient;
use cairn_core::{
    Agent, AgentContext, AgentNext, ChatContext, ChatNext, ChatResponse, Error, FnTool,
    FunctionInvocationContext, FunctionNext, MiddlewareKind, ToolOutput,
};
use serde_json::json;

fn missing(e: Error) -> MiddlewareKind {
    match e {
        Error::MissingResult(kind) => kind,
        other => panic!("expected Error::MissingResult, got {other:?}"),
    }
}

#[tokio::test]
async fn agent_middleware_without_next_or_result_is_an_error() {
    let client = ScriptedClient::from_responses([ChatResponse::text("unused")]);
    let agent = Agent::builder(client.clone())
        .middleware(|ctx: AgentContext, _next: AgentNext| async move { Ok(ctx) })
        .build();
    let e = agent.run("go").await.unwrap_err();
    assert_eq!(missing(e), MiddlewareKind::Agent);
    assert!(client.requests().is_empty(), "no model call was made");
}

#[tokio::test]
async fn chat_middleware_without_next_or_result_is_an_error() {
    let client = ScriptedClient::from_responses([ChatResponse::text("unused")]);
    let agent = Agent::builder(client.clone())
        .middleware(|ctx: ChatContext, _next: ChatNext| async move { Ok(ctx) })
        .build();
    let e = agent.run("go").await.unwrap_err();
    assert_eq!(missing(e), MiddlewareKind::Chat);
    assert!(client.requests().is_empty(), "the model was skipped");
    // The streaming run reports the same error.
    let e = agent.run("go").stream().final_response().await.unwrap_err();
    assert_eq!(missing(e), MiddlewareKind::Chat);
}

#[tokio::test]
async fn function_middleware_without_next_or_result_is_an_error() {
    let tool = FnTool::new(
        "noop",
        "Does nothing.",
        json!({"type": "object"}),
        |_| async { Ok(ToolOutput::text("ran")) },
    );
    let client = ScriptedClient::from_responses([
        ChatResponse::tool_calls([("noop", json!({}))]),
        ChatResponse::text("done"),
    ]);
    let agent = Agent::builder(client.clone())
        .tool(tool)
        .middleware(|ctx: FunctionInvocationContext, _next: FunctionNext| async move { Ok(ctx) })
        .build();
    let e = agent.run("go").await.unwrap_err();
    assert_eq!(missing(e), MiddlewareKind::Function);
    let text = Error::MissingResult(MiddlewareKind::Function).to_string();
    assert!(text.contains("function middleware") && text.contains("ctx.result"));
}

#[tokio::test]
async fn short_circuit_with_a_result_still_works() {
    let client = ScriptedClient::from_responses([]);
    let agent = Agent::builder(client.clone())
        .middleware(|mut ctx: ChatContext, _next: ChatNext| async move {
            ctx.result = Some(ChatResponse::text("cached"));
            Ok(ctx)
        })
        .build();
    assert_eq!(agent.run("go").await.unwrap().text(), "cached");
    assert!(client.requests().is_empty());
}
