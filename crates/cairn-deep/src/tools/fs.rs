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

/// `path` with a leading `/<project folder name>` dropped, when the backend runs commands in a
/// host folder of that name (its [`Executor::working_dir`](crate::backend::Executor::working_dir))
/// and the project has no entry of that name: small models prefix paths with the project's name
/// from the prompt (`/flip-flag/settings.py` for `/settings.py`). Other paths are unchanged.
async fn strip_project_name(backend: &SharedBackend, rt: &BackendRuntime, path: String) -> String {
    let Some(name) = backend
        .as_executor()
        .and_then(|x| x.working_dir())
        .and_then(|d| d.file_name())
        .map(|n| n.to_string_lossy().into_owned())
    else {
        return path;
    };
    let prefix = format!("/{name}");
    let rest = match path.strip_prefix(&prefix) {
        Some(r) if r.is_empty() || r.starts_with('/') => r.to_owned(),
        _ => return path,
    };
    let exists = backend
        .ls(rt, "/")
        .await
        .is_ok_and(|entries| entries.iter().any(|e| e.path == prefix));
    if exists {
        path
    } else if rest.is_empty() {
        "/".to_owned()
    } else {
        rest
    }
}

/// Most paths a `not found` error suggests.
const MAX_SUGGESTIONS: usize = 3;
/// Most entries of a directory a `not found` error lists when nothing of the name exists.
const MAX_LISTED: usize = 8;
/// Lines of the file an `edit_file` error shows around the closest match.
const NEAR_LINES: usize = 3;

/// A failure that teaches the next step (issue #17): a missing path names the files of the
/// same name elsewhere (`/path/to/utils.py` → `/utils.py`), or else what the nearest existing
/// directory holds; an `edit_file` whose `old_string` is absent shows the file's closest lines,
/// numbered, to copy from. Other errors are as the backend says.
async fn fail_teaching(
    backend: &SharedBackend,
    rt: &BackendRuntime,
    e: crate::BackendError,
    edit: Option<(&str, &str)>,
) -> ToolOutput {
    let mut msg = e.to_model_message();
    match &e {
        crate::BackendError::NotFound(path) => {
            if let Some(hint) = not_found_hint(backend, rt, path).await {
                msg.push(' ');
                msg.push_str(&hint);
            }
        }
        crate::BackendError::NoMatch(path) => {
            if let (Some((_, old)), Ok(text)) = (edit, backend.read_text(rt, path).await)
                && let Some(near) = nearest_lines(&text, old)
            {
                msg.push_str("\nThe closest lines in the file (number, tab, text):\n");
                msg.push_str(&near);
            }
        }
        crate::BackendError::EmptyOldString => {
            // Usually an attempt to add text: show the end of the file to anchor on.
            if let Some((path, _)) = edit
                && let Ok(text) = backend.read_text(rt, path).await
            {
                let lines: Vec<&str> = text.lines().collect();
                let from = lines.len().saturating_sub(NEAR_LINES);
                msg.push_str(
                    " To add text, put an existing line in old_string and that line plus the new text in new_string. The file ends with (number, tab, text):\n",
                );
                msg.push_str(
                    &(from..lines.len())
                        .map(|i| format!("{}\t{}", i + 1, lines[i]))
                        .collect::<Vec<_>>()
                        .join("\n"),
                );
            }
        }
        _ => {}
    }
    ToolOutput::error(msg)
}

