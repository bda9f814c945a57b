//! Wire-level tests of the Anthropic client against a scripted local server (no internet).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use cairn_core::{
    Agent, ChatClient, ChatErrorKind, ChatOptions, ChatRequest, ChatResponse, Content,
    FinishReason, FunctionCall, FunctionResult, Kwargs, Message, ResponseAssembler, Role,
    ToolChoice, ToolSpec, UpdateEvent, Usage,
};
use cairn_providers::{AnthropicClient, RetryPolicy};
use futures::StreamExt;
use serde_json::{Value, json};
use support::*;

const KEY: &str = "sk-ant-SECRET-0123456789";

fn root(s: &TestServer) -> String {
    format!("http://127.0.0.1:{}", s.port)
}

fn client(s: &TestServer) -> AnthropicClient {
    AnthropicClient::builder()
        .base_url(root(s))
        .api_key(KEY)
        .model("claude-test")
        .timeout(Duration::from_secs(10))
        .retry_policy(RetryPolicy {
            max_retries: 2,
            initial_backoff: Duration::from_millis(1),
            max_backoff: Duration::from_millis(5),
            max_retry_after: Duration::from_secs(1),
            retry_first_byte_timeouts: false,
        })
        .build()
        .unwrap()
}

fn sse(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap()))
        .collect()
}

/// A message with thinking, text and two tool calls, and its stream.
fn answer() -> (String, Vec<String>) {
    let plain = json!({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
        "content": [
            {"type": "thinking", "thinking": "let me see", "signature": "sig"},
            {"type": "text", "text": "Calling tools. "},
            {"type": "tool_use", "id": "toolu_1", "name": "echo", "input": {"text":"a"}},
            {"type": "tool_use", "id": "toolu_2", "name": "noargs", "input": {}},
            {"type": "server_tool_use_future", "whatever": 1}
        ],
        "stop_reason": "tool_use", "stop_sequence": null,
        "usage": {"input_tokens": 10, "output_tokens": 7, "cache_read_input_tokens": 5,
                  "cache_creation_input_tokens": null}
    });
    let events = sse(&[
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant",
            "model": "claude-test", "content": [], "stop_reason": null,
            "usage": {"input_tokens": 10, "output_tokens": 1, "cache_read_input_tokens": 5}}}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "let "}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "me see"}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "sig"}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "ping"}),
        json!({"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}}),
        json!({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Calling "}}),
        json!({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "tools. "}}),
        json!({"type": "content_block_stop", "index": 1}),
        json!({"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "echo", "input": {}}}),
        json!({"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": ""}}),
        json!({"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": "{\"text\""}}),
        json!({"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": ":\"a\"}"}}),
        json!({"type": "content_block_stop", "index": 2}),
        json!({"type": "content_block_start", "index": 3, "content_block": {"type": "tool_use", "id": "toolu_2", "name": "noargs", "input": {}}}),
        json!({"type": "content_block_stop", "index": 3}),
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null}, "usage": {"output_tokens": 7}}),
        json!({"type": "message_stop"}),
    ]);
    (plain.to_string(), events)
}

async fn fold(client: &AnthropicClient, msgs: &[Message], opts: &ChatOptions) -> ChatResponse {
    let k = Kwargs::new();
    let mut s = client.get_streaming_response(
        ChatRequest::new(msgs, opts)
            .with_function_invocation_kwargs(&k)
            .with_client_kwargs(&k),
    );
    let mut asm = ResponseAssembler::new();
    while let Some(u) = s.next().await {
        asm.push(&u.unwrap().event);
    }
    assert!(asm.is_finished());
    asm.finish()
}

