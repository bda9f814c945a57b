//! The harness profile for the embedded local model.
//!
//! A 1.5B model on two CPU cores pays for every prompt token (~60–90 tokens/s prefill) and
//! follows short, concrete instructions better than long ones. This profile keeps the system
//! prompt plus the tool schemas within about 1,300 tokens (checked by a test with the model's own
//! tokenizer), hides the tools a small model cannot use well (`task`, `glob`, `write_todos`), caps what one tool result may put into the context, and caps each
//! reply.

use cairn_deep::HarnessProfile;

/// The base prompt for the local model (replaces cairn-deep's).
pub const LOCAL_BASE_PROMPT: &str = "You are a coding agent working in the user's project. \
Use the tools to inspect, change and run things, one tool call at a time. \
Do every step the user asks for (for example: write the file, then run it with execute). \
To fix or change something, change the file with edit_file or write_file; never only describe the change. \
Only when all steps are done, reply with a short summary and no tool call.";

/// One worked example of a write → run → answer trajectory (few-shot), appended to the base
/// prompt. About 60 tokens; the system block is the same in every run, so the prompt cache
/// serves them. The model copies what it can from an example: one that fixed a function and
/// checked it with `python3 -c` made it write sum.py as a function that printed nothing, one
/// that made hello.py print `Hello, Ann!` turned the demo's "prints hello" into that greeting,
/// and one that fixed a script's `print` left a new script without one (BENCHMARKS.md §8.3).
pub const LOCAL_EXAMPLE: &str = "Example. Request: \"Create area.py that prints the area of a 3 by 4 rectangle, run it and tell me the result.\"
1. write_file /area.py, content: print(3 * 4)
2. execute: python3 area.py prints: 12
3. answer: area.py printed 12.";

/// Tokens a tool result may occupy before the rest is offloaded.
pub const LOCAL_MAX_TOOL_RESULT_TOKENS: usize = 500;

/// Extra samples of a turn that repeats a failed call or the previous one
/// (`cairn_local::LocalConfig::resample_repeats`).
pub const LOCAL_RESAMPLE_REPEATS: u32 = 2;

/// Tokens per reply.
pub const LOCAL_MAX_REPLY_TOKENS: u32 = 256;

/// The budget for the system prompt plus tool schemas, in the model's tokens.
pub const LOCAL_PROMPT_BUDGET_TOKENS: usize = 1_300;

/// Tools the local model does not see: `task` (delegation needs a stronger model), `glob` (`ls`
/// and `grep` cover it) and `write_todos` (the 1.5B model rewrites the same plan over and over
/// instead of acting; measured with `scripts/demo.sh`).
pub const LOCAL_EXCLUDED_TOOLS: &[&str] = &["task", "glob", "write_todos"];

/// Short tool descriptions for the local model.
pub const LOCAL_TOOL_DESCRIPTIONS: &[(&str, &str)] = &[
    ("ls", "List a directory."),
    (
        "read_file",
        "Read a file as numbered lines; use offset and limit for long files.",
    ),
    (
        "write_file",
        "Write a file with the given content (creates it, or replaces all of its text).",
    ),
    (
        "edit_file",
        "Replace old_string (exact text, without line numbers) with new_string in a file; an empty old_string adds new_string at the end.",
    ),
    ("delete", "Delete a file or directory."),
    (
        "grep",
        "Search file contents for exact text; shows the matching lines (regex true for a regular expression).",
    ),
    (
        "execute",
        "Run a shell command in the project directory; returns output and exit code.",
    ),
];

