//! The tool router: lookup by name, per-tool concurrency, sibling calls of a turn.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cairn_core::testing::ScriptedClient;
use cairn_core::tool::{Concurrency, ToolRouter};
use cairn_core::{Agent, ChatResponse, FnTool, IntoTool, Message, SharedTool, ToolOutput};
use cairn_test_support::agent::first_result;
use serde_json::json;

fn schema() -> serde_json::Value {
    json!({"type": "object", "properties": {"id": {"type": "string"}}})
}

/// Counts calls in flight across all tools of a test.
#[derive(Default)]
struct Flight {
    now: AtomicUsize,
    /// Per call id: the most calls in flight seen while it ran.
    seen: Mutex<Vec<(String, usize)>>,
}

/// A tool that stays in flight for a few scheduler turns and records the overlap it saw.
fn probe(name: &'static str, flight: &Arc<Flight>, concurrency: Concurrency) -> SharedTool {
    let flight = Arc::clone(flight);
    FnTool::new(name, "Probe.", schema(), move |ctx| {
        let flight = Arc::clone(&flight);
        async move {
            let mut peak = flight.now.fetch_add(1, Ordering::SeqCst) + 1;
            for _ in 0..5 {
                tokio::time::sleep(Duration::from_millis(2)).await;
                peak = peak.max(flight.now.load(Ordering::SeqCst));
            }
            flight.now.fetch_sub(1, Ordering::SeqCst);
            let id = ctx.arguments["id"].as_str().unwrap_or_default().to_owned();
            flight.seen.lock().unwrap().push((id.clone(), peak));
            Ok(ToolOutput::text(id))
        }
    })
    .concurrency(concurrency)
    .into_tool()
}

