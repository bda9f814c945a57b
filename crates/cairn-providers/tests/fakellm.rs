//! Against the project's fake OpenAI server (`shared/bench/fakellm.py`), when python3 and the
//! script are available; skipped (with a note) otherwise. Set `FAKE_LLM_PY` to point at the
//! script explicitly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use cairn_core::{
    Agent, AgentEventKind, ChatClient, ChatErrorKind, ChatOptions, ChatRequest, FnTool, Message,
    ToolOutput,
};
use cairn_providers::{Api, OpenAIClient};
use futures::StreamExt;
use serde_json::json;

struct Fake {
    child: Child,
    port: u16,
    _dir: PathBuf,
}

impl Drop for Fake {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn script() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("FAKE_LLM_PY") {
        return Some(PathBuf::from(p));
    }
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    // crates/cairn-providers -> repo root -> its parent, where shared/ lives.
    let candidate = manifest.join("../../../shared/bench/fakellm.py");
    candidate.exists().then_some(candidate)
}

fn start(extra: &[&str]) -> Option<Fake> {
    let Some(script) = script() else {
        eprintln!("skipping: fakellm.py not found");
        return None;
    };
    let dir = std::env::temp_dir().join(format!(
        "cairn-fakellm-{}-{}",
        std::process::id(),
        fastrand_suffix()
    ));
    std::fs::create_dir_all(&dir).ok()?;
    let port_file = dir.join("port");
    let child = match Command::new("python3")
        .arg(&script)
        .args(["--port", "0", "--port-file"])
        .arg(&port_file)
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("skipping: python3 unavailable: {e}");
            return None;
        }
    };
    let mut fake = Fake {
        child,
        port: 0,
        _dir: dir,
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if let Ok(s) = std::fs::read_to_string(&port_file)
            && let Ok(p) = s.trim().parse()
        {
            fake.port = p;
            return Some(fake);
        }
        if let Ok(Some(status)) = fake.child.try_wait() {
            eprintln!("skipping: fakellm exited with {status}");
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    eprintln!("skipping: fakellm did not start");
    None
}

fn fastrand_suffix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

fn client(port: u16, api: Api) -> OpenAIClient {
    OpenAIClient::builder()
        .base_url(format!("http://127.0.0.1:{port}/v1"))
        .model("fake-model")
        .api(api)
        .build()
        .unwrap()
}

fn echo() -> FnTool {
    FnTool::new(
        "echo",
        "Echo the text.",
        json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
        |ctx| async move {
            Ok(ToolOutput::text(
                ctx.arguments["text"].as_str().unwrap_or("").to_owned(),
            ))
        },
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_loops_against_fakellm() {
    let Some(fake) = start(&["--stream-chunk-chars", "3"]) else {
        return;
    };
    for api in [Api::ChatCompletions, Api::Responses] {
        let agent = Agent::builder(client(fake.port, api)).tool(echo()).build();
        let input = "[scenario:parallel steps=3 calls=2] go";
        let plain = agent.run(input).await.unwrap();
        assert_eq!(plain.last_text().as_deref(), Some("done"), "{api:?}");
        assert_eq!(plain.function_calls().count(), 6);
        assert!(plain.usage.input_tokens > 0);
        let mut s = agent.run(input).stream();
        let mut done = None;
        while let Some(u) = s.next().await {
            if let AgentEventKind::RunCompleted(r) = u.kind {
                done = Some(*r);
            }
        }
        // fakellm derives ids and prompt-token counts from the request bytes, which differ by
        // the `stream` fields; everything else must match.
        let mut done = done.unwrap();
        assert_eq!(done.usage.output_tokens, plain.usage.output_tokens);
        done.usage = plain.usage;
        done.response_id = plain.response_id.clone();
        assert_eq!(done, plain, "{api:?}: streamed == plain");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn context_overflow_from_fakellm() {
    let Some(fake) = start(&["--max-context-chars", "200"]) else {
        return;
    };
    let long = "x".repeat(500);
    for api in [Api::ChatCompletions, Api::Responses] {
        let c = client(fake.port, api);
        let e = c
            .get_response(ChatRequest::new(
                &[Message::user(long.clone())],
                &ChatOptions::default(),
            ))
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ChatErrorKind::ContextOverflow, "{e}");
        assert_eq!(e.status(), Some(400));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_sessions_share_the_pool() {
    let Some(fake) = start(&[]) else { return };
    for api in [Api::ChatCompletions, Api::Responses] {
        let agent = Agent::builder(client(fake.port, api)).tool(echo()).build();
        let runs = (0..40).map(|i| {
            let agent = agent.clone();
            async move {
                let input = "[scenario:loop steps=5] go";
                if i % 2 == 0 {
                    agent.run(input).await.map(|r| r.function_calls().count())
                } else {
                    let mut s = agent.run(input).stream();
                    let mut calls = 0;
                    while let Some(u) = s.next().await {
                        if let AgentEventKind::RunCompleted(r) = u.kind {
                            calls = r.function_calls().count();
                        }
                    }
                    Ok(calls)
                }
            }
        });
        for r in futures::future::join_all(runs).await {
            assert_eq!(r.unwrap(), 5, "{api:?}");
        }
    }
}
