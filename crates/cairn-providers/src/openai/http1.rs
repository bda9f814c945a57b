//! A minimal HTTP/1.1 client for plain `http://` servers (local models, fake servers).
//!
//! It talks to one origin over pooled keep-alive connections: one `write` per request (head and
//! body together), responses parsed with `httparse`, bodies read by `Content-Length`, chunked
//! encoding or until the connection closes, without copying body bytes. That costs a fraction of
//! a general-purpose client's CPU per call, which matters when the model server is local. TLS,
//! proxies and HTTP/2 are left to `reqwest` (see `Transport` in the parent module).

use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Connections idle longer than this are not reused (servers often close after 5–60 s).
const MAX_IDLE: Duration = Duration::from_secs(30);
/// At most this many idle connections are kept.
const MAX_POOLED: usize = 256;

struct Conn {
    io: TcpStream,
    buf: BytesMut,
    idle_since: tokio::time::Instant,
}

/// One origin's connection pool.
pub(crate) struct Http1 {
    host: String,
    port: u16,
    connect_timeout: Duration,
    read_timeout: Duration,
    pool: Mutex<Vec<Conn>>,
}

/// Why an exchange failed.
#[derive(Debug)]
pub(crate) enum Failure {
    /// No connection could be made.
    Connect(io::Error),
    /// The request could not be sent or no response head arrived.
    Send(io::Error),
    /// The response head was malformed.
    Protocol(String),
    /// No byte arrived in time.
    Timeout,
}

impl Http1 {
    pub(crate) fn new(
        host: String,
        port: u16,
        connect_timeout: Duration,
        read_timeout: Duration,
    ) -> Self {
        Http1 {
            host,
            port,
            connect_timeout,
            read_timeout,
            pool: Mutex::new(Vec::new()),
        }
    }

    fn checkout(&self) -> Option<Conn> {
        let mut pool = self.pool.lock().ok()?;
        while let Some(c) = pool.pop() {
            if c.idle_since.elapsed() < MAX_IDLE {
                return Some(c);
            }
        }
        None
    }

    fn checkin(&self, mut conn: Conn) {
        if let Ok(mut pool) = self.pool.lock()
            && pool.len() < MAX_POOLED
        {
            conn.idle_since = tokio::time::Instant::now();
            pool.push(conn);
        }
    }

    async fn connect(&self) -> Result<Conn, Failure> {
        let fut = TcpStream::connect((self.host.as_str(), self.port));
        let io = match tokio::time::timeout(self.connect_timeout, fut).await {
            Ok(Ok(io)) => io,
            Ok(Err(e)) => return Err(Failure::Connect(e)),
            Err(_) => return Err(Failure::Timeout),
        };
        let _ = io.set_nodelay(true);
        Ok(Conn {
            io,
            buf: BytesMut::with_capacity(16 * 1024),
            idle_since: tokio::time::Instant::now(),
        })
    }

    /// Sends `request` (a complete HTTP/1.1 request) and reads the response head. A pooled
    /// connection the server has closed meanwhile is replaced transparently.
    pub(crate) async fn send(self: &Arc<Self>, request: &[u8]) -> Result<RawResponse, Failure> {
        loop {
            let (conn, reused) = match self.checkout() {
                Some(c) => (c, true),
                None => (self.connect().await?, false),
            };
            match self.exchange(conn, request).await {
                Ok(r) => return Ok(r),
                Err((Failure::Send(_), true)) if reused => continue,
                Err((f, _)) => return Err(f),
            }
        }
    }

    /// The error carries whether nothing at all was received (so a stale pooled connection can
    /// be retried safely).
    async fn exchange(
        self: &Arc<Self>,
        mut conn: Conn,
        request: &[u8],
    ) -> Result<RawResponse, (Failure, bool)> {
        if let Err(e) = conn.io.write_all(request).await {
            return Err((Failure::Send(e), true));
        }
        conn.buf.clear();
        loop {
            // Parse what we have.
            if !conn.buf.is_empty() {
                let mut headers = [httparse::EMPTY_HEADER; 64];
                let mut resp = httparse::Response::new(&mut headers);
                match resp.parse(&conn.buf) {
                    Ok(httparse::Status::Complete(len)) => {
                        let status = resp.code.unwrap_or(0);
                        if (100..200).contains(&status) && status != 101 {
                            conn.buf.advance(len);
                            continue;
                        }
                        let head = Head::from(&resp);
                        conn.buf.advance(len);
                        return Ok(RawResponse::new(self.clone(), conn, status, head));
                    }
                    Ok(httparse::Status::Partial) => {}
                    Err(e) => {
                        return Err((
                            Failure::Protocol(format!("invalid HTTP response: {e}")),
                            false,
                        ));
                    }
                }
            }
            let nothing_yet = conn.buf.is_empty();
            match read_more(&mut conn, self.read_timeout).await {
                Ok(0) => {
                    return Err((
                        Failure::Send(io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            "the connection closed before a response",
                        )),
                        nothing_yet,
                    ));
                }
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::TimedOut => {
                    return Err((Failure::Timeout, false));
                }
                Err(e) => return Err((Failure::Send(e), nothing_yet)),
            }
        }
    }
}

