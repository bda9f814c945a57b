//! Wire-level tests of the OpenAI client against a scripted local server (no internet).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use cairn_core::{
    ChatClient, ChatErrorKind, ChatOptions, ChatRequest, ChatResponse, Content, FinishReason,
    FunctionCall, FunctionResult, Kwargs, Message, ResponseAssembler, Role, ToolChoice, ToolSpec,
    UpdateEvent, Usage,
};
use cairn_providers::{Api, OpenAIClient, RetryPolicy};
use cairn_test_support::client::ask;
use cairn_test_support::openai::{chat_json, chat_sse, responses_json, responses_sse};
use cairn_test_support::{Reply, SPLITS, TestServer, Turn, split};
use futures::StreamExt;
use serde_json::{Value, json};

const KEY: &str = "sk-test-SECRET-0123456789";

thread_local! {
    /// Whether this test thread's clients use reqwest instead of the lean hyper transport.
    static USE_REQWEST: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

fn builder() -> cairn_providers::OpenAIClientBuilder {
    OpenAIClient::builder().hyper_http1(!USE_REQWEST.with(|c| c.get()))
}

/// Runs an async test body once per transport.
macro_rules! both_transports {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test]
            async fn hyper_http1() {
                super::USE_REQWEST.with(|c| c.set(false));
                super::$name().await
            }
            #[tokio::test]
            async fn reqwest() {
                super::USE_REQWEST.with(|c| c.set(true));
                super::$name().await
            }
        }
    )*};
}

both_transports!(
    chat_request_has_the_expected_wire_shape,
    responses_request_has_the_expected_wire_shape,
    streaming_requests_ask_for_usage_and_sse,
    chat_stream_equals_plain_response,
    responses_stream_equals_plain_response,
    stream_cut_off_midway_is_interrupted,
    malformed_json_is_a_decode_error,
    rate_limited_then_success_honours_retry_after,
    retries_are_bounded,
    context_overflow_is_distinct_and_not_retried,
    auth_error_never_shows_the_key,
    connect_errors_and_timeouts,
    in_stream_errors_are_typed,
);

fn client(server: &TestServer, api: Api) -> OpenAIClient {
    builder()
        .api_key(KEY)
        .base_url(server.url())
        .model("m-1")
        .api(api)
        .timeout(Duration::from_secs(10))
        .retry_policy(RetryPolicy {
            max_retries: 2,
            initial_backoff: Duration::from_millis(5),
            max_backoff: Duration::from_millis(20),
            max_retry_after: Duration::from_secs(5),
            retry_first_byte_timeouts: false,
        })
        .build()
        .unwrap()
}

fn conversation() -> Vec<Message> {
    vec![
        Message::user("What's the weather in Paris and Rome?"),
        Message::new(
            Role::Assistant,
            vec![
                Content::text("Let me check."),
                Content::FunctionCall(FunctionCall::new(
                    "call_a",
                    "weather",
                    &json!({"city": "Paris"}),
                )),
                Content::FunctionCall(FunctionCall::new(
                    "call_b",
                    "weather",
                    &json!({"city": "Rome"}),
                )),
            ],
        ),
        Message::tool_result(FunctionResult {
            call_id: "call_a".into(),
            output: vec![Content::text("sunny")],
            is_error: false,
        }),
        Message::tool_result(FunctionResult {
            call_id: "call_b".into(),
            output: vec![Content::text("rainy")],
            is_error: false,
        }),
        Message::new(
            Role::User,
            vec![
                Content::text("And this picture?"),
                Content::Image {
                    url: "data:image/png;base64,AAAA".into(),
                    media_type: Some("image/png".into()),
                },
            ],
        ),
    ]
}

fn options() -> ChatOptions {
    let mut o = ChatOptions {
        instructions: Some("You are terse.".into()),
        temperature: Some(0.5),
        max_tokens: Some(100),
        tools: vec![ToolSpec::new(
            "weather",
            "Weather of a city.",
            json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
        )],
        tool_choice: Some(ToolChoice::Auto),
        parallel_tool_calls: Some(true),
        ..Default::default()
    };
    o.additional_properties.insert("user".into(), json!("u-1"));
    o.additional_properties
        .insert("temperature".into(), json!(0.25));
    o
}

fn fn_kwargs() -> Kwargs {
    Kwargs::from([("db_password", "hunter2-FUNCTION-KWARG")])
}

