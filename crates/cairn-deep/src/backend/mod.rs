//! Backends: where the file tools read and write (SPEC R10.1).
//!
//! Every backend speaks absolute POSIX-style virtual paths (`/notes/a.md`), normalized by
//! [`crate::path::normalize`] (`..` may not climb above `/`). Implementations:
//!
//! - [`StateBackend`]: files in the thread's session state (key `"files"`), gone with the thread;
//! - [`StoreBackend`]: files as items of a [`Store`](cairn_core::Store) namespace, shared across
//!   threads;
//! - [`FilesystemBackend`]: a real directory; nothing outside it is reachable;
//! - [`CompositeBackend`]: routes path prefixes (e.g. `/memories/`) to other backends;
//! - [`LocalShellBackend`]: a [`FilesystemBackend`] that also runs shell commands
//!   ([`Executor`]).
//!
//! **Writes never overwrite.** [`Backend::write`] creates a file and fails with
//! [`BackendError::AlreadyExists`] when one is there: changes go through [`Backend::edit`], so a
//! model cannot clobber a file (a memory, say) it has not read.

use std::collections::HashMap;
use std::sync::Weak;
use std::time::Duration;

use cairn_core::{AgentSession, BoxFuture, Extensions, FunctionInvocationContext, SharedStore};
use serde::{Deserialize, Serialize};

use crate::error::BackendError;

mod composite;
mod filesystem;
pub(crate) mod search;
mod shell;
mod state;
mod store;
pub mod supervise;
pub(crate) mod virtual_fs;

pub use composite::CompositeBackend;
pub use filesystem::FilesystemBackend;
pub use shell::{LocalShellBackend, ShellConfig, terminate_all_commands};
pub use state::{FILES_KEY, FileData, StateBackend};
pub use store::StoreBackend;
pub use supervise::{SUPERVISE_ARG, Supervisor, supervise_main};

/// What a backend call may use from the run: the session and the typed extensions (a
/// [`SharedStore`] among them). Build it from a tool's context with
/// [`from_context`](Self::from_context).
#[derive(Debug, Clone, Default)]
pub struct BackendRuntime {
    /// The run's session (the thread), if any.
    pub session: Option<AgentSession>,
    /// The run's typed values.
    pub extensions: Extensions,
}

impl BackendRuntime {
    /// A runtime with no session and no extensions.
    pub fn new() -> Self {
        Self::default()
    }

    /// The runtime of a tool call.
    pub fn from_context(ctx: &FunctionInvocationContext) -> Self {
        BackendRuntime {
            session: ctx.session.clone(),
            extensions: ctx.extensions.clone(),
        }
    }

    /// With `session`.
    pub fn with_session(mut self, session: &AgentSession) -> Self {
        self.session = Some(session.clone());
        self
    }

    /// With `store` as the run's [`SharedStore`].
    pub fn with_store(mut self, store: SharedStore) -> Self {
        self.extensions.insert(store);
        self
    }

    /// The run's store, if one was installed in the extensions.
    pub fn store(&self) -> Option<SharedStore> {
        self.extensions.get::<SharedStore>().cloned()
    }
}

/// One entry of a listing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileInfo {
    /// The full virtual path.
    pub path: String,
    /// Whether it is a directory.
    pub is_dir: bool,
    /// Size in bytes (files only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
}

impl FileInfo {
    /// A file entry.
    pub fn file(path: impl Into<String>, size: u64) -> Self {
        FileInfo {
            path: path.into(),
            is_dir: false,
            size: Some(size),
        }
    }

    /// A directory entry.
    pub fn dir(path: impl Into<String>) -> Self {
        FileInfo {
            path: path.into(),
            is_dir: true,
            size: None,
        }
    }
}

/// A grep request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrepQuery {
    /// A regular expression (Rust `regex` syntax; it runs in linear time), or literal text
    /// when [`literal`](Self::literal) is set.
    pub pattern: String,
    /// Match `pattern` as exact text rather than as a regular expression. The `grep` tool sets
    /// it unless the model asks for `regex`; [`GrepQuery::new`] leaves it off.
    pub literal: bool,
    /// The directory or file to search (default `/`).
    pub path: Option<String>,
    /// Only files matching this glob (same rules as [`Backend::glob`]).
    pub glob: Option<String>,
    /// Stop after this many matches in all.
    pub max_matches: usize,
    /// Stop after this many matches in one file (`Some(1)` when only file names are needed).
    pub max_per_file: Option<u64>,
}

