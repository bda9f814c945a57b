//! Committing a run's steps to its thread (issue #9).
//!
//! The loop commits after every model response and after every tool result, before it goes
//! on: a step holds only what was added (see [`crate::checkpoint`]). What that means for a run
//! that is cut off and resumed:
//! - a model response that was not committed is asked for again;
//! - a tool call whose result was committed never runs again;
//! - a tool call that was started but whose result was not committed runs again (tools with
//!   side effects outside the thread should be idempotent, or guarded by approvals);
//! - the session state is committed as a patch with the step that follows its change.

use serde_json::Map;

use crate::checkpoint::{
    CheckpointError, LoopCounters, StatePatch, StepDelta, StepKind, ThreadCursor, Transcript,
};
use crate::session::SessionState;

/// What `execute_run` hands the loop of a run on a thread (a crate-private extension).
pub(crate) struct DurableStart {
    pub(crate) cursor: ThreadCursor,
    pub(crate) transcript: Transcript,
    pub(crate) resume: bool,
    /// Decisions for a paused run's interrupts.
    pub(crate) decisions: crate::interrupt::Decisions,
    /// Whether `decisions` were given to this run (unknown ids are errors) or inherited.
    pub(crate) strict: bool,
}

struct Committed {
    head: u64,
    state: Map<String, serde_json::Value>,
    state_version: u64,
}

/// Appends a run's steps in order, each after the last one this run committed.
pub(crate) struct Committer {
    cursor: ThreadCursor,
    state: Option<SessionState>,
    last: tokio::sync::Mutex<Committed>,
}

impl Committer {
    pub(crate) fn new(
        cursor: ThreadCursor,
        transcript: &Transcript,
        state: Option<SessionState>,
    ) -> Self {
        Committer {
            cursor,
            last: tokio::sync::Mutex::new(Committed {
                head: transcript.head,
                state: transcript.state.clone(),
                state_version: u64::MAX,
            }),
            state,
        }
    }

    pub(crate) fn cursor(&self) -> &ThreadCursor {
        &self.cursor
    }

    /// Commits `delta` (with the state's change since the last commit) and returns its seq.
    pub(crate) async fn commit(&self, mut delta: StepDelta) -> Result<u64, CheckpointError> {
        let mut last = self.last.lock().await;
        let keeps_counters = matches!(
            delta.kind,
            StepKind::Tools | StepKind::Decisions | StepKind::Resumed
        );
        if keeps_counters {
            // The counters do not change until the batch is done: nothing to store.
            delta.counters = LoopCounters::default();
        }
        let mut new_state = None;
        if let Some(state) = &self.state {
            let version = state.version();
            if version != last.state_version {
                let now = state.snapshot();
                let patch = StatePatch::diff(&last.state, &now);
                if !patch.is_empty() {
                    delta.state = Some(patch);
                }
                new_state = Some((now, version));
            }
        }
        let seq = self
            .cursor
            .checkpointer
            .append(
                &self.cursor.thread_id,
                &self.cursor.namespace,
                last.head,
                &delta,
            )
            .await?;
        last.head = seq;
        if let Some((s, v)) = new_state {
            last.state = s;
            last.state_version = v;
        }
        Ok(seq)
    }
}
