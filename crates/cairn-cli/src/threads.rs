//! The thread database of the CLI: where it is, and `cairn threads`.
//!
//! Every `cairn run` / `cairn chat` is a thread in one database per user (SQLite by default,
//! PostgreSQL with a `postgres://` URL). Its metadata holds `title` (the first line of the first
//! input), `cwd` (the working directory) and `model`.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, anyhow, bail};
use cairn_core::{
    Content, Message, Role, SharedCheckpointer, SharedStore, ThreadCursor, ThreadInfo, ThreadQuery,
    Transcript,
};
use serde_json::{Map, Value, json};

use crate::render::{JsonRenderer, Style, sanitize};

/// The database location: `--db`/`CAIRN_DB`, else `$XDG_DATA_HOME/cairn/cairn.db`, else
/// `~/.local/share/cairn/cairn.db`; `None` when there is no home to put it in.
pub fn location(flag: Option<&str>, lookup: impl Fn(&str) -> Option<String>) -> Option<String> {
    if let Some(f) = flag.filter(|f| !f.trim().is_empty()) {
        return Some(f.to_owned());
    }
    let data = lookup("XDG_DATA_HOME")
        .filter(|d| Path::new(d).is_absolute())
        .map(PathBuf::from)
        .or_else(|| {
            lookup("HOME")
                .filter(|h| !h.is_empty())
                .map(|h| Path::new(&h).join(".local/share"))
        })?;
    Some(data.join("cairn").join("cairn.db").display().to_string())
}

/// The opened database.
#[derive(Clone)]
pub struct Db {
    /// Threads and their steps.
    pub checkpointer: SharedCheckpointer,
    /// The long-term store (`/memories/`).
    pub store: SharedStore,
    /// Where it is (for messages); `None` when kept in memory only.
    pub location: Option<String>,
}

impl Db {
    /// Opens (creating) the database at `location`, or one in memory for `None`.
    pub async fn open(location: Option<&str>) -> Result<Db> {
        let Some(loc) = location else {
            let db = cairn_store::Database::memory();
            return Ok(Db {
                checkpointer: db.checkpointer(),
                store: db.store(),
                location: None,
            });
        };
        let db = cairn_store::open(loc)
            .await
            .with_context(|| format!("cannot open the thread database {}", shown(loc)))?;
        Ok(Db {
            checkpointer: db.checkpointer(),
            store: db.store(),
            location: Some(loc.to_owned()),
        })
    }

    /// A cursor on thread `id`.
    pub fn cursor(&self, id: &str) -> ThreadCursor {
        ThreadCursor::new(self.checkpointer.clone(), id)
    }

    /// The thread whose id is `id` or starts with it (unique).
    pub async fn find(&self, id: &str) -> Result<ThreadInfo> {
        if let Some(t) = self.checkpointer.thread(id).await? {
            return Ok(t);
        }
        let all = self
            .checkpointer
            .list_threads(ThreadQuery::default())
            .await?;
        let mut hits = all.into_iter().filter(|t| t.id.starts_with(id));
        match (hits.next(), hits.next()) {
            (Some(t), None) if !id.is_empty() => Ok(t),
            (Some(_), Some(_)) => {
                bail!("more than one thread id starts with {id:?}; give more of it")
            }
            _ => bail!("no thread {id:?} (see `cairn threads`)"),
        }
    }

    /// The most recently updated thread of working directory `cwd`.
    pub async fn last_in(&self, cwd: &Path) -> Result<ThreadInfo> {
        let mut q = ThreadQuery::default();
        q.metadata
            .insert("cwd".into(), json!(cwd.display().to_string()));
        q.limit = Some(1);
        self.checkpointer
            .list_threads(q)
            .await?
            .into_iter()
            .next()
            .ok_or_else(|| anyhow!("no thread in {} yet (see `cairn threads`)", cwd.display()))
    }

    /// A new thread for a run in `cwd` whose first input is `title`.
    pub async fn create(&self, cwd: &Path, title: &str, model: &str) -> Result<ThreadInfo> {
        let mut meta = Map::new();
        meta.insert("cwd".into(), json!(cwd.display().to_string()));
        meta.insert("title".into(), json!(first_line(title)));
        meta.insert("model".into(), json!(model));
        Ok(self.checkpointer.create_thread(None, meta).await?)
    }
}

/// A database location fit to show: a URL's password is hidden.
pub fn shown(loc: &str) -> String {
    sanitize(&cairn_providers::redact_url(loc))
}

fn first_line(text: &str) -> String {
    let line = text
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    let mut out: String = line.chars().take(80).collect();
    if line.chars().count() > 80 {
        out.push('…');
    }
    out
}

fn meta_str<'a>(t: &'a ThreadInfo, key: &str) -> &'a str {
    t.metadata.get(key).and_then(Value::as_str).unwrap_or("")
}

