//! CPU time per model call of the client alone, against a running fake server:
//!
//! ```text
//! python3 shared/bench/fakellm.py --port 8000 &
//! FAKE_LLM_URL=http://127.0.0.1:8000/v1 N=2000 cargo run --release -p cairn-providers --example cpu_probe
//! ```
//!
//! Each call sends a 11-message conversation with one tool and gets one tool call back. CPU time
//! is read from `/proc/self/task/*/schedstat` (Linux).
//!
//! `MODES` picks the measured modes (comma-separated, default all four): `chat`,
//! `chat-stream`, `responses`, `responses-stream`. Under `valgrind --tool=callgrind`, the
//! difference between two runs with different `N` gives instructions per call.

use std::error::Error;

use cairn_core::{
    ChatClient, ChatOptions, ChatRequest, Content, FunctionCall, FunctionResult, Kwargs, Message,
    Role, ToolSpec,
};
use cairn_providers::{Api, OpenAIClient};
use futures::StreamExt;
use serde_json::json;

/// CPU seconds used by all threads of this process so far.
fn cpu_seconds() -> f64 {
    let mut ns = 0u64;
    if let Ok(tasks) = std::fs::read_dir("/proc/self/task") {
        for t in tasks.flatten() {
            if let Ok(s) = std::fs::read_to_string(t.path().join("schedstat")) {
                ns += s
                    .split_whitespace()
                    .next()
                    .and_then(|v| v.parse::<u64>().ok())
                    .unwrap_or(0);
            }
        }
    }
    ns as f64 / 1e9
}

fn main() -> Result<(), Box<dyn Error>> {
    let url = std::env::var("FAKE_LLM_URL").map_err(|_| "set FAKE_LLM_URL")?;
    let n: usize = std::env::var("N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let mut msgs = vec![Message::user("[scenario:loop steps=20] go")];
        for i in 0..5 {
            let id = format!("call_{i}_0");
            msgs.push(Message::new(
                Role::Assistant,
                vec![Content::FunctionCall(FunctionCall::new(
                    id.clone(),
                    "echo",
                    &json!({"text": "hi"}),
                ))],
            ));
            msgs.push(Message::tool_result(FunctionResult {
                call_id: id,
                output: vec![Content::text("hi")],
                is_error: false,
            }));
        }
        let o = ChatOptions {
            tools: vec![ToolSpec::new(
                "echo",
                "Echo.",
                json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
            )],
            ..Default::default()
        };
        let (fk, ck) = (Kwargs::new(), Kwargs::new());
        let modes = std::env::var("MODES")
            .unwrap_or_else(|_| "chat,chat-stream,responses,responses-stream".to_owned());
        let modes: Vec<&str> = modes.split(',').map(str::trim).collect();
        for api in [Api::ChatCompletions, Api::Responses] {
            let c = OpenAIClient::builder()
                .base_url(&url)
                .model("fake-model")
                .api(api)
                .build()?;
            for stream in [false, true] {
                let name = match (api, stream) {
                    (Api::ChatCompletions, false) => "chat",
                    (Api::ChatCompletions, true) => "chat-stream",
                    (Api::Responses, false) => "responses",
                    (Api::Responses, true) => "responses-stream",
                };
                if !modes.contains(&name) {
                    continue;
                }
                for _ in 0..50 {
                    c.get_response(ChatRequest::new(&msgs, &o).with_function_invocation_kwargs(&fk).with_client_kwargs(&ck)).await?;
                }
                let (cpu0, wall0) = (cpu_seconds(), std::time::Instant::now());
                for _ in 0..n {
                    if stream {
                        let mut s = c.get_streaming_response(ChatRequest::new(&msgs, &o).with_function_invocation_kwargs(&fk).with_client_kwargs(&ck));
                        while let Some(u) = s.next().await {
                            u?;
                        }
                    } else {
                        c.get_response(ChatRequest::new(&msgs, &o).with_function_invocation_kwargs(&fk).with_client_kwargs(&ck)).await?;
                    }
                }
                let cpu = cpu_seconds() - cpu0;
                println!(
                    "{api:?} stream={stream}: {:.4} ms CPU/call, {:.3} ms wall/call",
                    cpu * 1000.0 / n as f64,
                    wall0.elapsed().as_secs_f64() * 1000.0 / n as f64
                );
            }
        }
        Ok(())
    })
}
