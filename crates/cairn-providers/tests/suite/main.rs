//! The provider test suite, written once and run against every provider: each scenario is a
//! generic function over a [`ProviderHarness`] (how to build the provider's client and what its
//! wire says), and `suite!` instantiates the scenarios per provider as `<provider>::<scenario>`.
//! Wire-format details that only one provider has stay per provider: `anthropic_format.rs` and
//! `gemini_format.rs` here, and `../openai.rs` (which runs over both OpenAI transports).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod anthropic_format;
mod gemini_format;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use cairn_core::{
    Agent, AgentEventKind, ChatClient, ChatErrorKind, ChatOptions, ChatRequest, ChatResponse,
    Content, FnTool, FunctionCall, FunctionResult, Kwargs, Message, Role, ToolOutput, UpdateEvent,
    Usage,
};
use cairn_providers::{AnthropicClient, Api, GeminiClient, OpenAIClient, RetryPolicy};
use cairn_test_support::agent::{echo_tool, run_child_test, run_plain_and_streamed};
use cairn_test_support::anthropic as anthropic_wire;
use cairn_test_support::client::stream_fold;
use cairn_test_support::gemini as gemini_wire;
use cairn_test_support::raw::{RawServer, read_request, sse_then_hold};
use cairn_test_support::{Recorded, Reply, TestServer, Turn, Wire, sse};
use futures::StreamExt;
use serde_json::{Value, json};

/// Retries fast and bounded (two retries), so error scenarios run in milliseconds.
fn fast_retries() -> RetryPolicy {
    RetryPolicy {
        max_retries: 2,
        initial_backoff: Duration::from_millis(1),
        max_backoff: Duration::from_millis(5),
        max_retry_after: Duration::from_secs(1),
        retry_first_byte_timeouts: false,
    }
}

/// What the suite needs to know about one provider.
trait ProviderHarness: 'static {
    /// The client type.
    type Client: ChatClient + std::fmt::Debug + 'static;
    /// The name of the suite's module for this provider (child tests are `<MODULE>::…`).
    const MODULE: &'static str;
    /// The wire the fake server speaks.
    const WIRE: Wire;
    /// The API key the tests use; it must never be printed.
    const KEY: &'static str;

    /// A client for `server` with [`Self::KEY`], model `m` for the wire, and fast retries.
    fn client(server: &TestServer) -> Self::Client;
    /// A client with `key` and `model` (no server), for `Debug` and `describe` checks.
    fn offline(key: &str, model: &str) -> Self::Client;
    /// The builder's `Debug` with `key` set.
    fn builder_debug(key: &str) -> String;
    /// Checks the second request of a one-step loop: it carries the instructions "Use the
    /// tool." and the result `echo:hi` of the call `toolu_a`.
    fn check_tool_result_request(body: &Value);
    /// A client for the raw server at `root` over the lean HTTP/1.1 transport (`hyper`) or
    /// reqwest, with a long (60 s) idle timeout that finishing must not depend on.
    fn idle_client(root: &str, hyper: bool) -> Self::Client;
    /// A chunked SSE body that answers "hello" and ends the answer the provider's way (OpenAI
    /// `[DONE]`, Anthropic `message_stop`, Gemini the end of the body), and whether the chunked
    /// body is terminated; the connection then stays open.
    fn hello_then_hold() -> (String, bool);
}

/// The scenarios with hand-written wire traffic: what a provider's answers, errors and
/// environment look like. (OpenAI's live in `openai.rs`, where they run over both transports.)
trait WireHarness: ProviderHarness {
    // --- plain and streamed answers agree ------------------------------------------------

