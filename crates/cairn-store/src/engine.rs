// The checkpointer and store on one SQL engine. This file is included by `sqlite.rs` and
// `postgres.rs`, which define `Db` (the sqlx database), `ENGINE` (its name in messages),
// `BEGIN_WRITE` (the statement that starts a write transaction) and `FOR_UPDATE` (the row-lock
// suffix of a `SELECT`); everything else is the same SQL on both.

use cairn_core::{
    BoxFuture, CheckpointError, Checkpointer, Item, PutIf, RunStatus, SearchQuery, Step, StepDelta,
    Store, StoreError, ThreadInfo, ThreadQuery,
};
use serde_json::{Map, Value};
use sqlx::Row;

use crate::common::{
    ThreadRow, cp_err, decode_namespace, delta_status, encode_namespace, is_foreign_key_violation,
    is_unique_violation, make_step, metadata_text, namespace_upper, now_ms, parse_metadata,
    store_err, to_u64,
};

type Tx = sqlx::Transaction<'static, Db>;

/// Threads and store items in one database; clones of the `Arc` share the pool.
pub(crate) struct Backend {
    pool: sqlx::Pool<Db>,
}

const THREAD_COLUMNS: &str =
    "id, created_at_ms, updated_at_ms, metadata, status, forked_from, forked_at";

fn thread_row(row: &<Db as sqlx::Database>::Row) -> Result<ThreadRow, sqlx::Error> {
    Ok(ThreadRow {
        id: row.try_get(0)?,
        created_at_ms: row.try_get(1)?,
        updated_at_ms: row.try_get(2)?,
        metadata: row.try_get(3)?,
        status: row.try_get(4)?,
        forked_from: row.try_get(5)?,
        forked_at: row.try_get(6)?,
    })
}

fn cpe(e: sqlx::Error) -> CheckpointError {
    cp_err(ENGINE)(e)
}

fn ste(e: sqlx::Error) -> StoreError {
    store_err(ENGINE)(e)
}

impl Backend {
    fn from_pool(pool: sqlx::Pool<Db>) -> Self {
        Backend { pool }
    }

    pub(crate) async fn close(&self) {
        self.pool.close().await;
    }

    async fn begin_write(&self) -> Result<Tx, sqlx::Error> {
        self.pool.begin_with(BEGIN_WRITE).await
    }

    /// Where the fork chain of `thread` goes: `(source, at)`, `None` for an original thread,
    /// and `Err(NotFound)` when the thread does not exist.
    async fn fork_of<'e, E>(exec: E, thread: &str) -> Result<Option<(String, i64)>, CheckpointError>
    where
        E: sqlx::Executor<'e, Database = Db>,
    {
        let row = sqlx::query("SELECT forked_from, forked_at FROM threads WHERE id = $1")
            .bind(thread)
            .fetch_optional(exec)
            .await
            .map_err(cpe)?
            .ok_or_else(|| CheckpointError::NotFound(thread.to_owned()))?;
        let src: Option<String> = row.try_get(0).map_err(cpe)?;
        let at: Option<i64> = row.try_get(1).map_err(cpe)?;
        Ok(src.zip(at))
    }

    /// The last step of `namespace` visible in `thread` with `seq <= upto`, following forks:
    /// `(thread holding it, seq)`, or `None` when the namespace is empty.
    async fn head(
        tx: &mut Tx,
        thread: &str,
        fork: Option<(String, i64)>,
        namespace: &str,
        mut upto: i64,
    ) -> Result<Option<(String, i64)>, CheckpointError> {
        let mut cur = thread.to_owned();
        let mut fork = fork;
        loop {
            // Within a namespace the parents rise with the seqs (each step's parent is the
            // previous step), so the parent index finds the head without a seq index.
            let max: Option<i64> = sqlx::query_scalar(
                "SELECT seq FROM steps WHERE thread_id = $1 AND namespace = $2 AND seq <= $3 \
                 ORDER BY parent DESC LIMIT 1",
            )
            .bind(&cur)
            .bind(namespace)
            .bind(upto)
            .fetch_optional(&mut **tx)
            .await
            .map_err(cpe)?;
            if let Some(seq) = max {
                return Ok(Some((cur, seq)));
            }
            let Some((src, at)) = fork else {
                return Ok(None);
            };
            upto = upto.min(at);
            fork = Self::fork_of(&mut **tx, &src).await?;
            cur = src;
        }
    }
}

