//! Showing a run as it happens: human text (with light formatting) or one JSON event per line.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::io::{IsTerminal, Write};
use std::time::Duration;

use cairn_core::{AgentEvent, AgentEventKind, AgentResponse, Message, Role, UpdateEvent, Usage};
use serde_json::Value;

/// Whether to use ANSI colors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Style {
    /// Colors on.
    pub color: bool,
}

impl Style {
    /// Colors when stdout is a terminal and `NO_COLOR` is not set (<https://no-color.org>).
    pub fn for_stdout() -> Style {
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        Style {
            color: !no_color && std::io::stdout().is_terminal(),
        }
    }

    /// Colors when stderr is a terminal and `NO_COLOR` is not set.
    pub fn for_stderr() -> Style {
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        Style {
            color: !no_color && std::io::stderr().is_terminal(),
        }
    }

    fn paint(self, code: &str, s: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{s}\x1b[0m")
        } else {
            s.to_owned()
        }
    }

    /// Bold.
    pub fn bold(self, s: &str) -> String {
        self.paint("1", s)
    }
    /// Dimmed.
    pub fn dim(self, s: &str) -> String {
        self.paint("2", s)
    }
    /// A warning (yellow).
    pub fn warn(self, s: &str) -> String {
        self.paint("33", s)
    }
    /// An error (red).
    pub fn error(self, s: &str) -> String {
        self.paint("31", s)
    }
    /// A tool call (cyan).
    pub fn tool(self, s: &str) -> String {
        self.paint("36", s)
    }
    /// Success (green).
    pub fn ok(self, s: &str) -> String {
        self.paint("32", s)
    }
}

/// Whether printing `c` raw could move the cursor, erase, recolor or reorder what a terminal
/// shows: every control character except the line feed (C0 including tab and carriage return,
/// DEL, C1 — `char::is_control`), the bidirectional embeddings, overrides and isolates
/// (U+202A–U+202E, U+2066–U+2069), the bidi marks (U+200E, U+200F, U+061C) and the Unicode line
/// and paragraph separators (U+2028, U+2029).
pub fn is_unsafe_char(c: char) -> bool {
    c != '\n'
        && (c.is_control()
            || matches!(
                c,
                '\u{202a}'..='\u{202e}'
                    | '\u{2066}'..='\u{2069}'
                    | '\u{200e}'
                    | '\u{200f}'
                    | '\u{061c}'
                    | '\u{2028}'
                    | '\u{2029}'
            ))
}

/// Whether `s` holds a character [`sanitize`] escapes.
pub fn has_unsafe_chars(s: &str) -> bool {
    s.chars().any(is_unsafe_char)
}

/// The visible escape of an unsafe character: `\t`, `\r`, `\x1b` (below U+0080), `\u{9b}`,
/// `\u{202e}` (above).
pub fn escape_char(c: char) -> String {
    match c {
        '\t' => "\\t".to_owned(),
        '\r' => "\\r".to_owned(),
        c if (c as u32) < 0x80 => format!("\\x{:02x}", c as u32),
        c => format!("\\u{{{:x}}}", c as u32),
    }
}

/// Text that came from the model, a tool or a server, made safe to print on a terminal: every
/// [`is_unsafe_char`] replaced by its visible escape ([`escape_char`]; line feeds stay), and
/// every registered secret and URL password redacted ([`crate::secrets::redact`]).
///
/// This is the one sanitizer of the CLI's human output: streamed text and reasoning, tool-call
/// summaries, result previews, paths, todo items, subagent names, approvals and errors all go
/// through it (or through [`one_line`], which uses it). Styling (our own colors) is applied
/// after it. `--json` output needs no escaping (JSON escapes control characters) but is
/// redacted too.
pub fn sanitize(s: &str) -> String {
    let s = crate::secrets::redact(s);
    if !has_unsafe_chars(&s) {
        return s.into_owned();
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        if is_unsafe_char(c) {
            out.push_str(&escape_char(c));
        } else {
            out.push(c);
        }
    }
    out
}

