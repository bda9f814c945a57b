//! Two `cairn serve` workers on one PostgreSQL database (issue #11): 200 runs submitted to both,
//! one worker killed with SIGKILL mid-way; the other takes over its runs when their leases
//! expire and continues them from their last committed step. Every run ends `success`, once;
//! no thread holds a step twice.
//!
//! Needs `CAIRN_TEST_POSTGRES_URL` (`.ci/run` starts a cluster); under CI a missing database
//! fails the test.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::time::{Duration, Instant};

use cairn_test_support::blocking::{FakeOpenAI, Reply, has_tool_result};
use cairn_test_support::http::Served;
use serde_json::{Value, json};

fn postgres_url() -> Option<String> {
    match std::env::var("CAIRN_TEST_POSTGRES_URL") {
        Ok(u) if !u.trim().is_empty() => Some(u),
        _ => {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI: CAIRN_TEST_POSTGRES_URL is not set (.ci/run starts PostgreSQL)"
            );
            eprintln!("SKIPPED: set CAIRN_TEST_POSTGRES_URL to run the failover test");
            None
        }
    }
}

/// The text of the first user message.
fn task_of(body: &Value) -> String {
    body["messages"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["role"] == "user"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn a_killed_worker_s_runs_finish_on_the_other_exactly_once() {
    let Some(url) = postgres_url() else { return };
    const RUNS: usize = 200;
    // A three-step run: the model writes a file, reads the result, answers. Each model call
    // takes a little while so the kill lands while runs are in flight.
    let fake = FakeOpenAI::start(|body| {
        std::thread::sleep(Duration::from_millis(40));
        let task = task_of(body);
        if has_tool_result(body) {
            Reply::Text(format!("finished {task}"))
        } else {
            Reply::Call(
                "write_file",
                json!({"path": format!("/out/{}.txt", task.replace(' ', "_")), "content": task}),
            )
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let start = || {
        let mut c = fake.command(env!("CARGO_BIN_EXE_cairn"), dir.path());
        c.args([
            "serve",
            "--port",
            "0",
            "-m",
            "openai:fake",
            "--yes",
            "--lease",
            "2",
        ])
        .args(["--db", &url, "--max-runs", "8"]);
        Served::start(c)
    };
    let mut a = start();
    let b = start();
    let tag = format!("failover-{}", std::process::id());

    // Submit: threads and background runs, alternating between the workers.
    let mut runs: Vec<(String, String, String)> = Vec::new();
    for i in 0..RUNS {
        let s = if i % 2 == 0 { &a } else { &b };
        let t = s.call(
            "POST",
            "/threads",
            Some(&json!({"metadata": {"test": tag}})),
        );
        assert_eq!(t.status, 200, "{}", t.body);
        let thread = t.json()["thread_id"].as_str().unwrap().to_owned();
        let task = format!("task {i} {tag}");
        let r = s.call(
            "POST",
            &format!("/threads/{thread}/runs"),
            Some(&json!({"assistant_id": "agent", "metadata": {"test": tag},
                "input": {"messages": [{"role": "user", "content": task}]}})),
        );
        assert_eq!(r.status, 200, "{}", r.body);
        runs.push((
            thread,
            r.json()["run_id"].as_str().unwrap().to_owned(),
            task,
        ));
    }

    let statuses = |s: &Served| -> HashMap<String, Value> {
        let found = s.call(
            "POST",
            "/runs/search",
            Some(&json!({"metadata": {"test": tag}, "limit": 1000})),
        );
        assert_eq!(found.status, 200, "{}", found.body);
        let found: HashMap<String, Value> = found
            .json()
            .as_array()
            .unwrap()
            .iter()
            .map(|r| (r["run_id"].as_str().unwrap().to_owned(), r.clone()))
            .collect();
        assert_eq!(found.len(), RUNS);
        found
    };
    // Kill worker a once some runs have finished and others are under way.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let st = statuses(&b);
        let done = st.values().filter(|v| v["status"] == "success").count();
        if done >= RUNS / 5 {
            break;
        }
        assert!(Instant::now() < deadline, "runs do not progress");
        std::thread::sleep(Duration::from_millis(20));
    }
    a.child.kill().unwrap();
    a.child.wait().unwrap();

    // Everything finishes on b.
    let deadline = Instant::now() + Duration::from_secs(240);
    let finished = loop {
        let st = statuses(&b);
        if st
            .values()
            .all(|v| !matches!(v["status"].as_str(), Some("pending" | "running")))
        {
            break st;
        }
        assert!(Instant::now() < deadline, "runs stuck after the kill");
        std::thread::sleep(Duration::from_millis(200));
    };
    let failed: Vec<&Value> = finished
        .values()
        .filter(|v| v["status"] != "success")
        .collect();
    assert!(failed.is_empty(), "runs that did not succeed: {failed:?}");
    let taken_over = finished
        .values()
        .filter(|v| v["attempts"].as_u64().unwrap_or(0) > 1)
        .count();
    assert!(
        taken_over > 0,
        "no run was taken over from the killed worker"
    );

    // Each thread holds its run exactly once: input, call, result, answer.
    for (thread, _, task) in &runs {
        let t = b.call("GET", &format!("/threads/{thread}"), None).json();
        let messages = t["values"]["messages"].as_array().unwrap();
        let kinds: Vec<&str> = messages
            .iter()
            .map(|m| m["type"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, ["human", "ai", "tool", "ai"], "thread {thread}: {t}");
        assert_eq!(messages[3]["content"], format!("finished {task}"));
        let listed = b
            .call("GET", &format!("/threads/{thread}/runs"), None)
            .json();
        assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    }
    eprintln!("{taken_over} of {RUNS} runs were taken over after the kill");
    for (thread, _, _) in &runs {
        assert_eq!(
            b.call("DELETE", &format!("/threads/{thread}"), None).status,
            204
        );
    }
}