impl Checkpointer for Backend {
    fn create_thread<'a>(
        &'a self,
        id: Option<&'a str>,
        metadata: Map<String, Value>,
    ) -> BoxFuture<'a, Result<ThreadInfo, CheckpointError>> {
        Box::pin(async move {
            let id = id.map_or_else(|| uuid::Uuid::new_v4().to_string(), str::to_owned);
            let now = now_ms();
            let meta = metadata_text(&metadata)?;
            sqlx::query(
                "INSERT INTO threads (id, created_at_ms, updated_at_ms, metadata, status, \
                 forked_from, forked_at, next_seq) VALUES ($1, $2, $2, $3, $4, NULL, NULL, 1)",
            )
            .bind(&id)
            .bind(now)
            .bind(&meta)
            .bind(RunStatus::Completed.as_str())
            .execute(&self.pool)
            .await
            .map_err(|e| {
                if is_unique_violation(&e) {
                    CheckpointError::Exists(id.clone())
                } else {
                    cpe(e)
                }
            })?;
            ThreadRow {
                id,
                created_at_ms: now,
                updated_at_ms: now,
                metadata: meta,
                status: RunStatus::Completed.as_str().to_owned(),
                forked_from: None,
                forked_at: None,
            }
            .into_info()
        })
    }

    fn thread<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Option<ThreadInfo>, CheckpointError>> {
        Box::pin(async move {
            let sql = format!("SELECT {THREAD_COLUMNS} FROM threads WHERE id = $1");
            let row = sqlx::query(&sql)
                .bind(id)
                .fetch_optional(&self.pool)
                .await
                .map_err(cpe)?;
            row.map(|r| thread_row(&r).map_err(cpe)?.into_info())
                .transpose()
        })
    }

    fn list_threads<'a>(
        &'a self,
        query: ThreadQuery,
    ) -> BoxFuture<'a, Result<Vec<ThreadInfo>, CheckpointError>> {
        Box::pin(async move {
            let limit = query
                .limit
                .map_or(i64::MAX, |n| i64::try_from(n).unwrap_or(i64::MAX));
            let offset = i64::try_from(query.offset).unwrap_or(i64::MAX);
            let order = "ORDER BY updated_at_ms DESC, id DESC";
            let rows = if query.metadata.is_empty() {
                let sql =
                    format!("SELECT {THREAD_COLUMNS} FROM threads {order} LIMIT $1 OFFSET $2");
                sqlx::query(&sql)
                    .bind(limit)
                    .bind(offset)
                    .fetch_all(&self.pool)
                    .await
            } else {
                // The metadata filter compares JSON values exactly (as the in-memory
                // checkpointer does), so it runs here, before the limit and offset.
                let sql = format!("SELECT {THREAD_COLUMNS} FROM threads {order}");
                sqlx::query(&sql).fetch_all(&self.pool).await
            }
            .map_err(cpe)?;
            let mut out = Vec::new();
            let mut skipped = 0;
            for row in rows {
                let info = thread_row(&row).map_err(cpe)?.into_info()?;
                if query.metadata.is_empty() {
                    out.push(info);
                    continue;
                }
                if !cairn_core::checkpoint::metadata_matches(&info.metadata, &query.metadata) {
                    continue;
                }
                if skipped < query.offset {
                    skipped += 1;
                    continue;
                }
                if query.limit.is_some_and(|l| out.len() >= l) {
                    break;
                }
                out.push(info);
            }
            Ok(out)
        })
    }

    fn update_metadata<'a>(
        &'a self,
        id: &'a str,
        metadata: Map<String, Value>,
    ) -> BoxFuture<'a, Result<(), CheckpointError>> {
        Box::pin(async move {
            let mut tx = self.begin_write().await.map_err(cpe)?;
            let sql = format!("SELECT metadata FROM threads WHERE id = $1{FOR_UPDATE}");
            let old: Option<String> = sqlx::query_scalar(&sql)
                .bind(id)
                .fetch_optional(&mut *tx)
                .await
                .map_err(cpe)?;
            let Some(old) = old else {
                return Err(CheckpointError::NotFound(id.to_owned()));
            };
            let mut merged = parse_metadata(&old)?;
            cairn_core::checkpoint::merge_metadata(&mut merged, metadata);
            sqlx::query("UPDATE threads SET metadata = $2 WHERE id = $1")
                .bind(id)
                .bind(metadata_text(&merged)?)
                .execute(&mut *tx)
                .await
                .map_err(cpe)?;
            tx.commit().await.map_err(cpe)
        })
    }

    fn delete_thread<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<bool, CheckpointError>> {
        Box::pin(async move {
            let has_forks =
                || CheckpointError::Invalid(format!("thread {id} has forks; delete them first"));
            let mut tx = self.begin_write().await.map_err(cpe)?;
            let forks: i64 =
                sqlx::query_scalar("SELECT COUNT(*) FROM threads WHERE forked_from = $1")
                    .bind(id)
                    .fetch_one(&mut *tx)
                    .await
                    .map_err(cpe)?;
            if forks > 0 {
                return Err(has_forks());
            }
            sqlx::query("DELETE FROM steps WHERE thread_id = $1")
                .bind(id)
                .execute(&mut *tx)
                .await
                .map_err(cpe)?;
            let done = sqlx::query("DELETE FROM threads WHERE id = $1")
                .bind(id)
                .execute(&mut *tx)
                .await
                .map_err(|e| {
                    if is_foreign_key_violation(&e) {
                        has_forks()
                    } else {
                        cpe(e)
                    }
                })?;
            tx.commit().await.map_err(cpe)?;
            Ok(done.rows_affected() > 0)
        })
    }

    fn truncate<'a>(
        &'a self,
        thread: &'a str,
        after: u64,
    ) -> BoxFuture<'a, Result<usize, CheckpointError>> {
        Box::pin(async move {
            let after_i = i64::try_from(after).unwrap_or(i64::MAX);
            let mut tx = self.begin_write().await.map_err(cpe)?;
            // Lock the thread's row first (PostgreSQL), as `append` does.
            let found = sqlx::query("UPDATE threads SET updated_at_ms = $2 WHERE id = $1")
                .bind(thread)
                .bind(now_ms())
                .execute(&mut *tx)
                .await
                .map_err(cpe)?;
            if found.rows_affected() == 0 {
                return Err(CheckpointError::NotFound(thread.to_owned()));
            }
            let forks: i64 = sqlx::query_scalar(
                "SELECT COUNT(*) FROM threads WHERE forked_from = $1 AND forked_at > $2",
            )
            .bind(thread)
            .bind(after_i)
            .fetch_one(&mut *tx)
            .await
            .map_err(cpe)?;
            if forks > 0 {
                return Err(CheckpointError::Invalid(format!(
                    "thread {thread} has a fork made after step {after}; delete it first"
                )));
            }
            let removed = sqlx::query("DELETE FROM steps WHERE thread_id = $1 AND seq > $2")
                .bind(thread)
                .bind(after_i)
                .execute(&mut *tx)
                .await
                .map_err(cpe)?
                .rows_affected();
            let last: Option<String> = sqlx::query_scalar(
                "SELECT delta FROM steps WHERE thread_id = $1 AND namespace = '' \
                 ORDER BY seq DESC LIMIT 1",
            )
            .bind(thread)
            .fetch_optional(&mut *tx)
            .await
            .map_err(cpe)?;
            let status = match last {
                Some(d) => delta_status(&d)?,
                None => RunStatus::Completed,
            };
            sqlx::query("UPDATE threads SET status = $2 WHERE id = $1")
                .bind(thread)
                .bind(status.as_str())
                .execute(&mut *tx)
                .await
                .map_err(cpe)?;
            tx.commit().await.map_err(cpe)?;
            Ok(usize::try_from(removed).unwrap_or(usize::MAX))
        })
    }

    fn append<'a>(
        &'a self,
        thread: &'a str,
        namespace: &'a str,
        parent: u64,
        delta: &'a StepDelta,
    ) -> BoxFuture<'a, Result<u64, CheckpointError>> {
        Box::pin(async move {
            let conflict = || CheckpointError::Conflict {
                thread: thread.to_owned(),
                namespace: namespace.to_owned(),
                parent,
            };
            // Another writer's step after the same parent (the unique parent index): a conflict.
            let conflict_or_error = |e: sqlx::Error| {
                if is_unique_violation(&e) {
                    conflict()
                } else {
                    cpe(e)
                }
            };
            let text = serde_json::to_string(delta)
                .map_err(|e| CheckpointError::Invalid(format!("the step cannot be stored: {e}")))?;
            let Ok(parent_i) = i64::try_from(parent) else {
                return Err(conflict());
            };
            let now = now_ms();
            let status = namespace.is_empty().then_some(delta.status.as_str());
            let mut tx = self.begin_write().await.map_err(cpe)?;
            // Taking the next seq locks the thread's row (PostgreSQL; SQLite holds the write
            // lock since BEGIN IMMEDIATE), so the head read below cannot change under us.
            let row = sqlx::query(
                "UPDATE threads SET next_seq = next_seq + 1, updated_at_ms = $2, \
                 status = COALESCE($3, status) WHERE id = $1 \
                 RETURNING next_seq, forked_from, forked_at",
            )
            .bind(thread)
            .bind(now)
            .bind(status)
            .fetch_optional(&mut *tx)
            .await
            .map_err(cpe)?
            .ok_or_else(|| CheckpointError::NotFound(thread.to_owned()))?;
            let next: i64 = row.try_get(0).map_err(cpe)?;
            let src: Option<String> = row.try_get(1).map_err(cpe)?;
            let at: Option<i64> = row.try_get(2).map_err(cpe)?;
            let seq = next - 1;
            let head = Self::head(&mut tx, thread, src.zip(at), namespace, i64::MAX).await?;
            if head.map_or(0, |(_, s)| s) != parent_i {
                return Err(conflict());
            }
            sqlx::query(
                "INSERT INTO steps (thread_id, namespace, seq, parent, created_at_ms, delta) \
                 VALUES ($1, $2, $3, $4, $5, $6)",
            )
            .bind(thread)
            .bind(namespace)
            .bind(seq)
            .bind(parent_i)
            .bind(now)
            .bind(&text)
            .execute(&mut *tx)
            .await
            .map_err(conflict_or_error)?;
            tx.commit().await.map_err(conflict_or_error)?;
            to_u64(seq, "seq")
        })
    }

    fn steps<'a>(
        &'a self,
        thread: &'a str,
        namespace: &'a str,
        upto: Option<u64>,
    ) -> BoxFuture<'a, Result<Vec<Step>, CheckpointError>> {
        Box::pin(async move {
            let upto = upto.map_or(i64::MAX, |u| i64::try_from(u).unwrap_or(i64::MAX));
            // The chain of threads whose steps are visible: the thread, its source up to the
            // fork point, that one's source…
            let mut chain = vec![(thread.to_owned(), upto)];
            let mut fork = Self::fork_of(&self.pool, thread).await?;
            let mut limit = upto;
            while let Some((src, at)) = fork {
                limit = limit.min(at);
                fork = Self::fork_of(&self.pool, &src).await?;
                chain.push((src, limit));
            }
            let mut out = Vec::new();
            for (tid, upto) in chain.iter().rev() {
                let rows = sqlx::query(
                    "SELECT seq, parent, created_at_ms, delta FROM steps \
                     WHERE thread_id = $1 AND namespace = $2 AND seq <= $3 ORDER BY parent",
                )
                .bind(tid)
                .bind(namespace)
                .bind(upto)
                .fetch_all(&self.pool)
                .await
                .map_err(cpe)?;
                for r in rows {
                    let seq: i64 = r.try_get(0).map_err(cpe)?;
                    let parent: i64 = r.try_get(1).map_err(cpe)?;
                    let created: i64 = r.try_get(2).map_err(cpe)?;
                    let delta: &str = r.try_get(3).map_err(cpe)?;
                    out.push(make_step(tid, namespace, seq, parent, created, delta)?);
                }
            }
            Ok(out)
        })
    }

    fn fork<'a>(
        &'a self,
        thread: &'a str,
        at: u64,
        new_id: Option<&'a str>,
    ) -> BoxFuture<'a, Result<ThreadInfo, CheckpointError>> {
        Box::pin(async move {
            let no_step = || CheckpointError::Invalid(format!("thread {thread} has no step {at}"));
            let at_i = i64::try_from(at).map_err(|_| no_step())?;
            let mut tx = self.begin_write().await.map_err(cpe)?;
            let sql = format!(
                "SELECT next_seq, metadata, forked_from, forked_at FROM threads WHERE id = $1{FOR_UPDATE}"
            );
            let row = sqlx::query(&sql)
                .bind(thread)
                .fetch_optional(&mut *tx)
                .await
                .map_err(cpe)?
                .ok_or_else(|| CheckpointError::NotFound(thread.to_owned()))?;
            let next: i64 = row.try_get(0).map_err(cpe)?;
            let metadata: String = row.try_get(1).map_err(cpe)?;
            let src: Option<String> = row.try_get(2).map_err(cpe)?;
            let src_at: Option<i64> = row.try_get(3).map_err(cpe)?;
            if at_i == 0 || at_i >= next {
                return Err(no_step());
            }
            let status = match Self::head(&mut tx, thread, src.zip(src_at), "", at_i).await? {
                Some((holder, seq)) => {
                    let delta: String = sqlx::query_scalar(
                        "SELECT delta FROM steps WHERE thread_id = $1 AND seq = $2",
                    )
                    .bind(&holder)
                    .bind(seq)
                    .fetch_one(&mut *tx)
                    .await
                    .map_err(cpe)?;
                    delta_status(&delta)?
                }
                None => RunStatus::Completed,
            };
            let id = new_id.map_or_else(|| uuid::Uuid::new_v4().to_string(), str::to_owned);
            let now = now_ms();
            sqlx::query(
                "INSERT INTO threads (id, created_at_ms, updated_at_ms, metadata, status, \
                 forked_from, forked_at, next_seq) VALUES ($1, $2, $2, $3, $4, $5, $6, $7)",
            )
            .bind(&id)
            .bind(now)
            .bind(&metadata)
            .bind(status.as_str())
            .bind(thread)
            .bind(at_i)
            .bind(at_i + 1)
            .execute(&mut *tx)
            .await
            .map_err(|e| {
                if is_unique_violation(&e) {
                    CheckpointError::Exists(id.clone())
                } else {
                    cpe(e)
                }
            })?;
            tx.commit().await.map_err(cpe)?;
            ThreadRow {
                id,
                created_at_ms: now,
                updated_at_ms: now,
                metadata,
                status: status.as_str().to_owned(),
                forked_from: Some(thread.to_owned()),
                forked_at: Some(at_i),
            }
            .into_info()
        })
    }
}

