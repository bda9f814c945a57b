//! Durable threads: a [`Checkpointer`] keeps each thread as an append-only log of committed
//! steps (SPEC R10.3, issue #9).
//!
//! A **thread** is a conversation that outlives the process. Its log holds **steps**; a step
//! records only what the run added since the previous step ([`StepDelta`]: new messages, new
//! tool results, a patch of the session state, the run's status and counters), never the
//! history again, so storing a step costs O(new content). Reading a thread folds its steps
//! into a [`Transcript`].
//!
//! Steps are numbered per thread (`seq` 1, 2, 3, … across all namespaces); each step names its
//! **parent**, the previous step of its namespace (`0` for the first). Appending is optimistic:
//! [`Checkpointer::append`] takes the parent the writer last saw and fails with
//! [`CheckpointError::Conflict`] when another writer got there first, so two processes that
//! resume one thread cannot both continue it, and nothing holds a lock while a model thinks.
//!
//! **Namespaces** keep subagent runs apart inside their parent's thread: the top agent writes
//! namespace `""`, a subagent started by call `c` of parent step `s` writes `"<parent>/<s>.<c>"`
//! (see [`ThreadCursor::child`]). Each namespace is its own chain of parents.
//!
//! A **fork** is a new thread that shares a prefix of another: it records `(source, seq)` and
//! reads the source's steps up to `seq` before its own, so forking copies nothing.
//!
//! The format stored by the SQLite and PostgreSQL implementations (crate `cairn-store`) is
//! documented in `docs/persistence.md`.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::client::BoxFuture;
use crate::message::{FunctionCall, FunctionResult, Message, Usage};

/// Where a run stands, as committed with each step.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum RunStatus {
    /// The run is under way (or was cut off: a thread whose last step says `running` and that
    /// no process is running can be resumed).
    #[default]
    Running,
    /// The run finished with an answer.
    Completed,
    /// The run paused and waits for decisions on pending tool calls.
    Interrupted,
    /// The run stopped with an error.
    Failed,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl RunStatus {
    /// Whether this is [`RunStatus::Running`].
    pub fn is_running(&self) -> bool {
        *self == RunStatus::Running
    }

    /// The status as stored (`running`, `completed`, `interrupted`, `failed`).
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Completed => "completed",
            RunStatus::Interrupted => "interrupted",
            RunStatus::Failed => "failed",
        }
    }

    /// Parses a stored status; unknown words (a newer writer) read as `running`.
    pub fn parse(s: &str) -> Self {
        match s {
            "completed" => RunStatus::Completed,
            "interrupted" => RunStatus::Interrupted,
            "failed" => RunStatus::Failed,
            _ => RunStatus::Running,
        }
    }
}

/// What kind of step a delta is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum StepKind {
    /// A run started: its input messages.
    #[default]
    Input,
    /// A model response (messages, possibly with tool calls).
    Model,
    /// Tool results for calls of the last model response.
    Tools,
    /// The run ended (its status says how).
    End,
    /// Decisions on guarded calls of the last model response (in `extra.decisions`).
    Decisions,
    /// A process took over a cut-off or failed run (committed before it runs anything, so of
    /// two processes resuming one thread the second gets a conflict; a paused run's
    /// `decisions` step plays this part).
    Resumed,
}

/// The run loop's counters, committed with every step so a resumed run keeps its limits.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct LoopCounters {
    /// Model calls that returned tool calls, so far in this run.
    #[serde(default)]
    pub iteration: usize,
    /// Consecutive tool batches that contained an error.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub consecutive_errors: usize,
    /// Tool calls executed in this run.
    #[serde(default)]
    pub function_calls: usize,
    /// Model calls made in this run.
    #[serde(default)]
    pub model_calls: usize,
    /// Whether the next model call must be the final one (a limit was reached).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub force_final: bool,
    /// Token usage accumulated over this run.
    #[serde(default)]
    pub usage: Usage,
}

