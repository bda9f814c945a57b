//! Asking the user in the terminal before a file write, a file edit, a delete or a command.
//!
//! The questions go to stderr and the answers come from stdin, one at a time (calls of one turn
//! that run concurrently wait for each other). When stdin is not a terminal nobody can answer,
//! so every call is rejected with a note that says to run with `--yes`: a script never hangs on
//! a question.
//!
//! # What the question shows (and why it can be trusted)
//!
//! The model writes the arguments, and a prompt-injected model is an adversary. So the question
//! ([`render_request`]):
//! - shows **every argument** of the call, not a summary: the whole command (wrapped to the
//!   terminal's width, never cut), the file's path, `replace_all`, and any extra argument the
//!   model added;
//! - shows long file contents and edits as head and tail with the number of hidden lines, under
//!   a header with the exact size (`1,234 lines, 45,678 bytes`), and offers `[v]iew all`; a
//!   single very long line is cut the same way, saying how many characters are hidden. It
//!   never implies that less will run than will;
//! - escapes every control character and bidi override ([`sanitize`]) so that nothing in the
//!   arguments can move the cursor, erase what was shown, or reorder it, and warns when the
//!   call contains such characters (they are part of what will run).

use std::io::{BufRead, IsTerminal, Write};
use std::sync::atomic::{AtomicUsize, Ordering};

use cairn_core::BoxFuture;
use cairn_deep::{ApprovalHandler, ApprovalRequest, Decision, DecisionKind};
use serde_json::Value;

use crate::render::{Style, expand_tabs, has_unsafe_chars, lines, one_line, sanitize, thousands};

/// The tools that need approval unless `--yes` is given.
pub const GUARDED_TOOLS: &[&str] = &["write_file", "edit_file", "delete", "execute"];

/// Lines of a long text shown before the hidden part.
pub const HEAD_LINES: usize = 20;
/// Lines of a long text shown after the hidden part.
pub const TAIL_LINES: usize = 10;
/// Characters of one line shown before the rest of the line is hidden.
pub const MAX_LINE_CHARS: usize = 2_000;

/// An [`ApprovalHandler`] that asks on the terminal.
pub struct TerminalApprover {
    interactive: bool,
    style: Style,
    turn: tokio::sync::Mutex<()>,
    approved: AtomicUsize,
    rejected: AtomicUsize,
}

impl TerminalApprover {
    /// Asks on the terminal when stdin is one; otherwise rejects every call.
    pub fn new(style: Style) -> Self {
        TerminalApprover {
            interactive: std::io::stdin().is_terminal(),
            style,
            turn: tokio::sync::Mutex::new(()),
            approved: AtomicUsize::new(0),
            rejected: AtomicUsize::new(0),
        }
    }

    /// Calls approved (as asked or edited) so far.
    pub fn approved(&self) -> usize {
        self.approved.load(Ordering::Relaxed)
    }

    /// Calls rejected so far (by the user, or because nobody could be asked).
    pub fn rejected(&self) -> usize {
        self.rejected.load(Ordering::Relaxed)
    }

    /// Whether calls were reviewed and every one of them was rejected: nothing the agent wanted
    /// to write, edit or run did.
    pub fn all_rejected(&self) -> bool {
        self.rejected() > 0 && self.approved() == 0
    }

    fn count(&self, d: &Decision) {
        let counter = match d {
            Decision::Reject { .. } => &self.rejected,
            _ => &self.approved,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

impl ApprovalHandler for TerminalApprover {
    fn review<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, Decision> {
        Box::pin(async move {
            if !self.interactive {
                eprintln!(
                    "{}",
                    self.style.warn(&format!(
                        "cairn: rejected {} ({}): stdin is not a terminal, so cairn cannot ask; run with --yes to allow file writes, edits, deletes and commands",
                        one_line(&request.tool, 100),
                        describe(request)
                    ))
                );
                let d = Decision::Reject {
                    message: Some(format!(
                        "Nobody could approve this {} call (cairn is not running in a terminal and --yes was not given), so it did not run.",
                        request.tool
                    )),
                };
                self.count(&d);
                return d;
            }
            let _turn = self.turn.lock().await;
            let request = request.clone();
            let style = self.style;
            let d = tokio::task::spawn_blocking(move || ask(&request, style))
                .await
                .unwrap_or_else(|_| Decision::Reject {
                    message: Some("cairn could not read the user's answer".into()),
                });
            self.count(&d);
            d
        })
    }
}

fn str_arg<'a>(r: &'a ApprovalRequest, k: &str) -> Option<&'a str> {
    r.arguments.get(k).and_then(Value::as_str)
}

/// The key holding a file tool's path: `file_path`, or its alias `path` when only that is
/// given.
fn path_key(r: &ApprovalRequest) -> &'static str {
    if r.arguments.get("file_path").is_none() && r.arguments.get("path").is_some() {
        "path"
    } else {
        "file_path"
    }
}

