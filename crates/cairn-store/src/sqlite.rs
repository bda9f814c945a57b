//! The SQLite backend: one file in WAL mode with `synchronous = NORMAL` (a committed step
//! survives a crash of the process; a power cut may lose the last few), writers serialized by
//! `BEGIN IMMEDIATE` and `busy_timeout`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};

use crate::common::{db_code, describe, is_busy};
use crate::{OpenError, OpenOptions};

type Db = sqlx::Sqlite;
const ENGINE: &str = "SQLite";
const BEGIN_WRITE: &str = "BEGIN IMMEDIATE";
const FOR_UPDATE: &str = "";
const META_EXISTS: &str =
    "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'meta'";
const MIGRATE_PRELUDE: &[&str] = &[];

/// The schema, one list of statements per format version.
const MIGRATIONS: &[&[&str]] = &[
    &[
        "CREATE TABLE threads (
        id TEXT PRIMARY KEY NOT NULL,
        created_at_ms INTEGER NOT NULL,
        updated_at_ms INTEGER NOT NULL,
        metadata TEXT NOT NULL,
        status TEXT NOT NULL,
        forked_from TEXT REFERENCES threads (id),
        forked_at INTEGER,
        next_seq INTEGER NOT NULL
    )",
        "CREATE INDEX threads_by_update ON threads (updated_at_ms DESC, id DESC)",
        "CREATE INDEX threads_by_source ON threads (forked_from) WHERE forked_from IS NOT NULL",
        "CREATE TABLE steps (
        thread_id TEXT NOT NULL REFERENCES threads (id),
        namespace TEXT NOT NULL,
        seq INTEGER NOT NULL,
        parent INTEGER NOT NULL,
        created_at_ms INTEGER NOT NULL,
        delta TEXT NOT NULL
    )",
        "CREATE UNIQUE INDEX steps_by_parent ON steps (thread_id, namespace, parent)",
        "CREATE TABLE store_items (
        namespace TEXT NOT NULL,
        key TEXT NOT NULL,
        value TEXT NOT NULL,
        version INTEGER NOT NULL,
        created_at_ms INTEGER NOT NULL,
        updated_at_ms INTEGER NOT NULL,
        PRIMARY KEY (namespace, key)
    )",
    ],
    &[
        // Version 2: the run queue of `cairn serve` (see `runs.rs`).
        "CREATE TABLE runs (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id TEXT NOT NULL UNIQUE,
        thread_id TEXT NOT NULL,
        assistant_id TEXT NOT NULL,
        status TEXT NOT NULL,
        kwargs TEXT NOT NULL,
        metadata TEXT NOT NULL,
        multitask_strategy TEXT NOT NULL,
        created_at_ms INTEGER NOT NULL,
        updated_at_ms INTEGER NOT NULL,
        worker TEXT,
        lease_until_ms INTEGER,
        attempts INTEGER NOT NULL,
        cancel TEXT,
        error TEXT,
        start_head INTEGER
    )",
        "CREATE INDEX runs_by_status ON runs (status, seq)",
        "CREATE INDEX runs_by_thread ON runs (thread_id, seq)",
    ],
];

/// The row-lock suffix of the run queue's claim query (SQLite: the whole write transaction is
/// the lock).
const SKIP_LOCKED: &str = "";

include!("engine.rs");
include!("runs_engine.rs");

/// An open error from an engine error, for the file at `path`.
fn open_err(path: &Path, timeout: Duration) -> impl Fn(sqlx::Error) -> OpenError {
    let path: PathBuf = path.to_owned();
    move |e| {
        let code = db_code(&e).and_then(|c| c.parse::<i32>().ok());
        let reason = match &e {
            sqlx::Error::Database(db) => db.message().to_owned(),
            other => other.to_string(),
        };
        match code.map(|c| c & 0xff) {
            // SQLITE_NOTADB, SQLITE_CORRUPT
            Some(26 | 11) => OpenError::NotADatabase {
                path: path.clone(),
                reason,
            },
            _ if is_busy(&e) => OpenError::Locked {
                path: path.clone(),
                reason,
                timeout,
            },
            _ => OpenError::Backend(format!("{}: {}", path.display(), describe(ENGINE, &e))),
        }
    }
}

/// Looks at an existing file through a read-only connection that changes nothing (no WAL
/// switch, no schema): a file that is not a SQLite database, or a database of another program,
/// is refused before anything is written to it.
async fn probe(
    path: &Path,
    options: &OpenOptions,
    err: &impl Fn(sqlx::Error) -> OpenError,
) -> Result<(), OpenError> {
    use sqlx::Connection;
    let connect = SqliteConnectOptions::new()
        .filename(path)
        .read_only(true)
        .create_if_missing(false)
        .busy_timeout(options.busy_timeout);
    let mut conn = sqlx::SqliteConnection::connect_with(&connect)
        .await
        .map_err(err)?;
    let counts: Result<(i64, i64), sqlx::Error> = async {
        let tables: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM sqlite_master WHERE type = 'table'")
                .fetch_one(&mut conn)
                .await?;
        let meta: i64 = sqlx::query_scalar(META_EXISTS).fetch_one(&mut conn).await?;
        Ok((tables, meta))
    }
    .await;
    let _ = conn.close().await;
    let (tables, meta) = counts.map_err(err)?;
    if tables > 0 && meta == 0 {
        return Err(OpenError::NotADatabase {
            path: path.to_owned(),
            reason: "a SQLite database without cairn's meta table (another program's?)".into(),
        });
    }
    Ok(())
}

impl Backend {
    pub(crate) async fn open(path: &Path, options: &OpenOptions) -> Result<Self, OpenError> {
        let connect = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(!options.read_only)
            .read_only(options.read_only);
        Self::open_with(connect, path, options, options.max_connections.unwrap_or(4)).await
    }

    /// A private in-memory database: one connection (each connection would see its own).
    pub(crate) async fn open_memory(options: &OpenOptions) -> Result<Self, OpenError> {
        let connect = SqliteConnectOptions::new().in_memory(true);
        Self::open_with(connect, Path::new(":memory:"), options, 1).await
    }

    async fn open_with(
        connect: SqliteConnectOptions,
        path: &Path,
        options: &OpenOptions,
        max_connections: u32,
    ) -> Result<Self, OpenError> {
        let err = open_err(path, options.busy_timeout);
        if path.exists() {
            probe(path, options, &err).await?;
        }
        let mut connect = connect
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(options.busy_timeout)
            .foreign_keys(true);
        if !options.read_only {
            connect = connect.journal_mode(SqliteJournalMode::Wal);
        }
        for (k, v) in &options.sqlite_pragmas {
            connect = connect.pragma(k.clone(), v.clone());
        }
        let pool = SqlitePoolOptions::new()
            .max_connections(max_connections)
            .min_connections(0)
            .acquire_timeout(options.busy_timeout + Duration::from_secs(30))
            .connect_with(connect)
            .await
            .map_err(&err)?;
        let backend = Backend::from_pool(pool);
        if let Err(e) = backend.migrate(&err).await {
            backend.close().await;
            return Err(e);
        }
        Ok(backend)
    }
}
