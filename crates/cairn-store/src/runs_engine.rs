// The run queue on one SQL engine (see `runs.rs`). Included by `sqlite.rs` and `postgres.rs`
// after `engine.rs`, whose imports it shares; `SKIP_LOCKED` is the claim query's row-lock
// suffix (PostgreSQL: `FOR UPDATE SKIP LOCKED`; SQLite: none, the write transaction is the lock).

const RUN_COLUMNS: &str = "run_id, thread_id, assistant_id, status, kwargs, metadata, \
     multitask_strategy, created_at_ms, updated_at_ms, worker, lease_until_ms, attempts, cancel, \
     error, start_head";

fn rqe(e: sqlx::Error) -> crate::runs::RunError {
    match &e {
        sqlx::Error::ColumnDecode { .. } | sqlx::Error::Decode(_) => {
            crate::runs::RunError::Corrupt(crate::common::describe(ENGINE, &e))
        }
        _ => crate::runs::RunError::Backend(crate::common::describe(ENGINE, &e)),
    }
}

fn run_row(row: &<Db as sqlx::Database>::Row) -> Result<crate::runs::RunRecord, crate::runs::RunError> {
    use crate::runs::{CancelAction, MultitaskStrategy, RunError, RunRecord, RunState};
    let corrupt = |what: &str| RunError::Corrupt(what.to_owned());
    let text = |i: usize| -> Result<String, RunError> { row.try_get::<String, _>(i).map_err(rqe) };
    let opt_i = |i: usize| -> Result<Option<i64>, RunError> {
        row.try_get::<Option<i64>, _>(i).map_err(rqe)
    };
    let u = |v: i64| u64::try_from(v).map_err(|_| corrupt("a negative time or count"));
    let status = text(3)?;
    let kwargs = text(4)?;
    let metadata = text(5)?;
    let strategy = text(6)?;
    let cancel: Option<String> = row.try_get(12).map_err(rqe)?;
    Ok(RunRecord {
        run_id: text(0)?,
        thread_id: text(1)?,
        assistant_id: text(2)?,
        status: RunState::parse(&status)
            .ok_or_else(|| corrupt(&format!("unknown run status {status:?}")))?,
        kwargs: serde_json::from_str(&kwargs)
            .map_err(|e| corrupt(&format!("run request is not JSON: {e}")))?,
        metadata: serde_json::from_str(&metadata)
            .map_err(|e| corrupt(&format!("run metadata is not a JSON object: {e}")))?,
        multitask_strategy: MultitaskStrategy::parse(&strategy).unwrap_or_default(),
        created_at_ms: u(row.try_get::<i64, _>(7).map_err(rqe)?)?,
        updated_at_ms: u(row.try_get::<i64, _>(8).map_err(rqe)?)?,
        worker: row.try_get(9).map_err(rqe)?,
        lease_until_ms: opt_i(10)?.map(u).transpose()?,
        attempts: u32::try_from(row.try_get::<i64, _>(11).map_err(rqe)?)
            .map_err(|_| corrupt("attempts out of range"))?,
        cancel: cancel.as_deref().and_then(CancelAction::parse),
        error: row.try_get(13).map_err(rqe)?,
        start_head: opt_i(14)?.map(u).transpose()?,
    })
}

fn lease_ms(lease: std::time::Duration) -> i64 {
    i64::try_from(lease.as_millis()).unwrap_or(i64::MAX / 4)
}

impl Backend {
    async fn run_fetch(
        tx: &mut Tx,
        run_id: &str,
    ) -> Result<Option<crate::runs::RunRecord>, crate::runs::RunError> {
        let row = sqlx::query(&format!("SELECT {RUN_COLUMNS} FROM runs WHERE run_id = $1"))
            .bind(run_id)
            .fetch_optional(&mut **tx)
            .await
            .map_err(rqe)?;
        row.as_ref().map(run_row).transpose()
    }

    /// The active runs of a thread inside a transaction, oldest first.
    async fn run_active_in(
        tx: &mut Tx,
        thread_id: &str,
    ) -> Result<Vec<crate::runs::RunRecord>, crate::runs::RunError> {
        let rows = sqlx::query(&format!(
            "SELECT {RUN_COLUMNS} FROM runs WHERE thread_id = $1 \
             AND status IN ('pending', 'running') ORDER BY seq"
        ))
        .bind(thread_id)
        .fetch_all(&mut **tx)
        .await
        .map_err(rqe)?;
        rows.iter().map(run_row).collect()
    }

