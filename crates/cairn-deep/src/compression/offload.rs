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
use super::render::sanitize;
use crate::backend::BackendRuntime;
use crate::error::BackendError;
use crate::format::truncate_chars;

/// How many alternative names are tried when `/large_tool_results/<call id>` exists (call ids
/// repeat across turns with some providers).
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
            sanitize(&ctx.call_id)
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

/// The text that replaces an offloaded result: where it is, how to read it, and its first
/// `preview_lines` lines numbered as `read_file` numbers them.
pub fn offload_message(path: &str, text: &str, tokens: usize, preview_lines: usize) -> String {
    let total = text.lines().count();
    let shown: Vec<&str> = text.lines().take(preview_lines).collect();
    let width = shown.len().max(1).to_string().len();
    let mut preview = String::new();
    for (i, line) in shown.iter().enumerate() {
        preview.push_str(&format!(
            "{:>width$}\t{}\n",
            i + 1,
            truncate_chars(line, PREVIEW_LINE_CHARS)
        ));
    }
    format!(
        "This tool result was too large for the context ({tokens} tokens, {total} lines), so it was saved to {path}.\n\
         Read it in pages with read_file (path \"{path}\", offset and limit, e.g. offset {} limit 200), or search it with grep (path \"{path}\").\n\
         The first {} lines:\n{preview}",
        shown.len(),
        shown.len()
    )
}

/// The names of the tools whose old, large arguments are replaced by a pointer.
const FILE_WRITE_TOOLS: &[&str] = &["write_file", "edit_file"];

/// Replaces, in `messages`, the arguments of `write_file` / `edit_file` calls over `threshold`
/// tokens by a pointer to the file. Returns how many calls changed.
pub(crate) fn truncate_file_arguments(
    messages: &mut [Message],
    threshold: usize,
    counter: &dyn TokenCounter,
) -> usize {
    let mut changed = 0;
    for m in messages.iter_mut() {
        for part in &mut m.contents {
            let Content::FunctionCall(call) = part else {
                continue;
            };
            if !FILE_WRITE_TOOLS.contains(&call.name.as_str())
                || call.arguments.len().saturating_mul(6) / 5 <= threshold
            {
                continue;
            }
            let tokens = counter.count_text(&call.arguments);
            if tokens <= threshold {
                continue;
            }
            let Ok(Value::Object(mut args)) = serde_json::from_str::<Value>(&call.arguments) else {
                continue;
            };
            let path = args
                .get("path")
                .and_then(Value::as_str)
                .unwrap_or("the file")
                .to_owned();
            for (key, value) in args.iter_mut() {
                if key == "path" {
                    continue;
                }
                if let Value::String(s) = value
                    && s.chars().count() > 100
                {
                    *value = Value::String(format!(
                        "[{} characters omitted to save context: this call's content is already in {path}; read it with read_file]",
                        s.chars().count()
                    ));
                }
            }
            call.arguments = Value::Object(args).to_string();
            changed += 1;
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preview_shows_ten_numbered_lines() {
        let text: String = (1..=30).map(|i| format!("line {i}\n")).collect();
        let m = offload_message("/large_tool_results/c1", &text, 1234, 10);
        assert!(m.contains("(1234 tokens, 30 lines)"));
        assert!(m.contains(" 1\tline 1\n"));
        assert!(m.contains("10\tline 10\n"));
        assert!(!m.contains("line 11"));
    }
}
