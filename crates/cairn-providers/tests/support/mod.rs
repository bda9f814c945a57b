//! A scripted local HTTP/1.1 server that speaks OpenAI's wire protocol (JSON and SSE), plus
//! builders for the wire shapes of both APIs. Never touches the internet.
#![allow(dead_code)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

/// One request the server received.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Recorded {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("request body is JSON")
    }
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    pub fn is_stream(&self) -> bool {
        self.json()["stream"] == json!(true)
    }
}

/// What the server answers.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A complete body with a status and extra headers.
    Json {
        status: u16,
        headers: Vec<(String, String)>,
        body: String,
    },
    /// An SSE body sent as these chunked-encoding pieces; `cut` closes the connection after
    /// them without the terminating chunk.
    Sse { pieces: Vec<Vec<u8>>, cut: bool },
    /// Waits before answering with the inner reply.
    Delay(Duration, Box<Reply>),
    /// Raw bytes of a whole HTTP response, written in these pieces (with a pause between
    /// them); `close` closes the connection afterwards.
    Raw { pieces: Vec<Vec<u8>>, close: bool },
}

impl Reply {
    pub fn ok(body: impl Into<String>) -> Reply {
        Reply::Json {
            status: 200,
            headers: vec![],
            body: body.into(),
        }
    }
    pub fn status(status: u16, body: impl Into<String>) -> Reply {
        Reply::Json {
            status,
            headers: vec![],
            body: body.into(),
        }
    }
    pub fn with_header(self, name: &str, value: &str) -> Reply {
        match self {
            Reply::Json {
                status,
                mut headers,
                body,
            } => {
                headers.push((name.into(), value.into()));
                Reply::Json {
                    status,
                    headers,
                    body,
                }
            }
            other => other,
        }
    }
    /// An SSE stream of `events`, split into pieces of the cycling `sizes` (awkward
    /// boundaries: inside UTF-8 sequences, between `\r` and `\n`, …).
    pub fn sse(events: &[String], sizes: &[usize]) -> Reply {
        Reply::Sse {
            pieces: split(events.concat().as_bytes(), sizes),
            cut: false,
        }
    }
}

pub fn split(bytes: &[u8], sizes: &[usize]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut i = 0;
    let mut k = 0;
    while i < bytes.len() {
        let n = sizes[k % sizes.len()].max(1);
        let end = (i + n).min(bytes.len());
        out.push(bytes[i..end].to_vec());
        i = end;
        k += 1;
    }
    out
}

type Handler = Arc<dyn Fn(&Recorded, usize) -> Reply + Send + Sync>;

/// The server; stops when dropped.
pub struct TestServer {
    pub port: u16,
    requests: Arc<Mutex<Vec<Recorded>>>,
    connections: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl TestServer {
    /// A server answering with `handler(request, request_number)`.
    pub async fn start(
        handler: impl Fn(&Recorded, usize) -> Reply + Send + Sync + 'static,
    ) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let connections = Arc::new(AtomicUsize::new(0));
        let handler: Handler = Arc::new(handler);
        let (r, c) = (requests.clone(), connections.clone());
        let task = tokio::spawn(async move {
            loop {
                let Ok((sock, _)) = listener.accept().await else {
                    return;
                };
                c.fetch_add(1, Ordering::SeqCst);
                let (r, h) = (r.clone(), handler.clone());
                tokio::spawn(async move {
                    let _ = serve_conn(sock, r, h).await;
                });
            }
        });
        TestServer {
            port,
            requests,
            connections,
            task,
        }
    }