impl LoopCounters {
    /// Whether nothing was counted (a run's start, or a step that stores no counters).
    pub fn is_unset(&self) -> bool {
        *self == LoopCounters::default()
    }
}

/// A change to the session state map: keys set to new values, keys removed, and nested
/// changes inside object values (so changing one file of the state backend's `files` object
/// stores that file, not all of them).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StatePatch {
    /// Keys whose value is replaced.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub set: Map<String, Value>,
    /// Keys removed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remove: Vec<String>,
    /// Object-valued keys changed inside.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub nested: BTreeMap<String, StatePatch>,
}

impl StatePatch {
    /// The patch that turns `old` into `new`; empty when they are equal.
    pub fn diff(old: &Map<String, Value>, new: &Map<String, Value>) -> Self {
        let mut patch = StatePatch::default();
        for (k, v) in new {
            match old.get(k) {
                Some(o) if o == v => {}
                Some(Value::Object(o)) => match v {
                    Value::Object(n) => {
                        let inner = StatePatch::diff(o, n);
                        // A nested patch pays off only when it is smaller than the value.
                        if inner.set.len() + inner.nested.len() < n.len() {
                            patch.nested.insert(k.clone(), inner);
                        } else {
                            patch.set.insert(k.clone(), v.clone());
                        }
                    }
                    _ => {
                        patch.set.insert(k.clone(), v.clone());
                    }
                },
                _ => {
                    patch.set.insert(k.clone(), v.clone());
                }
            }
        }
        patch.remove = old
            .keys()
            .filter(|k| !new.contains_key(*k))
            .cloned()
            .collect();
        patch
    }

    /// Whether the patch changes nothing.
    pub fn is_empty(&self) -> bool {
        self.set.is_empty() && self.remove.is_empty() && self.nested.is_empty()
    }

    /// Applies the patch to `state`.
    pub fn apply(&self, state: &mut Map<String, Value>) {
        for k in &self.remove {
            state.remove(k);
        }
        for (k, v) in &self.set {
            state.insert(k.clone(), v.clone());
        }
        for (k, p) in &self.nested {
            let entry = state
                .entry(k.clone())
                .or_insert_with(|| Value::Object(Map::new()));
            if !entry.is_object() {
                *entry = Value::Object(Map::new());
            }
            if let Value::Object(m) = entry {
                p.apply(m);
            }
        }
    }
}

/// What one step adds to its thread.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct StepDelta {
    /// The kind of step.
    pub kind: StepKind,
    /// Messages appended to the conversation (the run's input, or a model response).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub messages: Vec<Message>,
    /// Results of tool calls of the last model response. They enter the conversation, in the
    /// order of the calls, once every call of that response has one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub results: Vec<FunctionResult>,
    /// The change to the session state since the previous step, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<StatePatch>,
    /// The run's status after this step (`running` when absent).
    #[serde(default, skip_serializing_if = "RunStatus::is_running")]
    pub status: RunStatus,
    /// The run loop's counters after this step. `tools` and `decisions` steps do not change
    /// them and store none (they are read as unchanged).
    #[serde(default, skip_serializing_if = "LoopCounters::is_unset")]
    pub counters: LoopCounters,
    /// Free-form data for the run's owner (an interrupt's pending decisions, an error text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extra: Option<Value>,
}

impl StepDelta {
    /// An empty delta of `kind`.
    pub fn new(kind: StepKind) -> Self {
        StepDelta {
            kind,
            ..Default::default()
        }
    }
}

/// A committed step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Step {
    /// The thread whose log holds the step (for an inherited step of a fork, the source).
    pub thread_id: String,
    /// The namespace (`""` for the top agent).
    pub namespace: String,
    /// The step's number in its thread, from 1.
    pub seq: u64,
    /// The previous step of the namespace (`0` for none).
    pub parent: u64,
    /// When it was committed, milliseconds since the Unix epoch.
    pub created_at_ms: u64,
    /// What it added.
    pub delta: StepDelta,
}

