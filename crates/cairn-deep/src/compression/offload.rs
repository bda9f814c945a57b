//! Offloading: large tool results go to files (function middleware); old large
//! `write_file` / `edit_file` arguments become pointers (in the effective context only).

use std::sync::Arc;

use cairn_core::{
    BoxFuture, Content, FunctionInvocationContext, Message, Middleware, Next, ToolOutput,
};
use cairn_tokens::TokenCounter;
use serde_json::Value;

use super::Compressor;
use super::config::PREVIEW_LINE_CHARS;
use super::render::offload_name;
use crate::backend::BackendRuntime;
use crate::error::BackendError;
use crate::format::truncate_chars;

/// How many alternative names are tried when `/large_tool_results/<call id>` exists (call ids
/// repeat across turns with some providers, and every empty id hashes alike).
const MAX_NAME_TRIES: usize = 50;

/// Function middleware: offloads a large tool result to the backend. See the
/// [module docs](super).
#[derive(Clone)]
pub struct OffloadMiddleware(pub(crate) Arc<Compressor>);

impl Middleware<FunctionInvocationContext> for OffloadMiddleware {
    fn process(
        &self,
        ctx: FunctionInvocationContext,
        next: Next<FunctionInvocationContext>,
    ) -> BoxFuture<'static, cairn_core::Result<FunctionInvocationContext>> {
        let this = Arc::clone(&self.0);
        Box::pin(async move {
            let mut ctx = next.run(ctx).await?;
            if let Some(out) = this.offload_result(&ctx).await {
                ctx.result = Some(out);
            }
            Ok(ctx)
        })
    }
}

/// The text parts of a tool output joined by newlines (non-text parts are not counted).
fn result_text(out: &ToolOutput) -> String {
    let texts: Vec<&str> = out.parts.iter().filter_map(Content::as_text).collect();
    texts.join("\n")
}

impl Compressor {
    /// The replacement of a tool result that is over the threshold and was written to the
    /// backend; `None` to keep the result as it is.
    pub(crate) async fn offload_result(
        &self,
        ctx: &FunctionInvocationContext,
    ) -> Option<ToolOutput> {
        let cfg = &self.offloading;
        if !cfg.enabled || cfg.excluded_tools.contains(ctx.tool_name()) {
            return None;
        }
        let out = ctx.result.as_ref()?;
        let text = result_text(out);
        let threshold = self.result_threshold;
        // Cheap pre-check: cairn's counters give at most ~1.2 tokens per byte (a supplied
        // counter may not, so it always counts).
        if self.custom_counter.is_none() && text.len().saturating_mul(6) / 5 <= threshold {
            return None;
        }
        let counter = self.counter_for_run(&ctx.extensions);
        let tokens = counter.count_text(&text);
        if tokens <= threshold {
            return None;
        }
        let rt = BackendRuntime::from_context(ctx);
        let base = format!(
            "{}/{}",
            cfg.results_dir.trim_end_matches('/'),
            offload_name(&ctx.call_id)
        );
        let path = match self.write_new(&rt, &base, &text).await {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(call_id = %ctx.call_id, error = %e, "could not offload a large tool result; keeping it");
                return None;
            }
        };
        let message = offload_message(&path, &text, tokens, cfg.preview_lines);
        let mut parts = vec![Content::text(message)];
        parts.extend(
            out.parts
                .iter()
                .filter(|p| !matches!(p, Content::Text { .. }))
                .cloned(),
        );
        Some(ToolOutput {
            parts,
            is_error: out.is_error,
        })
    }

    /// Writes `text` at `base`, or at `base-2`, `base-3`, … when that exists.
    async fn write_new(
        &self,
        rt: &BackendRuntime,
        base: &str,
        text: &str,
    ) -> Result<String, BackendError> {
        let mut last = None;
        for i in 1..=MAX_NAME_TRIES {
            let path = if i == 1 {
                base.to_owned()
            } else {
                format!("{base}-{i}")
            };
            match self.backend.write(rt, &path, text).await {
                Ok(()) => return Ok(path),
                Err(e @ BackendError::AlreadyExists(_)) => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| BackendError::AlreadyExists(base.to_owned())))
    }
}

