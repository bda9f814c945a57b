//! Human in the loop in the deep harness (issue #10): `interrupt_on` without a handler pauses
//! the run, also inside (parallel) subagents, and the run resumes after a restart on SQLite.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use cairn_core::testing::{RecordedRequest, ScriptedClient};
use cairn_core::{
    Agent, AgentSession, ChatResponse, Content, Decision, FunctionCall, Message, Role, RunStatus,
    ThreadCursor,
};
use cairn_deep::backend::StateBackend;
use cairn_deep::{DeepAgent, InterruptOn, SubAgent};
use serde_json::json;

fn first_user(req: &RecordedRequest) -> String {
    req.messages
        .iter()
        .find(|m| m.role == Role::User)
        .map(Message::text)
        .unwrap_or_default()
}

fn results(req: &RecordedRequest) -> usize {
    req.messages
        .iter()
        .map(|m| m.function_results().count())
        .sum()
}

/// The parent sends two `writer` subagents at once; each writes its file, then reports.
fn client() -> ScriptedClient {
    ScriptedClient::new(|req| {
        let sub = first_user(req).starts_with("SUB");
        Ok(match (sub, results(req)) {
            (true, 0) => {
                let path = if first_user(req).contains("SUB A") {
                    "/a.md"
                } else {
                    "/b.md"
                };
                ChatResponse::tool_calls([("write_file", json!({"path": path, "content": path}))])
            }
            (true, _) => ChatResponse::text(format!("wrote for {}", first_user(req))),
            (false, 0) => {
                let call = |id: &str, what: &str| {
                    Content::FunctionCall(FunctionCall::new(
                        id,
                        "task",
                        &json!({"description": what, "subagent_type": "writer"}),
                    ))
                };
                ChatResponse {
                    messages: vec![Message::new(
                        Role::Assistant,
                        vec![call("ta", "SUB A"), call("tb", "SUB B")],
                    )],
                    ..Default::default()
                }
            }
            (false, _) => ChatResponse::text("all done"),
        })
    })
}

fn agent() -> Agent {
    DeepAgent::builder()
        .client(client())
        .subagent(SubAgent::new("writer", "Writes files.").system_prompt("You write."))
        .interrupt_on("write_file", InterruptOn::default())
        .build()
        .unwrap()
}

type Opener =
    Box<dyn Fn() -> std::pin::Pin<Box<dyn std::future::Future<Output = cairn_store::Database>>>>;

fn sqlite(path: &Path) -> Opener {
    let path = path.to_str().unwrap().to_owned();
    Box::new(move || {
        let path = path.clone();
        Box::pin(async move { cairn_store::open(&path).await.unwrap() })
    })
}

#[tokio::test]
async fn parallel_subagents_pause_together_and_resume_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    pause_then_resume(sqlite(&dir.path().join("threads.db"))).await;
}

#[tokio::test]
async fn the_same_on_postgresql() {
    let url = match std::env::var("CAIRN_TEST_POSTGRES_URL") {
        Ok(url) if !url.is_empty() => url,
        _ if std::env::var_os("CI").is_some() => {
            panic!("CI is set but CAIRN_TEST_POSTGRES_URL is not (see .ci/run)")
        }
        _ => {
            eprintln!("SKIPPED: set CAIRN_TEST_POSTGRES_URL to run the PostgreSQL case");
            return;
        }
    };
    // Reused by later runs (thread ids are random; the case deletes its thread).
    let schema = "cairn_hitl_parallel".to_owned();
    pause_then_resume(Box::new(move || {
        let (url, schema) = (url.clone(), schema.clone());
        Box::pin(async move {
            cairn_store::open_with(&url, cairn_store::OpenOptions::new().schema(&schema))
                .await
                .unwrap()
        })
    }))
    .await;
}