    pub(crate) async fn run_create(
        &self,
        new: crate::runs::NewRun,
    ) -> Result<crate::runs::Created, crate::runs::RunError> {
        use crate::runs::{CancelAction, Created, MultitaskStrategy, RunError, RunState};
        let run_id = new
            .run_id
            .clone()
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        let kwargs = serde_json::to_string(&new.kwargs)
            .map_err(|e| RunError::Backend(format!("the run request cannot be stored: {e}")))?;
        let metadata = serde_json::to_string(&new.metadata)
            .map_err(|e| RunError::Backend(format!("the run metadata cannot be stored: {e}")))?;
        let now = now_ms();
        let mut tx = self.begin_write().await.map_err(rqe)?;
        // Serialize creators on one thread: lock the thread's row (PostgreSQL; SQLite holds
        // the write lock since BEGIN IMMEDIATE).
        sqlx::query("UPDATE threads SET updated_at_ms = updated_at_ms WHERE id = $1")
            .bind(&new.thread_id)
            .execute(&mut *tx)
            .await
            .map_err(rqe)?;
        let active = Self::run_active_in(&mut tx, &new.thread_id).await?;
        let mut displaced = Vec::new();
        if let Some(first) = active.first() {
            match new.strategy {
                MultitaskStrategy::Reject => {
                    return Err(RunError::Busy {
                        thread: new.thread_id.clone(),
                        run: first.run_id.clone(),
                    });
                }
                MultitaskStrategy::Enqueue => {}
                MultitaskStrategy::Interrupt | MultitaskStrategy::Rollback => {
                    let action = if new.strategy == MultitaskStrategy::Rollback {
                        CancelAction::Rollback
                    } else {
                        CancelAction::Interrupt
                    };
                    for r in &active {
                        Self::run_cancel_in(&mut tx, r, action, now).await?;
                        displaced.push(r.clone());
                    }
                }
            }
        }
        // Claimed at once when nothing of the thread stays active ahead of it.
        let ahead = match new.strategy {
            MultitaskStrategy::Interrupt | MultitaskStrategy::Rollback => {
                active.iter().any(|r| r.status == RunState::Running)
            }
            _ => !active.is_empty(),
        };
        let claim = new.claim_for.as_ref().filter(|_| !ahead);
        let (status, worker, lease_until, attempts) = match claim {
            Some((w, lease)) => (
                RunState::Running,
                Some(w.clone()),
                Some(now + lease_ms(*lease)),
                1i64,
            ),
            None => (RunState::Pending, None, None, 0i64),
        };
        sqlx::query(
            "INSERT INTO runs (run_id, thread_id, assistant_id, status, kwargs, metadata, \
             multitask_strategy, created_at_ms, updated_at_ms, worker, lease_until_ms, attempts, \
             cancel, error, start_head) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8, $9, $10, $11, NULL, NULL, NULL)",
        )
        .bind(&run_id)
        .bind(&new.thread_id)
        .bind(&new.assistant_id)
        .bind(status.as_str())
        .bind(&kwargs)
        .bind(&metadata)
        .bind(new.strategy.as_str())
        .bind(now)
        .bind(worker)
        .bind(lease_until)
        .bind(attempts)
        .execute(&mut *tx)
        .await
        .map_err(|e| {
            if crate::common::is_unique_violation(&e) {
                RunError::Exists(run_id.clone())
            } else {
                rqe(e)
            }
        })?;
        let run = Self::run_fetch(&mut tx, &run_id)
            .await?
            .ok_or_else(|| RunError::NotFound(run_id.clone()))?;
        tx.commit().await.map_err(rqe)?;
        Ok(Created {
            run,
            claimed: claim.is_some(),
            displaced,
        })
    }

    /// Cancels `r` inside a transaction.
    async fn run_cancel_in(
        tx: &mut Tx,
        r: &crate::runs::RunRecord,
        action: crate::runs::CancelAction,
        now: i64,
    ) -> Result<(), crate::runs::RunError> {
        use crate::runs::{CancelAction, RunState};
        match (r.status, action) {
            (RunState::Pending, CancelAction::Rollback) => {
                sqlx::query("DELETE FROM runs WHERE run_id = $1")
                    .bind(&r.run_id)
                    .execute(&mut **tx)
                    .await
                    .map_err(rqe)?;
            }
            (RunState::Pending, CancelAction::Interrupt) => {
                sqlx::query(
                    "UPDATE runs SET status = 'interrupted', cancel = 'interrupt', \
                     updated_at_ms = $2 WHERE run_id = $1",
                )
                .bind(&r.run_id)
                .bind(now)
                .execute(&mut **tx)
                .await
                .map_err(rqe)?;
            }
            _ => {
                sqlx::query("UPDATE runs SET cancel = $2, updated_at_ms = $3 WHERE run_id = $1")
                    .bind(&r.run_id)
                    .bind(action.as_str())
                    .bind(now)
                    .execute(&mut **tx)
                    .await
                    .map_err(rqe)?;
            }
        }
        Ok(())
    }

