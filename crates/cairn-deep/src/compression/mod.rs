//! Context compression (SPEC R7): offloading and summarization, so an agent can work for hours
//! without overflowing its model's input window or losing its goal.
//!
//! # What happens, and when
//! - **Tool results over 20,000 tokens** (configurable with [`Offloading`]; a harness profile's
//!   `max_tool_result_tokens` overrides it) are written to the backend at
//!   `/large_tool_results/<call id>` by function middleware (a call id that is long, empty or
//!   holds unsafe characters is shortened and hashed), and the result the model sees is
//!   replaced by a message naming the file, showing its first 5 and last 5 lines, and saying
//!   how to page through it with `read_file` or search it with `grep`. Only text counts: images and other
//!   non-text parts are kept in the replacement, so an image-only result is never offloaded.
//!   The file tools' own results are not offloaded (they page). If the write fails, the result
//!   is kept as it is.
//! - **Before each model call** (chat middleware), the request is counted: system prompt, tool
//!   schemas and messages. When it reaches the *trigger* (85% of the model's input window by
//!   default):
//!   1. old `write_file` / `edit_file` calls get long arguments truncated: any string argument
//!      over 2,000 characters, and every one over 100 when the whole call is over the input
//!      threshold. The truncated value keeps its first 20 characters and says where the content
//!      is — or, when the call failed, that nothing was saved;
//!   2. if that is not enough, the older messages are **summarized**: their text is appended to
//!      `/conversation_history/<thread id>.md` on the backend, a model writes a structured
//!      summary (session intent, summary, artifacts, next steps), and the call is sent with the
//!      summary in their place followed by the most recent messages, kept verbatim (10% of the
//!      window by default). A tool call and its results are never separated.
//! - **A context-overflow error** from the provider (`ChatError::is_context_overflow`)
//!   summarizes at once and retries the call once. If the summarization call itself overflows,
//!   its input is halved (keeping the first message) and it is retried.
//! - Without a known window (no harness-profile `max_input_tokens`, and a model
//!   [`cairn_tokens::profile_for_model`] does not know), compression triggers at 170,000 tokens
//!   and keeps the last 6 messages.
//!
//! # Stored vs derived
//! The stored conversation (the session's history) is **never rewritten**. Each model call
//! *derives* its effective context — leading system messages, the summary message, then the
//! messages after the summary boundary, with old file arguments truncated when needed — and
//! replaces `ChatContext::messages` with it for that call only. Nothing is lost: the full text
//! is in the session and in the history file. (Offloaded tool results are the exception by
//! design: the tool's result *is* the pointer message; the full text lives in its file.)
//!
//! # Where state is kept
//! The summary boundary (an index into the stored conversation plus a fingerprint of the last
//! summarized message, so a replaced conversation is noticed), the summary text and the history
//! path are kept in the session state under [`STATE_KEY`] (a private key: subagents neither see
//! nor return it). Later calls reuse the summary while the conversation grows and only
//! summarize again when the derived context reaches the trigger once more; the new summary
//! folds in the previous one. A run without a session keeps the same state for the run only.
//!
//! # Counting
//! Tokens are counted with [`cairn_tokens`]: exactly (BPE) for OpenAI model families, with a
//! documented estimate otherwise, or with a counter you supply
//! ([`DeepAgentBuilder::token_counter`](crate::DeepAgentBuilder::token_counter)). The model
//! name comes from `ChatOptions::model`, or the client's `describe()`. Message counts are
//! cached by content ([`cairn_tokens::CachedCounter`]), so a step costs a hash pass over the
//! history plus tokenizing only the new messages.
//!
//! # Streaming
//! Updates of the summarization call are streamed with `metadata.source =
//! Some("summarization")` ([`SUMMARIZATION_SOURCE`]) so a consumer can skip them. The summary
//! message itself carries the same tag ([`Message::source`](cairn_core::Message::source)), as
//! Deep Agents' carries `lc_source`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cairn_core::{
    AgentContext, BoxFuture, ChatClient, ChatContext, ChatError, ChatOptions, Extensions, Kwargs,
    Message, Middleware, Next, Role,
};
use cairn_tokens::{CachedCounter, REPLY_PRIMING, TokenCounter, counter_for_model};
use serde::{Deserialize, Serialize};