fn client_kwargs() -> Kwargs {
    Kwargs::from([
        ("extra_headers", json!({"X-Trace": "t-1"})),
        ("extra_body", json!({"metadata": {"k": "v"}, "user": "u-2"})),
    ])
}

fn full_turn() -> Turn {
    Turn {
        text: Some("Héllo — wörld ✓ \"quoted\"\nline".into()),
        reasoning: Some("thinking… about ünicode".into()),
        calls: vec![
            (
                "call_1".into(),
                "weather".into(),
                json!({"city": "Paris", "note": "é✓"}).to_string(),
            ),
            (
                "call_2".into(),
                "weather".into(),
                json!({"city": "Rome"}).to_string(),
            ),
        ],
    }
}

async fn fold(
    client: &OpenAIClient,
    messages: &[Message],
    o: &ChatOptions,
) -> (ChatResponse, Vec<UpdateEvent>) {
    let (fk, ck) = (Kwargs::new(), Kwargs::new());
    let mut s = client.get_streaming_response(
        ChatRequest::new(messages, o)
            .with_function_invocation_kwargs(&fk)
            .with_client_kwargs(&ck),
    );
    let mut a = ResponseAssembler::new();
    let mut events = Vec::new();
    while let Some(u) = s.next().await {
        let u = u.unwrap();
        a.push(&u.event);
        events.push(u.event);
    }
    assert!(a.is_finished());
    (a.finish(), events)
}

/// Sends `msgs` with `o` (empty kwargs) over Chat Completions, then over Responses, to a server
/// answering `text` on both; the two request bodies.
async fn ask_both_apis(msgs: &[Message], o: &ChatOptions, text: &str) -> (Value, Value) {
    let turn = Turn::text(text);
    let server = TestServer::start(move |r, _| {
        if r.path.ends_with("/responses") {
            Reply::ok(responses_json(&turn))
        } else {
            Reply::ok(chat_json(&turn))
        }
    })
    .await;
    for api in [Api::ChatCompletions, Api::Responses] {
        let c = client(&server, api);
        c.get_response(ChatRequest::new(msgs, o)).await.unwrap();
    }
    let reqs = server.requests();
    (reqs[0].json(), reqs[1].json())
}

