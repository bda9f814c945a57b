//! The PostgreSQL backend: the same schema on a connection pool. A writer locks the thread's
//! row (`UPDATE threads … RETURNING`) for the length of its transaction; `lock_timeout` is the
//! open options' busy timeout.

use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

use crate::common::{describe, is_busy};
use crate::{OpenError, OpenOptions};

type Db = sqlx::Postgres;
const ENGINE: &str = "PostgreSQL";
const BEGIN_WRITE: &str = "BEGIN";
const FOR_UPDATE: &str = " FOR UPDATE";
const META_EXISTS: &str = "SELECT COUNT(*) FROM information_schema.tables \
     WHERE table_schema = current_schema() AND table_name = 'meta'";
/// Serializes concurrent opens that migrate (a transaction-scoped advisory lock).
const MIGRATE_PRELUDE: &[&str] = &["SELECT pg_advisory_xact_lock(1667330418)"];

/// The schema, one list of statements per format version. Ids, namespaces and keys use the
/// "C" collation: byte order, as the in-memory implementations sort.
const MIGRATIONS: &[&[&str]] = &[
    &[
        r#"CREATE TABLE threads (
        id TEXT COLLATE "C" PRIMARY KEY,
        created_at_ms BIGINT NOT NULL,
        updated_at_ms BIGINT NOT NULL,
        metadata TEXT NOT NULL,
        status TEXT NOT NULL,
        forked_from TEXT COLLATE "C" REFERENCES threads (id),
        forked_at BIGINT,
        next_seq BIGINT NOT NULL
    )"#,
        "CREATE INDEX threads_by_update ON threads (updated_at_ms DESC, id DESC)",
        "CREATE INDEX threads_by_source ON threads (forked_from) WHERE forked_from IS NOT NULL",
        r#"CREATE TABLE steps (
        thread_id TEXT COLLATE "C" NOT NULL REFERENCES threads (id),
        namespace TEXT COLLATE "C" NOT NULL,
        seq BIGINT NOT NULL,
        parent BIGINT NOT NULL,
        created_at_ms BIGINT NOT NULL,
        delta TEXT NOT NULL,
        PRIMARY KEY (thread_id, namespace, seq)
    )"#,
        "CREATE UNIQUE INDEX steps_by_parent ON steps (thread_id, namespace, parent)",
        r#"CREATE TABLE store_items (
        namespace TEXT COLLATE "C" NOT NULL,
        key TEXT COLLATE "C" NOT NULL,
        value TEXT NOT NULL,
        version BIGINT NOT NULL,
        created_at_ms BIGINT NOT NULL,
        updated_at_ms BIGINT NOT NULL,
        PRIMARY KEY (namespace, key)
    )"#,
    ],
    &[
        // Version 2: the run queue of `cairn serve` (see `runs.rs`).
        r#"CREATE TABLE runs (
        seq BIGSERIAL PRIMARY KEY,
        run_id TEXT COLLATE "C" NOT NULL UNIQUE,
        thread_id TEXT COLLATE "C" NOT NULL,
        assistant_id TEXT NOT NULL,
        status TEXT NOT NULL,
        kwargs TEXT NOT NULL,
        metadata TEXT NOT NULL,
        multitask_strategy TEXT NOT NULL,
        created_at_ms BIGINT NOT NULL,
        updated_at_ms BIGINT NOT NULL,
        worker TEXT,
        lease_until_ms BIGINT,
        attempts BIGINT NOT NULL,
        cancel TEXT,
        error TEXT,
        start_head BIGINT
    )"#,
        "CREATE INDEX runs_by_status ON runs (status, seq)",
        "CREATE INDEX runs_by_thread ON runs (thread_id, seq)",
    ],
];

/// The row-lock suffix of the run queue's claim query: concurrent workers skip the rows
/// another worker is claiming instead of waiting for them.
const SKIP_LOCKED: &str = " FOR UPDATE SKIP LOCKED";

include!("engine.rs");
include!("runs_engine.rs");

impl Backend {
    pub(crate) async fn open(url: &str, options: &OpenOptions) -> Result<Self, OpenError> {
        // sqlx's parse errors do not repeat the URL, so no password reaches a message.
        let mut connect = PgConnectOptions::from_str(url)
            .map_err(|e| OpenError::InvalidAddress(format!("not a PostgreSQL URL: {e}")))?;
        let server = format!(
            "{}:{}/{}",
            connect.get_host(),
            connect.get_port(),
            connect.get_database().unwrap_or("")
        );
        let err = move |e: sqlx::Error| {
            if is_busy(&e) {
                OpenError::Backend(format!(
                    "{server}: the database stayed locked by another writer: {}",
                    describe(ENGINE, &e)
                ))
            } else {
                OpenError::Backend(format!("{server}: {}", describe(ENGINE, &e)))
            }
        };
        let lock_timeout = format!("{}ms", options.busy_timeout.as_millis().max(1));
        let mut settings = vec![("lock_timeout", lock_timeout)];
        // One connection first: a wrong address or password fails at once with the server's
        // words (the pool would retry until its timeout).
        let mut conn: sqlx::PgConnection = sqlx::Connection::connect_with(&connect)
            .await
            .map_err(&err)?;
        if let Some(schema) = &options.schema {
            if schema.is_empty()
                || !schema
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
            {
                return Err(OpenError::InvalidAddress(format!(
                    "schema name {schema:?}: use lowercase letters, digits and '_'"
                )));
            }
            let r = sqlx::query(&format!("CREATE SCHEMA IF NOT EXISTS {schema}"))
                .execute(&mut conn)
                .await;
            if let Err(e) = r {
                // Two processes creating the schema at once: the loser sees a duplicate.
                if !crate::common::is_unique_violation(&e) {
                    return Err(err(e));
                }
            }
            settings.push(("search_path", schema.clone()));
        }
        let _ = sqlx::Connection::close(conn).await;
        connect = connect.options(settings);
        let pool = PgPoolOptions::new()
            .max_connections(options.max_connections.unwrap_or(8))
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