use crate::backend::{BackendRuntime, SharedBackend};
use crate::error::BackendError;

mod config;
mod offload;
mod render;

pub use config::{
    DEFAULT_HISTORY_DIR, DEFAULT_KEEP_FRACTION, DEFAULT_MAX_SUMMARY_TOKENS, DEFAULT_OFFLOAD_TOKENS,
    DEFAULT_PREVIEW_LINES, DEFAULT_RESULTS_DIR, DEFAULT_TOOL_ARG_CHARS, DEFAULT_TRIGGER_FRACTION,
    FALLBACK_KEEP_MESSAGES, FALLBACK_TRIGGER_TOKENS, FILE_TOOLS, Keep, Offloading,
    PREVIEW_LINE_CHARS, SUMMARIZATION_SOURCE, Summarization, Trigger,
};
pub use offload::{OffloadMiddleware, offload_message};

use config::Limits;

/// The session-state key of the compression state ([`CompressionState`]).
pub const STATE_KEY: &str = "cairn.compression";

/// Characters of each message part the summarizer sees (the history file keeps everything).
const SUMMARIZER_PART_CHARS: usize = 8_000;

/// How often a summarization call that overflows is retried with half its input.
const SUMMARIZER_ATTEMPTS: usize = 6;

/// cairn's instructions for the summarizer. `{messages}` is where the messages go.
pub const DEFAULT_SUMMARY_PROMPT: &str = "You are compacting the working memory of an AI agent. \
The agent will continue its task seeing only your summary and its most recent messages; the \
complete transcript stays in a file it can search, so keep what it needs to carry on, not every detail.

Write exactly these four Markdown sections, in this order. Write \"None.\" under a section with nothing to report.

## Session intent
What the user wants: the goal, constraints, preferences and corrections they gave, quoted where the wording matters.

## Summary
What has happened so far, in order: what was tried, what was found, decisions and their reasons, errors and how they were resolved, questions still open. Keep exact names, numbers, paths, identifiers, commands and URLs.

## Artifacts
Every file created, changed or offloaded (full path) and what it holds now; other outputs the agent produced.

## Next steps
What remains to finish the task, in order, starting with the step in progress.

If a previous summary is given, fold it in: the result must stand on its own. Be dense and \
factual; invent nothing; do not address the user.

{messages}";

/// Per-thread compression state, kept in the session state under [`STATE_KEY`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct CompressionState {
    /// Stored messages before this index (after the leading system messages) are replaced by
    /// the summary.
    pub cutoff: usize,
    /// Fingerprint of stored message `cutoff - 1`: a mismatch means the conversation was
    /// replaced, and the state is dropped.
    pub anchor: u64,
    /// The current summary.
    pub summary: String,
    /// The history file holding the summarized messages, when it could be written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_path: Option<String>,
    /// How many times this thread was summarized.
    pub summarizations: usize,
    /// The thread id used for the history file of a run without a session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<String>,
}

impl CompressionState {
    /// The state of a session, if it was ever summarized.
    pub fn of(session: &cairn_core::AgentSession) -> Option<CompressionState> {
        session.state().get(STATE_KEY)
    }
}

/// Compression failed in a way the run cannot recover from.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CompressionError {
    /// The summarization call failed (other than by overflowing, which is handled).
    #[error("the summarization call failed: {0}")]
    Summarizer(#[source] ChatError),
    /// The history file could not be written.
    #[error("the conversation history could not be saved: {0}")]
    History(#[source] BackendError),
    /// The state could not be saved in the session.
    #[error("the compression state could not be saved: {0}")]
    State(String),
}

impl From<CompressionError> for cairn_core::Error {
    fn from(e: CompressionError) -> Self {
        match e {
            CompressionError::Summarizer(c) => cairn_core::Error::Chat(c),
            other => cairn_core::Error::middleware(other),
        }
    }
}

/// What one [`Compressor::compact`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CompactOutcome {
    /// Tokens of the request as stored (with any earlier summary applied).
    pub tokens_before: usize,
    /// Tokens of the request as it will be sent.
    pub tokens_after: usize,
    /// Calls whose file arguments were replaced by a pointer.
    pub truncated_calls: usize,
    /// Whether this call summarized.
    pub summarized: bool,
    /// Whether an earlier summary was applied.
    pub used_summary: bool,
}