/// The text that replaces an offloaded result: where it is, how to read it, and a preview —
/// its first and last lines (`preview_lines` in all: the first half of them and the last half,
/// 5 + 5 by default, as Deep Agents), numbered as `read_file` numbers them, with the number of
/// lines left out between them. A result of at most `preview_lines` lines is shown whole.
pub fn offload_message(path: &str, text: &str, tokens: usize, preview_lines: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let total = lines.len();
    let (head, tail) = if total <= preview_lines {
        (total, 0)
    } else {
        let tail = preview_lines / 2;
        (preview_lines - tail, tail)
    };
    let width = total.max(1).to_string().len();
    let numbered = |i: usize| {
        format!(
            "{:>width$}\t{}\n",
            i + 1,
            truncate_chars(lines[i], PREVIEW_LINE_CHARS)
        )
    };
    let mut body: String = (0..head).map(numbered).collect();
    let shown = if tail > 0 {
        let omitted = total - head - tail;
        if omitted > 0 {
            body.push_str(&format!("... [{omitted} lines truncated] ...\n"));
        }
        body.extend((total - tail..total).map(numbered));
        format!("The first {head} and last {tail} lines")
    } else {
        format!("The first {head} lines")
    };
    format!(
        "This tool result was too large for the context ({tokens} tokens, {total} lines), so it was saved to {path}.\n\
         Read it in pages with read_file (path \"{path}\", offset and limit, e.g. offset {head} limit 200), or search it with grep (path \"{path}\").\n\
         {shown}:\n{body}"
    )
}

/// The names of the tools whose old, large arguments are truncated.
const FILE_WRITE_TOOLS: &[&str] = &["write_file", "edit_file"];

/// Characters of a truncated argument that stay (Deep Agents keeps 20).
const KEPT_ARG_CHARS: usize = 20;

/// Below this many characters an argument is never truncated, even in a call over the
/// whole-call threshold.
const MIN_TRUNCATED_ARG_CHARS: usize = 100;

