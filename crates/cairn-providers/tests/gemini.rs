//! Wire-level tests of the Gemini client against a scripted local server (no internet).
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
use cairn_providers::{GeminiClient, RetryPolicy};
use futures::StreamExt;
use serde_json::{Value, json};
use support::*;

const KEY: &str = "AIza-SECRET-0123456789";

fn root(s: &TestServer) -> String {
    format!("http://127.0.0.1:{}", s.port)
}

fn client(s: &TestServer) -> GeminiClient {
    GeminiClient::builder()
        .base_url(root(s))
        .api_key(KEY)
        .model("gemini-test")
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

fn is_stream(r: &Recorded) -> bool {
    r.path.contains(":streamGenerateContent")
}

fn sse(chunks: &[Value]) -> Vec<String> {
    chunks
        .iter()
        .map(|c| format!("data: {c}\r\n\r\n"))
        .collect()
}

fn chunk(parts: Value, finish: Option<&str>, usage: Option<Value>) -> Value {
    let mut cand = json!({"content": {"role": "model", "parts": parts}, "index": 0});
    if let Some(f) = finish {
        cand["finishReason"] = f.into();
    }
    let mut v =
        json!({"candidates": [cand], "modelVersion": "gemini-test-001", "responseId": "resp_1"});
    if let Some(u) = usage {
        v["usageMetadata"] = u;
    }
    v
}

/// An answer with thought, text and two function calls, and its stream.
fn answer() -> (String, Vec<String>) {
    let usage = json!({"promptTokenCount": 12, "candidatesTokenCount": 6, "thoughtsTokenCount": 2,
                       "cachedContentTokenCount": 4, "totalTokenCount": 20});
    let plain = chunk(
        json!([
            {"text": "thinking...", "thought": true},
            {"text": "Calling tools. "},
            {"functionCall": {"name": "echo", "args": {"text": "a"}}},
            {"functionCall": {"name": "noargs", "args": {}}},
            {"futurePart": {"x": 1}}
        ]),
        Some("STOP"),
        Some(usage.clone()),
    );
    let events = sse(&[
        chunk(
            json!([{"text": "thinking...", "thought": true}]),
            None,
            None,
        ),
        chunk(json!([{"text": "Calling "}]), None, None),
        chunk(json!([{"text": "tools. "}]), None, None),
        chunk(
            json!([{"functionCall": {"name": "echo", "args": {"text": "a"}}},
                   {"functionCall": {"name": "noargs", "args": {}}}]),
            None,
            None,
        ),
        chunk(json!([]), Some("STOP"), Some(usage)),
    ]);
    (plain.to_string(), events)
}

async fn fold(c: &GeminiClient, msgs: &[Message], opts: &ChatOptions) -> ChatResponse {
    let k = Kwargs::new();
    let mut s = c.get_streaming_response(
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
                Content::FunctionCall(FunctionCall::new("call_0", "echo", &json!({"text": "x"}))),
                Content::FunctionCall(FunctionCall::new("call_1", "lookup", &json!({"q": 1}))),
            ],
        ),
        Message::tool_result(FunctionResult {
            call_id: "call_1".into(),
            output: vec![Content::text("not found")],
            is_error: true,
        }),
        Message::tool_result(FunctionResult {
            call_id: "call_0".into(),
            output: vec![Content::text("echo:x")],
            is_error: false,
        }),
    ];
    let opts = ChatOptions {
        instructions: Some("Be brief.".into()),
        temperature: Some(0.5),
        top_p: Some(0.9),
        max_tokens: Some(99),
        stop: vec!["END".into()],
        seed: Some(7),
        tools: vec![
            ToolSpec::new(
                "echo",
                "Echo.",
                json!({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
                       "additionalProperties": false,
                       "properties": {"text": {"type": "string", "default": "x"}},
                       "required": ["text"]}),
            ),
            ToolSpec::new("lookup", "", json!({"type": "object", "properties": {}})),
        ],
        tool_choice: Some(ToolChoice::Tool("echo".into())),
        ..ChatOptions::default()
    };
    let fkw = Kwargs::from([("user_id", "SECRET-USER")]);
    c.get_response(ChatRequest::new(&msgs, &opts).with_function_invocation_kwargs(&fkw))
        .await
        .unwrap();
    let r = &server.requests()[0];
    assert_eq!(r.path, "/v1beta/models/gemini-test:generateContent");
    assert_eq!(r.header("x-goog-api-key"), Some(KEY));
    assert_eq!(r.header("authorization"), None);
    assert!(!r.path.contains(KEY));
    assert!(!r.text().contains("SECRET-USER") && !r.text().contains("user_id"));
    let b = r.json();
    assert_eq!(
        b["systemInstruction"],
        json!({"parts": [{"text": "Be brief.\n\nSystem note."}]})
    );
    assert_eq!(
        b["generationConfig"],
        json!({"temperature": 0.5, "topP": 0.8999999761581421, "maxOutputTokens": 99,
               "stopSequences": ["END"], "seed": 7})
    );
    assert_eq!(
        b["tools"],
        json!([{"functionDeclarations": [
            {"name": "echo", "description": "Echo.",
             "parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}},
            {"name": "lookup"}
        ]}])
    );
    assert_eq!(
        b["toolConfig"],
        json!({"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["echo"]}})
    );
    let c = b["contents"].as_array().unwrap();
    assert_eq!(c.len(), 3, "{c:?}");
    assert_eq!(c[0]["role"], "user");
    assert_eq!(
        c[0]["parts"],
        json!([{"text": "first"}, {"inlineData": {"mimeType": "image/png", "data": "iVBOR"}}])
    );
    assert_eq!(c[1]["role"], "model");
    assert_eq!(
        c[1]["parts"][1],
        json!({"functionCall": {"name": "echo", "args": {"text": "x"}}})
    );
    assert_eq!(c[2]["role"], "user");
    assert_eq!(
        c[2]["parts"],
        json!([
            {"functionResponse": {"name": "lookup", "response": {"error": "not found"}}},
            {"functionResponse": {"name": "echo", "response": {"result": "echo:x"}}}
        ])
    );
}

#[tokio::test]
async fn plain_and_streamed_answers_agree() {
    let server = TestServer::start(|r, _| {
        let (plain, events) = answer();
        if is_stream(r) {
            Reply::sse(&events, &[7, 1, 30])
        } else {
            Reply::ok(plain)
        }
    })
    .await;
    let c = client(&server);
    // Two calls earlier in the conversation: new ids continue the numbering.
    let msgs = [
        Message::user("go"),
        Message::new(
            Role::Assistant,
            vec![
                Content::FunctionCall(FunctionCall::new("call_0", "echo", &json!({}))),
                Content::FunctionCall(FunctionCall::new("call_1", "echo", &json!({}))),
            ],
        ),
        Message::tool_result(FunctionResult {
            call_id: "call_0".into(),
            output: vec![Content::text("a")],
            is_error: false,
        }),
        Message::tool_result(FunctionResult {
            call_id: "call_1".into(),
            output: vec![Content::text("b")],
            is_error: false,
        }),
    ];
    let opts = ChatOptions::default();
    let plain = c
        .get_response(ChatRequest::new(&msgs, &opts))
        .await
        .unwrap();
    let streamed = fold(&c, &msgs, &opts).await;
    assert_eq!(plain, streamed);
    let reqs = server.requests();
    assert_eq!(
        reqs[1].path,
        "/v1beta/models/gemini-test:streamGenerateContent?alt=sse"
    );
    assert_eq!(reqs[1].header("accept"), Some("text/event-stream"));
    assert_eq!(plain.finish_reason, Some(FinishReason::ToolCalls));
    assert_eq!(plain.model.as_deref(), Some("gemini-test-001"));
    assert_eq!(plain.response_id.as_deref(), Some("resp_1"));
    assert_eq!(
        plain.usage,
        Some(Usage {
            input_tokens: 12,
            output_tokens: 8,
            cached_input_tokens: 4
        })
    );
    assert_eq!(plain.text_content(), "Calling tools. ");
    let calls: Vec<_> = plain.function_calls().cloned().collect();
    assert_eq!(calls.len(), 2);
    assert_eq!(
        (calls[0].call_id.as_str(), calls[0].name.as_str()),
        ("call_2", "echo")
    );
    assert_eq!(
        serde_json::from_str::<Value>(&calls[0].arguments).unwrap(),
        json!({"text": "a"})
    );
    assert_eq!(
        (calls[1].call_id.as_str(), calls[1].arguments.as_str()),
        ("call_3", "{}")
    );
    assert!(
        plain.messages[0]
            .contents
            .iter()
            .any(|c| matches!(c, Content::Reasoning { text } if text == "thinking..."))
    );
}

#[tokio::test]
async fn finish_reasons_and_blocked_prompts() {
    let server = TestServer::scripted(vec![
        Reply::ok(chunk(json!([{"text": "cut"}]), Some("MAX_TOKENS"), None).to_string()),
        Reply::ok(chunk(json!([]), Some("SAFETY"), None).to_string()),
        Reply::ok(json!({"promptFeedback": {"blockReason": "SAFETY"}}).to_string()),
        Reply::ok(
            chunk(
                json!([{"text": "x"}]),
                Some("MALFORMED_FUNCTION_CALL"),
                None,
            )
            .to_string(),
        ),
    ])
    .await;
    let c = client(&server);
    let (m, o, k) = ([Message::user("go")], ChatOptions::default(), Kwargs::new());
    let fr = |r: ChatResponse| r.finish_reason;
    assert_eq!(
        fr(c.get_response(
            ChatRequest::new(&m, &o)
                .with_function_invocation_kwargs(&k)
                .with_client_kwargs(&k)
        )
        .await
        .unwrap()),
        Some(FinishReason::Length)
    );
    assert_eq!(
        fr(c.get_response(
            ChatRequest::new(&m, &o)
                .with_function_invocation_kwargs(&k)
                .with_client_kwargs(&k)
        )
        .await
        .unwrap()),
        Some(FinishReason::ContentFilter)
    );
    assert_eq!(
        fr(c.get_response(
            ChatRequest::new(&m, &o)
                .with_function_invocation_kwargs(&k)
                .with_client_kwargs(&k)
        )
        .await
        .unwrap()),
        Some(FinishReason::ContentFilter)
    );
    assert_eq!(
        fr(c.get_response(
            ChatRequest::new(&m, &o)
                .with_function_invocation_kwargs(&k)
                .with_client_kwargs(&k)
        )
        .await
        .unwrap()),
        Some(FinishReason::Other("MALFORMED_FUNCTION_CALL".into()))
    );
}

fn err_body(code: u16, status: &str, message: &str) -> String {
    json!({"error": {"code": code, "message": message, "status": status}}).to_string()
}

#[tokio::test]
async fn errors_are_typed_and_retried() {
    let (plain, _) = answer();
    let server = TestServer::scripted(vec![
        Reply::status(503, err_body(503, "UNAVAILABLE", "The model is overloaded.")),
        Reply::status(429, err_body(429, "RESOURCE_EXHAUSTED", "Quota exceeded"))
            .with_header("retry-after", "0"),
        Reply::ok(plain),
        Reply::status(
            400,
            err_body(
                400,
                "INVALID_ARGUMENT",
                "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).",
            ),
        ),
        Reply::status(401, err_body(401, "UNAUTHENTICATED", "API key not valid")),
    ])
    .await;
    let c = client(&server);
    let (m, o, k) = ([Message::user("go")], ChatOptions::default(), Kwargs::new());
    assert!(
        c.get_response(
            ChatRequest::new(&m, &o)
                .with_function_invocation_kwargs(&k)
                .with_client_kwargs(&k)
        )
        .await
        .is_ok()
    );
    assert_eq!(server.requests().len(), 3);

    let e = c
        .get_response(
            ChatRequest::new(&m, &o)
                .with_function_invocation_kwargs(&k)
                .with_client_kwargs(&k),
        )
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ChatErrorKind::ContextOverflow);
    assert!(e.message().contains("INVALID_ARGUMENT"), "{e}");
    assert_eq!(server.requests().len(), 4);

    let e = c
        .get_response(
            ChatRequest::new(&m, &o)
                .with_function_invocation_kwargs(&k)
                .with_client_kwargs(&k),
        )
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ChatErrorKind::Auth);
    assert!(!e.to_string().contains(KEY));
    assert_eq!(server.requests().len(), 5);
}

