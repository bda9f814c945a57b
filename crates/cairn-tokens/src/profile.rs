//! Model profiles: known context sizes per model family, and model-name normalization.

use std::sync::Arc;

use crate::bpe::{BpeCounter, Encoding};
use crate::counter::TokenCounter;
use crate::estimate::{EstimateCounter, NON_OPENAI_SCALE};

/// What cairn knows about a model: its input window and, where documented, its output limit.
///
/// Built from [`profile_for_model`] or by hand with [`ModelProfile::new`]; override a known value
/// per agent with [`ModelProfile::with_max_input_tokens`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ModelProfile {
    /// The most input tokens the model accepts (context compression triggers at a fraction of it).
    pub max_input_tokens: usize,
    /// The most tokens the model produces in one answer, when documented.
    pub max_output_tokens: Option<usize>,
    /// The OpenAI encoding of the model's tokenizer, when it is one.
    pub encoding: Option<Encoding>,
}

impl ModelProfile {
    /// A profile with only an input window.
    pub fn new(max_input_tokens: usize) -> Self {
        ModelProfile {
            max_input_tokens,
            max_output_tokens: None,
            encoding: None,
        }
    }

    /// Replaces the input window (for example to compact earlier than the model requires).
    pub fn with_max_input_tokens(mut self, max_input_tokens: usize) -> Self {
        self.max_input_tokens = max_input_tokens;
        self
    }

    /// Replaces the output limit.
    pub fn with_max_output_tokens(mut self, max_output_tokens: Option<usize>) -> Self {
        self.max_output_tokens = max_output_tokens;
        self
    }
}

const O200K: Option<Encoding> = Some(Encoding::O200kBase);
const CL100K: Option<Encoding> = Some(Encoding::Cl100kBase);

/// A table row: `(name prefixes, max input, max output, encoding)`.
type Row = (
    &'static [&'static str],
    usize,
    Option<usize>,
    Option<Encoding>,
);

/// `(name prefixes, max input, max output, encoding)`, most specific prefixes first: the first
/// row with a matching prefix wins. Values are the providers' published limits; where a model
/// has a larger opt-in window (Claude's 1M beta, Qwen's YaRN extension) the default one is used.
#[rustfmt::skip]
const TABLE: &[Row] = &[
    // OpenAI
    (&["gpt-4o", "chatgpt-4o"], 128_000, Some(16_384), O200K),
    (&["gpt-4.1"], 1_047_576, Some(32_768), O200K),
    (&["gpt-4.5"], 128_000, Some(16_384), O200K),
    // gpt-5: a 400k context of which up to 128k is output, so 272k input.
    (&["gpt-5"], 272_000, Some(128_000), O200K),
    (&["gpt-oss"], 131_072, Some(131_072), O200K),
    (&["o1-mini"], 128_000, Some(65_536), O200K),
    (&["o1-preview"], 128_000, Some(32_768), O200K),
    (&["o1", "o3", "o4-mini"], 200_000, Some(100_000), O200K),
    (&["gpt-4-turbo", "gpt-4-1106", "gpt-4-0125", "gpt-4-vision"], 128_000, Some(4_096), CL100K),
    (&["gpt-4-32k"], 32_768, None, CL100K),
    (&["gpt-4"], 8_192, None, CL100K),
    (&["gpt-3.5-turbo-instruct"], 4_096, None, CL100K),
    (&["gpt-3.5-turbo-16k"], 16_385, Some(4_096), CL100K),
    (&["gpt-3.5"], 16_385, Some(4_096), CL100K),
    // Anthropic: 200k input for every Claude 3 and later model.
    (&["claude-3-haiku"], 200_000, Some(4_096), None),
    (&["claude-3-opus"], 200_000, Some(4_096), None),
    (&["claude-3-sonnet"], 200_000, Some(4_096), None),
    (&["claude-3-5", "claude-3.5"], 200_000, Some(8_192), None),
    (&["claude-3-7", "claude-3.7"], 200_000, Some(64_000), None),
    (&["claude-opus-4-5", "claude-opus-4.5"], 200_000, Some(64_000), None),
    (&["claude-opus-4"], 200_000, Some(32_000), None),
    (&["claude-sonnet-4", "claude-haiku-4"], 200_000, Some(64_000), None),
    (&["claude-2"], 100_000, Some(4_096), None),
    (&["claude-"], 200_000, None, None),
    // Google
    (&["gemini-1.0", "gemini-pro"], 30_720, Some(2_048), None),
    (&["gemini-1.5-pro"], 2_097_152, Some(8_192), None),
    (&["gemini-1.5"], 1_048_576, Some(8_192), None),
    (&["gemini-2.0"], 1_048_576, Some(8_192), None),
    (&["gemini-2.5", "gemini-3"], 1_048_576, Some(65_536), None),
    (&["gemini-"], 1_048_576, None, None),
    // Qwen: the native window, without YaRN scaling.
    (&["qwen2.5", "qwen-2.5", "qwen3", "qwen-3"], 32_768, None, None),
    // Llama
    (&["llama-3.1", "llama3.1", "llama-3.2", "llama3.2", "llama-3.3", "llama3.3",
       "llama-4", "llama4"], 131_072, None, None),
    (&["llama-3", "llama3"], 8_192, None, None),
    // Mistral
    (&["mistral-large", "mistral-medium", "mistral-nemo", "open-mistral-nemo", "ministral",
       "pixtral"], 131_072, None, None),
    (&["mixtral-8x22b", "open-mixtral-8x22b"], 65_536, None, None),
    (&["mistral-", "open-mistral", "mixtral", "codestral", "mistral"], 32_768, None, None),
];