    /// A plain answer with reasoning [`Self::REASONING`], text "Calling tools. ", a call of
    /// `echo` with `{"text": "a"}` and one of `noargs` with `{}`, and the same as a stream.
    fn answer() -> (String, Vec<String>);
    /// The reasoning text of [`Self::answer`].
    const REASONING: &'static str;
    /// The call ids the client reports for the two calls of [`Self::answer`].
    const CALL_IDS: [&'static str; 2];
    /// The model, response id and usage the client reports for [`Self::answer`].
    fn answer_meta() -> (&'static str, &'static str, Usage);
    /// The conversation and options sent for [`Self::answer`].
    fn agree_request() -> (Vec<Message>, ChatOptions) {
        (vec![Message::user("go")], ChatOptions::default())
    }
    /// Provider-specific checks of the plain (`reqs[0]`) and streaming (`reqs[1]`) requests.
    fn check_agree_requests(reqs: &[Recorded]);

    // --- errors ----------------------------------------------------------------------------

    /// A retryable overload (status, body) and a word its message must contain.
    fn overloaded() -> (u16, String, &'static str);
    /// A rate limit (status, body); the suite adds `retry-after: 0`.
    fn rate_limited() -> (u16, String);
    /// A context overflow body (400) and a word its message must contain.
    fn overflow() -> (String, &'static str);
    /// A 401 body.
    fn unauthorized() -> String;
    /// A stream that sends text, then an in-stream error; a word the error's message must
    /// contain and whether the error is retryable (`None`: not checked).
    fn stream_error() -> (Vec<String>, &'static str, Option<bool>);

    // --- resolution from the environment -------------------------------------------------

    /// `provider:model` the child resolves.
    const MODEL_ID: &'static str;
    /// The variables cleared in the child.
    const ENV: &'static [&'static str];
    /// The variable naming the missing key in the error.
    const KEY_VAR: &'static str;
    /// The base-URL variable.
    const BASE_URL_VAR: &'static str;
    /// `from_env()` fails without a key.
    fn from_env_fails() -> bool;
    /// The key environments the children run with (key variable, key), in order.
    fn key_envs() -> Vec<(&'static str, &'static str)>;
    /// Checks the requests the children made (one per [`Self::key_envs`] entry).
    fn check_resolved(reqs: &[Recorded]);
}

// ------------------------------------------------------------------------------------------------
// Scenarios
// ------------------------------------------------------------------------------------------------

async fn fold<C: ChatClient>(c: &C, msgs: &[Message], opts: &ChatOptions) -> ChatResponse {
    let (r, finished) = stream_fold(c, msgs, opts).await.unwrap();
    assert!(finished);
    r
}

async fn plain_and_streamed_answers_agree<H: WireHarness>() {
    let server = TestServer::start(|r, _| {
        let (plain, events) = H::answer();
        if H::WIRE.is_stream(r) {
            Reply::sse(&events, &[7, 1, 30])
        } else {
            Reply::ok(plain)
        }
    })
    .await;
    let c = H::client(&server);
    let (msgs, opts) = H::agree_request();
    let plain = c
        .get_response(ChatRequest::new(&msgs, &opts))
        .await
        .unwrap();
    let streamed = fold(&c, &msgs, &opts).await;
    assert_eq!(plain, streamed);
    let reqs = server.requests();
    assert!(!H::WIRE.is_stream(&reqs[0]) && H::WIRE.is_stream(&reqs[1]));
    H::check_agree_requests(&reqs);
    let (model, id, usage) = H::answer_meta();
    assert_eq!(
        plain.finish_reason,
        Some(cairn_core::FinishReason::ToolCalls)
    );
    assert_eq!(plain.model.as_deref(), Some(model));
    assert_eq!(plain.response_id.as_deref(), Some(id));
    assert_eq!(plain.usage, Some(usage));
    assert_eq!(plain.text_content(), "Calling tools. ");
    let calls: Vec<_> = plain.function_calls().cloned().collect();
    assert_eq!(calls.len(), 2);
    assert_eq!(
        (calls[0].call_id.as_str(), calls[0].name.as_str()),
        (H::CALL_IDS[0], "echo")
    );
    assert_eq!(
        serde_json::from_str::<Value>(&calls[0].arguments).unwrap(),
        json!({"text": "a"})
    );
    assert_eq!(
        (calls[1].call_id.as_str(), calls[1].arguments.as_str()),
        (H::CALL_IDS[1], "{}")
    );
    assert!(
        plain.messages[0]
            .contents
            .iter()
            .any(|c| matches!(c, Content::Reasoning { text } if text == H::REASONING))
    );
}

async fn errors_are_typed_and_retried<H: WireHarness>() {
    let (plain, _) = H::answer();
    let (busy, busy_body, busy_word) = H::overloaded();
    let (limited, limited_body) = H::rate_limited();
    let (overflow, overflow_word) = H::overflow();
    let server = TestServer::scripted(vec![
        Reply::status(busy, busy_body.clone()),
        Reply::status(limited, limited_body).with_header("retry-after", "0"),
        Reply::ok(plain),
        Reply::status(400, overflow),
        Reply::status(401, H::unauthorized()),
        Reply::status(busy, busy_body.clone()),
        Reply::status(busy, busy_body.clone()),
        Reply::status(busy, busy_body),
    ])
    .await;
    let c = H::client(&server);
    let (m, o, k) = ([Message::user("go")], ChatOptions::default(), Kwargs::new());
    let call = || {
        c.get_response(
            ChatRequest::new(&m, &o)
                .with_function_invocation_kwargs(&k)
                .with_client_kwargs(&k),
        )
    };
    assert!(call().await.is_ok());
    assert_eq!(
        server.requests().len(),
        3,
        "overload and rate limit retried"
    );

    let e = call().await.unwrap_err();
    assert_eq!(e.kind(), ChatErrorKind::ContextOverflow);
    assert!(e.message().contains(overflow_word), "{e}");
    assert_eq!(
        server.requests().len(),
        4,
        "context overflow is not retried"
    );

    let e = call().await.unwrap_err();
    assert_eq!(e.kind(), ChatErrorKind::Auth);
    assert_eq!(e.status(), Some(401));
    assert!(!e.to_string().contains(H::KEY));
    assert_eq!(server.requests().len(), 5, "auth errors are not retried");

    let e = call().await.unwrap_err();
    assert_eq!(e.status(), Some(busy));
    assert!(e.is_retryable());
    assert!(e.message().contains(busy_word), "{e}");
    assert_eq!(server.requests().len(), 8, "overload retried twice");
}

async fn stream_error<H: WireHarness>() {
    let (events, word, retryable) = H::stream_error();
    let server = TestServer::scripted(vec![Reply::sse(&events, &[5])]).await;
    let c = H::client(&server);
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
    let e = err.expect("an error");
    assert!(e.message().contains(word), "{e}");
    if let Some(r) = retryable {
        assert_eq!(e.is_retryable(), r);
    }
}

fn key_never_printed<H: ProviderHarness>() {
    let c = H::offline(H::KEY, "m");
    assert!(!format!("{c:?}").contains(H::KEY));
    assert_eq!(c.describe(), format!("{}:m", H::MODULE));
    assert!(!H::builder_debug(H::KEY).contains(H::KEY));
}

fn run_child<H: WireHarness>(env: &[(&str, &str)]) -> bool {
    run_child_test(&format!("{}::child_resolve", H::MODULE), H::ENV, env)
}

/// Only does something in the child processes of `resolves_from_env`.
async fn child_resolve<H: WireHarness>() {
    if std::env::var("CAIRN_CHILD").is_err() {
        return;
    }
    let r = cairn_providers::client_for_model(H::MODEL_ID);
    if std::env::var("EXPECT").as_deref() == Ok("missing") {
        let e = r.err().unwrap();
        assert_eq!(e.kind(), ChatErrorKind::Config);
        assert!(e.message().contains(H::KEY_VAR));
        assert!(H::from_env_fails());
        return;
    }
    let c = r.unwrap();
    assert_eq!(c.describe(), H::MODEL_ID);
    let resp = c
        .get_response(ChatRequest::new(
            &[Message::user("hi")],
            &ChatOptions::default(),
        ))
        .await
        .unwrap();
    assert_eq!(resp.text_content(), "Calling tools. ");
}

async fn resolves_from_env<H: WireHarness>() {
    let (plain, _) = H::answer();
    let envs = H::key_envs();
    let server = TestServer::scripted(vec![Reply::ok(plain); envs.len()]).await;
    for (var, key) in envs {
        let url = server.root();
        let ok = tokio::task::spawn_blocking(move || {
            run_child::<H>(&[(var, key), (H::BASE_URL_VAR, &url)])
        })
        .await
        .unwrap();
        assert!(ok, "the child with {var} failed");
    }
    H::check_resolved(&server.requests());
    let missing = tokio::task::spawn_blocking(|| run_child::<H>(&[("EXPECT", "missing")]))
        .await
        .unwrap();
    assert!(missing, "the child without a key failed");
}

/// One tool call, then "done"; plain and streamed.
async fn agent_tool_loop<H: ProviderHarness>() {
    let server = H::WIRE
        .serve_turns(vec![
            Turn::call("toolu_a", "echo", json!({"text": "hi"})).with_text("step 0"),
            Turn::text("done"),
        ])
        .await;
    let calls = Arc::new(AtomicUsize::new(0));
    let agent = Agent::builder(H::client(&server))
        .instructions("Use the tool.")
        .tool(echo_tool(calls.clone()))
        .build();
    let (plain, streamed) = run_plain_and_streamed(&agent).await;
    assert_eq!(plain.last_text().as_deref(), Some("done"));
    assert_eq!(plain.model_calls, 2);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(streamed, plain);
    let reqs = server.requests();
    assert_eq!(reqs.len(), 4);
    H::check_tool_result_request(&reqs[1].json());
    assert!(reqs.iter().all(|r| !r.text().contains("SECRET-USER")));
}

/// (Issue #16 item 14.) The end of the answer, then a connection the server keeps open: the
/// call completes promptly, over both transports.
async fn end_then_an_open_connection_completes_promptly<H: ProviderHarness>() {
    for hyper in [true, false] {
        let server = RawServer::start(|mut sock, _| async move {
            read_request(&mut sock).await;
            let (body, finish) = H::hello_then_hold();
            sse_then_hold(sock, body.as_bytes(), finish).await;
        })
        .await;
        let c = H::idle_client(&server.root(), hyper);
        let started = Instant::now();
        let r = fold(&c, &[Message::user("go")], &ChatOptions::default()).await;
        assert_eq!(r.text_content(), "hello");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
    }
}

const STEPS: usize = 3;

/// Three tool calls whose tool sees a function-invocation kwarg the server must never see.
async fn agent_three_step_loop<H: ProviderHarness>() {
    let turns: Vec<Turn> = (0..STEPS)
        .map(|step| {
            Turn::call(
                &format!("call_{step}"),
                "echo",
                json!({"text": format!("hi-{step}")}),
            )
            .with_text(&format!("step {step}"))
        })
        .chain([Turn::text("done")])
        .collect();
    let server = H::WIRE.serve_turns(turns).await;
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let echo = FnTool::new(
        "echo",
        "Echo the text.",
        json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
        move |ctx| {
            let calls = counted.clone();
            async move {
                calls.fetch_add(1, Ordering::SeqCst);
                let who = ctx.kwargs.get_str("user_id").unwrap_or("?").to_owned();
                Ok(ToolOutput::text(format!(
                    "echo:{}:{who}",
                    ctx.arguments["text"].as_str().unwrap_or("")
                )))
            }
        },
    );
    let agent = Agent::builder(H::client(&server))
        .instructions("Use the tool.")
        .tool(echo)
        .build();
    let kwargs = Kwargs::from([("user_id", "SECRET-USER")]);
    let plain = agent
        .run("[scenario:loop steps=3] go")
        .function_invocation_kwargs(kwargs.clone())
        .await
        .unwrap();
    let mut stream = agent
        .run("[scenario:loop steps=3] go")
        .function_invocation_kwargs(kwargs)
        .stream();
    let mut streamed = None;
    let mut text_deltas = 0;
    while let Some(u) = stream.next().await {
        match u.kind {
            AgentEventKind::RunCompleted(r) => streamed = Some(*r),
            AgentEventKind::Model(m) if matches!(m.event, UpdateEvent::TextDelta { .. }) => {
                text_deltas += 1
            }
            _ => {}
        }
    }
    assert!(text_deltas > 4);
    assert_eq!(calls.load(Ordering::SeqCst), 2 * STEPS);
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2 * (STEPS + 1));
    for r in &reqs {
        assert!(!r.text().contains("SECRET-USER") || H::WIRE.tool_results(&r.json()) > 0);
        assert!(!r.text().contains("user_id"), "function kwargs were sent");
    }
    // The last request carries the whole conversation: every tool call and result.
    let last = reqs[STEPS].json();
    assert_eq!(H::WIRE.tool_results(&last), STEPS);
    assert!(last.to_string().contains("echo:hi-2:SECRET-USER"));
    let streamed = streamed.expect("RunCompleted");
    assert_eq!(plain.last_text().as_deref(), Some("done"));
    assert_eq!(plain.function_calls().count(), STEPS);
    assert_eq!(plain.model_calls, STEPS + 1);
    assert_eq!(plain.usage.input_tokens, 11 * (STEPS as u64 + 1));
    assert_eq!(streamed, plain);
}

// ------------------------------------------------------------------------------------------------
// The providers
// ------------------------------------------------------------------------------------------------

/// Instantiates the listed scenarios for a provider as tests in module `$module`.
macro_rules! suite {
    ($module:ident: $harness:ident => async [$($async_test:ident),* $(,)?], sync [$($sync_test:ident),* $(,)?]) => {
        mod $module {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $async_test() {
                    super::$async_test::<super::$harness>().await
                }
            )*
            $(
                #[test]
                fn $sync_test() {
                    super::$sync_test::<super::$harness>()
                }
            )*
        }
    };
}

suite!(anthropic: Anthropic => async [
    end_then_an_open_connection_completes_promptly, plain_and_streamed_answers_agree, errors_are_typed_and_retried, stream_error,
    child_resolve, resolves_from_env, agent_tool_loop, agent_three_step_loop,
], sync [key_never_printed]);
suite!(gemini: Gemini => async [
    end_then_an_open_connection_completes_promptly, plain_and_streamed_answers_agree, errors_are_typed_and_retried, stream_error,
    child_resolve, resolves_from_env, agent_tool_loop, agent_three_step_loop,
], sync [key_never_printed]);
suite!(openai: OpenAIChat => async [
    end_then_an_open_connection_completes_promptly, agent_tool_loop, agent_three_step_loop,
], sync [key_never_printed]);
suite!(openai_responses: OpenAIResponses => async [agent_tool_loop, agent_three_step_loop], sync []);

struct Anthropic;

impl ProviderHarness for Anthropic {
    type Client = AnthropicClient;
    const MODULE: &'static str = "anthropic";
    const WIRE: Wire = Wire::Anthropic;
    const KEY: &'static str = "sk-ant-SECRET-0123456789";

