//! The configuration of context compression: [`Offloading`] and [`Summarization`].

use std::collections::BTreeSet;

use crate::model::ModelChoice;

/// Default token threshold above which a tool result is offloaded to a file (and above which
/// an old `write_file` / `edit_file` call's arguments are replaced by a pointer).
pub const DEFAULT_OFFLOAD_TOKENS: usize = 20_000;
/// Lines of an offloaded result shown in its replacement message: the first half of them and
/// the last half (5 + 5, as Deep Agents), so an error at the end of a long log is visible.
pub const DEFAULT_PREVIEW_LINES: usize = 10;
/// A string argument of an old `write_file` / `edit_file` call longer than this many
/// characters is truncated in the effective context (Deep Agents' `max_length`, 2,000).
pub const DEFAULT_TOOL_ARG_CHARS: usize = 2_000;
/// Characters of each preview line shown (longer lines are cut with `…`), as Deep Agents'
/// offload preview (1,000).
pub const PREVIEW_LINE_CHARS: usize = 1_000;
/// Where offloaded tool results are written.
pub const DEFAULT_RESULTS_DIR: &str = "/large_tool_results";
/// Where the text of summarized messages is appended, one file per thread.
pub const DEFAULT_HISTORY_DIR: &str = "/conversation_history";
/// Fraction of the input window at which compression starts when the window is known.
pub const DEFAULT_TRIGGER_FRACTION: f64 = 0.85;
/// Fraction of the input window kept verbatim (the most recent messages) when the window is
/// known.
pub const DEFAULT_KEEP_FRACTION: f64 = 0.10;
/// Trigger when the model's window is unknown.
pub const FALLBACK_TRIGGER_TOKENS: usize = 170_000;
/// Messages kept verbatim when the model's window is unknown.
pub const FALLBACK_KEEP_MESSAGES: usize = 6;
/// Default cap on the summary's length.
pub const DEFAULT_MAX_SUMMARY_TOKENS: u32 = 4_096;
/// The `source` that updates of the summarization call carry in a stream.
pub const SUMMARIZATION_SOURCE: &str = "summarization";

/// The tools whose results are never offloaded: they page or cap their own output.
pub const FILE_TOOLS: &[&str] = &[
    "ls",
    "read_file",
    "write_file",
    "edit_file",
    "delete",
    "glob",
    "grep",
];

/// When compression starts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Trigger {
    /// When the request reaches this fraction of the model's input window (needs a known
    /// window; without one the 170,000-token fallback applies).
    Fraction(f64),
    /// When the request reaches this many tokens.
    Tokens(usize),
    /// When the request holds this many messages.
    Messages(usize),
}

/// How much of the recent conversation stays verbatim when older messages are summarized.
///
/// The kept part always starts at a message boundary that does not split a tool call from its
/// results: a token budget keeps whole call/result groups while they fit (at least the last
/// group), a message count keeps at least that many messages (more when a group straddles the
/// boundary).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Keep {
    /// This fraction of the model's input window, in tokens (needs a known window; without one
    /// the 6-message fallback applies).
    Fraction(f64),
    /// At most this many tokens.
    Tokens(usize),
    /// At least this many messages.
    Messages(usize),
}

/// Offloading of large tool results and tool inputs to the backend.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Offloading {
    /// Whether tool results are offloaded at all (default true).
    pub enabled: bool,
    /// A tool result whose text is over this many tokens is written to a file (default
    /// 20,000). A harness profile's `max_tool_result_tokens` overrides it.
    pub tool_result_tokens: usize,
    /// Arguments of old `write_file` / `edit_file` calls over this many tokens are replaced by a
    /// pointer to the file once the context passes the trigger (default 20,000).
    pub tool_input_tokens: usize,
    /// Any single string argument of an old `write_file` / `edit_file` call longer than this
    /// many characters is truncated once the context passes the trigger, whatever the size of
    /// the whole call (default [`DEFAULT_TOOL_ARG_CHARS`]).
    pub tool_arg_chars: usize,
    /// Lines of an offloaded result shown in its place: the first half and the last half
    /// (default 10: 5 + 5).
    pub preview_lines: usize,
    /// The backend directory for offloaded results (default `/large_tool_results`).
    pub results_dir: String,
    /// Tools whose results are never offloaded (default: the file tools, which page).
    pub excluded_tools: BTreeSet<String>,
}

