//! A scripted HTTP/1.1 server on 127.0.0.1: it records every request (method, path, headers,
//! body) and answers from a handler or a script of [`Reply`]s. It knows nothing of any model API;
//! the wire shapes come from [`crate::openai`], [`crate::anthropic`] and [`crate::gemini`].

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

use crate::sse::split;

/// Locks `m`, ignoring poisoning (a panicking test thread must not hide the log from others).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// One request the server received.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// `GET`, `POST`, …
    pub method: String,
    /// The request target, e.g. `/v1/chat/completions` or `/v1beta/models/m:generateContent`.
    pub path: String,
    /// The header lines, names as sent.
    pub headers: Vec<(String, String)>,
    /// The raw body.
    pub body: Vec<u8>,
}

impl Recorded {
    /// The body as JSON.
    ///
    /// # Panics
    /// If the body is not JSON (a test failure).
    pub fn json(&self) -> Value {
        match serde_json::from_slice(&self.body) {
            Ok(v) => v,
            Err(e) => panic!("request body is not JSON ({e}): {}", self.text()),
        }
    }

    /// The body as (lossy) UTF-8 text, for "never appears in the request" checks.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The value of the header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Whether the JSON body asks for a stream (`"stream": true`, as OpenAI and Anthropic do;
    /// Gemini streams by path, see [`crate::Wire::is_stream`]).
    pub fn is_stream(&self) -> bool {
        serde_json::from_slice::<Value>(&self.body).is_ok_and(|v| v["stream"] == json!(true))
    }
}

/// What the server answers.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A complete JSON body with a status and extra headers.
    Json {
        /// The HTTP status.
        status: u16,
        /// Extra headers.
        headers: Vec<(String, String)>,
        /// The body.
        body: String,
    },
    /// An SSE body sent as these chunked-encoding pieces; `cut` closes the connection after
    /// them without the terminating chunk.
    Sse {
        /// The body, in the pieces it is written in.
        pieces: Vec<Vec<u8>>,
        /// Whether the connection closes mid-body.
        cut: bool,
    },
    /// A whole SSE body sent in one write with a `Content-Length` (what small servers do; one
    /// write also avoids Nagle/delayed-ACK stalls).
    SseBody(String),
    /// Waits before answering with the inner reply.
    Delay(Duration, Box<Reply>),
    /// Raw bytes of a whole HTTP response, written in these pieces (with a pause between
    /// them); `close` closes the connection afterwards.
    Raw {
        /// The bytes, in the pieces they are written in.
        pieces: Vec<Vec<u8>>,
        /// Whether the connection closes afterwards.
        close: bool,
    },
}

impl Reply {
    /// `200 OK` with this JSON body.
    pub fn ok(body: impl Into<String>) -> Reply {
        Reply::status(200, body)
    }

    /// This status with this JSON body.
    pub fn status(status: u16, body: impl Into<String>) -> Reply {
        Reply::Json {
            status,
            headers: vec![],
            body: body.into(),
        }
    }

    /// Adds a header to a [`Reply::Json`] (other replies are returned unchanged).
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

type Handler = Arc<dyn Fn(&Recorded, usize) -> Reply + Send + Sync>;

/// The server; it stops when dropped. Needs a tokio runtime with IO and time enabled.
pub struct TestServer {
    /// The port it listens on (127.0.0.1).
    pub port: u16,
    requests: Arc<Mutex<Vec<Recorded>>>,
    connections: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for TestServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestServer")
            .field("port", &self.port)
            .field("requests", &lock(&self.requests).len())
            .finish()
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl TestServer {
    /// A server answering with `handler(request, request_number)` (numbers start at 0).
    ///
    /// # Panics
    /// If no port on 127.0.0.1 can be bound.
    pub async fn start(
        handler: impl Fn(&Recorded, usize) -> Reply + Send + Sync + 'static,
    ) -> Self {
        let listener = match TcpListener::bind("127.0.0.1:0").await {
            Ok(l) => l,
            Err(e) => panic!("bind 127.0.0.1:0: {e}"),
        };
        let port = match listener.local_addr() {
            Ok(a) => a.port(),
            Err(e) => panic!("local address: {e}"),
        };
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
            lock(&replies)
                .next()
                .unwrap_or_else(|| Reply::status(599, "{\"error\":\"script exhausted\"}"))
        })
        .await
    }

    /// `http://127.0.0.1:<port>`, the root (Anthropic and Gemini clients take this).
    pub fn root(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// `http://127.0.0.1:<port>/v1`, an OpenAI-style base URL.
    pub fn url(&self) -> String {
        format!("{}/v1", self.root())
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<Recorded> {
        lock(&self.requests).clone()
    }

    /// How many connections were accepted.
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

async fn serve_conn(
    sock: TcpStream,
    requests: Arc<Mutex<Vec<Recorded>>>,
    handler: Handler,
) -> std::io::Result<()> {
    sock.set_nodelay(true)?;
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
            let mut r = lock(&requests);
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
            Reply::SseBody(body) => {
                let out = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: {}\r\n\r\n{body}",
                    body.len()
                );
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
            // Unwrapped by the loop above.
            Reply::Delay(..) => return Ok(()),
        }
    }
}
