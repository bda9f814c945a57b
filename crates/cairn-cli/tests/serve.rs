//! `cairn serve` (issue #11) driven over HTTP against the fake OpenAI server: background runs,
//! `values.messages`, SSE streams, cancellation and multitask strategies, a paused run resumed
//! with a decision, the store, auth, and 4xx answers to malformed requests.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::{Duration, Instant};

use cairn_test_support::blocking::{FakeOpenAI, Reply};
use cairn_test_support::http::{Served, request};
use serde_json::{Value, json};

/// `cairn serve` on a free port against `fake`, working in `dir`, threads in `dir/cairn.db`.
fn serve(fake: &FakeOpenAI, dir: &Path, extra: &[&str]) -> Served {
    let mut c = fake.command(env!("CARGO_BIN_EXE_cairn"), dir);
    c.args(["serve", "--port", "0", "-m", "openai:fake", "--db"])
        .arg(dir.join("cairn.db"))
        .args(extra);
    Served::start(c)
}

fn poll_run(s: &Served, thread: &str, run: &str, until: &[&str]) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let r = s.call("GET", &format!("/threads/{thread}/runs/{run}"), None);
        assert_eq!(r.status, 200, "{}", r.body);
        let v = r.json();
        if until.contains(&v["status"].as_str().unwrap_or("")) {
            return v;
        }
        assert!(Instant::now() < deadline, "run stuck: {v}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn new_thread(s: &Served) -> String {
    let r = s.call(
        "POST",
        "/threads",
        Some(&json!({"metadata": {"who": "test"}})),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()["thread_id"].as_str().unwrap().to_owned()
}

fn input(text: &str) -> Value {
    json!({"assistant_id": "agent", "input": {"messages": [{"role": "user", "content": text}]}})
}

#[test]
fn a_background_run_succeeds_and_its_thread_holds_the_answer() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeOpenAI::hello_loop();
    let s = serve(&fake, dir.path(), &["--yes"]);
    assert_eq!(s.call("GET", "/ok", None).json(), json!({"ok": true}));
    let found = s.call(
        "POST",
        "/assistants/search",
        Some(&json!({"graph_id": "agent"})),
    );
    assert_eq!(found.json()[0]["graph_id"], "agent", "{}", found.body);

    let t = new_thread(&s);
    let r = s.call(
        "POST",
        &format!("/threads/{t}/runs"),
        Some(&input("make hello.py")),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let run = r.json();
    assert!(
        matches!(run["status"].as_str(), Some("pending" | "running")),
        "{run}"
    );
    let done = poll_run(
        &s,
        &t,
        run["run_id"].as_str().unwrap(),
        &["success", "error"],
    );
    assert_eq!(done["status"], "success", "{done}");
    assert!(dir.path().join("hello.py").is_file());

    let thread = s.call("GET", &format!("/threads/{t}"), None).json();
    assert_eq!(thread["status"], "idle");
    let messages = thread["values"]["messages"].as_array().unwrap();
    let last = messages.last().unwrap();
    assert_eq!(last["type"], "ai");
    assert_eq!(last["content"], "Created hello.py; it prints hello.");
    assert_eq!(messages[0]["content"], "make hello.py");
    assert!(messages.iter().any(|m| m["type"] == "tool"));
    // The history has one state per committed step, newest first.
    let history = s
        .call(
            "POST",
            &format!("/threads/{t}/history"),
            Some(&json!({"limit": 3})),
        )
        .json();
    assert_eq!(history.as_array().unwrap().len(), 3, "{history}");
    // The run is listed with its thread, and searchable.
    let runs = s.call("GET", &format!("/threads/{t}/runs"), None).json();
    assert_eq!(runs.as_array().unwrap().len(), 1);
    let searched = s.call(
        "POST",
        "/threads/search",
        Some(&json!({"metadata": {"who": "test"}})),
    );
    assert_eq!(searched.json().as_array().unwrap().len(), 1);
}

#[test]
fn wait_and_stream_runs_report_as_the_protocol_says() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeOpenAI::hello_loop();
    let s = serve(&fake, dir.path(), &["--yes"]);
    // A stateless wait: the final state comes back; the temporary thread is gone afterwards.
    let r = s.call("POST", "/runs/wait", Some(&input("make hello.py")));
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json();
    assert_eq!(v["run"]["status"], "success");
    assert_eq!(
        v["messages"].as_array().unwrap().last().unwrap()["content"],
        "Created hello.py; it prints hello."
    );
    assert_eq!(v["values"]["messages"], v["messages"]);
    let gone = s.call(
        "GET",
        &format!("/threads/{}", v["run"]["thread_id"].as_str().unwrap()),
        None,
    );
    assert_eq!(gone.status, 404);

    // A streamed run on a thread: metadata, values after each committed step, updates, end.
    let t = new_thread(&s);
    let mut req = input("make hello.py again");
    req["stream_mode"] = json!(["values", "updates"]);
    let r = s.call("POST", &format!("/threads/{t}/runs/stream"), Some(&req));
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(
        r.header("content-type")
            .unwrap()
            .starts_with("text/event-stream")
    );
    let events = r.events();
    assert_eq!(
        events.first().map(String::as_str),
        Some("metadata"),
        "{events:?}"
    );
    assert_eq!(events.last().map(String::as_str), Some("end"), "{events:?}");
    assert!(
        events.iter().filter(|e| *e == "values").count() >= 2,
        "{events:?}"
    );
    assert!(events.iter().any(|e| e == "updates"), "{events:?}");
    assert!(
        r.body.contains("Created hello.py; it prints hello."),
        "{}",
        r.body
    );
    // The OpenAPI document is generated from the handlers.
    let doc = s.call("GET", "/openapi.json", None).json();
    for p in [
        "/threads/{thread_id}/runs",
        "/runs/wait",
        "/store/items",
        "/ok",
    ] {
        assert!(doc["paths"].get(p).is_some(), "{p} missing");
    }
    assert!(doc["components"]["schemas"].get("RunCreate").is_some());
}

