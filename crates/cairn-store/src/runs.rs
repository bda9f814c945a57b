//! The run queue of `cairn serve`: runs waiting, running and done, in the same database as the
//! threads, so any number of server processes on one PostgreSQL database share them.
//!
//! # How runs move
//! A run is created `pending` ([`RunQueue::create`]). A worker *claims* it
//! ([`RunQueue::claim`], [`RunQueue::claim_run`]): the row becomes `running`, names the worker
//! and carries a lease (`lease_until_ms`). The worker renews the lease while it runs
//! ([`RunQueue::renew`]) and records the end ([`RunQueue::finish`]): `success`, `error`,
//! `interrupted` (paused for a decision, or cancelled) or `timeout`. A run whose lease expired
//! (its worker died) is claimable again; the new worker continues the thread from its last
//! committed step (the durable threads of `cairn-core`).
//!
//! # One active run per thread
//! A run is only claimed when no other run of its thread is `running` and no older run of the
//! thread is still `pending`, so a thread's runs execute one at a time, in order. What happens
//! when a run is created while its thread has an active run is the request's
//! [`MultitaskStrategy`]; the check and the insert are one transaction.
//!
//! On PostgreSQL the claim takes the row with `FOR UPDATE SKIP LOCKED`, so concurrent workers
//! never wait on each other's candidates; on SQLite the write transaction (`BEGIN IMMEDIATE`)
//! serializes claims.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};

/// Where a run stands, with the Agent Protocol's names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RunState {
    /// Waiting for a worker.
    Pending,
    /// A worker runs it.
    Running,
    /// Finished with an answer.
    Success,
    /// Failed.
    Error,
    /// Paused for a decision (human in the loop) or cancelled.
    Interrupted,
    /// Stopped for taking too long.
    Timeout,
}

impl RunState {
    /// The state's name as stored and as the protocol spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Pending => "pending",
            RunState::Running => "running",
            RunState::Success => "success",
            RunState::Error => "error",
            RunState::Interrupted => "interrupted",
            RunState::Timeout => "timeout",
        }
    }

    /// Parses a stored name; `None` for an unknown one.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "pending" => RunState::Pending,
            "running" => RunState::Running,
            "success" => RunState::Success,
            "error" => RunState::Error,
            "interrupted" => RunState::Interrupted,
            "timeout" => RunState::Timeout,
            _ => return None,
        })
    }

    /// Whether the run is waiting or running.
    pub fn is_active(self) -> bool {
        matches!(self, RunState::Pending | RunState::Running)
    }
}

/// What to do when a run is created on a thread that has an active run (the Agent
/// Protocol's `multitask_strategy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum MultitaskStrategy {
    /// Refuse the new run ([`RunError::Busy`]).
    #[default]
    Reject,
    /// Stop the active runs, keeping what they committed, then run the new one.
    Interrupt,
    /// Stop the active runs, remove them and what they committed, then run the new one.
    Rollback,
    /// Run the new one after the active ones.
    Enqueue,
}

impl MultitaskStrategy {
    /// The strategy's protocol name.
    pub fn as_str(self) -> &'static str {
        match self {
            MultitaskStrategy::Reject => "reject",
            MultitaskStrategy::Interrupt => "interrupt",
            MultitaskStrategy::Rollback => "rollback",
            MultitaskStrategy::Enqueue => "enqueue",
        }
    }

    /// Parses a protocol name.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "reject" => MultitaskStrategy::Reject,
            "interrupt" => MultitaskStrategy::Interrupt,
            "rollback" => MultitaskStrategy::Rollback,
            "enqueue" => MultitaskStrategy::Enqueue,
            _ => return None,
        })
    }
}

/// How a cancelled run is stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CancelAction {
    /// Stop it; what it committed stays, and the run reads `interrupted`.
    Interrupt,
    /// Stop it and remove it and every step it committed.
    Rollback,
}

impl CancelAction {
    /// The action's protocol name.
    pub fn as_str(self) -> &'static str {
        match self {
            CancelAction::Interrupt => "interrupt",
            CancelAction::Rollback => "rollback",
        }
    }

    /// Parses a protocol name.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "interrupt" => CancelAction::Interrupt,
            "rollback" => CancelAction::Rollback,
            _ => return None,
        })
    }
}