impl Default for Offloading {
    fn default() -> Self {
        Offloading {
            enabled: true,
            tool_result_tokens: DEFAULT_OFFLOAD_TOKENS,
            tool_input_tokens: DEFAULT_OFFLOAD_TOKENS,
            tool_arg_chars: DEFAULT_TOOL_ARG_CHARS,
            preview_lines: DEFAULT_PREVIEW_LINES,
            results_dir: DEFAULT_RESULTS_DIR.to_owned(),
            excluded_tools: FILE_TOOLS.iter().map(|s| (*s).to_owned()).collect(),
        }
    }
}

impl Offloading {
    /// The defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// No result offloading (input truncation still follows `tool_input_tokens`).
    pub fn disabled() -> Self {
        Offloading {
            enabled: false,
            ..Self::default()
        }
    }

    /// Sets the tool-result threshold in tokens.
    pub fn tool_result_tokens(mut self, tokens: usize) -> Self {
        self.tool_result_tokens = tokens;
        self
    }

    /// Sets the tool-input threshold in tokens.
    pub fn tool_input_tokens(mut self, tokens: usize) -> Self {
        self.tool_input_tokens = tokens;
        self
    }

    /// Sets the per-argument threshold in characters (see [`Offloading::tool_arg_chars`]).
    pub fn tool_arg_chars(mut self, chars: usize) -> Self {
        self.tool_arg_chars = chars;
        self
    }

    /// Sets how many lines the preview shows (the first half and the last half).
    pub fn preview_lines(mut self, lines: usize) -> Self {
        self.preview_lines = lines;
        self
    }

    /// Sets the directory offloaded results go to.
    pub fn results_dir(mut self, dir: impl Into<String>) -> Self {
        self.results_dir = dir.into();
        self
    }

    /// Never offloads the results of `tool`.
    pub fn exclude_tool(mut self, tool: impl Into<String>) -> Self {
        self.excluded_tools.insert(tool.into());
        self
    }
}

/// Summarization of older messages when the context fills up.
///
/// Every field has a default that follows SPEC R7.4: trigger at 85% of the model's input
/// window and keep the most recent 10% of it, or — when the window is unknown — trigger at
/// 170,000 tokens and keep 6 messages; summarize with the agent's own model and cairn's
/// [`DEFAULT_SUMMARY_PROMPT`](super::DEFAULT_SUMMARY_PROMPT).
///
/// ```
/// use cairn_deep::compression::{Keep, Summarization, Trigger};
/// let s = Summarization::new()
///     .trigger(Trigger::Fraction(0.7))
///     .keep(Keep::Messages(12))
///     .max_summary_tokens(2_000);
/// assert_eq!(s.keep, Some(Keep::Messages(12)));
/// ```
#[derive(Clone)]
#[non_exhaustive]
pub struct Summarization {
    /// Whether summarization runs (default true). Overflow recovery needs it.
    pub enabled: bool,
    /// The model that writes summaries (default: the agent's own).
    pub model: Option<ModelChoice>,
    /// The instructions for the summarizer. `{messages}` in it is replaced by the messages to
    /// summarize; without it they are appended.
    pub prompt: String,
    /// When to compress (default: see the type's docs).
    pub trigger: Option<Trigger>,
    /// What stays verbatim (default: see the type's docs).
    pub keep: Option<Keep>,
    /// Cap on the summary's length (`max_tokens` of the summarization call; default 4,096).
    pub max_summary_tokens: Option<u32>,
    /// Most tokens sent to the summarizer; older messages beyond it are left out of the
    /// summarizer's input (they stay in the history file). Default: 75% of the window when it
    /// is known, otherwise unlimited (a context-overflow error from the summarizer still halves
    /// its input and retries).
    pub max_summarizer_input_tokens: Option<usize>,
    /// The backend directory of the history files (default `/conversation_history`).
    pub history_dir: String,
}

impl Default for Summarization {
    fn default() -> Self {
        Summarization {
            enabled: true,
            model: None,
            prompt: super::DEFAULT_SUMMARY_PROMPT.to_owned(),
            trigger: None,
            keep: None,
            max_summary_tokens: Some(DEFAULT_MAX_SUMMARY_TOKENS),
            max_summarizer_input_tokens: None,
            history_dir: DEFAULT_HISTORY_DIR.to_owned(),
        }
    }
}