#[tokio::test]
async fn request_shape() {
    let (plain, _) = answer();
    let server = TestServer::scripted(vec![Reply::ok(plain)]).await;
    let c = client(&server);
    let msgs = vec![
        Message::system("System note."),
        Message::user("first"),
        Message::new(
            Role::User,
            vec![Content::Image {
                url: "data:image/png;base64,iVBOR".into(),
                media_type: None,
            }],
        ),
        Message::new(
            Role::Assistant,
            vec![
                Content::text("I'll call."),
                Content::FunctionCall(FunctionCall::new("toolu_9", "echo", &json!({"text": "x"}))),
                Content::FunctionCall(FunctionCall {
                    call_id: "toolu_10".into(),
                    name: "echo".into(),
                    arguments: "{not json".into(),
                }),
            ],
        ),
        Message::tool_result(FunctionResult {
            call_id: "toolu_9".into(),
            output: vec![Content::text("echo:x")],
            is_error: false,
        }),
        Message::tool_result(FunctionResult {
            call_id: "toolu_10".into(),
            output: vec![Content::text("invalid arguments")],
            is_error: true,
        }),
    ];
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
    let fkw = Kwargs::from([("user_id", "SECRET-USER")]);
    c.get_response(ChatRequest::new(&msgs, &opts).with_function_invocation_kwargs(&fkw))
        .await
        .unwrap();
    let r = &server.requests()[0];
    assert_eq!(r.path, "/v1/messages");
    assert_eq!(r.header("x-api-key"), Some(KEY));
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

#[tokio::test]
async fn plain_and_streamed_answers_agree() {
    let server = TestServer::start(|r, _| {
        let (plain, events) = answer();
        if r.is_stream() {
            Reply::sse(&events, &[7, 1, 30])
        } else {
            Reply::ok(plain)
        }
    })
    .await;
    let c = client(&server);
    let msgs = [Message::user("go")];
    let opts = ChatOptions {
        max_tokens: Some(100),
        ..ChatOptions::default()
    };
    let plain = c
        .get_response(ChatRequest::new(&msgs, &opts))
        .await
        .unwrap();
    let streamed = fold(&c, &msgs, &opts).await;
    assert_eq!(plain, streamed);
    assert_eq!(server.requests()[1].json()["stream"], true);
    assert_eq!(server.requests()[1].json()["max_tokens"], 100);
    assert_eq!(plain.finish_reason, Some(FinishReason::ToolCalls));
    assert_eq!(plain.model.as_deref(), Some("claude-test"));
    assert_eq!(plain.response_id.as_deref(), Some("msg_1"));
    assert_eq!(
        plain.usage,
        Some(Usage {
            input_tokens: 15,
            output_tokens: 7,
            cached_input_tokens: 5
        })
    );
    assert_eq!(plain.text_content(), "Calling tools. ");
    let calls: Vec<_> = plain.function_calls().cloned().collect();
    assert_eq!(calls.len(), 2);
    assert_eq!(
        (calls[0].call_id.as_str(), calls[0].name.as_str()),
        ("toolu_1", "echo")
    );
    assert_eq!(
        serde_json::from_str::<Value>(&calls[0].arguments).unwrap(),
        json!({"text": "a"})
    );
    assert_eq!(calls[1].arguments, "{}");
    assert!(
        plain.messages[0]
            .contents
            .iter()
            .any(|c| matches!(c, Content::Reasoning { text } if text == "let me see"))
    );
}

fn err_body(kind: &str, message: &str) -> String {
    json!({"type": "error", "error": {"type": kind, "message": message}}).to_string()
}

#[tokio::test]
async fn errors_are_typed_and_retried() {
    let (plain, _) = answer();
    let server = TestServer::scripted(vec![
        Reply::status(529, err_body("overloaded_error", "Overloaded")),
        Reply::status(429, err_body("rate_limit_error", "slow down"))
            .with_header("retry-after", "0"),
        Reply::ok(plain),
        Reply::status(
            400,
            err_body(
                "invalid_request_error",
                "prompt is too long: 210000 tokens > 200000 maximum",
            ),
        ),
        Reply::status(401, err_body("authentication_error", "invalid x-api-key")),
        Reply::status(529, err_body("overloaded_error", "Overloaded")),
        Reply::status(529, err_body("overloaded_error", "Overloaded")),
        Reply::status(529, err_body("overloaded_error", "Overloaded")),
    ])
    .await;
    let c = client(&server);
    let msgs = [Message::user("go")];
    let o = ChatOptions::default();
    let k = Kwargs::new();
    assert!(
        c.get_response(
            ChatRequest::new(&msgs, &o)
                .with_function_invocation_kwargs(&k)
                .with_client_kwargs(&k)
        )
        .await
        .is_ok()
    );
    assert_eq!(server.requests().len(), 3);

    let e = c
        .get_response(
            ChatRequest::new(&msgs, &o)
                .with_function_invocation_kwargs(&k)
                .with_client_kwargs(&k),
        )
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ChatErrorKind::ContextOverflow);
    assert!(e.message().contains("prompt is too long"));
    assert_eq!(
        server.requests().len(),
        4,
        "context overflow is not retried"
    );

    let e = c
        .get_response(
            ChatRequest::new(&msgs, &o)
                .with_function_invocation_kwargs(&k)
                .with_client_kwargs(&k),
        )
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ChatErrorKind::Auth);
    assert_eq!(e.status(), Some(401));
    assert!(!e.to_string().contains(KEY));

    let e = c
        .get_response(
            ChatRequest::new(&msgs, &o)
                .with_function_invocation_kwargs(&k)
                .with_client_kwargs(&k),
        )
        .await
        .unwrap_err();
    assert_eq!(e.status(), Some(529));
    assert!(e.is_retryable());
    assert!(e.message().contains("overloaded_error"), "{e}");
    assert_eq!(server.requests().len(), 8, "529 retried twice");
}