async fn chat_request_has_the_expected_wire_shape() {
    let server = TestServer::scripted(vec![Reply::ok(chat_json(&Turn::text("ok")))]).await;
    let c = client(&server, Api::ChatCompletions);
    let r = c
        .get_response(
            ChatRequest::new(&conversation(), &options())
                .with_function_invocation_kwargs(&fn_kwargs())
                .with_client_kwargs(&client_kwargs()),
        )
        .await
        .unwrap();
    assert_eq!(r.text_content(), "ok");
    let reqs = server.requests();
    assert_eq!(reqs.len(), 1);
    let req = &reqs[0];
    assert_eq!(req.method, "POST");
    assert_eq!(req.path, "/v1/chat/completions");
    assert_eq!(
        req.header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert_eq!(req.header("x-trace"), Some("t-1"));
    assert!(
        !req.text().contains("hunter2"),
        "function kwargs leaked: {}",
        req.text()
    );
    let body = req.json();
    assert_eq!(
        body,
        json!({
            "model": "m-1",
            "messages": [
                {"role": "system", "content": "You are terse."},
                {"role": "user", "content": "What's the weather in Paris and Rome?"},
                {"role": "assistant", "content": "Let me check.", "tool_calls": [
                    {"id": "call_a", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Paris\"}"}},
                    {"id": "call_b", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Rome\"}"}}
                ]},
                {"role": "tool", "content": "sunny", "tool_call_id": "call_a"},
                {"role": "tool", "content": "rainy", "tool_call_id": "call_b"},
                {"role": "user", "content": [
                    {"type": "text", "text": "And this picture?"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
                ]}
            ],
            "max_completion_tokens": 100,
            "tools": [{"type": "function", "function": {"name": "weather", "description": "Weather of a city.",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}],
            "tool_choice": "auto",
            "parallel_tool_calls": true,
            "temperature": 0.25,
            "metadata": {"k": "v"},
            "user": "u-2"
        })
    );
}

async fn responses_request_has_the_expected_wire_shape() {
    let server = TestServer::scripted(vec![Reply::ok(responses_json(&Turn::text("ok")))]).await;
    let c = client(&server, Api::Responses);
    let mut o = options();
    o.tool_choice = Some(ToolChoice::Tool("weather".into()));
    let r = c
        .get_response(
            ChatRequest::new(&conversation(), &o).with_function_invocation_kwargs(&fn_kwargs()),
        )
        .await
        .unwrap();
    assert_eq!(r.text_content(), "ok");
    let req = &server.requests()[0];
    assert_eq!(req.path, "/v1/responses");
    assert!(!req.text().contains("hunter2"));
    assert_eq!(
        req.json(),
        json!({
            "model": "m-1",
            "instructions": "You are terse.",
            "input": [
                {"role": "user", "content": "What's the weather in Paris and Rome?"},
                {"role": "assistant", "content": "Let me check."},
                {"type": "function_call", "call_id": "call_a", "name": "weather", "arguments": "{\"city\":\"Paris\"}"},
                {"type": "function_call", "call_id": "call_b", "name": "weather", "arguments": "{\"city\":\"Rome\"}"},
                {"type": "function_call_output", "call_id": "call_a", "output": "sunny"},
                {"type": "function_call_output", "call_id": "call_b", "output": "rainy"},
                {"role": "user", "content": [
                    {"type": "input_text", "text": "And this picture?"},
                    {"type": "input_image", "image_url": "data:image/png;base64,AAAA"}
                ]}
            ],
            "max_output_tokens": 100,
            "tools": [{"type": "function", "name": "weather", "description": "Weather of a city.",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
                "strict": false}],
            "tool_choice": {"type": "function", "name": "weather"},
            "parallel_tool_calls": true,
            "user": "u-1",
            "temperature": 0.25
        })
    );
}

async fn streaming_requests_ask_for_usage_and_sse() {
    let server = TestServer::start(|r, _| {
        if r.path.ends_with("/responses") {
            Reply::sse(&responses_sse(&Turn::text("ok"), false), &[100_000])
        } else {
            Reply::sse(&chat_sse(&Turn::text("ok"), false), &[100_000])
        }
    })
    .await;
    let o = ChatOptions::default();
    for api in [Api::ChatCompletions, Api::Responses] {
        let (r, _) = fold(&client(&server, api), &[Message::user("hi")], &o).await;
        assert_eq!(r.text_content(), "ok");
    }
    let reqs = server.requests();
    let chat = reqs[0].json();
    assert_eq!(chat["stream"], json!(true));
    assert_eq!(chat["stream_options"], json!({"include_usage": true}));
    assert_eq!(reqs[0].header("accept"), Some("text/event-stream"));
    assert_eq!(reqs[1].json()["stream"], json!(true));
    assert!(reqs[1].json().get("stream_options").is_none());
}

async fn check_stream_equals_plain(api: Api) {
    let turn = full_turn();
    let t2 = turn.clone();
    let split = std::sync::Arc::new(std::sync::Mutex::new(SPLITS[0]));
    let s2 = split.clone();
    let server = TestServer::start(move |r, _| {
        let sizes = *s2.lock().unwrap();
        match (api, r.is_stream()) {
            (Api::ChatCompletions, false) => Reply::ok(chat_json(&t2)),
            (Api::ChatCompletions, true) => Reply::sse(&chat_sse(&t2, true), sizes),
            (Api::Responses, false) => Reply::ok(responses_json(&t2)),
            (Api::Responses, true) => Reply::sse(&responses_sse(&t2, true), sizes),
        }
    })
    .await;
    let c = client(&server, api);
    let msgs = [Message::user("go")];
    let o = ChatOptions::default();
    let plain = c.get_response(ChatRequest::new(&msgs, &o)).await.unwrap();
    assert_eq!(plain.text_content(), turn.text.clone().unwrap());
    let contents = &plain.messages[0].contents;
    assert_eq!(
        contents[0],
        Content::Reasoning {
            text: turn.reasoning.clone().unwrap()
        }
    );
    let calls: Vec<_> = plain.function_calls().cloned().collect();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].call_id, "call_1");
    assert_eq!(calls[0].arguments, turn.calls[0].2);
    assert_eq!(calls[1].name, "weather");
    assert_eq!(plain.finish_reason, Some(FinishReason::ToolCalls));
    assert_eq!(
        plain.usage,
        Some(Usage {
            input_tokens: 11,
            output_tokens: 7,
            cached_input_tokens: 3
        })
    );
    assert_eq!(plain.model.as_deref(), Some("m-1"));
    assert!(plain.response_id.is_some());
    for sizes in SPLITS {
        *split.lock().unwrap() = sizes;
        let (streamed, events) = fold(&c, &msgs, &o).await;
        assert_eq!(streamed, plain, "split {sizes:?}");
        let starts = events
            .iter()
            .filter(|e| matches!(e, UpdateEvent::ToolCallStart { .. }))
            .count();
        assert_eq!(starts, 2);
        assert!(
            events
                .iter()
                .filter(|e| matches!(e, UpdateEvent::TextDelta { .. }))
                .count()
                > 1
        );
        assert!(matches!(events.last(), Some(UpdateEvent::Finished { .. })));
    }
    // One connection for all requests: keep-alive and bodies read to the end.
    assert_eq!(server.connections(), 1);
    assert_eq!(server.requests().len(), 1 + SPLITS.len());
}

