//! BENCHMARKS.md §11: the latency of one MCP tool call over stdio (server-everything's `echo`,
//! Node.js) next to built-in tools (an in-process echo `FnTool`, and cairn-deep's `read_file`
//! on a directory), each called through `Tool::invoke` as the agent loop does.
//!
//! `CAIRN_MCP_NPM_DIR=/var/cache/cairn-ci/npm cargo run --release -p cairn-mcp --example mcp_latency [CALLS]`

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use cairn_core::{FnTool, FunctionInvocationContext, SharedTool, ToolOutput};
use cairn_mcp::{McpConfig, McpToolset, ServerConfig};
use serde_json::json;

async fn measure(name: &str, tool: &SharedTool, args: serde_json::Value, calls: usize) {
    let ctx = FunctionInvocationContext::new(Arc::clone(tool), "c", args);
    for _ in 0..calls / 10 {
        tool.invoke(&ctx).await.unwrap();
    }
    let mut times: Vec<Duration> = Vec::with_capacity(calls);
    for _ in 0..calls {
        let t = Instant::now();
        let out = tool.invoke(&ctx).await.unwrap();
        times.push(t.elapsed());
        assert!(!out.is_error, "{}", out.text_content());
    }
    times.sort();
    let p = |q: f64| times[((times.len() as f64 * q) as usize).min(times.len() - 1)];
    println!(
        "{name:<34} median {:>9.1} µs   p90 {:>9.1} µs   p99 {:>9.1} µs",
        p(0.5).as_secs_f64() * 1e6,
        p(0.9).as_secs_f64() * 1e6,
        p(0.99).as_secs_f64() * 1e6
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let calls: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(2000);
    let dir =
        std::env::var("CAIRN_MCP_NPM_DIR").unwrap_or_else(|_| "/var/cache/cairn-ci/npm".into());
    let script =
        format!("{dir}/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    let mut config = McpConfig::default();
    config.servers.insert(
        "everything".into(),
        ServerConfig::stdio("node", [script, "stdio".into()]),
    );
    let set = McpToolset::new(&config);
    let start = Instant::now();
    let tools = set.tools().await;
    println!(
        "server start + handshake + tools/list: {:.0} ms ({} tools)",
        start.elapsed().as_secs_f64() * 1e3,
        tools.len()
    );
    let echo = tools
        .iter()
        .find(|t| t.spec().name == "mcp__everything__echo")
        .expect("server-everything's echo")
        .clone();
    let builtin: SharedTool = Arc::new(FnTool::new(
        "echo",
        "Echoes.",
        json!({"type": "object"}),
        |ctx| async move {
            Ok(ToolOutput::text(format!(
                "Echo: {}",
                ctx.arguments["message"].as_str().unwrap_or_default()
            )))
        },
    ));
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("notes.md"), "line\n".repeat(50)).unwrap();
    let backend: cairn_deep::SharedBackend =
        Arc::new(cairn_deep::FilesystemBackend::new(tmp.path()).unwrap());
    let read_file = cairn_deep::tools::filesystem_tools(backend)
        .into_iter()
        .find(|t| t.spec().name == "read_file")
        .unwrap();
    println!("{calls} calls each, after {} warm-up calls", calls / 10);
    measure(
        "built-in echo (FnTool)",
        &builtin,
        json!({"message": "hello"}),
        calls,
    )
    .await;
    measure(
        "built-in read_file (50 lines)",
        &read_file,
        json!({"file_path": "/notes.md"}),
        calls,
    )
    .await;
    measure(
        "MCP echo over stdio (Node.js)",
        &echo,
        json!({"message": "hello"}),
        calls,
    )
    .await;
    set.shutdown().await;
}