/// One line saying what the call would do (sanitized, possibly cut: for notes, not for the
/// question itself).
pub fn describe(r: &ApprovalRequest) -> String {
    let s = |k: &str| str_arg(r, k).unwrap_or("?");
    let path = s(path_key(r));
    match r.tool.as_str() {
        "write_file" => {
            let n = s("content").lines().count();
            format!("create {} ({})", one_line(path, 200), lines(n))
        }
        "edit_file" => format!("edit {}", one_line(path, 200)),
        "delete" => format!("delete {}", one_line(path, 200)),
        "execute" => format!("run `{}`", one_line(s("command"), 100)),
        _ => format!(
            "{} {}",
            one_line(&r.tool, 100),
            one_line(&r.arguments.to_string(), 100)
        ),
    }
}

/// What the question shows: its lines (plain text, already sanitized), whether something was
/// left out (then `[v]iew all` is offered), and whether the arguments hold characters that were
/// escaped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Shown {
    /// The lines; the first is the header.
    pub lines: Vec<String>,
    /// Some lines or characters were left out (their number is said where they were).
    pub hidden: bool,
    /// The arguments contain control or bidi characters, shown escaped.
    pub escaped: bool,
}

/// The width of the terminal on stderr (else `$COLUMNS`, else 80), at least 40.
pub fn terminal_width() -> usize {
    let from_tty = rustix::termios::tcgetwinsize(std::io::stderr())
        .ok()
        .map(|w| usize::from(w.ws_col))
        .filter(|w| *w > 0);
    let from_env = || {
        std::env::var("COLUMNS")
            .ok()
            .and_then(|c| c.trim().parse::<usize>().ok())
            .filter(|w| *w > 0)
    };
    from_tty.or_else(from_env).unwrap_or(80).max(40)
}

/// Builds the lines of a question.
struct Builder {
    width: usize,
    full: bool,
    out: Shown,
}

impl Builder {
    /// `text` (one line, no line break) split into pieces that fit the width after the prefix:
    /// the first piece after `first`, the rest after `cont`.
    fn wrapped(&mut self, first: &str, cont: &str, text: &str) {
        let room = self
            .width
            .saturating_sub(first.chars().count().max(cont.chars().count()) + 1)
            .max(20);
        let chars: Vec<char> = text.chars().collect();
        if chars.is_empty() {
            self.out.lines.push(first.trim_end().to_owned());
            return;
        }
        for (i, piece) in chars.chunks(room).enumerate() {
            let prefix = if i == 0 { first } else { cont };
            self.out
                .lines
                .push(format!("{prefix}{}", piece.iter().collect::<String>()));
        }
    }

    /// One line of text (raw), sanitized, cut at [`MAX_LINE_CHARS`] unless showing everything,
    /// wrapped.
    fn text_line(&mut self, first: &str, cont: &str, raw: &str, tabs: bool) {
        let raw = if tabs {
            expand_tabs(raw)
        } else {
            std::borrow::Cow::Borrowed(raw)
        };
        let shown = sanitize(&raw);
        let n = shown.chars().count();
        if self.full || n <= MAX_LINE_CHARS {
            self.wrapped(first, cont, &shown);
        } else {
            let head: String = shown.chars().take(MAX_LINE_CHARS).collect();
            self.wrapped(first, cont, &head);
            self.out.lines.push(format!(
                "{cont}… {} more characters on this line not shown ([v]iew all shows them)",
                thousands((n - MAX_LINE_CHARS) as u64)
            ));
            self.out.hidden = true;
        }
    }