/// A thread's summary row.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ThreadInfo {
    /// The thread id.
    pub id: String,
    /// Creation time, milliseconds since the Unix epoch.
    pub created_at_ms: u64,
    /// Time of the last committed step.
    pub updated_at_ms: u64,
    /// Caller metadata (the CLI keeps `title` and `cwd` here).
    #[serde(default)]
    pub metadata: Map<String, Value>,
    /// Status of the top-level run after the last step of namespace `""`.
    pub status: RunStatus,
    /// The thread and step this thread was forked from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<(String, u64)>,
}

/// Which threads to list.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct ThreadQuery {
    /// At most this many (`None`: all).
    pub limit: Option<usize>,
    /// Skip this many first.
    pub offset: usize,
    /// Only threads whose metadata has these key/value pairs.
    pub metadata: Map<String, Value>,
}

/// A failed checkpointer operation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CheckpointError {
    /// No thread with this id.
    #[error("thread {0} not found")]
    NotFound(String),
    /// A thread with this id exists already.
    #[error("thread {0} exists already")]
    Exists(String),
    /// Another writer committed a step after the parent this writer saw.
    #[error(
        "thread {thread} is being run elsewhere: namespace {namespace:?} moved past step {parent} (another process or task committed first)"
    )]
    Conflict {
        /// The thread.
        thread: String,
        /// The namespace.
        namespace: String,
        /// The parent the writer expected to extend.
        parent: u64,
    },
    /// The database was written by a newer cairn whose format this one does not know.
    #[error(
        "the database was written by a newer cairn (format version {found}; this cairn reads up to {supported}); upgrade cairn or use another database"
    )]
    NewerFormat {
        /// The version found in the database.
        found: i64,
        /// The newest version this build knows.
        supported: i64,
    },
    /// Stored data could not be read back.
    #[error("corrupt checkpoint data: {0}")]
    Corrupt(String),
    /// The storage engine failed (I/O, disk full, read-only, locked, connection lost).
    #[error("checkpoint storage failed: {0}")]
    Backend(String),
    /// The request was malformed.
    #[error("invalid checkpoint request: {0}")]
    Invalid(String),
}

/// Durable storage for threads and their step logs.
///
/// Implementations: [`InMemoryCheckpointer`] here; SQLite and PostgreSQL in `cairn-store`. All
/// of them pass the same contract suite.
pub trait Checkpointer: Send + Sync + 'static {
    /// Creates a thread (with a random id when `id` is `None`).
    fn create_thread<'a>(
        &'a self,
        id: Option<&'a str>,
        metadata: Map<String, Value>,
    ) -> BoxFuture<'a, Result<ThreadInfo, CheckpointError>>;

    /// The thread's summary, `None` when it does not exist.
    fn thread<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Option<ThreadInfo>, CheckpointError>>;

    /// Threads, most recently updated first.
    fn list_threads<'a>(
        &'a self,
        query: ThreadQuery,
    ) -> BoxFuture<'a, Result<Vec<ThreadInfo>, CheckpointError>>;

    /// Merges `metadata` into the thread's metadata (a `null` value removes a key).
    fn update_metadata<'a>(
        &'a self,
        id: &'a str,
        metadata: Map<String, Value>,
    ) -> BoxFuture<'a, Result<(), CheckpointError>>;

    /// Deletes the thread and its steps; `false` when there was none. Forks of it keep working
    /// only if the implementation keeps the shared prefix (the SQL stores refuse to delete a
    /// thread that has forks).
    fn delete_thread<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<bool, CheckpointError>>;

    /// Commits a step to `namespace` of the thread, after `parent` (`0`: the namespace's first
    /// step). Returns the new step's `seq`. Fails with [`CheckpointError::Conflict`] when the
    /// namespace's last step is not `parent`.
    fn append<'a>(
        &'a self,
        thread: &'a str,
        namespace: &'a str,
        parent: u64,
        delta: &'a StepDelta,
    ) -> BoxFuture<'a, Result<u64, CheckpointError>>;

    /// The steps of `namespace`, oldest first, including a fork's inherited prefix; only those
    /// with `seq <= upto` when given.
    fn steps<'a>(
        &'a self,
        thread: &'a str,
        namespace: &'a str,
        upto: Option<u64>,
    ) -> BoxFuture<'a, Result<Vec<Step>, CheckpointError>>;

    /// A new thread (id `new_id` or random) sharing `thread`'s steps up to `at` in every
    /// namespace.
    fn fork<'a>(
        &'a self,
        thread: &'a str,
        at: u64,
        new_id: Option<&'a str>,
    ) -> BoxFuture<'a, Result<ThreadInfo, CheckpointError>>;

    /// Removes the thread's own steps after `after` in every namespace (a rollback: the
    /// thread reads as it did when `after` was its head, and the next step of namespace `""`
    /// extends `after`). Returns how many steps were removed. Refused
    /// ([`CheckpointError::Invalid`]) when a fork of the thread was made after `after`, since
    /// the fork shares those steps.
    fn truncate<'a>(
        &'a self,
        thread: &'a str,
        after: u64,
    ) -> BoxFuture<'a, Result<usize, CheckpointError>>;
}