/// `cairn threads [--json]`.
pub async fn list(db: &Db, json: bool) -> Result<u8> {
    let threads = db.checkpointer.list_threads(ThreadQuery::default()).await?;
    if json {
        let rows: Vec<Value> = threads.iter().map(thread_json).collect();
        JsonRenderer::print(&Value::Array(rows));
        return Ok(0);
    }
    if threads.is_empty() {
        eprintln!("cairn: no threads yet");
        return Ok(0);
    }
    let style = Style::for_stdout();
    for t in &threads {
        println!(
            "{}  {}  {:<11}  {}  {}",
            style.bold(&t.id),
            time_text(t.updated_at_ms),
            t.status.as_str(),
            sanitize(meta_str(t, "cwd")),
            sanitize(meta_str(t, "title")),
        );
    }
    Ok(0)
}

fn thread_json(t: &ThreadInfo) -> Value {
    json!({
        "id": t.id,
        "created_at_ms": t.created_at_ms,
        "updated_at_ms": t.updated_at_ms,
        "status": t.status.as_str(),
        "title": meta_str(t, "title"),
        "cwd": meta_str(t, "cwd"),
        "model": meta_str(t, "model"),
        "forked_from": t.forked_from.as_ref().map(|(id, seq)| json!({"thread": id, "step": seq})),
    })
}

/// Seconds since the epoch as `YYYY-MM-DD HH:MM` (UTC).
fn time_text(ms: u64) -> String {
    let secs = ms / 1000;
    let days = (secs / 86_400) as i64;
    let (h, m) = ((secs % 86_400) / 3600, (secs % 3600) / 60);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let mo = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(mo <= 2);
    format!("{y:04}-{mo:02}-{d:02} {h:02}:{m:02}")
}

/// `cairn threads show ID [--json]`.
pub async fn show(db: &Db, id: &str, json: bool) -> Result<u8> {
    let t = db.find(id).await?;
    let transcript = db.cursor(&t.id).load().await?;
    if json {
        JsonRenderer::print(&json!({
            "thread": thread_json(&t),
            "messages": transcript.messages,
            "pending": transcript.unanswered(),
        }));
        return Ok(0);
    }
    let style = Style::for_stdout();
    println!(
        "{}",
        style.dim(&format!(
            "thread {} · {} · {} · {}",
            t.id,
            t.status.as_str(),
            sanitize(meta_str(&t, "cwd")),
            time_text(t.created_at_ms)
        ))
    );
    print_transcript(&transcript, &style);
    Ok(0)
}

fn print_transcript(t: &Transcript, style: &Style) {
    for m in &t.messages {
        print_message(m, style);
    }
    for c in t.unanswered() {
        println!(
            "{} {}({}) {}",
            style.dim("→"),
            sanitize(&c.name),
            sanitize(&c.arguments),
            style.warn("(not run yet)")
        );
    }
}

fn print_message(m: &Message, style: &Style) {
    for c in &m.contents {
        match c {
            Content::Text { text } if !text.trim().is_empty() => {
                let who = match m.role {
                    Role::User => "you ›",
                    Role::Assistant => "agent ›",
                    Role::System => "system ›",
                    _ => "›",
                };
                println!("{} {}", style.bold(who), sanitize(text));
            }
            Content::FunctionCall(fc) => {
                println!(
                    "{} {}({})",
                    style.dim("→"),
                    sanitize(&fc.name),
                    sanitize(&preview(&fc.arguments, 300))
                );
            }
            Content::FunctionResult(r) => {
                println!("{} {}", style.dim("←"), sanitize(&preview(&r.text(), 300)));
            }
            _ => {}
        }
    }
}

fn preview(text: &str, max: usize) -> String {
    let one_line = text.replace('\n', "⏎");
    if one_line.chars().count() <= max {
        return one_line;
    }
    let mut out: String = one_line.chars().take(max).collect();
    out.push('…');
    out
}

/// `cairn threads rm ID`.
pub async fn remove(db: &Db, id: &str, json: bool) -> Result<u8> {
    let t = db.find(id).await?;
    db.checkpointer.delete_thread(&t.id).await?;
    if json {
        JsonRenderer::print(&json!({"type": "deleted", "id": t.id}));
    } else {
        eprintln!("cairn: deleted thread {}", t.id);
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_location_follows_xdg() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| (*v).to_owned())
            }
        };
        assert_eq!(
            location(None, env(&[("XDG_DATA_HOME", "/x"), ("HOME", "/h")])).unwrap(),
            "/x/cairn/cairn.db"
        );
        assert_eq!(
            location(None, env(&[("XDG_DATA_HOME", "rel"), ("HOME", "/h")])).unwrap(),
            "/h/.local/share/cairn/cairn.db"
        );
        assert_eq!(location(Some("pg"), env(&[])).unwrap(), "pg");
        assert_eq!(location(None, env(&[])), None);
    }

    #[test]
    fn times_are_civil_dates() {
        assert_eq!(time_text(0), "1970-01-01 00:00");
        assert_eq!(time_text(1_764_547_200_000), "2025-12-01 00:00");
    }
}
