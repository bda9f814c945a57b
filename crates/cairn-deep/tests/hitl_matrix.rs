//! Every decision kind on every kind of agent, resumed in process, after a restart on SQLite,
//! and after a restart on PostgreSQL (issue #10, "Done when").
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::pin::Pin;
use std::sync::{Arc, Mutex};

use cairn_core::testing::{RecordedRequest, ScriptedClient};
use cairn_core::{
    Agent, ApprovalMode, ChatResponse, Content, Decision, FnTool, FunctionCall, IntoTool, Message,
    Role, RunStatus, SharedTool, ThreadCursor, ToolOutput,
};
use cairn_deep::{DeepAgent, InterruptOn};
use serde_json::{Value, json};

#[derive(Debug, Clone, Copy, PartialEq)]
enum Shape {
    Plain,
    Deep,
    Subagent,
    TwoDeep,
    Parallel,
    AsTool,
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    Approve,
    Edit,
    Reject,
}

#[derive(Debug, Clone, Copy)]
enum Store {
    InProcess,
    Sqlite,
    Postgres,
}

type Log = Arc<Mutex<Vec<String>>>;

fn first_user(req: &RecordedRequest) -> String {
    req.messages
        .iter()
        .find(|m| m.role == Role::User)
        .map(Message::text)
        .unwrap_or_default()
}

fn calls(list: &[(&str, Value)]) -> ChatResponse {
    let contents = list
        .iter()
        .enumerate()
        .map(|(i, (name, args))| {
            Content::FunctionCall(FunctionCall::new(format!("c{i}"), *name, args))
        })
        .collect();
    ChatResponse {
        messages: vec![Message::new(Role::Assistant, contents)],
        ..Default::default()
    }
}

fn task(what: &str) -> (&'static str, Value) {
    (
        "task",
        json!({"description": what, "subagent_type": "general-purpose"}),
    )
}

/// One scripted model for every level: who is asking is read from the first user message.
fn model(shape: Shape) -> ScriptedClient {
    ScriptedClient::new(move |req| {
        let fresh = !req
            .messages
            .iter()
            .any(|m| m.function_results().next().is_some());
        let write = ("write", json!({"text": "v"}));
        Ok(match (first_user(req).as_str(), fresh) {
            (_, false) => ChatResponse::text("done"),
            ("go", true) => match shape {
                Shape::Plain | Shape::Deep => calls(&[write]),
                Shape::Subagent | Shape::TwoDeep => calls(&[task("L1")]),
                Shape::Parallel => calls(&[task("P1"), task("P2")]),
                Shape::AsTool => calls(&[("inner", json!({"task": "L1"}))]),
            },
            ("L1", true) if shape == Shape::TwoDeep => calls(&[task("L2")]),
            (_, true) => calls(&[write]),
        })
    })
}

fn write_tool(log: &Log) -> SharedTool {
    let log = Arc::clone(log);
    FnTool::new(
        "write",
        "Write text.",
        json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
        move |ctx| {
            let log = Arc::clone(&log);
            async move {
                let text = ctx.arguments["text"].as_str().unwrap().to_owned();
                log.lock().unwrap().push(text.clone());
                Ok(ToolOutput::text(format!("wrote {text}")))
            }
        },
    )
    .into_tool()
}

fn agent(shape: Shape, log: &Log) -> Agent {
    match shape {
        Shape::Plain => Agent::builder(model(shape))
            .tool(
                FnTool::new("write", "Write text.", json!({"type": "object"}), {
                    let log = Arc::clone(log);
                    move |ctx| {
                        let log = Arc::clone(&log);
                        async move {
                            let text = ctx.arguments["text"].as_str().unwrap_or("").to_owned();
                            log.lock().unwrap().push(text.clone());
                            Ok(ToolOutput::text(format!("wrote {text}")))
                        }
                    }
                })
                .approval_mode(ApprovalMode::AlwaysRequire),
            )
            .build(),
        Shape::AsTool => {
            let inner = Agent::builder(model(shape))
                .name("inner")
                .tool(write_tool(log))
                .interrupt_on("write", InterruptOn::default())
                .build();
            Agent::builder(model(shape))
                .tool(inner.as_tool().build())
                .build()
        }
        _ => DeepAgent::builder()
            .client(model(shape))
            .tool(write_tool(log))
            .max_subagent_depth(2)
            .interrupt_on("write", InterruptOn::default())
            .build()
            .unwrap(),
    }
}

type Opener = Box<dyn Fn() -> Pin<Box<dyn std::future::Future<Output = cairn_store::Database>>>>;

