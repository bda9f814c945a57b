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
Only when all steps are done, reply with a short summary and no tool call.";

/// Tokens a tool result may occupy before the rest is offloaded.
pub const LOCAL_MAX_TOOL_RESULT_TOKENS: usize = 500;

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
        "Create a new file with the given content. Fails if it exists.",
    ),
    (
        "edit_file",
        "Replace old_string (exact text, without line numbers) with new_string in a file.",
    ),
    ("delete", "Delete a file or directory."),
    (
        "grep",
        "Search file contents for exact text (regex true for a regular expression).",
    ),
    (
        "execute",
        "Run a shell command in the project directory; returns output and exit code.",
    ),
];

/// The profile for the embedded model with a context window of `n_ctx` tokens.
pub fn local_profile(n_ctx: usize) -> HarnessProfile {
    HarnessProfile {
        base_system_prompt: Some(LOCAL_BASE_PROMPT.to_owned()),
        system_prompt_suffix: None,
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
    }
}