    /// A multi-line text (file content, edit strings) with a gutter; long texts as head and
    /// tail with the count of hidden lines.
    fn block(&mut self, gutter: &str, text: &str) {
        let mut all: Vec<&str> = text.split('\n').collect();
        if text.ends_with('\n') {
            all.pop();
        }
        if text.is_empty() {
            self.out.lines.push(format!("{gutter}(empty)"));
            return;
        }
        let cont = format!("{}┊ ", " ".repeat(gutter.chars().count().saturating_sub(2)));
        let total = all.len();
        let cut = !self.full && total > HEAD_LINES + TAIL_LINES + 5;
        for (i, l) in all.iter().enumerate() {
            if cut && i == HEAD_LINES {
                let hidden = total - HEAD_LINES - TAIL_LINES;
                self.out.lines.push(format!(
                    "{}┄┄ {} not shown (lines {}–{} of {}; [v]iew all shows them) ┄┄",
                    " ".repeat(gutter.chars().count().saturating_sub(2)),
                    lines(hidden),
                    HEAD_LINES + 1,
                    total - TAIL_LINES,
                    thousands(total as u64)
                ));
                self.out.hidden = true;
            }
            if cut && i >= HEAD_LINES && i < total - TAIL_LINES {
                continue;
            }
            self.text_line(gutter, &cont, l, true);
        }
        if !text.ends_with('\n') {
            self.out.lines.push(format!(
                "{}(no line break at the end)",
                " ".repeat(gutter.chars().count())
            ));
        }
    }

    /// An argument as `name: value`: strings in full (wrapped; several lines as a block),
    /// anything else as JSON.
    fn argument(&mut self, name: &str, value: &Value) {
        let name = one_line(name, 100);
        match value {
            Value::String(s) if s.contains('\n') => {
                self.out.lines.push(format!(
                    "    {name}: ({}, {} bytes)",
                    lines(s.lines().count()),
                    thousands(s.len() as u64)
                ));
                self.block("      │ ", s);
            }
            Value::String(s) => self.text_line(&format!("    {name}: "), "      ", s, false),
            v => self.text_line(&format!("    {name}: "), "      ", &v.to_string(), false),
        }
    }

    /// The arguments not in `known`, each as `also given: name: value`.
    fn extra(&mut self, args: &Value, known: &[&str]) {
        if let Value::Object(map) = args {
            for (k, v) in map {
                if !known.contains(&k.as_str()) {
                    self.argument(&format!("also given: {k}"), v);
                }
            }
        }
    }
}