    fn client(s: &TestServer) -> AnthropicClient {
        AnthropicClient::builder()
            .base_url(s.root())
            .api_key(Self::KEY)
            .model("claude-test")
            .timeout(Duration::from_secs(10))
            .retry_policy(fast_retries())
            .build()
            .unwrap()
    }
    fn offline(key: &str, model: &str) -> AnthropicClient {
        AnthropicClient::builder()
            .api_key(key)
            .model(model)
            .build()
            .unwrap()
    }
    fn builder_debug(key: &str) -> String {
        format!("{:?}", AnthropicClient::builder().api_key(key))
    }

    fn check_tool_result_request(body: &Value) {
        assert_eq!(body["system"], "Use the tool.");
        let m = body["messages"].as_array().unwrap();
        assert_eq!(m.len(), 3);
        assert_eq!(m[2]["content"][0]["tool_use_id"], "toolu_a");
        assert_eq!(m[2]["content"][0]["content"], "echo:hi");
    }
    fn idle_client(root: &str, hyper: bool) -> AnthropicClient {
        AnthropicClient::builder()
            .base_url(root)
            .api_key("k-anthropic")
            .model("claude")
            .hyper_http1(hyper)
            .idle_timeout(Duration::from_secs(60))
            .build()
            .unwrap()
    }
    fn hello_then_hold() -> (String, bool) {
        let events = sse::typed_events(&[
            json!({"type": "message_start", "message": {"id": "msg_1", "model": "claude", "usage": {"input_tokens": 3}}}),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "hello"}}),
            json!({"type": "content_block_stop", "index": 0}),
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 1}}),
            json!({"type": "message_stop"}),
        ]);
        (events.concat(), false)
    }
}

