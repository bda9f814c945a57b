//! Durable threads: every step committed, resume after a cut-off, forks, optimistic appends.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use cairn_core::testing::{RecordedRequest, ScriptedClient};
use cairn_core::{
    Agent, ChatError, ChatErrorKind, ChatResponse, CheckpointError, Content, FunctionCall,
    InMemoryCheckpointer, LoopConfig, Message, Role, RunStatus, SharedCheckpointer, StepDelta,
    StepKind, ThreadCursor, Transcript,
};
use cairn_test_support::agent::AppendLog;
use serde_json::json;

/// A model that, while fewer than `turns` assistant messages are in the request, asks for one
/// `append` call per name in `per_turn` (ids `t{turn}_{i}`), then answers "done".
fn script(
    turns: usize,
    per_turn: usize,
) -> impl Fn(&RecordedRequest) -> Result<ChatResponse, ChatError> {
    move |req: &RecordedRequest| {
        let turn = req
            .messages
            .iter()
            .filter(|m| m.role == Role::Assistant)
            .count();
        if turn >= turns {
            return Ok(ChatResponse::text("done"));
        }
        let calls = (0..per_turn)
            .map(|i| {
                Content::FunctionCall(FunctionCall::new(
                    format!("t{turn}_{i}"),
                    "append",
                    &json!({"line": format!("line {turn}.{i}")}),
                ))
            })
            .collect();
        Ok(ChatResponse {
            messages: vec![Message::new(Role::Assistant, calls)],
            ..Default::default()
        })
    }
}

type Effects = AppendLog;

fn agent(client: ScriptedClient, fx: &Effects) -> Agent {
    Agent::builder(client)
        .tool(fx.tool())
        .loop_config(LoopConfig {
            concurrent_tool_calls: false,
            ..Default::default()
        })
        .build()
}

async fn new_thread(cp: &SharedCheckpointer) -> ThreadCursor {
    let info = cp.create_thread(None, Default::default()).await.unwrap();
    ThreadCursor::new(Arc::clone(cp), info.id)
}

async fn transcript(cursor: &ThreadCursor) -> Transcript {
    cursor.load().await.unwrap()
}

fn kinds(steps: &[cairn_core::Step]) -> Vec<StepKind> {
    steps.iter().map(|s| s.delta.kind).collect()
}

#[tokio::test]
async fn every_step_is_committed_and_a_second_run_continues_the_thread() {
    let cp: SharedCheckpointer = Arc::new(InMemoryCheckpointer::new());
    let cursor = new_thread(&cp).await;
    let fx = Effects::default();
    let client = ScriptedClient::new(script(2, 1));
    let a = agent(client.clone(), &fx);
    let r = a.run("go").thread(cursor.clone()).await.unwrap();
    assert_eq!(r.text(), "done");
    let steps = cp.steps(&cursor.thread_id, "", None).await.unwrap();
    use StepKind::*;
    assert_eq!(kinds(&steps), [Input, Model, Tools, Model, Tools, Model]);
    // Each step holds only what it added: no step repeats the input.
    for s in &steps[1..] {
        assert!(s.delta.messages.iter().all(|m| m.text() != "go"));
    }
    assert!(steps.windows(2).all(|w| w[1].parent == w[0].seq));
    let t = transcript(&cursor).await;
    assert_eq!(t.status, RunStatus::Completed);
    assert_eq!(t.messages.len(), 6, "user, (call, result) × 2, answer");
    assert_eq!(t.messages[t.produced_from..], r.messages[..]);
    assert_eq!(t.state["appended"], json!(2));
    assert_eq!(
        cp.thread(&cursor.thread_id).await.unwrap().unwrap().status,
        RunStatus::Completed
    );

    // A second run on the thread sees the whole history.
    let r2 = a.run("again").thread(cursor.clone()).await.unwrap();
    assert_eq!(r2.text(), "done");
    let last = client.requests().pop().unwrap();
    assert_eq!(last.messages.len(), 7);
    assert_eq!(last.messages[6].text(), "again");
    assert_eq!(transcript(&cursor).await.messages.len(), 8);
}

/// The same run, uninterrupted, on a fresh thread: the reference transcript.
async fn reference(turns: usize, per_turn: usize) -> Vec<Message> {
    let cp: SharedCheckpointer = Arc::new(InMemoryCheckpointer::new());
    let cursor = new_thread(&cp).await;
    let fx = Effects::default();
    agent(ScriptedClient::new(script(turns, per_turn)), &fx)
        .run("go")
        .thread(cursor.clone())
        .await
        .unwrap();
    transcript(&cursor).await.messages
}