/// `s` [`sanitize`]d on one line (line breaks shown as `⏎`, tabs as spaces), at most `max`
/// characters (then `…`).
pub fn one_line(s: &str, max: usize) -> String {
    let flat = sanitize(&s.trim().replace('\t', " ")).replace('\n', "⏎");
    if flat.chars().count() <= max {
        flat
    } else {
        let mut t: String = flat.chars().take(max.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}

/// `s` with each tab replaced by the spaces up to the next multiple of 4 columns (counted from
/// the last line break), for showing text whose tabs are layout, not content.
pub fn expand_tabs(s: &str) -> Cow<'_, str> {
    if !s.contains('\t') {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    let mut col = 0usize;
    for c in s.chars() {
        match c {
            '\t' => {
                let n = 4 - col % 4;
                out.extend(std::iter::repeat_n(' ', n));
                col += n;
            }
            '\n' => {
                out.push(c);
                col = 0;
            }
            c => {
                out.push(c);
                col += 1;
            }
        }
    }
    Cow::Owned(out)
}

/// `n` with thousands separators.
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// What a run did, for the summary line.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Summary {
    /// Model calls (of the agent and its subagents).
    pub steps: usize,
    /// Tool calls that finished.
    pub tool_calls: usize,
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Generated tokens.
    pub output_tokens: u64,
    /// Prompt tokens served from a cache.
    pub cached_input_tokens: u64,
    /// Wall time in milliseconds.
    pub wall_ms: u128,
}

impl Summary {
    /// The human summary line.
    pub fn line(&self) -> String {
        let plural =
            |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
        let mut cached = String::new();
        if self.cached_input_tokens > 0 {
            cached = format!(" ({} cached)", thousands(self.cached_input_tokens));
        }
        format!(
            "{} · {} · tokens {} in{cached} / {} out · {:.1} s",
            plural(self.steps, "step", "steps"),
            plural(self.tool_calls, "tool call", "tool calls"),
            thousands(self.input_tokens),
            thousands(self.output_tokens),
            Duration::from_millis(u64::try_from(self.wall_ms).unwrap_or(u64::MAX)).as_secs_f64()
        )
    }
}

#[derive(Debug, Default)]
struct PendingCall {
    call_id: String,
    name: String,
    arguments: String,
}

/// Collects the run's numbers from its updates.
#[derive(Debug, Default)]
pub struct Tally {
    /// Tool results seen (all agents).
    pub tool_calls: usize,
    /// Model calls finished by subagents.
    pub sub_steps: usize,
    /// Usage reported by subagents.
    pub sub_usage: Usage,
    /// The final response, once the run completed.
    pub response: Option<AgentResponse>,
}

impl Tally {
    /// Counts one update.
    pub fn observe(&mut self, u: &AgentEvent) {
        let nested = !u.metadata.namespace.is_empty();
        let side = u.metadata.source.is_some();
        match &u.kind {
            AgentEventKind::Model(m) => match &m.event {
                // Middleware's own model calls (e.g. summarization): their tokens count, they
                // are not steps of the agent.
                UpdateEvent::Usage(usage) if side => self.sub_usage.add(usage),
                UpdateEvent::Finished { .. } if side => {}
                UpdateEvent::Finished { .. } if nested => self.sub_steps += 1,
                UpdateEvent::Usage(usage) if nested => self.sub_usage.add(usage),
                _ => {}
            },
            AgentEventKind::ToolResult(_) => self.tool_calls += 1,
            AgentEventKind::RunCompleted(r) if !nested => self.response = Some((**r).clone()),
            _ => {}
        }
    }

    /// The summary, with the wall time.
    pub fn summary(&self, wall: Duration) -> Summary {
        let mut usage = self.sub_usage;
        let mut steps = self.sub_steps;
        if let Some(r) = &self.response {
            usage.add(&r.usage);
            steps += r.model_calls;
        }
        Summary {
            steps,
            tool_calls: self.tool_calls,
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
            cached_input_tokens: usage.cached_input_tokens,
            wall_ms: wall.as_millis(),
        }
    }
}

/// Where a piece of human output goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sink {
    /// The main agent's text: the answer.
    Out,
    /// Everything else: tool calls and results, the todo list, subagents, notes, the summary.
    Err,
}

