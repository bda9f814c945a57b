//! Token counting and model profiles for cairn.
//!
//! - [`TokenCounter`]: counts text and [`Message`](cairn_core::message::Message)s (text,
//!   reasoning, function-call names and raw arguments, function-result text, a per-message
//!   framing overhead as in OpenAI's chat format, images by a configurable [`ImageWeight`]).
//! - [`BpeCounter`]: exact counts for OpenAI's `o200k_base` and `cl100k_base` encodings, with
//!   the vocabulary embedded in the binary (nothing is downloaded).
//! - [`EstimateCounter`]: a documented, tokenizer-free estimate for other models.
//! - [`CachedCounter`]: caches per-message counts by content fingerprint, so counting a growing
//!   history costs a hash pass plus tokenizing only the new messages.
//! - [`counter_for_model`], [`profile_for_model`]: exact where known, estimate otherwise; known
//!   input windows per model family ([`ModelProfile`]).
//!
//! A model that cairn runs locally supplies its own tokenizer by implementing [`TokenCounter`]
//! (only `name` and `count_text` are required).
//!
//! ```
//! use cairn_core::message::Message;
//! use cairn_tokens::{CachedCounter, TokenCounter, counter_for_model, profile_for_model};
//!
//! let counter = CachedCounter::new(counter_for_model("openai:gpt-4o"));
//! assert!(counter.is_exact());
//! assert_eq!(counter.count_text("hello world"), 2);
//!
//! let history = vec![Message::system("You are terse."), Message::user("hello world")];
//! let used = counter.count_messages(&history);
//! let window = profile_for_model("openai:gpt-4o").map(|p| p.max_input_tokens);
//! assert_eq!(window, Some(128_000));
//! assert!(used < 30);
//! ```

mod bpe;
pub mod cache;
mod counter;
mod estimate;
mod profile;
pub mod synthetic;

pub use bpe::{BpeCounter, Encoding};
pub use cache::{CacheStats, CachedCounter, DEFAULT_CACHE_CAPACITY};
pub use counter::{
    DEFAULT_IMAGE_TOKENS, FUNCTION_CALL_OVERHEAD, ImageFn, ImageWeight, MESSAGE_OVERHEAD,
    NAME_OVERHEAD, REPLY_PRIMING, TokenCounter, count_message_parts,
};
pub use estimate::{EstimateCounter, NON_OPENAI_SCALE};
pub use profile::{ModelProfile, counter_for_model, encoding_for_model, profile_for_model};
