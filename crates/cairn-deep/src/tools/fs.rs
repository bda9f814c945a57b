//! The file tools and `execute`.

use std::time::Duration;

use cairn_core::{FunctionInvocationContext, SharedTool, ToolOutput};
use schemars::JsonSchema;
use serde::Deserialize;

use super::{Builtin, Deadline};
use crate::backend::{BackendRuntime, GrepQuery, SharedBackend};
use crate::format::{self, GrepOutput};
use crate::path::normalize;

/// Matches `grep` shows in `content` mode before it stops.
pub const GREP_MAX_MATCHES: usize = 200;
/// Files `grep` lists in `files` mode before it stops.
pub const GREP_MAX_FILES: usize = 200;
/// Matches `grep` counts in `count` mode before it stops.
pub const GREP_MAX_COUNTED: usize = 10_000;

fn fail(e: crate::BackendError) -> ToolOutput {
    ToolOutput::error(e.to_model_message())
}

fn rt(ctx: &FunctionInvocationContext) -> BackendRuntime {
    BackendRuntime::from_context(ctx)
}

#[derive(Deserialize, JsonSchema)]
struct LsArgs {
    /// Directory (default /).
    path: Option<String>,
}

/// `ls`: the entries directly inside a directory.
pub fn ls_tool(backend: SharedBackend) -> SharedTool {
    Builtin::new(
        "ls",
        "List a directory's entries, one path per line; directories end in /.",
        move |a: LsArgs, ctx| {
            let backend = backend.clone();
            async move {
                let path = a.path.unwrap_or_else(|| "/".into());
                let path = match normalize(&path) {
                    Ok(p) => p,
                    Err(e) => return fail(e),
                };
                match backend.ls(&rt(&ctx), &path).await {
                    Ok(entries) => ToolOutput::text(format::render_ls(&path, &entries)),
                    Err(e) => fail(e),
                }
            }
        },
    )
    .shared()
}

// The file tools take `file_path`, as Deep Agents' do (and the file tools frontier models are
// trained on); `path` is accepted too, so older prompts and transcripts keep working. The
// schema shows only `file_path`, without a description (the name says it all): every byte of
// a schema is sent in every request (BENCHMARKS.md §2).

#[derive(Deserialize, JsonSchema)]
struct ReadArgs {
    #[serde(alias = "path")]
    file_path: String,
    /// First line, 0-based (default 0).
    offset: Option<usize>,
    /// Lines to read (default 100).
    limit: Option<usize>,
}

/// `read_file`: numbered lines of a text file, paged with offset/limit.
pub fn read_file_tool(backend: SharedBackend) -> SharedTool {
    Builtin::new(
        "read_file",
        "Read a text file as numbered lines (number, tab, text); lines over 2000 chars continue as N.1, N.2. If more remain, the last row gives the offset to continue from.",
        move |a: ReadArgs, ctx| {
            let backend = backend.clone();
            async move {
                let offset = a.offset.unwrap_or(0);
                let limit = a.limit.unwrap_or(format::DEFAULT_READ_LIMIT);
                match backend.read(&rt(&ctx), &a.file_path, offset, limit).await {
                    Ok(text) => ToolOutput::text(text),
                    Err(e) => fail(e),
                }
            }
        },
    )
    .shared()
}

#[derive(Deserialize, JsonSchema)]
struct WriteArgs {
    #[serde(alias = "path")]
    file_path: String,
    /// The whole text.
    content: String,
}

/// `write_file`: creates a file; an existing file is an error (use `edit_file`).
pub fn write_file_tool(backend: SharedBackend) -> SharedTool {
    Builtin::with_deadline(
        "write_file",
        "Create a new file (and missing directories). Fails if the file exists; change existing files with edit_file.",
        Deadline::Changes,
        move |a: WriteArgs, ctx| {
            let backend = backend.clone();
            async move {
                let path = match normalize(&a.file_path) {
                    Ok(p) => p,
                    Err(e) => return fail(e),
                };
                match backend.write(&rt(&ctx), &path, &a.content).await {
                    Ok(()) => ToolOutput::text(format!("Created {path}")),
                    Err(e) => fail(e),
                }
            }
        },
    )
    .shared()
}

#[derive(Deserialize, JsonSchema)]
struct EditArgs {
    #[serde(alias = "path")]
    file_path: String,
    /// Exact text to replace.
    old_string: String,
    /// Replacement text.
    new_string: String,
    /// Replace every occurrence (default false).
    replace_all: Option<bool>,
}