/// Prints updates for a person: streamed text, tool calls and results in short, the todo list,
/// subagents indented.
///
/// The main agent's text goes to stdout and everything else (tool calls, results, subagents,
/// notes, the closing summary) to stderr, so `cairn run "…" > answer.txt` or a script reading
/// stdout gets the answer alone, while a terminal shows both in order (each update is flushed
/// in sequence).
#[derive(Debug)]
pub struct HumanRenderer {
    /// The style of stderr, where the styled parts go.
    style: Style,
    verbose: bool,
    /// The stream holding an unfinished line, if any.
    open_line: Option<Sink>,
    namespace: Vec<String>,
    pending: BTreeMap<(Vec<String>, usize), PendingCall>,
    calls: HashMap<String, (String, String)>,
    source: Option<String>,
    buf: Vec<(Sink, String)>,
}

impl HumanRenderer {
    /// A renderer writing the answer to stdout and the rest to stderr, styled with `style`
    /// (see [`Style::for_stderr`]).
    pub fn new(style: Style, verbose: bool) -> Self {
        HumanRenderer {
            style,
            verbose,
            open_line: None,
            namespace: Vec::new(),
            pending: BTreeMap::new(),
            calls: HashMap::new(),
            source: None,
            buf: Vec::new(),
        }
    }

    fn push(&mut self, sink: Sink, text: &str) {
        match self.buf.last_mut() {
            Some((s, b)) if *s == sink => b.push_str(text),
            _ => self.buf.push((sink, text.to_owned())),
        }
    }

    /// Where model text goes: the main agent's own text is the answer; a subagent's, or a
    /// middleware's model call's (e.g. summarization, shown with `--verbose`), is activity.
    fn text_sink(&self) -> Sink {
        if self.namespace.is_empty() && self.source.is_none() {
            Sink::Out
        } else {
            Sink::Err
        }
    }

    fn indent(&self) -> String {
        "  ".repeat(self.namespace.len())
            + if self.namespace.is_empty() {
                ""
            } else {
                "│ "
            }
    }

    fn newline_if_needed(&mut self) {
        if let Some(sink) = self.open_line.take() {
            self.push(sink, "\n");
        }
    }

    /// A line of activity (stderr).
    fn line(&mut self, text: &str) {
        self.newline_if_needed();
        let line = format!("{}{text}\n", self.indent());
        self.push(Sink::Err, &line);
    }

    fn text(&mut self, sink: Sink, text: &str) {
        if self.open_line.is_some_and(|s| s != sink) {
            self.newline_if_needed();
        }
        for (i, piece) in text.split('\n').enumerate() {
            if i > 0 {
                self.push(sink, "\n");
                self.open_line = None;
            }
            if piece.is_empty() {
                continue;
            }
            if self.open_line.is_none() {
                let indent = self.indent();
                self.push(sink, &indent);
                self.open_line = Some(sink);
            }
            self.push(sink, piece);
        }
    }

    fn switch_namespace(&mut self, u: &AgentEvent) {
        if u.metadata.namespace == self.namespace {
            return;
        }
        self.newline_if_needed();
        self.namespace = u.metadata.namespace.clone();
        if !self.namespace.is_empty() {
            let who = u.metadata.agent_name.clone().unwrap_or_default();
            let head = format!(
                "{}┌ subagent {}",
                "  ".repeat(self.namespace.len()),
                one_line(
                    &if who.is_empty() {
                        self.namespace.join(" › ")
                    } else {
                        who
                    },
                    200
                )
            );
            let head = self.style.dim(&head);
            self.push(Sink::Err, &head);
            self.push(Sink::Err, "\n");
        }
    }