/// A model that makes `calls` in its first turn, then says "done".
fn one_turn(calls: Vec<(&'static str, serde_json::Value)>) -> ScriptedClient {
    ScriptedClient::from_responses([ChatResponse::tool_calls(calls), ChatResponse::text("done")])
}

fn text_of(parts: &[cairn_core::Content]) -> String {
    parts
        .iter()
        .filter_map(|c| match c {
            cairn_core::Content::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

fn peak_of(flight: &Flight, id: &str) -> usize {
    flight
        .seen
        .lock()
        .unwrap()
        .iter()
        .find(|(i, _)| i == id)
        .map(|(_, p)| *p)
        .unwrap()
}

#[tokio::test]
async fn an_unknown_tool_is_still_an_error_result() {
    let flight = Arc::new(Flight::default());
    let agent = Agent::builder(one_turn(vec![("nope", json!({}))]))
        .tool(probe("a", &flight, Concurrency::Parallel))
        .tool(probe("b", &flight, Concurrency::Parallel))
        .build();
    let r = agent.run("go").await.unwrap();
    let result = first_result(&r.messages);
    assert!(result.is_error);
    assert_eq!(
        text_of(&result.output),
        "Error: Requested function \"nope\" not found. Available tools: a, b."
    );
    assert_eq!(r.text(), "done");
}

#[test]
fn the_router_finds_tools_by_name_and_run_tools_replace_in_place() {
    let flight = Arc::new(Flight::default());
    let router = ToolRouter::new([
        probe("a", &flight, Concurrency::Parallel),
        probe("b", &flight, Concurrency::Parallel),
    ]);
    assert!(router.get("b").is_some());
    assert!(router.get("c").is_none());
    let merged = router.merged(&[
        probe("c", &flight, Concurrency::Parallel),
        probe("a", &flight, Concurrency::Exclusive),
    ]);
    let names: Vec<&str> = merged.specs().iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["a", "b", "c"]);
    assert_eq!(
        merged.get("a").unwrap().spec().concurrency,
        Concurrency::Exclusive
    );
    // Without extra tools the specs are shared, not copied.
    assert!(Arc::ptr_eq(router.merged(&[]).specs(), router.specs()));
}

#[tokio::test]
async fn an_exclusive_tool_runs_alone_and_the_others_still_overlap() {
    let flight = Arc::new(Flight::default());
    let agent = Agent::builder(one_turn(vec![
        ("read", json!({"id": "r1"})),
        ("read", json!({"id": "r2"})),
        ("write", json!({"id": "w"})),
        ("read", json!({"id": "r3"})),
        ("read", json!({"id": "r4"})),
    ]))
    .tool(probe("read", &flight, Concurrency::Parallel))
    .tool(probe("write", &flight, Concurrency::Exclusive))
    .build();
    let r = agent.run("go").await.unwrap();
    let ids: Vec<String> = r
        .messages
        .iter()
        .flat_map(Message::function_results)
        .map(|f| text_of(&f.output))
        .collect();
    assert_eq!(
        ids,
        ["r1", "r2", "w", "r3", "r4"],
        "results keep the model's order"
    );
    assert_eq!(
        peak_of(&flight, "w"),
        1,
        "nothing overlapped the exclusive call"
    );
    assert_eq!(peak_of(&flight, "r1"), 2, "r1 and r2 ran together");
    assert_eq!(peak_of(&flight, "r4"), 2, "r3 and r4 ran together");
    let order: Vec<String> = flight
        .seen
        .lock()
        .unwrap()
        .iter()
        .map(|(id, _)| id.clone())
        .collect();
    let w = order.iter().position(|id| id == "w").unwrap();
    assert!(order[..w].contains(&"r1".to_owned()) && order[..w].contains(&"r2".to_owned()));
    assert!(order[w + 1..].contains(&"r3".to_owned()));
}

#[tokio::test]
async fn a_limit_of_one_serializes_that_tools_calls_only() {
    let flight = Arc::new(Flight::default());
    let one = Concurrency::Limited(NonZeroUsize::MIN);
    let agent = Agent::builder(one_turn(vec![
        ("slow", json!({"id": "s1"})),
        ("slow", json!({"id": "s2"})),
        ("slow", json!({"id": "s3"})),
    ]))
    .tool(probe("slow", &flight, one))
    .build();
    agent.run("go").await.unwrap();
    for id in ["s1", "s2", "s3"] {
        assert_eq!(peak_of(&flight, id), 1, "{id} ran alone");
    }

    // Beside a limited tool, another tool's call still runs concurrently.
    let flight = Arc::new(Flight::default());
    let agent = Agent::builder(one_turn(vec![
        ("slow", json!({"id": "s1"})),
        ("slow", json!({"id": "s2"})),
        ("fast", json!({"id": "f"})),
    ]))
    .tool(probe("slow", &flight, one))
    .tool(probe("fast", &flight, Concurrency::Parallel))
    .build();
    agent.run("go").await.unwrap();
    assert_eq!(peak_of(&flight, "f"), 2);
    assert!(peak_of(&flight, "s1") <= 2 && peak_of(&flight, "s2") <= 2);
}

/// A call id and the ids of its siblings.
type Sighting = (String, Vec<String>);

#[tokio::test]
async fn a_call_sees_its_siblings() {
    let seen: Arc<Mutex<Vec<Sighting>>> = Arc::default();
    let log = Arc::clone(&seen);
    let tool = FnTool::new("look", "Looks around.", schema(), move |ctx| {
        let log = Arc::clone(&log);
        async move {
            let siblings = ctx.siblings().map(|c| c.call_id.clone()).collect();
            assert_eq!(ctx.turn_calls.len(), 3);
            log.lock().unwrap().push((ctx.call_id.clone(), siblings));
            Ok(ToolOutput::text("ok"))
        }
    });
    let agent = Agent::builder(one_turn(vec![
        ("look", json!({})),
        ("look", json!({})),
        ("other", json!({})),
    ]))
    .tool(tool)
    .build();
    agent.run("go").await.unwrap();
    let mut seen = seen.lock().unwrap().clone();
    seen.sort();
    assert_eq!(
        seen,
        [
            (
                "call_0".to_owned(),
                vec!["call_1".to_owned(), "call_2".to_owned()]
            ),
            (
                "call_1".to_owned(),
                vec!["call_0".to_owned(), "call_2".to_owned()]
            ),
        ]
    );
}

#[test]
fn parameters_are_serialized_once_and_read_like_a_value() {
    let spec = cairn_core::ToolSpec::new("t", "T.", schema());
    assert_eq!(spec.parameters, schema());
    assert_eq!(spec.parameters["type"], "object");
    assert_eq!(spec.parameters.json().get(), schema().to_string());
    let copy = spec.clone();
    assert_eq!(copy.parameters.fingerprint(), spec.parameters.fingerprint());
    let edited = spec.parameters.edit(|v| v["required"] = json!(["id"]));
    assert_ne!(edited.fingerprint(), spec.parameters.fingerprint());
    assert_eq!(edited.json().get(), edited.to_string());
}