async fn read_more(conn: &mut Conn, timeout: Duration) -> io::Result<usize> {
    if conn.buf.capacity() - conn.buf.len() < 4096 {
        conn.buf.reserve(16 * 1024);
    }
    match tokio::time::timeout(timeout, conn.io.read_buf(&mut conn.buf)).await {
        Ok(r) => r,
        Err(_) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "no data from the server within the timeout",
        )),
    }
}

/// What the response head says.
struct Head {
    content_length: Option<u64>,
    chunked: bool,
    close: bool,
    http10: bool,
    retry_after: Option<Duration>,
}

impl Head {
    fn from(resp: &httparse::Response<'_, '_>) -> Head {
        let mut h = Head {
            content_length: None,
            chunked: false,
            close: false,
            http10: resp.version == Some(0),
            retry_after: None,
        };
        let mut retry_after_ms = None;
        let mut retry_after_s = None;
        for header in resp.headers.iter() {
            let v = std::str::from_utf8(header.value).unwrap_or("").trim();
            let name = header.name;
            if name.eq_ignore_ascii_case("content-length") {
                h.content_length = v.parse().ok();
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                h.chunked = v.to_ascii_lowercase().contains("chunked");
            } else if name.eq_ignore_ascii_case("connection") {
                h.close = v.eq_ignore_ascii_case("close");
            } else if name.eq_ignore_ascii_case("retry-after-ms") {
                retry_after_ms = v.parse::<f64>().ok();
            } else if name.eq_ignore_ascii_case("retry-after") {
                retry_after_s = v.parse::<f64>().ok();
            }
        }
        h.retry_after = retry_after_ms
            .map(|ms| ms / 1000.0)
            .or(retry_after_s)
            .filter(|s| s.is_finite() && *s >= 0.0)
            .map(Duration::from_secs_f64);
        h
    }
}

enum BodyState {
    Length(u64),
    Close,
    ChunkSize,
    ChunkData(u64),
    ChunkCrlf,
    Trailers,
    Done,
}

/// A response whose body is read on demand.
pub(crate) struct RawResponse {
    pool: Arc<Http1>,
    conn: Option<Conn>,
    status: u16,
    retry_after: Option<Duration>,
    state: BodyState,
    keep_alive: bool,
}

impl RawResponse {
    fn new(pool: Arc<Http1>, conn: Conn, status: u16, head: Head) -> Self {
        let state = if head.chunked {
            BodyState::ChunkSize
        } else if let Some(n) = head.content_length {
            BodyState::Length(n)
        } else if status == 204 || status == 304 {
            BodyState::Length(0)
        } else {
            BodyState::Close
        };
        let keep_alive = !head.close && !head.http10 && !matches!(state, BodyState::Close);
        RawResponse {
            pool,
            conn: Some(conn),
            status,
            retry_after: head.retry_after,
            state,
            keep_alive,
        }
    }

    pub(crate) fn status(&self) -> u16 {
        self.status
    }

    pub(crate) fn retry_after(&self) -> Option<Duration> {
        self.retry_after
    }

    fn finish(&mut self) {
        self.state = BodyState::Done;
        if let Some(conn) = self.conn.take()
            && self.keep_alive
            && conn.buf.is_empty()
        {
            self.pool.checkin(conn);
        }
    }

