//! Keeping credentials out of errors and `Debug` output.
//!
//! A provider's error body may echo the request back, API key included ("Incorrect API key
//! provided: sk-…"), and a base URL may carry `user:password@`. Every error a client returns
//! (HTTP statuses, transport failures, decode errors quoting the body, in-stream errors) goes
//! through the client's redactor before it leaves the crate or is logged: each occurrence
//! of the configured API key (and of the values of configured headers whose names suggest a
//! credential) becomes `***`, `Bearer <token>` becomes `Bearer ***`, and the user information
//! of every URL (`scheme://user:password@host`) becomes `***`. When the error's source chain
//! holds a secret, the source is dropped (the message already says what happened). The
//! clients' and builders' `Debug` output shows the key as `***`, the base URL through
//! [`redact_url`] and only the names of configured headers.
//!
//! [`redact_url`] is public for callers that show a base URL (a banner, a log line).

use std::borrow::Cow;

use cairn_core::ChatError;

/// What replaces a secret.
pub const REDACTED: &str = "***";

/// Secrets shorter than this are not searched for (they would match ordinary text; such short
/// values are not real keys).
const MIN_SECRET_LEN: usize = 4;

/// `text` with the user information of every URL in it (`scheme://user:password@host…`)
/// replaced by `***`: `http://u:p@host/v1` becomes `http://***@host/v1`. Text without such a
/// URL is returned unchanged.
///
/// ```
/// assert_eq!(
///     cairn_providers::redact_url("http://alice:s3cret@proxy.example:8080/v1"),
///     "http://***@proxy.example:8080/v1"
/// );
/// assert_eq!(
///     cairn_providers::redact_url("could not connect to https://tok@h/v1: refused"),
///     "could not connect to https://***@h/v1: refused"
/// );
/// assert_eq!(cairn_providers::redact_url("https://api.openai.com/v1"), "https://api.openai.com/v1");
/// ```
pub fn redact_url(text: &str) -> String {
    redact_url_cow(text).into_owned()
}

pub(crate) fn redact_url_cow(text: &str) -> Cow<'_, str> {
    if !text.contains("://") || !text.contains('@') {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut changed = false;
    while let Some(i) = rest.find("://") {
        let (before, after) = rest.split_at(i + 3);
        out.push_str(before);
        // The authority ends at the path, query, fragment, or anything that cannot be in it.
        let end = after
            .find(|c: char| {
                matches!(c, '/' | '?' | '#' | '"' | '\'' | '<' | '>' | '`' | '\\')
                    || c.is_whitespace()
                    || c.is_control()
            })
            .unwrap_or(after.len());
        let authority = &after[..end];
        match authority.rfind('@') {
            Some(at) => {
                out.push_str(REDACTED);
                out.push_str(&authority[at..]);
                changed = true;
            }
            None => out.push_str(authority),
        }
        rest = &after[end..];
    }
    out.push_str(rest);
    if changed {
        Cow::Owned(out)
    } else {
        Cow::Borrowed(text)
    }
}

/// `Bearer <token>` (any case) with the token replaced.
fn redact_bearer(text: &str) -> Cow<'_, str> {
    const WORD: &str = "bearer ";
    let lower = text.to_ascii_lowercase();
    if !lower.contains(WORD) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut pos = 0;
    let mut changed = false;
    while let Some(i) = lower[pos..].find(WORD) {
        let start = pos + i + WORD.len();
        // Spaces after the word, then the token.
        let tok_start = start
            + text[start..]
                .find(|c: char| c != ' ')
                .unwrap_or(text.len() - start);
        let tok_end = tok_start
            + text[tok_start..]
                .find(|c: char| {
                    c.is_whitespace() || matches!(c, '"' | '\'' | ',' | ';' | '}' | ']' | ')')
                })
                .unwrap_or(text.len() - tok_start);
        out.push_str(&text[pos..tok_start]);
        if tok_end > tok_start {
            out.push_str(REDACTED);
            changed = true;
        }
        pos = tok_end;
    }
    out.push_str(&text[pos..]);
    if changed {
        Cow::Owned(out)
    } else {
        Cow::Borrowed(text)
    }
}

/// Header names whose configured values are treated as secrets.
fn is_credential_header(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    ["auth", "key", "token", "secret", "cookie", "password"]
        .iter()
        .any(|w| n.contains(w))
}

/// Removes one client's credentials from text and errors (see the [module docs](self)).
#[derive(Clone, Default)]
pub(crate) struct Redactor {
    secrets: Vec<String>,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Redactor")
            .field("secrets", &self.secrets.len())
            .finish()
    }
}