    fn flush_calls(&mut self, ns: &[String]) {
        let keys: Vec<_> = self
            .pending
            .keys()
            .filter(|(n, _)| n.as_slice() == ns)
            .cloned()
            .collect();
        for k in keys {
            if let Some(c) = self.pending.remove(&k) {
                let shown = format!("→ {}", call_summary(&c.name, &c.arguments, self.max()));
                let shown = self.style.tool(&shown);
                self.line(&shown);
                self.calls.insert(c.call_id, (c.name, c.arguments));
            }
        }
    }

    fn max(&self) -> usize {
        if self.verbose { 400 } else { 100 }
    }

    /// Shows one update (buffered; call [`flush`](Self::flush)).
    pub fn handle(&mut self, u: &AgentEvent) {
        if matches!(u.kind, AgentEventKind::RunCompleted(_)) {
            return;
        }
        self.switch_namespace(u);
        // Updates of middleware's own model calls (e.g. summarization) are shown as one note.
        if u.metadata.source != self.source {
            self.source = u.metadata.source.clone();
            if let Some(src) = &self.source {
                let note = self.style.dim(&format!("… {} …", one_line(src, 200)));
                self.line(&note);
            }
        }
        if self.source.is_some() && !self.verbose {
            return;
        }
        let ns = u.metadata.namespace.clone();
        let event = match &u.kind {
            AgentEventKind::Model(m) => &m.event,
            AgentEventKind::ToolResult(r) => {
                self.tool_result(&ns, r);
                return;
            }
            AgentEventKind::Message(m) => {
                self.message(m);
                return;
            }
            _ => return,
        };
        match event {
            UpdateEvent::TextDelta { text } => {
                self.text(self.text_sink(), &sanitize(&expand_tabs(text)));
            }
            UpdateEvent::ReasoningDelta { text } if self.verbose => {
                let t = self.style.dim(&sanitize(&expand_tabs(text)));
                self.text(Sink::Err, &t);
            }
            UpdateEvent::ToolCallStart {
                index,
                call_id,
                name,
            } => {
                let slot = self.pending.entry((ns, *index)).or_default();
                if slot.call_id.is_empty() {
                    slot.call_id = call_id.clone();
                }
                if slot.name.is_empty() {
                    slot.name = name.clone();
                }
            }
            UpdateEvent::ToolCallDelta { index, arguments } => {
                self.pending
                    .entry((ns, *index))
                    .or_default()
                    .arguments
                    .push_str(arguments);
            }
            UpdateEvent::Finished { .. } => self.flush_calls(&ns),
            _ => {}
        }
    }

    fn tool_result(&mut self, ns: &[String], r: &cairn_core::FunctionResult) {
        self.flush_calls(ns);
        let (name, args) = self.calls.remove(&r.call_id).unwrap_or_default();
        let text = r.text();
        if r.is_error {
            let shown = self.style.error(&format!(
                "  ✗ {}",
                result_summary(&text, if self.verbose { 10 } else { 2 }, self.max())
            ));
            self.line(&shown);
        } else if name == "write_todos"
            && let Some(list) = todo_checklist(&args)
        {
            for l in list {
                self.line(&format!("  {l}"));
            }
        } else {
            let shown = self.style.dim(&format!(
                "  ← {}",
                result_summary(&text, if self.verbose { 10 } else { 2 }, self.max())
            ));
            self.line(&shown);
        }
    }

    fn message(&mut self, m: &Message) {
        if m.role == Role::Assistant {
            let t = m.text();
            if !t.is_empty() {
                self.newline_if_needed();
                self.text(self.text_sink(), &sanitize(&expand_tabs(&t)));
                self.newline_if_needed();
            }
        } else if self.verbose {
            let t = format!("[{}] {}", m.role_name(), one_line(&m.text(), 200));
            let t = self.style.dim(&t);
            self.line(&t);
        }
    }