/// Truncates, in `messages`, long string arguments of `write_file` / `edit_file` calls: every
/// one over `arg_chars` characters, and every one over 100 characters of a call whose
/// arguments are over `threshold` tokens. The path argument (`file_path` or `path`) is kept. A
/// truncated value keeps its first 20 characters and says where the content is; when the call
/// failed (its result is an error) or has no result in `messages`, it says nothing was saved
/// instead. Returns how many calls changed.
pub(crate) fn truncate_file_arguments(
    messages: &mut [Message],
    threshold: usize,
    arg_chars: usize,
    counter: &dyn TokenCounter,
) -> usize {
    let succeeded: std::collections::HashMap<String, bool> = messages
        .iter()
        .flat_map(Message::function_results)
        .map(|r| (r.call_id.clone(), !r.is_error))
        .collect();
    let mut changed = 0;
    for m in messages.iter_mut() {
        for part in &mut m.contents {
            let Content::FunctionCall(call) = part else {
                continue;
            };
            // No argument can be over either limit: skip without parsing.
            if !FILE_WRITE_TOOLS.contains(&call.name.as_str())
                || call.arguments.len() <= arg_chars.min(MIN_TRUNCATED_ARG_CHARS)
            {
                continue;
            }
            let whole_over = call.arguments.len().saturating_mul(6) / 5 > threshold
                && counter.count_text(&call.arguments) > threshold;
            let limit = if whole_over {
                arg_chars.min(MIN_TRUNCATED_ARG_CHARS)
            } else {
                arg_chars
            };
            if call.arguments.len() <= limit {
                continue;
            }
            let Ok(Value::Object(mut args)) = serde_json::from_str::<Value>(&call.arguments) else {
                continue;
            };
            let path = ["file_path", "path"]
                .iter()
                .find_map(|k| args.get(*k).and_then(Value::as_str))
                .unwrap_or("the file")
                .to_owned();
            let saved = succeeded.get(&call.call_id).copied().unwrap_or(false);
            let mut any = false;
            for (key, value) in args.iter_mut() {
                if key == "path" || key == "file_path" {
                    continue;
                }
                if let Value::String(s) = value {
                    let chars = s.chars().count();
                    if chars <= limit {
                        continue;
                    }
                    let head: String = s.chars().take(KEPT_ARG_CHARS).collect();
                    let note = if saved {
                        format!(
                            "{} more characters truncated to save context; the file {path} holds them: read it with read_file",
                            chars - KEPT_ARG_CHARS
                        )
                    } else {
                        format!(
                            "{} more characters truncated to save context; this call did not succeed, so they were not saved",
                            chars - KEPT_ARG_CHARS
                        )
                    };
                    *value = Value::String(format!("{head}...(argument truncated: {note})"));
                    any = true;
                }
            }
            if any {
                call.arguments = Value::Object(args).to_string();
                changed += 1;
            }
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preview_shows_the_first_and_last_five_lines() {
        let text: String = (1..=30).map(|i| format!("line {i}\n")).collect();
        let m = offload_message("/large_tool_results/c1", &text, 1234, 10);
        assert!(m.contains("(1234 tokens, 30 lines)"));
        assert!(m.contains("The first 5 and last 5 lines:\n"));
        assert!(m.contains(" 1\tline 1\n"));
        assert!(m.contains(" 5\tline 5\n"));
        assert!(!m.contains("line 6\n"));
        assert!(m.contains("... [20 lines truncated] ...\n"));
        assert!(!m.contains("line 25\n"));
        assert!(m.contains("26\tline 26\n"));
        assert!(m.ends_with("30\tline 30\n"), "{m}");
        // A short result is shown whole.
        let m = offload_message("/r", "a\nb\n", 1, 10);
        assert!(m.contains("The first 2 lines:\n1\ta\n2\tb\n"), "{m}");
    }

    #[test]
    fn long_arguments_are_truncated_and_failed_writes_not_called_saved() {
        use cairn_core::{FunctionCall, FunctionResult, Role};
        let call = |id: &str, content: &str| {
            Message::new(
                Role::Assistant,
                vec![Content::FunctionCall(FunctionCall::new(
                    id,
                    "write_file",
                    &serde_json::json!({"file_path": "/a.md", "content": content}),
                ))],
            )
        };
        let result = |id: &str, is_error: bool| {
            Message::tool_result(FunctionResult {
                call_id: id.into(),
                output: vec![Content::text("r")],
                is_error,
            })
        };
        let long = "x".repeat(2_500);
        let mut msgs = vec![
            call("ok", &long),
            result("ok", false),
            call("bad", &long),
            result("bad", true),
            call("short", &"y".repeat(1_500)),
            result("short", false),
        ];
        let counter = cairn_tokens::counter_for_model("gpt-4o");
        // Far under the whole-call threshold: only the per-argument limit applies.
        let n = truncate_file_arguments(&mut msgs, 20_000, 2_000, counter.as_ref());
        assert_eq!(n, 2);
        let args = |m: &Message| -> Value {
            serde_json::from_str(&m.function_calls().next().unwrap().arguments).unwrap()
        };
        let ok = args(&msgs[0]);
        assert_eq!(ok["file_path"], "/a.md");
        let text = ok["content"].as_str().unwrap();
        assert!(text.starts_with(&"x".repeat(20)), "{text}");
        assert!(
            text.contains("(argument truncated: 2480 more characters"),
            "{text}"
        );
        assert!(text.contains("/a.md holds them"), "{text}");
        let bad = args(&msgs[2]);
        let text = bad["content"].as_str().unwrap();
        assert!(
            text.contains("did not succeed, so they were not saved"),
            "{text}"
        );
        assert!(!text.contains("holds them"), "{text}");
        assert_eq!(args(&msgs[4])["content"].as_str().unwrap().len(), 1_500);
    }
}