async fn pause_then_resume(open: Opener) {
    let (thread_id, interrupts) = {
        let db = open().await;
        let cp = db.checkpointer();
        let info = cp.create_thread(None, Default::default()).await.unwrap();
        let cursor = ThreadCursor::new(cp, info.id.clone());
        let session = AgentSession::new();
        let r = agent()
            .run("write both")
            .session(&session)
            .thread(cursor.clone())
            .await
            .unwrap();
        assert_eq!(
            r.interrupts.len(),
            2,
            "one outcome with both subagents' calls"
        );
        assert!(
            r.interrupts
                .iter()
                .all(|i| i.tool == "write_file" && !i.namespace.is_empty())
        );
        assert_ne!(r.interrupts[0].namespace, r.interrupts[1].namespace);
        assert!(
            StateBackend::files(session.state()).is_empty(),
            "nothing was written"
        );
        assert_eq!(cursor.load().await.unwrap().status, RunStatus::Interrupted);
        db.close().await;
        (info.id, r.interrupts)
    };
    // A restart: every in-memory object is gone; the database is opened again.
    let db = open().await;
    let cursor = ThreadCursor::new(db.checkpointer(), thread_id);
    let by_path = |p: &str| {
        interrupts
            .iter()
            .find(|i| i.arguments["path"] == p)
            .unwrap()
            .id
            .clone()
    };
    let session = AgentSession::new();
    let r = agent()
        .resume(cursor.clone())
        .session(&session)
        .decisions([
            (by_path("/a.md"), Decision::Approve),
            (
                by_path("/b.md"),
                Decision::Reject {
                    message: Some("keep b as it is".into()),
                },
            ),
        ])
        .await
        .unwrap();
    assert!(r.interrupts.is_empty());
    assert_eq!(r.text(), "all done");
    let files = StateBackend::files(session.state());
    assert_eq!(
        files["/a.md"].content, "/a.md",
        "the approved subagent wrote"
    );
    assert!(
        !files.contains_key("/b.md"),
        "the rejected call did not run"
    );
    let t = cursor.load().await.unwrap();
    assert_eq!(t.status, RunStatus::Completed);
    // The second subagent saw the rejection and still reported.
    let reports: Vec<String> = t
        .messages
        .iter()
        .flat_map(|m| m.function_results())
        .map(|r| r.text())
        .collect();
    assert!(reports.iter().any(|r| r.contains("SUB B")), "{reports:?}");
    db.checkpointer()
        .delete_thread(&cursor.thread_id)
        .await
        .unwrap();
}

#[tokio::test]
async fn interrupt_on_without_a_handler_never_runs_the_tool() {
    let client = ScriptedClient::new(|req| {
        Ok(if results(req) == 0 {
            ChatResponse::tool_calls([("write_file", json!({"path": "/x.md", "content": "x"}))])
        } else {
            ChatResponse::text("done")
        })
    });
    let agent = DeepAgent::builder()
        .client(client)
        .interrupt_on("write_file", InterruptOn::default())
        .build()
        .unwrap();
    let session = AgentSession::new();
    let r = agent.run("write").session(&session).await.unwrap();
    assert_eq!(r.interrupts.len(), 1);
    assert_eq!(r.interrupts[0].namespace, "");
    assert!(StateBackend::files(session.state()).is_empty());
}

#[tokio::test]
async fn a_call_two_subagents_deep_pauses_the_run_and_the_decision_reaches_it() {
    let client = ScriptedClient::new(|req| {
        let who = first_user(req);
        let done = results(req) > 0;
        Ok(match (who.split(' ').next().unwrap_or(""), done) {
            ("L2", false) => ChatResponse::tool_calls([(
                "write_file",
                json!({"path": "/deep.md", "content": "deep"}),
            )]),
            ("L2", true) => ChatResponse::text("L2 wrote"),
            ("L1", false) => ChatResponse::tool_calls([(
                "task",
                json!({"description": "L2 write the file", "subagent_type": "general-purpose"}),
            )]),
            ("L1", true) => ChatResponse::text("L1 delegated"),
            (_, false) => ChatResponse::tool_calls([(
                "task",
                json!({"description": "L1 get it written", "subagent_type": "general-purpose"}),
            )]),
            (_, true) => ChatResponse::text("main done"),
        })
    });
    let agent = DeepAgent::builder()
        .client(client)
        .max_subagent_depth(2)
        .interrupt_on("write_file", InterruptOn::default())
        .build()
        .unwrap();
    let cp: cairn_core::SharedCheckpointer =
        std::sync::Arc::new(cairn_core::InMemoryCheckpointer::new());
    let info = cp.create_thread(None, Default::default()).await.unwrap();
    let cursor = ThreadCursor::new(std::sync::Arc::clone(&cp), info.id);
    let session = AgentSession::new();
    let r = agent
        .run("write deep")
        .session(&session)
        .thread(cursor.clone())
        .await
        .unwrap();
    assert_eq!(r.interrupts.len(), 1);
    let i = r.interrupts[0].clone();
    assert_eq!(
        i.namespace.matches('/').count(),
        2,
        "two levels down: {}",
        i.namespace
    );
    assert!(StateBackend::files(session.state()).is_empty());
    let session = AgentSession::new();
    let r = agent
        .resume(cursor.clone())
        .session(&session)
        .decisions([(
            i.id,
            Decision::Edit {
                arguments: json!({"path": "/deep.md", "content": "edited deep"}),
            },
        )])
        .await
        .unwrap();
    assert_eq!(r.text(), "main done");
    assert_eq!(
        StateBackend::files(session.state())["/deep.md"].content,
        "edited deep"
    );
}
