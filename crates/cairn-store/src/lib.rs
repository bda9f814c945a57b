//! # cairn-store
//!
//! Durable threads and long-term memory for cairn: the
//! [`Checkpointer`](cairn_core::Checkpointer) and [`Store`](cairn_core::Store) traits of
//! `cairn-core` on **SQLite** (the embedded default: one file, WAL) and **PostgreSQL** (a
//! connection pool), plus the in-memory implementations under the same [`Database`] type.
//!
//! [`open`] takes a database address: `postgres://…` or `postgresql://…` selects PostgreSQL,
//! anything else is a SQLite file path (a `sqlite:` prefix is allowed; missing parent
//! directories are created). The schema is created or migrated on open; a database written by
//! a newer cairn is refused ([`OpenError::NewerFormat`]), and a file that is not a SQLite
//! database is refused without being touched ([`OpenError::NotADatabase`]). The format is
//! documented in `docs/persistence.md`.
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! use cairn_core::{Message, StepDelta, StepKind, Transcript};
//!
//! let dir = tempfile::tempdir().unwrap();
//! let db = cairn_store::open(dir.path().join("cairn.db").to_str().unwrap()).await.unwrap();
//!
//! // A thread and its first step.
//! let cp = db.checkpointer();
//! let thread = cp.create_thread(Some("t1"), Default::default()).await.unwrap();
//! let mut input = StepDelta::new(StepKind::Input);
//! input.messages = vec![Message::user("hello")];
//! let seq = cp.append(&thread.id, "", 0, &input).await.unwrap();
//! // A second writer that saw the same parent loses.
//! assert!(cp.append(&thread.id, "", 0, &input).await.is_err());
//! let steps = cp.steps("t1", "", None).await.unwrap();
//! assert_eq!(Transcript::from_steps(&steps).head, seq);
//!
//! // Long-term memory.
//! let store = db.store();
//! let ns = vec!["memories".to_string(), "u1".to_string()];
//! store.put(&ns, "prefs", serde_json::json!({"tone": "brief"})).await.unwrap();
//! assert_eq!(store.get(&ns, "prefs").await.unwrap().unwrap().version, 1);
//! db.close().await;
//! # });
//! ```

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use cairn_core::{
    CheckpointError, InMemoryCheckpointer, InMemoryStore, SharedCheckpointer, SharedStore,
    StoreError,
};

mod common;
mod postgres;
pub mod runs;
mod sqlite;

pub use runs::{
    CancelAction, Created, MultitaskStrategy, NewRun, RunError, RunFilter, RunQueue, RunRecord,
    RunState,
};

/// The newest storage format this build reads and writes (the `format_version` row of the
/// `meta` table).
pub const FORMAT_VERSION: i64 = 2;

/// Which engine a [`Database`] runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Engine {
    /// In memory (`cairn-core`'s reference implementations); nothing outlives the process.
    Memory,
    /// A SQLite file.
    Sqlite,
    /// A PostgreSQL database.
    Postgres,
}

/// A database could not be opened.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// The database was written by a newer cairn.
    #[error(
        "the database was written by a newer cairn (format version {found}; this cairn reads up to {supported}); upgrade cairn or use another database"
    )]
    NewerFormat {
        /// The version found in the database.
        found: i64,
        /// The newest version this build knows.
        supported: i64,
    },
    /// The file exists but is not a SQLite database (or not one of cairn's). It was not
    /// modified.
    #[error("{path} is not a cairn database ({reason}); the file was left untouched")]
    NotADatabase {
        /// The file.
        path: PathBuf,
        /// What the engine said.
        reason: String,
    },
    /// Another process kept the database locked for longer than the busy timeout.
    #[error("{path} is locked by another process ({reason}); gave up after {timeout:?}")]
    Locked {
        /// The file.
        path: PathBuf,
        /// What the engine said.
        reason: String,
        /// How long the open waited.
        timeout: Duration,
    },
    /// The database's directory could not be created.
    #[error("cannot create the directory {path}: {source}")]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The address could not be understood.
    #[error("invalid database address: {0}")]
    InvalidAddress(String),
    /// The engine failed (connection refused, authentication, I/O, read-only…).
    #[error("opening the database failed: {0}")]
    Backend(String),
}

impl From<OpenError> for CheckpointError {
    fn from(e: OpenError) -> Self {
        match e {
            OpenError::NewerFormat { found, supported } => {
                CheckpointError::NewerFormat { found, supported }
            }
            OpenError::NotADatabase { .. } => CheckpointError::Corrupt(e.to_string()),
            OpenError::InvalidAddress(_) => CheckpointError::Invalid(e.to_string()),
            _ => CheckpointError::Backend(e.to_string()),
        }
    }
}

impl From<OpenError> for StoreError {
    fn from(e: OpenError) -> Self {
        match e {
            OpenError::InvalidAddress(_) => StoreError::Invalid(e.to_string()),
            _ => StoreError::Backend(e.to_string()),
        }
    }
}

/// How to open a database. The defaults suit an interactive agent: 5 s busy timeout, 4 SQLite
/// connections, 8 PostgreSQL connections.
#[derive(Debug, Clone)]
pub struct OpenOptions {
    busy_timeout: Duration,
    max_connections: Option<u32>,
    schema: Option<String>,
    read_only: bool,
    sqlite_pragmas: Vec<(String, String)>,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            busy_timeout: Duration::from_secs(5),
            max_connections: None,
            schema: None,
            read_only: false,
            sqlite_pragmas: Vec::new(),
        }
    }
}