/// `edit_file`: exact string replacement, unique unless `replace_all`.
pub fn edit_file_tool(backend: SharedBackend) -> SharedTool {
    Builtin::with_deadline(
        "edit_file",
        "Replace exact text in a file. old_string must match the file exactly (without read_file's line numbers) and occur once, unless replace_all is true.",
        Deadline::Changes,
        move |a: EditArgs, ctx| {
            let backend = backend.clone();
            async move {
                let path = match normalize(&a.file_path) {
                    Ok(p) => p,
                    Err(e) => return fail(e),
                };
                let all = a.replace_all.unwrap_or(false);
                match backend
                    .edit(&rt(&ctx), &path, &a.old_string, &a.new_string, all)
                    .await
                {
                    Ok(1) => ToolOutput::text(format!("Replaced 1 occurrence in {path}")),
                    Ok(n) => ToolOutput::text(format!("Replaced {n} occurrences in {path}")),
                    Err(e) => fail(e),
                }
            }
        },
    )
    .shared()
}

#[derive(Deserialize, JsonSchema)]
struct DeleteArgs {
    #[serde(alias = "path")]
    file_path: String,
}

/// `delete`: removes a file, or a directory with everything in it (as Deep Agents' `delete`).
/// It changes files, so it is guarded like `write_file` wherever approvals are configured.
pub fn delete_tool(backend: SharedBackend) -> SharedTool {
    Builtin::with_deadline(
        "delete",
        "Delete a file or a whole directory.",
        Deadline::Changes,
        move |a: DeleteArgs, ctx| {
            let backend = backend.clone();
            async move {
                let path = match normalize(&a.file_path) {
                    Ok(p) => p,
                    Err(e) => return fail(e),
                };
                match backend.delete(&rt(&ctx), &path).await {
                    Ok(()) => ToolOutput::text(format!("Deleted {path}")),
                    Err(e) => fail(e),
                }
            }
        },
    )
    .shared()
}

#[derive(Deserialize, JsonSchema)]
struct GlobArgs {
    /// Glob pattern.
    pattern: String,
    /// Directory to search (default /).
    path: Option<String>,
}

/// `glob`: files matching a pattern.
pub fn glob_tool(backend: SharedBackend) -> SharedTool {
    Builtin::new(
        "glob",
        "Find files by glob, e.g. **/*.py or src/*.{rs,toml}. * stays within a directory, ** crosses directories; a pattern without / matches file names at any depth.",
        move |a: GlobArgs, ctx| {
            let backend = backend.clone();
            async move {
                let base = match normalize(a.path.as_deref().unwrap_or("/")) {
                    Ok(p) => p,
                    Err(e) => return fail(e),
                };
                match backend.glob(&rt(&ctx), &a.pattern, &base).await {
                    Ok(paths) => ToolOutput::text(format::render_glob(&a.pattern, &base, &paths)),
                    Err(e) => fail(e),
                }
            }
        },
    )
    .shared()
}

#[derive(Deserialize, JsonSchema)]
struct GrepArgs {
    // `pattern` and `regex` are explained by the tool's description.
    pattern: String,
    regex: Option<bool>,
    /// File or directory to search (default /).
    path: Option<String>,
    /// Only files matching this glob.
    glob: Option<String>,
    /// Default files_with_matches.
    output_mode: Option<GrepOutput>,
}

/// `grep`: search of file contents, for literal text unless `regex` is true (see
/// `docs/design-decisions.md`, "grep is literal by default").
pub fn grep_tool(backend: SharedBackend) -> SharedTool {
    Builtin::new(
        "grep",
        "Search file contents for exact text (regex true: a Rust regular expression instead).",
        move |a: GrepArgs, ctx| {
            let backend = backend.clone();
            async move {
                let mode = a.output_mode.unwrap_or_default();
                let literal = !a.regex.unwrap_or(false);
                let (cap, per_file) = match mode {
                    GrepOutput::FilesWithMatches => (GREP_MAX_FILES, Some(1)),
                    GrepOutput::Content => (GREP_MAX_MATCHES, None),
                    GrepOutput::Count => (GREP_MAX_COUNTED, None),
                };
                let query = GrepQuery {
                    pattern: a.pattern,
                    literal,
                    path: a.path,
                    glob: a.glob,
                    max_matches: cap,
                    max_per_file: per_file,
                };
                match backend.grep(&rt(&ctx), &query).await {
                    Ok(r) if r.matches.is_empty() && literal && looks_like_regex(&query.pattern) => {
                        ToolOutput::text(format!(
                            "{} The pattern was searched as exact text; set regex true to use it as a regular expression.",
                            format::render_grep(&r, mode, cap)
                        ))
                    }
                    Ok(r) => ToolOutput::text(format::render_grep(&r, mode, cap)),
                    Err(e) => fail(e),
                }
            }
        },
    )
    .shared()
}