fn item_from_row(row: &<Db as sqlx::Database>::Row) -> Result<Item, StoreError> {
    let ns: String = row.try_get(0).map_err(ste)?;
    let key: String = row.try_get(1).map_err(ste)?;
    let value: String = row.try_get(2).map_err(ste)?;
    let version: i64 = row.try_get(3).map_err(ste)?;
    let created: i64 = row.try_get(4).map_err(ste)?;
    let updated: i64 = row.try_get(5).map_err(ste)?;
    let num = |v: i64| {
        u64::try_from(v).map_err(|_| StoreError::Backend(format!("corrupt store item {key:?}")))
    };
    Ok(Item {
        namespace: decode_namespace(&ns)?,
        value: serde_json::from_str(&value)?,
        version: num(version)?,
        created_at_ms: num(created)?,
        updated_at_ms: num(updated)?,
        key,
    })
}

const ITEM_COLUMNS: &str = "namespace, key, value, version, created_at_ms, updated_at_ms";

impl Backend {
    async fn item_version(&self, ns: &str, key: &str) -> Result<Option<u64>, StoreError> {
        let v: Option<i64> =
            sqlx::query_scalar("SELECT version FROM store_items WHERE namespace = $1 AND key = $2")
                .bind(ns)
                .bind(key)
                .fetch_optional(&self.pool)
                .await
                .map_err(ste)?;
        Ok(v.and_then(|v| u64::try_from(v).ok()))
    }
}