async fn chat_stream_equals_plain_response() {
    check_stream_equals_plain(Api::ChatCompletions).await;
}

async fn responses_stream_equals_plain_response() {
    check_stream_equals_plain(Api::Responses).await;
}

async fn stream_error(c: &OpenAIClient) -> (Vec<UpdateEvent>, cairn_core::ChatError) {
    let (fk, ck, o) = (Kwargs::new(), Kwargs::new(), ChatOptions::default());
    let msgs = [Message::user("go")];
    let mut s = c.get_streaming_response(
        ChatRequest::new(&msgs, &o)
            .with_function_invocation_kwargs(&fk)
            .with_client_kwargs(&ck),
    );
    let mut events = Vec::new();
    while let Some(u) = s.next().await {
        match u {
            Ok(u) => events.push(u.event),
            Err(e) => {
                assert!(s.next().await.is_none(), "the stream ends after an error");
                return (events, e);
            }
        }
    }
    panic!("no error; events: {events:?}");
}

async fn stream_cut_off_midway_is_interrupted() {
    for api in [Api::ChatCompletions, Api::Responses] {
        let turn = Turn::text("a fairly long answer that will be cut");
        let events = match api {
            Api::ChatCompletions => chat_sse(&turn, false),
            Api::Responses => responses_sse(&turn, false),
        };
        let half = events.len() / 2;
        let first_half: String = events[..half].concat();
        // Socket closed without the terminating chunk.
        let cut = Reply::Sse {
            pieces: split(first_half.as_bytes(), &[9]),
            cut: true,
        };
        // A complete HTTP body whose SSE never finishes (no [DONE] / response.completed).
        let clean = Reply::sse(&events[..half], &[4]);
        // Cut inside an event's JSON.
        let mid = events[..half].concat() + &events[half][..events[half].len() / 2];
        let mid_json = Reply::Sse {
            pieces: vec![mid.into_bytes()],
            cut: false,
        };
        let server = TestServer::scripted(vec![cut, clean, mid_json]).await;
        let c = client(&server, api);
        for _ in 0..3 {
            let (events, e) = stream_error(&c).await;
            assert_eq!(e.kind(), ChatErrorKind::StreamInterrupted, "{api:?}: {e}");
            assert!(e.is_retryable());
            assert!(
                events
                    .iter()
                    .any(|e| matches!(e, UpdateEvent::TextDelta { .. }))
            );
        }
        // Retries happen before the first byte only.
        assert_eq!(server.requests().len(), 3);
    }
}

async fn malformed_json_is_a_decode_error() {
    let bad_chat = vec![
        chat_sse(&Turn::text("hi"), false)[0].clone(),
        "data: {\"choices\": [{\"delta\": {\"content\": \"x\"\n\n".to_owned(),
    ];
    let bad_resp = vec!["event: response.created\ndata: {not json}\n\n".to_owned()];
    let server = TestServer::scripted(vec![
        Reply::sse(&bad_chat, &[5]),
        Reply::ok("{\"choices\": [ {\"message\": "),
        Reply::sse(&bad_resp, &[3]),
        Reply::ok("<html>not json</html>"),
    ])
    .await;
    let c = client(&server, Api::ChatCompletions);
    let (_, e) = stream_error(&c).await;
    assert_eq!(e.kind(), ChatErrorKind::Decode, "{e}");
    let e = ask(&c, "x").await.unwrap_err();
    assert_eq!(e.kind(), ChatErrorKind::Decode);
    let c = client(&server, Api::Responses);
    let (_, e) = stream_error(&c).await;
    assert_eq!(e.kind(), ChatErrorKind::Decode);
    let e = ask(&c, "x").await.unwrap_err();
    assert_eq!(e.kind(), ChatErrorKind::Decode);
    assert!(e.to_string().contains("not json"));
}