#[tokio::test]
async fn a_run_cut_off_in_a_batch_resumes_without_running_committed_calls_again() {
    let cp: SharedCheckpointer = Arc::new(InMemoryCheckpointer::new());
    let cursor = new_thread(&cp).await;
    let fx = Effects::default();
    // Turn 1 asks for three calls; the second hangs: the "process" is killed there.
    fx.hang_once("line 1.1");
    let a = agent(ScriptedClient::new(script(3, 3)), &fx);
    let cut = tokio::time::timeout(
        Duration::from_millis(300),
        a.run("go").thread(cursor.clone()),
    )
    .await;
    assert!(cut.is_err(), "the run was cut off");
    let t = transcript(&cursor).await;
    assert_eq!(t.status, RunStatus::Running);
    assert_eq!(
        t.unanswered().len(),
        2,
        "1.1 was running, 1.2 never started"
    );

    // A new process: new agent, no session, same thread.
    let a = agent(ScriptedClient::new(script(3, 3)), &fx);
    let r = a.resume(cursor.clone()).await.unwrap();
    assert_eq!(r.text(), "done");
    let lines = fx.lines();
    let mut unique = lines.clone();
    unique.dedup();
    assert_eq!(lines, unique, "no committed call ran twice: {lines:?}");
    assert_eq!(lines.len(), 9);
    let t = transcript(&cursor).await;
    assert_eq!(t.messages, reference(3, 3).await);
    assert_eq!(
        t.state["appended"],
        json!(9),
        "state committed before the cut was kept"
    );
    assert_eq!(t.status, RunStatus::Completed);
    // What the resumed run reports is the whole run's output, as one uninterrupted run's.
    assert_eq!(r.messages[..], t.messages[1..]);
}

#[tokio::test]
async fn a_failed_model_call_is_recorded_and_resume_asks_again() {
    let cp: SharedCheckpointer = Arc::new(InMemoryCheckpointer::new());
    let cursor = new_thread(&cp).await;
    let fx = Effects::default();
    let calls = Arc::new(AtomicUsize::new(0));
    let n = Arc::clone(&calls);
    let inner = script(2, 1);
    let flaky = ScriptedClient::new(move |req| {
        if n.fetch_add(1, Ordering::SeqCst) == 1 {
            return Err(ChatError::new(
                ChatErrorKind::Status,
                "503 from the provider",
            ));
        }
        inner(req)
    });
    let err = agent(flaky, &fx)
        .run("go")
        .thread(cursor.clone())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("503"), "{err}");
    let t = transcript(&cursor).await;
    assert_eq!(t.status, RunStatus::Failed);
    assert!(t.extra.unwrap()["error"].as_str().unwrap().contains("503"));
    let r = agent(ScriptedClient::new(script(2, 1)), &fx)
        .resume(cursor.clone())
        .await
        .unwrap();
    assert_eq!(r.text(), "done");
    assert_eq!(fx.lines().len(), 2);
    assert_eq!(transcript(&cursor).await.messages, reference(2, 1).await);
}

#[tokio::test]
async fn resume_and_new_input_are_refused_when_they_would_corrupt_the_thread() {
    let cp: SharedCheckpointer = Arc::new(InMemoryCheckpointer::new());
    let cursor = new_thread(&cp).await;
    let fx = Effects::default();
    let a = agent(ScriptedClient::new(script(1, 1)), &fx);
    a.run("go").thread(cursor.clone()).await.unwrap();
    let err = a.resume(cursor.clone()).await.unwrap_err();
    assert!(err.to_string().contains("no unfinished run"), "{err}");

    let cursor = new_thread(&cp).await;
    fx.hang_once("line 0.0");
    let _ = tokio::time::timeout(
        Duration::from_millis(200),
        a.run("go").thread(cursor.clone()),
    )
    .await;
    let err = a.run("more").thread(cursor.clone()).await.unwrap_err();
    assert!(err.to_string().contains("resume it"), "{err}");
    // Nothing was written by the refused run.
    assert_eq!(transcript(&cursor).await.unanswered().len(), 1);
}

#[tokio::test]
async fn a_stale_writer_gets_a_conflict_and_the_log_is_unchanged() {
    let cp: SharedCheckpointer = Arc::new(InMemoryCheckpointer::new());
    let cursor = new_thread(&cp).await;
    let fx = Effects::default();
    agent(ScriptedClient::new(script(1, 1)), &fx)
        .run("go")
        .thread(cursor.clone())
        .await
        .unwrap();
    let before = cp.steps(&cursor.thread_id, "", None).await.unwrap();
    let stale = before[1].seq;
    let err = cp
        .append(&cursor.thread_id, "", stale, &StepDelta::new(StepKind::End))
        .await
        .unwrap_err();
    assert!(matches!(err, CheckpointError::Conflict { .. }), "{err}");
    assert!(err.to_string().contains("being run elsewhere"));
    assert_eq!(cp.steps(&cursor.thread_id, "", None).await.unwrap(), before);
}

