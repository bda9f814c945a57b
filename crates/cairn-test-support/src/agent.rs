//! Helpers for end-to-end agent tests: an `echo` tool, plain-and-streamed runs, the tool results
//! of a conversation, and running one test in a child process with a chosen environment.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

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

/// The side effect that crash and resume tests watch: every executed `append` call adds its
/// line (and counts `appended` in the session state); a line named by [`hang_once`] hangs the
/// first time, as a call running when its process is killed.
///
/// [`hang_once`]: AppendLog::hang_once
#[derive(Debug, Clone, Default)]
pub struct AppendLog {
    lines: Arc<Mutex<Vec<String>>>,
    hang: Arc<Mutex<Vec<String>>>,
}

fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl AppendLog {
    /// The lines appended so far, in order.
    pub fn lines(&self) -> Vec<String> {
        locked(&self.lines).clone()
    }

    /// The next call appending `line` hangs forever instead.
    pub fn hang_once(&self, line: &str) {
        locked(&self.hang).push(line.to_owned());
    }

    /// The `append(line)` tool writing to this log.
    pub fn tool(&self) -> FnTool {
        let log = self.clone();
        FnTool::new(
            "append",
            "Append a line.",
            json!({"type": "object", "properties": {"line": {"type": "string"}}, "required": ["line"]}),
            move |ctx| {
                let log = log.clone();
                async move {
                    let line = ctx.arguments["line"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned();
                    let hang = {
                        let mut h = locked(&log.hang);
                        let pos = h.iter().position(|l| *l == line);
                        pos.map(|p| h.remove(p)).is_some()
                    };
                    if hang {
                        futures::future::pending::<()>().await;
                    }
                    locked(&log.lines).push(line.clone());
                    if let Some(s) = &ctx.session {
                        let n = s.state().get::<u64>("appended").unwrap_or(0);
                        s.state().insert_value("appended", json!(n + 1));
                    }
                    Ok(ToolOutput::text(format!("appended {line}")))
                }
            },
        )
    }
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