impl std::fmt::Debug for Summarization {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Summarization")
            .field("enabled", &self.enabled)
            .field("model", &self.model)
            .field("trigger", &self.trigger)
            .field("keep", &self.keep)
            .field("max_summary_tokens", &self.max_summary_tokens)
            .field(
                "max_summarizer_input_tokens",
                &self.max_summarizer_input_tokens,
            )
            .field("history_dir", &self.history_dir)
            .finish_non_exhaustive()
    }
}

impl Summarization {
    /// The defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// No summarization (and no overflow recovery).
    pub fn disabled() -> Self {
        Summarization {
            enabled: false,
            ..Self::default()
        }
    }

    /// The model that writes summaries: a client, or a `provider:model` string resolved by the
    /// builder's resolver.
    pub fn model(mut self, model: impl Into<ModelChoice>) -> Self {
        self.model = Some(model.into());
        self
    }

    /// The summarizer's instructions (`{messages}` marks where the messages go).
    pub fn prompt(mut self, prompt: impl Into<String>) -> Self {
        self.prompt = prompt.into();
        self
    }

    /// When to compress.
    pub fn trigger(mut self, trigger: Trigger) -> Self {
        self.trigger = Some(trigger);
        self
    }

    /// What stays verbatim.
    pub fn keep(mut self, keep: Keep) -> Self {
        self.keep = Some(keep);
        self
    }

    /// Cap on the summary's length (`None`: no cap).
    pub fn max_summary_tokens(mut self, tokens: impl Into<Option<u32>>) -> Self {
        self.max_summary_tokens = tokens.into();
        self
    }

    /// Most tokens sent to the summarizer.
    pub fn max_summarizer_input_tokens(mut self, tokens: usize) -> Self {
        self.max_summarizer_input_tokens = Some(tokens);
        self
    }

    /// The directory of the history files.
    pub fn history_dir(mut self, dir: impl Into<String>) -> Self {
        self.history_dir = dir.into();
        self
    }
}

/// Trigger and keep resolved for one model call.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Limits {
    pub trigger: Trigger,
    pub keep: Keep,
}

impl Limits {
    /// Resolves the configured (or default) trigger and keep against a window, which may be
    /// unknown.
    pub(crate) fn resolve(cfg: &Summarization, window: Option<usize>) -> Limits {
        let trigger = match (cfg.trigger, window) {
            (Some(Trigger::Fraction(f)), Some(w)) => Trigger::Tokens(fraction_of(f, w)),
            (Some(Trigger::Fraction(_)), None) | (None, None) => {
                Trigger::Tokens(FALLBACK_TRIGGER_TOKENS)
            }
            (None, Some(w)) => Trigger::Tokens(fraction_of(DEFAULT_TRIGGER_FRACTION, w)),
            (Some(t), _) => t,
        };
        let keep = match (cfg.keep, window) {
            (Some(Keep::Fraction(f)), Some(w)) => Keep::Tokens(fraction_of(f, w)),
            (Some(Keep::Fraction(_)), None) | (None, None) => {
                Keep::Messages(FALLBACK_KEEP_MESSAGES)
            }
            (None, Some(w)) => Keep::Tokens(fraction_of(DEFAULT_KEEP_FRACTION, w)),
            (Some(k), _) => k,
        };
        Limits { trigger, keep }
    }
}

fn fraction_of(f: f64, window: usize) -> usize {
    let f = if f.is_finite() {
        f.clamp(0.0, 1.0)
    } else {
        1.0
    };
    (window as f64 * f).floor() as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_follow_the_spec() {
        let cfg = Summarization::default();
        let l = Limits::resolve(&cfg, Some(1_000));
        assert_eq!(l.trigger, Trigger::Tokens(850));
        assert_eq!(l.keep, Keep::Tokens(100));
        let l = Limits::resolve(&cfg, None);
        assert_eq!(l.trigger, Trigger::Tokens(170_000));
        assert_eq!(l.keep, Keep::Messages(6));
        let cfg = cfg.trigger(Trigger::Fraction(0.5)).keep(Keep::Messages(3));
        let l = Limits::resolve(&cfg, Some(1_000));
        assert_eq!(l.trigger, Trigger::Tokens(500));
        assert_eq!(l.keep, Keep::Messages(3));
    }
}