impl WireHarness for Anthropic {
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
        let events = sse::typed_events(&[
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
    const REASONING: &'static str = "let me see";
    const CALL_IDS: [&'static str; 2] = ["toolu_1", "toolu_2"];
    fn answer_meta() -> (&'static str, &'static str, Usage) {
        (
            "claude-test",
            "msg_1",
            Usage {
                input_tokens: 15,
                output_tokens: 7,
                cached_input_tokens: 5,
            },
        )
    }
    fn agree_request() -> (Vec<Message>, ChatOptions) {
        let opts = ChatOptions {
            max_tokens: Some(100),
            ..ChatOptions::default()
        };
        (vec![Message::user("go")], opts)
    }
    fn check_agree_requests(reqs: &[Recorded]) {
        assert_eq!(reqs[1].json()["stream"], true);
        assert_eq!(reqs[1].json()["max_tokens"], 100);
    }

    fn overloaded() -> (u16, String, &'static str) {
        (
            529,
            anthropic_wire::error_body("overloaded_error", "Overloaded"),
            "overloaded_error",
        )
    }
    fn rate_limited() -> (u16, String) {
        (
            429,
            anthropic_wire::error_body("rate_limit_error", "slow down"),
        )
    }
    fn overflow() -> (String, &'static str) {
        (
            anthropic_wire::error_body(
                "invalid_request_error",
                "prompt is too long: 210000 tokens > 200000 maximum",
            ),
            "prompt is too long",
        )
    }
    fn unauthorized() -> String {
        anthropic_wire::error_body("authentication_error", "invalid x-api-key")
    }
    fn stream_error() -> (Vec<String>, &'static str, Option<bool>) {
        let events = sse::typed_events(&[
            json!({"type": "message_start", "message": {"id": "m", "model": "claude-test", "usage": {"input_tokens": 1}}}),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}}),
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        ]);
        (events, "overloaded_error", Some(true))
    }