/// Everything the question for `r` shows, for a terminal `width` columns wide; `full` shows
/// long texts entirely.
pub fn render_request(r: &ApprovalRequest, width: usize, full: bool) -> Shown {
    let mut b = Builder {
        width,
        full,
        out: Shown::default(),
    };
    let args = &r.arguments;
    let tool = one_line(&r.tool, 100);
    let path_key = path_key(r);
    let path = str_arg(r, path_key);
    match (r.tool.as_str(), args) {
        ("execute", Value::Object(_)) if str_arg(r, "command").is_some() => {
            let command = str_arg(r, "command").unwrap_or_default();
            b.out.lines.push(format!(
                "? approve: run this command ({}, {} bytes)",
                lines(command.split('\n').count()),
                thousands(command.len() as u64)
            ));
            for (i, l) in command.split('\n').enumerate() {
                // `$` starts the command, `>` each further line of it, spaces a wrapped piece.
                b.text_line(if i == 0 { "    $ " } else { "    > " }, "      ", l, false);
            }
            if let Some(t) = args.get("timeout") {
                match t.as_u64() {
                    Some(secs) => b.out.lines.push(format!("    timeout: {secs} s")),
                    None => b.argument("timeout", t),
                }
            }
            b.extra(args, &["command", "timeout"]);
        }
        ("write_file", Value::Object(_)) if path.is_some() => {
            let content = str_arg(r, "content");
            b.out.lines.push(match content {
                Some(c) => format!(
                    "? approve: create {} ({}, {} bytes)",
                    one_line(path.unwrap_or_default(), 400),
                    lines(c.lines().count()),
                    thousands(c.len() as u64)
                ),
                None => format!(
                    "? approve: create {}",
                    one_line(path.unwrap_or_default(), 400)
                ),
            });
            match content {
                Some(c) => b.block("    │ ", c),
                None => {
                    if let Some(v) = args.get("content") {
                        b.argument("content", v);
                    }
                }
            }
            b.extra(args, &[path_key, "content"]);
        }
        ("edit_file", Value::Object(_)) if path.is_some() => {
            let all = args.get("replace_all").and_then(Value::as_bool) == Some(true);
            b.out.lines.push(format!(
                "? approve: edit {} (replace {})",
                one_line(path.unwrap_or_default(), 400),
                if all {
                    "every occurrence"
                } else {
                    "one occurrence"
                }
            ));
            for (key, label, gutter) in [
                ("old_string", "replace", "    - "),
                ("new_string", "with", "    + "),
            ] {
                match str_arg(r, key) {
                    Some(s) => {
                        b.out.lines.push(format!(
                            "    {label} ({}, {} bytes):",
                            lines(s.lines().count()),
                            thousands(s.len() as u64)
                        ));
                        b.block(gutter, s);
                    }
                    None => {
                        if let Some(v) = args.get(key) {
                            b.argument(key, v);
                        }
                    }
                }
            }
            if let Some(v) = args.get("replace_all")
                && !v.is_boolean()
            {
                b.argument("replace_all", v);
            }
            b.extra(args, &[path_key, "old_string", "new_string", "replace_all"]);
        }
        ("delete", Value::Object(_)) if path.is_some() => {
            b.out.lines.push(format!(
                "? approve: delete {}",
                one_line(path.unwrap_or_default(), 400)
            ));
            // cairn cannot tell here whether it is a directory, so the question says both.
            b.out.lines.push(
                "    a file is deleted; a directory is deleted with everything in it".to_owned(),
            );
            b.extra(args, &[path_key]);
        }
        (_, Value::Object(map)) => {
            b.out.lines.push(format!("? approve: {tool}"));
            for (k, v) in map {
                b.argument(k, v);
            }
        }
        (_, v) => {
            b.out.lines.push(format!("? approve: {tool}"));
            b.argument("arguments", v);
        }
    }
    if !r.namespace.is_empty() {
        // Which subagent asks (#10): its namespace in the thread, escaped like the rest.
        b.text_line("    asked by a subagent: ", "      ", &r.namespace, false);
    }
    if let Some(d) = &r.description {
        b.text_line("    note: ", "      ", d, false);
    }
    b.out.escaped = has_unsafe_chars(&r.tool) || args_have_unsafe(args);
    if b.out.escaped {
        b.out.lines.push(
            "    ⚠ the call contains control or text-direction characters, shown as escapes"
                .to_owned(),
        );
        b.out
            .lines
            .push("      (\\x1b, \\r, \\u{202e}, …): they are part of what will run".to_owned());
    }
    b.out
}

/// Whether any string in `v` (keys included) holds a character [`sanitize`] escapes.
fn args_have_unsafe(v: &Value) -> bool {
    match v {
        Value::String(s) => has_unsafe_chars(s),
        Value::Array(a) => a.iter().any(args_have_unsafe),
        Value::Object(m) => m
            .iter()
            .any(|(k, v)| has_unsafe_chars(k) || args_have_unsafe(v)),
        _ => false,
    }
}

fn read_line() -> Option<String> {
    let mut line = String::new();
    match std::io::stdin().lock().read_line(&mut line) {
        Ok(0) | Err(_) => None,
        Ok(_) => Some(line.trim().to_owned()),
    }
}

fn prompt(text: &str) {
    let mut err = std::io::stderr().lock();
    let _ = write!(err, "{text}");
    let _ = err.flush();
}

fn show(r: &ApprovalRequest, style: Style, full: bool) -> Shown {
    let shown = render_request(r, terminal_width(), full);
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err);
    for (i, l) in shown.lines.iter().enumerate() {
        let l = if i == 0 {
            style.bold(l)
        } else if l.starts_with("    ⚠") || l.starts_with("      (\\x1b") {
            style.warn(l)
        } else {
            l.clone()
        };
        let _ = writeln!(err, "{l}");
    }
    let _ = err.flush();
    shown
}