const RATE_LIMIT: &str =
    r#"{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}"#;

async fn rate_limited_then_success_honours_retry_after() {
    for api in [Api::ChatCompletions, Api::Responses] {
        for stream in [false, true] {
            let ok = match (api, stream) {
                (Api::ChatCompletions, false) => Reply::ok(chat_json(&Turn::text("ok"))),
                (Api::ChatCompletions, true) => {
                    Reply::sse(&chat_sse(&Turn::text("ok"), false), &[7])
                }
                (Api::Responses, false) => Reply::ok(responses_json(&Turn::text("ok"))),
                (Api::Responses, true) => {
                    Reply::sse(&responses_sse(&Turn::text("ok"), false), &[7])
                }
            };
            let server = TestServer::scripted(vec![
                Reply::status(429, RATE_LIMIT).with_header("Retry-After", "1"),
                Reply::status(500, r#"{"error":{"message":"boom","type":"server_error"}}"#),
                ok,
            ])
            .await;
            let c = client(&server, api);
            let started = Instant::now();
            let text = if stream {
                fold(&c, &[Message::user("go")], &ChatOptions::default())
                    .await
                    .0
                    .text_content()
            } else {
                ask(&c, "go").await.unwrap().text_content()
            };
            assert_eq!(text, "ok");
            assert!(
                started.elapsed() >= Duration::from_millis(950),
                "Retry-After honoured"
            );
            let reqs = server.requests();
            assert_eq!(reqs.len(), 3);
            assert_eq!(reqs[0].body, reqs[2].body, "the same request is resent");
        }
    }
}

async fn retries_are_bounded() {
    let server = TestServer::scripted(vec![
        Reply::status(503, "upstream unavailable"),
        Reply::status(502, "").with_header("retry-after-ms", "10"),
        Reply::status(503, r#"{"error":{"message":"still down"}}"#),
        Reply::ok(chat_json(&Turn::text("never"))),
    ])
    .await;
    let c = client(&server, Api::ChatCompletions);
    let e = ask(&c, "go").await.unwrap_err();
    assert_eq!(e.kind(), ChatErrorKind::Status);
    assert_eq!(e.status(), Some(503));
    assert!(e.is_retryable());
    assert!(e.to_string().contains("still down"), "{e}");
    assert_eq!(server.requests().len(), 3);
}

async fn context_overflow_is_distinct_and_not_retried() {
    let openai = r#"{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#;
    let code_only = r#"{"error":{"message":"Input rejected.","type":"invalid_request_error","code":"context_length_exceeded"}}"#;
    let llama_cpp = r#"{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error"}}"#;
    let vllm = r#"{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens.","type":"BadRequestError","param":null,"code":400}"#;
    for api in [Api::ChatCompletions, Api::Responses] {
        for body in [openai, code_only, llama_cpp, vllm] {
            let server =
                TestServer::scripted(vec![Reply::status(400, body), Reply::status(400, body)])
                    .await;
            let c = client(&server, api);
            let e = ask(&c, "go").await.unwrap_err();
            assert_eq!(e.kind(), ChatErrorKind::ContextOverflow, "{body}");
            assert!(e.is_context_overflow());
            assert_eq!(e.status(), Some(400));
            assert!(!e.is_retryable());
            let (_, e) = stream_error(&c).await;
            assert_eq!(e.kind(), ChatErrorKind::ContextOverflow, "stream: {e}");
            assert_eq!(server.requests().len(), 2, "the overflow was not retried");
        }
    }
}

async fn auth_error_never_shows_the_key() {
    let server = TestServer::scripted(vec![Reply::status(
        401,
        r#"{"error":{"message":"Incorrect API key provided.","type":"invalid_request_error","code":"invalid_api_key"}}"#,
    )])
    .await;
    let c = client(&server, Api::ChatCompletions);
    let e = ask(&c, "go").await.unwrap_err();
    assert_eq!(e.kind(), ChatErrorKind::Auth);
    assert!(!e.is_retryable());
    assert_eq!(server.requests().len(), 1);
    for shown in [
        format!("{e}"),
        format!("{e:?}"),
        format!("{c:?}"),
        format!("{c:#?}"),
    ] {
        assert!(!shown.contains("SECRET"), "key leaked: {shown}");
    }
    assert!(format!("{c:?}").contains("***"));
    assert!(e.to_string().contains("Incorrect API key"));
}

async fn connect_errors_and_timeouts() {
    // A port with nothing listening.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let c = builder()
        .base_url(format!("http://127.0.0.1:{port}/v1"))
        .model("m")
        .retry_policy(RetryPolicy {
            max_retries: 1,
            initial_backoff: Duration::from_millis(1),
            ..Default::default()
        })
        .build()
        .unwrap();
    let e = ask(&c, "go").await.unwrap_err();
    assert_eq!(e.kind(), ChatErrorKind::Connect, "{e}");
    assert!(e.is_retryable());

    let server = TestServer::scripted(vec![
        Reply::Delay(
            Duration::from_millis(600),
            Box::new(Reply::ok(chat_json(&Turn::text("late")))),
        ),
        Reply::ok(chat_json(&Turn::text("on time"))),
        Reply::Delay(
            Duration::from_millis(600),
            Box::new(Reply::ok(chat_json(&Turn::text("late")))),
        ),
    ])
    .await;
    let c = builder()
        .base_url(server.url())
        .model("m")
        .timeout(Duration::from_millis(200))
        .retry_policy(RetryPolicy {
            max_retries: 1,
            initial_backoff: Duration::from_millis(1),
            retry_first_byte_timeouts: true,
            ..Default::default()
        })
        .build()
        .unwrap();
    let r = ask(&c, "go").await.unwrap();
    assert_eq!(
        r.text_content(),
        "on time",
        "a first-byte timeout is retried when the policy says so"
    );
    let c = c.with_api(Api::ChatCompletions);
    let started = Instant::now();
    let e = builder()
        .base_url(server.url())
        .model("m")
        .timeout(Duration::from_millis(200))
        .max_retries(0)
        .build()
        .unwrap()
        .get_response(ChatRequest::new(
            &[Message::user("go")],
            &ChatOptions::default(),
        ))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ChatErrorKind::Timeout, "{e}");
    assert!(started.elapsed() < Duration::from_millis(550));
    drop(c);
}

async fn in_stream_errors_are_typed() {
    let failed = format!(
        "event: response.failed\ndata: {}\n\n",
        json!({"type": "response.failed", "response": {"id": "resp_x", "status": "failed",
            "error": {"code": "context_length_exceeded", "message": "Your input exceeds the context window of this model."},
            "output": []}})
    );
    let err_event = format!(
        "event: error\ndata: {}\n\n",
        json!({"type": "error", "code": "rate_limit_exceeded", "message": "Slow down", "param": null})
    );
    let chat_err = format!(
        "data: {}\n\n",
        json!({"error": {"message": "The server had an error while processing your request.", "type": "server_error"}})
    );
    let server = TestServer::scripted(vec![
        Reply::sse(&[failed], &[10]),
        Reply::sse(&[err_event], &[10]),
        Reply::sse(&[chat_err], &[10]),
    ])
    .await;
    let c = client(&server, Api::Responses);
    assert_eq!(
        stream_error(&c).await.1.kind(),
        ChatErrorKind::ContextOverflow
    );
    assert_eq!(stream_error(&c).await.1.kind(), ChatErrorKind::RateLimited);
    let c = client(&server, Api::ChatCompletions);
    let e = stream_error(&c).await.1;
    assert!(e.is_retryable(), "{e:?}");
}

#[tokio::test]
async fn tolerates_what_compatible_servers_send() {
    // Unknown fields, nulls, missing fields, unknown enum values, arguments as an object,
    // content as parts, `reasoning` instead of `reasoning_content`, no usage, no ids.
    let chat = json!({
        "choices": [{"message": {"role": "assistant", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
            "reasoning": "r", "tool_calls": [{"function": {"name": "f", "arguments": {"x": 1}}, "type": "function"}],
            "annotations": null, "audio": null, "function_call": null},
          "finish_reason": "brand_new_reason", "stop_reason": 123}],
        "usage": null, "model": null, "x_groq": {"id": "q"}
    });
    let chat_nulls = json!({"id": "c", "choices": [{"index": 0, "message": {"content": null, "tool_calls": null}, "finish_reason": null}]});
    let resp = json!({
        "id": "resp_y", "status": "completed", "output": [
            {"type": "web_search_call", "id": "ws", "status": "completed"},
            {"type": "message", "content": [{"type": "output_text", "text": "x", "annotations": null}, {"type": "refusal", "refusal": "!"}]},
            {"type": "function_call", "call_id": null, "id": "fc_9", "name": "g", "arguments": null}
        ], "usage": {"input_tokens": 1, "output_tokens": null}
    });
    let server = TestServer::scripted(vec![
        Reply::ok(chat.to_string()),
        Reply::ok(chat_nulls.to_string()),
        Reply::ok(resp.to_string()),
    ])
    .await;
    let c = client(&server, Api::ChatCompletions);
    let r = ask(&c, "go").await.unwrap();
    assert_eq!(r.text_content(), "ab");
    assert_eq!(
        r.messages[0].contents[0],
        Content::Reasoning { text: "r".into() }
    );
    let call = r.function_calls().next().unwrap();
    assert_eq!(
        (
            call.call_id.as_str(),
            call.name.as_str(),
            call.arguments.as_str()
        ),
        ("call_0", "f", r#"{"x":1}"#)
    );
    assert_eq!(
        r.finish_reason,
        Some(FinishReason::Other("brand_new_reason".into()))
    );
    assert_eq!(r.usage, None);
    let r = ask(&c, "go").await.unwrap();
    assert!(r.messages[0].contents.is_empty());
    assert_eq!(r.finish_reason, None);
    let c = client(&server, Api::Responses);
    let r = ask(&c, "go").await.unwrap();
    assert_eq!(r.text_content(), "x!");
    let call = r.function_calls().next().unwrap();
    assert_eq!(
        (call.call_id.as_str(), call.arguments.as_str()),
        ("fc_9", "")
    );
    assert_eq!(r.finish_reason, Some(FinishReason::ToolCalls));
    assert_eq!(r.usage.unwrap().input_tokens, 1);
}

#[tokio::test]
async fn chat_stream_quirks() {
    // Every call on index 0 with distinct ids; name in a later delta; finish without [DONE].
    let ev = |delta: Value, finish: Value| {
        format!(
            "data: {}\n\n",
            json!({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        )
    };
    let events = vec![
        ev(
            json!({"tool_calls": [{"index": 0, "id": "a", "function": {"arguments": ""}}]}),
            Value::Null,
        ),
        ev(
            json!({"tool_calls": [{"index": 0, "function": {"name": "f", "arguments": "{\"x\""}}]}),
            Value::Null,
        ),
        ev(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": ":1}"}}]}),
            Value::Null,
        ),
        ev(
            json!({"tool_calls": [{"index": 0, "id": "b", "function": {"name": "g", "arguments": "{}"}}]}),
            Value::Null,
        ),
        ev(json!({}), json!("tool_calls")),
    ];
    let server = TestServer::scripted(vec![Reply::sse(&events, &[6])]).await;
    let c = client(&server, Api::ChatCompletions);
    let (r, _) = fold(&c, &[Message::user("go")], &ChatOptions::default()).await;
    let calls: Vec<_> = r
        .function_calls()
        .map(|c| (c.call_id.clone(), c.name.clone(), c.arguments.clone()))
        .collect();
    assert_eq!(
        calls,
        vec![
            ("a".into(), "f".into(), "{\"x\":1}".into()),
            ("b".into(), "g".into(), "{}".into())
        ]
    );
    assert_eq!(r.finish_reason, Some(FinishReason::ToolCalls));
}

#[tokio::test]
async fn structured_output_and_choices() {
    let schema = json!({"title": "Answer", "type": "object", "properties": {"n": {"type": "integer", "format": "int32"}}});
    let o = ChatOptions {
        response_format: Some(schema),
        stop: vec!["END".into()],
        seed: Some(7),
        ..Default::default()
    };
    let (chat, resp) = ask_both_apis(&[Message::user("go")], &o, "{}").await;
    assert_eq!(chat["response_format"]["type"], "json_schema");
    assert_eq!(chat["response_format"]["json_schema"]["name"], "Answer");
    assert_eq!(chat["response_format"]["json_schema"]["strict"], true);
    assert_eq!(
        chat["response_format"]["json_schema"]["schema"]["required"],
        json!(["n"])
    );
    assert_eq!(chat["stop"], json!(["END"]));
    assert_eq!(chat["seed"], 7);
    assert!(chat.get("tools").is_none() && chat.get("tool_choice").is_none());
    assert_eq!(resp["text"]["format"]["type"], "json_schema");
    assert_eq!(resp["text"]["format"]["name"], "Answer");
    assert!(resp.get("stop").is_none() && resp.get("seed").is_none());
}

#[test]
fn builder_validates_and_describes() {
    let e = builder().base_url("not a url").build().unwrap_err();
    assert_eq!(e.kind(), ChatErrorKind::Config);
    let e = builder().base_url("ftp://x/v1").build().unwrap_err();
    assert_eq!(e.kind(), ChatErrorKind::Config);
    let c = builder()
        .base_url("http://localhost:1/v1/")
        .model("x")
        .build()
        .unwrap();
    assert_eq!(c.describe(), "openai:x");
    assert_eq!(c.base_url(), "http://localhost:1/v1");
    assert!(!format!("{c:?}").contains("Bearer"));
}

#[tokio::test]
async fn missing_model_is_a_config_error_and_no_key_sends_no_auth() {
    let server = TestServer::scripted(vec![Reply::ok(chat_json(&Turn::text("ok")))]).await;
    let c = builder().base_url(server.url()).build().unwrap();
    let e = ask(&c, "go").await.unwrap_err();
    assert_eq!(e.kind(), ChatErrorKind::Config);
    let r = c
        .get_response(ChatRequest::new(
            &[Message::user("go")],
            &ChatOptions::with_model("per-call"),
        ))
        .await
        .unwrap();
    assert_eq!(r.text_content(), "ok");
    let req = &server.requests()[0];
    assert_eq!(req.header("authorization"), None);
    assert_eq!(req.json()["model"], "per-call");
}

#[tokio::test]
async fn tool_result_images_are_not_lost() {
    let image = Content::Image {
        url: "https://example.invalid/a.png".into(),
        media_type: None,
    };
    let msgs = vec![
        Message::user("look"),
        Message::new(
            Role::Assistant,
            vec![
                Content::FunctionCall(FunctionCall::new("c1", "shot", &json!({}))),
                Content::FunctionCall(FunctionCall::new("c2", "shot", &json!({}))),
            ],
        ),
        Message::tool_result(FunctionResult {
            call_id: "c1".into(),
            output: vec![Content::text("first"), image.clone()],
            is_error: false,
        }),
        Message::tool_result(FunctionResult {
            call_id: "c2".into(),
            output: vec![Content::text("second")],
            is_error: true,
        }),
    ];
    let (chat, resp) = ask_both_apis(&msgs, &ChatOptions::default(), "ok").await;
    let m = chat["messages"].as_array().unwrap();
    assert_eq!(m.len(), 5, "{chat}");
    assert_eq!(m[1]["content"], Value::Null);
    assert_eq!(
        m[2],
        json!({"role": "tool", "content": "first", "tool_call_id": "c1"})
    );
    assert_eq!(
        m[3],
        json!({"role": "tool", "content": "second", "tool_call_id": "c2"})
    );
    assert_eq!(
        m[4],
        json!({"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://example.invalid/a.png"}}]})
    );
    let items = resp["input"].as_array().unwrap();
    assert_eq!(items.len(), 5, "{resp}");
    assert_eq!(
        items[3]["output"],
        json!([{"type": "input_text", "text": "first"}, {"type": "input_image", "image_url": "https://example.invalid/a.png"}])
    );
    assert_eq!(items[4]["output"], "second");
}

#[tokio::test]
async fn stream_usage_can_be_turned_off_and_builder_debug_hides_the_key() {
    let server =
        TestServer::scripted(vec![Reply::sse(&chat_sse(&Turn::text("ok"), false), &[9])]).await;
    let b = builder()
        .api_key(KEY)
        .base_url(server.url())
        .model("m")
        .stream_usage(false);
    assert!(!format!("{b:?}").contains("SECRET"));
    let c = b.build().unwrap();
    let (r, _) = fold(&c, &[Message::user("go")], &ChatOptions::default()).await;
    assert_eq!(r.text_content(), "ok");
    let body = server.requests()[0].json();
    assert_eq!(body["stream"], true);
    assert!(body.get("stream_options").is_none());
}