    const MODEL_ID: &'static str = "anthropic:claude-x";
    const ENV: &'static [&'static str] =
        &["ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "ANTHROPIC_MODEL"];
    const KEY_VAR: &'static str = "ANTHROPIC_API_KEY";
    const BASE_URL_VAR: &'static str = "ANTHROPIC_BASE_URL";
    fn from_env_fails() -> bool {
        AnthropicClient::from_env().is_err()
    }
    fn key_envs() -> Vec<(&'static str, &'static str)> {
        vec![("ANTHROPIC_API_KEY", Self::KEY)]
    }
    fn check_resolved(reqs: &[Recorded]) {
        assert_eq!(reqs[0].header("x-api-key"), Some(Self::KEY));
        assert_eq!(reqs[0].json()["model"], "claude-x");
    }
}

struct Gemini;

impl ProviderHarness for Gemini {
    type Client = GeminiClient;
    const MODULE: &'static str = "gemini";
    const WIRE: Wire = Wire::Gemini;
    const KEY: &'static str = "AIza-SECRET-0123456789";

    fn client(s: &TestServer) -> GeminiClient {
        GeminiClient::builder()
            .base_url(s.root())
            .api_key(Self::KEY)
            .model("gemini-test")
            .timeout(Duration::from_secs(10))
            .retry_policy(fast_retries())
            .build()
            .unwrap()
    }
    fn offline(key: &str, model: &str) -> GeminiClient {
        GeminiClient::builder()
            .api_key(key)
            .model(model)
            .build()
            .unwrap()
    }
    fn builder_debug(key: &str) -> String {
        format!("{:?}", GeminiClient::builder().api_key(key))
    }