impl GrepQuery {
    /// A regular-expression query for `pattern` everywhere, at most 1,000 matches.
    pub fn new(pattern: impl Into<String>) -> Self {
        GrepQuery {
            pattern: pattern.into(),
            literal: false,
            path: None,
            glob: None,
            max_matches: 1_000,
            max_per_file: None,
        }
    }
}

/// One matching line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GrepMatch {
    /// The file's full virtual path.
    pub path: String,
    /// The 1-based line number.
    pub line: u64,
    /// The line, without its line ending.
    pub text: String,
}

/// What a grep found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GrepResult {
    /// Matches, grouped by file (files in path order).
    pub matches: Vec<GrepMatch>,
    /// Whether the search stopped at `max_matches`.
    pub truncated: bool,
}

/// The result of a command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecOutput {
    /// stdout, then stderr lines prefixed `[stderr] `.
    pub output: String,
    /// The exit code (`None` when a signal ended the process).
    pub exit_code: Option<i32>,
    /// Whether the output was cut at the backend's cap.
    pub truncated: bool,
}

/// Something that runs shell commands.
pub trait Executor: Send + Sync {
    /// Runs `command`; `timeout` overrides the executor's default.
    fn execute<'a>(
        &'a self,
        command: &'a str,
        timeout: Option<Duration>,
    ) -> BoxFuture<'a, Result<ExecOutput, BackendError>>;

    /// The longest timeout a call may ask for.
    fn max_timeout(&self) -> Duration {
        Duration::from_secs(3_600)
    }

    /// The timeout when a call gives none.
    fn default_timeout(&self) -> Duration {
        Duration::from_secs(120)
    }

    /// The host directory commands run in, when it is also the root of the file tools' `/`
    /// (then `execute` can map a file-tool path such as `/hello.py` onto it); `None` otherwise.
    fn working_dir(&self) -> Option<&std::path::Path> {
        None
    }

    /// Reviews `command` before it runs (the `execute` tool's
    /// [`Tool::review_call`](cairn_core::Tool::review_call)): the default leaves it to the
    /// agent's approvals; [`LocalShellBackend`] applies its exec policy and asks for every
    /// command when its sandbox cannot be enforced.
    fn review(&self, command: &str) -> cairn_core::CallReview {
        let _ = command;
        cairn_core::CallReview::AsConfigured
    }
}

/// A file API over some storage. All paths are virtual (`/dir/file`).
///
/// ```
/// use cairn_deep::backend::{Backend, BackendRuntime, StateBackend};
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let backend = StateBackend::new();
/// let session = cairn_core::AgentSession::new();
/// let rt = BackendRuntime::new().with_session(&session);
/// backend.write(&rt, "/notes/a.md", "hello\n").await.unwrap();
/// assert_eq!(backend.read(&rt, "/notes/a.md", 0, 10).await.unwrap(), "1\thello");
/// assert!(session.state().contains_key("files"));
/// # });
/// ```
pub trait Backend: Send + Sync + 'static {
    /// The entries directly inside directory `path`, sorted by path.
    fn ls<'a>(
        &'a self,
        rt: &'a BackendRuntime,
        path: &'a str,
    ) -> BoxFuture<'a, Result<Vec<FileInfo>, BackendError>>;

    /// The whole text of file `path`. Not UTF-8 → [`BackendError::Binary`].
    fn read_text<'a>(
        &'a self,
        rt: &'a BackendRuntime,
        path: &'a str,
    ) -> BoxFuture<'a, Result<String, BackendError>>;

    /// Lines `offset..offset+limit` (0-based) of `path`, numbered, as
    /// [`format::render_page`](crate::format::render_page) renders them.
    fn read<'a>(
        &'a self,
        rt: &'a BackendRuntime,
        path: &'a str,
        offset: usize,
        limit: usize,
    ) -> BoxFuture<'a, Result<String, BackendError>> {
        Box::pin(async move {
            let path = crate::path::normalize(path)?;
            let text = self.read_text(rt, &path).await?;
            crate::format::render_page(&path, &text, offset, limit)
        })
    }

    /// Creates file `path` (and its parent directories). An existing file is an error
    /// ([`BackendError::AlreadyExists`]); change it with [`edit`](Self::edit).
    fn write<'a>(
        &'a self,
        rt: &'a BackendRuntime,
        path: &'a str,
        content: &'a str,
    ) -> BoxFuture<'a, Result<(), BackendError>>;

    /// Replaces `old` by `new` in `path`: exactly one occurrence unless `replace_all`.
    /// Returns the number of occurrences replaced.
    fn edit<'a>(
        &'a self,
        rt: &'a BackendRuntime,
        path: &'a str,
        old: &'a str,
        new: &'a str,
        replace_all: bool,
    ) -> BoxFuture<'a, Result<usize, BackendError>>;

    /// Files under directory `path` matching `pattern`, sorted. A pattern without `/` matches
    /// file names at any depth; one with `/` matches the path relative to `path`.
    fn glob<'a>(
        &'a self,
        rt: &'a BackendRuntime,
        pattern: &'a str,
        path: &'a str,
    ) -> BoxFuture<'a, Result<Vec<String>, BackendError>>;

    /// Lines matching a regular expression (or literal text, see [`GrepQuery::literal`]).
    fn grep<'a>(
        &'a self,
        rt: &'a BackendRuntime,
        query: &'a GrepQuery,
    ) -> BoxFuture<'a, Result<GrepResult, BackendError>>;

    /// Deletes file `path`, or directory `path` with everything in it (as Deep Agents'
    /// `delete`). A missing path is [`BackendError::NotFound`]; `/` itself is refused. Every
    /// backend of this crate implements it; the default refuses with
    /// [`BackendError::Unsupported`], so a backend written before it existed keeps compiling.
    fn delete<'a>(
        &'a self,
        rt: &'a BackendRuntime,
        path: &'a str,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        let _ = rt;
        Box::pin(async move {
            Err(BackendError::Unsupported(format!(
                "deleting is not supported for {path}. Leave the file as it is."
            )))
        })
    }

    /// The command runner, when this backend can run commands.
    fn as_executor(&self) -> Option<&dyn Executor> {
        None
    }

    /// Whether [`as_executor`](Self::as_executor) is `Some`.
    fn can_execute(&self) -> bool {
        self.as_executor().is_some()
    }
}

