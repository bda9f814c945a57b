//! Human in the loop (issue #10): a guarded call never runs without a decision; a run without
//! a handler pauses, commits, and is resumed with decisions.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};

use cairn_core::testing::{RecordedRequest, ScriptedClient};
use cairn_core::{
    Agent, AgentEventKind, ApprovalMode, ChatResponse, Decision, DecisionKind, FnTool,
    InMemoryCheckpointer, InterruptOn, Role, RunStatus, SharedCheckpointer, ThreadCursor,
    ToolOutput,
};
use futures::StreamExt;
use serde_json::json;

type Log = Arc<Mutex<Vec<String>>>;

fn write_tool(log: &Log, mode: ApprovalMode) -> FnTool {
    let log = Arc::clone(log);
    FnTool::new(
        "write",
        "Write text.",
        json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"], "additionalProperties": false}),
        move |ctx| {
            let log = Arc::clone(&log);
            async move {
                let text = ctx.arguments["text"].as_str().unwrap().to_owned();
                log.lock().unwrap().push(text.clone());
                Ok(ToolOutput::text(format!("wrote {text}")))
            }
        },
    )
    .approval_mode(mode)
}

fn turns(req: &RecordedRequest) -> usize {
    req.messages
        .iter()
        .filter(|m| m.role == Role::Assistant)
        .count()
}

/// Calls `write("hello")` once, then answers with the last tool result it saw.
fn client() -> ScriptedClient {
    ScriptedClient::new(|req| {
        Ok(if turns(req) == 0 {
            ChatResponse::tool_calls([("write", json!({"text": "hello"}))])
        } else {
            let last = req
                .messages
                .iter()
                .flat_map(|m| m.function_results())
                .last()
                .map(|r| r.text())
                .unwrap_or_default();
            ChatResponse::text(format!("saw: {last}"))
        })
    })
}

fn guarded_agent(log: &Log) -> Agent {
    Agent::builder(client())
        .tool(write_tool(log, ApprovalMode::AlwaysRequire))
        .build()
}

async fn paused(log: &Log) -> (SharedCheckpointer, ThreadCursor, String) {
    let cp: SharedCheckpointer = Arc::new(InMemoryCheckpointer::new());
    let info = cp.create_thread(None, Default::default()).await.unwrap();
    let cursor = ThreadCursor::new(Arc::clone(&cp), info.id);
    let r = guarded_agent(log)
        .run("go")
        .thread(cursor.clone())
        .await
        .unwrap();
    assert!(
        log.lock().unwrap().is_empty(),
        "a guarded call ran without a decision"
    );
    assert_eq!(r.interrupts.len(), 1);
    let i = &r.interrupts[0];
    assert_eq!((i.tool.as_str(), i.namespace.as_str()), ("write", ""));
    assert_eq!(i.arguments, json!({"text": "hello"}));
    assert_eq!(
        i.allowed_decisions,
        [
            DecisionKind::Approve,
            DecisionKind::Edit,
            DecisionKind::Reject
        ]
    );
    let t = cursor.load().await.unwrap();
    assert_eq!(t.status, RunStatus::Interrupted);
    assert_eq!(t.interrupts, r.interrupts);
    (cp, cursor, i.id.clone())
}

#[tokio::test]
async fn always_require_pauses_and_approve_runs_the_call_once() {
    let log: Log = Arc::default();
    let (_cp, cursor, id) = paused(&log).await;
    // "Another process": a new agent over the same checkpointer.
    let r = guarded_agent(&log)
        .resume(cursor.clone())
        .decisions([(id.clone(), Decision::Approve)])
        .await
        .unwrap();
    assert!(r.interrupts.is_empty());
    assert_eq!(r.text(), "saw: wrote hello");
    assert_eq!(*log.lock().unwrap(), ["hello"]);
    // Resuming again with the same decisions runs nothing twice.
    let again = guarded_agent(&log)
        .resume(cursor.clone())
        .decisions([(id, Decision::Approve)])
        .await;
    assert!(again.is_err());
    assert_eq!(log.lock().unwrap().len(), 1);
    assert_eq!(cursor.load().await.unwrap().status, RunStatus::Completed);
}

