//! Anthropic-only wire-format tests (the request shape); the scenarios every
//! provider shares are in `main.rs`.

use cairn_core::{ChatOptions, FunctionCall, ToolChoice, ToolSpec};
use cairn_test_support::client::{ask_with_secret_kwargs, every_content, result};
use cairn_test_support::{Reply, TestServer};
use serde_json::json;

use super::{Anthropic, ProviderHarness, WireHarness};

#[tokio::test]
async fn request_shape() {
    let (plain, _) = <Anthropic as WireHarness>::answer();
    let server = TestServer::scripted(vec![Reply::ok(plain)]).await;
    let c = Anthropic::client(&server);
    let bad_args = FunctionCall {
        call_id: "toolu_10".into(),
        name: "echo".into(),
        arguments: "{not json".into(),
    };
    let msgs = every_content(
        vec![
            FunctionCall::new("toolu_9", "echo", &json!({"text": "x"})),
            bad_args,
        ],
        vec![
            result("toolu_9", "echo:x", false),
            result("toolu_10", "invalid arguments", true),
        ],
    );
    let opts = ChatOptions {
        instructions: Some("Be brief.".into()),
        temperature: Some(0.5),
        stop: vec!["END".into()],
        seed: Some(7),
        tools: vec![ToolSpec::new(
            "echo",
            "Echo.",
            json!({"type": "object", "properties": {"text": {"type": "string"}}}),
        )],
        tool_choice: Some(ToolChoice::Required),
        parallel_tool_calls: Some(false),
        ..ChatOptions::default()
    };
    ask_with_secret_kwargs(&c, &msgs, &opts).await.unwrap();
    let r = &server.requests()[0];
    assert_eq!(r.path, "/v1/messages");
    assert_eq!(r.header("x-api-key"), Some(Anthropic::KEY));
    assert_eq!(r.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(r.header("authorization"), None);
    assert!(!r.text().contains("SECRET-USER") && !r.text().contains("user_id"));
    let b = r.json();
    assert_eq!(b["model"], "claude-test");
    assert_eq!(b["max_tokens"], 4096);
    assert_eq!(b["system"], "Be brief.\n\nSystem note.");
    assert_eq!(b["stop_sequences"], json!(["END"]));
    assert!(b.get("seed").is_none() && b.get("stream").is_none());
    assert_eq!(
        b["tools"],
        json!([{"name": "echo", "description": "Echo.",
                "input_schema": {"type": "object", "properties": {"text": {"type": "string"}}}}])
    );
    assert_eq!(
        b["tool_choice"],
        json!({"type": "any", "disable_parallel_tool_use": true})
    );
    let m = b["messages"].as_array().unwrap();
    assert_eq!(m.len(), 3, "{m:?}");
    assert_eq!(m[0]["role"], "user");
    assert_eq!(m[0]["content"][0], json!({"type": "text", "text": "first"}));
    assert_eq!(
        m[0]["content"][1],
        json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBOR"}})
    );
    assert_eq!(m[1]["role"], "assistant");
    assert_eq!(
        m[1]["content"][1],
        json!({"type": "tool_use", "id": "toolu_9", "name": "echo", "input": {"text": "x"}})
    );
    assert_eq!(m[1]["content"][2]["input"], json!({}));
    assert_eq!(m[2]["role"], "user");
    assert_eq!(
        m[2]["content"],
        json!([
            {"type": "tool_result", "tool_use_id": "toolu_9", "content": "echo:x"},
            {"type": "tool_result", "tool_use_id": "toolu_10", "content": "invalid arguments", "is_error": true}
        ])
    );
}