    pub(crate) async fn run_claim(
        &self,
        run_id: Option<&str>,
        worker: &str,
        lease: std::time::Duration,
    ) -> Result<Option<crate::runs::RunRecord>, crate::runs::RunError> {
        let now = now_ms();
        let mut tx = self.begin_write().await.map_err(rqe)?;
        // A pending run with nothing of its thread running and nothing older pending, or a
        // running run whose lease ran out.
        let only = if run_id.is_some() { " AND r.run_id = $2" } else { "" };
        let sql = format!(
            "SELECT r.run_id FROM runs r WHERE ((r.status = 'pending' AND NOT EXISTS (\
             SELECT 1 FROM runs o WHERE o.thread_id = r.thread_id AND o.seq <> r.seq AND \
             (o.status = 'running' OR (o.status = 'pending' AND o.seq < r.seq)))) \
             OR (r.status = 'running' AND r.lease_until_ms < $1)){only} \
             ORDER BY r.seq LIMIT 1{SKIP_LOCKED}"
        );
        let mut q = sqlx::query_scalar::<_, String>(&sql).bind(now);
        if let Some(id) = run_id {
            q = q.bind(id);
        }
        let Some(found) = q.fetch_optional(&mut *tx).await.map_err(rqe)? else {
            return Ok(None);
        };
        sqlx::query(
            "UPDATE runs SET status = 'running', worker = $2, lease_until_ms = $3, \
             attempts = attempts + 1, updated_at_ms = $4 WHERE run_id = $1",
        )
        .bind(&found)
        .bind(worker)
        .bind(now + lease_ms(lease))
        .bind(now)
        .execute(&mut *tx)
        .await
        .map_err(rqe)?;
        let run = Self::run_fetch(&mut tx, &found).await?;
        tx.commit().await.map_err(rqe)?;
        Ok(run)
    }

    pub(crate) async fn run_renew(
        &self,
        worker: &str,
        lease: std::time::Duration,
    ) -> Result<Vec<crate::runs::RunRecord>, crate::runs::RunError> {
        let now = now_ms();
        let mut tx = self.begin_write().await.map_err(rqe)?;
        sqlx::query(
            "UPDATE runs SET lease_until_ms = $2 WHERE worker = $1 AND status = 'running'",
        )
        .bind(worker)
        .bind(now + lease_ms(lease))
        .execute(&mut *tx)
        .await
        .map_err(rqe)?;
        let rows = sqlx::query(&format!(
            "SELECT {RUN_COLUMNS} FROM runs WHERE worker = $1 AND status = 'running' ORDER BY seq"
        ))
        .bind(worker)
        .fetch_all(&mut *tx)
        .await
        .map_err(rqe)?;
        tx.commit().await.map_err(rqe)?;
        rows.iter().map(run_row).collect()
    }

    pub(crate) async fn run_set_start_head(
        &self,
        run_id: &str,
        worker: &str,
        head: u64,
    ) -> Result<(), crate::runs::RunError> {
        sqlx::query(
            "UPDATE runs SET start_head = COALESCE(start_head, $3) \
             WHERE run_id = $1 AND worker = $2",
        )
        .bind(run_id)
        .bind(worker)
        .bind(i64::try_from(head).unwrap_or(i64::MAX))
        .execute(&self.pool)
        .await
        .map_err(rqe)?;
        Ok(())
    }

    pub(crate) async fn run_finish(
        &self,
        run_id: &str,
        worker: &str,
        status: crate::runs::RunState,
        error: Option<&str>,
    ) -> Result<bool, crate::runs::RunError> {
        let done = sqlx::query(
            "UPDATE runs SET status = $3, error = $4, updated_at_ms = $5, lease_until_ms = NULL \
             WHERE run_id = $1 AND worker = $2 AND status = 'running'",
        )
        .bind(run_id)
        .bind(worker)
        .bind(status.as_str())
        .bind(error)
        .bind(now_ms())
        .execute(&self.pool)
        .await
        .map_err(rqe)?;
        Ok(done.rows_affected() > 0)
    }