#[tokio::test]
async fn stream_error_event() {
    let events = sse(&[
        json!({"type": "message_start", "message": {"id": "m", "model": "claude-test", "usage": {"input_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}}),
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    ]);
    let server = TestServer::scripted(vec![Reply::sse(&events, &[5])]).await;
    let c = client(&server);
    let msgs = [Message::user("go")];
    let (o, k) = (ChatOptions::default(), Kwargs::new());
    let mut s = c.get_streaming_response(
        ChatRequest::new(&msgs, &o)
            .with_function_invocation_kwargs(&k)
            .with_client_kwargs(&k),
    );
    let mut saw_text = false;
    let mut err = None;
    while let Some(u) = s.next().await {
        match u {
            Ok(u) => saw_text |= matches!(u.event, UpdateEvent::TextDelta { .. }),
            Err(e) => err = Some(e),
        }
    }
    assert!(saw_text);
    let e = err.expect("an error");
    assert!(e.is_retryable() && e.message().contains("overloaded_error"));
}

#[test]
fn key_never_printed() {
    let c = AnthropicClient::builder()
        .api_key(KEY)
        .model("m")
        .build()
        .unwrap();
    assert!(!format!("{c:?}").contains(KEY));
    assert_eq!(c.describe(), "anthropic:m");
    let b = AnthropicClient::builder().api_key(KEY);
    assert!(!format!("{b:?}").contains(KEY));
}

fn run_child(env: &[(&str, &str)]) -> bool {
    run_child_test(
        "child_resolve",
        &["ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "ANTHROPIC_MODEL"],
        env,
    )
}

/// Only does something in the child process of `resolves_from_env`.
#[tokio::test]
async fn child_resolve() {
    if std::env::var("CAIRN_CHILD").is_err() {
        return;
    }
    let r = cairn_providers::client_for_model("anthropic:claude-x");
    if std::env::var("EXPECT").as_deref() == Ok("missing") {
        let e = r.err().unwrap();
        assert_eq!(e.kind(), ChatErrorKind::Config);
        assert!(e.message().contains("ANTHROPIC_API_KEY"));
        assert!(cairn_providers::AnthropicClient::from_env().is_err());
        return;
    }
    let c = r.unwrap();
    assert_eq!(c.describe(), "anthropic:claude-x");
    let resp = c
        .get_response(ChatRequest::new(
            &[Message::user("hi")],
            &ChatOptions::default(),
        ))
        .await
        .unwrap();
    assert_eq!(resp.text_content(), "Calling tools. ");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resolves_from_env() {
    let (plain, _) = answer();
    let server = TestServer::scripted(vec![Reply::ok(plain)]).await;
    let url = root(&server);
    let ok = tokio::task::spawn_blocking(move || {
        run_child(&[("ANTHROPIC_API_KEY", KEY), ("ANTHROPIC_BASE_URL", &url)])
    })
    .await
    .unwrap();
    assert!(ok, "the child with a key failed");
    let r = &server.requests()[0];
    assert_eq!(r.header("x-api-key"), Some(KEY));
    assert_eq!(r.json()["model"], "claude-x");
    let missing = tokio::task::spawn_blocking(|| run_child(&[("EXPECT", "missing")]))
        .await
        .unwrap();
    assert!(missing, "the child without a key failed");
}

// --- agent end to end -------------------------------------------------------------------------

fn agent_reply(r: &Recorded) -> Reply {
    let body = r.json();
    let results = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .filter(|b| b["type"] == "tool_result")
        .count();
    let (content, stop) = if results == 0 {
        (
            json!([{"type": "text", "text": "step 0"},
                   {"type": "tool_use", "id": "toolu_a", "name": "echo", "input": {"text": "hi"}}]),
            "tool_use",
        )
    } else {
        (json!([{"type": "text", "text": "done"}]), "end_turn")
    };
    if body["stream"] == true {
        let mut ev = vec![
            json!({"type": "message_start", "message": {"id": "m", "model": "claude-test", "usage": {"input_tokens": 11, "output_tokens": 1}}}),
        ];
        for (i, b) in content.as_array().unwrap().iter().enumerate() {
            if b["type"] == "text" {
                ev.push(json!({"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}}));
                ev.push(json!({"type": "content_block_delta", "index": i, "delta": {"type": "text_delta", "text": b["text"]}}));
            } else {
                ev.push(json!({"type": "content_block_start", "index": i, "content_block": {"type": "tool_use", "id": b["id"], "name": b["name"], "input": {}}}));
                ev.push(json!({"type": "content_block_delta", "index": i, "delta": {"type": "input_json_delta", "partial_json": b["input"].to_string()}}));
            }
            ev.push(json!({"type": "content_block_stop", "index": i}));
        }
        ev.push(json!({"type": "message_delta", "delta": {"stop_reason": stop}, "usage": {"output_tokens": 3}}));
        ev.push(json!({"type": "message_stop"}));
        Reply::sse(&sse(&ev), &[9, 2])
    } else {
        Reply::ok(
            json!({"id": "m", "type": "message", "model": "claude-test", "content": content,
                   "stop_reason": stop, "usage": {"input_tokens": 11, "output_tokens": 3}})
            .to_string(),
        )
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_tool_loop() {
    let server = TestServer::start(|r, _| agent_reply(r)).await;
    let calls = Arc::new(AtomicUsize::new(0));
    let echo = echo_tool(calls.clone());
    let agent = Agent::builder(client(&server))
        .instructions("Use the tool.")
        .tool(echo)
        .build();
    let (plain, streamed) = run_plain_and_streamed(&agent).await;
    assert_eq!(plain.last_text().as_deref(), Some("done"));
    assert_eq!(plain.model_calls, 2);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(streamed, plain);
    let reqs = server.requests();
    assert_eq!(reqs.len(), 4);
    let second = reqs[1].json();
    assert_eq!(second["system"], "Use the tool.");
    let m = second["messages"].as_array().unwrap();
    assert_eq!(m.len(), 3);
    assert_eq!(m[2]["content"][0]["tool_use_id"], "toolu_a");
    assert_eq!(m[2]["content"][0]["content"], "echo:hi");
    assert!(reqs.iter().all(|r| !r.text().contains("SECRET-USER")));
}
