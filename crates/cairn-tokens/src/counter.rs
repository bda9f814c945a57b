//! The [`TokenCounter`] trait and the shared rules for counting a [`Message`].

use std::fmt;
use std::sync::Arc;

use cairn_core::message::{Content, Message};

/// Framing tokens added for every message, as in OpenAI's chat format
/// (`<|start|>{role}<|message|>…<|end|>`; the OpenAI cookbook counts 3 per message plus the role).
pub const MESSAGE_OVERHEAD: usize = 3;

/// Extra tokens when a message carries an author name (the cookbook's `tokens_per_name`), on top of
/// the name's own tokens.
pub const NAME_OVERHEAD: usize = 1;

/// Framing tokens added for every function call on top of its name and arguments (the
/// `functions.` namespace and the call delimiters). An approximation: OpenAI does not publish the
/// exact tool-call framing.
pub const FUNCTION_CALL_OVERHEAD: usize = 3;

/// Tokens added once per request to prime the reply (`<|start|>assistant<|message|>`). Not
/// included in [`TokenCounter::count_messages`], which stays additive so callers can split a
/// history by token share; add it when checking a whole request against a window.
pub const REPLY_PRIMING: usize = 3;

/// Default weight of one image: **765** tokens.
///
/// That is OpenAI's price of a 1024×1024 image at `detail: "high"` (85 base + 4 tiles × 170),
/// and close to Anthropic's `width × height / 750` (≈ 1,400 for 1024×1024, ≈ 640 for 800×600).
/// It is deliberately higher than the 85 tokens of a low-detail OpenAI image (which LangChain
/// Deep Agents uses): a budget check that over-counts compacts a little early, one that
/// under-counts overflows the window. Change it with [`ImageWeight::Fixed`] or supply a formula
/// with [`ImageWeight::custom`].
pub const DEFAULT_IMAGE_TOKENS: usize = 765;

/// A function of an image's URL (or `data:` URI) and media type giving its token count.
pub type ImageFn = dyn Fn(&str, Option<&str>) -> usize + Send + Sync;

/// How many tokens an image counts for.
#[derive(Clone)]
pub enum ImageWeight {
    /// Every image counts the same.
    Fixed(usize),
    /// A supplied function of the image URL (or `data:` URI) and media type, for example one
    /// that reads the dimensions from a `data:` URI and applies a provider's tile formula.
    Custom(Arc<ImageFn>),
}

impl ImageWeight {
    /// A weight computed by `f(url, media_type)`.
    pub fn custom(f: impl Fn(&str, Option<&str>) -> usize + Send + Sync + 'static) -> Self {
        ImageWeight::Custom(Arc::new(f))
    }

    /// The tokens of one image.
    pub fn weigh(&self, url: &str, media_type: Option<&str>) -> usize {
        match self {
            ImageWeight::Fixed(n) => *n,
            ImageWeight::Custom(f) => f(url, media_type),
        }
    }
}

impl Default for ImageWeight {
    fn default() -> Self {
        ImageWeight::Fixed(DEFAULT_IMAGE_TOKENS)
    }
}

impl fmt::Debug for ImageWeight {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ImageWeight::Fixed(n) => f.debug_tuple("Fixed").field(n).finish(),
            ImageWeight::Custom(_) => f.write_str("Custom(..)"),
        }
    }
}

/// Counts the tokens a model sees for text and messages.
///
/// Implementations must be cheap to share across threads (`Send + Sync`); wrap one in
/// [`CachedCounter`](crate::CachedCounter) to count a growing history incrementally. A local
/// model runtime can implement this trait with the model's own tokenizer: only
/// [`count_text`](TokenCounter::count_text) and [`name`](TokenCounter::name) are required; the
/// message rules ([`count_message_parts`]) and image weighting come for free and can be
/// overridden.
pub trait TokenCounter: Send + Sync {
    /// A short name for logs and metrics, e.g. `"o200k_base"` or `"estimate"`.
    fn name(&self) -> &str;

    /// Whether counts are exact (the model's own tokenizer) rather than estimated.
    fn is_exact(&self) -> bool {
        false
    }

    /// Tokens of plain text, without any message framing.
    fn count_text(&self, text: &str) -> usize;

    /// Tokens of one image; [`DEFAULT_IMAGE_TOKENS`] unless overridden.
    fn count_image(&self, url: &str, media_type: Option<&str>) -> usize {
        let _ = (url, media_type);
        DEFAULT_IMAGE_TOKENS
    }

    /// Tokens of one message including its framing; see [`count_message_parts`] for the rules.
    fn count_message(&self, message: &Message) -> usize {
        count_message_parts(self, message)
    }

    /// Tokens of a list of messages: the sum of [`count_message`](TokenCounter::count_message)
    /// (additive; [`REPLY_PRIMING`] is not included).
    fn count_messages(&self, messages: &[Message]) -> usize {
        messages.iter().map(|m| self.count_message(m)).sum()
    }
}

impl<T: TokenCounter + ?Sized> TokenCounter for Arc<T> {
    fn name(&self) -> &str {
        (**self).name()
    }
    fn is_exact(&self) -> bool {
        (**self).is_exact()
    }
    fn count_text(&self, text: &str) -> usize {
        (**self).count_text(text)
    }
    fn count_image(&self, url: &str, media_type: Option<&str>) -> usize {
        (**self).count_image(url, media_type)
    }
    fn count_message(&self, message: &Message) -> usize {
        (**self).count_message(message)
    }
    fn count_messages(&self, messages: &[Message]) -> usize {
        (**self).count_messages(messages)
    }
}

/// The default message rule, usable by implementations that override
/// [`TokenCounter::count_message`] and want to fall back to it.
///
/// A message counts [`MESSAGE_OVERHEAD`] + the role's tokens, plus the author name's tokens +
/// [`NAME_OVERHEAD`] when it has one, plus for each part:
/// - text and reasoning: the text's tokens;
/// - image: [`TokenCounter::count_image`];
/// - function call: name + raw argument text + [`FUNCTION_CALL_OVERHEAD`] (the call id is not
///   counted: the model does not read it as content);
/// - function result: its text parts and images, counted the same way (its call id is not
///   counted);
/// - a part kind this version does not know: nothing.
pub fn count_message_parts<C: TokenCounter + ?Sized>(counter: &C, message: &Message) -> usize {
    let mut n = MESSAGE_OVERHEAD + counter.count_text(message.role.as_str());
    if let Some(name) = &message.author_name {
        n += counter.count_text(name) + NAME_OVERHEAD;
    }
    n + count_parts(counter, &message.contents)
}

fn count_parts<C: TokenCounter + ?Sized>(counter: &C, parts: &[Content]) -> usize {
    parts
        .iter()
        .map(|part| match part {
            Content::Text { text } | Content::Reasoning { text } => counter.count_text(text),
            Content::Image { url, media_type } => counter.count_image(url, media_type.as_deref()),
            Content::FunctionCall(call) => {
                counter.count_text(&call.name)
                    + counter.count_text(&call.arguments)
                    + FUNCTION_CALL_OVERHEAD
            }
            Content::FunctionResult(result) => count_parts(counter, &result.output),
            _ => 0,
        })
        .sum()
}
