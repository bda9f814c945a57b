//! [`StateBackend`]: files in the thread's session state.

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use cairn_core::{BoxFuture, SessionState};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{Backend, BackendRuntime, FileInfo, GrepQuery, GrepResult, virtual_fs};
use crate::error::BackendError;
use crate::path::normalize;

/// The session-state key under which [`StateBackend`] keeps its files.
pub const FILES_KEY: &str = "files";

/// A stored file: its text and timestamps (milliseconds since the Unix epoch).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileData {
    /// The text.
    pub content: String,
    /// When it was created.
    #[serde(default)]
    pub created_at_ms: u64,
    /// When it was last changed.
    #[serde(default)]
    pub modified_at_ms: u64,
}

impl FileData {
    /// A file created now.
    pub fn new(content: impl Into<String>) -> Self {
        let now = now_ms();
        FileData {
            content: content.into(),
            created_at_ms: now,
            modified_at_ms: now,
        }
    }
}

pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Files in the thread's state: the session's state map holds them under `"files"` as a JSON
/// object `{path: {content, created_at_ms, modified_at_ms}}`, so they are saved and restored
/// with the session and are gone with the thread.
///
/// Used outside a run without a session, the backend keeps a scratch state of its own; a deep
/// agent gives each sessionless run a fresh session, so runs never share files.
///
/// ```
/// use cairn_deep::backend::{Backend, BackendRuntime, StateBackend};
/// let session = cairn_core::AgentSession::new();
/// StateBackend::insert_file(session.state(), "/seed.md", "seeded").unwrap();
/// assert_eq!(StateBackend::files(session.state())["/seed.md"].content, "seeded");
/// ```
#[derive(Debug, Clone, Default)]
pub struct StateBackend {
    scratch: SessionState,
}

impl StateBackend {
    /// A state backend.
    pub fn new() -> Self {
        Self::default()
    }

    /// The files kept in `state` (empty when none or malformed).
    pub fn files(state: &SessionState) -> BTreeMap<String, FileData> {
        state.get(FILES_KEY).unwrap_or_default()
    }

    /// Puts a file into `state` (replacing one at the same path): for seeding a thread.
    pub fn insert_file(
        state: &SessionState,
        path: &str,
        content: &str,
    ) -> Result<(), BackendError> {
        let path = normalize(path)?;
        let data = serde_json::to_value(FileData::new(content))
            .map_err(|e| BackendError::Other(e.to_string()))?;
        state.with(|m| {
            files_mut(m).map(|files| {
                files.insert(path, data);
            })
        })
    }

    fn state(&self, rt: &BackendRuntime) -> SessionState {
        match &rt.session {
            Some(s) => s.state().clone(),
            None => self.scratch.clone(),
        }
    }
}

fn files_mut(m: &mut Map<String, Value>) -> Result<&mut Map<String, Value>, BackendError> {
    let v = m
        .entry(FILES_KEY)
        .or_insert_with(|| Value::Object(Map::new()));
    if v.is_null() {
        *v = Value::Object(Map::new());
    }
    v.as_object_mut().ok_or_else(|| {
        BackendError::Other(format!(
            "session state key '{FILES_KEY}' is not a JSON object"
        ))
    })
}

fn content_of(v: &Value) -> Option<&str> {
    v.get("content").and_then(Value::as_str)
}

impl Backend for StateBackend {
    fn ls<'a>(
        &'a self,
        rt: &'a BackendRuntime,
        path: &'a str,
    ) -> BoxFuture<'a, Result<Vec<FileInfo>, BackendError>> {
        let files = Self::files(&self.state(rt));
        let r = virtual_fs::ls(
            files
                .iter()
                .map(|(p, f)| (p.as_str(), f.content.len() as u64)),
            path,
        );
        Box::pin(async move { r })
    }

    fn read_text<'a>(
        &'a self,
        rt: &'a BackendRuntime,
        path: &'a str,
    ) -> BoxFuture<'a, Result<String, BackendError>> {
        let r = normalize(path).and_then(|path| {
            self.state(rt).with(|m| {
                let files = files_mut(m)?;
                match files.get(&path).and_then(content_of) {
                    Some(c) => Ok(c.to_owned()),
                    None if virtual_fs::is_dir(files.keys().map(String::as_str), &path) => {
                        Err(BackendError::IsDirectory(path))
                    }
                    None => Err(BackendError::NotFound(path)),
                }
            })
        });
        Box::pin(async move { r })
    }

    fn write<'a>(
        &'a self,
        rt: &'a BackendRuntime,
        path: &'a str,
        content: &'a str,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        let r = normalize(path).and_then(|path| {
            let data = serde_json::to_value(FileData::new(content))
                .map_err(|e| BackendError::Other(e.to_string()))?;
            self.state(rt).with(|m| {
                let files = files_mut(m)?;
                virtual_fs::check_create(files.keys().map(String::as_str), &path)?;
                files.insert(path, data);
                Ok(())
            })
        });
        Box::pin(async move { r })
    }

    fn edit<'a>(
        &'a self,
        rt: &'a BackendRuntime,
        path: &'a str,
        old: &'a str,
        new: &'a str,
        replace_all: bool,
    ) -> BoxFuture<'a, Result<usize, BackendError>> {
        let r = normalize(path).and_then(|path| {
            self.state(rt).with(|m| {
                let files = files_mut(m)?;
                let is_dir = virtual_fs::is_dir(files.keys().map(String::as_str), &path);
                let Some(entry) = files.get_mut(&path) else {
                    return Err(if is_dir {
                        BackendError::IsDirectory(path)
                    } else {
                        BackendError::NotFound(path)
                    });
                };
                let content = content_of(entry).unwrap_or_default();
                let (updated, n) = crate::format::replace(&path, content, old, new, replace_all)?;
                if let Some(obj) = entry.as_object_mut() {
                    obj.insert("content".into(), Value::String(updated));
                    obj.insert("modified_at_ms".into(), Value::from(now_ms()));
                }
                Ok(n)
            })
        });
        Box::pin(async move { r })
    }

    fn delete<'a>(
        &'a self,
        rt: &'a BackendRuntime,
        path: &'a str,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        let r = normalize(path).and_then(|path| {
            self.state(rt).with(|m| {
                let files = files_mut(m)?;
                for p in virtual_fs::to_delete(files.keys().map(String::as_str), &path)? {
                    files.remove(&p);
                }
                Ok(())
            })
        });
        Box::pin(async move { r })
    }

    fn glob<'a>(
        &'a self,
        rt: &'a BackendRuntime,
        pattern: &'a str,
        path: &'a str,
    ) -> BoxFuture<'a, Result<Vec<String>, BackendError>> {
        let files = Self::files(&self.state(rt));
        let r = virtual_fs::glob(files.keys().map(String::as_str), pattern, path);
        Box::pin(async move { r })
    }

    fn grep<'a>(
        &'a self,
        rt: &'a BackendRuntime,
        query: &'a GrepQuery,
    ) -> BoxFuture<'a, Result<GrepResult, BackendError>> {
        let files = Self::files(&self.state(rt));
        let r = virtual_fs::grep(
            files.iter().map(|(p, f)| (p.as_str(), f.content.as_str())),
            query,
        );
        Box::pin(async move { r })
    }
}