/// A shared checkpointer handle.
pub type SharedCheckpointer = Arc<dyn Checkpointer>;

/// A thread's conversation and state, folded from its steps.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct Transcript {
    /// The conversation: messages and the tool results of completed tool batches.
    pub messages: Vec<Message>,
    /// Tool calls of the last model response that have no committed result yet.
    pub pending: Vec<FunctionCall>,
    /// Results committed for calls of the last model response while some are still pending.
    pub partial_results: Vec<FunctionResult>,
    /// The session state.
    pub state: Map<String, Value>,
    /// Status after the last step.
    pub status: RunStatus,
    /// Counters after the last step.
    pub counters: LoopCounters,
    /// `seq` of the last step (`0`: none); the parent of the next step.
    pub head: u64,
    /// Index in `messages` just after the last run's input: what the run produced starts here.
    pub produced_from: usize,
    /// The last tool batch, when its results all arrived after the last model response:
    /// `(calls, whether any result is an error)`.
    pub completed_batch: Option<(usize, bool)>,
    /// `extra` of the last step.
    pub extra: Option<Value>,
    /// `seq` of the last model response (whose calls `pending` lists).
    pub last_model_step: u64,
    /// Decisions committed for calls of the last model response (and of its sub-runs), by
    /// interrupt id.
    pub decisions: crate::interrupt::Decisions,
    /// The interrupts the run paused on, when its status is `interrupted`.
    pub interrupts: Vec<crate::interrupt::Interrupt>,
    /// Number of steps folded.
    pub steps: usize,
}

impl Transcript {
    /// Folds steps (oldest first) into a transcript.
    pub fn from_steps(steps: &[Step]) -> Self {
        let mut t = Transcript::default();
        for s in steps {
            t.apply(s.seq, &s.delta);
        }
        t
    }

