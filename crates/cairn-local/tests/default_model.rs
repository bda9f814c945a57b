//! The end-to-end test of the real default model (Qwen2.5-Coder-1.5B-Instruct Q4_K_M, fetched by
//! `scripts/fetch-model.sh default`): a cairn agent writes a requested file through a tool call.
//! Prints a notice and passes when the file is absent.

#![allow(clippy::expect_used, clippy::unwrap_used)] // test helpers may panic

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use cairn_core::{Agent, ChatOptions, FnTool, LoopConfig, ToolOutput};
use cairn_local::{KnownModel, LocalClient, LocalConfig, LocalModel};
use serde_json::json;

fn write_file_tool(root: PathBuf) -> FnTool {
    let root = Arc::new(root);
    FnTool::new(
        "write_file",
        "Create or overwrite a file in the workspace with the given content.",
        json!({"type": "object", "properties": {
            "path": {"type": "string", "description": "File name relative to the workspace."},
            "content": {"type": "string", "description": "The whole file content."}
        }, "required": ["path", "content"]}),
        move |ctx| {
            let root = Arc::clone(&root);
            async move {
                let path = ctx.arguments["path"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                let content = ctx.arguments["content"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                let name = path.trim_start_matches('/');
                if name.is_empty() || name.contains("..") {
                    return Ok(ToolOutput::error("Error: give a relative file name."));
                }
                let full = root.join(name);
                if let Some(dir) = full.parent() {
                    std::fs::create_dir_all(dir).map_err(cairn_core::ToolError::failed)?;
                }
                std::fs::write(&full, &content).map_err(cairn_core::ToolError::failed)?;
                Ok(ToolOutput::text(format!("Updated file {path}")))
            }
        },
    )
}

fn list_dir_tool() -> FnTool {
    FnTool::new(
        "ls",
        "List the files in a directory of the workspace.",
        json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
        |_ctx| async move { Ok(ToolOutput::text("(empty)")) },
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_writes_the_requested_file() {
    let Some(path) = KnownModel::Default.find() else {
        assert!(
            std::env::var_os("CAIRN_REQUIRE_MODELS").is_none(),
            "CAIRN_REQUIRE_MODELS is set but the default model is missing"
        );
        eprintln!(
            "SKIPPED: the default model is not at {} (run scripts/fetch-model.sh default)",
            KnownModel::Default.path().display()
        );
        return;
    };
    let t = Instant::now();
    let model = tokio::task::spawn_blocking(move || {
        LocalModel::load(
            path,
            LocalConfig {
                n_ctx: 4096,
                max_tokens: 160,
                ..Default::default()
            },
        )
    })
    .await
    .expect("join")
    .expect("the default model loads");
    eprintln!("loaded in {:.1}s", t.elapsed().as_secs_f64());

    let dir = tempfile::tempdir().expect("temp dir");
    let agent = Agent::builder(LocalClient::new(model))
        .instructions(
            "You are a coding agent working in a sandboxed workspace. Use the tools to inspect and \
             change files. Keep answers short. When the task is done, say what you did in one \
             sentence.",
        )
        .tool(list_dir_tool())
        .tool(write_file_tool(dir.path().to_path_buf()))
        .default_options(ChatOptions {
            max_tokens: Some(160),
            ..Default::default()
        })
        .loop_config(LoopConfig {
            max_iterations: 3,
            ..Default::default()
        })
        .build();
    let t = Instant::now();
    let response = agent
        .run("Create a file named hello.txt containing exactly this text: Hello from cairn")
        .await
        .expect("the run succeeds");
    eprintln!(
        "run took {:.1}s, {} model calls, usage {:?}",
        t.elapsed().as_secs_f64(),
        response.model_calls,
        response.usage
    );
    for m in &response.messages {
        eprintln!("{:?}: {:?}", m.role, m.contents);
    }
    let written =
        std::fs::read_to_string(dir.path().join("hello.txt")).expect("the agent wrote hello.txt");
    assert!(written.contains("Hello from cairn"), "{written:?}");
    assert!(response.function_calls().any(|c| c.name == "write_file"));
    // Turn 2 reused the KV cache of turn 1.
    assert!(
        response.usage.cached_input_tokens > 0,
        "{:?}",
        response.usage
    );
}