fn ask(r: &ApprovalRequest, style: Style) -> Decision {
    let allowed = |k: DecisionKind| r.allowed_decisions.contains(&k);
    let shown = show(r, style, false);
    let mut options = Vec::new();
    if allowed(DecisionKind::Approve) {
        options.push("[a]pprove");
    }
    if allowed(DecisionKind::Edit) {
        options.push("[e]dit");
    }
    if allowed(DecisionKind::Reject) {
        options.push("[r]eject");
    }
    if shown.hidden {
        options.push("[v]iew all");
    }
    let options = options.join(" / ");
    loop {
        prompt(&format!("  {options} > "));
        let Some(answer) = read_line() else {
            eprintln!();
            return Decision::Reject {
                message: Some("The user gave no answer (end of input).".into()),
            };
        };
        match answer.to_ascii_lowercase().as_str() {
            "a" | "approve" | "y" | "yes" if allowed(DecisionKind::Approve) => {
                return Decision::Approve;
            }
            "e" | "edit" if allowed(DecisionKind::Edit) => {
                if let Some(arguments) = edit(&r.arguments) {
                    return Decision::Edit { arguments };
                }
            }
            "r" | "reject" | "n" | "no" if allowed(DecisionKind::Reject) => {
                prompt("  reason for the agent (optional) > ");
                let reason = read_line().filter(|s| !s.is_empty());
                return Decision::Reject { message: reason };
            }
            "v" | "view" if shown.hidden => {
                show(r, style, true);
            }
            _ => eprintln!("  please answer with one of {options}"),
        }
    }
}

/// New arguments from `$VISUAL`/`$EDITOR` on a temp file, or from one JSON line.
fn edit(arguments: &Value) -> Option<Value> {
    let editor = ["VISUAL", "EDITOR"]
        .iter()
        .find_map(|k| std::env::var(k).ok().filter(|v| !v.trim().is_empty()));
    let text = match editor {
        Some(editor) => edit_in_editor(&editor, arguments)?,
        None => {
            // JSON escapes every control character, so this line is safe to print.
            eprintln!(
                "    current: {}",
                crate::secrets::redact(&serde_json::to_string(arguments).unwrap_or_default())
            );
            prompt("  new arguments as one JSON line (empty: back) > ");
            read_line().filter(|l| !l.is_empty())?
        }
    };
    match serde_json::from_str::<Value>(&text) {
        Ok(v) if v.is_object() => Some(v),
        Ok(_) => {
            eprintln!("  the arguments must be a JSON object");
            None
        }
        Err(e) => {
            eprintln!("  not valid JSON: {}", sanitize(&e.to_string()));
            None
        }
    }
}