    /// Applies one committed step.
    pub fn apply(&mut self, seq: u64, delta: &StepDelta) {
        self.steps += 1;
        self.head = seq;
        if !delta.results.is_empty() {
            self.partial_results.extend(delta.results.iter().cloned());
            self.flush_if_complete();
        }
        if delta.kind == StepKind::Model {
            self.completed_batch = None;
            self.last_model_step = seq;
            self.decisions.clear();
        }
        if delta.kind == StepKind::Decisions
            && let Some(d) = delta.extra.as_ref().and_then(|e| e.get("decisions"))
            && let Ok(d) = serde_json::from_value::<crate::interrupt::Decisions>(d.clone())
        {
            self.decisions.extend(d);
        }
        self.interrupts = if delta.status == RunStatus::Interrupted {
            delta
                .extra
                .as_ref()
                .and_then(|e| e.get("interrupts"))
                .and_then(|i| serde_json::from_value(i.clone()).ok())
                .unwrap_or_default()
        } else {
            Vec::new()
        };
        if !delta.messages.is_empty() {
            self.messages.extend(delta.messages.iter().cloned());
            if delta.kind == StepKind::Input {
                self.produced_from = self.messages.len();
            }
            if delta.kind == StepKind::Model {
                self.pending = delta
                    .messages
                    .iter()
                    .flat_map(Message::function_calls)
                    .cloned()
                    .collect();
                self.partial_results.clear();
            }
        } else if delta.kind == StepKind::Input {
            self.produced_from = self.messages.len();
        }
        if delta.kind == StepKind::End {
            // A run that ended drops calls that never got results (an interrupted run keeps
            // them: they wait for decisions).
            if delta.status != RunStatus::Interrupted {
                self.pending.clear();
                self.partial_results.clear();
            }
        }
        if let Some(p) = &delta.state {
            p.apply(&mut self.state);
        }
        self.status = delta.status;
        if !matches!(
            delta.kind,
            StepKind::Tools | StepKind::Decisions | StepKind::Resumed
        ) {
            self.counters = delta.counters.clone();
        }
        self.extra = delta.extra.clone();
    }

    /// Moves the results of the last response into the conversation, in call order, once
    /// every call has one.
    fn flush_if_complete(&mut self) {
        let mut by_id: HashMap<&str, &FunctionResult> = self
            .partial_results
            .iter()
            .map(|r| (r.call_id.as_str(), r))
            .collect();
        if !self
            .pending
            .iter()
            .all(|c| by_id.contains_key(c.call_id.as_str()))
        {
            return;
        }
        let ordered: Vec<Message> = self
            .pending
            .iter()
            .filter_map(|c| by_id.remove(c.call_id.as_str()))
            .map(|r| Message::tool_result(r.clone()))
            .collect();
        let any_error = self.partial_results.iter().any(|r| r.is_error);
        self.completed_batch = Some((self.pending.len(), any_error));
        self.messages.extend(ordered);
        self.pending.clear();
        self.partial_results.clear();
    }

    /// The last run's outcome as its [`AgentResponse`](crate::AgentResponse) reported it: what
    /// the run produced after its input, its model calls and usage. A finished sub-run re-run
    /// after a cut-off answers with this instead of running again.
    pub fn response(&self) -> crate::AgentResponse {
        crate::AgentResponse {
            messages: self.messages[self.produced_from.min(self.messages.len())..].to_vec(),
            usage: self.counters.usage,
            model_calls: self.counters.model_calls,
            ..Default::default()
        }
    }

    /// Calls of the last response still waiting for a result.
    pub fn unanswered(&self) -> Vec<FunctionCall> {
        self.pending
            .iter()
            .filter(|c| !self.partial_results.iter().any(|r| r.call_id == c.call_id))
            .cloned()
            .collect()
    }
}

/// A run's position in a thread: where its next step goes. The run loop keeps one per run;
/// tools find it in their context's extensions (a subagent tool derives its child from it).
#[derive(Clone)]
pub struct ThreadCursor {
    /// The checkpointer.
    pub checkpointer: SharedCheckpointer,
    /// The thread.
    pub thread_id: String,
    /// The namespace (`""` for the top agent).
    pub namespace: String,
    /// The step whose tool calls are running (set by the loop for the tools of a batch).
    pub step: u64,
}

impl ThreadCursor {
    /// A cursor on namespace `""` of `thread_id`.
    pub fn new(checkpointer: SharedCheckpointer, thread_id: impl Into<String>) -> Self {
        ThreadCursor {
            checkpointer,
            thread_id: thread_id.into(),
            namespace: String::new(),
            step: 0,
        }
    }