#[tokio::test]
async fn edit_runs_the_new_arguments_and_reject_tells_the_model() {
    let log: Log = Arc::default();
    let (_cp, cursor, id) = paused(&log).await;
    let r = guarded_agent(&log)
        .resume(cursor)
        .decisions([(
            id,
            Decision::Edit {
                arguments: json!({"text": "edited"}),
            },
        )])
        .await
        .unwrap();
    assert_eq!(*log.lock().unwrap(), ["edited"]);
    assert!(r.text().contains("changed the arguments") && r.text().contains("wrote edited"));

    let log: Log = Arc::default();
    let (_cp, cursor, id) = paused(&log).await;
    let r = guarded_agent(&log)
        .resume(cursor)
        .decisions([(
            id,
            Decision::Reject {
                message: Some("not now".into()),
            },
        )])
        .await
        .unwrap();
    assert!(log.lock().unwrap().is_empty());
    assert!(
        r.text().contains("rejected") && r.text().contains("not now"),
        "{}",
        r.text()
    );
}

#[tokio::test]
async fn bad_decisions_are_clear_errors_that_change_nothing() {
    let log: Log = Arc::default();
    let (cp, cursor, id) = paused(&log).await;
    let before = cp.steps(&cursor.thread_id, "", None).await.unwrap();
    let agent = guarded_agent(&log);
    let cases: Vec<(Vec<(String, Decision)>, &str)> = vec![
        (vec![], "needs a decision"),
        (
            vec![
                (id.clone(), Decision::Approve),
                ("/9.nope".into(), Decision::Approve),
            ],
            "no pending interrupt",
        ),
        (
            vec![(
                id.clone(),
                Decision::Edit {
                    arguments: json!({"text": 5}),
                },
            )],
            "must be of type string",
        ),
        (
            vec![(
                id.clone(),
                Decision::Edit {
                    arguments: json!({"txt": "x"}),
                },
            )],
            "required",
        ),
    ];
    for (decisions, expected) in cases {
        let err = agent
            .resume(cursor.clone())
            .decisions(decisions)
            .await
            .unwrap_err();
        assert!(err.to_string().contains(expected), "{err}");
    }
    assert_eq!(cp.steps(&cursor.thread_id, "", None).await.unwrap(), before);
    assert!(log.lock().unwrap().is_empty());

    // A tool that allows only approve/reject refuses an edit.
    let strict = Agent::builder(client())
        .tool(write_tool(&log, ApprovalMode::NeverRequire))
        .interrupt_on(
            "write",
            InterruptOn {
                allowed_decisions: vec![DecisionKind::Approve, DecisionKind::Reject],
                description: Some("writes for real".into()),
            },
        )
        .build();
    let info = cp.create_thread(None, Default::default()).await.unwrap();
    let c2 = ThreadCursor::new(Arc::clone(&cp), info.id);
    let r = strict.run("go").thread(c2.clone()).await.unwrap();
    assert_eq!(
        r.interrupts[0].description.as_deref(),
        Some("writes for real")
    );
    let err = strict
        .resume(c2)
        .decisions([(
            r.interrupts[0].id.clone(),
            Decision::Edit {
                arguments: json!({"text": "x"}),
            },
        )])
        .await
        .unwrap_err();
    assert!(err.to_string().contains("allows"), "{err}");
    assert!(log.lock().unwrap().is_empty());
}

