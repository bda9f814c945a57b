//! Server-sent events of a run, with LangGraph's event names: `metadata` first, then per the
//! requested stream modes `values` (the whole state after each committed step), `updates`
//! (what each step added: `{"model": …}`, `{"tools": …}`, `{"__interrupt__": …}`),
//! `messages` (`[chunk, metadata]` pairs of the answer as it is generated), and at the end
//! `error` (when the run failed) and `end`. Events of a subagent carry its namespace in the
//! event name (`updates|task:call_1`) and are sent when `stream_subgraphs` is set.
//!
//! A run executing in this process is streamed live from its events; a run another worker
//! executes is followed through the database (its committed steps), so `values`, `updates`
//! of committed steps and `end` arrive either way.

use std::collections::BTreeSet;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::response::sse::{Event, KeepAlive, Sse};
use cairn_core::{AgentEventKind, ThreadCursor, UpdateEvent};
use cairn_store::{CancelAction, RunState};
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};

use crate::wire::{interrupt_json, message_json, values_json};
use crate::{Shared, Signal};

/// What a stream sends.
#[derive(Debug, Clone)]
pub(crate) struct Modes {
    modes: BTreeSet<String>,
    subgraphs: bool,
    cancel_on_disconnect: bool,
}

impl Modes {
    pub(crate) fn new(
        stream_mode: Option<&Value>,
        subgraphs: bool,
        on_disconnect: Option<&str>,
    ) -> Self {
        let mut modes = BTreeSet::new();
        match stream_mode {
            Some(Value::String(s)) => {
                modes.insert(s.clone());
            }
            Some(Value::Array(list)) => {
                for m in list.iter().filter_map(Value::as_str) {
                    modes.insert(m.to_owned());
                }
            }
            _ => {}
        }
        if modes.is_empty() {
            modes.insert("values".into());
        }
        Modes {
            modes,
            subgraphs,
            cancel_on_disconnect: on_disconnect != Some("continue"),
        }
    }

    fn has(&self, m: &str) -> bool {
        self.modes.contains(m)
    }

    fn messages(&self) -> bool {
        self.has("messages") || self.has("messages-tuple")
    }
}

/// Where the stream's events come from.
pub(crate) enum Source {
    /// The run executes here.
    Local(broadcast::Receiver<Signal>),
    /// Another worker runs it (or it waits in the queue): follow the database.
    Poll,
}

type Tx = mpsc::Sender<Event>;

fn event(name: &str, data: &Value) -> Event {
    Event::default()
        .event(name)
        .data(serde_json::to_string(data).unwrap_or_else(|_| "null".into()))
}

/// The SSE response of run `run_id` on `thread_id`.
pub(crate) fn respond(
    shared: Arc<Shared>,
    run_id: String,
    thread_id: String,
    modes: Modes,
    source: Source,
    after: Option<Box<dyn FnOnce() -> futures::future::BoxFuture<'static, ()> + Send>>,
) -> Sse<impl futures::Stream<Item = Result<Event, Infallible>>> {
    let (tx, rx) = mpsc::channel::<Event>(256);
    tokio::spawn(async move {
        let ok = produce(&shared, &run_id, &thread_id, &modes, source, &tx).await;
        if !ok && modes.cancel_on_disconnect {
            // The client went away: stop the run (the protocol's on_disconnect=cancel).
            if let Ok(r) = shared.runs.cancel(&run_id, CancelAction::Interrupt).await
                && r.status == RunState::Running
                && let Some(local) = shared.local().get(&run_id)
            {
                let _ = local.cancel.send(Some(CancelAction::Interrupt));
            }
        }
        if let Some(after) = after {
            after().await;
        }
    });
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|e| (Ok::<_, Infallible>(e), rx))
    });
    Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(10)))
}

