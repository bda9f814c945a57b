//! A fake OpenAI-compatible server (Chat Completions, plain and streaming) for the CLI tests: a
//! small HTTP/1.1 server on 127.0.0.1 that answers from a script.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

/// What the fake model answers: a tool call or text.
#[derive(Debug, Clone)]
pub enum Reply {
    /// One tool call.
    Call(&'static str, Value),
    /// A final text answer.
    Text(String),
}

type Script = dyn Fn(&Value) -> Reply + Send + Sync;

/// The running server.
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
    pub fn start(script: impl Fn(&Value) -> Reply + Send + Sync + 'static) -> FakeOpenAI {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let headers = Arc::new(Mutex::new(Vec::new()));
        let script: Arc<Script> = Arc::new(script);
        let log = Arc::clone(&requests);
        let head_log = Arc::clone(&headers);
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                let script = Arc::clone(&script);
                let log = Arc::clone(&log);
                let head_log = Arc::clone(&head_log);
                std::thread::spawn(move || {
                    let _ = serve(conn, script.as_ref(), &log, &head_log);
                });
            }
        });
        FakeOpenAI {
            base_url: format!("http://127.0.0.1:{port}/v1"),
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
        self.requests.lock().unwrap().clone()
    }
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

fn serve(
    conn: TcpStream,
    script: &Script,
    log: &Mutex<Vec<Value>>,
    head_log: &Mutex<Vec<Vec<String>>>,
) -> std::io::Result<()> {
    conn.set_nodelay(true)?;
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut conn = conn;
    loop {
        // Request line and headers.
        let mut length = 0usize;
        let mut heads = Vec::new();
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h)? == 0 {
                return Ok(());
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            heads.push(h.to_owned());
            if let Some((k, v)) = h.split_once(':')
                && k.eq_ignore_ascii_case("content-length")
            {
                length = v.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0u8; length];
        reader.read_exact(&mut body)?;
        let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        log.lock().unwrap().push(body.clone());
        head_log.lock().unwrap().push(heads);
        let reply = script(&body);
        let streaming = body["stream"] == true;
        let (content_type, payload) = if streaming {
            ("text/event-stream", sse(&reply))
        } else {
            ("application/json", plain(&reply).to_string())
        };
        // One write: split writes meet Nagle's algorithm and delayed ACKs (~40 ms stalls).
        let response = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\r\n{payload}",
            payload.len()
        );
        conn.write_all(response.as_bytes())?;
        conn.flush()?;
    }
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
            let (a, b) = args.split_at(args.len() / 2);
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
            let (a, b) = t.split_at(t.len() / 2);
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
    let mut out = String::new();
    for e in events {
        out.push_str(&format!("data: {e}\n\n"));
    }
    out.push_str("data: [DONE]\n\n");
    out
}