async fn not_found_hint(
    backend: &SharedBackend,
    rt: &BackendRuntime,
    missing: &str,
) -> Option<String> {
    let name = missing
        .trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or("");
    if !name.is_empty()
        && !name.contains(['*', '?', '[', ']', '{', '}'])
        && let Ok(found) = backend.glob(rt, &format!("**/{name}"), "/").await
    {
        let found: Vec<String> = found
            .into_iter()
            .filter(|p| p != missing)
            .take(MAX_SUGGESTIONS)
            .collect();
        if !found.is_empty() {
            return Some(format!("Did you mean {}?", found.join(" or ")));
        }
    }
    // The nearest directory that exists, and what it holds.
    let mut dir = crate::path::parent(missing);
    loop {
        if let Ok(entries) = backend.ls(rt, dir).await {
            if entries.is_empty() {
                return Some(format!("{dir} is empty."));
            }
            let shown: Vec<String> = entries
                .iter()
                .take(MAX_LISTED)
                .map(|e| {
                    if e.is_dir {
                        format!("{}/", e.path)
                    } else {
                        e.path.clone()
                    }
                })
                .collect();
            let more = if entries.len() > MAX_LISTED {
                ", …"
            } else {
                ""
            };
            return Some(format!("{dir} holds: {}{more}", shown.join(", ")));
        }
        if dir == "/" {
            return None;
        }
        dir = crate::path::parent(dir);
    }
}

/// The lines of `text` most like `old`'s first non-blank line, with one line of context each
/// side, numbered as `read_file` numbers them. `None` when nothing is alike.
fn nearest_lines(text: &str, old: &str) -> Option<String> {
    let probe = old.lines().map(str::trim).find(|l| !l.is_empty())?;
    let lines: Vec<&str> = text.lines().collect();
    let (best, score) = lines
        .iter()
        .enumerate()
        .map(|(i, l)| (i, similarity(l.trim(), probe)))
        .max_by(|a, b| a.1.total_cmp(&b.1))?;
    if score < 0.3 {
        return None;
    }
    let from = best.saturating_sub(1);
    let to = (from + NEAR_LINES).min(lines.len());
    Some(
        (from..to)
            .map(|i| format!("{}\t{}", i + 1, lines[i]))
            .collect::<Vec<_>>()
            .join("\n"),
    )
}

