//! The CLI keeps its threads (issue #9): every run is a thread in the user's database, a killed
//! run is finished by `cairn resume`, and `/memories/` is shared between threads.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use assert_cmd::Command;
use cairn_test_support::blocking::{FakeOpenAI, Reply, first_user, last_tool_result};
use serde_json::{Value, json};

/// `cairn` against `server`, working in `dir`, keeping its threads in `db`.
fn cairn(server: &FakeOpenAI, dir: &Path, db: &Path) -> Command {
    let mut c = Command::cargo_bin("cairn").unwrap();
    c.current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", dir)
        .env("CAIRN_DB", db)
        .env("OPENAI_BASE_URL", &server.base_url)
        .env("NO_COLOR", "1")
        .timeout(Duration::from_secs(60));
    c
}

/// `cairn resume --last`, allowing every call, on the fake model.
const RESUME_LAST: [&str; 5] = ["resume", "--last", "-y", "-m", "openai:fake"];

/// `cairn run -y TASK` started in the background against `server`, output discarded.
fn spawn_run(server: &FakeOpenAI, dir: &Path, db: &Path, task: &str) -> std::process::Child {
    server
        .command(assert_cmd::cargo::cargo_bin("cairn"), dir)
        .env("CAIRN_DB", db)
        .args(["run", "-y", "-m", "openai:fake", task])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

fn threads_json(server: &FakeOpenAI, dir: &Path, db: &Path) -> Vec<Value> {
    let out = cairn(server, dir, db)
        .args(["threads", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice::<Value>(&out.stdout)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

fn tool_results(body: &Value) -> usize {
    body["messages"]
        .as_array()
        .map(|m| m.iter().filter(|m| m["role"] == "tool").count())
        .unwrap_or(0)
}

#[test]
fn a_run_is_a_thread_that_can_be_listed_shown_and_removed() {
    let server = FakeOpenAI::hello_loop();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("cairn.db");
    let out = cairn(&server, dir.path(), &db)
        .args(["run", "-y", "--json", "-m", "openai:fake", "make hello.py"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let first: Value =
        serde_json::from_slice(out.stdout.split(|b| *b == b'\n').next().unwrap()).unwrap();
    assert_eq!(first["type"], "thread");
    let id = first["id"].as_str().unwrap().to_owned();

    let list = threads_json(&server, dir.path(), &db);
    assert_eq!(list.len(), 1);
    assert_eq!(list[0]["id"], id.as_str());
    assert_eq!(list[0]["status"], "completed");
    assert_eq!(list[0]["title"], "make hello.py");
    let cwd = dir.path().canonicalize().unwrap();
    assert_eq!(list[0]["cwd"], cwd.display().to_string());

    let shown = cairn(&server, dir.path(), &db)
        .args(["threads", "show", &id[..8]])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&shown.stdout);
    assert!(
        text.contains("make hello.py")
            && text.contains("write_file")
            && text.contains("Created hello.py"),
        "{text}"
    );

    cairn(&server, dir.path(), &db)
        .args(["threads", "rm", &id])
        .assert()
        .success();
    assert!(threads_json(&server, dir.path(), &db).is_empty());
    cairn(&server, dir.path(), &db)
        .args(["threads", "show", &id])
        .assert()
        .failure();
}

#[test]
fn a_killed_run_is_finished_by_resume_last_without_repeating_a_step() {
    // Two commands that each append a line, then an answer. The first process hangs on the
    // model call after the second command and is killed there with SIGKILL.
    let hung = Arc::new(AtomicBool::new(false));
    let release = Arc::new(AtomicBool::new(false));
    let (h, r) = (Arc::clone(&hung), Arc::clone(&release));
    let server = FakeOpenAI::start(move |body| match tool_results(body) {
        0 => Reply::Call("execute", json!({"command": "echo one >> log.txt"})),
        1 => Reply::Call("execute", json!({"command": "echo two >> log.txt"})),
        _ => {
            if !h.swap(true, Ordering::SeqCst) {
                while !r.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
            Reply::Text("all done".into())
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("threads.db");
    let mut child = spawn_run(&server, dir.path(), &db, "log twice");
    let deadline = Instant::now() + Duration::from_secs(30);
    while server.bodies().len() < 3 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        server.bodies().len(),
        3,
        "the run reached its third model call"
    );
    child.kill().unwrap();
    child.wait().unwrap();
    release.store(true, Ordering::SeqCst);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("log.txt")).unwrap(),
        "one\ntwo\n"
    );
    let list = threads_json(&server, dir.path(), &db);
    assert_eq!(list[0]["status"], "running", "cut off, not finished");

    let out = cairn(&server, dir.path(), &db)
        .args(RESUME_LAST)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("all done"));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("log.txt")).unwrap(),
        "one\ntwo\n",
        "no committed command ran again"
    );
    // The model was asked once more, with both results, each once.
    let last = server.bodies().last().cloned().unwrap();
    assert_eq!(tool_results(&last), 2);
    assert_eq!(
        threads_json(&server, dir.path(), &db)[0]["status"],
        "completed"
    );

    // Nothing left to resume; more input continues the thread.
    let out = cairn(&server, dir.path(), &db)
        .args(RESUME_LAST)
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("nothing to resume"));
}

#[test]
fn memories_written_in_one_thread_are_read_in_another_project() {
    let server = FakeOpenAI::start(|body| {
        match (first_user(body).contains("remember"), tool_results(body)) {
            (true, 0) => Reply::Call(
                "write_file",
                json!({"path": "/memories/prefs.md", "content": "The user likes tabs.\n"}),
            ),
            (false, 0) => Reply::Call("read_file", json!({"path": "/memories/prefs.md"})),
            _ => Reply::Text("ok".into()),
        }
    });
    let home = tempfile::tempdir().unwrap();
    let db = home.path().join("cairn.db");
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    cairn(&server, a.path(), &db)
        .args([
            "run",
            "-y",
            "-m",
            "openai:fake",
            "remember that I like tabs",
        ])
        .assert()
        .success();
    assert!(
        !a.path().join("memories").exists(),
        "memories live in the store, not the project"
    );
    cairn(&server, b.path(), &db)
        .args(["run", "-y", "-m", "openai:fake", "what do I like?"])
        .assert()
        .success();
    let last = server.bodies().last().cloned().unwrap();
    let result = last_tool_result(&last).unwrap();
    assert!(result.contains("The user likes tabs."), "{result}");
    // The prompt tells the agent where its memories are.
    let system = last["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(system.contains("/memories/"), "{system}");
    assert_eq!(threads_json(&server, b.path(), &db).len(), 2);
}

/// The conversation of the thread `--last` in `dir`, as `threads show --json` gives it.
fn last_transcript(server: &FakeOpenAI, dir: &Path, db: &Path) -> Value {
    let id = threads_json(server, dir, db)[0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let out = cairn(server, dir, db)
        .args(["threads", "show", &id, "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn sigkill_at_twenty_points_then_resume_gives_the_uninterrupted_transcript() {
    const STEPS: usize = 8;
    // The server can hold one request (by its number) until the test releases it: the kill
    // then always lands inside the run, however fast or slow the machine is.
    let served = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let hold_at = Arc::new(std::sync::atomic::AtomicUsize::new(usize::MAX));
    let release = Arc::new(AtomicBool::new(false));
    let (n, h, r) = (
        Arc::clone(&served),
        Arc::clone(&hold_at),
        Arc::clone(&release),
    );
    // Each step appends its own line with a command, then the model answers.
    let server = FakeOpenAI::start(move |body| {
        let this = n.fetch_add(1, Ordering::SeqCst) + 1;
        if this == h.load(Ordering::SeqCst) {
            let until = Instant::now() + Duration::from_secs(30);
            while !r.load(Ordering::SeqCst) && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        let k = tool_results(body);
        if k < STEPS {
            Reply::Call(
                "execute",
                json!({"command": format!("echo step{k} >> log.txt")}),
            )
        } else {
            Reply::Text("finished".into())
        }
    });
    let run_in = |dir: &Path, db: &Path| spawn_run(&server, dir, db, "log the steps");
    // The reference: one uninterrupted run.
    let reference = {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("t.db");
        assert!(run_in(dir.path(), &db).wait().unwrap().success());
        last_transcript(&server, dir.path(), &db)["messages"].clone()
    };
    assert_eq!(reference.as_array().unwrap().len(), 2 + 2 * STEPS);

    let mut points = 0;
    let mut cut = 0;
    // Kill points: after model request `request` arrived, plus 0, 2 or 4 ms (during the reply,
    // the command, the commits), with request `request + 1` held so the run cannot finish first.
    for request in 1..=STEPS {
        for delay_ms in [0u64, 2, 4] {
            points += 1;
            let dir = tempfile::tempdir().unwrap();
            let db = dir.path().join("t.db");
            let before = served.load(Ordering::SeqCst);
            release.store(false, Ordering::SeqCst);
            hold_at.store(before + request + 1, Ordering::SeqCst);
            let mut child = run_in(dir.path(), &db);
            let deadline = Instant::now() + Duration::from_secs(30);
            while served.load(Ordering::SeqCst) < before + request && Instant::now() < deadline {
                std::thread::sleep(Duration::from_micros(200));
            }
            std::thread::sleep(Duration::from_millis(delay_ms));
            let _ = child.kill();
            child.wait().unwrap();
            hold_at.store(usize::MAX, Ordering::SeqCst);
            release.store(true, Ordering::SeqCst);
            let at_kill = last_transcript(&server, dir.path(), &db);
            let committed = at_kill["messages"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|m| {
                    m["contents"]
                        .as_array()
                        .is_some_and(|c| c.iter().any(|c| c["type"] == "function_result"))
                })
                .count();
            if at_kill["thread"]["status"] != "completed" {
                cut += 1;
            }
            let out = cairn(&server, dir.path(), &db)
                .args(RESUME_LAST)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "point {request}/{delay_ms}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let done = last_transcript(&server, dir.path(), &db);
            assert_eq!(
                done["thread"]["status"], "completed",
                "point {request}/{delay_ms}"
            );
            assert_eq!(
                done["messages"], reference,
                "point {request}/{delay_ms}: transcript differs"
            );
            let log = std::fs::read_to_string(dir.path().join("log.txt")).unwrap_or_default();
            for k in 0..STEPS {
                let n = log.lines().filter(|l| *l == format!("step{k}")).count();
                if k < committed {
                    assert_eq!(
                        n, 1,
                        "point {request}/{delay_ms}: committed step{k} ran {n} times: {log}"
                    );
                } else {
                    // A call cut off before its result was committed runs again (documented).
                    assert!(
                        (1..=2).contains(&n),
                        "point {request}/{delay_ms}: step{k} ran {n} times"
                    );
                }
            }
        }
    }
    assert_eq!(points, 24);
    assert_eq!(cut, points, "every kill landed inside the run");
}

/// `cairn run` without a terminal pauses on `write_file`; returns the interrupt events.
fn paused_run(server: &FakeOpenAI, dir: &Path, db: &Path) -> Vec<Value> {
    let out = cairn(server, dir, db)
        .args(["run", "--json", "-m", "openai:fake", "make hello.py"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!dir.join("hello.py").exists());
    let events: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .filter(|e: &Value| e["type"] == "interrupt")
        .collect();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["tool"], "write_file");
    assert_eq!(threads_json(server, dir, db)[0]["status"], "interrupted");
    events
}

#[test]
fn a_paused_run_is_approved_rejected_or_edited_by_a_later_process() {
    let server = FakeOpenAI::hello_loop();

    // Approve: the file is written.
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    paused_run(&server, dir.path(), &db);
    cairn(&server, dir.path(), &db)
        .args(["resume", "--last", "-m", "openai:fake", "--approve"])
        .assert()
        .success();
    assert_eq!(
        std::fs::read_to_string(dir.path().join("hello.py")).unwrap(),
        "print('hello')\n"
    );
    assert_eq!(
        threads_json(&server, dir.path(), &db)[0]["status"],
        "completed"
    );

    // Reject with a message: nothing written, the model reads the message.
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    paused_run(&server, dir.path(), &db);
    cairn(&server, dir.path(), &db)
        .args([
            "resume",
            "--last",
            "-m",
            "openai:fake",
            "--reject=not in this directory",
        ])
        .assert()
        .success();
    assert!(!dir.path().join("hello.py").exists());
    let result = last_tool_result(server.bodies().last().unwrap()).unwrap();
    assert!(result.contains("not in this directory"), "{result}");

    // Edit, naming the interrupt by its id from the --json event.
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    let events = paused_run(&server, dir.path(), &db);
    let id = events[0]["id"].as_str().unwrap();
    cairn(&server, dir.path(), &db)
        .args([
            "resume",
            "--last",
            "-m",
            "openai:fake",
            "--edit",
            &format!(r#"{id}={{"path": "/hello.py", "content": "print('edited')\n"}}"#),
        ])
        .assert()
        .success();
    assert_eq!(
        std::fs::read_to_string(dir.path().join("hello.py")).unwrap(),
        "print('edited')\n"
    );

    // No decision given, no terminal: it stays paused.
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    paused_run(&server, dir.path(), &db);
    cairn(&server, dir.path(), &db)
        .args(["resume", "--last", "-m", "openai:fake"])
        .assert()
        .code(4);
    assert!(!dir.path().join("hello.py").exists());
}