impl Store for Backend {
    fn get<'a>(
        &'a self,
        namespace: &'a [String],
        key: &'a str,
    ) -> BoxFuture<'a, Result<Option<Item>, StoreError>> {
        Box::pin(async move {
            let sql =
                format!("SELECT {ITEM_COLUMNS} FROM store_items WHERE namespace = $1 AND key = $2");
            let row = sqlx::query(&sql)
                .bind(encode_namespace(namespace))
                .bind(key)
                .fetch_optional(&self.pool)
                .await
                .map_err(ste)?;
            row.map(|r| item_from_row(&r)).transpose()
        })
    }

    fn put_if<'a>(
        &'a self,
        namespace: &'a [String],
        key: &'a str,
        value: Value,
        condition: PutIf,
    ) -> BoxFuture<'a, Result<u64, StoreError>> {
        Box::pin(async move {
            if key.is_empty() {
                return Err(StoreError::Invalid("the key is empty".into()));
            }
            let ns = encode_namespace(namespace);
            let text = serde_json::to_string(&value)?;
            let now = now_ms();
            // Each condition is one statement, atomic on its own.
            let written: Option<i64> = match condition {
                PutIf::Always => sqlx::query_scalar(
                    "INSERT INTO store_items (namespace, key, value, version, created_at_ms, \
                     updated_at_ms) VALUES ($1, $2, $3, 1, $4, $4) \
                     ON CONFLICT (namespace, key) DO UPDATE SET value = excluded.value, \
                     version = store_items.version + 1, updated_at_ms = excluded.updated_at_ms \
                     RETURNING version",
                )
                .bind(&ns)
                .bind(key)
                .bind(&text)
                .bind(now)
                .fetch_optional(&self.pool)
                .await
                .map_err(ste)?,
                PutIf::Absent => sqlx::query_scalar(
                    "INSERT INTO store_items (namespace, key, value, version, created_at_ms, \
                     updated_at_ms) VALUES ($1, $2, $3, 1, $4, $4) \
                     ON CONFLICT (namespace, key) DO NOTHING RETURNING version",
                )
                .bind(&ns)
                .bind(key)
                .bind(&text)
                .bind(now)
                .fetch_optional(&self.pool)
                .await
                .map_err(ste)?,
                PutIf::Version(v) => match i64::try_from(v) {
                    Ok(v) => sqlx::query_scalar(
                        "UPDATE store_items SET value = $3, version = version + 1, \
                         updated_at_ms = $4 WHERE namespace = $1 AND key = $2 AND version = $5 \
                         RETURNING version",
                    )
                    .bind(&ns)
                    .bind(key)
                    .bind(&text)
                    .bind(now)
                    .bind(v)
                    .fetch_optional(&self.pool)
                    .await
                    .map_err(ste)?,
                    Err(_) => None,
                },
                other => {
                    return Err(StoreError::Invalid(format!(
                        "condition {other:?} is not supported by this store"
                    )));
                }
            };
            match written {
                Some(v) => u64::try_from(v)
                    .map_err(|_| StoreError::Backend(format!("corrupt store item {key:?}"))),
                None => Err(StoreError::Conflict {
                    key: key.to_owned(),
                    expected: condition,
                    found: self.item_version(&ns, key).await?,
                }),
            }
        })
    }

    fn delete<'a>(
        &'a self,
        namespace: &'a [String],
        key: &'a str,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            sqlx::query("DELETE FROM store_items WHERE namespace = $1 AND key = $2")
                .bind(encode_namespace(namespace))
                .bind(key)
                .execute(&self.pool)
                .await
                .map_err(ste)?;
            Ok(())
        })
    }

    fn search<'a>(
        &'a self,
        namespace_prefix: &'a [String],
        query: SearchQuery,
    ) -> BoxFuture<'a, Result<Vec<Item>, StoreError>> {
        Box::pin(async move {
            let lower = encode_namespace(namespace_prefix);
            let upper = namespace_upper(&lower);
            let limit = query
                .limit
                .map_or(i64::MAX, |n| i64::try_from(n).unwrap_or(i64::MAX));
            let offset = i64::try_from(query.offset).unwrap_or(i64::MAX);
            let sql = format!(
                "SELECT {ITEM_COLUMNS} FROM store_items \
                 WHERE namespace >= $1 AND (CAST($2 AS TEXT) IS NULL OR namespace < $2) \
                 AND (CAST($3 AS TEXT) IS NULL OR substr(key, 1, length($3)) = $3) \
                 ORDER BY namespace, key LIMIT $4 OFFSET $5"
            );
            let rows = sqlx::query(&sql)
                .bind(&lower)
                .bind(upper)
                .bind(query.key_prefix.as_deref())
                .bind(limit)
                .bind(offset)
                .fetch_all(&self.pool)
                .await
                .map_err(ste)?;
            rows.iter().map(item_from_row).collect()
        })
    }
}