/// The engine settings of the local harness for the model file `model`:
/// - every turn is an action (a grammar-constrained tool call, or the built-in `answer` action
///   that replies to the user), so the small model cannot stop with a prose plan while work
///   remains (issue #17; BENCHMARKS.md §8);
/// - the KV cache of the first prompt is kept in a file beside the models
///   ([`prompt_cache_path`]), so the next run does not evaluate the system block again; the
///   tool list comes first in the system block and the project's own text last
///   ([`HarnessProfile::custom_prompt_last`]), so that block is the same in every project.
///
/// `CAIRN_PROMPT_CACHE=0` turns the prompt cache off.
#[cfg(feature = "local")]
pub fn configure_local(config: &mut cairn_local::LocalConfig, model: &std::path::Path) {
    config.tool_grammar = cairn_local::ToolGrammar::Always;
    config.answer_tool = true;
    config.tools_first = true;
    config.remind = !std::env::var("CAIRN_LOCAL_REMIND").is_ok_and(|v| v == "0");
    // A repeated failing call is sampled again (BENCHMARKS.md §8.3); CAIRN_LOCAL_RESAMPLE=N
    // sets the number of extra samples (0: off).
    config.resample_repeats = std::env::var("CAIRN_LOCAL_RESAMPLE")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(LOCAL_RESAMPLE_REPEATS);
    if std::env::var("CAIRN_PROMPT_CACHE").is_ok_and(|v| v.trim() == "0") {
        config.prompt_cache = None;
    } else {
        config.prompt_cache = prompt_cache_path(model, config.n_ctx);
    }
    // Experiment switch (BENCHMARKS.md §8): CAIRN_LOCAL_GRAMMAR=user restores the free turns
    // after tool results.
    if std::env::var("CAIRN_LOCAL_GRAMMAR").is_ok_and(|v| v == "user") {
        config.tool_grammar = cairn_local::ToolGrammar::OnUserTurns;
        config.answer_tool = false;
    }
}

/// Where the prompt cache of `model` at context size `n_ctx` lives: in `prompt-cache/` of the
/// model folder ([`cairn_local::model_dir`]), named after the model file's name, size and
/// modification time, so a changed file never reuses another's cache. `None` when the file
/// cannot be read.
#[cfg(feature = "local")]
pub fn prompt_cache_path(model: &std::path::Path, n_ctx: u32) -> Option<std::path::PathBuf> {
    let meta = std::fs::metadata(model).ok()?;
    let mtime = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_secs());
    let name = model.file_name()?.to_string_lossy();
    Some(
        cairn_local::model_dir()
            .join("prompt-cache")
            .join(format!("{name}.{}.{mtime}.ctx{n_ctx}.kv", meta.len())),
    )
}

/// The profile for the embedded model with a context window of `n_ctx` tokens.
pub fn local_profile(n_ctx: usize) -> HarnessProfile {
    HarnessProfile {
        base_system_prompt: Some(LOCAL_BASE_PROMPT.to_owned()),
        // The worked example: with it the 1.5B model printed its result in create-and-run,
        // counted with `wc -w`, and passed 9 of 11 tasks instead of 8 (BENCHMARKS.md §8.3).
        system_prompt_suffix: Some(LOCAL_EXAMPLE.to_owned()),
        tool_description_overrides: LOCAL_TOOL_DESCRIPTIONS
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        excluded_tools: LOCAL_EXCLUDED_TOOLS
            .iter()
            .map(|s| (*s).to_owned())
            .collect(),
        max_input_tokens: Some(n_ctx),
        max_tool_result_tokens: Some(LOCAL_MAX_TOOL_RESULT_TOKENS),
        max_reply_tokens: Some(LOCAL_MAX_REPLY_TOKENS),
        // The environment, AGENTS.md and memory text after the fixed harness text, which the
        // prompt cache then serves in every project.
        custom_prompt_last: true,
        // Rewriting a small file whole is what the 1.5B model does (it called write_file on an
        // existing file to add a line or a JSON field); failing that cost the task.
        write_file_overwrites: true,
        // The 1.5B model filled every optional grep parameter in: output_mode with
        // files_with_matches (file names only), glob with "" (BENCHMARKS.md §8).
        // The files the request names are read for the model before its first turn: it edited
        // guessed text, or answered in prose, without reading them (BENCHMARKS.md §8.1).
        read_mentioned_files: true,
        // Asked to add a line, the 1.5B model called edit_file with an empty old_string first,
        // then copied read_file's numbers into its retries (BENCHMARKS.md §8.3).
        edit_empty_appends: true,
        // Measured both ways (BENCHMARKS.md §8.1): without numbers the 1.5B model no longer
        // copied them into append-line's text, but wrapped a rewrite in `<tool_response>` tags
        // instead; 7 / 11 either way, so the reads stay as every other model sees them.
        plain_file_reads: false,
        hidden_tool_parameters: [(
            "grep".to_owned(),
            ["glob".to_owned(), "output_mode".to_owned()].into(),
        )]
        .into(),
        // `grep` shows the matching lines unless asked otherwise: with only file names, the
        // 1.5B model repeated the same search instead of reading the file (BENCHMARKS.md §8).
        tool_argument_defaults: [(
            "grep".to_owned(),
            [("output_mode".to_owned(), serde_json::json!("content"))]
                .into_iter()
                .collect(),
        )]
        .into(),
    }
}