/// Dice coefficient of the character bigrams of two strings, whitespace ignored (1 = equal,
/// 0 = nothing shared).
fn similarity(a: &str, b: &str) -> f64 {
    let grams = |s: &str| -> Vec<(char, char)> {
        let c: Vec<char> = s.chars().filter(|c| !c.is_whitespace()).collect();
        c.windows(2).map(|w| (w[0], w[1])).collect()
    };
    let (x, mut y) = (grams(a), grams(b));
    if x.is_empty() || y.is_empty() {
        return if a == b { 1.0 } else { 0.0 };
    }
    let total = x.len() + y.len();
    let mut shared = 0usize;
    for g in &x {
        if let Some(i) = y.iter().position(|h| h == g) {
            y.swap_remove(i);
            shared += 1;
        }
    }
    (2 * shared) as f64 / total as f64
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
                let rt = rt(&ctx);
                let path = strip_project_name(&backend, &rt, path).await;
                match backend.ls(&rt, &path).await {
                    Ok(entries) => ToolOutput::text(format::render_ls(&path, &entries)),
                    Err(e) => fail_teaching(&backend, &rt, e, None).await,
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
    read_file_impl(backend, false)
}

/// `read_file` that shows the text without line numbers (the paging note stays), for models
/// that copy the numbers into the text they write: the embedded model's profile
/// ([`HarnessProfile::plain_file_reads`](crate::HarnessProfile::plain_file_reads)).
pub fn plain_read_file_tool(backend: SharedBackend) -> SharedTool {
    read_file_impl(backend, true)
}

fn read_file_impl(backend: SharedBackend, plain: bool) -> SharedTool {
    Builtin::new(
        "read_file",
        "Read a text file as numbered lines (number, tab, text); lines over 2000 chars continue as N.1, N.2. If more remain, the last row gives the offset to continue from.",
        move |a: ReadArgs, ctx| {
            let backend = backend.clone();
            async move {
                let offset = a.offset.unwrap_or(0);
                let limit = a.limit.unwrap_or(format::DEFAULT_READ_LIMIT);
                let rt = rt(&ctx);
                let file_path = match normalize(&a.file_path) {
                    Ok(p) => strip_project_name(&backend, &rt, p).await,
                    Err(_) => a.file_path.clone(),
                };
                match backend.read(&rt, &file_path, offset, limit).await {
                    Ok(text) if plain => ToolOutput::text(crate::format::without_line_numbers(&text)),
                    Ok(text) => ToolOutput::text(text),
                    Err(e) => fail_teaching(&backend, &rt, e, None).await,
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
    write_file_impl(backend, false)
}

/// `write_file` that also replaces the whole text of an existing file (through the backend's
/// `edit`, so the change lands in one write), for models that rewrite a small file more
/// reliably than they edit it: the embedded model's profile
/// ([`HarnessProfile::write_file_overwrites`](crate::HarnessProfile::write_file_overwrites)).
pub fn overwriting_write_file_tool(backend: SharedBackend) -> SharedTool {
    write_file_impl(backend, true)
}

fn write_file_impl(backend: SharedBackend, overwrite: bool) -> SharedTool {
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
                let rt = rt(&ctx);
                let path = strip_project_name(&backend, &rt, path).await;
                match backend.write(&rt, &path, &a.content).await {
                    Ok(()) => ToolOutput::text(format!("Created {path}")),
                    Err(crate::BackendError::AlreadyExists(_)) if overwrite => {
                        match overwrite_file(&backend, &rt, &path, &a.content).await {
                            Ok((Rewrite::Changed, numbers)) => ToolOutput::text(format!(
                                "Overwrote {path}{}",
                                if numbers {
                                    " (without the read_file line numbers that were copied into the text)"
                                } else {
                                    ""
                                }
                            )),
                            // The 1.5B model rewrote package.json on one line without the field
                            // it was asked to add, and took "Overwrote" (then a note that only
                            // the layout changed) for done; an error makes it try again.
                            Ok((Rewrite::SameWords, _)) => ToolOutput::error(format!(
                                "Error: {path} was not written: this text has the same words as the file (only spacing or layout differ), so the change is missing. Write the whole text with the change in it, or use edit_file"
                            )),
                            // Said as an error: the 1.5B model wrote the same text back and
                            // took "Overwrote" for a fix.
                            Ok((Rewrite::Same, _)) => ToolOutput::error(format!(
                                "Error: {path} already holds exactly this text; nothing changed"
                            )),
                            Err(e) => fail(e),
                        }
                    }
                    Err(e) => fail(e),
                }
            }
        },
    )
    .shared()
}

/// The largest file a refused overwrite shows in its error.
const OVERWRITE_SHOW_MAX_BYTES: usize = 2_000;

/// The words of a text (runs of letters, digits and `_`) and how often each occurs.
fn word_counts(text: &str) -> std::collections::HashMap<&str, usize> {
    let mut counts = std::collections::HashMap::new();
    for w in text
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
    {
        *counts.entry(w).or_insert(0) += 1;
    }
    counts
}

/// How many of the `old` words the `new` ones leave out, and how many `old` has (counting
/// repeats); both are [`word_counts`].
fn words_dropped(
    old: &std::collections::HashMap<&str, usize>,
    new: &std::collections::HashMap<&str, usize>,
) -> (usize, usize) {
    let mut total = 0;
    let mut dropped = 0;
    for (w, n) in old {
        total += n;
        dropped += n.saturating_sub(new.get(w).copied().unwrap_or(0));
    }
    (dropped, total)
}

/// What an overwrite did.
enum Rewrite {
    /// The file already held the text (nothing written).
    Same,
    /// The text has the same words as the file, only spacing or layout differ (nothing
    /// written: a small model sends this when it meant to add something and left it out).
    SameWords,
    /// Written.
    Changed,
}

/// Replaces the whole text of the existing file `path`; the flag says whether `read_file` line
/// numbers copied into `content` were removed first
/// ([`strip_copied_line_numbers`](crate::format::strip_copied_line_numbers); not when the
/// file's own text has such numbers).
async fn overwrite_file(
    backend: &SharedBackend,
    rt: &BackendRuntime,
    path: &str,
    content: &str,
) -> Result<(Rewrite, bool), crate::BackendError> {
    let old = backend.read_text(rt, path).await?;
    // The 1.5B model copied `1\talpha` rows of a numbered read into the text it wrote back.
    let unnumbered = crate::format::strip_copied_line_numbers(content)
        .filter(|_| crate::format::strip_copied_line_numbers(&old).is_none());
    let numbers = unnumbered.is_some();
    let content = unnumbered.as_deref().unwrap_or(content);
    if old.trim_end() == content.trim_end() {
        return Ok((Rewrite::Same, numbers));
    }
    let (old_words, new_words) = (word_counts(&old), word_counts(content));
    if old_words == new_words {
        return Ok((Rewrite::SameWords, numbers));
    }
    // A rewrite keeps most of the file: one that drops more than half of its words is taken for
    // a model that did not read the file (it wrote `{"license": "MIT"}` over a package.json).
    // Words, not lines: the same JSON written on one line keeps every word.
    let (dropped, total) = words_dropped(&old_words, &new_words);
    if dropped * 2 > total {
        // A small file is shown as it is, so the next call can write it whole with the change
        // (the 1.5B model otherwise spent its remaining steps reading it back, or gave up).
        let shown = if old.len() <= OVERWRITE_SHOW_MAX_BYTES {
            format!(
                ". It holds now:\n{}\nWrite all of it with your change included (or change part of it with edit_file)",
                old.trim_end()
            )
        } else {
            ". Read it with read_file, then write all of it (or change part of it with edit_file)"
                .to_owned()
        };
        return Err(crate::BackendError::Other(format!(
            "{path} exists, and this text would drop {dropped} of its {total} words{shown}"
        )));
    }
    replace_text(backend, rt, path, &old, content)
        .await
        .map(|()| (Rewrite::Changed, numbers))
}

/// Replaces the whole text `old` of the file `path` with `new` in one backend write (an edit of
/// all of it; an empty file, which has no text to match, is written again).
async fn replace_text(
    backend: &SharedBackend,
    rt: &BackendRuntime,
    path: &str,
    old: &str,
    new: &str,
) -> Result<(), crate::BackendError> {
    if old.is_empty() {
        backend.delete(rt, path).await?;
        return backend.write(rt, path, new).await;
    }
    backend.edit(rt, path, old, new, false).await.map(|_| ())
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
    edit_file_impl(backend, false)
}

/// `edit_file` where an empty `old_string` adds `new_string` at the end of an existing file
/// (on a line of its own), for models that ask for an append that way: the embedded model's
/// profile ([`HarnessProfile::edit_empty_appends`](crate::HarnessProfile::edit_empty_appends)).
pub fn appending_edit_file_tool(backend: SharedBackend) -> SharedTool {
    edit_file_impl(backend, true)
}

/// `old` with `add` after it on a line of its own; a file that ended with a newline still does.
fn appended(old: &str, add: &str) -> String {
    let mut out = String::with_capacity(old.len() + add.len() + 2);
    out.push_str(old);
    if !old.is_empty() && !old.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(add);
    if old.ends_with('\n') && !add.ends_with('\n') {
        out.push('\n');
    }
    out
}

fn edit_file_impl(backend: SharedBackend, append: bool) -> SharedTool {
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
                if !a.old_string.is_empty() && a.old_string == a.new_string {
                    return ToolOutput::error(
                        "Error: old_string and new_string are the same, so the edit would change nothing. Put the changed text in new_string.",
                    );
                }
                let rt = rt(&ctx);
                let path = strip_project_name(&backend, &rt, path).await;
                if append && a.old_string.is_empty() && !a.new_string.is_empty() {
                    let appending = async {
                        let old = backend.read_text(&rt, &path).await?;
                        replace_text(&backend, &rt, &path, &old, &appended(&old, &a.new_string))
                            .await
                    };
                    return match appending.await {
                        Ok(()) => ToolOutput::text(format!(
                            "Added the text at the end of {path} (an empty old_string appends)"
                        )),
                        Err(e) => fail_teaching(&backend, &rt, e, None).await,
                    };
                }
                match backend
                    .edit(&rt, &path, &a.old_string, &a.new_string, all)
                    .await
                {
                    Ok(1) => ToolOutput::text(format!("Replaced 1 occurrence in {path}")),
                    Ok(n) => ToolOutput::text(format!("Replaced {n} occurrences in {path}")),
                    Err(e) => {
                        fail_teaching(&backend, &rt, e, Some((&path, &a.old_string))).await
                    }
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
                let rt = rt(&ctx);
                let path = strip_project_name(&backend, &rt, path).await;
                match backend.delete(&rt, &path).await {
                    Ok(()) => ToolOutput::text(format!("Deleted {path}")),
                    Err(e) => fail_teaching(&backend, &rt, e, None).await,
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
                let rt = rt(&ctx);
                let path = match a.path {
                    Some(p) => match normalize(&p) {
                        Ok(n) => Some(strip_project_name(&backend, &rt, n).await),
                        Err(_) => Some(p),
                    },
                    None => None,
                };
                let query = GrepQuery {
                    pattern: a.pattern,
                    literal,
                    path,
                    glob: a.glob,
                    max_matches: cap,
                    max_per_file: per_file,
                };
                match backend.grep(&rt, &query).await {
                    Ok(r) if r.matches.is_empty() && literal && looks_like_regex(&query.pattern) => {
                        ToolOutput::text(format!(
                            "{} The pattern was searched as exact text; set regex true to use it as a regular expression.",
                            format::render_grep(&r, mode, cap)
                        ))
                    }
                    Ok(r) => ToolOutput::text(format::render_grep(&r, mode, cap)),
                    Err(e) => fail_teaching(&backend, &rt, e, None).await,
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
            let (command, mapped) = match exec.working_dir() {
                Some(dir) => map_virtual_paths(&a.command, dir),
                None => (a.command.clone(), Vec::new()),
            };
            match exec.execute(&command, timeout).await {
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
                    if !mapped.is_empty() {
                        text.push_str(&format!(
                            "\n[commands run in the project directory: {} ran as {}]",
                            mapped.iter().map(|(v, _)| v.as_str()).collect::<Vec<_>>().join(", "),
                            mapped.iter().map(|(_, h)| h.as_str()).collect::<Vec<_>>().join(", ")
                        ));
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

/// Maps the file tools' paths in a shell command onto the directory it runs in: a word
/// starting with `/` whose first component exists in `dir` but not at the host's root
/// (`python3 /hello.py`, where the file tools see the project as `/`) becomes relative
/// (`python3 ./hello.py`). Host paths that exist (`/usr/bin/env`, `/tmp`) and paths that exist
/// nowhere are left alone. Returns the command and the (virtual, mapped) pairs.
///
/// ```text
/// python3 /hello.py > /out.txt   →   python3 ./hello.py > /out.txt   (only hello.py exists)
/// ```
pub(crate) fn map_virtual_paths(
    command: &str,
    dir: &std::path::Path,
) -> (String, Vec<(String, String)>) {
    const BOUNDARY: &[char] = &[
        ' ', '\t', '\n', '=', '"', '\'', '>', '<', '(', ';', '|', '&', '`',
    ];
    const END: &[char] = &[
        ' ', '\t', '\n', '"', '\'', ';', '|', '&', ')', '<', '>', '`',
    ];
    let mut out = String::with_capacity(command.len() + 8);
    let mut mapped = Vec::new();
    let mut rest = command;
    let mut prev: Option<char> = None;
    while let Some(c) = rest.chars().next() {
        let at_word = prev.is_none_or(|p| BOUNDARY.contains(&p));
        if c == '/' && at_word {
            let len = rest.find(END).unwrap_or(rest.len());
            let word = &rest[..len];
            let first = word[1..].split('/').next().unwrap_or("");
            let host = std::path::Path::new("/").join(first);
            let usable = !first.is_empty()
                && first != "."
                && first != ".."
                && std::fs::symlink_metadata(&host).is_err();
            let in_dir = usable && std::fs::symlink_metadata(dir.join(first)).is_ok();
            // `/<project folder name>/x` for `/x` (as the file tools read it): the small model
            // copied the folder name from the prompt into its commands too.
            let project = usable
                && !in_dir
                && dir
                    .file_name()
                    .is_some_and(|n| n.to_string_lossy() == first);
            if project {
                let inner = &word[1 + first.len()..];
                let local = if inner.is_empty() || inner == "/" {
                    ".".to_owned()
                } else {
                    format!(".{inner}")
                };
                out.push_str(&local);
                mapped.push((word.to_owned(), local));
            } else if in_dir {
                let local = format!(".{word}");
                out.push_str(&local);
                mapped.push((word.to_owned(), local));
            } else {
                out.push_str(word);
            }
            prev = word.chars().last();
            rest = &rest[len..];
            continue;
        }
        out.push(c);
        prev = Some(c);
        rest = &rest[c.len_utf8()..];
    }
    (out, mapped)
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

#[cfg(test)]
mod tests {
    use super::map_virtual_paths;

    #[test]
    fn file_tool_paths_in_commands_map_onto_the_project() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.path().join("hello_cairn_map.py"), "print(1)\n")
            .unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir(dir.path().join("pkg_cairn_map")).unwrap_or_else(|e| panic!("{e}"));
        let (cmd, mapped) = map_virtual_paths(
            "python3 /hello_cairn_map.py && ls /pkg_cairn_map/x; cat /etc/hostname >/missing_cairn_map",
            dir.path(),
        );
        assert_eq!(
            cmd,
            "python3 ./hello_cairn_map.py && ls ./pkg_cairn_map/x; cat /etc/hostname >/missing_cairn_map"
        );
        assert_eq!(mapped.len(), 2);
        assert_eq!(
            mapped[0],
            ("/hello_cairn_map.py".into(), "./hello_cairn_map.py".into())
        );
        // Not at the start of a word: left alone.
        let (cmd, mapped) = map_virtual_paths(
            "curl http://x/hello_cairn_map.py a/hello_cairn_map.py",
            dir.path(),
        );
        assert_eq!(cmd, "curl http://x/hello_cairn_map.py a/hello_cairn_map.py");
        assert!(mapped.is_empty());
        // Quoted and assigned paths map too.
        let (cmd, _) = map_virtual_paths(
            "F='/hello_cairn_map.py' python3 \"/hello_cairn_map.py\"",
            dir.path(),
        );
        assert_eq!(
            cmd,
            "F='./hello_cairn_map.py' python3 \"./hello_cairn_map.py\""
        );
        // The project folder's own name in front of a path: dropped.
        let project = dir.path().join("proj_cairn_map");
        std::fs::create_dir(&project).unwrap_or_else(|e| panic!("{e}"));
        let (cmd, mapped) = map_virtual_paths(
            "python3 /proj_cairn_map/sum.py; ls /proj_cairn_map",
            &project,
        );
        assert_eq!(cmd, "python3 ./sum.py; ls .");
        assert_eq!(mapped.len(), 2);
        // Unless the project has an entry of that name.
        std::fs::create_dir(project.join("proj_cairn_map")).unwrap_or_else(|e| panic!("{e}"));
        let (cmd, _) = map_virtual_paths("ls /proj_cairn_map/x", &project);
        assert_eq!(cmd, "ls ./proj_cairn_map/x");
    }
}
