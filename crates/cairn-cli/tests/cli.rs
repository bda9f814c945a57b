//! The `cairn` binary end to end against a fake OpenAI-compatible server (hermetic: 127.0.0.1,
//! temp dirs, no model files).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use assert_cmd::Command;
use cairn_test_support::blocking::{
    FakeOpenAI, Reply, closed_port, first_user, has_tool_result, last_tool_result,
};
use predicates::prelude::*;
use serde_json::{Value, json};

/// `cairn` with a clean environment pointing at `server`, working in `dir`.
fn cairn(server: &FakeOpenAI, dir: &std::path::Path) -> Command {
    let mut c = Command::from_std(server.command(env!("CARGO_BIN_EXE_cairn"), dir));
    c.timeout(std::time::Duration::from_secs(60));
    c
}

#[test]
fn help_explains_usage_and_examples() {
    Command::cargo_bin("cairn")
        .unwrap()
        .arg("--help")
        .assert()
        .success()
        .stdout(predicate::str::contains("cairn run"))
        .stdout(predicate::str::contains("Examples:"))
        .stdout(predicate::str::contains("--yes"))
        .stdout(predicate::str::contains("local:"));
    Command::cargo_bin("cairn")
        .unwrap()
        .args(["run", "--help"])
        .assert()
        .success()
        .stdout(predicate::str::contains("TASK"));
}

#[test]
fn usage_errors_exit_2() {
    Command::cargo_bin("cairn")
        .unwrap()
        .arg("run")
        .assert()
        .code(2)
        .stderr(predicate::str::contains("TASK"));
    Command::cargo_bin("cairn")
        .unwrap()
        .args(["--max-steps", "0", "run", "x"])
        .assert()
        .code(2);
}

#[test]
fn run_writes_the_file_and_shows_the_call_and_summary() {
    let server = FakeOpenAI::hello_loop();
    let dir = tempfile::tempdir().unwrap();
    cairn(&server, dir.path())
        .args([
            "run",
            "--yes",
            "--model",
            "openai:fake",
            "create hello.py that prints hello",
        ])
        .assert()
        .success()
        // The answer on stdout alone; the activity and the summary on stderr.
        .stdout(predicate::str::contains("Created hello.py"))
        .stdout(predicate::str::contains("→").not())
        .stdout(predicate::str::contains("✓").not())
        .stderr(predicate::str::contains("→ write_file /hello.py (1 line)"))
        .stderr(predicate::str::contains("Created hello.py").not())
        .stderr(
            predicate::str::is_match(
                r"✓ 2 steps · 1 tool call · tokens 240 in / 60 out · \d+\.\d s",
            )
            .unwrap(),
        );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("hello.py")).unwrap(),
        "print('hello')\n"
    );
    let bodies = server.bodies();
    assert_eq!(bodies.len(), 2);
    assert_eq!(bodies[0]["model"], "fake");
    assert_eq!(bodies[0]["stream"], true);
    let tools: Vec<&str> = bodies[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    for t in [
        "write_file",
        "edit_file",
        "execute",
        "read_file",
        "write_todos",
    ] {
        assert!(tools.contains(&t), "{t} missing from {tools:?}");
    }
    assert!(last_tool_result(&bodies[1]).is_some());
}

#[test]
fn json_mode_prints_one_event_per_line_and_a_summary() {
    let server = FakeOpenAI::hello_loop();
    let dir = tempfile::tempdir().unwrap();
    let out = cairn(&server, dir.path())
        .args([
            "run",
            "--yes",
            "--json",
            "-m",
            "openai:fake",
            "make hello.py",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    let events: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let types: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    assert!(types.contains(&"tool_call_start"), "{types:?}");
    assert!(types.contains(&"tool_result"), "{types:?}");
    assert!(types.contains(&"text_delta"), "{types:?}");
    assert!(types.contains(&"run_completed"), "{types:?}");
    let last = events.last().unwrap();
    assert_eq!(last["type"], "summary");
    assert_eq!(last["steps"], 2);
    assert_eq!(last["tool_calls"], 1);
    assert_eq!(last["input_tokens"], 240);
    assert!(dir.path().join("hello.py").is_file());
}

#[test]
fn without_a_terminal_and_without_yes_a_write_pauses_the_run() {
    let server = FakeOpenAI::hello_loop();
    let dir = tempfile::tempdir().unwrap();
    cairn(&server, dir.path())
        .args(["run", "-m", "openai:fake", "create hello.py"])
        .write_stdin("a\n")
        .assert()
        // Nobody could be asked: the call waits, the run pauses (#10), nothing is written.
        .code(4)
        .stderr(predicate::str::contains(
            "waiting for a decision on write_file",
        ))
        .stderr(predicate::str::contains("cairn resume"));
    assert!(!dir.path().join("hello.py").exists());
    let bodies = server.bodies();
    assert_eq!(bodies.len(), 1, "the model was not asked again");
    // The approvals section is in the system prompt when calls are reviewed.
    assert!(
        bodies[0]["messages"][0]["content"]
            .as_str()
            .unwrap()
            .contains("Approvals")
    );
}

#[test]
fn execute_runs_in_the_root_directory() {
    let server = FakeOpenAI::start(|body| {
        if has_tool_result(body) {
            Reply::Text(format!(
                "Output: {}",
                last_tool_result(body).unwrap_or_default()
            ))
        } else {
            Reply::Call("execute", json!({"command": "echo hi > out.txt && pwd"}))
        }
    });
    let dir = tempfile::tempdir().unwrap();
    cairn(&server, dir.path())
        .args(["run", "--yes", "-m", "openai:fake", "run a command"])
        .assert()
        .success()
        .stderr(predicate::str::contains(
            "→ execute $ echo hi > out.txt && pwd",
        ));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("out.txt")).unwrap(),
        "hi\n"
    );
}