/// A shared, type-erased backend.
pub type SharedBackend = std::sync::Arc<dyn Backend>;

/// One async lock per key (a file), shared by every clone of the value that holds it: a
/// backend serializes the read-modify-write of [`Backend::edit`] (and the check-then-create of
/// [`Backend::write`]) per file with it, so two calls on one file never lose an update.
///
/// Entries are weak: a key's lock lives while someone holds or waits for it, and dead entries
/// are pruned as the map grows.
pub(crate) struct KeyedLocks<K> {
    map: std::sync::Arc<std::sync::Mutex<HashMap<K, Weak<tokio::sync::Mutex<()>>>>>,
}

impl<K> Clone for KeyedLocks<K> {
    fn clone(&self) -> Self {
        KeyedLocks {
            map: std::sync::Arc::clone(&self.map),
        }
    }
}

impl<K> Default for KeyedLocks<K> {
    fn default() -> Self {
        KeyedLocks {
            map: std::sync::Arc::default(),
        }
    }
}

impl<K> std::fmt::Debug for KeyedLocks<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KeyedLocks")
    }
}

/// Live entries past which [`KeyedLocks::lock`] prunes dead ones.
const PRUNE_AT: usize = 64;

impl<K: std::hash::Hash + Eq> KeyedLocks<K> {
    /// Waits for the lock of `key` and returns its guard (released when dropped; it may be
    /// moved into a blocking task).
    pub(crate) async fn lock(&self, key: K) -> tokio::sync::OwnedMutexGuard<()> {
        let lock = {
            // Every critical section is one map operation: a poisoned map is still consistent.
            let mut map = self
                .map
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            match map.get(&key).and_then(Weak::upgrade) {
                Some(lock) => lock,
                None => {
                    if map.len() >= PRUNE_AT {
                        map.retain(|_, w| w.strong_count() > 0);
                    }
                    let lock = std::sync::Arc::new(tokio::sync::Mutex::new(()));
                    map.insert(key, std::sync::Arc::downgrade(&lock));
                    lock
                }
            }
        };
        lock.lock_owned().await
    }

    /// Keys with a live lock (for tests).
    #[cfg(test)]
    pub(crate) fn live(&self) -> usize {
        let map = self
            .map
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        map.values().filter(|w| w.strong_count() > 0).count()
    }
}

#[cfg(test)]
mod tests {
    use super::KeyedLocks;

    #[tokio::test]
    async fn one_lock_per_key_shared_by_clones_and_dropped_when_unused() {
        let locks: KeyedLocks<String> = KeyedLocks::default();
        let other = locks.clone();
        let g = locks.lock("/a".into()).await;
        // The same key through a clone waits; another key does not.
        let mut waiting = Box::pin(other.lock("/a".into()));
        assert!(futures::poll!(waiting.as_mut()).is_pending());
        let _b = other.lock("/b".into()).await;
        drop(g);
        let _g2 = waiting.await;
        assert_eq!(locks.live(), 2);
        drop(_b);
        assert_eq!(locks.live(), 1);
    }
}