    /// The namespace of a sub-run started by tool call `call_id` of the current step: stable
    /// across resumes, so re-running the call finds the sub-run's own steps.
    pub fn child(&self, call_id: &str) -> ThreadCursor {
        ThreadCursor {
            checkpointer: Arc::clone(&self.checkpointer),
            thread_id: self.thread_id.clone(),
            namespace: format!("{}/{}.{}", self.namespace, self.step, call_id),
            step: 0,
        }
    }

    /// Folds the namespace's steps.
    pub async fn load(&self) -> Result<Transcript, CheckpointError> {
        let steps = self
            .checkpointer
            .steps(&self.thread_id, &self.namespace, None)
            .await?;
        Ok(Transcript::from_steps(&steps))
    }
}

impl std::fmt::Debug for ThreadCursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadCursor")
            .field("thread_id", &self.thread_id)
            .field("namespace", &self.namespace)
            .field("step", &self.step)
            .finish()
    }
}

pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

#[derive(Default)]
struct MemThread {
    info: ThreadInfo,
    next_seq: u64,
    steps: Vec<Step>,
}

/// Threads in memory, for tests and single-process use. Clones share the data.
#[derive(Clone, Default)]
pub struct InMemoryCheckpointer {
    threads: Arc<Mutex<BTreeMap<String, MemThread>>>,
}

impl InMemoryCheckpointer {
    /// An empty checkpointer.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, MemThread>> {
        self.threads.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl std::fmt::Debug for InMemoryCheckpointer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InMemoryCheckpointer")
            .field("threads", &self.lock().len())
            .finish()
    }
}

/// Whether a thread's metadata has every pair of `filter`.
pub fn metadata_matches(metadata: &Map<String, Value>, filter: &Map<String, Value>) -> bool {
    filter.iter().all(|(k, v)| metadata.get(k) == Some(v))
}

/// Merges `patch` into `metadata`; `null` removes a key.
pub fn merge_metadata(metadata: &mut Map<String, Value>, patch: Map<String, Value>) {
    for (k, v) in patch {
        if v.is_null() {
            metadata.remove(&k);
        } else {
            metadata.insert(k, v);
        }
    }
}

fn mem_steps(
    map: &BTreeMap<String, MemThread>,
    thread: &str,
    namespace: &str,
    upto: u64,
    out: &mut Vec<Step>,
) -> Result<(), CheckpointError> {
    let t = map
        .get(thread)
        .ok_or_else(|| CheckpointError::NotFound(thread.to_owned()))?;
    if let Some((src, at)) = &t.info.forked_from {
        mem_steps(map, src, namespace, upto.min(*at), out)?;
    }
    out.extend(
        t.steps
            .iter()
            .filter(|s| s.namespace == namespace && s.seq <= upto)
            .cloned(),
    );
    Ok(())
}

fn ready<'a, T: Send + 'a>(v: T) -> BoxFuture<'a, T> {
    Box::pin(std::future::ready(v))
}

