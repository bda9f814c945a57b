//! The `cairn` binary's command sandbox (issue #13) end to end: the default workspace-write
//! sandbox and the note the model reads, `--sandbox off`, the fallback on a kernel without
//! Landlock (simulated with a seccomp filter that makes the Landlock system calls fail with
//! `ENOSYS`, as such a kernel does), and exec rules from the config file.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![cfg(target_os = "linux")]

use std::path::Path;

use assert_cmd::Command;
use cairn_test_support::blocking::{FakeOpenAI, Reply, has_tool_result, last_tool_result};
use serde_json::json;

/// Calls `execute` with `command` once, then answers with the tool result it saw.
fn server_running(command: &'static str) -> FakeOpenAI {
    FakeOpenAI::start(move |body| {
        if has_tool_result(body) {
            Reply::Text(format!(
                "Saw: {}",
                last_tool_result(body).unwrap_or_default()
            ))
        } else {
            Reply::Call("execute", json!({ "command": command }))
        }
    })
}

fn cairn(server: &FakeOpenAI, dir: &Path) -> std::process::Command {
    server.command(env!("CARGO_BIN_EXE_cairn"), dir)
}

fn run(cmd: std::process::Command) -> (Option<i32>, String) {
    let out = Command::from_std(cmd)
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A directory outside every writable root (not under the temp directories).
fn outside() -> tempfile::TempDir {
    let d = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    assert!(!d.path().starts_with(std::env::temp_dir()) && !d.path().starts_with("/tmp"));
    d
}

#[test]
fn by_default_commands_are_sandboxed_and_the_model_is_told_why_they_failed() {
    let out = outside();
    let target = out.path().join("pwned.txt");
    let command: &'static str =
        Box::leak(format!("echo pwned > {}", target.display()).into_boxed_str());
    let server = server_running(command);
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = cairn(&server, dir.path());
    cmd.args(["run", "--yes", "-m", "openai:fake", "write outside"]);
    let (code, stderr) = run(cmd);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("sandbox: workspace-write, no network"),
        "{stderr}"
    );
    assert!(!target.exists(), "the command wrote outside the project");
    let bodies = server.bodies();
    let result = last_tool_result(bodies.last().unwrap()).unwrap();
    assert!(result.contains("Permission denied"), "{result}");
    assert!(
        result.contains("[sandbox] This was probably blocked by cairn's sandbox (workspace-write"),
        "{result}"
    );
    assert!(result.contains("--sandbox off"), "{result}");
}

#[test]
fn sandbox_off_runs_commands_unconfined_and_the_banner_says_so() {
    let out = outside();
    let target = out.path().join("written.txt");
    let command: &'static str =
        Box::leak(format!("echo written > {}", target.display()).into_boxed_str());
    let server = server_running(command);
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = cairn(&server, dir.path());
    cmd.args([
        "run",
        "--yes",
        "--sandbox",
        "off",
        "-m",
        "openai:fake",
        "write outside",
    ]);
    let (code, stderr) = run(cmd);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("sandbox OFF: commands run with your full rights"),
        "{stderr}"
    );
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "written\n");
}

#[test]
fn without_landlock_cairn_says_so_once_and_asks_before_every_command() {
    // `ls` is allowed by the default rules and `--yes` approves everything, yet without a
    // sandbox the command waits for a person: with no terminal to ask on, the run pauses.
    let server = server_running("ls > listing.txt; ls");
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = cairn(&server, dir.path());
    cmd.args(["run", "--yes", "-m", "openai:fake", "list"]);
    cairn_sandbox::testing::hide_landlock(&mut cmd).unwrap();
    let (code, stderr) = run(cmd);
    assert_eq!(code, Some(4), "{stderr}");
    assert_eq!(
        stderr
            .matches("commands cannot be sandboxed on this system")
            .count(),
        1,
        "{stderr}"
    );
    assert!(stderr.contains("no Landlock"), "{stderr}");
    assert!(
        stderr.contains("no sandbox on this system: asking before every command"),
        "{stderr}"
    );
    assert!(
        stderr.contains("waiting for a decision on execute"),
        "{stderr}"
    );
    assert!(!dir.path().join("listing.txt").exists());

    // `--sandbox off` is the explicit way to run them unconfined there.
    let server = server_running("ls > listing.txt");
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = cairn(&server, dir.path());
    cmd.args([
        "run",
        "--yes",
        "--sandbox",
        "off",
        "-m",
        "openai:fake",
        "list",
    ]);
    cairn_sandbox::testing::hide_landlock(&mut cmd).unwrap();
    let (code, stderr) = run(cmd);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!stderr.contains("cannot be sandboxed"), "{stderr}");
    assert!(dir.path().join("listing.txt").exists());
}

#[test]
fn read_only_commands_run_without_a_question_and_config_rules_forbid() {
    // No --yes and no terminal: a guarded command would pause the run, but `ls` is allowed.
    let server = server_running("ls -a");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("visible.txt"), "x").unwrap();
    let mut cmd = cairn(&server, dir.path());
    cmd.args(["run", "-m", "openai:fake", "list"]);
    let (code, stderr) = run(cmd);
    assert_eq!(code, Some(0), "{stderr}");
    let bodies = server.bodies();
    assert!(
        last_tool_result(bodies.last().unwrap())
            .unwrap()
            .contains("visible.txt")
    );

    // A forbid rule of the config: the command never runs, even with --yes.
    let config = outside();
    let path = config.path().join("config.toml");
    std::fs::write(
        &path,
        "[[exec_rules]]\nprefix = \"touch\"\ndecision = \"forbid\"\nmatch = [\"touch a\"]\njustification = \"no new files\"\n",
    )
    .unwrap();
    let server = server_running("touch made.txt");
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = cairn(&server, dir.path());
    cmd.env("CAIRN_CONFIG", &path)
        .args(["run", "--yes", "-m", "openai:fake", "touch"]);
    let (code, stderr) = run(cmd);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!dir.path().join("made.txt").exists());
    let bodies = server.bodies();
    let result = last_tool_result(bodies.last().unwrap()).unwrap();
    assert!(
        result.contains("not allowed") && result.contains("rule `forbid touch` (no new files)"),
        "{result}"
    );

    // A rule whose example does not match stops cairn before anything runs.
    std::fs::write(
        &path,
        "[[exec_rules]]\nprefix = \"touch\"\ndecision = \"forbid\"\nmatch = [\"tuch a\"]\n",
    )
    .unwrap();
    let server = server_running("touch made.txt");
    let mut cmd = cairn(&server, dir.path());
    cmd.env("CAIRN_CONFIG", &path)
        .args(["run", "--yes", "-m", "openai:fake", "touch"]);
    let (code, stderr) = run(cmd);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("does not match"), "{stderr}");
    assert!(server.bodies().is_empty());
}