/// A run as stored.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct RunRecord {
    /// The run id.
    pub run_id: String,
    /// The thread it runs on.
    pub thread_id: String,
    /// The assistant (agent) it runs.
    pub assistant_id: String,
    /// Where it stands.
    pub status: RunState,
    /// The request as given (input, command, config, stream modes …), for the worker.
    pub kwargs: Value,
    /// Caller metadata.
    pub metadata: Map<String, Value>,
    /// The strategy it was created with.
    pub multitask_strategy: MultitaskStrategy,
    /// Creation time, milliseconds since the Unix epoch.
    pub created_at_ms: u64,
    /// Last change.
    pub updated_at_ms: u64,
    /// The worker that holds (or last held) it.
    pub worker: Option<String>,
    /// Until when the worker's claim holds.
    pub lease_until_ms: Option<u64>,
    /// How many times it was claimed (more than 1: a worker took it over).
    pub attempts: u32,
    /// A cancellation asked for while it runs.
    pub cancel: Option<CancelAction>,
    /// Why it failed.
    pub error: Option<String>,
    /// The thread's head (namespace `""`) before the run's first step, once it started.
    pub start_head: Option<u64>,
}

/// A run to create.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct NewRun {
    /// The run id (random when `None`).
    pub run_id: Option<String>,
    /// The thread (must exist in the checkpointer; not checked here).
    pub thread_id: String,
    /// The assistant.
    pub assistant_id: String,
    /// The request, kept for the worker.
    pub kwargs: Value,
    /// Caller metadata.
    pub metadata: Map<String, Value>,
    /// What to do when the thread has an active run.
    pub strategy: MultitaskStrategy,
    /// Claim it at once for this worker, with this lease, when nothing else of its thread is
    /// active (a server that will run it itself, e.g. to stream it).
    pub claim_for: Option<(String, Duration)>,
}

impl NewRun {
    /// A run of `assistant_id` on `thread_id` with the request `kwargs`.
    pub fn new(
        thread_id: impl Into<String>,
        assistant_id: impl Into<String>,
        kwargs: Value,
    ) -> Self {
        NewRun {
            thread_id: thread_id.into(),
            assistant_id: assistant_id.into(),
            kwargs,
            ..NewRun::default()
        }
    }
}

/// What [`RunQueue::create`] did.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Created {
    /// The new run (`running` when it was claimed at once).
    pub run: RunRecord,
    /// Whether it was claimed for [`NewRun::claim_for`]'s worker.
    pub claimed: bool,
    /// Active runs of the thread the strategy stopped (pending ones are already
    /// `interrupted` or removed; running ones carry a cancel request their worker acts on).
    pub displaced: Vec<RunRecord>,
}

/// Which runs to list.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct RunFilter {
    /// Only runs of this thread.
    pub thread_id: Option<String>,
    /// Only runs in this state.
    pub status: Option<RunState>,
    /// Only runs whose metadata has these pairs.
    pub metadata: Map<String, Value>,
    /// At most this many (newest first).
    pub limit: usize,
    /// Skip this many first.
    pub offset: usize,
}

/// A failed run-queue operation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// The thread has an active run and the strategy is `reject`.
    #[error(
        "thread {thread} is busy with run {run}; create the run with multitask_strategy enqueue, interrupt or rollback, or wait for it"
    )]
    Busy {
        /// The thread.
        thread: String,
        /// Its active run.
        run: String,
    },
    /// No run with this id.
    #[error("run {0} not found")]
    NotFound(String),
    /// A run with this id exists already.
    #[error("run {0} exists already")]
    Exists(String),
    /// The change is not possible from the run's state (e.g. cancelling a finished run).
    #[error("run {run} is {status}: {what}")]
    BadTransition {
        /// The run.
        run: String,
        /// Its state.
        status: &'static str,
        /// What was asked.
        what: String,
    },
    /// The database has no run queue (the in-memory database).
    #[error("the run queue needs SQLite or PostgreSQL; the in-memory database has none")]
    Unsupported,
    /// Stored data could not be read back.
    #[error("corrupt run data: {0}")]
    Corrupt(String),
    /// The storage engine failed.
    #[error("run storage failed: {0}")]
    Backend(String),
}