    /// A server answering with `replies` in order (HTTP 599 once they run out).
    pub async fn scripted(replies: Vec<Reply>) -> Self {
        let replies = Mutex::new(replies.into_iter());
        Self::start(move |_, _| {
            replies
                .lock()
                .unwrap()
                .next()
                .unwrap_or_else(|| Reply::status(599, "{\"error\":\"script exhausted\"}"))
        })
        .await
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }

    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

async fn serve_conn(
    sock: TcpStream,
    requests: Arc<Mutex<Vec<Recorded>>>,
    handler: Handler,
) -> std::io::Result<()> {
    let (rd, mut wr) = sock.into_split();
    let mut rd = BufReader::new(rd);
    loop {
        let mut head = String::new();
        loop {
            let mut line = String::new();
            if rd.read_line(&mut line).await? == 0 {
                return Ok(());
            }
            if line == "\r\n" {
                break;
            }
            head.push_str(&line);
        }
        let mut lines = head.split("\r\n");
        let mut first = lines.next().unwrap_or("").split(' ');
        let method = first.next().unwrap_or("").to_owned();
        let path = first.next().unwrap_or("").to_owned();
        let headers: Vec<(String, String)> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
            .collect();
        let len: usize = headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(0);
        let mut body = vec![0; len];
        rd.read_exact(&mut body).await?;
        let rec = Recorded {
            method,
            path,
            headers,
            body,
        };
        let n = {
            let mut r = requests.lock().unwrap();
            r.push(rec.clone());
            r.len() - 1
        };
        let mut reply = handler(&rec, n);
        while let Reply::Delay(d, inner) = reply {
            tokio::time::sleep(d).await;
            reply = *inner;
        }
        match reply {
            Reply::Json {
                status,
                headers,
                body,
            } => {
                let mut out = format!(
                    "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
                    body.len()
                );
                for (k, v) in headers {
                    out.push_str(&format!("{k}: {v}\r\n"));
                }
                out.push_str("\r\n");
                out.push_str(&body);
                wr.write_all(out.as_bytes()).await?;
                wr.flush().await?;
            }
            Reply::Sse { pieces, cut } => {
                wr.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\nCache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n",
                )
                .await?;
                for p in pieces {
                    let mut frame = format!("{:x}\r\n", p.len()).into_bytes();
                    frame.extend_from_slice(&p);
                    frame.extend_from_slice(b"\r\n");
                    wr.write_all(&frame).await?;
                    wr.flush().await?;
                    tokio::task::yield_now().await;
                }
                if cut {
                    wr.shutdown().await?;
                    return Ok(());
                }
                wr.write_all(b"0\r\n\r\n").await?;
                wr.flush().await?;
            }
            Reply::Raw { pieces, close } => {
                for p in pieces {
                    wr.write_all(&p).await?;
                    wr.flush().await?;
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
                if close {
                    wr.shutdown().await?;
                    return Ok(());
                }
            }
            Reply::Delay(..) => unreachable!(),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Wire shapes (as fakellm.py and OpenAI send them)
// ---------------------------------------------------------------------------------------------

/// What a scripted model turn says.
#[derive(Debug, Clone, Default)]
pub struct Turn {
    pub text: Option<String>,
    pub reasoning: Option<String>,
    /// (call id, name, arguments JSON text)
    pub calls: Vec<(String, String, String)>,
}

impl Turn {
    pub fn text(t: &str) -> Turn {
        Turn {
            text: Some(t.into()),
            ..Default::default()
        }
    }
    pub fn call(id: &str, name: &str, args: Value) -> Turn {
        Turn {
            calls: vec![(id.into(), name.into(), args.to_string())],
            ..Default::default()
        }
    }
}

fn pieces(s: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = s.chars().collect();
    chars.chunks(n).map(|c| c.iter().collect()).collect()
}

pub fn chat_json(t: &Turn) -> String {
    let mut msg = json!({"role": "assistant", "content": t.text, "refusal": null});
    if let Some(r) = &t.reasoning {
        msg["reasoning_content"] = json!(r);
    }
    if !t.calls.is_empty() {
        msg["tool_calls"] = t
            .calls
            .iter()
            .map(|(id, name, args)| json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}}))
            .collect();
    }
    json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m-1",
        "system_fingerprint": "fp", "service_tier": "default", "some_future_field": {"x": [1, null]},
        "choices": [{"index": 0, "message": msg, "logprobs": null,
                      "finish_reason": if t.calls.is_empty() { "stop" } else { "tool_calls" }}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18,
                  "prompt_tokens_details": {"cached_tokens": 3, "audio_tokens": null},
                  "completion_tokens_details": null}
    })
    .to_string()
}