fn edit_in_editor(editor: &str, arguments: &Value) -> Option<String> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let path = std::env::temp_dir().join(format!("cairn-args-{}-{nanos}.json", std::process::id()));
    let pretty = serde_json::to_string_pretty(arguments).unwrap_or_default();
    if let Err(e) = std::fs::write(&path, pretty) {
        eprintln!("  cannot write {}: {e}", path.display());
        return None;
    }
    // Through the shell so that EDITOR="code --wait" works.
    let status = std::process::Command::new("/bin/sh")
        .arg("-c")
        .arg(format!("{editor} \"$1\""))
        .arg("sh")
        .arg(&path)
        .status();
    let text = match status {
        Ok(s) if s.success() => std::fs::read_to_string(&path).ok(),
        Ok(s) => {
            eprintln!("  the editor exited with {s}");
            None
        }
        Err(e) => {
            eprintln!("  cannot start the editor {editor:?}: {e}");
            None
        }
    };
    let _ = std::fs::remove_file(&path);
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn req(tool: &str, arguments: Value) -> ApprovalRequest {
        let mut r = ApprovalRequest::new(tool, "c1", arguments);
        r.allowed_decisions = vec![DecisionKind::Approve, DecisionKind::Reject];
        r
    }

    fn text(s: &Shown) -> String {
        s.lines.join("\n")
    }

    #[test]
    fn a_delete_is_guarded_and_shown_plainly() {
        assert!(GUARDED_TOOLS.contains(&"delete"));
        let r = req("delete", json!({"file_path": "/src/old"}));
        let shown = text(&render_request(&r, 80, false));
        assert_eq!(
            shown,
            "? approve: delete /src/old\n    a file is deleted; a directory is deleted with everything in it"
        );
        assert_eq!(describe(&r), "delete /src/old");
        // The alias `path` works the same; an unexpected argument is shown.
        let r = req("delete", json!({"path": "/a\u{1b}[2J.md", "force": true}));
        let shown = text(&render_request(&r, 80, false));
        assert!(
            shown.starts_with("? approve: delete /a\\x1b[2J.md\n"),
            "{shown}"
        );
        assert!(shown.contains("also given: force"), "{shown}");
        // write_file with file_path shows the path as with path.
        let r = req(
            "write_file",
            json!({"file_path": "/n.md", "content": "x\n"}),
        );
        assert!(
            text(&render_request(&r, 80, false))
                .starts_with("? approve: create /n.md (1 line, 2 bytes)")
        );
    }

    #[test]
    fn a_subagent_request_says_so() {
        let mut r = req("write_file", json!({"path": "/a.md", "content": "x"}));
        assert!(!text(&render_request(&r, 80, true)).contains("subagent"));
        r.namespace = "/3.call_1".into();
        assert!(text(&render_request(&r, 80, true)).contains("asked by a subagent: /3.call_1"));
    }

    #[test]
    fn a_spoofing_command_is_shown_escaped() {
        let s = render_request(
            &req(
                "execute",
                json!({"command": "ls -la\r\x1b[2Ktouch PWNED\u{202e}x\u{8}\u{9b}"}),
            ),
            80,
            false,
        );
        let t = text(&s);
        assert!(
            t.contains(r"$ ls -la\r\x1b[2Ktouch PWNED\u{202e}x\x08\u{9b}"),
            "{t}"
        );
        assert!(!t.chars().any(|c| c.is_control() && c != '\n'), "{t:?}");
        assert!(s.escaped);
        assert!(t.contains("⚠"));
    }

    #[test]
    fn a_long_command_is_shown_whole_and_wrapped() {
        let command = format!("echo {} ; touch HIDDEN_TAIL", "A".repeat(290));
        let s = render_request(
            &req("execute", json!({"command": command, "timeout": 5})),
            60,
            false,
        );
        assert!(!s.hidden);
        assert!(s.lines.iter().all(|l| l.chars().count() <= 60), "{s:?}");
        let body: String = s.lines[1..]
            .iter()
            .take_while(|l| l.starts_with("    $ ") || l.starts_with("      "))
            .map(|l| &l[6..])
            .collect();
        assert_eq!(body, command);
        assert!(text(&s).contains("timeout: 5 s"));
    }

    #[test]
    fn every_argument_is_shown() {
        let s = render_request(
            &req("execute", json!({"command": "ls", "env": {"X": "1"}})),
            80,
            false,
        );
        assert!(
            text(&s).contains(r#"also given: env: {"X":"1"}"#),
            "{}",
            text(&s)
        );
        let s = render_request(
            &req(
                "edit_file",
                json!({"path": "/a", "old_string": "x", "new_string": "y", "replace_all": true}),
            ),
            80,
            false,
        );
        let t = text(&s);
        assert!(t.contains("edit /a (replace every occurrence)"), "{t}");
        assert!(t.contains("    - x") && t.contains("    + y"), "{t}");
    }

    #[test]
    fn long_content_states_its_size_and_hidden_lines() {
        let content: String = (1..=100).map(|i| format!("line {i}\n")).collect();
        let s = render_request(
            &req(
                "write_file",
                json!({"path": "/big.txt", "content": content}),
            ),
            80,
            false,
        );
        let t = text(&s);
        assert!(s.hidden);
        assert!(
            t.contains(&format!(
                "create /big.txt (100 lines, {} bytes)",
                content.len()
            )),
            "{t}"
        );
        assert!(t.contains("70 lines not shown (lines 21–90 of 100"), "{t}");
        assert!(t.contains("│ line 20\n") && t.contains("│ line 91\n") && t.contains("│ line 100"));
        assert!(!t.contains("│ line 50\n"));
        let full = text(&render_request(
            &req(
                "write_file",
                json!({"path": "/big.txt", "content": content}),
            ),
            80,
            true,
        ));
        assert!(full.contains("│ line 50\n"));
    }

    #[test]
    fn a_hidden_line_of_content_is_visible() {
        // A line erased with CR + "erase line" would vanish on a raw terminal.
        let content = "safe line\nrm -rf ~\r\x1b[2K\nend\n";
        let t = text(&render_request(
            &req("write_file", json!({"path": "/x.sh", "content": content})),
            80,
            false,
        ));
        assert!(t.contains(r"│ rm -rf ~\r\x1b[2K"), "{t}");
    }
}
