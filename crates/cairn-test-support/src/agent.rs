//! Helpers for end-to-end agent tests: an `echo` tool, plain-and-streamed runs, the tool results
//! of a conversation, and running one test in a child process with a chosen environment.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use cairn_core::{
    Agent, AgentEventKind, AgentResponse, FnTool, FunctionResult, Kwargs, Message, ToolOutput,
};
use futures::StreamExt;
use serde_json::json;

/// An `echo` tool counting its calls in `calls`; it answers `echo:<text>`.
pub fn echo_tool(calls: Arc<AtomicUsize>) -> FnTool {
    FnTool::new(
        "echo",
        "Echo the text.",
        json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
        move |ctx| {
            let calls = calls.clone();
            async move {
                calls.fetch_add(1, Ordering::SeqCst);
                Ok(ToolOutput::text(format!(
                    "echo:{}",
                    ctx.arguments["text"].as_str().unwrap_or("")
                )))
            }
        },
    )
}

/// Runs `agent` on "go" plainly and streamed (with a function-invocation kwarg, `user_id =
/// SECRET-USER`, that must never reach the server) and returns both final responses.
///
/// # Panics
/// If a run fails or the stream ends without `RunCompleted`.
pub async fn run_plain_and_streamed(agent: &Agent) -> (AgentResponse, AgentResponse) {
    let kw = Kwargs::from([("user_id", "SECRET-USER")]);
    let plain = match agent.run("go").function_invocation_kwargs(kw.clone()).await {
        Ok(r) => r,
        Err(e) => panic!("plain run: {e}"),
    };
    let mut stream = agent.run("go").function_invocation_kwargs(kw).stream();
    let mut streamed = None;
    while let Some(u) = stream.next().await {
        if let AgentEventKind::RunCompleted(r) = u.kind {
            streamed = Some(*r);
        }
    }
    match streamed {
        Some(s) => (plain, s),
        None => panic!("the streamed run ended without RunCompleted"),
    }
}

/// Runs the test `name` of the current test binary in a child process, with the variables
/// `clear` removed, `CAIRN_CHILD=1` and `env` set; whether it ran and passed. (The workspace
/// forbids `unsafe`, so tests cannot `set_var` in their own process.)
///
/// # Panics
/// If the test binary cannot be found or started.
pub fn run_child_test(name: &str, clear: &[&str], env: &[(&str, &str)]) -> bool {
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => panic!("test binary: {e}"),
    };
    let mut cmd = std::process::Command::new(exe);
    cmd.args([name, "--exact", "--nocapture", "--test-threads=1"]);
    for v in clear {
        cmd.env_remove(v);
    }
    cmd.env("CAIRN_CHILD", "1");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = match cmd.output() {
        Ok(o) => o,
        Err(e) => panic!("run the test binary: {e}"),
    };
    out.status.success() && String::from_utf8_lossy(&out.stdout).contains("1 passed")
}

/// The first tool result in `messages` (a run's or a recorded request's).
///
/// # Panics
/// If there is none.
pub fn first_result(messages: &[Message]) -> &FunctionResult {
    match messages.iter().flat_map(Message::function_results).next() {
        Some(r) => r,
        None => panic!("no tool result in {} messages", messages.len()),
    }
}
