//! A raw TCP server for fault injection: every connection is handed to a handler that writes
//! whatever bytes it likes (or nothing), plus the pieces such handlers need.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A raw server: every connection is handed to `handler` with its number; counts connections.
/// It stops accepting when dropped.
#[derive(Debug)]
pub struct RawServer {
    /// The port it listens on (127.0.0.1).
    pub port: u16,
    connections: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for RawServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl RawServer {
    /// Starts a server handing each connection to `handler(socket, connection_number)`.
    ///
    /// # Panics
    /// If no port on 127.0.0.1 can be bound.
    pub async fn start<F, Fut>(handler: F) -> RawServer
    where
        F: Fn(TcpStream, usize) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let listener = match TcpListener::bind("127.0.0.1:0").await {
            Ok(l) => l,
            Err(e) => panic!("bind 127.0.0.1:0: {e}"),
        };
        let port = match listener.local_addr() {
            Ok(a) => a.port(),
            Err(e) => panic!("local address: {e}"),
        };
        let connections = Arc::new(AtomicUsize::new(0));
        let count = Arc::clone(&connections);
        let task = tokio::spawn(async move {
            let mut conns = Vec::new();
            while let Ok((sock, _)) = listener.accept().await {
                let n = count.fetch_add(1, Ordering::SeqCst);
                conns.push(tokio::spawn(handler(sock, n)));
            }
        });
        RawServer {
            port,
            connections,
            task,
        }
    }

    /// `http://127.0.0.1:<port>/v1`, an OpenAI-style base URL.
    pub fn url(&self) -> String {
        format!("{}/v1", self.root())
    }

    /// `http://127.0.0.1:<port>`.
    pub fn root(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// How many connections were accepted.
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

/// Reads one request (head and `Content-Length` body) and returns its body (empty if the client
/// closed first).
pub async fn read_request(sock: &mut TcpStream) -> Vec<u8> {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        if sock.read(&mut byte).await.unwrap_or(0) == 0 {
            return Vec::new();
        }
        buf.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&buf).to_ascii_lowercase();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; len];
    let _ = sock.read_exact(&mut body).await;
    body
}

/// Keeps the connection open (reading and discarding) until the client closes it.
pub async fn hold(mut sock: TcpStream) {
    let mut sink = [0u8; 4096];
    while let Ok(n) = sock.read(&mut sink).await {
        if n == 0 {
            return;
        }
    }
}

/// `data` as one chunked-transfer-encoding frame.
pub fn chunk(data: &[u8]) -> Vec<u8> {
    let mut frame = format!("{:x}\r\n", data.len()).into_bytes();
    frame.extend_from_slice(data);
    frame.extend_from_slice(b"\r\n");
    frame
}

/// The chunked body's terminating frame.
pub const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

/// The head of a chunked `200 OK` SSE response.
pub const SSE_HEAD: &[u8] =
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n";

/// Writes `SSE_HEAD` and `body` as one chunk, the terminating frame if `finish`, then holds the
/// connection open until the client closes it (a server that never closes).
pub async fn sse_then_hold(mut sock: TcpStream, body: &[u8], finish: bool) {
    let _ = sock.write_all(SSE_HEAD).await;
    let _ = sock.write_all(&chunk(body)).await;
    if finish {
        let _ = sock.write_all(LAST_CHUNK).await;
    }
    hold(sock).await;
}