    /// Ends the current line and prints the summary.
    pub fn finish(&mut self, summary: &Summary) {
        self.namespace.clear();
        self.newline_if_needed();
        let line = self.style.ok(&format!("✓ {}", summary.line()));
        self.push(Sink::Err, &line);
        self.push(Sink::Err, "\n");
        self.flush();
    }

    /// Ends the current line (before an error or a note).
    pub fn end_line(&mut self) {
        self.newline_if_needed();
        self.flush();
    }

    /// Writes what is buffered, in order, each piece to its stream.
    pub fn flush(&mut self) {
        for (sink, text) in self.buf.drain(..) {
            let _ = match sink {
                Sink::Out => {
                    let mut out = std::io::stdout().lock();
                    out.write_all(text.as_bytes()).and_then(|()| out.flush())
                }
                Sink::Err => {
                    let mut err = std::io::stderr().lock();
                    err.write_all(text.as_bytes()).and_then(|()| err.flush())
                }
            };
        }
    }
}

trait RoleName {
    fn role_name(&self) -> &'static str;
}

impl RoleName for Message {
    fn role_name(&self) -> &'static str {
        match self.role {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
            _ => "message",
        }
    }
}

/// `1 line`, `3 lines`.
pub fn lines(n: usize) -> String {
    if n == 1 {
        "1 line".to_owned()
    } else {
        format!("{n} lines")
    }
}

/// A tool call in short, e.g. `write_file /hello.py (3 lines)` or `$ python3 hello.py`,
/// [`sanitize`]d.
pub fn call_summary(name: &str, arguments: &str, max: usize) -> String {
    sanitize(&call_summary_raw(name, arguments, max))
}

fn call_summary_raw(name: &str, arguments: &str, max: usize) -> String {
    let name = one_line(name, 100);
    let args: Value = serde_json::from_str(arguments).unwrap_or(Value::Null);
    let s = |k: &str| args.get(k).and_then(Value::as_str);
    // The file tools take `file_path` (`path` is its alias); `ls` takes `path`.
    let file = s("file_path").or_else(|| s("path"));
    let short = match name.as_str() {
        "write_file" => file.map(|p| {
            let n = s("content").map_or(0, |c| c.lines().count());
            format!("{} ({})", one_line(p, max), lines(n))
        }),
        "edit_file" | "read_file" | "delete" | "ls" => file.map(|p| one_line(p, max)),
        "execute" => s("command").map(|c| format!("$ {}", one_line(c, max))),
        "grep" | "glob" => s("pattern").map(|p| match s("path") {
            Some(path) => format!("{p:?} in {}", one_line(path, max)),
            None => format!("{p:?}"),
        }),
        "write_todos" => args
            .get("todos")
            .and_then(Value::as_array)
            .map(|t| format!("({} items)", t.len())),
        "task" => s("description").map(|d| {
            let who = one_line(s("subagent_type").unwrap_or("subagent"), 100);
            format!("{who}: {}", one_line(d, max))
        }),
        _ => None,
    };
    match short {
        Some(s) => format!("{name} {s}"),
        None if arguments.trim().is_empty() => name.to_owned(),
        None => format!("{name} {}", one_line(arguments, max)),
    }
}

/// A tool result in short: its first `lines` lines, each cut to `max` characters.
pub fn result_summary(text: &str, lines: usize, max: usize) -> String {
    let all: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    if all.is_empty() {
        return "(empty)".to_owned();
    }
    let mut shown: Vec<String> = all.iter().take(lines).map(|l| one_line(l, max)).collect();
    if all.len() > lines {
        shown.push(format!("(+{} more lines)", all.len() - lines));
    }
    shown.join("\n    ")
}

