//! A blocking HTTP/1.1 client for tests of `cairn serve` (one request per connection,
//! `Connection: close`), and a `cairn serve` process that is killed when dropped.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

/// An HTTP answer.
#[derive(Debug, Clone)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// Header lines as `(lowercase name, value)`.
    pub headers: Vec<(String, String)>,
    /// The body (chunked encoding undone).
    pub body: String,
}

impl Response {
    /// The body as JSON (`Value::Null` when it is not JSON).
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }

    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The SSE event names in the body, in order.
    pub fn events(&self) -> Vec<String> {
        self.body
            .lines()
            .filter_map(|l| {
                l.strip_prefix("event: ")
                    .or_else(|| l.strip_prefix("event:"))
            })
            .map(|s| s.trim().to_owned())
            .collect()
    }
}

/// Sends one request to `addr` (`127.0.0.1:PORT`) and reads the whole answer.
///
/// # Panics
/// When the server cannot be reached or answers something that is not HTTP.
pub fn request(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> Response {
    let mut s = match TcpStream::connect(addr) {
        Ok(s) => s,
        Err(e) => panic!("cannot connect to {addr}: {e}"),
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(120)));
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    if let Some(b) = body {
        head.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            b.len()
        ));
    }
    head.push_str("\r\n");
    let mut bytes = head.into_bytes();
    if let Some(b) = body {
        bytes.extend_from_slice(b.as_bytes());
    }
    if let Err(e) = s.write_all(&bytes) {
        panic!("cannot send to {addr}: {e}");
    }
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    parse(&raw)
}

fn parse(raw: &[u8]) -> Response {
    let text = String::from_utf8_lossy(raw);
    let Some((head, rest)) = text.split_once("\r\n\r\n") else {
        panic!("not an HTTP answer: {text:?}");
    };
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let chunked = headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"));
    let body = if chunked {
        unchunk(rest)
    } else {
        rest.to_owned()
    };
    Response {
        status,
        headers,
        body,
    }
}

fn unchunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || rest.len() < n {
            out.push_str(&rest[..rest.len().min(n)]);
            break;
        }
        out.push_str(&rest[..n]);
        s = rest[n..].strip_prefix("\r\n").unwrap_or(&rest[n..]);
    }
    out
}

/// A `cairn serve` child process; killed (SIGKILL) when dropped.
#[derive(Debug)]
pub struct Served {
    /// The process.
    pub child: Child,
    /// `127.0.0.1:PORT`.
    pub addr: String,
}

impl Served {
    /// Starts `command` (a `cairn serve --port 0 …` command) and waits for its
    /// `listening on http://ADDR` line.
    ///
    /// # Panics
    /// When it does not start.
    pub fn start(mut command: Command) -> Served {
        command.stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = match command.spawn() {
            Ok(c) => c,
            Err(e) => panic!("cannot start cairn serve: {e}"),
        };
        let Some(out) = child.stdout.take() else {
            panic!("no stdout");
        };
        let mut reader = BufReader::new(out);
        let mut line = String::new();
        let _ = reader.read_line(&mut line);
        let Some(addr) = line.trim().strip_prefix("listening on http://") else {
            let _ = child.kill();
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = e.read_to_string(&mut err);
            }
            panic!("cairn serve did not start: {line:?}; stderr: {err}");
        };
        let addr = addr.to_owned();
        // Keep draining stdout so the child never blocks on a full pipe.
        std::thread::spawn(move || {
            let mut sink = String::new();
            while reader.read_line(&mut sink).unwrap_or(0) > 0 {
                sink.clear();
            }
        });
        if let Some(mut err) = child.stderr.take() {
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while err.read(&mut buf).unwrap_or(0) > 0 {}
            });
        }
        Served { child, addr }
    }

    /// A request to this server.
    pub fn call(&self, method: &str, path: &str, body: Option<&Value>) -> Response {
        let text = body.map(Value::to_string);
        request(&self.addr, method, path, &[], text.as_deref())
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
