//! A fake OpenAI-compatible server (Chat Completions, plain and streaming) for tests without an
//! async runtime of their own, such as the `cairn` binary's: a [`TestServer`] on a background
//! thread that answers from a script of the request body.

use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use crate::server::{Recorded, Reply as WireReply, TestServer, lock};

/// What the fake model answers: a tool call or text.
#[derive(Debug, Clone)]
pub enum Reply {
    /// One tool call (id `call_1`) of this tool with these arguments.
    Call(&'static str, Value),
    /// A final text answer.
    Text(String),
}

/// The running server; it lives until the process ends.
#[derive(Debug)]
pub struct FakeOpenAI {
    /// `http://127.0.0.1:<port>/v1`
    pub base_url: String,
    /// The JSON bodies received.
    pub requests: Arc<Mutex<Vec<Value>>>,
    /// The header lines of each request received (`Name: value`).
    pub headers: Arc<Mutex<Vec<Vec<String>>>>,
}

impl FakeOpenAI {
    /// Starts a server answering with `script(request body)`.
    ///
    /// # Panics
    /// If the runtime or the listener cannot be set up.
    pub fn start(script: impl Fn(&Value) -> Reply + Send + Sync + 'static) -> FakeOpenAI {
        let requests = Arc::new(Mutex::new(Vec::new()));
        let headers = Arc::new(Mutex::new(Vec::new()));
        let (log, head_log) = (Arc::clone(&requests), Arc::clone(&headers));
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => panic!("tokio runtime: {e}"),
            };
            rt.block_on(async move {
                let server = TestServer::start(move |r: &Recorded, _| {
                    let body: Value = serde_json::from_slice(&r.body).unwrap_or(Value::Null);
                    lock(&log).push(body.clone());
                    lock(&head_log)
                        .push(r.headers.iter().map(|(k, v)| format!("{k}: {v}")).collect());
                    let reply = script(&body);
                    if body["stream"] == true {
                        WireReply::SseBody(sse(&reply))
                    } else {
                        WireReply::ok(plain(&reply).to_string())
                    }
                })
                .await;
                let _ = tx.send(server.url());
                std::future::pending::<()>().await;
            });
        });
        let base_url = match rx.recv() {
            Ok(u) => u,
            Err(e) => panic!("the fake server did not start: {e}"),
        };
        FakeOpenAI {
            base_url,
            requests,
            headers,
        }
    }

    /// The usual tool loop: write `/hello.py`, then a final answer once a tool result came back.
    pub fn hello_loop() -> FakeOpenAI {
        FakeOpenAI::start(|body| {
            if has_tool_result(body) {
                Reply::Text("Created hello.py; it prints hello.".into())
            } else {
                Reply::Call(
                    "write_file",
                    json!({"path": "/hello.py", "content": "print('hello')\n"}),
                )
            }
        })
    }

    /// The requests received so far.
    pub fn bodies(&self) -> Vec<Value> {
        lock(&self.requests).clone()
    }

    /// `exe` (the `cairn` binary) hermetic against this server: a clean environment but for
    /// `PATH`, `HOME` and the working directory `dir`, `OPENAI_BASE_URL` this server, `NO_COLOR`.
    pub fn command(&self, exe: impl AsRef<std::ffi::OsStr>, dir: &Path) -> Command {
        let mut c = Command::new(exe);
        c.current_dir(dir)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", dir)
            .env("OPENAI_BASE_URL", &self.base_url)
            .env("NO_COLOR", "1");
        c
    }
}

/// The text of the first user message of a Chat Completions request body.
pub fn first_user(body: &Value) -> String {
    body["messages"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["role"] == "user"))
        .and_then(|m| m["content"].as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// Whether the conversation already holds a tool result.
pub fn has_tool_result(body: &Value) -> bool {
    body["messages"]
        .as_array()
        .is_some_and(|m| m.iter().any(|m| m["role"] == "tool"))
}

/// The text of the last tool result.
pub fn last_tool_result(body: &Value) -> Option<String> {
    body["messages"]
        .as_array()?
        .iter()
        .rev()
        .find(|m| m["role"] == "tool")
        .and_then(|m| m["content"].as_str().map(str::to_owned))
}

/// The char boundary nearest below the middle of `s`.
fn half(s: &str) -> usize {
    (0..=s.len() / 2)
        .rev()
        .find(|&i| s.is_char_boundary(i))
        .unwrap_or(0)
}

fn usage() -> Value {
    json!({"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150})
}

fn plain(reply: &Reply) -> Value {
    let (message, finish) = match reply {
        Reply::Call(name, args) => (
            json!({"role": "assistant", "content": null, "tool_calls": [{
                "id": "call_1", "type": "function",
                "function": {"name": name, "arguments": args.to_string()}
            }]}),
            "tool_calls",
        ),
        Reply::Text(t) => (json!({"role": "assistant", "content": t}), "stop"),
    };
    json!({
        "id": "chatcmpl-fake", "object": "chat.completion", "created": 0, "model": "fake",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": usage(),
    })
}

fn sse(reply: &Reply) -> String {
    let chunk = |delta: Value, finish: Value| {
        json!({
            "id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0, "model": "fake",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        })
    };
    let mut events = Vec::new();
    match reply {
        Reply::Call(name, args) => {
            let args = args.to_string();
            let (a, b) = args.split_at(half(&args));
            events.push(chunk(
                json!({"role": "assistant", "tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                    "function": {"name": name, "arguments": a}}]}),
                Value::Null,
            ));
            events.push(chunk(
                json!({"tool_calls": [{"index": 0, "function": {"arguments": b}}]}),
                Value::Null,
            ));
            events.push(chunk(json!({}), json!("tool_calls")));
        }
        Reply::Text(t) => {
            let (a, b) = t.split_at(half(t));
            events.push(chunk(
                json!({"role": "assistant", "content": a}),
                Value::Null,
            ));
            events.push(chunk(json!({"content": b}), Value::Null));
            events.push(chunk(json!({}), json!("stop")));
        }
    }
    events.push(json!({
        "id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0, "model": "fake",
        "choices": [], "usage": usage(),
    }));
    let mut out: String = events.iter().map(crate::sse::data).collect();
    out.push_str("data: [DONE]\n\n");
    out
}

/// A port on 127.0.0.1 nothing listens on (bound, then dropped), for connection errors.
///
/// # Panics
/// If no port can be bound.
pub fn closed_port() -> u16 {
    match std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()) {
        Ok(a) => a.port(),
        Err(e) => panic!("bind 127.0.0.1:0: {e}"),
    }
}