/// A model that takes its time on the first request of each thread (so a run stays
/// `running`), then answers.
fn slow_model() -> FakeOpenAI {
    FakeOpenAI::start(|body| {
        let last = last_user(body);
        if last.contains("slow") {
            std::thread::sleep(Duration::from_secs(3));
        }
        Reply::Text(format!("done: {last}"))
    })
}

/// The text of the last user message of a Chat Completions request.
fn last_user(body: &Value) -> String {
    body["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn cancel_and_the_multitask_strategies() {
    let dir = tempfile::tempdir().unwrap();
    let fake = slow_model();
    let s = serve(&fake, dir.path(), &["--yes"]);
    let t = new_thread(&s);
    let first = s
        .call(
            "POST",
            &format!("/threads/{t}/runs"),
            Some(&input("slow one")),
        )
        .json();
    let first_id = first["run_id"].as_str().unwrap().to_owned();
    poll_run(&s, &t, &first_id, &["running"]);
    // reject (the default): the thread is busy.
    let busy = s.call(
        "POST",
        &format!("/threads/{t}/runs"),
        Some(&input("second")),
    );
    assert_eq!(busy.status, 409, "{}", busy.body);
    assert!(busy.json()["message"].as_str().unwrap().contains("busy"));
    // enqueue: waits behind the first.
    let mut q = input("queued");
    q["multitask_strategy"] = json!("enqueue");
    let queued = s
        .call("POST", &format!("/threads/{t}/runs"), Some(&q))
        .json();
    assert_eq!(queued["status"], "pending", "{queued}");
    // cancel the first: it ends interrupted, and the queued run then runs.
    let c = s.call(
        "POST",
        &format!("/threads/{t}/runs/{first_id}/cancel?wait=1"),
        None,
    );
    assert_eq!(c.status, 204, "{}", c.body);
    let first = poll_run(&s, &t, &first_id, &["interrupted", "success", "error"]);
    assert_eq!(first["status"], "interrupted", "{first}");
    let queued = poll_run(
        &s,
        &t,
        queued["run_id"].as_str().unwrap(),
        &["success", "error"],
    );
    assert_eq!(queued["status"], "success", "{queued}");
    // Cancelling a finished run is a conflict.
    let again = s.call(
        "POST",
        &format!("/threads/{t}/runs/{first_id}/cancel"),
        None,
    );
    assert_eq!(again.status, 409, "{}", again.body);

    // interrupt: a new run stops the running one and goes on after it.
    let slow = s
        .call(
            "POST",
            &format!("/threads/{t}/runs"),
            Some(&input("slow two")),
        )
        .json();
    let slow_id = slow["run_id"].as_str().unwrap().to_owned();
    poll_run(&s, &t, &slow_id, &["running"]);
    let mut i = input("after interrupt");
    i["multitask_strategy"] = json!("interrupt");
    let next = s
        .call("POST", &format!("/threads/{t}/runs"), Some(&i))
        .json();
    let next = poll_run(
        &s,
        &t,
        next["run_id"].as_str().unwrap(),
        &["success", "error"],
    );
    assert_eq!(next["status"], "success", "{next}");
    assert_eq!(
        poll_run(&s, &t, &slow_id, &["interrupted"])["status"],
        "interrupted"
    );
    let thread = s.call("GET", &format!("/threads/{t}"), None).json();
    let last = thread["values"]["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["content"], "done: after interrupt", "{thread}");

    // rollback: the running run and everything it committed go away.
    let before = thread["values"]["messages"].as_array().unwrap().len();
    let slow = s
        .call(
            "POST",
            &format!("/threads/{t}/runs"),
            Some(&input("slow three")),
        )
        .json();
    let slow_id = slow["run_id"].as_str().unwrap().to_owned();
    poll_run(&s, &t, &slow_id, &["running"]);
    let mut rb = input("after rollback");
    rb["multitask_strategy"] = json!("rollback");
    let next = s.call("POST", &format!("/threads/{t}/runs/wait"), Some(&rb));
    assert_eq!(next.status, 200, "{}", next.body);
    let messages = next.json()["messages"].as_array().unwrap().clone();
    assert_eq!(messages.len(), before + 2, "{messages:?}");
    assert!(
        !next.body.contains("slow three"),
        "the rolled-back input stayed: {}",
        next.body
    );
    let gone = s.call("GET", &format!("/threads/{t}/runs/{slow_id}"), None);
    assert_eq!(gone.status, 404, "{}", gone.body);
}

#[test]
fn a_paused_run_is_reported_and_resumed_with_a_decision() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeOpenAI::hello_loop();
    // Without --yes, writes pause their run for a decision.
    let s = serve(&fake, dir.path(), &[]);
    let t = new_thread(&s);
    let r = s.call(
        "POST",
        &format!("/threads/{t}/runs/wait"),
        Some(&input("make hello.py")),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json();
    assert_eq!(v["run"]["status"], "interrupted", "{v}");
    let pending = &v["__interrupt__"][0];
    assert_eq!(
        pending["value"]["action_requests"][0]["name"], "write_file",
        "{v}"
    );
    assert!(!dir.path().join("hello.py").exists());
    let thread = s.call("GET", &format!("/threads/{t}"), None).json();
    assert_eq!(thread["status"], "interrupted");
    assert_eq!(
        thread["interrupts"].as_object().unwrap().len(),
        1,
        "{thread}"
    );
    // New input is refused while the run waits.
    let refused = s.call("POST", &format!("/threads/{t}/runs"), Some(&input("other")));
    assert_eq!(refused.status, 409, "{}", refused.body);
    // A bad decision is a 422 and changes nothing.
    let bad = s.call(
        "POST",
        &format!("/threads/{t}/runs"),
        Some(&json!({"assistant_id": "agent", "command": {"resume": {"decisions": [{"type": "maybe"}]}}})),
    );
    assert_eq!(bad.status, 422, "{}", bad.body);
    // Approve: the write runs and the run finishes.
    let ok = s.call(
        "POST",
        &format!("/threads/{t}/runs/wait"),
        Some(&json!({"assistant_id": "agent", "command": {"resume": {"decisions": [{"type": "approve"}]}}})),
    );
    assert_eq!(ok.status, 200, "{}", ok.body);
    assert_eq!(ok.json()["run"]["status"], "success", "{}", ok.body);
    assert!(dir.path().join("hello.py").is_file());
    let thread = s.call("GET", &format!("/threads/{t}"), None).json();
    assert_eq!(thread["status"], "idle");
}

#[test]
fn the_store_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeOpenAI::hello_loop();
    let s = serve(&fake, dir.path(), &["--yes"]);
    let put = s.call(
        "PUT",
        "/store/items",
        Some(&json!({"namespace": ["users", "u1"], "key": "prefs", "value": {"tone": "brief"}})),
    );
    assert_eq!(put.status, 204, "{}", put.body);
    let got = s.call("GET", "/store/items?namespace=users.u1&key=prefs", None);
    assert_eq!(got.status, 200, "{}", got.body);
    assert_eq!(got.json()["value"], json!({"tone": "brief"}));
    let found = s.call(
        "POST",
        "/store/items/search",
        Some(&json!({"namespace_prefix": ["users"], "filter": {"tone": "brief"}})),
    );
    assert_eq!(found.json()["items"][0]["key"], "prefs", "{}", found.body);
    let ns = s.call(
        "POST",
        "/store/namespaces",
        Some(&json!({"prefix": ["users"]})),
    );
    assert_eq!(ns.json()["namespaces"], json!([["users", "u1"]]));
    let del = s.call(
        "DELETE",
        "/store/items",
        Some(&json!({"namespace": ["users", "u1"], "key": "prefs"})),
    );
    assert_eq!(del.status, 204);
    assert_eq!(
        s.call("GET", "/store/items?namespace=users.u1&key=prefs", None)
            .status,
        404
    );
}

#[test]
fn bad_requests_get_4xx_answers_and_auth_is_enforced() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeOpenAI::start(|_| Reply::Text("hi".into()));
    let s = serve(
        &fake,
        dir.path(),
        &[
            "--yes",
            "--auth-token",
            "s3cret",
            "--max-body-bytes",
            "2048",
        ],
    );
    let auth = [("Authorization", "Bearer s3cret")];
    let call = |m: &str, p: &str, b: Option<&str>| request(&s.addr, m, p, &auth, b);
    // /ok needs no token; everything else does.
    assert_eq!(request(&s.addr, "GET", "/ok", &[], None).status, 200);
    let denied = request(&s.addr, "POST", "/threads", &[], Some("{}"));
    assert_eq!(denied.status, 401, "{}", denied.body);
    let wrong = request(
        &s.addr,
        "POST",
        "/threads",
        &[("Authorization", "Bearer nope")],
        Some("{}"),
    );
    assert_eq!(wrong.status, 401);
    assert_eq!(call("POST", "/threads", Some("{}")).status, 200);

    for (method, path, body, status) in [
        ("POST", "/threads", Some("{not json"), 422),
        ("POST", "/threads", Some("[1, 2]"), 422),
        ("GET", "/threads/no-such-thread", None, 404),
        (
            "POST",
            "/threads/no-such-thread/runs",
            Some(r#"{"input": {"messages": []}}"#),
            404,
        ),
        ("GET", "/runs/no-such-run", None, 404),
        ("POST", "/no/such/route", None, 404),
        ("POST", "/threads/search", Some(r#"{"limit": 0}"#), 422),
        (
            "POST",
            "/runs/wait",
            Some(r#"{"input": {"messages": [{"role": "wizard", "content": "x"}]}}"#),
            422,
        ),
        (
            "POST",
            "/runs/wait",
            Some(r#"{"assistant_id": "someone-else", "input": "hi"}"#),
            404,
        ),
        (
            "POST",
            "/runs/wait",
            Some(r#"{"input": "hi", "multitask_strategy": "bogus"}"#),
            422,
        ),
        (
            "PUT",
            "/store/items",
            Some(r#"{"namespace": [], "key": "k", "value": {}}"#),
            422,
        ),
    ] {
        let r = call(method, path, body);
        assert_eq!(r.status, status, "{method} {path} {body:?}: {}", r.body);
        let e = r.json();
        assert!(
            e["message"].as_str().is_some_and(|m| !m.is_empty()),
            "{method} {path}: {}",
            r.body
        );
    }
    let big = format!(r#"{{"metadata": {{"x": "{}"}}}}"#, "a".repeat(4096));
    assert_eq!(call("POST", "/threads", Some(&big)).status, 413);
    // A thread created twice.
    let t = call("POST", "/threads", Some(r#"{"thread_id": "t-1"}"#));
    assert_eq!(t.status, 200);
    assert_eq!(
        call("POST", "/threads", Some(r#"{"thread_id": "t-1"}"#)).status,
        409
    );
    assert_eq!(
        call(
            "POST",
            "/threads",
            Some(r#"{"thread_id": "t-1", "if_exists": "do_nothing"}"#)
        )
        .status,
        200
    );
}

/// The Python with `langgraph-sdk`: `$CAIRN_TEST_PYTHON` (`.ci/run` makes a virtual
/// environment and sets it), else the cache's virtual environment; under CI a missing client
/// fails the test instead of skipping it.
fn sdk_python() -> Option<std::path::PathBuf> {
    let candidates = [
        std::env::var_os("CAIRN_TEST_PYTHON").map(std::path::PathBuf::from),
        Some("/var/cache/cairn-ci/venv/bin/python".into()),
    ];
    for p in candidates.into_iter().flatten() {
        let ok = std::process::Command::new(&p)
            .args(["-c", "import langgraph_sdk"])
            .output()
            .is_ok_and(|o| o.status.success());
        if ok {
            return Some(p);
        }
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI: no Python with langgraph-sdk (set CAIRN_TEST_PYTHON; .ci/run installs it)"
    );
    eprintln!(
        "SKIPPED: no Python with langgraph-sdk (pip install langgraph-sdk; set CAIRN_TEST_PYTHON)"
    );
    None
}

#[test]
fn langgraphs_python_client_drives_the_server_as_deepagents_does() {
    let Some(python) = sdk_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeOpenAI::hello_loop();
    let s = serve(&fake, dir.path(), &["--yes", "--auth-token", "tok-123"]);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/sdk_client.py");
    let out = std::process::Command::new(python)
        .arg(script)
        .arg(format!("http://{}", s.addr))
        .arg("tok-123")
        .env_remove("LANGGRAPH_API_KEY")
        .env_remove("LANGSMITH_API_KEY")
        .env_remove("LANGCHAIN_API_KEY")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let seen: Value = serde_json::from_slice(out.stdout.trim_ascii()).unwrap();
    assert!(
        matches!(seen["created_status"].as_str(), Some("pending" | "running")),
        "{seen}"
    );
    assert_eq!(seen["status"], "success", "{seen}");
    assert_eq!(seen["last"], "Created hello.py; it prints hello.", "{seen}");
    assert_eq!(seen["thread_status"], "idle", "{seen}");
    // make hello.py, the write_file call, its result, the answer; then the follow-up and its answer.
    assert_eq!(seen["joined_messages"], 6, "{seen}");
    assert_eq!(
        seen["wait_last"], "Created hello.py; it prints hello.",
        "{seen}"
    );
    let events: Vec<&str> = seen["stream_events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(events.first(), Some(&"metadata"), "{seen}");
    assert!(
        events.contains(&"values") && events.contains(&"updates"),
        "{seen}"
    );
    assert_eq!(seen["store"], json!({"value": "brief"}), "{seen}");
    assert_eq!(seen["store_found"], 1, "{seen}");
    assert_eq!(seen["assistant"], "agent", "{seen}");
}

#[test]
fn a_subagents_events_carry_its_namespace() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeOpenAI::start(|body| {
        let first = body["messages"]
            .as_array()
            .and_then(|m| m.iter().find(|m| m["role"] == "user"))
            .and_then(|m| m["content"].as_str())
            .unwrap_or_default()
            .to_owned();
        let has_result = body["messages"]
            .as_array()
            .is_some_and(|m| m.iter().any(|m| m["role"] == "tool"));
        if first == "delegate it" && !has_result {
            Reply::Call(
                "task",
                json!({"description": "count to three", "subagent_type": "general-purpose"}),
            )
        } else if first == "delegate it" {
            Reply::Text("the subagent counted".into())
        } else {
            Reply::Text("one two three".into())
        }
    });
    let s = serve(&fake, dir.path(), &["--yes"]);
    let t = new_thread(&s);
    let mut req = input("delegate it");
    req["stream_mode"] = json!(["updates", "values"]);
    req["stream_subgraphs"] = json!(true);
    let r = s.call("POST", &format!("/threads/{t}/runs/stream"), Some(&req));
    assert_eq!(r.status, 200, "{}", r.body);
    let events = r.events();
    let nested: Vec<&String> = events
        .iter()
        .filter(|e| e.starts_with("updates|"))
        .collect();
    assert!(
        !nested.is_empty(),
        "no subagent event: {events:?}\n{}",
        r.body
    );
    assert!(r.body.contains("one two three"), "{}", r.body);
    assert_eq!(events.last().map(String::as_str), Some("end"));
    // Without stream_subgraphs only the top agent's events are sent.
    req["stream_subgraphs"] = json!(false);
    let r = s.call("POST", &format!("/threads/{t}/runs/stream"), Some(&req));
    assert!(
        r.events().iter().all(|e| !e.contains('|')),
        "{:?}",
        r.events()
    );
}