impl Redactor {
    /// A redactor for the API key `key`, the configured `headers`, and the user information
    /// of `base_url`.
    pub(crate) fn new(key: Option<&str>, headers: &[(String, String)], base_url: &str) -> Self {
        let mut secrets: Vec<String> = Vec::new();
        let mut add = |s: &str| {
            let s = s.trim();
            if s.len() >= MIN_SECRET_LEN && !secrets.iter().any(|x| x == s) {
                secrets.push(s.to_owned());
            }
        };
        if let Some(k) = key {
            add(k);
        }
        for (n, v) in headers {
            if is_credential_header(n) {
                add(v);
                if let Some((_, tok)) = v.split_once(' ') {
                    add(tok);
                }
            }
        }
        if let Ok(u) = url::Url::parse(base_url.trim()) {
            if let Some(p) = u.password() {
                add(p);
                if let Ok(d) = urlencoding_decode(p) {
                    add(&d);
                }
            }
            if !u.username().is_empty() {
                add(u.username());
            }
        }
        // Longest first, so a secret containing another is replaced whole.
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        Redactor { secrets }
    }

    /// `text` without credentials.
    pub(crate) fn text<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut out: Cow<'a, str> = redact_url_cow(text);
        for s in &self.secrets {
            if out.contains(s.as_str()) {
                out = Cow::Owned(out.replace(s.as_str(), REDACTED));
            }
        }
        match redact_bearer(&out) {
            Cow::Borrowed(_) => out,
            Cow::Owned(o) => Cow::Owned(o),
        }
    }

    /// `e` without credentials in its message; its source is dropped when its chain shows one.
    pub(crate) fn error(&self, e: ChatError) -> ChatError {
        use std::error::Error as _;
        let message = self.text(e.message());
        let mut source_leaks = false;
        let mut src = e.source();
        while let Some(s) = src {
            if matches!(self.text(&s.to_string()), Cow::Owned(_)) {
                source_leaks = true;
                break;
            }
            src = s.source();
        }
        if matches!(message, Cow::Borrowed(_)) && !source_leaks {
            return e;
        }
        let message = message.into_owned();
        let rebuilt = match e.status() {
            Some(status) => {
                let r = ChatError::from_status(status, message.clone());
                if r.kind() == e.kind() {
                    r
                } else {
                    ChatError::new(e.kind(), message)
                }
            }
            None => ChatError::new(e.kind(), message),
        };
        rebuilt.with_retry_after(e.retry_after())
    }
}

/// Percent-decodes `s` (URL passwords may be written encoded).
fn urlencoding_decode(s: &str) -> Result<String, std::string::FromUtf8Error> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2]))
        {
            out.push(h * 16 + l);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8(out)
}

fn hex(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_core::ChatErrorKind;

    #[test]
    fn urls_lose_their_user_information() {
        assert_eq!(redact_url("http://u:p@h:1/v1"), "http://***@h:1/v1");
        assert_eq!(redact_url("http://tok@h"), "http://***@h");
        assert_eq!(
            redact_url("a http://u:p@h/x and \"https://v:w@k?q\""),
            "a http://***@h/x and \"https://***@k?q\""
        );
        assert_eq!(redact_url("mail me: x@y.z"), "mail me: x@y.z");
        assert_eq!(redact_url("http://h/a@b"), "http://h/a@b");
        assert_eq!(redact_url("http://u:p%40x@h"), "http://***@h");
    }

    #[test]
    fn keys_bearer_tokens_and_url_passwords_are_removed() {
        let r = Redactor::new(
            Some("sk-very-secret"),
            &[
                ("X-Custom-Token".into(), "tok-abcdef".into()),
                ("X-Trace".into(), "visible-trace".into()),
            ],
            "http://alice:pa%24%24word@h/v1",
        );
        let shown = r.text(
            "Incorrect API key provided: sk-very-secret. Authorization: Bearer abc.def-ghi, tok-abcdef, pa$$word, pa%24%24word, visible-trace",
        );
        for leaked in [
            "sk-very-secret",
            "abc.def-ghi",
            "tok-abcdef",
            "pa$$word",
            "pa%24%24word",
        ] {
            assert!(!shown.contains(leaked), "{leaked} in {shown}");
        }
        assert!(shown.contains("visible-trace"));
        assert!(shown.contains("Bearer ***"));
        assert!(matches!(r.text("nothing here"), Cow::Borrowed(_)));

        let e = ChatError::from_status(401, "Incorrect API key provided: sk-very-secret")
            .with_retry_after(Some(std::time::Duration::from_secs(1)));
        let e = r.error(e);
        assert_eq!(e.kind(), ChatErrorKind::Auth);
        assert_eq!(e.status(), Some(401));
        assert_eq!(e.retry_after(), Some(std::time::Duration::from_secs(1)));
        assert!(!e.to_string().contains("sk-very-secret"));
        let e = r.error(
            ChatError::new(ChatErrorKind::Connect, "x")
                .with_source(std::io::Error::other("see http://alice:x@h")),
        );
        assert!(std::error::Error::source(&e).is_none());
    }
}
