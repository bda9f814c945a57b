//! The worker: claims queued runs, runs them on their durable threads, renews its leases,
//! acts on cancel requests, and records how each run ended.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use cairn_core::{
    AgentEventKind, CheckpointError, Error as CoreError, RunStatus, StepDelta, StepKind,
    ThreadCursor,
};
use cairn_store::{CancelAction, RunRecord, RunState};
use futures::StreamExt;
use tokio::sync::{OwnedSemaphorePermit, broadcast, watch};

use crate::wire::{RunCreate, cancelled_result, decisions, input_messages};
use crate::{LocalRun, Shared, Signal};

pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

pub(crate) fn start(shared: Arc<Shared>) -> Vec<tokio::task::JoinHandle<()>> {
    let claims = tokio::spawn(claim_loop(Arc::clone(&shared)));
    let leases = tokio::spawn(renew_loop(shared));
    vec![claims, leases]
}

async fn claim_loop(shared: Arc<Shared>) {
    loop {
        let Ok(permit) = Arc::clone(&shared.slots).acquire_owned().await else {
            return;
        };
        match shared
            .runs
            .claim(&shared.cfg.worker_id, shared.cfg.lease)
            .await
        {
            Ok(Some(run)) => {
                spawn_run(&shared, run, permit);
                continue;
            }
            Ok(None) => {}
            Err(e) => tracing::warn!(error = %e, "cairn serve: claiming a run failed"),
        }
        drop(permit);
        tokio::select! {
            _ = shared.wake.notified() => {}
            _ = tokio::time::sleep(shared.cfg.poll) => {}
        }
    }
}

async fn renew_loop(shared: Arc<Shared>) {
    let every = (shared.cfg.lease / 3)
        .min(Duration::from_secs(1))
        .max(Duration::from_millis(20));
    loop {
        tokio::time::sleep(every).await;
        // The runs executing here before the renewal: one claimed after it is not in `held`
        // yet and must not be taken for lost.
        let local: Vec<(String, Arc<LocalRun>)> = shared
            .local()
            .iter()
            .map(|(k, v)| (k.clone(), Arc::clone(v)))
            .collect();
        let held = match shared
            .runs
            .renew(&shared.cfg.worker_id, shared.cfg.lease)
            .await
        {
            Ok(h) => h,
            Err(e) => {
                tracing::warn!(error = %e, "cairn serve: renewing leases failed");
                continue;
            }
        };
        for (id, run) in local {
            match held.iter().find(|r| r.run_id == id) {
                Some(r) => {
                    if let Some(action) = r.cancel {
                        let _ = run.cancel.send(Some(action));
                    }
                }
                // Taken over (this worker's lease had expired) or removed: stop here.
                None => {
                    let _ = run.cancel.send(Some(CancelAction::Interrupt));
                }
            }
        }
    }
}

/// Registers `run` as executing here and spawns it; returns its event channel.
pub(crate) fn spawn_run(
    shared: &Arc<Shared>,
    run: RunRecord,
    permit: OwnedSemaphorePermit,
) -> broadcast::Receiver<Signal> {
    let (events, rx) = broadcast::channel(4096);
    let (cancel, cancel_rx) = watch::channel(run.cancel);
    let local = Arc::new(LocalRun { events, cancel });
    shared
        .local()
        .insert(run.run_id.clone(), Arc::clone(&local));
    let shared = Arc::clone(shared);
    tokio::spawn(async move {
        let id = run.run_id.clone();
        execute(&shared, run, &local, cancel_rx).await;
        shared.local().remove(&id);
        let _ = local.events.send(Signal::Done);
        drop(permit);
        shared.wake.notify_one();
    });
    rx
}

/// How a run ended here.
enum Outcome {
    Finished(RunState, Option<String>),
    Cancelled(CancelAction),
    /// Another worker holds the run now: record nothing.
    Lost,
}

async fn execute(
    shared: &Arc<Shared>,
    run: RunRecord,
    local: &Arc<LocalRun>,
    mut cancel: watch::Receiver<Option<CancelAction>>,
) {
    let worker = shared.cfg.worker_id.clone();
    let outcome = match prepare_and_run(shared, &run, local, &mut cancel).await {
        Ok(o) => o,
        Err(message) => Outcome::Finished(RunState::Error, Some(message)),
    };
    let result = match outcome {
        Outcome::Finished(state, error) => {
            let error = error.map(|e| shared.scrub(&e));
            shared
                .runs
                .finish(&run.run_id, &worker, state, error.as_deref())
                .await
                .map(|_| ())
        }
        Outcome::Cancelled(action) => cancelled(shared, &run, action).await,
        Outcome::Lost => Ok(()),
    };
    if let Err(e) = result {
        tracing::warn!(run = %run.run_id, error = %e, "cairn serve: recording the run's end failed");
    }
    if run.kwargs.get("on_completion").and_then(|v| v.as_str()) == Some("delete")
        && run.kwargs.get("__stateless").and_then(|v| v.as_bool()) == Some(true)
        && !run
            .kwargs
            .get("__keep_until_read")
            .and_then(|v| v.as_bool())
            .unwrap_or(false)
    {
        let _ = shared.cp.delete_thread(&run.thread_id).await;
    }
}

