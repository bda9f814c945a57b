//! cairn-mcp's client against real MCP servers: `@modelcontextprotocol/server-everything` and
//! `@modelcontextprotocol/server-filesystem` (installed by `.ci/run` with npm; the tests fail
//! under CI=true when they are missing), over stdio and streamable HTTP, driven by deep agents;
//! and the misbehaving fixture server for a server that exits mid-call, one that never
//! answers and one whose tool list changes.

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use cairn_core::testing::ScriptedClient;
use cairn_core::{
    ChatResponse, Content, Decision, InMemoryCheckpointer, Message, SharedCheckpointer,
    ThreadCursor,
};
use cairn_deep::{DeepAgent, SubAgent};
use cairn_mcp::{ClientError, McpConfig, McpToolset, ServerConfig, ServerState};
use serde_json::{Value, json};

fn config(servers: impl IntoIterator<Item = (&'static str, ServerConfig)>) -> McpConfig {
    McpConfig {
        servers: servers
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect(),
    }
}

fn stdio(node: &std::path::Path, script: &std::path::Path, args: &[&str]) -> ServerConfig {
    let mut a = vec![script.display().to_string()];
    a.extend(args.iter().map(|s| (*s).to_owned()));
    ServerConfig::stdio(node.display().to_string(), a)
}

/// The results the model was sent in the request after the tool calls, by call id.
fn results(client: &ScriptedClient, request: usize) -> Vec<(String, String, bool, Vec<Content>)> {
    let req = &client.requests()[request];
    req.messages
        .iter()
        .flat_map(|m: &Message| m.function_results())
        .map(|r| (r.call_id.clone(), r.text(), r.is_error, r.output.clone()))
        .collect()
}

fn result_text(client: &ScriptedClient, request: usize, call_id: &str) -> (String, bool) {
    // The latest result of that id (each scripted turn numbers its calls from call_0).
    results(client, request)
        .into_iter()
        .rev()
        .find(|r| r.0 == call_id)
        .map(|r| (r.1, r.2))
        .unwrap_or_else(|| panic!("no result for {call_id}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_deep_agent_calls_server_everything_over_stdio() {
    let Some((node, script)) = support::npm_server("server-everything") else {
        return;
    };
    let mcp = McpToolset::new(&config([(
        "everything",
        stdio(&node, &script, &["stdio"]).env("CAIRN_MCP_TEST_MARKER", "given"),
    )]));
    let client = ScriptedClient::from_responses([
        ChatResponse::tool_calls([
            (
                "mcp__everything__echo",
                json!({"message": "hello over stdio"}),
            ),
            ("mcp__everything__get-sum", json!({"a": 2, "b": 40})),
            ("mcp__everything__get-tiny-image", json!({})),
            (
                "mcp__everything__get-structured-content",
                json!({"location": "Chicago"}),
            ),
            ("mcp__everything__get-env", json!({})),
            ("mcp__everything__get-sum", json!({"a": "two"})),
        ]),
        ChatResponse::text("All done."),
    ]);
    let agent = DeepAgent::builder()
        .client(client.clone())
        .middleware(mcp.clone())
        .build()
        .unwrap();
    let answer = agent.run("use the everything server").await.unwrap();
    assert_eq!(answer.text(), "All done.");

    // The schema is the server's, passed through.
    let first = &client.requests()[0];
    let echo = first
        .options
        .tools
        .iter()
        .find(|t| t.name == "mcp__everything__echo")
        .expect("the echo tool is offered");
    assert_eq!(echo.parameters["properties"]["message"]["type"], "string");
    assert_eq!(echo.parameters["required"], json!(["message"]));
    assert!(!echo.description.is_empty());

    let (echo, err) = result_text(&client, 1, "call_0");
    assert_eq!(echo, "Echo: hello over stdio");
    assert!(!err);
    let (sum, _) = result_text(&client, 1, "call_1");
    assert!(sum.contains("is 42"), "{sum}");
    let image = results(&client, 1)
        .into_iter()
        .find(|r| r.0 == "call_2")
        .unwrap();
    assert!(
        image.3.iter().any(
            |p| matches!(p, Content::Image { url, media_type } if url.starts_with("data:image/png;base64,") && media_type.as_deref() == Some("image/png"))
        ),
        "{:?}",
        image.3
    );
    let (weather, _) = result_text(&client, 1, "call_3");
    let v: Value = serde_json::from_str(weather.trim()).unwrap();
    assert!(v["temperature"].is_number(), "{weather}");
    // The server's environment is the minimal one plus its config's env: cargo's variables
    // (set for this test process) do not reach it.
    let (env, _) = result_text(&client, 1, "call_4");
    let env: Value = serde_json::from_str(&env).unwrap();
    assert_eq!(env["CAIRN_MCP_TEST_MARKER"], "given");
    assert!(env.get("PATH").is_some());
    assert!(std::env::var_os("CARGO_MANIFEST_DIR").is_some());
    assert!(env.get("CARGO_MANIFEST_DIR").is_none(), "{env}");
    assert!(env.get("CARGO_PKG_NAME").is_none());
    // Bad arguments: the server's error reaches the model as an error result.
    let (bad, err) = result_text(&client, 1, "call_5");
    assert!(err, "{bad}");
    assert!(bad.starts_with("Error"), "{bad}");
    mcp.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_deep_agent_calls_server_everything_over_streamable_http() {
    let Some((node, script)) = support::npm_server("server-everything") else {
        return;
    };
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut server = tokio::process::Command::new(&node)
        .arg(&script)
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    // Wait until it listens (or exits).
    loop {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            break;
        }
        if let Some(status) = server.try_wait().unwrap() {
            panic!("server-everything exited: {status}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mcp = McpToolset::new(&config([(
        "web",
        ServerConfig::http(format!("http://127.0.0.1:{port}/mcp")).header("X-Cairn-Test", "1"),
    )]));
    let client = ScriptedClient::from_responses([
        ChatResponse::tool_calls([
            ("mcp__web__echo", json!({"message": "hello over http"})),
            ("mcp__web__get-sum", json!({"a": 1, "b": 2})),
        ]),
        ChatResponse::text("ok"),
    ]);
    let agent = DeepAgent::builder()
        .client(client.clone())
        .middleware(mcp.clone())
        .build()
        .unwrap();
    agent.run("go").await.unwrap();
    assert_eq!(result_text(&client, 1, "call_0").0, "Echo: hello over http");
    assert!(result_text(&client, 1, "call_1").0.contains("is 3"));
    mcp.shutdown().await;
    let _ = server.kill().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn filesystem_writes_wait_for_approval_and_reads_do_not() {
    let Some((node, script)) = support::npm_server("server-filesystem") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::write(root.join("notes.txt"), "first line\n").unwrap();
    let root_s = root.display().to_string();
    let mcp = McpToolset::new(&config([("fs", stdio(&node, &script, &[&root_s]))]));
    let target = root.join("out.txt").display().to_string();
    let model = |responses: Vec<ChatResponse>| ScriptedClient::from_responses(responses);
    let client = model(vec![
        ChatResponse::tool_calls([
            (
                "mcp__fs__read_text_file",
                json!({"path": root.join("notes.txt").display().to_string()}),
            ),
            (
                "mcp__fs__write_file",
                json!({"path": target, "content": "written through MCP"}),
            ),
        ]),
        ChatResponse::text("Wrote it."),
    ]);
    let threads: SharedCheckpointer = Arc::new(InMemoryCheckpointer::new());
    let thread = threads
        .create_thread(None, Default::default())
        .await
        .unwrap();
    let cursor = ThreadCursor::new(Arc::clone(&threads), thread.id);
    let agent = |c: ScriptedClient| {
        DeepAgent::builder()
            .client(c)
            .middleware(mcp.clone())
            .build()
            .unwrap()
    };
    let paused = agent(client.clone())
        .run("copy notes")
        .thread(cursor.clone())
        .await
        .unwrap();
    assert_eq!(paused.interrupts.len(), 1, "{:?}", paused.interrupts);
    assert_eq!(paused.interrupts[0].tool, "mcp__fs__write_file");
    assert!(
        !std::path::Path::new(&target).exists(),
        "nothing written before approval"
    );

    let client = model(vec![ChatResponse::text("Wrote it.")]);
    let done = agent(client.clone())
        .resume(cursor)
        .decisions([(paused.interrupts[0].id.clone(), Decision::Approve)])
        .await
        .unwrap();
    assert_eq!(done.text(), "Wrote it.");
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        "written through MCP"
    );
    let all = results(&client, 0);
    let read = all.iter().find(|r| r.0 == "call_0").unwrap();
    assert!(read.1.contains("first line"), "{read:?}");
    mcp.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_subagent_has_its_own_servers() {
    let Some((node, script)) = support::npm_server("server-everything") else {
        return;
    };
    let own = McpToolset::new(&config([(
        "everything",
        stdio(&node, &script, &["stdio"]).allow(["echo"]),
    )]));
    // The main agent has no MCP server; its subagent `researcher` has one.
    let client = ScriptedClient::from_responses([
        ChatResponse::tool_calls([(
            "task",
            json!({"description": "echo something", "subagent_type": "researcher"}),
        )]),
        ChatResponse::tool_calls([(
            "mcp__everything__echo",
            json!({"message": "from the subagent"}),
        )]),
        ChatResponse::text("subagent report"),
        ChatResponse::text("done"),
    ]);
    let agent = DeepAgent::builder()
        .client(client.clone())
        .subagent(
            SubAgent::new("researcher", "Has the everything server.")
                .system_prompt("Research.")
                .middleware(own.clone()),
        )
        .build()
        .unwrap();
    agent.run("delegate").await.unwrap();
    let reqs = client.requests();
    let names = |i: usize| -> Vec<String> {
        reqs[i]
            .options
            .tools
            .iter()
            .map(|t| t.name.clone())
            .collect()
    };
    assert!(
        !names(0).iter().any(|n| n.starts_with("mcp__")),
        "{:?}",
        names(0)
    );
    // The subagent's tools: only the allowed `echo`.
    let sub: Vec<String> = names(1)
        .into_iter()
        .filter(|n| n.starts_with("mcp__"))
        .collect();
    assert_eq!(sub, ["mcp__everything__echo"]);
    assert_eq!(
        result_text(&client, 2, "call_0").0,
        "Echo: from the subagent"
    );
    own.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_exits_mid_call_or_never_answers_yields_errors_and_the_run_completes() {
    let Some((node, script)) = support::misbehaving() else {
        return;
    };
    let mcp = McpToolset::new(&config([
        (
            "hangs",
            stdio(&node, &script, &[]).tool_timeout(Duration::from_millis(300)),
        ),
        ("crashes", stdio(&node, &script, &[]).trusted(true)),
    ]));
    let client = ScriptedClient::from_responses([
        ChatResponse::tool_calls([("mcp__hangs__hang", json!({}))]),
        ChatResponse::tool_calls([("mcp__crashes__crash", json!({}))]),
        ChatResponse::tool_calls([("mcp__crashes__echo", json!({"text": "still there?"}))]),
        ChatResponse::text("finished anyway"),
    ]);
    let agent = DeepAgent::builder()
        .client(client.clone())
        .middleware(mcp.clone().guarded(false))
        .build()
        .unwrap();
    let answer = agent.run("try the broken servers").await.unwrap();
    assert_eq!(answer.text(), "finished anyway");
    let (hang, err) = result_text(&client, 1, "call_0");
    assert!(err);
    assert!(hang.starts_with("Error: "), "{hang}");
    assert!(
        hang.contains("hangs") && hang.contains("no answer within"),
        "{hang}"
    );
    let (crash, err) = result_text(&client, 2, "call_0");
    assert!(err);
    assert!(
        crash.starts_with("Error: ") && crash.contains("crashes"),
        "{crash}"
    );
    assert!(crash.contains("stopped"), "{crash}");
    let (after, err) = result_text(&client, 3, "call_0");
    assert!(err, "{after}");
    assert!(after.starts_with("Error: "), "{after}");

    // The next run starts the dead server again.
    let client = ScriptedClient::from_responses([
        ChatResponse::tool_calls([("mcp__crashes__echo", json!({"text": "back"}))]),
        ChatResponse::text("ok"),
    ]);
    let agent = DeepAgent::builder()
        .client(client.clone())
        .middleware(mcp.clone().guarded(false))
        .build()
        .unwrap();
    agent.run("again").await.unwrap();
    assert_eq!(
        result_text(&client, 1, "call_0"),
        ("back".to_owned(), false)
    );
    mcp.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_fails_to_start_is_reported_once_and_runs_go_on() {
    let Some((node, script)) = support::misbehaving() else {
        return;
    };
    let reports = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&reports);
    let mcp = McpToolset::new(&config([
        ("ok", stdio(&node, &script, &[])),
        (
            "missing",
            ServerConfig::stdio("/nonexistent/cairn-mcp-server", [""; 0]),
        ),
        (
            "silent",
            // A program that never speaks MCP: start-up times out.
            ServerConfig::stdio("sleep", ["30"]).startup_timeout(Duration::from_millis(300)),
        ),
    ]))
    .on_failure(move |name, e: &ClientError| {
        seen.lock().unwrap().push((name.to_owned(), e.to_string()));
    });
    for round in 0..2 {
        let client = ScriptedClient::from_responses([
            ChatResponse::tool_calls([("mcp__ok__echo", json!({"text": "fine"}))]),
            ChatResponse::text("done"),
        ]);
        let agent = DeepAgent::builder()
            .client(client.clone())
            .middleware(mcp.clone())
            .build()
            .unwrap();
        let r = agent.run("go").await.unwrap();
        assert_eq!(r.text(), "done", "round {round}");
        assert_eq!(result_text(&client, 1, "call_0").0, "fine");
    }
    let reports = reports.lock().unwrap().clone();
    assert_eq!(reports.len(), 2, "{reports:?}");
    let missing = reports.iter().find(|r| r.0 == "missing").unwrap();
    assert!(missing.1.contains("cannot start"), "{missing:?}");
    let silent = reports.iter().find(|r| r.0 == "silent").unwrap();
    assert!(silent.1.contains("did not start within"), "{silent:?}");
    let status = mcp.status().await;
    assert!(matches!(
        status.iter().find(|s| s.name == "ok").unwrap().state,
        ServerState::Running { .. }
    ));
    assert!(matches!(
        status.iter().find(|s| s.name == "missing").unwrap().state,
        ServerState::Failed(_)
    ));
    mcp.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn tools_are_listed_lazily_and_again_after_list_changed() {
    let Some((node, script)) = support::misbehaving() else {
        return;
    };
    let mcp = McpToolset::new(&config([("m", stdio(&node, &script, &[]).trusted(true))]));
    let status = mcp.clone();
    // Nothing starts before the first run.
    let client = ScriptedClient::from_responses([
        ChatResponse::tool_calls([("mcp__m__grow", json!({}))]),
        ChatResponse::text("grown"),
        ChatResponse::tool_calls([("mcp__m__extra", json!({}))]),
        ChatResponse::text("used extra"),
    ]);
    let agent = DeepAgent::builder()
        .client(client.clone())
        .middleware(mcp.clone())
        .build()
        .unwrap();
    agent.run("grow").await.unwrap();
    let names = |i: usize| -> Vec<String> {
        client.requests()[i]
            .options
            .tools
            .iter()
            .map(|t| t.name.clone())
            .filter(|n| n.starts_with("mcp__"))
            .collect()
    };
    assert!(!names(0).contains(&"mcp__m__extra".to_owned()));
    // The notification arrives after the call's answer; wait for it to be seen.
    for _ in 0..200 {
        if status
            .tools()
            .await
            .iter()
            .any(|t| t.spec().name == "mcp__m__extra")
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    agent.run("use the new tool").await.unwrap();
    assert!(
        names(2).contains(&"mcp__m__extra".to_owned()),
        "{:?}",
        names(2)
    );
    assert_eq!(result_text(&client, 3, "call_0").0, "extra here");
    mcp.shutdown().await;
}