impl OpenOptions {
    /// The defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// How long a write waits for another writer's lock before failing (SQLite's
    /// `busy_timeout`; PostgreSQL's `lock_timeout`).
    pub fn busy_timeout(mut self, timeout: Duration) -> Self {
        self.busy_timeout = timeout;
        self
    }

    /// The size of the connection pool.
    pub fn max_connections(mut self, n: u32) -> Self {
        self.max_connections = Some(n.max(1));
        self
    }

    /// PostgreSQL only: keep cairn's tables in this schema (created if missing) instead of the
    /// connection's default.
    pub fn schema(mut self, schema: impl Into<String>) -> Self {
        self.schema = Some(schema.into());
        self
    }

    /// SQLite only: open the file read-only (it must exist and be at the current format);
    /// every write fails with the engine's error.
    pub fn read_only(mut self, read_only: bool) -> Self {
        self.read_only = read_only;
        self
    }

    /// SQLite only: a `PRAGMA key = value` run on every connection (for example `cache_size`
    /// or `mmap_size`).
    pub fn sqlite_pragma(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.sqlite_pragmas.push((key.into(), value.into()));
        self
    }
}

#[derive(Clone)]
enum Inner {
    Memory(InMemoryCheckpointer, InMemoryStore),
    Sqlite(Arc<sqlite::Backend>),
    Postgres(Arc<postgres::Backend>),
}

/// An open database: hands out the [`Checkpointer`](cairn_core::Checkpointer) and
/// [`Store`](cairn_core::Store) on it. Clones share the connection pool.
#[derive(Clone)]
pub struct Database {
    inner: Inner,
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Database")
            .field("engine", &self.engine())
            .finish()
    }
}

impl Database {
    /// A database in memory (`InMemoryCheckpointer` and `InMemoryStore`): for tests and
    /// single-process use, so callers need one type whatever they run on.
    pub fn memory() -> Self {
        Database {
            inner: Inner::Memory(InMemoryCheckpointer::new(), InMemoryStore::new()),
        }
    }

    /// The engine.
    pub fn engine(&self) -> Engine {
        match &self.inner {
            Inner::Memory(..) => Engine::Memory,
            Inner::Sqlite(_) => Engine::Sqlite,
            Inner::Postgres(_) => Engine::Postgres,
        }
    }

    /// The thread checkpointer on this database.
    pub fn checkpointer(&self) -> SharedCheckpointer {
        match &self.inner {
            Inner::Memory(c, _) => Arc::new(c.clone()),
            Inner::Sqlite(b) => b.clone(),
            Inner::Postgres(b) => b.clone(),
        }
    }

    /// The long-term memory store on this database.
    pub fn store(&self) -> SharedStore {
        match &self.inner {
            Inner::Memory(_, s) => Arc::new(s.clone()),
            Inner::Sqlite(b) => b.clone(),
            Inner::Postgres(b) => b.clone(),
        }
    }

    /// The run queue on this database (`cairn serve`'s runs); [`RunError::Unsupported`] for
    /// the in-memory database.
    pub fn runs(&self) -> Result<RunQueue, RunError> {
        use runs::QueueInner;
        match &self.inner {
            Inner::Memory(..) => Err(RunError::Unsupported),
            Inner::Sqlite(b) => Ok(RunQueue {
                inner: QueueInner::Sqlite(Arc::clone(b)),
            }),
            Inner::Postgres(b) => Ok(RunQueue {
                inner: QueueInner::Postgres(Arc::clone(b)),
            }),
        }
    }

    /// Closes the connection pool, waiting for connections in use to come back (SQLite then
    /// checkpoints its WAL into the main file). Handles still held fail afterwards.
    pub async fn close(&self) {
        match &self.inner {
            Inner::Memory(..) => {}
            Inner::Sqlite(b) => b.close().await,
            Inner::Postgres(b) => b.close().await,
        }
    }
}

/// Opens (creating or migrating) the database at `address` with default [`OpenOptions`]:
/// `postgres://` or `postgresql://` URLs select PostgreSQL, anything else is a SQLite path
/// (optionally prefixed `sqlite:` or `sqlite://`; `:memory:` is a private in-memory SQLite
/// database).
pub async fn open(address: &str) -> Result<Database, OpenError> {
    open_with(address, OpenOptions::default()).await
}

/// [`open`] with options.
pub async fn open_with(address: &str, options: OpenOptions) -> Result<Database, OpenError> {
    let address = address.trim();
    if address.is_empty() {
        return Err(OpenError::InvalidAddress("the address is empty".into()));
    }
    if address.starts_with("postgres://") || address.starts_with("postgresql://") {
        let b = postgres::Backend::open(address, &options).await?;
        return Ok(Database {
            inner: Inner::Postgres(Arc::new(b)),
        });
    }
    let path = address
        .strip_prefix("sqlite://")
        .or_else(|| address.strip_prefix("sqlite:"))
        .unwrap_or(address);
    if path.is_empty() {
        return Err(OpenError::InvalidAddress(format!(
            "{address:?} names no file"
        )));
    }
    let b = if path == ":memory:" {
        sqlite::Backend::open_memory(&options).await?
    } else {
        let path = Path::new(path);
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty())
            && !options.read_only
        {
            std::fs::create_dir_all(dir).map_err(|source| OpenError::CreateDir {
                path: dir.to_owned(),
                source,
            })?;
        }
        sqlite::Backend::open(path, &options).await?
    };
    Ok(Database {
        inner: Inner::Sqlite(Arc::new(b)),
    })
}
