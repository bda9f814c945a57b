//! Token counting with the model's own tokenizer, and a cap on file-tool results.
//!
//! cairn-deep's context compression offloads a tool result over the profile's
//! `max_tool_result_tokens` to `/large_tool_results/<call id>` (the CLI routes that prefix to the
//! session's state, not the user's directory), but never offloads the file tools' results,
//! because they page. For a small local model even one page of `read_file` can be too much, so
//! [`FileResultCap`] cuts the results of `ls`, `read_file`, `glob` and `grep` at the same limit,
//! with a hint to read fewer lines or search more narrowly.

use std::sync::Arc;

use cairn_core::{BoxFuture, FunctionInvocationContext, Middleware, Next, ToolOutput};

/// Counts tokens of a text.
pub type TokenCounterFn = Arc<dyn Fn(&str) -> usize + Send + Sync>;

/// The file tools whose results are cut rather than offloaded.
pub const PAGED_TOOLS: &[&str] = &["ls", "read_file", "glob", "grep"];

/// The rough estimate used when the model's tokenizer is unknown: 4 characters per token.
pub fn estimate_tokens(text: &str) -> usize {
    text.chars().count().div_ceil(4)
}

/// A [`cairn_tokens::TokenCounter`] over a model's tokenizer function (exact counts).
pub struct ModelTokenCounter(pub TokenCounterFn);

impl cairn_tokens::TokenCounter for ModelTokenCounter {
    fn name(&self) -> &str {
        "gguf"
    }
    fn is_exact(&self) -> bool {
        true
    }
    fn count_text(&self, text: &str) -> usize {
        (self.0)(text)
    }
}

/// Function middleware that cuts results of the file tools over a token limit; see the
/// [module docs](self).
pub struct FileResultCap {
    max_tokens: usize,
    counter: TokenCounterFn,
}

impl FileResultCap {
    /// Cuts results over `max_tokens`, counted by `counter`.
    pub fn new(max_tokens: usize, counter: TokenCounterFn) -> Self {
        FileResultCap {
            max_tokens,
            counter,
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
            return match candidate.rfind('\n') {
                Some(i) if i >= candidate.len() / 2 => candidate[..=i].to_owned(),
                _ => candidate,
            };
        }
        n = n * 4 / 5;
    }
}

impl Middleware<FunctionInvocationContext> for FileResultCap {
    fn process(
        &self,
        ctx: FunctionInvocationContext,
        next: Next<FunctionInvocationContext>,
    ) -> BoxFuture<'static, cairn_core::Result<FunctionInvocationContext>> {
        if !PAGED_TOOLS.contains(&ctx.tool_name()) {
            return next.run(ctx);
        }
        let max = self.max_tokens;
        let counter = Arc::clone(&self.counter);
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
            let head = head_within(&text, max, counter.as_ref());
            let hint = if ctx.tool_name() == "read_file" {
                "read fewer lines with offset and limit"
            } else {
                "narrow the path or the pattern"
            };
            let mut capped = ToolOutput::text(format!(
                "{head}\n… [cut: this result is {tokens} tokens, over the {max}-token limit; {hint}]"
            ));
            capped.is_error = out.is_error;
            ctx.result = Some(capped);
            Ok(ctx)
        })
    }
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