#[tokio::test]
async fn a_fork_shares_the_prefix_and_goes_its_own_way() {
    let cp: SharedCheckpointer = Arc::new(InMemoryCheckpointer::new());
    let cursor = new_thread(&cp).await;
    let fx = Effects::default();
    agent(ScriptedClient::new(script(2, 1)), &fx)
        .run("go")
        .thread(cursor.clone())
        .await
        .unwrap();
    let original = transcript(&cursor).await;
    let steps = cp.steps(&cursor.thread_id, "", None).await.unwrap();
    // Fork right after the first model response: its call has no result yet.
    let fork = cp
        .fork(&cursor.thread_id, steps[1].seq, None)
        .await
        .unwrap();
    assert_eq!(
        fork.forked_from,
        Some((cursor.thread_id.clone(), steps[1].seq))
    );
    let fcursor = ThreadCursor::new(Arc::clone(&cp), fork.id.clone());
    let ft = transcript(&fcursor).await;
    assert_eq!(ft.messages, original.messages[..2]);
    assert_eq!(ft.unanswered().len(), 1);
    let r = agent(ScriptedClient::new(script(2, 1)), &fx)
        .resume(fcursor.clone())
        .await
        .unwrap();
    assert_eq!(r.text(), "done");
    assert_eq!(transcript(&fcursor).await.messages, original.messages);
    assert_eq!(
        transcript(&cursor).await,
        original,
        "the source is untouched"
    );
    // The fork stored only its own steps.
    let own: Vec<_> = cp
        .steps(&fork.id, "", None)
        .await
        .unwrap()
        .into_iter()
        .filter(|s| s.thread_id == fork.id)
        .collect();
    assert_eq!(
        own.len(),
        5,
        "resumed, tool result, model, tool result, model"
    );
}

#[tokio::test]
async fn state_is_committed_as_patches() {
    let cp: SharedCheckpointer = Arc::new(InMemoryCheckpointer::new());
    let cursor = new_thread(&cp).await;
    let fx = Effects::default();
    let session = cairn_core::AgentSession::new();
    session
        .state()
        .insert("files", json!({"/a.md": "a", "/b.md": "b", "/c.md": "c"}))
        .unwrap();
    agent(ScriptedClient::new(script(2, 1)), &fx)
        .run("go")
        .session(&session)
        .thread(cursor.clone())
        .await
        .unwrap();
    let steps = cp.steps(&cursor.thread_id, "", None).await.unwrap();
    // The caller's seeded files went in with the input step; later steps carry only the
    // counter the tool changed.
    let first = steps[0].delta.state.as_ref().unwrap();
    assert!(first.set.contains_key("files"));
    for s in steps.iter().skip(1).filter_map(|s| s.delta.state.as_ref()) {
        assert!(!s.set.contains_key("files") && s.nested.is_empty(), "{s:?}");
    }
    assert_eq!(session.state().get::<u64>("appended"), Some(2));
    assert_eq!(session.messages().len(), 6);
    let t = transcript(&cursor).await;
    assert_eq!(
        t.state.get("files"),
        Some(&json!({"/a.md": "a", "/b.md": "b", "/c.md": "c"}))
    );
}

#[tokio::test]
async fn two_processes_resuming_one_thread_run_nothing_twice() {
    let cp: SharedCheckpointer = Arc::new(InMemoryCheckpointer::new());
    let cursor = new_thread(&cp).await;
    let fx = Effects::default();
    fx.hang_once("line 0.0");
    let a = agent(ScriptedClient::new(script(1, 1)), &fx);
    let cut = tokio::time::timeout(
        Duration::from_millis(200),
        a.run("go").thread(cursor.clone()),
    )
    .await;
    assert!(cut.is_err());
    // Two "processes" resume the cut-off run at the same moment: the first to commit wins, the
    // other stops before running anything.
    let (one, two) = (
        agent(ScriptedClient::new(script(1, 1)), &fx),
        agent(ScriptedClient::new(script(1, 1)), &fx),
    );
    let (r1, r2) = tokio::join!(one.resume(cursor.clone()), two.resume(cursor.clone()));
    let errors: Vec<String> = [&r1, &r2]
        .iter()
        .filter_map(|r| r.as_ref().err().map(|e| e.to_string()))
        .collect();
    assert_eq!(errors.len(), 1, "exactly one resume wins: {errors:?}");
    assert!(
        errors[0].contains("being run elsewhere") || errors[0].contains("no unfinished run"),
        "{errors:?}"
    );
    assert_eq!(fx.lines(), ["line 0.0"], "the call ran once");
    assert_eq!(transcript(&cursor).await.messages, reference(1, 1).await);
}
