//! `cairn mcp serve` driven by rmcp's own client over stdio: `run` answers with the thread
//! id, `reply` on that id sees the first exchange; a guarded call pauses the run (the client
//! declares no elicitation) and `reply` with a decision finishes it. And `cairn mcp list`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use cairn_test_support::blocking::{FakeOpenAI, Reply, has_tool_result};
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

fn last_user(body: &Value) -> String {
    body["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
        .map(|m| m["content"].to_string())
        .unwrap_or_default()
}

async fn serve(
    server: &FakeOpenAI,
    dir: &Path,
    extra: &[&str],
) -> rmcp::service::RunningService<rmcp::RoleClient, ()> {
    let mut cmd = tokio::process::Command::new(assert_cmd::cargo::cargo_bin("cairn"));
    cmd.current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", dir)
        .env("CAIRN_DB", dir.join("threads.db"))
        .env("OPENAI_BASE_URL", &server.base_url)
        .env("NO_COLOR", "1")
        .args(["mcp", "serve", "-m", "openai:fake"])
        .args(extra);
    let (transport, _stderr) = TokioChildProcess::builder(cmd)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    ().serve(transport).await.expect("the MCP handshake")
}

async fn call(
    client: &rmcp::service::RunningService<rmcp::RoleClient, ()>,
    tool: &'static str,
    args: Value,
) -> CallToolResult {
    let Value::Object(args) = args else {
        unreachable!()
    };
    client
        .call_tool(CallToolRequestParams::new(tool).with_arguments(args))
        .await
        .unwrap()
}

fn texts(r: &CallToolResult) -> Vec<String> {
    r.content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn run_then_reply_on_the_returned_thread_sees_the_first_exchange() {
    let server = FakeOpenAI::start(|body| {
        let user = last_user(body);
        if user.contains("remember the number 41") {
            Reply::Text("Noted: 41.".into())
        } else {
            let all = body.to_string();
            Reply::Text(
                if all.contains("remember the number 41") && all.contains("Noted: 41.") {
                    "You asked me to remember 41.".into()
                } else {
                    "I have no earlier exchange.".into()
                },
            )
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let client = serve(&server, dir.path(), &["-y"]).await;
    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, ["run", "reply"]);

    let first = call(&client, "run", json!({"task": "remember the number 41"})).await;
    assert_ne!(first.is_error, Some(true), "{first:?}");
    let t = texts(&first);
    assert_eq!(t[0], "Noted: 41.");
    let thread = first.structured_content.as_ref().unwrap()["thread_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(t[1], format!("thread_id: {thread}"));

    let second = call(
        &client,
        "reply",
        json!({"thread_id": thread, "message": "what did I ask you?"}),
    )
    .await;
    assert_ne!(second.is_error, Some(true), "{second:?}");
    assert_eq!(texts(&second)[0], "You asked me to remember 41.");
    assert_eq!(
        second.structured_content.as_ref().unwrap()["thread_id"],
        json!(thread)
    );
    // A new run is a new thread, without the first exchange.
    let other = call(&client, "run", json!({"task": "what did I ask you?"})).await;
    assert_eq!(texts(&other)[0], "I have no earlier exchange.");
    assert_ne!(
        other.structured_content.as_ref().unwrap()["thread_id"],
        json!(thread)
    );
    // Unknown threads are an error result, not a crash.
    let bad = call(
        &client,
        "reply",
        json!({"thread_id": "nope", "message": "hi"}),
    )
    .await;
    assert_eq!(bad.is_error, Some(true));
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn without_elicitation_a_guarded_call_pauses_and_reply_decides() {
    let server = FakeOpenAI::start(|body| {
        if has_tool_result(body) {
            Reply::Text("Wrote notes.md.".into())
        } else {
            Reply::Call(
                "write_file",
                json!({"file_path": "/notes.md", "content": "from MCP\n"}),
            )
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let client = serve(&server, dir.path(), &[]).await;
    let paused = call(&client, "run", json!({"task": "write notes"})).await;
    let text = texts(&paused).join("\n");
    assert!(
        text.contains("paused") && text.contains("write_file"),
        "{text}"
    );
    assert!(text.contains("decision"), "{text}");
    let s = paused.structured_content.clone().unwrap();
    assert_eq!(s["status"], "paused");
    assert!(!dir.path().join("notes.md").exists());
    let thread = s["thread_id"].as_str().unwrap().to_owned();

    let undecided = call(
        &client,
        "reply",
        json!({"thread_id": thread, "message": "go on"}),
    )
    .await;
    assert_eq!(undecided.is_error, Some(true));
    let done = call(
        &client,
        "reply",
        json!({"thread_id": thread, "decision": "approve"}),
    )
    .await;
    assert_eq!(texts(&done)[0], "Wrote notes.md.", "{done:?}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("notes.md")).unwrap(),
        "from MCP\n"
    );
    client.cancel().await.unwrap();
}

#[test]
fn mcp_list_shows_servers_and_failures() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".cairn")).unwrap();
    std::fs::write(
        dir.path().join(".cairn/mcp.json"),
        r#"{"mcpServers": {"gone": {"command": "/nonexistent/mcp-server"}}}"#,
    )
    .unwrap();
    let extra = dir.path().join("extra.json");
    std::fs::write(
        &extra,
        r#"{"mcpServers": {"also": {"command": "/nonexistent/other"}}}"#,
    )
    .unwrap();
    let out = assert_cmd::Command::cargo_bin("cairn")
        .unwrap()
        .current_dir(dir.path())
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", dir.path())
        .args(["mcp", "list", "--json", "--mcp-config"])
        .arg(&extra)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["also", "gone"]);
    assert!(
        v.as_array()
            .unwrap()
            .iter()
            .all(|s| s["status"] == "failed")
    );
    assert!(v[1]["error"].as_str().unwrap().contains("cannot start"));
}
