//! The lean transport for plain `http://` servers (local models, fake servers): hyper's
//! low-level HTTP/1.1 client connections, without reqwest's layers on top.
//!
//! The HTTP/1.1 protocol (framing by `Content-Length`, chunked encoding or connection close,
//! 1xx answers, trailers, keep-alive decisions) is hyper's: each connection is a
//! [`hyper::client::conn::http1`] handshake over a `TcpStream`, its connection future driven by
//! a spawned task. This module only keeps a small LIFO pool of idle [`SendRequest`] handles per
//! client (one origin), applies the connect and first-byte timeouts, and replaces pooled
//! connections the server closed meanwhile. (Body reads are bounded by the idle timeout and
//! the size caps one level up, in `Resp`, the same for both transports.) TLS, proxies and HTTP/2 are left to `reqwest` (see `Transport`
//! in the parent module).

use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1::{Builder, SendRequest};
use hyper::{Request, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::time::Instant;

/// Connections idle longer than this are not reused (servers often close after 5–60 s).
const MAX_IDLE: Duration = Duration::from_secs(30);
/// At most this many idle connections are kept.
const MAX_POOLED: usize = 64;

type Sender = SendRequest<Full<Bytes>>;

struct Idle {
    tx: Sender,
    since: Instant,
}

/// One origin's connection pool.
pub(crate) struct Http1 {
    host: String,
    port: u16,
    connect_timeout: Duration,
    first_byte_timeout: Duration,
    /// Bounds the wait for a pooled connection to become ready again.
    idle_timeout: Duration,
    pool: Mutex<Vec<Idle>>,
}

/// Why an exchange failed.
#[derive(Debug)]
pub(crate) enum Failure {
    /// No connection could be made.
    Connect(io::Error),
    /// The request could not be sent or no response head arrived.
    Send(hyper::Error),
    /// The response head was malformed.
    Protocol(hyper::Error),
    /// No connection within the connect timeout.
    ConnectTimeout,
    /// No response head within the first-byte timeout.
    FirstByteTimeout,
}

impl Http1 {
    pub(crate) fn new(host: String, port: u16, options: &crate::HttpOptions) -> Self {
        Http1 {
            host,
            port,
            connect_timeout: options.connect_timeout,
            first_byte_timeout: options.first_byte_timeout,
            idle_timeout: options.idle_timeout,
            pool: Mutex::new(Vec::new()),
        }
    }

    fn pop_idle(&self) -> Option<Idle> {
        self.pool.lock().ok()?.pop()
    }

    /// A pooled connection that can take a request now, if any; broken ones are dropped.
    async fn checkout(&self) -> Option<Sender> {
        while let Some(Idle { mut tx, since }) = self.pop_idle() {
            if since.elapsed() >= MAX_IDLE || tx.is_closed() {
                continue;
            }
            if tx.is_ready() {
                return Some(tx);
            }
            // Just checked in: the connection task may still be finishing the previous exchange
            // (or closing the connection, after `Connection: close`).
            if let Ok(Ok(())) = tokio::time::timeout(self.idle_timeout, tx.ready()).await {
                return Some(tx);
            }
        }
        None
    }

    fn checkin(&self, tx: Sender) {
        if tx.is_closed() {
            return;
        }
        if let Ok(mut pool) = self.pool.lock()
            && pool.len() < MAX_POOLED
        {
            pool.push(Idle {
                tx,
                since: Instant::now(),
            });
        }
    }

    async fn connect(&self) -> Result<Sender, Failure> {
        let fut = TcpStream::connect((self.host.as_str(), self.port));
        let io = match tokio::time::timeout(self.connect_timeout, fut).await {
            Ok(Ok(io)) => io,
            Ok(Err(e)) => return Err(Failure::Connect(e)),
            Err(_) => return Err(Failure::ConnectTimeout),
        };
        let _ = io.set_nodelay(true);
        let (tx, conn) = Builder::new()
            .handshake(TokioIo::new(io))
            .await
            .map_err(|e| Failure::Connect(io::Error::other(e)))?;
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::trace!(target: "cairn_providers::openai", error = %e, "HTTP connection ended");
            }
        });
        Ok(tx)
    }

    /// Sends the request `make` builds and waits for the response head. A pooled connection
    /// the server has closed meanwhile is replaced transparently (the request is built again).
    pub(crate) async fn send(
        self: &Arc<Self>,
        make: impl Fn() -> Request<Full<Bytes>>,
    ) -> Result<Response, Failure> {
        loop {
            let (mut tx, reused) = match self.checkout().await {
                Some(tx) => (tx, true),
                None => (self.connect().await?, false),
            };
            let sent = tokio::time::timeout(self.first_byte_timeout, tx.send_request(make())).await;
            match sent {
                Err(_) => return Err(Failure::FirstByteTimeout),
                Ok(Ok(resp)) => {
                    let (parts, body) = resp.into_parts();
                    return Ok(Response {
                        pool: self.clone(),
                        tx: Some(tx),
                        status: parts.status,
                        // Only error answers are retried, so only theirs matter.
                        retry_after: if parts.status.is_success() {
                            None
                        } else {
                            super::retry::retry_after(&parts.headers)
                        },
                        body,
                        done: false,
                    });
                }
                Ok(Err(e)) if e.is_parse() => return Err(Failure::Protocol(e)),
                // A kept-alive connection the server closed before answering: try another one.
                Ok(Err(_)) if reused => continue,
                Ok(Err(e)) => return Err(Failure::Send(e)),
            }
        }
    }
}

