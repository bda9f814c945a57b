//! Runs every example on the scripted demo model (no OpenAI settings) and checks what it
//! prints. `cargo test` builds the examples before it runs this.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::Command;

fn example_path(name: &str) -> PathBuf {
    // target/<profile>/deps/run_examples-… → target/<profile>/examples/<name>
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().and_then(|d| d.parent()).unwrap();
    profile_dir.join("examples").join(name)
}

fn run(name: &str) -> String {
    let path = example_path(name);
    assert!(path.exists(), "{} was not built", path.display());
    let out = Command::new(&path)
        .env_remove("OPENAI_BASE_URL")
        .env_remove("OPENAI_API_KEY")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{name} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn seed_000_examples() {
    assert!(
        run("runtime_kwargs")
            .contains("Queued email for finance@example.com from user-123 (contoso)")
    );
    assert!(run("function_middleware").contains("from user-123 (contoso, via middleware)"));
    assert_eq!(run("session_state").trim(), "budget review on Friday");
    assert!(
        run("agent_as_tool")
            .contains("findings in the caller's session: Rust agents can share session state")
    );
    assert!(run("custom_chat_client").contains("[client-only] hello buckets (instructions: \"Repeat the user.\"; tool kwargs handed to the client: 0)"));
}

#[test]
fn seed_001_examples() {
    let p = run("deep_agent_system_prompt");
    let custom = p.find("You are a research assistant specializing").unwrap();
    let base = p.find("## Planning").unwrap();
    assert!(custom < base, "the custom prompt comes first");

    let m = run("deep_agent_memory");
    assert!(
        m.contains("Rust 2024, no unwrap outside tests.")
            && m.contains("The user prefers concise answers.")
    );

    let s = run("deep_agent_skills");
    assert!(s.contains("- literature-review: Survey papers on a topic"));
    assert!(
        s.contains("3. Summarize with citations."),
        "the body was read on demand"
    );

    let t = run("custom_tool_description");
    assert!(t.contains("\"description\": \"Order status to filter by\""));
    assert!(t.contains("\"default\": 10"));
    assert!(t.contains("\"status\":\"shipped\""));

    assert!(run("deep_agent_runtime_context").contains("Data for user user-123: recent activity"));

    let r = run("subagent_research");
    assert!(r.contains("retrieval-augmented generation: survey (2024)"));
    assert!(r.contains("(main agent's own tool calls: [\"task\"])"));

    assert!(run("long_term_memory").contains("Prefers answers in bullet points."));

    let f = run("stream_filter_summarization");
    assert!(f.contains("Read all 6 pages: revenue grew in every region"));
    assert!(f.contains("[calling fetch_page]"));
    assert!(
        !f.contains("DEMO-SUMMARY"),
        "summarization tokens are filtered out"
    );
    let skipped: usize = f
        .split("(skipped ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap();
    assert!(skipped > 0, "{f}");
    assert!(f.contains("full history in /conversation_history/"));
}

#[test]
fn human_in_the_loop_pauses_and_resumes_after_a_restart() {
    let out = run("human_in_the_loop");
    assert!(
        out.contains("paused: write_file \"/notes.md\" (asked by the subagent"),
        "{out}"
    );
    assert!(
        out.contains("/notes.md:\n# 0.2\n- durable threads"),
        "{out}"
    );
}