#[tokio::test]
async fn without_a_thread_a_guarded_call_still_never_runs() {
    let log: Log = Arc::default();
    let r = guarded_agent(&log).run("go").await.unwrap();
    assert_eq!(r.interrupts.len(), 1);
    assert!(log.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_handler_decides_in_process_and_its_decision_is_committed_first() {
    let log: Log = Arc::default();
    let asked: Log = Arc::default();
    let a = Arc::clone(&asked);
    let agent = Agent::builder(client())
        .tool(write_tool(&log, ApprovalMode::AlwaysRequire))
        .approval_handler(Arc::new(move |req: &cairn_core::ApprovalRequest| {
            a.lock().unwrap().push(req.tool.clone());
            Decision::Approve
        }))
        .build();
    let cp: SharedCheckpointer = Arc::new(InMemoryCheckpointer::new());
    let info = cp.create_thread(None, Default::default()).await.unwrap();
    let cursor = ThreadCursor::new(Arc::clone(&cp), info.id.clone());
    let r = agent.run("go").thread(cursor).await.unwrap();
    assert_eq!(r.text(), "saw: wrote hello");
    assert_eq!(*asked.lock().unwrap(), ["write"]);
    let kinds: Vec<_> = cp
        .steps(&info.id, "", None)
        .await
        .unwrap()
        .iter()
        .map(|s| s.delta.kind)
        .collect();
    use cairn_core::StepKind::*;
    assert_eq!(kinds, [Input, Model, Decisions, Tools, Model]);
}

#[tokio::test]
async fn the_pause_is_an_event_of_the_stream() {
    let log: Log = Arc::default();
    let mut stream = guarded_agent(&log).run("go").stream();
    let mut seen = None;
    while let Some(e) = stream.next().await {
        if let AgentEventKind::Interrupted(i) = &e.kind {
            seen = Some(i.clone());
        }
    }
    let seen = seen.expect("an Interrupted event");
    assert_eq!(seen[0].tool, "write");
}

#[tokio::test]
async fn an_agent_used_as_a_tool_pauses_the_caller_and_continues_inside() {
    let log: Log = Arc::default();
    let inner_client = ScriptedClient::new(|req| {
        Ok(if turns(req) == 0 {
            ChatResponse::tool_calls([("write", json!({"text": "from inner"}))])
        } else {
            ChatResponse::text("inner done")
        })
    });
    let inner_calls = inner_client.clone();
    let inner = Agent::builder(inner_client)
        .name("writer")
        .tool(write_tool(&log, ApprovalMode::AlwaysRequire))
        .build();
    let outer = |inner: &Agent| {
        Agent::builder(ScriptedClient::new(|req| {
            Ok(if turns(req) == 0 {
                ChatResponse::tool_calls([("writer", json!({"task": "write it"}))])
            } else {
                ChatResponse::text("outer done")
            })
        }))
        .tool(inner.as_tool().build())
        .build()
    };
    let cp: SharedCheckpointer = Arc::new(InMemoryCheckpointer::new());
    let info = cp.create_thread(None, Default::default()).await.unwrap();
    let cursor = ThreadCursor::new(Arc::clone(&cp), info.id);
    let r = outer(&inner)
        .run("go")
        .thread(cursor.clone())
        .await
        .unwrap();
    assert_eq!(r.interrupts.len(), 1);
    let i = &r.interrupts[0];
    assert!(
        !i.namespace.is_empty(),
        "the inner agent's namespace: {i:?}"
    );
    assert!(log.lock().unwrap().is_empty());
    let inner_requests = inner_calls.requests().len();
    let r = outer(&inner)
        .resume(cursor)
        .decisions([(i.id.clone(), Decision::Approve)])
        .await
        .unwrap();
    assert_eq!(r.text(), "outer done");
    assert_eq!(*log.lock().unwrap(), ["from inner"]);
    // The inner agent continued from its own steps: one more model call, not a restart.
    assert_eq!(inner_calls.requests().len(), inner_requests + 1);
}

/// `write` with a per-call review: text "free" runs unasked, "ask" needs a decision,
/// "never" is forbidden; anything else is reviewed as configured.
struct ReviewedWrite(FnTool);

impl cairn_core::Tool for ReviewedWrite {
    fn spec(&self) -> &cairn_core::ToolSpec {
        self.0.spec()
    }
    fn invoke<'a>(
        &'a self,
        ctx: &'a cairn_core::FunctionInvocationContext,
    ) -> cairn_core::BoxFuture<'a, Result<ToolOutput, cairn_core::ToolError>> {
        self.0.invoke(ctx)
    }
    fn review_call(&self, arguments: &serde_json::Value) -> cairn_core::CallReview {
        match arguments["text"].as_str() {
            Some("free") => cairn_core::CallReview::Allow,
            Some("ask") => cairn_core::CallReview::Ask {
                reason: "the policy asks".into(),
            },
            Some("never") => cairn_core::CallReview::Forbid {
                reason: "the policy forbids it".into(),
            },
            _ => cairn_core::CallReview::AsConfigured,
        }
    }
}

