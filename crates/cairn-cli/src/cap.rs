//! Caps what one tool result may put into the model's context.
//!
//! A harness profile's `max_tool_result_tokens` says how large a tool result may be. cairn-deep
//! records the setting but does not apply it yet, so the CLI does, with this function
//! middleware: a larger result is cut to its head, and the full text is saved under
//! `/large_tool_results/<call id>` (kept in the session's state, not in the user's directory),
//! where the model can page through it with `read_file`. `read_file` results are only cut (with
//! a hint to read fewer lines), never offloaded again.

use std::sync::Arc;

use cairn_core::{BoxFuture, FunctionInvocationContext, Middleware, Next, ToolOutput};
use cairn_deep::{BackendRuntime, SharedBackend};

/// Counts tokens of a text.
pub type TokenCounterFn = Arc<dyn Fn(&str) -> usize + Send + Sync>;

/// Where offloaded results go (routed to session state by the CLI's backend).
pub const OFFLOAD_PREFIX: &str = "/large_tool_results/";

/// The rough estimate used when the model's tokenizer is unknown: 4 characters per token.
pub fn estimate_tokens(text: &str) -> usize {
    text.chars().count().div_ceil(4)
}

/// Function middleware that caps tool results; see the [module docs](self).
pub struct ResultCap {
    max_tokens: usize,
    counter: TokenCounterFn,
    backend: SharedBackend,
}

impl ResultCap {
    /// Caps results at `max_tokens` (counted by `counter`), offloading to `backend`.
    pub fn new(max_tokens: usize, counter: TokenCounterFn, backend: SharedBackend) -> Self {
        ResultCap {
            max_tokens,
            counter,
            backend,
        }
    }
}

/// The longest prefix of `text` (cut at a line end when one is near) within `max_tokens`.
pub fn head_within(text: &str, max_tokens: usize, count: &dyn Fn(&str) -> usize) -> String {
    // Start from the 4-chars-per-token guess, then shrink until the count fits.
    let chars: Vec<char> = text.chars().collect();
    let mut n = (max_tokens * 4).min(chars.len());
    loop {
        let candidate: String = chars[..n].iter().collect();
        if n == 0 || count(&candidate) <= max_tokens {
            let cut = match candidate.rfind('\n') {
                Some(i) if i >= candidate.len() / 2 => candidate[..=i].to_owned(),
                _ => candidate,
            };
            return cut;
        }
        n = n * 4 / 5;
    }
}

impl Middleware<FunctionInvocationContext> for ResultCap {
    fn process(
        &self,
        ctx: FunctionInvocationContext,
        next: Next<FunctionInvocationContext>,
    ) -> BoxFuture<'static, cairn_core::Result<FunctionInvocationContext>> {
        let max = self.max_tokens;
        let counter = Arc::clone(&self.counter);
        let backend = Arc::clone(&self.backend);
        Box::pin(async move {
            let mut ctx = next.run(ctx).await?;
            let Some(out) = &ctx.result else {
                return Ok(ctx);
            };
            let text = out.text_content();
            let tokens = counter(&text);
            if tokens <= max {
                return Ok(ctx);
            }
            let is_error = out.is_error;
            let head = head_within(&text, max, counter.as_ref());
            let note = if ctx.tool_name() == "read_file" {
                format!(
                    "\n… [cut: this read is {tokens} tokens, over the {max}-token limit; read fewer lines with offset and limit]"
                )
            } else {
                let path = format!("{OFFLOAD_PREFIX}{}", sanitize(&ctx.call_id));
                let rt = BackendRuntime::from_context(&ctx);
                match backend.write(&rt, &path, &text).await {
                    Ok(()) => format!(
                        "\n… [cut: the full result ({tokens} tokens) is in {path}; read it with read_file and offset/limit, or grep it]"
                    ),
                    Err(_) => format!("\n… [cut: the result was {tokens} tokens]"),
                }
            };
            let mut capped = ToolOutput::text(format!("{head}{note}"));
            capped.is_error = is_error;
            ctx.result = Some(capped);
            Ok(ctx)
        })
    }
}

fn sanitize(id: &str) -> String {
    let s: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() { "result".to_owned() } else { s }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_fits_the_budget() {
        let text = "line of text\n".repeat(1000);
        let head = head_within(&text, 100, &estimate_tokens);
        assert!(estimate_tokens(&head) <= 100);
        assert!(head.ends_with('\n'));
        assert!(head.len() > 300);
    }
}