impl Checkpointer for InMemoryCheckpointer {
    fn create_thread<'a>(
        &'a self,
        id: Option<&'a str>,
        metadata: Map<String, Value>,
    ) -> BoxFuture<'a, Result<ThreadInfo, CheckpointError>> {
        let id = id.map_or_else(|| uuid::Uuid::new_v4().to_string(), str::to_owned);
        let mut map = self.lock();
        if map.contains_key(&id) {
            return ready(Err(CheckpointError::Exists(id)));
        }
        let now = now_ms();
        let info = ThreadInfo {
            id: id.clone(),
            created_at_ms: now,
            updated_at_ms: now,
            metadata,
            status: RunStatus::Completed,
            forked_from: None,
        };
        map.insert(
            id,
            MemThread {
                info: info.clone(),
                next_seq: 1,
                steps: Vec::new(),
            },
        );
        ready(Ok(info))
    }

    fn thread<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Option<ThreadInfo>, CheckpointError>> {
        ready(Ok(self.lock().get(id).map(|t| t.info.clone())))
    }

    fn list_threads<'a>(
        &'a self,
        query: ThreadQuery,
    ) -> BoxFuture<'a, Result<Vec<ThreadInfo>, CheckpointError>> {
        let mut all: Vec<ThreadInfo> = self
            .lock()
            .values()
            .filter(|t| metadata_matches(&t.info.metadata, &query.metadata))
            .map(|t| t.info.clone())
            .collect();
        all.sort_by(|a, b| {
            b.updated_at_ms
                .cmp(&a.updated_at_ms)
                .then_with(|| b.id.cmp(&a.id))
        });
        ready(Ok(all
            .into_iter()
            .skip(query.offset)
            .take(query.limit.unwrap_or(usize::MAX))
            .collect()))
    }

    fn update_metadata<'a>(
        &'a self,
        id: &'a str,
        metadata: Map<String, Value>,
    ) -> BoxFuture<'a, Result<(), CheckpointError>> {
        let mut map = self.lock();
        let r = match map.get_mut(id) {
            Some(t) => {
                merge_metadata(&mut t.info.metadata, metadata);
                Ok(())
            }
            None => Err(CheckpointError::NotFound(id.to_owned())),
        };
        ready(r)
    }

    fn delete_thread<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<bool, CheckpointError>> {
        let mut map = self.lock();
        if map
            .values()
            .any(|t| t.info.forked_from.as_ref().is_some_and(|(s, _)| s == id))
        {
            return ready(Err(CheckpointError::Invalid(format!(
                "thread {id} has forks; delete them first"
            ))));
        }
        ready(Ok(map.remove(id).is_some()))
    }

    fn append<'a>(
        &'a self,
        thread: &'a str,
        namespace: &'a str,
        parent: u64,
        delta: &'a StepDelta,
    ) -> BoxFuture<'a, Result<u64, CheckpointError>> {
        let mut map = self.lock();
        let mut inherited = Vec::new();
        if let Err(e) = mem_steps(&map, thread, namespace, u64::MAX, &mut inherited) {
            return ready(Err(e));
        }
        let head = inherited.last().map_or(0, |s| s.seq);
        if head != parent {
            return ready(Err(CheckpointError::Conflict {
                thread: thread.to_owned(),
                namespace: namespace.to_owned(),
                parent,
            }));
        }
        let Some(t) = map.get_mut(thread) else {
            return ready(Err(CheckpointError::NotFound(thread.to_owned())));
        };
        let seq = t.next_seq;
        t.next_seq += 1;
        let now = now_ms();
        t.steps.push(Step {
            thread_id: thread.to_owned(),
            namespace: namespace.to_owned(),
            seq,
            parent,
            created_at_ms: now,
            delta: delta.clone(),
        });
        t.info.updated_at_ms = now;
        if namespace.is_empty() {
            t.info.status = delta.status;
        }
        ready(Ok(seq))
    }

    fn steps<'a>(
        &'a self,
        thread: &'a str,
        namespace: &'a str,
        upto: Option<u64>,
    ) -> BoxFuture<'a, Result<Vec<Step>, CheckpointError>> {
        let map = self.lock();
        let mut out = Vec::new();
        ready(mem_steps(&map, thread, namespace, upto.unwrap_or(u64::MAX), &mut out).map(|()| out))
    }

    fn truncate<'a>(
        &'a self,
        thread: &'a str,
        after: u64,
    ) -> BoxFuture<'a, Result<usize, CheckpointError>> {
        let mut map = self.lock();
        if map.values().any(|t| {
            t.info
                .forked_from
                .as_ref()
                .is_some_and(|(s, at)| s == thread && *at > after)
        }) {
            return ready(Err(CheckpointError::Invalid(format!(
                "thread {thread} has a fork made after step {after}; delete it first"
            ))));
        }
        let Some(t) = map.get_mut(thread) else {
            return ready(Err(CheckpointError::NotFound(thread.to_owned())));
        };
        let before = t.steps.len();
        t.steps.retain(|s| s.seq <= after);
        let removed = before - t.steps.len();
        t.info.status = t
            .steps
            .iter()
            .rev()
            .find(|s| s.namespace.is_empty())
            .map_or(RunStatus::Completed, |s| s.delta.status);
        t.info.updated_at_ms = now_ms();
        ready(Ok(removed))
    }

    fn fork<'a>(
        &'a self,
        thread: &'a str,
        at: u64,
        new_id: Option<&'a str>,
    ) -> BoxFuture<'a, Result<ThreadInfo, CheckpointError>> {
        let mut map = self.lock();
        let Some(src) = map.get(thread) else {
            return ready(Err(CheckpointError::NotFound(thread.to_owned())));
        };
        if at == 0 || at >= src.next_seq {
            return ready(Err(CheckpointError::Invalid(format!(
                "thread {thread} has no step {at}"
            ))));
        }
        let mut root = Vec::new();
        if let Err(e) = mem_steps(&map, thread, "", at, &mut root) {
            return ready(Err(e));
        }
        let status = root.last().map_or(RunStatus::Completed, |s| s.delta.status);
        let metadata = src.info.metadata.clone();
        let id = new_id.map_or_else(|| uuid::Uuid::new_v4().to_string(), str::to_owned);
        if map.contains_key(&id) {
            return ready(Err(CheckpointError::Exists(id)));
        }
        let now = now_ms();
        let info = ThreadInfo {
            id: id.clone(),
            created_at_ms: now,
            updated_at_ms: now,
            metadata,
            status,
            forked_from: Some((thread.to_owned(), at)),
        };
        map.insert(
            id,
            MemThread {
                info: info.clone(),
                next_seq: at + 1,
                steps: Vec::new(),
            },
        );
        ready(Ok(info))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => Map::new(),
        }
    }

    #[test]
    fn state_patch_round_trips_and_stays_small() {
        let old = obj(json!({"a": 1, "files": {"/x": "x", "/y": "y", "/z": "z"}, "gone": true}));
        let new = obj(json!({"a": 1, "files": {"/x": "x", "/y": "Y", "/z": "z"}, "b": [1]}));
        let p = StatePatch::diff(&old, &new);
        assert!(p.set.contains_key("b") && !p.set.contains_key("a"));
        assert_eq!(p.remove, vec!["gone".to_owned()]);
        assert_eq!(p.nested["files"].set.len(), 1, "only the changed file");
        let mut s = old.clone();
        p.apply(&mut s);
        assert_eq!(s, new);
        assert!(StatePatch::diff(&new, &new).is_empty());
    }

    #[test]
    fn results_enter_the_conversation_in_call_order_when_complete() {
        let call = |id: &str| FunctionCall::new(id, "t", &json!({}));
        let mut turn = StepDelta::new(StepKind::Model);
        turn.messages = vec![Message::new(
            crate::Role::Assistant,
            vec![
                crate::Content::FunctionCall(call("a")),
                crate::Content::FunctionCall(call("b")),
            ],
        )];
        let res = |id: &str| FunctionResult {
            call_id: id.into(),
            output: vec![crate::Content::text(id)],
            is_error: false,
        };
        let mut t = Transcript::default();
        t.apply(1, &turn);
        let mut d = StepDelta::new(StepKind::Tools);
        d.results = vec![res("b")];
        t.apply(2, &d);
        assert_eq!(t.messages.len(), 1);
        assert_eq!(t.unanswered().len(), 1);
        d.results = vec![res("a")];
        t.apply(3, &d);
        assert_eq!(t.messages.len(), 3);
        assert!(t.pending.is_empty());
        let ids: Vec<_> = t.messages[1..]
            .iter()
            .flat_map(|m| m.contents.iter())
            .filter_map(|c| match c {
                crate::Content::FunctionResult(r) => Some(r.call_id.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(ids, ["a", "b"]);
    }
}
