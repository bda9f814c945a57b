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

#[derive(Deserialize, JsonSchema)]
struct ReadArgs {
    /// File path.
    path: String,
    /// First line, 0-based (default 0).
    offset: Option<usize>,
    /// Lines to read (default 200).
    limit: Option<usize>,
}

/// `read_file`: numbered lines of a text file, paged with offset/limit.
pub fn read_file_tool(backend: SharedBackend) -> SharedTool {
    Builtin::new(
        "read_file",
        "Read a text file as numbered lines (number, tab, text). Lines over 2000 chars continue on rows N.1, N.2. If more lines remain, the last row gives the offset to continue from.",
        move |a: ReadArgs, ctx| {
            let backend = backend.clone();
            async move {
                let offset = a.offset.unwrap_or(0);
                let limit = a.limit.unwrap_or(format::DEFAULT_READ_LIMIT);
                match backend.read(&rt(&ctx), &a.path, offset, limit).await {
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
    /// File path.
    path: String,
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
                let path = match normalize(&a.path) {
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
    /// File path.
    path: String,
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
                let path = match normalize(&a.path) {
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
        "Find files by glob, e.g. **/*.py or src/*.{rs,toml}. * stays within a directory, ** crosses directories; a pattern without / matches file names at any depth. Returns sorted paths.",
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
    /// Regular expression.
    pattern: String,
    /// File or directory to search (default /).
    path: Option<String>,
    /// Only files matching this glob, e.g. *.rs.
    glob: Option<String>,
    /// files: matching paths (default); content: path:line:text rows; count: path:matches rows.
    output_mode: Option<GrepOutput>,
}

/// `grep`: regular-expression search of file contents.
pub fn grep_tool(backend: SharedBackend) -> SharedTool {
    Builtin::new(
        "grep",
        "Search file contents with a regular expression (Rust regex syntax; (?i) ignores case; escape metacharacters such as ( . [ to match them literally).",
        move |a: GrepArgs, ctx| {
            let backend = backend.clone();
            async move {
                let mode = a.output_mode.unwrap_or_default();
                let (cap, per_file) = match mode {
                    GrepOutput::Files => (GREP_MAX_FILES, Some(1)),
                    GrepOutput::Content => (GREP_MAX_MATCHES, None),
                    GrepOutput::Count => (GREP_MAX_COUNTED, None),
                };
                let query = GrepQuery {
                    pattern: a.pattern,
                    path: a.path,
                    glob: a.glob,
                    max_matches: cap,
                    max_per_file: per_file,
                };
                match backend.grep(&rt(&ctx), &query).await {
                    Ok(r) => ToolOutput::text(format::render_grep(&r, mode, cap)),
                    Err(e) => fail(e),
                }
            }
        },
    )
    .shared()
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
    .shared()
}

/// The file tools over `backend`: `ls`, `read_file`, `write_file`, `edit_file`, `glob`,
/// `grep`, and `execute` when the backend [can execute](crate::backend::Backend::can_execute).
///
/// ```
/// use std::sync::Arc;
/// use cairn_deep::{backend::StateBackend, tools::filesystem_tools};
/// let tools = filesystem_tools(Arc::new(StateBackend::new()));
/// let names: Vec<&str> = tools.iter().map(|t| t.spec().name.as_str()).collect();
/// assert_eq!(names, ["ls", "read_file", "write_file", "edit_file", "glob", "grep"]);
/// ```
pub fn filesystem_tools(backend: SharedBackend) -> Vec<SharedTool> {
    let mut tools = vec![
        ls_tool(backend.clone()),
        read_file_tool(backend.clone()),
        write_file_tool(backend.clone()),
        edit_file_tool(backend.clone()),
        glob_tool(backend.clone()),
        grep_tool(backend.clone()),
    ];
    if backend.can_execute() {
        tools.push(execute_tool(backend));
    }
    tools
}