/// A response whose body is read on demand. Once the body has been read to its end the
/// connection goes back to the pool; dropping the response earlier closes it.
pub(crate) struct Response {
    pool: Arc<Http1>,
    tx: Option<Sender>,
    status: StatusCode,
    retry_after: Option<Duration>,
    body: Incoming,
    done: bool,
}

impl Response {
    pub(crate) fn status(&self) -> u16 {
        self.status.as_u16()
    }

    pub(crate) fn retry_after(&self) -> Option<Duration> {
        self.retry_after
    }

    fn finish(&mut self) {
        self.done = true;
        if let Some(tx) = self.tx.take() {
            self.pool.checkin(tx);
        }
    }

    /// The `Content-Length` of the body, when the server gave one.
    pub(crate) fn content_length(&self) -> Option<u64> {
        hyper::body::Body::size_hint(&self.body).exact()
    }

    /// The next piece of the body, `None` at its end. (The caller bounds the wait.)
    pub(crate) async fn chunk(&mut self) -> io::Result<Option<Bytes>> {
        while !self.done {
            match self.body.frame().await {
                None => self.finish(),
                Some(Ok(frame)) => {
                    // Trailers (and empty data frames) carry nothing for us.
                    if let Ok(data) = frame.into_data()
                        && !data.is_empty()
                    {
                        return Ok(Some(data));
                    }
                }
                Some(Err(e)) => {
                    self.done = true;
                    return Err(body_error(e));
                }
            }
        }
        Ok(None)
    }
}

/// A body error as an `io::Error`: `InvalidData` for malformed framing, `UnexpectedEof`
/// otherwise (the connection ended or failed mid-body).
fn body_error(e: hyper::Error) -> io::Error {
    use std::error::Error as _;
    let mut invalid = e.is_parse();
    let mut src = e.source();
    while let Some(s) = src {
        if let Some(io) = s.downcast_ref::<io::Error>() {
            invalid |= matches!(
                io.kind(),
                io::ErrorKind::InvalidData | io::ErrorKind::InvalidInput
            );
        }
        src = s.source();
    }
    let kind = if invalid {
        io::ErrorKind::InvalidData
    } else {
        io::ErrorKind::UnexpectedEof
    };
    io::Error::new(kind, e)
}
