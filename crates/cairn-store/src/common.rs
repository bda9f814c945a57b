//! What the SQLite and PostgreSQL backends share: error mapping, the namespace encoding of
//! the store, and decoding rows into `cairn-core` types.

use cairn_core::{CheckpointError, RunStatus, Step, StoreError, ThreadInfo};
use serde_json::{Map, Value};

/// Milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// The engine's own words for an error, with its code.
pub(crate) fn describe(engine: &str, e: &sqlx::Error) -> String {
    match e {
        sqlx::Error::Database(db) => {
            let code = db.code().map(|c| c.into_owned()).unwrap_or_default();
            let mut s = format!("{engine}: {} (code {code})", db.message());
            if is_busy(e) {
                s.push_str(
                    "; the database stayed locked by another writer for the whole busy timeout",
                );
            }
            s
        }
        sqlx::Error::PoolTimedOut => format!(
            "{engine}: timed out waiting for a connection from the pool (all in use, or the server is unreachable)"
        ),
        sqlx::Error::PoolClosed => format!("{engine}: the database was closed"),
        other => format!("{engine}: {other}"),
    }
}

/// SQLite's `SQLITE_BUSY`/`SQLITE_LOCKED` (and their extended codes), PostgreSQL's
/// `lock_not_available`.
pub(crate) fn is_busy(e: &sqlx::Error) -> bool {
    let Some(code) = db_code(e) else {
        return false;
    };
    match code.parse::<i32>() {
        Ok(n) => matches!(n & 0xff, 5 | 6),
        Err(_) => code == "55P03",
    }
}

/// The engine's error code, when the error came from the engine.
pub(crate) fn db_code(e: &sqlx::Error) -> Option<String> {
    match e {
        sqlx::Error::Database(db) => db.code().map(|c| c.into_owned()),
        _ => None,
    }
}

pub(crate) fn is_unique_violation(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(db) if db.is_unique_violation())
}

pub(crate) fn is_foreign_key_violation(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(db) if db.is_foreign_key_violation())
}

/// A checkpointer error from an engine error.
pub(crate) fn cp_err(engine: &'static str) -> impl Fn(sqlx::Error) -> CheckpointError {
    move |e| match &e {
        sqlx::Error::ColumnDecode { .. } | sqlx::Error::Decode(_) => {
            CheckpointError::Corrupt(describe(engine, &e))
        }
        _ => CheckpointError::Backend(describe(engine, &e)),
    }
}

/// A store error from an engine error.
pub(crate) fn store_err(engine: &'static str) -> impl Fn(sqlx::Error) -> StoreError {
    move |e| StoreError::Backend(describe(engine, &e))
}

/// A stored integer that must be a `u64`.
pub(crate) fn to_u64(v: i64, what: &str) -> Result<u64, CheckpointError> {
    u64::try_from(v).map_err(|_| CheckpointError::Corrupt(format!("{what} is negative: {v}")))
}

pub(crate) fn parse_metadata(text: &str) -> Result<Map<String, Value>, CheckpointError> {
    serde_json::from_str(text)
        .map_err(|e| CheckpointError::Corrupt(format!("thread metadata is not a JSON object: {e}")))
}

pub(crate) fn metadata_text(metadata: &Map<String, Value>) -> Result<String, CheckpointError> {
    serde_json::to_string(metadata)
        .map_err(|e| CheckpointError::Invalid(format!("metadata cannot be stored: {e}")))
}

/// A `threads` row.
pub(crate) struct ThreadRow {
    pub(crate) id: String,
    pub(crate) created_at_ms: i64,
    pub(crate) updated_at_ms: i64,
    pub(crate) metadata: String,
    pub(crate) status: String,
    pub(crate) forked_from: Option<String>,
    pub(crate) forked_at: Option<i64>,
}

impl ThreadRow {
    pub(crate) fn into_info(self) -> Result<ThreadInfo, CheckpointError> {
        let mut info = ThreadInfo::default();
        info.created_at_ms = to_u64(self.created_at_ms, "created_at_ms")?;
        info.updated_at_ms = to_u64(self.updated_at_ms, "updated_at_ms")?;
        info.metadata = parse_metadata(&self.metadata)?;
        info.status = RunStatus::parse(&self.status);
        info.forked_from = match (self.forked_from, self.forked_at) {
            (Some(src), Some(at)) => Some((src, to_u64(at, "forked_at")?)),
            (None, _) => None,
            (Some(src), None) => {
                return Err(CheckpointError::Corrupt(format!(
                    "thread {} is a fork of {src} without a step",
                    self.id
                )));
            }
        };
        info.id = self.id;
        Ok(info)
    }
}

