//! Seed 001, "summarization" tip: streaming an agent whose context gets summarized, and
//! skipping the tokens the summarization step produces by their metadata
//! (`metadata.source == Some("summarization")`, the seed's `lcSource === "summarization"`).
//!
//! The agent reads long pages with a small input window (6,000 tokens), so its older messages
//! are summarized along the way; their full text goes to `/conversation_history/<thread>.md`.
//!
//! `cargo run -p cairn-examples --example stream_filter_summarization`

use std::sync::Arc;

use cairn::testing::ScriptedClient;
use cairn::{
    AgentEventKind, AgentSession, ChatClient, ChatResponse, DeepAgent, HarnessProfile, UpdateEvent,
    tool,
};
use futures::StreamExt;
use serde_json::json;

const PAGES: u64 = 6;

/// Fetch one page of the annual report (a stand-in with canned text).
#[tool]
fn fetch_page(page: u64) -> String {
    (1..=60)
        .map(|i| {
            format!(
                "page {page}, line {i}: revenue grew in region {} while costs in unit {} stayed flat",
                i % 7,
                i % 5
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The demo model: reads pages 1..=PAGES one per turn, then answers. Asked to summarize (a
/// request without tools), it writes a summary.
fn demo_model() -> ScriptedClient {
    ScriptedClient::new(|req| {
        if req.options.tools.is_empty() {
            return Ok(ChatResponse::text(
                "## Session intent\nSummarize the annual report.\n\n## Summary\nDEMO-SUMMARY: \
                 pages read so far show revenue growth in every region.\n\n## Artifacts\nNone.\n\n\
                 ## Next steps\nRead the remaining pages, then answer.",
            ));
        }
        let last_page = req
            .messages
            .iter()
            .flat_map(|m| m.function_calls())
            .filter(|c| c.name == "fetch_page")
            .filter_map(|c| serde_json::from_str::<serde_json::Value>(&c.arguments).ok())
            .filter_map(|v| v["page"].as_u64())
            .max()
            .unwrap_or(0);
        Ok(if last_page < PAGES {
            ChatResponse::tool_calls([("fetch_page", json!({"page": last_page + 1}))])
        } else {
            ChatResponse::text(format!(
                "Read all {PAGES} pages: revenue grew in every region; costs stayed flat."
            ))
        })
    })
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let model: Arc<dyn ChatClient> = match cairn_examples::configured_chat_client() {
        Some(c) => c,
        None => {
            eprintln!("(OPENAI_BASE_URL / OPENAI_API_KEY not set: using a scripted demo model)");
            Arc::new(demo_model())
        }
    };
    let agent = DeepAgent::builder()
        .model(model)
        .tool(fetch_page)
        .profile(HarnessProfile {
            max_input_tokens: Some(6_000),
            ..Default::default()
        })
        .build()?;

    let session = AgentSession::new();
    let mut stream = agent
        .run(format!(
            "Read pages 1 to {PAGES} of the annual report with fetch_page, one page at a time, then summarize it in one sentence."
        ))
        .session(&session)
        .stream();
    let mut skipped = 0usize;
    while let Some(update) = stream.next().await {
        // The seed's filter: tokens produced by summarization carry source = "summarization".
        if update.metadata.source.as_deref() == Some("summarization") {
            skipped += 1;
            continue;
        }
        match &update.kind {
            AgentEventKind::Model(m) => match &m.event {
                UpdateEvent::TextDelta { text } => print!("{text}"),
                UpdateEvent::ToolCallStart { name, .. } => println!("[calling {name}]"),
                UpdateEvent::ToolCallDelta { arguments, .. } => println!("  {arguments}"),
                _ => {}
            },
            AgentEventKind::RunCompleted(_) => println!(),
            _ => {}
        }
    }
    println!("(skipped {skipped} updates from summarization)");
    let state = cairn::deep::compression::CompressionState::of(&session);
    if let Some(s) = state {
        println!(
            "(summarized {} time(s); full history in {})",
            s.summarizations,
            s.history_path.unwrap_or_default()
        );
    }
    Ok(())
}