type SharedCounter = Arc<dyn TokenCounter>;

/// Per-run values installed by [`CompressionSetup`]: the counter for the run's model, and the
/// state of a run without a session.
struct RunCompression {
    counter: SharedCounter,
    scratch: Mutex<Option<CompressionState>>,
}

/// The compression engine shared by its three middleware (agent, chat, function). Build one
/// with [`Compressor::new`] and install [`Compressor::middleware`] on any agent; the deep-agent
/// builder does this for you.
pub struct Compressor {
    offloading: Offloading,
    summarization: Summarization,
    backend: SharedBackend,
    client: Arc<dyn ChatClient>,
    summarizer: Option<Arc<dyn ChatClient>>,
    window: Option<usize>,
    result_threshold: usize,
    custom_counter: Option<SharedCounter>,
    counters: Mutex<HashMap<String, SharedCounter>>,
    fixed: Mutex<Vec<FixedTokens>>,
    last_model: Mutex<Option<ModelSetup>>,
}

/// The model a call asked for, with its counter and window.
struct ModelSetup {
    model: String,
    counter: SharedCounter,
    window: Option<usize>,
}

/// A counted system prompt and tool list (see `Compressor::fixed_tokens`).
struct FixedTokens {
    instructions: String,
    tools: Vec<cairn_core::ToolSpec>,
    tokens: usize,
}