/// Sends the run's events; `false` when the client disconnected.
async fn produce(
    shared: &Arc<Shared>,
    run_id: &str,
    thread_id: &str,
    modes: &Modes,
    source: Source,
    tx: &Tx,
) -> bool {
    let attempt = shared
        .runs
        .get(run_id)
        .await
        .ok()
        .flatten()
        .map_or(1, |r| r.attempts.max(1));
    if tx
        .send(event(
            "metadata",
            &json!({"run_id": run_id, "thread_id": thread_id, "attempt": attempt}),
        ))
        .await
        .is_err()
    {
        return false;
    }
    let cursor = ThreadCursor::new(Arc::clone(&shared.cp), thread_id);
    let mut last_head = 0u64;
    match source {
        Source::Local(mut rx) => {
            let mut chunk = 0usize;
            loop {
                let sig = match rx.recv().await {
                    Ok(s) => s,
                    Err(broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(broadcast::error::RecvError::Closed) => break,
                };
                let ev = match sig {
                    Signal::Done => break,
                    Signal::Event(ev) => ev,
                };
                let ns = &ev.metadata.namespace;
                if !ns.is_empty() && !modes.subgraphs {
                    continue;
                }
                let suffix = if ns.is_empty() {
                    String::new()
                } else {
                    format!("|{}", ns.join("|"))
                };
                let mut out = Vec::new();
                match &ev.kind {
                    AgentEventKind::Model(u) if modes.messages() => {
                        if let UpdateEvent::TextDelta { text } = &u.event {
                            chunk += 1;
                            out.push(event(
                                &format!("messages{suffix}"),
                                &json!([
                                    {"type": "AIMessageChunk", "content": text, "id": format!("run-{run_id}-{chunk}")},
                                    {"langgraph_node": "model", "run_id": run_id, "thread_id": thread_id, "namespace": ns},
                                ]),
                            ));
                        }
                    }
                    AgentEventKind::ToolResult(r) if modes.has("updates") => {
                        let m = cairn_core::Message::tool_result(r.clone());
                        out.push(event(
                            &format!("updates{suffix}"),
                            &json!({"tools": {"messages": [message_json(&m, 0)]}}),
                        ));
                    }
                    AgentEventKind::Message(m) if modes.has("updates") => {
                        out.push(event(
                            &format!("updates{suffix}"),
                            &json!({"model": {"messages": [message_json(m, 0)]}}),
                        ));
                    }
                    AgentEventKind::Interrupted(list) if modes.has("updates") => {
                        out.push(event(
                            &format!("updates{suffix}"),
                            &json!({"__interrupt__": list.iter().map(interrupt_json).collect::<Vec<_>>()}),
                        ));
                    }
                    AgentEventKind::RunCompleted(resp) if modes.has("updates") => {
                        if let Some(m) = resp.messages.last() {
                            out.push(event(
                                &format!("updates{suffix}"),
                                &json!({"model": {"messages": [message_json(m, 0)]}}),
                            ));
                        }
                    }
                    _ => {}
                }
                if ns.is_empty()
                    && modes.has("values")
                    && crate::worker::is_commit(&ev.kind)
                    && let Ok(t) = cursor.load().await
                    && t.head != last_head
                {
                    last_head = t.head;
                    out.push(event("values", &values_json(&t)));
                }
                for e in out {
                    if tx.send(e).await.is_err() {
                        return false;
                    }
                }
            }
        }
        Source::Poll => loop {
            let run = shared.runs.get(run_id).await.ok().flatten();
            if modes.has("values")
                && let Ok(t) = cursor.load().await
                && t.head != last_head
                && run.as_ref().is_some_and(|r| r.status != RunState::Pending)
            {
                last_head = t.head;
                if tx.send(event("values", &values_json(&t))).await.is_err() {
                    return false;
                }
            }
            match run {
                Some(r) if r.status.is_active() => {}
                _ => break,
            }
            if tx.is_closed() {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        },
    }
    // The end: the final state, an error, `end`.
    let run = shared.runs.get(run_id).await.ok().flatten();
    if let Ok(t) = cursor.load().await {
        if modes.has("values") && t.head != last_head {
            let mut v = values_json(&t);
            if !t.interrupts.is_empty()
                && let Some(o) = v.as_object_mut()
            {
                o.insert(
                    "__interrupt__".into(),
                    Value::Array(t.interrupts.iter().map(interrupt_json).collect()),
                );
            }
            if tx.send(event("values", &v)).await.is_err() {
                return false;
            }
        }
        if modes.has("updates") && !t.interrupts.is_empty() {
            let v = json!({"__interrupt__": t.interrupts.iter().map(interrupt_json).collect::<Vec<_>>()});
            if tx.send(event("updates", &v)).await.is_err() {
                return false;
            }
        }
    }
    if let Some(r) = &run
        && r.status == RunState::Error
    {
        let msg = r.error.clone().unwrap_or_else(|| "the run failed".into());
        let _ = tx
            .send(event(
                "error",
                &json!({"error": "RunError", "message": shared.scrub(&msg)}),
            ))
            .await;
    }
    tx.send(Event::default().event("end").data("null"))
        .await
        .is_ok()
}