#[tokio::test]
async fn stream_error_chunk() {
    let events = sse(&[
        chunk(json!([{"text": "Hi"}]), None, None),
        json!({"error": {"code": 500, "message": "Internal error", "status": "INTERNAL"}}),
    ]);
    let server = TestServer::scripted(vec![Reply::sse(&events, &[5])]).await;
    let c = client(&server);
    let (m, o, k) = ([Message::user("go")], ChatOptions::default(), Kwargs::new());
    let mut s = c.get_streaming_response(
        ChatRequest::new(&m, &o)
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
    assert!(err.expect("an error").message().contains("Internal error"));
}

#[test]
fn key_never_printed() {
    let c = GeminiClient::builder()
        .api_key(KEY)
        .model("m")
        .build()
        .unwrap();
    assert!(!format!("{c:?}").contains(KEY));
    assert_eq!(c.describe(), "gemini:m");
    let b = GeminiClient::builder().api_key(KEY);
    assert!(!format!("{b:?}").contains(KEY));
}

fn run_child(env: &[(&str, &str)]) -> bool {
    run_child_test(
        "child_resolve",
        &[
            "GEMINI_API_KEY",
            "GOOGLE_API_KEY",
            "GEMINI_BASE_URL",
            "GEMINI_MODEL",
        ],
        env,
    )
}

/// Only does something in the child processes of `resolves_from_env`.
#[tokio::test]
async fn child_resolve() {
    if std::env::var("CAIRN_CHILD").is_err() {
        return;
    }
    let r = cairn_providers::client_for_model("gemini:gemini-x");
    if std::env::var("EXPECT").as_deref() == Ok("missing") {
        let e = r.err().unwrap();
        assert_eq!(e.kind(), ChatErrorKind::Config);
        assert!(e.message().contains("GEMINI_API_KEY"));
        assert!(GeminiClient::from_env().is_err());
        return;
    }
    let c = r.unwrap();
    assert_eq!(c.describe(), "gemini:gemini-x");
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
    let server = TestServer::scripted(vec![Reply::ok(plain.clone()), Reply::ok(plain)]).await;
    let url = root(&server);
    let u = url.clone();
    assert!(
        tokio::task::spawn_blocking(move || run_child(&[
            ("GEMINI_API_KEY", KEY),
            ("GEMINI_BASE_URL", &u)
        ]))
        .await
        .unwrap()
    );
    assert!(
        tokio::task::spawn_blocking(move || run_child(&[
            ("GOOGLE_API_KEY", "google-key"),
            ("GEMINI_BASE_URL", &url)
        ]))
        .await
        .unwrap()
    );
    let reqs = server.requests();
    assert_eq!(reqs[0].header("x-goog-api-key"), Some(KEY));
    assert_eq!(reqs[1].header("x-goog-api-key"), Some("google-key"));
    assert_eq!(reqs[0].path, "/v1beta/models/gemini-x:generateContent");
    assert!(
        tokio::task::spawn_blocking(|| run_child(&[("EXPECT", "missing")]))
            .await
            .unwrap()
    );
}

// --- agent end to end -------------------------------------------------------------------------

fn agent_reply(r: &Recorded) -> Reply {
    let body = r.json();
    let results = body["contents"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["parts"].as_array().cloned().unwrap_or_default())
        .filter(|p| p.get("functionResponse").is_some())
        .count();
    let usage = json!({"promptTokenCount": 11, "candidatesTokenCount": 3});
    let parts = if results == 0 {
        json!([{"text": "step 0"}, {"functionCall": {"name": "echo", "args": {"text": "hi"}}}])
    } else {
        json!([{"text": "done"}])
    };
    if is_stream(r) {
        let mut chunks: Vec<Value> = parts
            .as_array()
            .unwrap()
            .iter()
            .map(|p| chunk(json!([p]), None, None))
            .collect();
        chunks.push(chunk(json!([]), Some("STOP"), Some(usage)));
        Reply::sse(&sse(&chunks), &[9, 2])
    } else {
        Reply::ok(chunk(parts, Some("STOP"), Some(usage)).to_string())
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
    assert_eq!(
        second["systemInstruction"]["parts"][0]["text"],
        "Use the tool."
    );
    let c = second["contents"].as_array().unwrap();
    assert_eq!(c.len(), 3);
    assert_eq!(
        c[2]["parts"][0],
        json!({"functionResponse": {"name": "echo", "response": {"result": "echo:hi"}}})
    );
    assert!(reqs.iter().all(|r| !r.text().contains("SECRET-USER")));
}