    /// The next piece of the body, `None` at its end.
    pub(crate) async fn chunk(&mut self) -> io::Result<Option<Bytes>> {
        let timeout = self.pool.read_timeout;
        loop {
            let Some(conn) = self.conn.as_mut() else {
                return Ok(None);
            };
            match self.state {
                BodyState::Done => {
                    self.finish();
                    return Ok(None);
                }
                BodyState::Length(0) => {
                    self.finish();
                    return Ok(None);
                }
                BodyState::Length(n) => {
                    if conn.buf.is_empty() && read_more(conn, timeout).await? == 0 {
                        return Err(eof("the body ended before its Content-Length"));
                    }
                    let k = (conn.buf.len() as u64).min(n) as usize;
                    self.state = BodyState::Length(n - k as u64);
                    return Ok(Some(conn.buf.split_to(k).freeze()));
                }
                BodyState::Close => {
                    if conn.buf.is_empty() && read_more(conn, timeout).await? == 0 {
                        self.finish();
                        return Ok(None);
                    }
                    return Ok(Some(conn.buf.split().freeze()));
                }
                BodyState::ChunkSize => match find_crlf(&conn.buf) {
                    Some(i) => {
                        let line = std::str::from_utf8(&conn.buf[..i]).unwrap_or("");
                        let hex = line.split(';').next().unwrap_or("").trim();
                        let size = u64::from_str_radix(hex, 16)
                            .map_err(|_| invalid("invalid chunk size"))?;
                        conn.buf.advance(i + 2);
                        self.state = if size == 0 {
                            BodyState::Trailers
                        } else {
                            BodyState::ChunkData(size)
                        };
                    }
                    None => {
                        if conn.buf.len() > 1024 {
                            return Err(invalid("chunk size line too long"));
                        }
                        if read_more(conn, timeout).await? == 0 {
                            return Err(eof("the stream closed inside a chunked body"));
                        }
                    }
                },
                BodyState::ChunkData(n) => {
                    if conn.buf.is_empty() && read_more(conn, timeout).await? == 0 {
                        return Err(eof("the stream closed inside a chunk"));
                    }
                    let k = (conn.buf.len() as u64).min(n) as usize;
                    let left = n - k as u64;
                    self.state = if left == 0 {
                        BodyState::ChunkCrlf
                    } else {
                        BodyState::ChunkData(left)
                    };
                    return Ok(Some(conn.buf.split_to(k).freeze()));
                }
                BodyState::ChunkCrlf => {
                    if conn.buf.len() < 2 {
                        if read_more(conn, timeout).await? == 0 {
                            return Err(eof("the stream closed inside a chunked body"));
                        }
                        continue;
                    }
                    if &conn.buf[..2] != b"\r\n" {
                        return Err(invalid("missing CRLF after a chunk"));
                    }
                    conn.buf.advance(2);
                    self.state = BodyState::ChunkSize;
                }
                BodyState::Trailers => match find_crlf(&conn.buf) {
                    Some(0) => {
                        conn.buf.advance(2);
                        self.finish();
                        return Ok(None);
                    }
                    Some(i) => conn.buf.advance(i + 2),
                    None => {
                        if read_more(conn, timeout).await? == 0 {
                            // Tolerate a missing final CRLF, but do not reuse the connection.
                            self.keep_alive = false;
                            self.finish();
                            return Ok(None);
                        }
                    }
                },
            }
        }
    }

    /// The whole body.
    pub(crate) async fn bytes(mut self) -> io::Result<Bytes> {
        // Fast path: the whole Content-Length body is already buffered.
        if let (BodyState::Length(n), Some(conn)) = (&self.state, self.conn.as_mut())
            && conn.buf.len() as u64 >= *n
        {
            let body = conn.buf.split_to(*n as usize).freeze();
            self.finish();
            return Ok(body);
        }
        let mut out = BytesMut::new();
        while let Some(c) = self.chunk().await? {
            if out.is_empty() && !c.is_empty() {
                // Keep a single chunk without copying when it is the whole body.
                match self.chunk().await? {
                    None => return Ok(c),
                    Some(next) => {
                        out.extend_from_slice(&c);
                        out.extend_from_slice(&next);
                    }
                }
            } else {
                out.extend_from_slice(&c);
            }
        }
        Ok(out.freeze())
    }
}

fn find_crlf(b: &[u8]) -> Option<usize> {
    b.windows(2).position(|w| w == b"\r\n")
}

fn eof(m: &str) -> io::Error {
    io::Error::new(io::ErrorKind::UnexpectedEof, m.to_owned())
}

fn invalid(m: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, m.to_owned())
}
