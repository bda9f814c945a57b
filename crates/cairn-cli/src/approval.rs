//! Asking the user in the terminal before a file write, a file edit or a command.
//!
//! The questions go to stderr and the answers come from stdin, one at a time (calls of one turn
//! that run concurrently wait for each other). When stdin is not a terminal nobody can answer,
//! so every call is rejected with a note that says to run with `--yes`: a script never hangs on
//! a question.

use std::io::{BufRead, IsTerminal, Write};

use cairn_core::BoxFuture;
use cairn_deep::{ApprovalHandler, ApprovalRequest, Decision, DecisionKind};
use serde_json::Value;

use crate::render::{Style, one_line};

/// The tools that need approval unless `--yes` is given.
pub const GUARDED_TOOLS: &[&str] = &["write_file", "edit_file", "execute"];

/// An [`ApprovalHandler`] that asks on the terminal.
pub struct TerminalApprover {
    interactive: bool,
    style: Style,
    turn: tokio::sync::Mutex<()>,
}

impl TerminalApprover {
    /// Asks on the terminal when stdin is one; otherwise rejects every call.
    pub fn new(style: Style) -> Self {
        TerminalApprover {
            interactive: std::io::stdin().is_terminal(),
            style,
            turn: tokio::sync::Mutex::new(()),
        }
    }
}

impl ApprovalHandler for TerminalApprover {
    fn review<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, Decision> {
        Box::pin(async move {
            if !self.interactive {
                eprintln!(
                    "{}",
                    self.style.warn(&format!(
                        "cairn: rejected {} ({}): stdin is not a terminal, so cairn cannot ask; run with --yes to allow file writes, edits and commands",
                        request.tool,
                        describe(request)
                    ))
                );
                return Decision::Reject {
                    message: Some(format!(
                        "Nobody could approve this {} call (cairn is not running in a terminal and --yes was not given), so it did not run.",
                        request.tool
                    )),
                };
            }
            let _turn = self.turn.lock().await;
            let request = request.clone();
            let style = self.style;
            tokio::task::spawn_blocking(move || ask(&request, style))
                .await
                .unwrap_or_else(|_| Decision::Reject {
                    message: Some("cairn could not read the user's answer".into()),
                })
        })
    }
}

/// One line saying what the call would do.
pub fn describe(r: &ApprovalRequest) -> String {
    let s = |k: &str| r.arguments.get(k).and_then(Value::as_str).unwrap_or("?");
    match r.tool.as_str() {
        "write_file" => {
            let n = s("content").lines().count();
            format!("create {} ({})", s("path"), crate::render::lines(n))
        }
        "edit_file" => format!("edit {}", s("path")),
        "execute" => format!("run `{}`", one_line(s("command"), 100)),
        _ => format!("{} {}", r.tool, one_line(&r.arguments.to_string(), 100)),
    }
}

fn details(r: &ApprovalRequest) -> Vec<String> {
    let s = |k: &str| r.arguments.get(k).and_then(Value::as_str).unwrap_or("");
    let clip = |text: &str, prefix: &str| -> Vec<String> {
        let all: Vec<&str> = text.lines().collect();
        let mut out: Vec<String> = all
            .iter()
            .take(12)
            .map(|l| format!("    {prefix}{l}"))
            .collect();
        if all.len() > 12 {
            out.push(format!("    … {} more lines", all.len() - 12));
        }
        out
    };
    match r.tool.as_str() {
        "write_file" => clip(s("content"), "│ "),
        "edit_file" => {
            let mut v = clip(s("old_string"), "- ");
            v.extend(clip(s("new_string"), "+ "));
            v
        }
        "execute" => Vec::new(),
        _ => vec![format!("    {}", r.arguments)],
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

fn ask(r: &ApprovalRequest, style: Style) -> Decision {
    let allowed = |k: DecisionKind| r.allowed_decisions.contains(&k);
    eprintln!();
    eprintln!("{} {}", style.bold("? approve:"), style.bold(&describe(r)));
    if let Some(d) = &r.description {
        eprintln!("    {d}");
    }
    for l in details(r) {
        eprintln!("{}", style.dim(&l));
    }
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
            eprintln!(
                "    current: {}",
                serde_json::to_string(arguments).unwrap_or_default()
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
            eprintln!("  not valid JSON: {e}");
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