fn calling(text: &'static str) -> ScriptedClient {
    ScriptedClient::new(move |req| {
        Ok(if turns(req) == 0 {
            ChatResponse::tool_calls([("write", json!({ "text": text }))])
        } else {
            let last = req
                .messages
                .iter()
                .flat_map(|m| m.function_results())
                .last()
                .map(|r| r.text())
                .unwrap_or_default();
            ChatResponse::text(format!("saw: {last}"))
        })
    })
}

fn reviewed_agent(log: &Log, text: &'static str, guarded: bool) -> Agent {
    let mut b = Agent::builder(calling(text))
        .tool(ReviewedWrite(write_tool(log, ApprovalMode::NeverRequire)));
    if guarded {
        b = b.interrupt_on("write", InterruptOn::default());
    }
    b.build()
}

#[tokio::test]
async fn a_tool_reviews_each_call_allow_ask_forbid() {
    // Allow: a guarded tool's call runs without a decision (no handler, no pause).
    let log: Log = Arc::default();
    let r = reviewed_agent(&log, "free", true).run("go").await.unwrap();
    assert!(r.interrupts.is_empty());
    assert_eq!(*log.lock().unwrap(), ["free"]);

    // As configured: the same tool, guarded, pauses for any other text...
    let log: Log = Arc::default();
    let r = reviewed_agent(&log, "plain", true).run("go").await.unwrap();
    assert_eq!(r.interrupts.len(), 1);
    assert!(log.lock().unwrap().is_empty());
    // ...and unguarded just runs.
    let r = reviewed_agent(&log, "plain", false)
        .run("go")
        .await
        .unwrap();
    assert!(r.interrupts.is_empty());
    assert_eq!(*log.lock().unwrap(), ["plain"]);

    // Ask: an unguarded tool's call still waits, and the reviewer sees why.
    let log: Log = Arc::default();
    let r = reviewed_agent(&log, "ask", false).run("go").await.unwrap();
    assert_eq!(r.interrupts.len(), 1);
    assert_eq!(
        r.interrupts[0].description.as_deref(),
        Some("the policy asks")
    );
    assert!(log.lock().unwrap().is_empty());

    // Forbid: never runs, even with a handler that approves everything; the model is told.
    let log: Log = Arc::default();
    let approve_all = |_: &cairn_core::ApprovalRequest| Decision::Approve;
    let agent = Agent::builder(calling("never"))
        .tool(ReviewedWrite(write_tool(&log, ApprovalMode::NeverRequire)))
        .interrupt_on("write", InterruptOn::default())
        .approval_handler(Arc::new(approve_all))
        .build();
    let r = agent.run("go").await.unwrap();
    assert!(log.lock().unwrap().is_empty());
    assert_eq!(
        r.text(),
        "saw: Error: this write call is not allowed, so it did not run: the policy forbids it. Do not retry it; do without it or ask the user."
    );

    // An edit cannot turn a call into a forbidden one.
    let log: Log = Arc::default();
    let edit_to_never = |_: &cairn_core::ApprovalRequest| Decision::Edit {
        arguments: json!({"text": "never"}),
    };
    let agent = Agent::builder(calling("plain"))
        .tool(ReviewedWrite(write_tool(&log, ApprovalMode::NeverRequire)))
        .interrupt_on("write", InterruptOn::default())
        .approval_handler(Arc::new(edit_to_never))
        .build();
    let r = agent.run("go").await.unwrap();
    assert!(log.lock().unwrap().is_empty());
    assert!(r.text().contains("not allowed"), "{}", r.text());
}