/// After a cancel: an interrupted run answers its open calls and ends, so the thread takes
/// new input; a rolled-back run is removed with everything it committed.
async fn cancelled(
    shared: &Arc<Shared>,
    run: &RunRecord,
    action: CancelAction,
) -> Result<(), cairn_store::RunError> {
    let worker = &shared.cfg.worker_id;
    let fresh = shared.runs.get(&run.run_id).await?;
    let start_head = fresh.as_ref().and_then(|r| r.start_head).or(run.start_head);
    match action {
        CancelAction::Rollback => {
            if let Some(head) = start_head
                && let Err(e) = shared.cp.truncate(&run.thread_id, head).await
            {
                tracing::warn!(run = %run.run_id, error = %e, "cairn serve: rollback failed");
            }
            shared.runs.remove(&run.run_id).await.map(|_| ())
        }
        _ => {
            close_thread(shared, &run.thread_id).await;
            shared
                .runs
                .finish(&run.run_id, worker, RunState::Interrupted, None)
                .await
                .map(|_| ())
        }
    }
}

/// Ends a thread's cut-off run: results for its unanswered calls, then an end step.
async fn close_thread(shared: &Arc<Shared>, thread: &str) {
    let cursor = ThreadCursor::new(Arc::clone(&shared.cp), thread);
    let Ok(t) = cursor.load().await else { return };
    if t.steps == 0 || !matches!(t.status, RunStatus::Running | RunStatus::Failed) {
        return;
    }
    let mut head = t.head;
    let open = t.unanswered();
    if !open.is_empty() {
        let mut d = StepDelta::new(StepKind::Tools);
        d.results = open.iter().map(|c| cancelled_result(&c.call_id)).collect();
        match shared.cp.append(thread, "", head, &d).await {
            Ok(seq) => head = seq,
            Err(_) => return,
        }
    }
    let mut end = StepDelta::new(StepKind::End);
    end.status = RunStatus::Completed;
    end.counters = t.counters.clone();
    end.extra = Some(serde_json::json!({"cancelled": "interrupt"}));
    let _ = shared.cp.append(thread, "", head, &end).await;
}

async fn prepare_and_run(
    shared: &Arc<Shared>,
    run: &RunRecord,
    local: &Arc<LocalRun>,
    cancel: &mut watch::Receiver<Option<CancelAction>>,
) -> Result<Outcome, String> {
    let worker = &shared.cfg.worker_id;
    let req: RunCreate = serde_json::from_value(run.kwargs.clone())
        .map_err(|e| format!("the stored run request cannot be read: {e}"))?;
    let cursor = ThreadCursor::new(Arc::clone(&shared.cp), run.thread_id.clone());
    let t = cursor.load().await.map_err(|e| e.to_string())?;
    let resume = req.command.as_ref().and_then(|c| c.get("resume")).cloned();
    let taken_over = run.attempts > 1 && run.start_head.is_some_and(|h| t.head > h);
    let request = if taken_over {
        // A worker died mid-run: continue from the last committed step.
        match t.status {
            RunStatus::Completed => return Ok(Outcome::Finished(RunState::Success, None)),
            RunStatus::Interrupted => return Ok(Outcome::Finished(RunState::Interrupted, None)),
            _ => shared.agent.resume(cursor),
        }
    } else {
        shared
            .runs
            .set_start_head(&run.run_id, worker, t.head)
            .await
            .map_err(|e| e.to_string())?;
        match &resume {
            Some(r) => {
                let d = decisions(r, &t.interrupts).map_err(|e| e.to_string())?;
                shared.agent.resume(cursor).decisions(d)
            }
            None => {
                let input = input_messages(&req).map_err(|e| e.to_string())?;
                let unfinished =
                    t.steps > 0 && matches!(t.status, RunStatus::Running | RunStatus::Failed);
                if input.is_empty() && unfinished {
                    shared.agent.resume(cursor)
                } else if input.is_empty() {
                    return Err("the run has no input: give input.messages".into());
                } else {
                    if unfinished {
                        // A run cut off earlier (a cancel, a failure): close it so the new
                        // input can follow.
                        close_thread(shared, &run.thread_id).await;
                    }
                    shared.agent.run(input).thread(cursor)
                }
            }
        }
    };
    let mut stream = request.stream();
    loop {
        tokio::select! {
            changed = cancel.changed() => {
                if changed.is_err() {
                    continue;
                }
                let action = *cancel.borrow();
                if let Some(action) = action {
                    stream.abort();
                    drop(stream);
                    // Lost the lease: another worker has it.
                    let still_ours = shared.runs.get(&run.run_id).await.ok().flatten()
                        .is_some_and(|r| r.worker.as_deref() == Some(worker.as_str()) && r.status == RunState::Running);
                    if !still_ours {
                        return Ok(Outcome::Lost);
                    }
                    return Ok(Outcome::Cancelled(action));
                }
            }
            ev = stream.next() => {
                let Some(ev) = ev else { break };
                let _ = local.events.send(Signal::Event(Arc::new(ev)));
            }
        }
    }
    match stream.final_response().await {
        Ok(r) if !r.interrupts.is_empty() => Ok(Outcome::Finished(RunState::Interrupted, None)),
        Ok(_) => Ok(Outcome::Finished(RunState::Success, None)),
        Err(CoreError::Checkpoint(CheckpointError::Conflict { .. })) => Ok(Outcome::Lost),
        Err(e) => Ok(Outcome::Finished(RunState::Error, Some(e.to_string()))),
    }
}

/// Whether an event marks a committed step (a tool result or the end).
pub(crate) fn is_commit(kind: &AgentEventKind) -> bool {
    matches!(
        kind,
        AgentEventKind::ToolResult(_)
            | AgentEventKind::RunCompleted(_)
            | AgentEventKind::Interrupted(_)
    )
}