pub fn chat_sse(t: &Turn, keep_alive: bool) -> Vec<String> {
    let ev = |delta: Value, finish: Value| {
        format!(
            "data: {}\n\n",
            json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m-1",
                   "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
                   "usage": null})
        )
    };
    let mut out = vec![ev(
        json!({"role": "assistant", "content": "", "refusal": null}),
        Value::Null,
    )];
    if keep_alive {
        out.push(": keep-alive\r\n\r\n".into());
    }
    if let Some(r) = &t.reasoning {
        for p in pieces(r, 4) {
            out.push(ev(json!({"reasoning_content": p}), Value::Null));
        }
    }
    if let Some(text) = &t.text {
        for p in pieces(text, 3) {
            out.push(ev(json!({"content": p}), Value::Null));
        }
    }
    for (i, (id, name, args)) in t.calls.iter().enumerate() {
        out.push(ev(
            json!({"tool_calls": [{"index": i, "id": id, "type": "function", "function": {"name": name, "arguments": ""}}]}),
            Value::Null,
        ));
        for p in pieces(args, 5) {
            out.push(ev(
                json!({"tool_calls": [{"index": i, "function": {"arguments": p}}]}),
                Value::Null,
            ));
        }
        if keep_alive {
            out.push(":\n\n".into());
        }
    }
    out.push(ev(
        json!({}),
        json!(if t.calls.is_empty() {
            "stop"
        } else {
            "tool_calls"
        }),
    ));
    out.push(format!(
        "data: {}\r\n\r\n",
        json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m-1",
               "choices": [], "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18,
               "prompt_tokens_details": {"cached_tokens": 3}}})
    ));
    out.push("data: [DONE]\n\n".into());
    out
}