/// Builds a [`Step`] from its columns. `Step` is `#[non_exhaustive]` with no constructor, so
/// it is deserialized: the columns are wrapped around the stored delta text, which is parsed
/// once, as reading it needs anyway.
pub(crate) fn make_step(
    thread_id: &str,
    namespace: &str,
    seq: i64,
    parent: i64,
    created_at_ms: i64,
    delta: &str,
) -> Result<Step, CheckpointError> {
    let quote = |s: &str| serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into());
    let text = format!(
        "{{\"thread_id\":{},\"namespace\":{},\"seq\":{},\"parent\":{},\"created_at_ms\":{},\"delta\":{}}}",
        quote(thread_id),
        quote(namespace),
        to_u64(seq, "seq")?,
        to_u64(parent, "parent")?,
        to_u64(created_at_ms, "created_at_ms")?,
        delta
    );
    serde_json::from_str(&text).map_err(|e| {
        CheckpointError::Corrupt(format!(
            "step {seq} of thread {thread_id} (namespace {namespace:?}) cannot be read: {e}"
        ))
    })
}

/// The status recorded in a stored delta, read without decoding the rest.
pub(crate) fn delta_status(delta: &str) -> Result<RunStatus, CheckpointError> {
    #[derive(serde::Deserialize)]
    struct StatusOnly {
        #[serde(default)]
        status: RunStatus,
    }
    serde_json::from_str::<StatusOnly>(delta)
        .map(|s| s.status)
        .map_err(|e| CheckpointError::Corrupt(format!("stored step cannot be read: {e}")))
}

// The store's namespaces are stored as one text column whose byte order is the order of the
// namespace paths (`Vec<String>` order), so `ORDER BY namespace` and prefix ranges work with
// a plain (binary, "C") collation. Each segment is written with bytes 0x00, 0x01 and 0x02
// escaped as 0x02 0x01, 0x02 0x02 and 0x02 0x03, then ended with 0x01; 0x01 sorts below every
// other byte that can start a segment's encoding, so a shorter path sorts first, and no NUL
// byte is stored (PostgreSQL text cannot hold one).

/// Encodes a namespace path.
pub(crate) fn encode_namespace(parts: &[String]) -> String {
    let mut out = String::with_capacity(parts.iter().map(|p| p.len() + 1).sum());
    for p in parts {
        for ch in p.chars() {
            match ch {
                '\u{0}' => out.push_str("\u{2}\u{1}"),
                '\u{1}' => out.push_str("\u{2}\u{2}"),
                '\u{2}' => out.push_str("\u{2}\u{3}"),
                c => out.push(c),
            }
        }
        out.push('\u{1}');
    }
    out
}

/// The exclusive upper bound of the encoded namespaces under `prefix` (`None`: no bound,
/// the prefix is empty).
pub(crate) fn namespace_upper(encoded_prefix: &str) -> Option<String> {
    encoded_prefix
        .strip_suffix('\u{1}')
        .map(|head| format!("{head}\u{2}"))
}

/// Decodes a stored namespace.
pub(crate) fn decode_namespace(text: &str) -> Result<Vec<String>, StoreError> {
    let mut parts = Vec::new();
    let mut cur = String::new();
    let mut chars = text.chars();
    while let Some(ch) = chars.next() {
        match ch {
            '\u{1}' => parts.push(std::mem::take(&mut cur)),
            '\u{2}' => match chars.next() {
                Some('\u{1}') => cur.push('\u{0}'),
                Some('\u{2}') => cur.push('\u{1}'),
                Some('\u{3}') => cur.push('\u{2}'),
                _ => return Err(bad_namespace(text)),
            },
            c => cur.push(c),
        }
    }
    if !cur.is_empty() {
        return Err(bad_namespace(text));
    }
    Ok(parts)
}

fn bad_namespace(text: &str) -> StoreError {
    StoreError::Backend(format!("corrupt store namespace {text:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ns(parts: &[&str]) -> Vec<String> {
        parts.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn namespace_encoding_round_trips_and_keeps_the_order() {
        let mut paths = vec![
            ns(&[]),
            ns(&[""]),
            ns(&["a"]),
            ns(&["a", ""]),
            ns(&["a", "b"]),
            ns(&["a\u{0}"]),
            ns(&["a\u{1}", "x"]),
            ns(&["a\u{2}"]),
            ns(&["a\u{3}"]),
            ns(&["a b"]),
            ns(&["ab"]),
            ns(&["é", "z"]),
            ns(&["b"]),
        ];
        for p in &paths {
            assert_eq!(&decode_namespace(&encode_namespace(p)).unwrap(), p);
        }
        let mut by_encoding = paths.clone();
        by_encoding.sort_by_key(|p| encode_namespace(p));
        paths.sort();
        assert_eq!(by_encoding, paths);
        // Prefix ranges.
        let pre = encode_namespace(&ns(&["a"]));
        let up = namespace_upper(&pre).unwrap();
        for p in &paths {
            let e = encode_namespace(p);
            assert_eq!(e >= pre && e < up, p.starts_with(&ns(&["a"])), "{p:?}");
        }
        assert_eq!(namespace_upper(""), None);
    }
}