/// Provider prefixes stripped before `:` (`openai:gpt-4o`, `anthropic:claude-…`).
const PROVIDERS: &[&str] = &[
    "openai",
    "azure",
    "azure_openai",
    "anthropic",
    "google",
    "google_genai",
    "google_vertexai",
    "gemini",
    "vertex",
    "vertexai",
    "bedrock",
    "ollama",
    "groq",
    "mistral",
    "mistralai",
    "together",
    "fireworks",
    "openrouter",
    "deepseek",
    "xai",
    "local",
    "vllm",
    "llamacpp",
];

/// Normalizes a model name for lookup: lowercase, a known `provider:` prefix stripped, an
/// `org/` path (`meta-llama/Llama-3.1-8B`, `openai/gpt-4o`) reduced to its last segment, and a
/// leading `meta-` dropped (`Meta-Llama-3.1-…`).
fn candidates(model: &str) -> [String; 2] {
    let lower = model.trim().to_ascii_lowercase();
    let mut name = lower.as_str();
    if let Some((provider, rest)) = name.split_once(':')
        && PROVIDERS.contains(&provider)
        && !rest.is_empty()
    {
        name = rest;
    }
    if let Some((_, last)) = name.rsplit_once('/') {
        name = last;
    }
    let name = name.strip_prefix("meta-").unwrap_or(name);
    // Bedrock-style ids (`anthropic.claude-3-5-sonnet-…`, `us.anthropic.claude-…`).
    let dotted = match name.rsplit_once("anthropic.") {
        Some((_, rest)) => rest,
        None => name,
    };
    [dotted.to_owned(), lower]
}

/// Finds the table row for a model name.
fn lookup(model: &str) -> Option<ModelProfile> {
    for name in candidates(model) {
        for (prefixes, input, output, encoding) in TABLE {
            if prefixes.iter().any(|p| matches_prefix(&name, p)) {
                return Some(ModelProfile {
                    max_input_tokens: *input,
                    max_output_tokens: *output,
                    encoding: *encoding,
                });
            }
        }
    }
    None
}

/// `name` starts with `prefix` at a name boundary: the prefix ends the name, ends with `-`, or is
/// followed by a character that is not a letter or digit (`o1` matches `o1-2024-12-17`, `o1` and
/// `o1:latest` but not `o10`; `gpt-4` does not match `gpt-4o`). More specific rows come first in
/// the table, so `gpt-4.1` is found before `gpt-4` could claim it.
fn matches_prefix(name: &str, prefix: &str) -> bool {
    let Some(rest) = name.strip_prefix(prefix) else {
        return false;
    };
    prefix.ends_with('-')
        || rest
            .chars()
            .next()
            .is_none_or(|c| !c.is_ascii_alphanumeric())
}

/// The profile of a known model family, or `None`.
///
/// Matching is by prefix at a name boundary after normalization (case-insensitive, `openai:` and
/// other provider prefixes stripped, `org/` paths reduced to the model name), so dated snapshots
/// (`gpt-4o-2024-08-06`), size variants (`llama-3.1-70b-instruct`, `qwen2.5:7b`) and routed names
/// (`openrouter:openai/gpt-4.1-mini`) resolve to their family.
///
/// ```
/// use cairn_tokens::profile_for_model;
///
/// let p = profile_for_model("openai:gpt-4o-mini").unwrap();
/// assert_eq!(p.max_input_tokens, 128_000);
/// let mine = p.with_max_input_tokens(64_000); // per-agent override
/// assert_eq!(mine.max_input_tokens, 64_000);
/// assert!(profile_for_model("my-own-model").is_none());
/// ```
pub fn profile_for_model(model: &str) -> Option<ModelProfile> {
    lookup(model)
}

/// The OpenAI encoding of a model, when cairn knows it uses one.
pub fn encoding_for_model(model: &str) -> Option<Encoding> {
    if let Some(p) = lookup(model) {
        return p.encoding;
    }
    // Unlisted OpenAI names that still use a known encoding.
    let [name, _] = candidates(model);
    if name.starts_with("text-embedding-3") || name.starts_with("text-embedding-ada-002") {
        return Some(Encoding::Cl100kBase);
    }
    None
}

/// The best counter for a model: exact ([`BpeCounter`]) for models using an OpenAI encoding,
/// otherwise an [`EstimateCounter`] with a [`NON_OPENAI_SCALE`] safety margin.
///
/// Wrap the result in [`CachedCounter`](crate::CachedCounter) to count a history incrementally.
pub fn counter_for_model(model: &str) -> Arc<dyn TokenCounter> {
    match encoding_for_model(model) {
        Some(encoding) => Arc::new(BpeCounter::new(encoding)),
        None => Arc::new(EstimateCounter::new().with_scale(NON_OPENAI_SCALE)),
    }
}