fn opener(store: Store, name: &str) -> Option<(Opener, Option<tempfile::TempDir>)> {
    match store {
        Store::InProcess => {
            let db = cairn_store::Database::memory();
            Some((
                Box::new(move || {
                    let db = db.clone();
                    Box::pin(async move { db })
                }),
                None,
            ))
        }
        Store::Sqlite => {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("t.db").to_str().unwrap().to_owned();
            Some((
                Box::new(move || {
                    let path = path.clone();
                    Box::pin(async move { cairn_store::open(&path).await.unwrap() })
                }),
                Some(dir),
            ))
        }
        Store::Postgres => {
            let url = match std::env::var("CAIRN_TEST_POSTGRES_URL") {
                Ok(url) if !url.is_empty() => url,
                _ if std::env::var_os("CI").is_some() => {
                    panic!("CI is set but CAIRN_TEST_POSTGRES_URL is not (see .ci/run)")
                }
                _ => {
                    eprintln!("SKIPPED: {name} on PostgreSQL: set CAIRN_TEST_POSTGRES_URL");
                    return None;
                }
            };
            // One schema per case, reused by later runs (thread ids are random, and each case
            // deletes its thread), so repeated CI runs do not pile schemas up.
            let schema = format!("cairn_hitl_{}", name.to_lowercase());
            Some((
                Box::new(move || {
                    let (url, schema) = (url.clone(), schema.clone());
                    Box::pin(async move {
                        cairn_store::open_with(
                            &url,
                            cairn_store::OpenOptions::new().schema(&schema),
                        )
                        .await
                        .unwrap()
                    })
                }),
                None,
            ))
        }
    }
}

async fn case(shape: Shape, kind: Kind, store: Store) {
    let name = format!("{shape:?}_{kind:?}_{store:?}");
    let Some((open, _dir)) = opener(store, &name) else {
        return;
    };
    let log: Log = Arc::default();
    let expected_calls = if shape == Shape::Parallel { 2 } else { 1 };
    let (thread, interrupts) = {
        let db = open().await;
        let cp = db.checkpointer();
        let info = cp.create_thread(None, Default::default()).await.unwrap();
        let cursor = ThreadCursor::new(cp, info.id.clone());
        let r = agent(shape, &log).run("go").thread(cursor).await.unwrap();
        assert_eq!(r.interrupts.len(), expected_calls, "{name}");
        let nested = !matches!(shape, Shape::Plain | Shape::Deep);
        assert!(
            r.interrupts
                .iter()
                .all(|i| i.namespace.is_empty() != nested),
            "{name}: {:?}",
            r.interrupts
        );
        if shape == Shape::TwoDeep {
            assert_eq!(r.interrupts[0].namespace.matches('/').count(), 2, "{name}");
        }
        assert!(log.lock().unwrap().is_empty(), "{name}: a guarded call ran");
        if !matches!(store, Store::InProcess) {
            db.close().await;
        }
        (info.id, r.interrupts)
    };
    let db = open().await;
    let cursor = ThreadCursor::new(db.checkpointer(), thread);
    let decision = match kind {
        Kind::Approve => Decision::Approve,
        Kind::Edit => Decision::Edit {
            arguments: json!({"text": "edited"}),
        },
        Kind::Reject => Decision::Reject {
            message: Some("no".into()),
        },
    };
    let r = agent(shape, &log)
        .resume(cursor.clone())
        .decisions(interrupts.iter().map(|i| (i.id.clone(), decision.clone())))
        .await
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    assert!(r.interrupts.is_empty(), "{name}");
    assert_eq!(r.text(), "done", "{name}");
    let wrote = log.lock().unwrap().clone();
    let want: Vec<&str> = match kind {
        Kind::Approve => vec!["v"; expected_calls],
        Kind::Edit => vec!["edited"; expected_calls],
        Kind::Reject => vec![],
    };
    assert_eq!(wrote, want, "{name}");
    assert_eq!(
        cursor.load().await.unwrap().status,
        RunStatus::Completed,
        "{name}"
    );
    db.checkpointer()
        .delete_thread(&cursor.thread_id)
        .await
        .unwrap();
    if !matches!(store, Store::InProcess) {
        db.close().await;
    }
}

macro_rules! matrix {
    ($($test:ident: $store:expr),* $(,)?) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $test() {
            for shape in [Shape::Plain, Shape::Deep, Shape::Subagent, Shape::TwoDeep, Shape::Parallel, Shape::AsTool] {
                for kind in [Kind::Approve, Kind::Edit, Kind::Reject] {
                    case(shape, kind, $store).await;
                }
            }
        }
    )*};
}

matrix! {
    resumed_in_process: Store::InProcess,
    resumed_after_a_restart_on_sqlite: Store::Sqlite,
    resumed_after_a_restart_on_postgresql: Store::Postgres,
}
