//! The local model's harness profile keeps the system block (system prompt + tool schemas) within
//! its token budget. Counted with the default model's own tokenizer when its file is cached
//! (`scripts/fetch-model.sh`), else estimated at 4 characters per token.

#![allow(clippy::unwrap_used, clippy::expect_used)]
#![cfg(feature = "local")]

use std::sync::Arc;

use cairn_cli::app::{AgentSetup, build_agent};
use cairn_cli::profile::{LOCAL_PROMPT_BUDGET_TOKENS, local_profile};
use cairn_core::{ChatResponse, testing::ScriptedClient};
use cairn_deep::{ApprovalHandler, ApprovalRequest, Decision};
use cairn_local::prompt::{RenderOptions, render};
use cairn_local::{KnownModel, LocalConfig, LocalModel, PromptFormat};

fn reject(_: &ApprovalRequest) -> Decision {
    Decision::Reject { message: None }
}

/// The system block the local model would see, with and without approvals.
async fn system_block(approvals: bool) -> (String, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let client = ScriptedClient::from_responses([ChatResponse::text("ok")]);
    let setup = AgentSetup {
        root: dir.path().to_path_buf(),
        max_steps: 10,
        profile: local_profile(8192),
        counter: None,
        guarded: approvals,
        approver: approvals.then(|| Arc::new(reject) as Arc<dyn ApprovalHandler>),
        memories: None,
    };
    let agent = build_agent(Arc::new(client.clone()), &setup).unwrap();
    agent.run("hi").await.unwrap();
    let req = &client.requests()[0];
    let text = render(
        &[],
        RenderOptions {
            format: PromptFormat::Qwen,
            instructions: req.options.instructions.as_deref(),
            tools: &req.options.tools,
            add_generation_prompt: false,
            tools_first: true,
            remind: true,
        },
        None,
    );
    let names = req.options.tools.iter().map(|t| t.name.clone()).collect();
    (text, names)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn system_prompt_and_tools_fit_the_budget() {
    let counter: Box<dyn Fn(&str) -> usize> = match KnownModel::Default.find() {
        Some(path) => {
            let config = LocalConfig {
                n_ctx: 512,
                ..LocalConfig::default()
            };
            let model = tokio::task::spawn_blocking(move || LocalModel::load(path, config))
                .await
                .unwrap()
                .unwrap();
            eprintln!("counting with the default model's tokenizer");
            Box::new(move |t: &str| model.count_tokens(t))
        }
        None => {
            eprintln!("default model not cached: estimating 4 chars per token");
            Box::new(|t: &str| t.chars().count().div_ceil(4))
        }
    };
    for approvals in [false, true] {
        let (block, tools) = system_block(approvals).await;
        let tokens = counter(&block);
        eprintln!(
            "approvals {approvals}: {} chars, {tokens} tokens, tools {tools:?}",
            block.len()
        );
        assert!(
            tokens <= LOCAL_PROMPT_BUDGET_TOKENS,
            "{tokens} tokens > {LOCAL_PROMPT_BUDGET_TOKENS}:\n{block}"
        );
        assert!(!tools.contains(&"task".to_owned()));
        assert!(!tools.contains(&"glob".to_owned()));
        assert!(!tools.contains(&"write_todos".to_owned()));
        for t in [
            "write_file",
            "edit_file",
            "execute",
            "read_file",
            "ls",
            "grep",
        ] {
            assert!(tools.contains(&t.to_owned()), "{t} missing");
        }
    }
}

#[tokio::test]
async fn replies_are_capped() {
    let dir = tempfile::tempdir().unwrap();
    let client = ScriptedClient::from_responses([ChatResponse::text("ok")]);
    let setup = AgentSetup {
        root: dir.path().to_path_buf(),
        max_steps: 10,
        profile: local_profile(4096),
        counter: None,
        guarded: false,
        approver: None,
        memories: None,
    };
    let agent = build_agent(Arc::new(client.clone()), &setup).unwrap();
    agent.run("hi").await.unwrap();
    assert_eq!(client.requests()[0].options.max_tokens, Some(256));
}

#[tokio::test]
async fn large_tool_results_are_offloaded() {
    use cairn_core::Message;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("big.txt"),
        "a line of text in a big file\n".repeat(2000),
    )
    .unwrap();
    let client = ScriptedClient::new(|req| {
        Ok(match req.tool_results() {
            0 => ChatResponse::tool_calls([(
                "execute",
                serde_json::json!({"command": "cat big.txt"}),
            )]),
            1 => ChatResponse::tool_calls([(
                "read_file",
                serde_json::json!({"path": "/large_tool_results/call_0", "limit": 3}),
            )]),
            2 => ChatResponse::tool_calls([("read_file", serde_json::json!({"path": "/big.txt"}))]),
            _ => ChatResponse::text("done"),
        })
    });
    let setup = AgentSetup {
        root: dir.path().to_path_buf(),
        max_steps: 10,
        profile: local_profile(4096),
        counter: None,
        guarded: false,
        approver: None,
        memories: None,
    };
    let agent = build_agent(Arc::new(client.clone()), &setup).unwrap();
    let session = agent.create_session();
    agent.run("show big.txt").session(&session).await.unwrap();
    let reqs = client.requests();
    let result = |r: &cairn_core::testing::RecordedRequest| -> String {
        r.messages
            .iter()
            .flat_map(Message::function_results)
            .last()
            .map(|f| f.text())
            .unwrap_or_default()
    };
    let first = result(&reqs[1]);
    assert!(first.len() < 2600, "{} chars", first.len());
    assert!(first.contains("/large_tool_results/call_0"), "{first}");
    let paged = result(&reqs[2]);
    assert!(paged.contains("a line of text"), "{paged}");
    // File tools are not offloaded (they page), but cut for the small model.
    let read = result(&reqs[3]);
    assert!(read.contains("[cut:"), "{read}");
    assert!(read.len() < 2600, "{} chars", read.len());
    // Nothing was written into the user's directory.
    assert!(!dir.path().join("large_tool_results").exists());
}
