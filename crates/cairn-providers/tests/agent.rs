//! End to end: a cairn `Agent` with a tool over the OpenAI client against a local server that
//! plays a 3-step tool loop, for both APIs, streaming and not.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use cairn_core::{Agent, AgentEventKind, AgentResponse, FnTool, Kwargs, ToolOutput, UpdateEvent};
use cairn_providers::{Api, OpenAIClient};
use futures::StreamExt;
use serde_json::{Value, json};
use support::*;

const STEPS: usize = 3;

/// The step is the number of tool results already in the request.
fn step_of(body: &Value) -> usize {
    let items = body
        .get("messages")
        .or_else(|| body.get("input"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    items
        .iter()
        .filter(|m| m["role"] == "tool" || m["type"] == "function_call_output")
        .count()
}

fn reply_for(r: &Recorded) -> Reply {
    let body = r.json();
    let step = step_of(&body);
    let turn = if step < STEPS {
        Turn {
            text: Some(format!("step {step}")),
            reasoning: None,
            calls: vec![(
                format!("call_{step}"),
                "echo".into(),
                json!({"text": format!("hi-{step}")}).to_string(),
            )],
        }
    } else {
        Turn::text("done")
    };
    let responses = r.path.ends_with("/responses");
    match (responses, body["stream"] == json!(true)) {
        (false, false) => Reply::ok(chat_json(&turn)),
        (false, true) => Reply::sse(&chat_sse(&turn, true), &[3, 11, 1]),
        (true, false) => Reply::ok(responses_json(&turn)),
        (true, true) => Reply::sse(&responses_sse(&turn, true), &[3, 11, 1]),
    }
}

fn agent(server: &TestServer, api: Api, calls: Arc<AtomicUsize>) -> Agent {
    let client = OpenAIClient::builder()
        .base_url(server.url())
        .model("m-1")
        .api(api)
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let echo = FnTool::new(
        "echo",
        "Echo the text.",
        json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
        move |ctx| {
            let calls = calls.clone();
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
    Agent::builder(client)
        .instructions("Use the tool.")
        .tool(echo)
        .build()
}

async fn run_both(api: Api) -> (AgentResponse, AgentResponse) {
    let server = TestServer::start(|r, _| reply_for(r)).await;
    let calls = Arc::new(AtomicUsize::new(0));
    let agent = agent(&server, api, calls.clone());
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
        assert!(!r.text().contains("SECRET-USER") || step_of(&r.json()) > 0);
        assert!(!r.text().contains("user_id"), "function kwargs were sent");
    }
    // The last request carries the whole conversation: every tool call and result.
    let last = reqs[STEPS].json();
    assert_eq!(step_of(&last), STEPS);
    assert!(last.to_string().contains("echo:hi-2:SECRET-USER"));
    (plain, streamed.expect("RunCompleted"))
}

fn check(plain: &AgentResponse, streamed: &AgentResponse) {
    assert_eq!(plain.last_text().as_deref(), Some("done"));
    assert_eq!(plain.function_calls().count(), STEPS);
    assert_eq!(plain.model_calls, STEPS + 1);
    assert_eq!(plain.usage.input_tokens, 11 * (STEPS as u64 + 1));
    assert_eq!(streamed, plain);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_tool_loop_over_chat_completions() {
    let (plain, streamed) = run_both(Api::ChatCompletions).await;
    check(&plain, &streamed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_tool_loop_over_responses() {
    let (plain, streamed) = run_both(Api::Responses).await;
    check(&plain, &streamed);
}