#[derive(Clone)]
pub(crate) enum QueueInner {
    Sqlite(Arc<crate::sqlite::Backend>),
    Postgres(Arc<crate::postgres::Backend>),
}

/// The run queue on a [`Database`](crate::Database) (see the [module docs](self)). Clones share
/// the connection pool.
#[derive(Clone)]
pub struct RunQueue {
    pub(crate) inner: QueueInner,
}

impl std::fmt::Debug for RunQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunQueue").finish_non_exhaustive()
    }
}

macro_rules! dispatch {
    ($self:ident . $m:ident ( $($a:expr),* )) => {
        match &$self.inner {
            QueueInner::Sqlite(b) => b.$m($($a),*).await,
            QueueInner::Postgres(b) => b.$m($($a),*).await,
        }
    };
}

impl RunQueue {
    /// Creates a run, applying its strategy to the thread's active runs in the same
    /// transaction.
    pub async fn create(&self, new: NewRun) -> Result<Created, RunError> {
        dispatch!(self.run_create(new))
    }

    /// Claims the oldest claimable run for `worker` with a lease of `lease`: a pending run
    /// whose thread is free, or a running run whose lease expired.
    pub async fn claim(
        &self,
        worker: &str,
        lease: Duration,
    ) -> Result<Option<RunRecord>, RunError> {
        dispatch!(self.run_claim(None, worker, lease))
    }

    /// Claims run `run_id` for `worker` if it is claimable now.
    pub async fn claim_run(
        &self,
        run_id: &str,
        worker: &str,
        lease: Duration,
    ) -> Result<Option<RunRecord>, RunError> {
        dispatch!(self.run_claim(Some(run_id), worker, lease))
    }

    /// Extends the lease of every run `worker` holds; returns them (with any cancel request).
    /// A run the worker runs that is missing was taken over by another worker.
    pub async fn renew(&self, worker: &str, lease: Duration) -> Result<Vec<RunRecord>, RunError> {
        dispatch!(self.run_renew(worker, lease))
    }

    /// Records the thread head before the run's first step (once; later calls keep the first).
    pub async fn set_start_head(
        &self,
        run_id: &str,
        worker: &str,
        head: u64,
    ) -> Result<(), RunError> {
        dispatch!(self.run_set_start_head(run_id, worker, head))
    }

    /// Ends a run `worker` holds with `status` (and `error`); `false` when the worker no
    /// longer holds it (it was taken over or removed), in which case nothing changes.
    pub async fn finish(
        &self,
        run_id: &str,
        worker: &str,
        status: RunState,
        error: Option<&str>,
    ) -> Result<bool, RunError> {
        dispatch!(self.run_finish(run_id, worker, status, error))
    }

    /// A run by id.
    pub async fn get(&self, run_id: &str) -> Result<Option<RunRecord>, RunError> {
        dispatch!(self.run_get(run_id))
    }

    /// Runs, newest first.
    pub async fn list(&self, filter: RunFilter) -> Result<Vec<RunRecord>, RunError> {
        dispatch!(self.run_list(filter))
    }

    /// Cancels a run: a pending one ends at once (`interrupted`, or removed for
    /// [`CancelAction::Rollback`]); a running one gets a cancel request its worker acts on
    /// within a lease renewal. Cancelling a finished run is a [`RunError::BadTransition`].
    pub async fn cancel(&self, run_id: &str, action: CancelAction) -> Result<RunRecord, RunError> {
        dispatch!(self.run_cancel(run_id, action))
    }

    /// Deletes a finished run; an active one is a [`RunError::BadTransition`].
    pub async fn delete(&self, run_id: &str) -> Result<bool, RunError> {
        dispatch!(self.run_delete(run_id, false))
    }

    /// Deletes a run whatever its state (a rolled-back run's worker removes it).
    pub async fn remove(&self, run_id: &str) -> Result<bool, RunError> {
        dispatch!(self.run_delete(run_id, true))
    }

    /// Deletes every run of a thread; returns how many.
    pub async fn delete_thread(&self, thread_id: &str) -> Result<u64, RunError> {
        dispatch!(self.run_delete_thread(thread_id))
    }

    /// The pending and running runs of a thread, oldest first.
    pub async fn active(&self, thread_id: &str) -> Result<Vec<RunRecord>, RunError> {
        dispatch!(self.run_active(thread_id))
    }
}
