//! Seed 001, "system prompt": a custom prompt is placed before the built-in deep-agent prompt
//! (planning, files, subagents). Prints the assembled system prompt the model receives.
//!
//! `cargo run -p cairn-examples --example deep_agent_system_prompt`

use cairn::DeepAgent;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let client = cairn_examples::chat_client(vec![]);
    let recorder = cairn_examples::Recorder::wrap(client);
    let agent = DeepAgent::builder()
        .model(recorder.client())
        .system_prompt(
            "You are a research assistant specializing in scientific literature.\n\
             Always cite sources. Use subagents for parallel research on different topics.",
        )
        .build()?;
    let response = agent
        .run("What is known about CRISPR off-target effects?")
        .await?;
    println!(
        "--- system prompt sent to the model ---\n{}",
        recorder.last_instructions()
    );
    println!("--- answer ---\n{}", response.text());
    Ok(())
}