    pub(crate) async fn run_get(
        &self,
        run_id: &str,
    ) -> Result<Option<crate::runs::RunRecord>, crate::runs::RunError> {
        let row = sqlx::query(&format!("SELECT {RUN_COLUMNS} FROM runs WHERE run_id = $1"))
            .bind(run_id)
            .fetch_optional(&self.pool)
            .await
            .map_err(rqe)?;
        row.as_ref().map(run_row).transpose()
    }

    pub(crate) async fn run_list(
        &self,
        filter: crate::runs::RunFilter,
    ) -> Result<Vec<crate::runs::RunRecord>, crate::runs::RunError> {
        let rows = sqlx::query(&format!(
            "SELECT {RUN_COLUMNS} FROM runs WHERE ($1 IS NULL OR thread_id = $1) \
             AND ($2 IS NULL OR status = $2) ORDER BY seq DESC"
        ))
        .bind(filter.thread_id.as_deref())
        .bind(filter.status.map(|s| s.as_str()))
        .fetch_all(&self.pool)
        .await
        .map_err(rqe)?;
        let limit = if filter.limit == 0 { usize::MAX } else { filter.limit };
        let mut out = Vec::new();
        let mut skipped = 0;
        for row in &rows {
            let r = run_row(row)?;
            if !cairn_core::checkpoint::metadata_matches(&r.metadata, &filter.metadata) {
                continue;
            }
            if skipped < filter.offset {
                skipped += 1;
                continue;
            }
            out.push(r);
            if out.len() >= limit {
                break;
            }
        }
        Ok(out)
    }

    pub(crate) async fn run_cancel(
        &self,
        run_id: &str,
        action: crate::runs::CancelAction,
    ) -> Result<crate::runs::RunRecord, crate::runs::RunError> {
        use crate::runs::RunError;
        let mut tx = self.begin_write().await.map_err(rqe)?;
        let r = Self::run_fetch(&mut tx, run_id)
            .await?
            .ok_or_else(|| RunError::NotFound(run_id.to_owned()))?;
        if !r.status.is_active() {
            return Err(RunError::BadTransition {
                run: r.run_id.clone(),
                status: r.status.as_str(),
                what: "only a pending or running run can be cancelled".into(),
            });
        }
        Self::run_cancel_in(&mut tx, &r, action, now_ms()).await?;
        let after = Self::run_fetch(&mut tx, run_id).await?;
        tx.commit().await.map_err(rqe)?;
        // A rolled-back pending run is gone: report it as it was, marked cancelled.
        Ok(after.unwrap_or_else(|| {
            let mut r = r;
            r.status = crate::runs::RunState::Interrupted;
            r.cancel = Some(action);
            r
        }))
    }

    pub(crate) async fn run_delete(
        &self,
        run_id: &str,
        force: bool,
    ) -> Result<bool, crate::runs::RunError> {
        use crate::runs::RunError;
        let mut tx = self.begin_write().await.map_err(rqe)?;
        let Some(r) = Self::run_fetch(&mut tx, run_id).await? else {
            return Ok(false);
        };
        if !force && r.status.is_active() {
            return Err(RunError::BadTransition {
                run: r.run_id,
                status: r.status.as_str(),
                what: "cancel it before deleting it".into(),
            });
        }
        sqlx::query("DELETE FROM runs WHERE run_id = $1")
            .bind(run_id)
            .execute(&mut *tx)
            .await
            .map_err(rqe)?;
        tx.commit().await.map_err(rqe)?;
        Ok(true)
    }

    pub(crate) async fn run_delete_thread(
        &self,
        thread_id: &str,
    ) -> Result<u64, crate::runs::RunError> {
        let done = sqlx::query("DELETE FROM runs WHERE thread_id = $1")
            .bind(thread_id)
            .execute(&self.pool)
            .await
            .map_err(rqe)?;
        Ok(done.rows_affected())
    }

    pub(crate) async fn run_active(
        &self,
        thread_id: &str,
    ) -> Result<Vec<crate::runs::RunRecord>, crate::runs::RunError> {
        let mut tx = self.pool.begin().await.map_err(rqe)?;
        let out = Self::run_active_in(&mut tx, thread_id).await;
        tx.commit().await.map_err(rqe)?;
        out
    }
}