/// The todo list of `write_todos` arguments as checklist lines.
pub fn todo_checklist(arguments: &str) -> Option<Vec<String>> {
    let args: Value = serde_json::from_str(arguments).ok()?;
    let todos = args.get("todos")?.as_array()?;
    Some(
        todos
            .iter()
            .map(|t| {
                let content = t.get("content").and_then(Value::as_str).unwrap_or("");
                let mark = match t.get("status").and_then(Value::as_str) {
                    Some("completed") => "[x]",
                    Some("in_progress") => "[~]",
                    _ => "[ ]",
                };
                format!("{mark} {}", one_line(content, 100))
            })
            .collect(),
    )
}

/// Prints updates as JSON lines.
#[derive(Debug, Default)]
pub struct JsonRenderer;

impl JsonRenderer {
    /// Prints one update as one line.
    pub fn handle(&mut self, u: &AgentEvent) {
        Self::print(&serde_json::to_value(u).unwrap_or(Value::Null));
    }

    /// Prints one JSON value as one line, with secrets and URL credentials redacted
    /// ([`crate::secrets::redact`]; JSON already escapes control characters).
    pub fn print(v: &Value) {
        let line = v.to_string();
        let line = crate::secrets::redact(&line);
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    }

    /// Prints the summary object.
    pub fn finish(&mut self, summary: &Summary) {
        let mut v = serde_json::to_value(summary).unwrap_or(Value::Null);
        if let Value::Object(m) = &mut v {
            m.insert("type".into(), Value::String("summary".into()));
        }
        Self::print(&v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_forms() {
        assert_eq!(
            call_summary("write_file", r#"{"path":"/a.py","content":"x\ny\n"}"#, 100),
            "write_file /a.py (2 lines)"
        );
        assert_eq!(
            call_summary(
                "write_file",
                r#"{"file_path":"/a.py","content":"x\n"}"#,
                100
            ),
            "write_file /a.py (1 line)"
        );
        assert_eq!(
            call_summary("delete", r#"{"file_path":"/old"}"#, 100),
            "delete /old"
        );
        assert_eq!(
            call_summary("execute", r#"{"command":"ls -la"}"#, 100),
            "execute $ ls -la"
        );
        assert_eq!(one_line("a\nb", 10), "a⏎b");
        assert_eq!(one_line("abcdef", 4), "abc…");
        assert_eq!(thousands(1234567), "1,234,567");
        assert_eq!(
            todo_checklist(r#"{"todos":[{"content":"a","status":"completed"},{"content":"b","status":"pending"}]}"#).unwrap(),
            ["[x] a", "[ ] b"]
        );
        assert_eq!(
            result_summary("a\nb\nc", 2, 10),
            "a\n    b\n    (+1 more lines)"
        );
    }

    #[test]
    fn sanitize_escapes_every_control_and_bidi_character() {
        assert_eq!(
            sanitize("a\x1b]0;t\x07b\r\tc\x08\x7f\u{9b}2J\u{202e}\u{2066}\u{200f}\nd"),
            r"a\x1b]0;t\x07b\r\tc\x08\x7f\u{9b}2J\u{202e}\u{2066}\u{200f}".to_owned() + "\nd"
        );
        assert_eq!(sanitize("plain ünïcode ✓ 漢字"), "plain ünïcode ✓ 漢字");
        assert!(!has_unsafe_chars("line\nbreak"));
        // One-line forms and call summaries go through it too.
        assert_eq!(one_line("x\x1b[2Jy\tz", 20), r"x\x1b[2Jy z");
        assert_eq!(
            call_summary("read_file", r#"{"path":"/a\u001b]52;c;eA==\u0007"}"#, 100),
            r"read_file /a\x1b]52;c;eA==\x07"
        );
        assert_eq!(call_summary("x\u{1b}[31m", "", 100), r"x\x1b[31m");
        assert_eq!(expand_tabs("a\tb\n\tc"), "a   b\n    c");
    }
}