    fn check_tool_result_request(body: &Value) {
        assert_eq!(
            body["systemInstruction"]["parts"][0]["text"],
            "Use the tool."
        );
        let c = body["contents"].as_array().unwrap();
        assert_eq!(c.len(), 3);
        assert_eq!(
            c[2]["parts"][0],
            json!({"functionResponse": {"name": "echo", "response": {"result": "echo:hi"}}})
        );
    }
    fn idle_client(root: &str, hyper: bool) -> GeminiClient {
        GeminiClient::builder()
            .base_url(root)
            .api_key("k-gemini")
            .model("gemini")
            .hyper_http1(hyper)
            .idle_timeout(Duration::from_secs(60))
            .build()
            .unwrap()
    }
    fn hello_then_hold() -> (String, bool) {
        // Gemini has no end event: its stream ends with the body (the chunked terminator), not
        // with the connection.
        let ev = json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "hello"}]},
            "finishReason": "STOP"}], "modelVersion": "gemini"});
        (sse::data_crlf(&ev), true)
    }
}

impl WireHarness for Gemini {
    fn answer() -> (String, Vec<String>) {
        let usage = json!({"promptTokenCount": 12, "candidatesTokenCount": 6, "thoughtsTokenCount": 2,
                           "cachedContentTokenCount": 4, "totalTokenCount": 20});
        let plain = gemini_wire::chunk(
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
        let events = sse::data_frames_crlf(&[
            gemini_wire::chunk(
                json!([{"text": "thinking...", "thought": true}]),
                None,
                None,
            ),
            gemini_wire::chunk(json!([{"text": "Calling "}]), None, None),
            gemini_wire::chunk(json!([{"text": "tools. "}]), None, None),
            gemini_wire::chunk(
                json!([{"functionCall": {"name": "echo", "args": {"text": "a"}}},
                       {"functionCall": {"name": "noargs", "args": {}}}]),
                None,
                None,
            ),
            gemini_wire::chunk(json!([]), Some("STOP"), Some(usage)),
        ]);
        (plain.to_string(), events)
    }
    const REASONING: &'static str = "thinking...";
    // Two calls earlier in the conversation: new ids continue the numbering.
    const CALL_IDS: [&'static str; 2] = ["call_2", "call_3"];
    fn answer_meta() -> (&'static str, &'static str, Usage) {
        (
            "gemini-test-001",
            "resp_1",
            Usage {
                input_tokens: 12,
                output_tokens: 8,
                cached_input_tokens: 4,
            },
        )
    }
    fn agree_request() -> (Vec<Message>, ChatOptions) {
        let msgs = vec![
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
        (msgs, ChatOptions::default())
    }
    fn check_agree_requests(reqs: &[Recorded]) {
        assert_eq!(
            reqs[1].path,
            "/v1beta/models/gemini-test:streamGenerateContent?alt=sse"
        );
        assert_eq!(reqs[1].header("accept"), Some("text/event-stream"));
    }

    fn overloaded() -> (u16, String, &'static str) {
        (
            503,
            gemini_wire::error_body(503, "UNAVAILABLE", "The model is overloaded."),
            "overloaded",
        )
    }
    fn rate_limited() -> (u16, String) {
        (
            429,
            gemini_wire::error_body(429, "RESOURCE_EXHAUSTED", "Quota exceeded"),
        )
    }
    fn overflow() -> (String, &'static str) {
        (
            gemini_wire::error_body(
                400,
                "INVALID_ARGUMENT",
                "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).",
            ),
            "INVALID_ARGUMENT",
        )
    }
    fn unauthorized() -> String {
        gemini_wire::error_body(401, "UNAUTHENTICATED", "API key not valid")
    }
    fn stream_error() -> (Vec<String>, &'static str, Option<bool>) {
        let events = sse::data_frames_crlf(&[
            gemini_wire::chunk(json!([{"text": "Hi"}]), None, None),
            json!({"error": {"code": 500, "message": "Internal error", "status": "INTERNAL"}}),
        ]);
        (events, "Internal error", None)
    }

    const MODEL_ID: &'static str = "gemini:gemini-x";
    const ENV: &'static [&'static str] = &[
        "GEMINI_API_KEY",
        "GOOGLE_API_KEY",
        "GEMINI_BASE_URL",
        "GEMINI_MODEL",
    ];
    const KEY_VAR: &'static str = "GEMINI_API_KEY";
    const BASE_URL_VAR: &'static str = "GEMINI_BASE_URL";
    fn from_env_fails() -> bool {
        GeminiClient::from_env().is_err()
    }
    fn key_envs() -> Vec<(&'static str, &'static str)> {
        vec![
            ("GEMINI_API_KEY", Self::KEY),
            ("GOOGLE_API_KEY", "google-key"),
        ]
    }
    fn check_resolved(reqs: &[Recorded]) {
        assert_eq!(reqs[0].header("x-goog-api-key"), Some(Self::KEY));
        assert_eq!(reqs[1].header("x-goog-api-key"), Some("google-key"));
        assert_eq!(reqs[0].path, "/v1beta/models/gemini-x:generateContent");
    }
}

/// OpenAI over Chat Completions or (`RESPONSES`) the Responses API.
struct OpenAIWith<const RESPONSES: bool>;
type OpenAIChat = OpenAIWith<false>;
type OpenAIResponses = OpenAIWith<true>;

const OPENAI_KEY: &str = "sk-test-SECRET-0123456789";

impl<const RESPONSES: bool> ProviderHarness for OpenAIWith<RESPONSES> {
    type Client = OpenAIClient;
    const MODULE: &'static str = "openai";
    const WIRE: Wire = if RESPONSES {
        Wire::OpenAIResponses
    } else {
        Wire::OpenAIChat
    };
    const KEY: &'static str = OPENAI_KEY;

    fn client(s: &TestServer) -> OpenAIClient {
        OpenAIClient::builder()
            .base_url(s.url())
            .api_key(Self::KEY)
            .model("m-1")
            .api(if RESPONSES {
                Api::Responses
            } else {
                Api::ChatCompletions
            })
            .timeout(Duration::from_secs(10))
            .retry_policy(fast_retries())
            .build()
            .unwrap()
    }
    fn offline(key: &str, model: &str) -> OpenAIClient {
        OpenAIClient::builder()
            .api_key(key)
            .model(model)
            .build()
            .unwrap()
    }
    fn builder_debug(key: &str) -> String {
        format!("{:?}", OpenAIClient::builder().api_key(key))
    }

    fn check_tool_result_request(body: &Value) {
        let text = body.to_string();
        assert!(text.contains("Use the tool."), "{text}");
        assert!(
            text.contains("toolu_a") && text.contains("echo:hi"),
            "{text}"
        );
        assert_eq!(Self::WIRE.tool_results(body), 1);
    }
    fn idle_client(root: &str, hyper: bool) -> OpenAIClient {
        OpenAIClient::builder()
            .base_url(format!("{root}/v1"))
            .model("m")
            .hyper_http1(hyper)
            .retry_policy(RetryPolicy {
                initial_backoff: Duration::from_millis(1),
                max_backoff: Duration::from_millis(5),
                ..Default::default()
            })
            .idle_timeout(Duration::from_secs(60))
            .build()
            .unwrap()
    }
    fn hello_then_hold() -> (String, bool) {
        // Chat Completions chunks (the scenario is listed for the chat API only).
        let ev = json!({"id": "c", "object": "chat.completion.chunk", "model": "m",
            "choices": [{"index": 0, "delta": {"content": "hello"}, "finish_reason": "stop"}]});
        (format!("{}data: [DONE]\n\n", sse::data(&ev)), false)
    }
}