impl std::fmt::Debug for Compressor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compressor")
            .field("offloading", &self.offloading)
            .field("summarization", &self.summarization)
            .field("window", &self.window)
            .field("result_threshold", &self.result_threshold)
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Compressor {
    /// A compressor writing to `backend` and summarizing with `client` (the agent's model)
    /// unless `summarizer` is given.
    pub fn new(
        offloading: Offloading,
        summarization: Summarization,
        backend: SharedBackend,
        client: Arc<dyn ChatClient>,
        summarizer: Option<Arc<dyn ChatClient>>,
    ) -> Self {
        let result_threshold = offloading.tool_result_tokens;
        Compressor {
            offloading,
            summarization,
            backend,
            client,
            summarizer,
            window: None,
            result_threshold,
            custom_counter: None,
            counters: Mutex::new(HashMap::new()),
            fixed: Mutex::new(Vec::new()),
            last_model: Mutex::new(None),
        }
    }

    /// The model's input window (otherwise looked up by model name, or unknown).
    pub fn with_window(mut self, max_input_tokens: Option<usize>) -> Self {
        self.window = max_input_tokens;
        self
    }

    /// Overrides the tool-result threshold (a harness profile's `max_tool_result_tokens`).
    pub fn with_result_threshold(mut self, tokens: Option<usize>) -> Self {
        if let Some(t) = tokens {
            self.result_threshold = t;
        }
        self
    }

    /// Counts with `counter` instead of the one chosen by model name (it is cached per
    /// message).
    pub fn with_counter(mut self, counter: Option<SharedCounter>) -> Self {
        self.custom_counter = counter.map(|c| Arc::new(CachedCounter::new(c)) as SharedCounter);
        self
    }

    /// The three middleware, to register in this order: agent (per-run setup), function
    /// (offloading results), chat (truncation, summarization, overflow recovery; register it
    /// last so it sees the final request).
    pub fn middleware(self: &Arc<Self>) -> [cairn_core::AnyMiddleware; 3] {
        [
            cairn_core::AnyMiddleware::Agent(Arc::new(CompressionSetup(Arc::clone(self)))),
            cairn_core::AnyMiddleware::Function(Arc::new(OffloadMiddleware(Arc::clone(self)))),
            cairn_core::AnyMiddleware::Chat(Arc::new(CompressionMiddleware(Arc::clone(self)))),
        ]
    }

    /// The counter for a model name (cached per model).
    pub fn counter_for(&self, model: &str) -> SharedCounter {
        if let Some(c) = &self.custom_counter {
            return Arc::clone(c);
        }
        let mut map = lock(&self.counters);
        if let Some(c) = map.get(model) {
            return Arc::clone(c);
        }
        let c: SharedCounter = Arc::new(CachedCounter::new(counter_for_model(model)));
        map.insert(model.to_owned(), Arc::clone(&c));
        c
    }

    fn model_name(&self, options: &ChatOptions) -> String {
        options
            .model
            .clone()
            .unwrap_or_else(|| self.client.describe())
    }

    fn counter_for_run(&self, extensions: &Extensions) -> SharedCounter {
        match extensions.get::<RunCompression>() {
            Some(run) => Arc::clone(&run.counter),
            None => self.counter_for(&self.client.describe()),
        }
    }

    /// The counter and input window for the model of `options`, remembered for the last model
    /// seen (a run asks for the same model on every call, and looking a window up by name
    /// scans the table of known models).
    fn model_setup(&self, options: &ChatOptions) -> (SharedCounter, Option<usize>) {
        let described;
        let model = match options.model.as_deref() {
            Some(m) => m,
            None => {
                described = self.client.describe();
                described.as_str()
            }
        };
        if let Some(last) = &*lock(&self.last_model)
            && last.model == model
        {
            return (Arc::clone(&last.counter), last.window);
        }
        let counter = self.counter_for(model);
        let window = self.window_for(model);
        *lock(&self.last_model) = Some(ModelSetup {
            model: model.to_owned(),
            counter: Arc::clone(&counter),
            window,
        });
        (counter, window)
    }

    /// The model's input window: the configured one, else the known one for `model`.
    pub fn window_for(&self, model: &str) -> Option<usize> {
        self.window
            .or_else(|| cairn_tokens::profile_for_model(model).map(|p| p.max_input_tokens))
    }

    /// Tokens of the system prompt and tool schemas (cached by content).
    ///
    /// The cache compares the instructions and the tool specs themselves (byte comparisons,
    /// schemas by pointer first), so a hit neither serializes nor hashes them; the tools are
    /// serialized only to count them on a miss.
    fn fixed_tokens(&self, options: &ChatOptions, counter: &dyn TokenCounter) -> usize {
        let instructions = options.instructions.as_deref().unwrap_or("");
        let hit = lock(&self.fixed)
            .iter()
            .find(|f| {
                f.instructions == instructions && f.tools.as_slice() == options.tools.as_slice()
            })
            .map(|f| f.tokens);
        if let Some(n) = hit {
            return n;
        }
        let tools = if options.tools.is_empty() {
            String::new()
        } else {
            serde_json::to_string(&options.tools).unwrap_or_default()
        };
        let mut n = counter.count_text(&tools);
        if !instructions.is_empty() {
            n += counter.count_message(&Message::system(instructions));
        }
        let mut cache = lock(&self.fixed);
        if cache.len() >= 16 {
            cache.remove(0);
        }
        cache.push(FixedTokens {
            instructions: instructions.to_owned(),
            tools: options.tools.clone(),
            tokens: n,
        });
        n
    }

    fn load_state(&self, ctx: &ChatContext) -> CompressionState {
        match &ctx.session {
            Some(s) => s.state().get(STATE_KEY).unwrap_or_default(),
            None => ctx
                .extensions
                .get::<RunCompression>()
                .and_then(|r| lock(&r.scratch).clone())
                .unwrap_or_default(),
        }
    }

    fn save_state(
        &self,
        ctx: &ChatContext,
        state: &CompressionState,
    ) -> Result<(), CompressionError> {
        match &ctx.session {
            Some(s) => s
                .state()
                .insert(STATE_KEY, state)
                .map_err(|e| CompressionError::State(e.to_string())),
            None => {
                if let Some(r) = ctx.extensions.get::<RunCompression>() {
                    *lock(&r.scratch) = Some(state.clone());
                }
                Ok(())
            }
        }
    }

    /// Derives the effective context of one model call into `ctx.messages`: applies the
    /// thread's summary, and when the request reaches the trigger (or `force`, after a
    /// context-overflow error) truncates old file arguments and, if still needed, summarizes.
    pub async fn compact(
        &self,
        ctx: &mut ChatContext,
        force: bool,
    ) -> Result<CompactOutcome, CompressionError> {
        let (counter, window) = self.model_setup(&ctx.options);
        let limits = Limits::resolve(&self.summarization, window);
        let stored = Arc::clone(&ctx.messages);
        let lead = stored.iter().take_while(|m| m.role == Role::System).count();

        let mut state = self.load_state(ctx);
        let valid = state.cutoff > lead
            && state.cutoff <= stored.len()
            && render::fingerprint(&stored[state.cutoff - 1]) == state.anchor;
        if !valid && state.cutoff != 0 {
            state = CompressionState {
                thread_id: state.thread_id.take(),
                ..Default::default()
            };
        }
        let start = if valid { state.cutoff } else { lead };
        let summary_msg = valid.then(|| {
            render::summary_message(&state.summary, start - lead, state.history_path.as_deref())
        });

        let fixed = self.fixed_tokens(&ctx.options, counter.as_ref()) + REPLY_PRIMING;
        let lead_tokens: usize = stored[..lead]
            .iter()
            .map(|m| counter.count_message(m))
            .sum();
        let tail = &stored[start..];
        let counts: Vec<usize> = tail.iter().map(|m| counter.count_message(m)).collect();
        let summary_tokens = summary_msg.as_ref().map_or(0, |m| counter.count_message(m));
        let total = fixed + lead_tokens + summary_tokens + counts.iter().sum::<usize>();
        let n_messages = lead + usize::from(summary_msg.is_some()) + tail.len();
        let mut outcome = CompactOutcome {
            tokens_before: total,
            tokens_after: total,
            used_summary: valid,
            ..Default::default()
        };

        let over = |tokens: usize, messages: usize| match limits.trigger {
            Trigger::Tokens(t) => tokens >= t,
            Trigger::Messages(n) => messages >= n,
            Trigger::Fraction(_) => false,
        };
        let build = |summary: Option<&Message>, rest: &[Message]| -> Vec<Message> {
            let mut v = Vec::with_capacity(lead + 1 + rest.len());
            v.extend_from_slice(&stored[..lead]);
            v.extend(summary.cloned());
            v.extend_from_slice(rest);
            v
        };

        if !force && !over(total, n_messages) {
            if let Some(s) = &summary_msg {
                ctx.messages = Arc::new(build(Some(s), tail));
            }
            return Ok(outcome);
        }

        // 1. Old file arguments become pointers (effective context only).
        let keep_from = keep_start(tail, &counts, limits.keep);
        if !force {
            let mut rest = tail.to_vec();
            let changed = offload::truncate_file_arguments(
                &mut rest[..keep_from],
                self.offloading.tool_input_tokens,
                self.offloading.tool_arg_chars,
                counter.as_ref(),
            );
            if changed > 0 {
                let new_total = fixed
                    + lead_tokens
                    + summary_tokens
                    + rest.iter().map(|m| counter.count_message(m)).sum::<usize>();
                outcome.truncated_calls = changed;
                outcome.tokens_after = new_total;
                if !over(new_total, n_messages) || !self.summarization.enabled {
                    ctx.messages = Arc::new(build(summary_msg.as_ref(), &rest));
                    return Ok(outcome);
                }
            }
        }
        if !self.summarization.enabled {
            if let Some(s) = &summary_msg {
                ctx.messages = Arc::new(build(Some(s), tail));
            }
            return Ok(outcome);
        }

        // 2. Summarize everything before the kept part.
        let mut cut = keep_from;
        if cut == 0 && force {
            // Overflowing with everything in the keep budget: keep only the last group.
            cut = last_group_start(tail);
        }
        if cut == 0 {
            if let Some(s) = &summary_msg {
                ctx.messages = Arc::new(build(Some(s), tail));
            }
            return Ok(outcome);
        }
        let to_summarize = &tail[..cut];
        let thread = self.thread_id(ctx, &mut state);
        let history_path = self
            .append_history(ctx, &thread, start, to_summarize)
            .await
            .map_err(|e| {
                tracing::warn!(error = %e, "could not append to the conversation history file; summarizing anyway");
                e
            })
            .ok()
            .or(state.history_path.clone());
        let previous = valid.then_some(state.summary.as_str());
        let summary = self
            .summarize(
                ctx,
                counter.as_ref(),
                window,
                previous,
                to_summarize,
                &counts[..cut],
                start,
                history_path.as_deref(),
            )
            .await?;
        let new_cutoff = start + cut;
        state = CompressionState {
            cutoff: new_cutoff,
            anchor: render::fingerprint(&stored[new_cutoff - 1]),
            summary,
            history_path,
            summarizations: state.summarizations + 1,
            thread_id: state.thread_id.take(),
        };
        self.save_state(ctx, &state)?;
        let msg = render::summary_message(
            &state.summary,
            new_cutoff - lead,
            state.history_path.as_deref(),
        );
        let kept = &tail[cut..];
        outcome.summarized = true;
        outcome.tokens_after =
            fixed + lead_tokens + counter.count_message(&msg) + counts[cut..].iter().sum::<usize>();
        ctx.messages = Arc::new(build(Some(&msg), kept));
        Ok(outcome)
    }

    fn thread_id(&self, ctx: &ChatContext, state: &mut CompressionState) -> String {
        if let Some(s) = &ctx.session {
            return s.id().to_owned();
        }
        state
            .thread_id
            .get_or_insert_with(|| format!("run-{}", uuid::Uuid::new_v4()))
            .clone()
    }

    /// Appends the text of `messages` (stored indices `first..`) to the thread's history file.
    async fn append_history(
        &self,
        ctx: &ChatContext,
        thread: &str,
        first: usize,
        messages: &[Message],
    ) -> Result<String, CompressionError> {
        let path = format!(
            "{}/{}.md",
            self.summarization.history_dir.trim_end_matches('/'),
            render::sanitize(thread)
        );
        let rt = BackendRuntime {
            session: ctx.session.clone(),
            extensions: ctx.extensions.clone(),
        };
        let mut chunk = render::history_header(first, first + messages.len());
        chunk.push_str(&render::render_messages(messages, first, None));
        match self.backend.read_text(&rt, &path).await {
            Ok(existing) if !existing.is_empty() => {
                let mut new = existing.clone();
                if !new.ends_with('\n') {
                    new.push('\n');
                }
                new.push('\n');
                new.push_str(&chunk);
                self.backend
                    .edit(&rt, &path, &existing, &new, false)
                    .await
                    .map_err(CompressionError::History)?;
            }
            Ok(_) | Err(BackendError::NotFound(_)) => {
                let header = format!(
                    "# Conversation history of thread {thread}\n\nMessages replaced by summaries in the model's context, oldest first.\n\n"
                );
                let text = format!("{header}{chunk}");
                match self.backend.write(&rt, &path, &text).await {
                    Ok(()) => {}
                    Err(BackendError::AlreadyExists(_)) => {
                        // An empty file: fill it.
                        return Err(CompressionError::History(BackendError::AlreadyExists(path)));
                    }
                    Err(e) => return Err(CompressionError::History(e)),
                }
            }
            Err(e) => return Err(CompressionError::History(e)),
        }
        Ok(path)
    }

    /// Asks the summarizer for a summary of `messages`, trimming its input to fit.
    #[allow(clippy::too_many_arguments)]
    async fn summarize(
        &self,
        ctx: &ChatContext,
        counter: &dyn TokenCounter,
        window: Option<usize>,
        previous: Option<&str>,
        messages: &[Message],
        counts: &[usize],
        first_index: usize,
        history_path: Option<&str>,
    ) -> Result<String, CompressionError> {
        let cfg = &self.summarization;
        let (client, options, client_kwargs) = match &self.summarizer {
            Some(c) => (
                Arc::clone(c),
                ChatOptions {
                    max_tokens: cfg.max_summary_tokens,
                    ..Default::default()
                },
                Kwargs::new(),
            ),
            None => (
                Arc::clone(&self.client),
                ChatOptions {
                    model: ctx.options.model.clone(),
                    max_tokens: cfg.max_summary_tokens,
                    ..Default::default()
                },
                ctx.client_kwargs.clone(),
            ),
        };
        let budget = cfg
            .max_summarizer_input_tokens
            .or_else(|| window.map(|w| w / 4 * 3));
        // Messages shown to the summarizer: the first one, then a newer suffix.
        let mut suffix_from = if messages.len() > 1 { 1 } else { 0 };
        let mut omitted = 0usize;
        let fixed_prompt =
            counter.count_text(&cfg.prompt) + previous.map_or(0, |p| counter.count_text(p)) + 16;
        for attempt in 0..SUMMARIZER_ATTEMPTS {
            let mut rendered = String::new();
            if suffix_from > 0 {
                rendered.push_str(&render::render_messages(
                    &messages[..1],
                    first_index,
                    Some(SUMMARIZER_PART_CHARS),
                ));
                rendered.push('\n');
            }
            rendered.push_str(&render::render_messages(
                &messages[suffix_from..],
                first_index + suffix_from,
                Some(SUMMARIZER_PART_CHARS),
            ));
            let input =
                render::summarizer_input(&cfg.prompt, previous, &rendered, omitted, history_path);
            let remaining = messages.len() - suffix_from;
            let can_halve = remaining > 1;
            // The input's size from the cached message counts (plus the prompt and a few
            // tokens of header per message) rather than tokenizing it again.
            let shown = counts[suffix_from..].iter().sum::<usize>()
                + if suffix_from > 0 { counts[0] } else { 0 }
                + 8 * (remaining + usize::from(suffix_from > 0));
            if let Some(b) = budget
                && can_halve
                && attempt + 1 < SUMMARIZER_ATTEMPTS
                && shown + fixed_prompt > b
            {
                let drop = remaining / 2;
                suffix_from += drop;
                omitted += drop;
                continue;
            }
            let request = [Message::user(input)];
            match call_model(
                client.as_ref(),
                &request,
                &options,
                &client_kwargs,
                ctx.updates.as_ref(),
            )
            .await
            {
                Ok(text) => return Ok(text),
                Err(e) if e.is_context_overflow() && can_halve => {
                    let drop = remaining / 2;
                    suffix_from += drop;
                    omitted += drop;
                }
                Err(e) if e.is_context_overflow() => break,
                Err(e) => return Err(CompressionError::Summarizer(e)),
            }
        }
        tracing::warn!("the summarization call kept overflowing; using a placeholder summary");
        Ok(format!(
            "## Session intent\nSee the first user message in the history file.\n\n## Summary\n{} earlier messages could not be summarized (they were too long for the summarizer).{}\n\n## Artifacts\nNone recorded.\n\n## Next steps\nRe-read the history file for the task and continue.",
            messages.len(),
            history_path
                .map(|p| format!(" Their full text is in {p}."))
                .unwrap_or_default()
        ))
    }
}