/// Reads the format version (`0`: a database without cairn's tables).
async fn read_version<'e, E>(exec: E) -> Result<i64, sqlx::Error>
where
    E: sqlx::Executor<'e, Database = Db> + Copy,
{
    let has_meta: i64 = sqlx::query_scalar(META_EXISTS).fetch_one(exec).await?;
    if has_meta == 0 {
        return Ok(0);
    }
    let v: Option<String> =
        sqlx::query_scalar("SELECT value FROM meta WHERE key = 'format_version'")
            .fetch_optional(exec)
            .await?;
    Ok(v.and_then(|v| v.trim().parse().ok()).unwrap_or(0))
}

impl Backend {
    /// Checks the format version and runs the migrations this database lacks, in one write
    /// transaction (so two processes opening a new database do not both create it).
    async fn migrate(
        &self,
        err: &dyn Fn(sqlx::Error) -> crate::OpenError,
    ) -> Result<(), crate::OpenError> {
        let newer = |found| crate::OpenError::NewerFormat {
            found,
            supported: crate::FORMAT_VERSION,
        };
        let found = read_version(&self.pool).await.map_err(err)?;
        if found == crate::FORMAT_VERSION {
            return Ok(());
        }
        if found > crate::FORMAT_VERSION {
            return Err(newer(found));
        }
        let mut tx = self.begin_write().await.map_err(err)?;
        for s in MIGRATE_PRELUDE {
            sqlx::query(s).execute(&mut *tx).await.map_err(err)?;
        }
        let found = {
            let has_meta: i64 = sqlx::query_scalar(META_EXISTS)
                .fetch_one(&mut *tx)
                .await
                .map_err(err)?;
            if has_meta == 0 {
                0
            } else {
                let v: Option<String> =
                    sqlx::query_scalar("SELECT value FROM meta WHERE key = 'format_version'")
                        .fetch_optional(&mut *tx)
                        .await
                        .map_err(err)?;
                v.and_then(|v| v.trim().parse().ok()).unwrap_or(0)
            }
        };
        if found > crate::FORMAT_VERSION {
            return Err(newer(found));
        }
        sqlx::query("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            .execute(&mut *tx)
            .await
            .map_err(err)?;
        for (i, statements) in MIGRATIONS.iter().enumerate() {
            if (i as i64) < found {
                continue;
            }
            for s in *statements {
                sqlx::query(s).execute(&mut *tx).await.map_err(err)?;
            }
        }
        sqlx::query(
            "INSERT INTO meta (key, value) VALUES ('format_version', $1) \
             ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        )
        .bind(crate::FORMAT_VERSION.to_string())
        .execute(&mut *tx)
        .await
        .map_err(err)?;
        tx.commit().await.map_err(err)
    }
}