#[test]
fn todos_render_as_a_checklist() {
    let server = FakeOpenAI::start(|body| {
        if has_tool_result(body) {
            Reply::Text("Planned.".into())
        } else {
            Reply::Call(
                "write_todos",
                json!({"todos": [
                    {"content": "write hello.py", "status": "completed"},
                    {"content": "run it", "status": "in_progress"},
                    {"content": "report", "status": "pending"}
                ]}),
            )
        }
    });
    let dir = tempfile::tempdir().unwrap();
    cairn(&server, dir.path())
        .args(["run", "-y", "-m", "openai:fake", "plan"])
        .assert()
        .success()
        .stderr(predicate::str::contains("[x] write hello.py"))
        .stderr(predicate::str::contains("[~] run it"))
        .stderr(predicate::str::contains("[ ] report"))
        .stdout(predicate::str::diff("Planned.\n"));
}

#[test]
fn root_flag_chooses_the_directory() {
    let server = FakeOpenAI::hello_loop();
    let dir = tempfile::tempdir().unwrap();
    let other = tempfile::tempdir().unwrap();
    cairn(&server, dir.path())
        .args(["run", "-y", "-m", "openai:fake", "--root"])
        .arg(other.path())
        .arg("make hello.py")
        .assert()
        .success();
    assert!(other.path().join("hello.py").is_file());
    assert!(!dir.path().join("hello.py").exists());
}

#[test]
fn server_errors_exit_1_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    // Nothing listens on this port (bound, then dropped).
    let port = closed_port();
    Command::cargo_bin("cairn")
        .unwrap()
        .current_dir(dir.path())
        .env_clear()
        .env("OPENAI_BASE_URL", format!("http://127.0.0.1:{port}/v1"))
        .args(["run", "-y", "-m", "openai:fake", "hello"])
        .timeout(std::time::Duration::from_secs(120))
        .assert()
        .code(1)
        .stderr(predicate::str::contains("cairn: error:"));
}