/// One model call, streamed into `updates` (tagged `source = summarization`) when given.
async fn call_model(
    client: &dyn ChatClient,
    messages: &[Message],
    options: &ChatOptions,
    client_kwargs: &Kwargs,
    updates: Option<&cairn_core::UpdateSink>,
) -> Result<String, ChatError> {
    let sink = updates.map(|s| s.with_source(SUMMARIZATION_SOURCE));
    let response =
        cairn_core::stream::call_model(client, messages, options, client_kwargs, sink.as_ref())
            .await?;
    Ok(response.text_content())
}

/// Whether the conversation may be cut just before `m`: it carries no tool result (a result
/// always stays with the call before it).
fn is_boundary(m: &Message) -> bool {
    m.function_results().next().is_none()
}

/// Where the kept part of `tail` starts, by whole call/result groups.
fn keep_start(tail: &[Message], counts: &[usize], keep: Keep) -> usize {
    let len = tail.len();
    let mut k = len;
    let mut acc = 0usize;
    for i in (0..len).rev() {
        acc += counts[i];
        if !is_boundary(&tail[i]) {
            continue;
        }
        match keep {
            Keep::Tokens(budget) => {
                if acc > budget {
                    if k == len {
                        k = i;
                    }
                    break;
                }
                k = i;
            }
            Keep::Messages(n) => {
                k = i;
                if len - i >= n {
                    break;
                }
            }
            Keep::Fraction(_) => {
                k = i;
                break;
            }
        }
    }
    k
}

