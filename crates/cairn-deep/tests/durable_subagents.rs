//! Subagent runs on a durable thread: recorded under the parent's thread in their own
//! namespace, and resumed with the parent (issue #9).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use cairn_core::testing::{RecordedRequest, ScriptedClient};
use cairn_core::{
    Agent, ChatResponse, InMemoryCheckpointer, Role, RunStatus, SharedCheckpointer, ThreadCursor,
};
use cairn_deep::TaskTool;
use cairn_test_support::agent::AppendLog;
use serde_json::json;

type Effects = AppendLog;

fn turns(req: &RecordedRequest) -> usize {
    req.messages
        .iter()
        .filter(|m| m.role == Role::Assistant)
        .count()
}

/// The parent delegates once, then answers; the subagent appends two lines, then reports.
fn parent(fx: &Effects) -> Agent {
    let sub_client = ScriptedClient::new(|req| {
        Ok(match turns(req) {
            0 => ChatResponse::tool_calls([("append", json!({"line": "s1"}))]),
            1 => ChatResponse::tool_calls([("append", json!({"line": "s2"}))]),
            _ => ChatResponse::text("sub done"),
        })
    });
    let worker = Agent::builder(sub_client).tool(fx.tool()).build();
    let task = TaskTool::new(vec![("worker".into(), "Works.".into(), worker)]);
    let parent_client = ScriptedClient::new(|req| {
        Ok(match turns(req) {
            0 => ChatResponse::tool_calls([(
                "task",
                json!({"description": "sub job", "subagent_type": "worker"}),
            )]),
            _ => ChatResponse::text("parent done"),
        })
    });
    Agent::builder(parent_client).tool(task).build()
}

#[tokio::test]
async fn resuming_the_parent_resumes_its_cut_off_subagent() {
    let cp: SharedCheckpointer = Arc::new(InMemoryCheckpointer::new());
    let info = cp.create_thread(None, Default::default()).await.unwrap();
    let cursor = ThreadCursor::new(Arc::clone(&cp), info.id.clone());
    let fx = Effects::default();
    fx.hang_once("s2");
    let cut = tokio::time::timeout(
        Duration::from_millis(300),
        parent(&fx).run("go").thread(cursor.clone()),
    )
    .await;
    assert!(cut.is_err());
    assert_eq!(fx.lines(), ["s1"]);

    let r = parent(&fx).resume(cursor.clone()).await.unwrap();
    assert_eq!(r.text(), "parent done");
    assert_eq!(fx.lines(), ["s1", "s2"], "s1 was not run again");
    let t = cursor.load().await.unwrap();
    assert_eq!(t.status, RunStatus::Completed);
    let report = t
        .messages
        .iter()
        .flat_map(|m| m.function_results())
        .next()
        .unwrap();
    assert_eq!(report.text(), "sub done");
    // The subagent's steps live in their own namespace of the same thread.
    let model_step = cp.steps(&info.id, "", None).await.unwrap()[1].seq;
    let ns = format!("/{model_step}.call_0");
    let sub = cp.steps(&info.id, &ns, None).await.unwrap();
    assert!(
        sub.len() >= 6,
        "input, model, tool, model, tool, model: {}",
        sub.len()
    );
    assert!(sub.iter().all(|s| s.namespace == ns));

    // A finished subagent is not run again when its call is re-run: a fork made after the
    // subagent's last step, before the parent committed the report (a parent cut off just
    // then), returns the recorded report.
    let fork = cp
        .fork(&info.id, sub.last().unwrap().seq, None)
        .await
        .unwrap();
    let fcursor = ThreadCursor::new(Arc::clone(&cp), fork.id);
    let r = parent(&fx).resume(fcursor).await.unwrap();
    assert_eq!(r.text(), "parent done");
    assert_eq!(fx.lines().len(), 2, "the subagent did not run again");
}
