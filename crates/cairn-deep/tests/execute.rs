//! `execute` through LocalShellBackend.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![cfg(unix)]

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use cairn_deep::backend::{Executor, LocalShellBackend, ShellConfig, StateBackend};
use cairn_deep::tools::{execute_tool, filesystem_tools};
use common::{Tools, call_tool};
use serde_json::json;

fn shell(dir: &std::path::Path) -> LocalShellBackend {
    LocalShellBackend::new(dir)
        .unwrap()
        .env("PATH", "/usr/bin:/bin")
}

#[tokio::test]
async fn output_exit_code_and_stderr_marking() {
    let dir = tempfile::tempdir().unwrap();
    let t = Tools::new(Arc::new(shell(dir.path())));
    assert_eq!(t.tools.last().unwrap().spec().name, "execute");
    assert_eq!(
        t.ok("execute", json!({"command": "echo hello"})).await,
        "hello\n[exit code 0]"
    );
    assert_eq!(
        t.ok(
            "execute",
            json!({"command": "echo out; echo oops >&2; echo more >&2; exit 3"})
        )
        .await,
        "out\n[stderr] oops\n[stderr] more\n[exit code 3]"
    );
    assert_eq!(
        t.ok("execute", json!({"command": "true"})).await,
        "[no output]\n[exit code 0]"
    );
    // The working directory is the root, and files written there are visible to the file tools.
    t.ok(
        "execute",
        json!({"command": "printf 'made by sh\\n' > made.txt"}),
    )
    .await;
    assert_eq!(
        t.ok("read_file", json!({"path": "/made.txt"})).await,
        "1\tmade by sh"
    );
    let pwd = t.ok("execute", json!({"command": "pwd"})).await;
    let root = std::fs::canonicalize(dir.path()).unwrap();
    assert_eq!(pwd, format!("{}\n[exit code 0]", root.display()));
}

#[tokio::test]
async fn environment_is_empty_unless_configured() {
    let dir = tempfile::tempdir().unwrap();
    // SAFETY-free check: the test process has HOME set; the command must not see it.
    let bare = LocalShellBackend::new(dir.path()).unwrap();
    let out = bare
        .execute("echo \"[$HOME][$CAIRN_X]\"", None)
        .await
        .unwrap();
    assert_eq!(out.output, "[][]\n");
    let with = shell(dir.path()).env("CAIRN_X", "1");
    let out = with
        .execute("echo \"[$HOME][$CAIRN_X]\"", None)
        .await
        .unwrap();
    assert_eq!(out.output, "[][1]\n");
}

#[tokio::test]
async fn timeout_kills_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let t = Tools::new(Arc::new(shell(dir.path())));
    let start = Instant::now();
    assert_eq!(
        t.err("execute", json!({"command": "sleep 30", "timeout": 1}))
            .await,
        "Error: the command timed out after 1s and was killed. Give a larger timeout or run something faster."
    );
    assert!(start.elapsed() < Duration::from_secs(10));
    assert_eq!(
        t.err("execute", json!({"command": "true", "timeout": 99999}))
            .await,
        "Error: timeout 99999s exceeds the maximum of 3600s. Use at most 3600."
    );
    assert_eq!(
        t.err("execute", json!({"command": "true", "timeout": 0}))
            .await,
        "Error: timeout must be at least 1 second. Omit it for the default."
    );
}

#[tokio::test]
async fn output_is_capped_with_a_note() {
    let dir = tempfile::tempdir().unwrap();
    let backend = shell(dir.path()).with_config(ShellConfig {
        max_output_bytes: 100,
        env: vec![("PATH".into(), "/usr/bin:/bin".into())],
        ..ShellConfig::default()
    });
    let out = backend
        .execute("yes abc | head -c 5000", None)
        .await
        .unwrap();
    assert!(out.truncated);
    assert_eq!(
        out.output,
        format!(
            "{}\n[output truncated: 5000 bytes, only the first 100 shown]\n",
            "abc\n".repeat(25).trim_end()
        )
    );
}

#[tokio::test]
async fn backends_that_cannot_execute_get_no_execute_tool() {
    let tools = filesystem_tools(Arc::new(StateBackend::new()));
    assert!(tools.iter().all(|t| t.spec().name != "execute"));
    let tool = execute_tool(Arc::new(StateBackend::new()));
    let out = call_tool(&tool, json!({"command": "ls"}), None).await;
    assert!(out.is_error);
    assert_eq!(
        out.text_content(),
        "Error: this agent's backend cannot run commands. Use the file tools instead."
    );
}