#[test]
fn missing_local_model_says_how_to_fetch_it() {
    let dir = tempfile::tempdir().unwrap();
    Command::cargo_bin("cairn")
        .unwrap()
        .current_dir(dir.path())
        .env_clear()
        .env("CAIRN_MODEL_DIR", dir.path().join("no-models"))
        .args(["run", "hello"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("scripts/fetch-model.sh"))
        .stderr(predicate::str::contains("demo.sh"));
    Command::cargo_bin("cairn")
        .unwrap()
        .current_dir(dir.path())
        .env_clear()
        .args(["run", "-m", "local:/nonexistent/model.gguf", "hello"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("/nonexistent/model.gguf"));
}

#[test]
fn bad_model_strings_are_clear() {
    let dir = tempfile::tempdir().unwrap();
    Command::cargo_bin("cairn")
        .unwrap()
        .current_dir(dir.path())
        .env_clear()
        .args(["run", "-m", "gpt-4.1", "hello"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("provider:model"));
    Command::cargo_bin("cairn")
        .unwrap()
        .current_dir(dir.path())
        .env_clear()
        .args(["run", "-m", "nosuch:model", "hello"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("known providers"));
}

#[test]
fn chat_keeps_the_session_across_turns() {
    let server = FakeOpenAI::start(|body| {
        let users = body["messages"]
            .as_array()
            .map(|m| m.iter().filter(|m| m["role"] == "user").count())
            .unwrap_or(0);
        Reply::Text(format!("turn with {users} user messages"))
    });
    let dir = tempfile::tempdir().unwrap();
    cairn(&server, dir.path())
        .args(["chat", "-m", "openai:fake"])
        .write_stdin("hello\nand again\n")
        .assert()
        .success()
        .stdout(predicate::str::contains("turn with 1 user messages"))
        .stdout(predicate::str::contains("turn with 2 user messages"));
}

#[test]
fn ctrl_c_stops_the_run_with_status_130() {
    let server = FakeOpenAI::start(|_| {
        std::thread::sleep(std::time::Duration::from_secs(30));
        Reply::Text("too late".into())
    });
    let dir = tempfile::tempdir().unwrap();
    let child = std::process::Command::new(assert_cmd::cargo::cargo_bin("cairn"))
        .current_dir(dir.path())
        .env_clear()
        .env("OPENAI_BASE_URL", &server.base_url)
        .args(["run", "-y", "-m", "openai:fake", "wait"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the request reached the server, then interrupt.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while server.bodies().is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(
        !server.bodies().is_empty(),
        "the run never called the model"
    );
    let started = std::time::Instant::now();
    let killed = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let out = child.wait_with_output().unwrap();
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    assert_eq!(out.status.code(), Some(130));
    assert!(String::from_utf8_lossy(&out.stderr).contains("interrupted"));
}

#[test]
fn subagent_activity_is_indented() {
    let server = FakeOpenAI::start(|body| {
        let sub = first_user(body).contains("SUBTASK");
        match (sub, has_tool_result(body)) {
            (true, false) => Reply::Call("ls", json!({"path": "/"})),
            (true, true) => Reply::Text("sub report: listed".into()),
            (false, false) => Reply::Call(
                "task",
                json!({"description": "SUBTASK: list the files", "subagent_type": "general-purpose"}),
            ),
            (false, true) => Reply::Text("Main done.".into()),
        }
    });
    let dir = tempfile::tempdir().unwrap();
    cairn(&server, dir.path())
        .args(["run", "-y", "-m", "openai:fake", "delegate"])
        .assert()
        .success()
        .stderr(predicate::str::contains(
            "→ task general-purpose: SUBTASK: list the files",
        ))
        .stderr(predicate::str::contains("  ┌ subagent"))
        .stderr(predicate::str::contains("  │ → ls /"))
        .stderr(predicate::str::contains("  │ sub report: listed"))
        .stderr(predicate::str::contains("4 steps · 2 tool calls"))
        // Only the main agent's answer is on stdout.
        .stdout(predicate::str::diff("Main done.\n"));
}

/// Issue #15 item 6: the system prompt says where the agent works (directory, git branch and
/// state, OS, date), carries AGENTS.md from the user's config and the repository down to the
/// working directory, and lists skills from `~/.config/cairn/skills/` and `.cairn/skills/`.
#[test]
fn the_system_prompt_tells_the_model_where_it_is() {
    let server = FakeOpenAI::start(|_| Reply::Text("fine".into()));
    let home = tempfile::tempdir().unwrap();
    let repo = tempfile::tempdir().unwrap();
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .arg("-C")
            .arg(repo.path())
            .args(args)
            .output()
            .is_ok_and(|o| o.status.success())
    };
    let has_git = git(&["init", "-q", "-b", "trunk-15"]);
    if !has_git {
        std::fs::create_dir_all(repo.path().join(".git")).unwrap();
        std::fs::write(repo.path().join(".git/HEAD"), "ref: refs/heads/trunk-15\n").unwrap();
    }
    let work = repo.path().join("pkg/app");
    std::fs::create_dir_all(work.join(".cairn/skills/deploy")).unwrap();
    std::fs::write(
        work.join(".cairn/skills/deploy/SKILL.md"),
        "---\nname: deploy\ndescription: PROJECT-SKILL ships the app.\n---\nsteps\n",
    )
    .unwrap();
    std::fs::create_dir_all(home.path().join(".config/cairn/skills/review")).unwrap();
    std::fs::write(
        home.path().join(".config/cairn/skills/review/SKILL.md"),
        "---\nname: review\ndescription: USER-SKILL reviews a diff.\n---\nsteps\n",
    )
    .unwrap();
    std::fs::write(home.path().join(".config/cairn/AGENTS.md"), "USER-DOC").unwrap();
    std::fs::write(repo.path().join("AGENTS.md"), "REPO-DOC").unwrap();
    std::fs::write(repo.path().join("pkg/AGENTS.md"), "PKG-DOC").unwrap();
    std::fs::write(work.join("AGENTS.md"), "ROOT-DOC").unwrap();
    cairn(&server, &work)
        .env("HOME", home.path())
        .args(["run", "-y", "-m", "openai:fake", "hello"])
        .assert()
        .success();
    let body = &server.bodies()[0];
    let system = body["messages"][0]["content"].as_str().unwrap().to_owned();
    assert_eq!(body["messages"][0]["role"], "system");
    let work = work.canonicalize().unwrap();
    assert!(
        system.contains(&format!(
            "- Working directory: the project `{}`, which the file tools see as `/`",
            work.file_name().unwrap().to_string_lossy()
        )),
        "{system}"
    );
    assert!(system.contains("on branch `trunk-15`"), "{system}");
    if has_git {
        // The untracked files make it dirty.
        assert!(system.contains("with uncommitted changes"), "{system}");
    }
    assert!(
        system.contains(&format!("- OS: {}", std::env::consts::OS)),
        "{system}"
    );
    assert!(system.contains("- Date: 20"), "{system}");
    // User-level first, then the repository root down to the working directory.
    let at = |s: &str| {
        system
            .find(s)
            .unwrap_or_else(|| panic!("{s} missing: {system}"))
    };
    assert!(at("USER-DOC") < at("REPO-DOC"));
    assert!(at("REPO-DOC") < at("PKG-DOC"));
    assert!(at("PKG-DOC") < at("ROOT-DOC"));
    assert!(system.contains("USER-SKILL"), "{system}");
    assert!(system.contains("PROJECT-SKILL"), "{system}");
}