/// Whether a pattern that found nothing as literal text was probably meant as a regular
/// expression (alternation, `.*`/`.+`, escapes, anchors, classes), as Deep Agents' note checks.
fn looks_like_regex(p: &str) -> bool {
    ["|", ".*", ".+", "\\", "^", "$", "[", "(?"]
        .iter()
        .any(|m| p.contains(m))
}

#[derive(Deserialize, JsonSchema)]
struct ExecuteArgs {
    /// Shell command.
    command: String,
    /// Seconds before the command is killed.
    timeout: Option<u64>,
}

/// `execute`: runs a shell command through the backend's [`Executor`](crate::backend::Executor).
/// On a backend that cannot execute, every call returns an error.
pub fn execute_tool(backend: SharedBackend) -> SharedTool {
    let (default_secs, max_secs) = backend
        .as_executor()
        .map(|x| (x.default_timeout().as_secs(), x.max_timeout().as_secs()))
        .unwrap_or((120, 3_600));
    let description = format!(
        "Run a shell command (sh -c) in the workspace directory. Returns stdout, stderr lines prefixed [stderr], and the exit code. Default timeout {default_secs}s. Prefer the file tools for reading, searching and editing."
    );
    // The executor reviews each command before it runs (exec policy, sandbox fallback).
    let reviewing = backend.clone();
    let review = move |args: &serde_json::Value| match (
        reviewing.as_executor(),
        args.get("command").and_then(|c| c.as_str()),
    ) {
        (Some(exec), Some(command)) => exec.review(command),
        _ => cairn_core::CallReview::AsConfigured,
    };
    // `execute` bounds itself with the executor's timeout (up to its max), not ToolTimeout.
    Builtin::with_deadline("execute", &description, Deadline::None, move |a: ExecuteArgs, _ctx| {
        let backend = backend.clone();
        async move {
            let Some(exec) = backend.as_executor() else {
                return ToolOutput::error(
                    "Error: this agent's backend cannot run commands. Use the file tools instead.",
                );
            };
            let timeout = match a.timeout {
                Some(0) => {
                    return ToolOutput::error(
                        "Error: timeout must be at least 1 second. Omit it for the default.",
                    );
                }
                Some(t) if t > max_secs => {
                    return ToolOutput::error(format!(
                        "Error: timeout {t}s exceeds the maximum of {max_secs}s. Use at most {max_secs}."
                    ));
                }
                t => t.map(Duration::from_secs),
            };
            match exec.execute(&a.command, timeout).await {
                Ok(out) => {
                    let mut text = out.output;
                    if text.is_empty() {
                        text.push_str("[no output]\n");
                    } else if !text.ends_with('\n') {
                        text.push('\n');
                    }
                    match out.exit_code {
                        Some(code) => text.push_str(&format!("[exit code {code}]")),
                        None => text.push_str("[killed by a signal]"),
                    }
                    ToolOutput::text(text)
                }
                Err(e) => fail(e),
            }
        }
    })
    .with_review(review)
    .shared()
}

/// The file tools over `backend`, in Deep Agents' order: `ls`, `read_file`, `write_file`,
/// `edit_file`, `delete`, `glob`, `grep`, and `execute` when the backend
/// [can execute](crate::backend::Backend::can_execute).
///
/// ```
/// use std::sync::Arc;
/// use cairn_deep::{backend::StateBackend, tools::filesystem_tools};
/// let tools = filesystem_tools(Arc::new(StateBackend::new()));
/// let names: Vec<&str> = tools.iter().map(|t| t.spec().name.as_str()).collect();
/// assert_eq!(names, ["ls", "read_file", "write_file", "edit_file", "delete", "glob", "grep"]);
/// ```
pub fn filesystem_tools(backend: SharedBackend) -> Vec<SharedTool> {
    let mut tools = vec![
        ls_tool(backend.clone()),
        read_file_tool(backend.clone()),
        write_file_tool(backend.clone()),
        edit_file_tool(backend.clone()),
        delete_tool(backend.clone()),
        glob_tool(backend.clone()),
        grep_tool(backend.clone()),
    ];
    if backend.can_execute() {
        tools.push(execute_tool(backend));
    }
    tools
}