fn responses_items(t: &Turn) -> Vec<Value> {
    let mut items = Vec::new();
    if let Some(r) = &t.reasoning {
        items.push(json!({"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": r}]}));
    }
    if let Some(text) = &t.text {
        items.push(
            json!({"type": "message", "id": "msg_1", "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]}),
        );
    }
    for (i, (id, name, args)) in t.calls.iter().enumerate() {
        items.push(
            json!({"type": "function_call", "id": format!("fc_{i}"), "call_id": id,
            "name": name, "arguments": args, "status": "completed"}),
        );
    }
    items
}

pub fn responses_json_value(t: &Turn, status: &str, output: Option<Vec<Value>>) -> Value {
    json!({
        "id": "resp_1", "object": "response", "created_at": 1, "status": status, "error": null,
        "incomplete_details": null, "instructions": null, "model": "m-1",
        "output": output.unwrap_or_else(|| responses_items(t)),
        "parallel_tool_calls": true, "reasoning": {"effort": null, "summary": null},
        "tools": [], "unknown_future": true,
        "usage": if status == "completed" {
            json!({"input_tokens": 11, "input_tokens_details": {"cached_tokens": 3},
                   "output_tokens": 7, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 18})
        } else { Value::Null }
    })
}

pub fn responses_json(t: &Turn) -> String {
    responses_json_value(t, "completed", None).to_string()
}

pub fn responses_sse(t: &Turn, keep_alive: bool) -> Vec<String> {
    let mut out = Vec::new();
    let mut seq = 0;
    let mut ev = |out: &mut Vec<String>, typ: &str, mut data: Value| {
        data["type"] = json!(typ);
        data["sequence_number"] = json!(seq);
        seq += 1;
        out.push(format!("event: {typ}\ndata: {data}\n\n"));
    };
    ev(
        &mut out,
        "response.created",
        json!({"response": responses_json_value(t, "in_progress", Some(vec![]))}),
    );
    if keep_alive {
        out.push(": ping\n\n".into());
    }
    for (idx, item) in responses_items(t).into_iter().enumerate() {
        match item["type"].as_str().unwrap() {
            "reasoning" => {
                ev(
                    &mut out,
                    "response.output_item.added",
                    json!({"output_index": idx, "item": {"type": "reasoning", "id": "rs_1", "summary": []}}),
                );
                for p in pieces(item["summary"][0]["text"].as_str().unwrap(), 4) {
                    ev(
                        &mut out,
                        "response.reasoning_summary_text.delta",
                        json!({"output_index": idx, "item_id": "rs_1", "summary_index": 0, "delta": p}),
                    );
                }
                ev(
                    &mut out,
                    "response.output_item.done",
                    json!({"output_index": idx, "item": item}),
                );
            }
            "message" => {
                ev(
                    &mut out,
                    "response.output_item.added",
                    json!({"output_index": idx, "item": {"type": "message", "id": "msg_1", "status": "in_progress", "role": "assistant", "content": []}}),
                );
                let text = item["content"][0]["text"].as_str().unwrap().to_owned();
                for p in pieces(&text, 3) {
                    ev(
                        &mut out,
                        "response.output_text.delta",
                        json!({"output_index": idx, "item_id": "msg_1", "content_index": 0, "delta": p, "logprobs": []}),
                    );
                }
                ev(
                    &mut out,
                    "response.output_text.done",
                    json!({"output_index": idx, "item_id": "msg_1", "content_index": 0, "text": text}),
                );
                ev(
                    &mut out,
                    "response.output_item.done",
                    json!({"output_index": idx, "item": item}),
                );
            }
            _ => {
                let mut added = item.clone();
                added["arguments"] = json!("");
                added["status"] = json!("in_progress");
                ev(
                    &mut out,
                    "response.output_item.added",
                    json!({"output_index": idx, "item": added}),
                );
                let args = item["arguments"].as_str().unwrap().to_owned();
                for p in pieces(&args, 5) {
                    ev(
                        &mut out,
                        "response.function_call_arguments.delta",
                        json!({"output_index": idx, "item_id": item["id"], "delta": p}),
                    );
                }
                ev(
                    &mut out,
                    "response.function_call_arguments.done",
                    json!({"output_index": idx, "item_id": item["id"], "name": item["name"], "arguments": args}),
                );
                ev(
                    &mut out,
                    "response.output_item.done",
                    json!({"output_index": idx, "item": item}),
                );
            }
        }
    }
    ev(
        &mut out,
        "response.completed",
        json!({"response": responses_json_value(t, "completed", None)}),
    );
    out
}

/// Splits that hit awkward boundaries.
pub const SPLITS: &[&[usize]] = &[&[1], &[2, 3], &[7, 1, 13], &[64], &[100_000]];

// ---------------------------------------------------------------------------------------------
// Shared by the provider tests
// ---------------------------------------------------------------------------------------------

/// Runs the test `name` of the current test binary in a child process, with the variables
/// `clear` removed, `CAIRN_CHILD=1` and `env` set; whether it ran and passed. (The workspace
/// forbids `unsafe`, so tests cannot `set_var` in their own process.)
pub fn run_child_test(name: &str, clear: &[&str], env: &[(&str, &str)]) -> bool {
    let mut cmd = std::process::Command::new(std::env::current_exe().expect("test binary"));
    cmd.args([name, "--exact", "--nocapture", "--test-threads=1"]);
    for v in clear {
        cmd.env_remove(v);
    }
    cmd.env("CAIRN_CHILD", "1");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run the test binary");
    out.status.success() && String::from_utf8_lossy(&out.stdout).contains("1 passed")
}

/// An `echo` tool counting its calls in `calls`; it answers `echo:<text>`.
pub fn echo_tool(calls: Arc<AtomicUsize>) -> cairn_core::FnTool {
    cairn_core::FnTool::new(
        "echo",
        "Echo the text.",
        json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
        move |ctx| {
            let calls = calls.clone();
            async move {
                calls.fetch_add(1, Ordering::SeqCst);
                Ok(cairn_core::ToolOutput::text(format!(
                    "echo:{}",
                    ctx.arguments["text"].as_str().unwrap_or("")
                )))
            }
        },
    )
}

/// Runs `agent` on "go" plainly and streamed (with a function-invocation kwarg that must never
/// reach the server) and returns both final responses.
pub async fn run_plain_and_streamed(
    agent: &cairn_core::Agent,
) -> (cairn_core::AgentResponse, cairn_core::AgentResponse) {
    use futures::StreamExt;
    let kw = cairn_core::Kwargs::from([("user_id", "SECRET-USER")]);
    let plain = agent
        .run("go")
        .function_invocation_kwargs(kw.clone())
        .await
        .expect("plain run");
    let mut stream = agent.run("go").function_invocation_kwargs(kw).stream();
    let mut streamed = None;
    while let Some(u) = stream.next().await {
        if let cairn_core::AgentEventKind::RunCompleted(r) = u.kind {
            streamed = Some(*r);
        }
    }
    (plain, streamed.expect("RunCompleted"))
}