/// The start of the last call/result group of `tail` (0 when there is one group or none).
fn last_group_start(tail: &[Message]) -> usize {
    (0..tail.len())
        .rev()
        .find(|&i| is_boundary(&tail[i]))
        .unwrap_or(0)
}

/// Agent middleware: resolves the run's token counter and installs the per-run state.
struct CompressionSetup(Arc<Compressor>);

impl Middleware<AgentContext> for CompressionSetup {
    fn process(
        &self,
        mut ctx: AgentContext,
        next: Next<AgentContext>,
    ) -> BoxFuture<'static, cairn_core::Result<AgentContext>> {
        let model = self.0.model_name(&ctx.options);
        ctx.extensions.insert(RunCompression {
            counter: self.0.counter_for(&model),
            scratch: Mutex::new(None),
        });
        next.run(ctx)
    }
}

/// Chat middleware: derives the effective context, summarizing when needed, and recovers from
/// a context-overflow error by summarizing and retrying once.
struct CompressionMiddleware(Arc<Compressor>);

impl Middleware<ChatContext> for CompressionMiddleware {
    fn process(
        &self,
        mut ctx: ChatContext,
        next: Next<ChatContext>,
    ) -> BoxFuture<'static, cairn_core::Result<ChatContext>> {
        let this = Arc::clone(&self.0);
        Box::pin(async move {
            let original = ctx.fork();
            let first = this.compact(&mut ctx, false).await?;
            let err = match next.clone().run(ctx).await {
                Ok(c) => return Ok(c),
                Err(e) => e,
            };
            let overflow = err.as_chat().is_some_and(ChatError::is_context_overflow);
            if !overflow || first.summarized || !this.summarization.enabled {
                return Err(err);
            }
            let mut retry = original;
            let second = this.compact(&mut retry, true).await?;
            if !second.summarized {
                return Err(err);
            }
            next.run(retry).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_core::{Content, FunctionCall, FunctionResult};

    fn call(id: &str) -> Message {
        Message::new(
            Role::Assistant,
            vec![Content::FunctionCall(FunctionCall {
                call_id: id.into(),
                name: "t".into(),
                arguments: "{}".into(),
            })],
        )
    }

    fn result(id: &str) -> Message {
        Message::tool_result(FunctionResult {
            call_id: id.into(),
            output: vec![Content::text("r")],
            is_error: false,
        })
    }

    #[test]
    fn keep_never_splits_a_group() {
        let tail = vec![
            Message::user("u"),
            call("a"),
            result("a"),
            call("b"),
            result("b"),
            result("b2"),
        ];
        let counts = vec![10; tail.len()];
        // 25 tokens: only the last group (3 messages, 30 tokens) is over budget, but at least
        // one group is kept.
        assert_eq!(keep_start(&tail, &counts, Keep::Tokens(25)), 3);
        assert_eq!(keep_start(&tail, &counts, Keep::Tokens(49)), 3);
        assert_eq!(keep_start(&tail, &counts, Keep::Tokens(50)), 1);
        assert_eq!(keep_start(&tail, &counts, Keep::Tokens(60)), 0);
        assert_eq!(keep_start(&tail, &counts, Keep::Messages(2)), 3);
        assert_eq!(keep_start(&tail, &counts, Keep::Messages(4)), 1);
        assert_eq!(last_group_start(&tail), 3);
    }
}
