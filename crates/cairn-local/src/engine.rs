//! The loaded model and its worker thread.
//!
//! llama.cpp's context (with its KV cache) is blocking and tied to one thread, so it lives on a
//! dedicated worker thread that [`LocalModel::load`] starts. Requests go to it over a channel and
//! are served one at a time; the caller gets text pieces as they decode and the result at the end.
//!
//! Between requests the worker keeps the tokens that are in its KV cache. A new prompt is
//! tokenized in full, the longest common prefix with those tokens is kept, the rest is removed
//! from the cache, and only the new tokens are evaluated: a turn that extends the previous
//! conversation pays only for what was added.

use std::num::NonZeroU32;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;
use llama_cpp_2::token::data::LlamaTokenData;
use llama_cpp_2::token::data_array::LlamaTokenDataArray;

use crate::error::LocalError;
use crate::models::KnownModel;
use crate::prompt::{PromptFormat, RawReplies};

/// When tool calls are grammar-constrained on turns whose tool choice is `Auto`.
///
/// `Required` and `Tool(name)` are always constrained and `None` never is; see
/// [`LocalClient`](crate::LocalClient) for the whole rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ToolGrammar {
    /// Constrain the first turn after a user message (the agent must act), and let the model
    /// answer freely after a tool result (read by the lenient parser). The default.
    #[default]
    OnUserTurns,
    /// Constrain every turn that offers tools. The agent can then only finish through a tool
    /// (give it a final-answer tool) or when the loop disables tools.
    Always,
    /// Constrain only when the tool choice is `Required` or names a tool.
    OnlyWhenRequired,
}

/// How the model is loaded and run.
#[derive(Debug, Clone, PartialEq)]
pub struct LocalConfig {
    /// Context window in tokens (default 8192; capped at the model's training context).
    pub n_ctx: u32,
    /// Threads for prefill and decode (default: the available cores).
    pub threads: Option<u32>,
    /// Tokens evaluated per llama.cpp batch during prefill (default 512).
    pub n_batch: u32,
    /// Tokens generated per turn unless the request says otherwise (default 256).
    pub max_tokens: u32,
    /// Sampling temperature unless the request says otherwise; `0` means greedy (the default).
    pub temperature: f32,
    /// Seed for non-greedy sampling unless the request gives one (default 0).
    pub seed: u32,
    /// When `Auto` tool turns are grammar-constrained.
    pub tool_grammar: ToolGrammar,
    /// The prompt layout; `None` picks it from the file's metadata.
    pub format: Option<PromptFormat>,
    /// Offer the model a built-in `answer` action on every turn that offers tools (default
    /// false): it is listed with the tools and is a branch of every constrained turn's grammar,
    /// and a call of it comes back as the assistant's text, which ends the agent's run. With
    /// [`ToolGrammar::Always`] every turn is then an action: a tool call, or the answer. See
    /// [`LocalClient`](crate::LocalClient).
    pub answer_tool: bool,
    /// A file that keeps the KV cache of a process's first prompt for the next process (default
    /// none). The first request of a process loads it and reuses its longest common token prefix
    /// with the new prompt, so the system block and tool list, the same in every run, are not
    /// evaluated again (on 2 cores that prefill is 10–40 s of a run). It is rewritten (atomically)
    /// when a first request had to evaluate more than [`PROMPT_CACHE_MIN_NEW`] tokens. A file
    /// that does not load (missing, from another model or context size, damaged) is ignored.
    pub prompt_cache: Option<PathBuf>,
    /// List the tools before the instructions in the system block (default false; see
    /// [`RenderOptions::tools_first`](crate::prompt::RenderOptions::tools_first)).
    pub tools_first: bool,
    /// End each turn of tool results with a reminder of the user's request and of the next
    /// step (default false; see [`crate::prompt::reminder`]).
    pub remind: bool,
    /// How many more times a constrained turn is sampled, at [`resample_temperature`]
    /// (`Self::resample_temperature`), when its call repeats the conversation's previous call or
    /// a call of the same request that failed (default 0: never). Greedy decoding repeats a
    /// choice that failed: the 1.5B model wrote the same wrong text back after "nothing
    /// changed" until its steps ran out. With this on, a streamed constrained turn's updates
    /// are held back until the turn is accepted.
    pub resample_repeats: u32,
    /// The temperature of those extra samples (default 0.8); their seeds are
    /// [`seed`](Self::seed) plus the attempt number.
    pub resample_temperature: f32,
}

/// New tokens a process's first prompt must evaluate before [`LocalConfig::prompt_cache`] is
/// rewritten (fewer: the file already held most of it).
pub const PROMPT_CACHE_MIN_NEW: usize = 256;

impl Default for LocalConfig {
    fn default() -> Self {
        LocalConfig {
            n_ctx: 8192,
            threads: None,
            n_batch: 512,
            max_tokens: 256,
            temperature: 0.0,
            seed: 0,
            tool_grammar: ToolGrammar::OnUserTurns,
            format: None,
            answer_tool: false,
            prompt_cache: None,
            tools_first: false,
            remind: false,
            resample_repeats: 0,
            resample_temperature: 0.8,
        }
    }
}

/// What is known about a loaded model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelInfo {
    /// The GGUF file.
    pub path: PathBuf,
    /// `general.name` from the metadata, else the file stem.
    pub name: String,
    /// `general.architecture` (e.g. `qwen2`, `llama`).
    pub architecture: Option<String>,
    /// The context size in use.
    pub n_ctx: u32,
    /// The context the model was trained with.
    pub n_ctx_train: u32,
    /// Parameter count.
    pub n_params: u64,
    /// The prompt layout in use.
    pub format: PromptFormat,
    /// Threads in use.
    pub threads: u32,
}

/// How to pick tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Sampling {
    /// Always the most likely token.
    Greedy,
    /// Temperature sampling, optionally with nucleus filtering.
    Random {
        /// Temperature (> 0).
        temperature: f32,
        /// Nucleus probability mass.
        top_p: Option<f32>,
        /// Random seed.
        seed: u32,
    },
}

/// One generation request for the worker: a rendered prompt and how to continue it.
#[derive(Debug, Clone, PartialEq)]
pub struct GenerateRequest {
    /// The full prompt text (special tokens such as `<|im_start|>` are parsed).
    pub prompt: String,
    /// A GBNF grammar (root rule `root`) constraining the output.
    pub grammar: Option<String>,
    /// Most tokens to generate (also capped by the free context).
    pub max_tokens: u32,
    /// Token choice.
    pub sampling: Sampling,
    /// Stop strings: the output ends before the first one.
    pub stop: Vec<String>,
    /// A string that ends the output right after it (kept), e.g. `</tool_call>`.
    pub stop_after: Option<String>,
}

impl GenerateRequest {
    /// A greedy request with the given prompt and token limit.
    pub fn new(prompt: impl Into<String>, max_tokens: u32) -> Self {
        GenerateRequest {
            prompt: prompt.into(),
            grammar: None,
            max_tokens,
            sampling: Sampling::Greedy,
            stop: Vec::new(),
            stop_after: None,
        }
    }
}

/// Why generation ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopReason {
    /// The model produced an end-of-turn token.
    EndOfTurn,
    /// A stop string (or `stop_after`) was reached.
    StopString,
    /// The token limit (or the context) was reached.
    Length,
    /// The caller stopped listening.
    Cancelled,
}

/// The result of one generation.
#[derive(Debug, Clone, PartialEq)]
pub struct Generation {
    /// The generated text, exactly as decoded (without the end-of-turn token).
    pub text: String,
    /// Why it ended.
    pub stop: StopReason,
    /// Tokens in the prompt.
    pub prompt_tokens: usize,
    /// Prompt tokens whose KV entries were reused from the previous request.
    pub cached_tokens: usize,
    /// Tokens generated.
    pub generated_tokens: usize,
    /// Time spent evaluating the prompt's new tokens.
    pub prefill: Duration,
    /// Time spent generating.
    pub decode: Duration,
}

impl Generation {
    /// Prompt tokens that had to be evaluated.
    pub fn prefilled_tokens(&self) -> usize {
        self.prompt_tokens - self.cached_tokens
    }
}

type PieceSink = Box<dyn FnMut(&str) -> bool + Send>;
type DoneSink = Box<dyn FnOnce(Result<Generation, LocalError>) + Send>;

enum Job {
    Generate {
        request: GenerateRequest,
        on_piece: PieceSink,
        done: DoneSink,
    },
    ClearCache {
        done: mpsc::Sender<()>,
    },
}

struct Shared {
    model: Arc<LlamaModel>,
    info: ModelInfo,
    config: LocalConfig,
    jobs: Option<mpsc::Sender<Job>>,
    worker: Option<JoinHandle<()>>,
    raw: Mutex<RawReplies>,
}

impl Drop for Shared {
    fn drop(&mut self) {
        // Closing the channel ends the worker's loop; wait for it so the context is freed first.
        self.jobs.take();
        if let Some(w) = self.worker.take() {
            let _ = w.join();
        }
    }
}

/// A GGUF model loaded in this process, with its worker thread. Cheap to clone (shared).
///
/// ```no_run
/// use cairn_local::{GenerateRequest, LocalConfig, LocalModel};
/// let model = LocalModel::load(cairn_local::default_model_path()?, LocalConfig::default())?;
/// println!("{} tokens", model.count_tokens("Hello, world"));
/// let out = model.generate(GenerateRequest::new(
///     "<|im_start|>user\nSay hi<|im_end|>\n<|im_start|>assistant\n",
///     16,
/// ))?;
/// println!("{}", out.text);
/// # Ok::<(), cairn_local::LocalError>(())
/// ```
#[derive(Clone)]
pub struct LocalModel {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for LocalModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalModel")
            .field("info", &self.shared.info)
            .finish_non_exhaustive()
    }
}

fn backend() -> Result<&'static LlamaBackend, LocalError> {
    static BACKEND: OnceLock<Result<LlamaBackend, String>> = OnceLock::new();
    BACKEND
        .get_or_init(|| {
            // llama.cpp's own logging goes to `tracing` (silent unless a subscriber wants it).
            llama_cpp_2::send_logs_to_tracing(llama_cpp_2::LogOptions::default());
            LlamaBackend::init().map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| LocalError::Backend(e.clone()))
}

fn default_threads() -> u32 {
    std::thread::available_parallelism()
        .map(|n| u32::try_from(n.get()).unwrap_or(1))
        .unwrap_or(1)
}

impl LocalModel {
    /// Loads a GGUF file and starts its worker thread. Blocking (seconds for a 1 GB file): call it
    /// from `spawn_blocking` in async code.
    pub fn load(path: impl AsRef<Path>, config: LocalConfig) -> Result<LocalModel, LocalError> {
        let path = path.as_ref().to_path_buf();
        if !path.is_file() {
            let known = KnownModel::ALL
                .into_iter()
                .find(|m| path.file_name().is_some_and(|n| n == m.file_name()));
            let hint = match known {
                Some(m) => format!(
                    "Run `scripts/fetch-model.sh {}` to fetch and verify it.",
                    m.name()
                ),
                None => "Give the path of an existing GGUF file.".to_owned(),
            };
            return Err(LocalError::ModelMissing { path, hint });
        }
        if config.n_ctx < 16 || config.n_batch == 0 {
            return Err(LocalError::Config(format!(
                "n_ctx must be at least 16 and n_batch positive (got n_ctx {}, n_batch {})",
                config.n_ctx, config.n_batch
            )));
        }
        let backend = backend()?;
        let model = LlamaModel::load_from_file(backend, &path, &LlamaModelParams::default())
            .map_err(|e| LocalError::Load {
                path: path.clone(),
                message: e.to_string(),
            })?;
        let architecture = model.meta_val_str("general.architecture").ok();
        let template = model.meta_val_str("tokenizer.chat_template").ok();
        let name = model
            .meta_val_str("general.name")
            .ok()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| {
                path.file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default()
            });
        let format = config
            .format
            .unwrap_or_else(|| PromptFormat::detect(architecture.as_deref(), template.as_deref()));
        let n_ctx_train = model.n_ctx_train();
        let n_ctx = if n_ctx_train > 0 {
            config.n_ctx.min(n_ctx_train)
        } else {
            config.n_ctx
        };
        let threads = config
            .threads
            .filter(|t| *t > 0)
            .unwrap_or_else(default_threads);
        let info = ModelInfo {
            path: path.clone(),
            name,
            architecture,
            n_ctx,
            n_ctx_train,
            n_params: model.n_params(),
            format,
            threads,
        };

        let model = Arc::new(model);
        let (jobs_tx, jobs_rx) = mpsc::channel::<Job>();
        let (ready_tx, ready_rx) = mpsc::sync_channel::<Result<(), LocalError>>(1);
        let worker_model = Arc::clone(&model);
        let n_batch = config.n_batch.min(n_ctx);
        let prompt_cache = config.prompt_cache.clone();
        let worker = std::thread::Builder::new()
            .name("cairn-local".into())
            .spawn(move || {
                worker_main(
                    worker_model,
                    WorkerSetup {
                        n_ctx,
                        n_batch,
                        threads,
                        prompt_cache,
                    },
                    jobs_rx,
                    ready_tx,
                )
            })
            .map_err(|e| LocalError::Context(format!("could not start the worker thread: {e}")))?;
        match ready_rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                let _ = worker.join();
                return Err(e);
            }
            Err(_) => {
                let _ = worker.join();
                return Err(LocalError::WorkerGone);
            }
        }
        Ok(LocalModel {
            shared: Arc::new(Shared {
                model,
                info,
                config,
                jobs: Some(jobs_tx),
                worker: Some(worker),
                raw: Mutex::new(RawReplies::default()),
            }),
        })
    }

    /// What is known about the model.
    pub fn info(&self) -> &ModelInfo {
        &self.shared.info
    }

    /// The configuration it was loaded with.
    pub fn config(&self) -> &LocalConfig {
        &self.shared.config
    }

    /// The context window in tokens (prompt plus answer).
    pub fn context_size(&self) -> usize {
        self.shared.info.n_ctx as usize
    }

    /// The tokens of `text` as this model sees them in a prompt (special tokens such as
    /// `<|im_start|>` count as one; no BOS is added). Thread-safe and does not wait for the worker.
    pub fn tokenize(&self, text: &str) -> Vec<i32> {
        self.shared
            .model
            .vocab()
            .tokenize(text.as_bytes(), false, true)
            .into_iter()
            .map(|t| t.0)
            .collect()
    }

    /// How many tokens `text` is for this model (see [`tokenize`](Self::tokenize)).
    pub fn count_tokens(&self, text: &str) -> usize {
        self.tokenize(text).len()
    }

    /// The text of tokens (special tokens rendered).
    pub fn detokenize(&self, tokens: &[i32]) -> String {
        let vocab = self.shared.model.vocab();
        let mut bytes = Vec::new();
        for t in tokens {
            bytes.extend(vocab.token_to_piece(LlamaToken(*t), true, None));
        }
        String::from_utf8_lossy(&bytes).into_owned()
    }

    pub(crate) fn raw_replies(&self) -> &Mutex<RawReplies> {
        &self.shared.raw
    }

    fn submit(&self, job: Job) -> Result<(), LocalError> {
        match &self.shared.jobs {
            Some(tx) => tx.send(job).map_err(|_| LocalError::WorkerGone),
            None => Err(LocalError::WorkerGone),
        }
    }

    /// Queues a generation; `on_piece` receives text pieces as they decode (return `false` to
    /// stop), and `done` receives the result. Returns at once.
    pub fn generate_with(
        &self,
        request: GenerateRequest,
        on_piece: impl FnMut(&str) -> bool + Send + 'static,
        done: impl FnOnce(Result<Generation, LocalError>) + Send + 'static,
    ) -> Result<(), LocalError> {
        self.submit(Job::Generate {
            request,
            on_piece: Box::new(on_piece),
            done: Box::new(done),
        })
    }

    /// Generates and waits for the result (blocking; not for async code).
    pub fn generate(&self, request: GenerateRequest) -> Result<Generation, LocalError> {
        let (tx, rx) = mpsc::channel();
        self.generate_with(
            request,
            |_| true,
            move |r| {
                let _ = tx.send(r);
            },
        )?;
        rx.recv().map_err(|_| LocalError::WorkerGone)?
    }

    /// Empties the KV cache, so the next request evaluates its whole prompt (for measurements).
    /// Blocking.
    pub fn clear_cache(&self) -> Result<(), LocalError> {
        let (tx, rx) = mpsc::channel();
        self.submit(Job::ClearCache { done: tx })?;
        rx.recv().map_err(|_| LocalError::WorkerGone)
    }
}

/// Length of the longest common prefix of two token lists.
pub fn common_prefix_len<T: PartialEq>(a: &[T], b: &[T]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// How many of `prompt`'s tokens can be served from a cache holding `cached`: the common prefix,
/// but at least one prompt token is always evaluated (its logits start the answer).
pub fn reusable_prefix<T: PartialEq>(cached: &[T], prompt: &[T]) -> usize {
    let common = common_prefix_len(cached, prompt);
    if common >= prompt.len() {
        prompt.len().saturating_sub(1)
    } else {
        common
    }
}

struct WorkerSetup {
    n_ctx: u32,
    n_batch: u32,
    threads: u32,
    prompt_cache: Option<PathBuf>,
}

fn worker_main(
    model: Arc<LlamaModel>,
    setup: WorkerSetup,
    jobs: mpsc::Receiver<Job>,
    ready: mpsc::SyncSender<Result<(), LocalError>>,
) {
    let WorkerSetup {
        n_ctx,
        n_batch,
        threads,
        prompt_cache,
    } = setup;
    let backend = match backend() {
        Ok(b) => b,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    let threads = i32::try_from(threads).unwrap_or(1);
    let params = LlamaContextParams::default()
        .with_n_ctx(NonZeroU32::new(n_ctx))
        .with_n_batch(n_batch)
        .with_n_ubatch(n_batch)
        .with_n_threads(threads)
        .with_n_threads_batch(threads);
    let ctx = match model.new_context(backend, params) {
        Ok(c) => c,
        Err(e) => {
            let _ = ready.send(Err(LocalError::Context(e.to_string())));
            return;
        }
    };
    let mut worker = Worker {
        model: &model,
        ctx,
        cached: Vec::new(),
        n_ctx: n_ctx as usize,
        n_batch: n_batch as usize,
        prompt_cache,
        first: true,
    };
    if ready.send(Ok(())).is_err() {
        return;
    }
    while let Ok(job) = jobs.recv() {
        match job {
            Job::Generate {
                request,
                mut on_piece,
                done,
            } => {
                let result = std::panic::catch_unwind(AssertUnwindSafe(|| {
                    worker.generate(&request, &mut on_piece)
                }));
                let result = match result {
                    Ok(r) => r,
                    Err(panic) => {
                        worker.reset();
                        let msg = panic
                            .downcast_ref::<&str>()
                            .map(|s| (*s).to_owned())
                            .or_else(|| panic.downcast_ref::<String>().cloned())
                            .unwrap_or_else(|| "panic".to_owned());
                        Err(LocalError::Decode(format!("the worker panicked: {msg}")))
                    }
                };
                done(result);
            }
            Job::ClearCache { done } => {
                worker.reset();
                let _ = done.send(());
            }
        }
    }
}

struct Worker<'m> {
    model: &'m LlamaModel,
    ctx: LlamaContext<'m>,
    /// The tokens whose KV entries are in the cache, by position.
    cached: Vec<LlamaToken>,
    n_ctx: usize,
    n_batch: usize,
    /// See [`LocalConfig::prompt_cache`].
    prompt_cache: Option<PathBuf>,
    /// Whether no request was served yet.
    first: bool,
}

/// Decodes token bytes into text across UTF-8 boundaries.
#[derive(Default)]
struct Utf8Buf {
    pending: Vec<u8>,
}

impl Utf8Buf {
    fn push(&mut self, bytes: &[u8], out: &mut String) {
        self.pending.extend_from_slice(bytes);
        match std::str::from_utf8(&self.pending) {
            Ok(s) => {
                out.push_str(s);
                self.pending.clear();
            }
            Err(e) => {
                let valid = e.valid_up_to();
                if let Ok(s) = std::str::from_utf8(&self.pending[..valid]) {
                    out.push_str(s);
                }
                if e.error_len().is_some() {
                    // Invalid bytes (not just incomplete): replace them.
                    out.push_str(&String::from_utf8_lossy(&self.pending[valid..]));
                    self.pending.clear();
                } else {
                    self.pending.drain(..valid);
                }
            }
        }
    }
}

/// Built-in stop strings, in case an end-of-turn marker is produced as text.
const BUILTIN_STOPS: &[&str] = &["<|im_end|>", "<|endoftext|>"];

impl Worker<'_> {
    fn reset(&mut self) {
        self.ctx.clear_kv_cache();
        self.cached.clear();
    }

    /// Fills the KV cache from [`LocalConfig::prompt_cache`], if it loads.
    fn load_prompt_cache(&mut self) {
        let Some(path) = self.prompt_cache.as_deref().filter(|p| p.is_file()) else {
            return;
        };
        match self.ctx.state_seq_load_file(path, 0, self.n_ctx) {
            Ok((tokens, _)) if !tokens.is_empty() && tokens.len() < self.n_ctx => {
                self.cached = tokens;
            }
            _ => self.reset(),
        }
    }

    /// Writes the KV cache (the prompt just evaluated) to [`LocalConfig::prompt_cache`]:
    /// into a temporary file beside it, then renamed over it. Failures are ignored: the cache
    /// only saves time.
    fn save_prompt_cache(&self) {
        let Some(path) = self.prompt_cache.as_deref() else {
            return;
        };
        if let Some(dir) = path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let tmp = path.with_extension(format!("tmp{}", std::process::id()));
        if self.ctx.state_seq_save_file(&tmp, 0, &self.cached).is_ok() {
            if std::fs::rename(&tmp, path).is_err() {
                let _ = std::fs::remove_file(&tmp);
            }
        } else {
            let _ = std::fs::remove_file(&tmp);
        }
    }

    fn generate(
        &mut self,
        req: &GenerateRequest,
        on_piece: &mut PieceSink,
    ) -> Result<Generation, LocalError> {
        let vocab = self.model.vocab();
        let add_bos = vocab.should_add_bos();
        let tokens = vocab.tokenize(req.prompt.as_bytes(), add_bos, true);
        if tokens.is_empty() {
            return Err(LocalError::Config("the prompt is empty".into()));
        }
        if tokens.len() >= self.n_ctx {
            return Err(LocalError::ContextOverflow {
                prompt_tokens: tokens.len(),
                n_ctx: self.n_ctx,
            });
        }
        let mut grammar = match &req.grammar {
            Some(g) => Some(
                LlamaSampler::grammar(self.model, g, "root")
                    .map_err(|e| LocalError::Grammar(e.to_string()))?,
            ),
            None => None,
        };
        let mut chain = match req.sampling {
            Sampling::Greedy => None,
            Sampling::Random {
                temperature,
                top_p,
                seed,
            } => {
                let mut s = Vec::new();
                if let Some(p) = top_p.filter(|p| *p > 0.0 && *p < 1.0) {
                    s.push(LlamaSampler::top_p(p, 1));
                }
                s.push(LlamaSampler::temp(temperature));
                s.push(LlamaSampler::dist(seed));
                Some(LlamaSampler::chain_simple(s))
            }
        };

        // Prefill: keep the common prefix, evaluate the rest.
        let started = Instant::now();
        let first = std::mem::replace(&mut self.first, false);
        if first && self.cached.is_empty() {
            self.load_prompt_cache();
        }
        let mut reuse = reusable_prefix(&self.cached, &tokens);
        if reuse < self.cached.len() {
            let pos = u32::try_from(reuse).unwrap_or(u32::MAX);
            let removed = self.ctx.clear_kv_cache_seq(Some(0), Some(pos), None);
            if !matches!(removed, Ok(true)) {
                self.ctx.clear_kv_cache();
                reuse = 0;
            }
            self.cached.truncate(reuse);
        }
        let mut batch = LlamaBatch::new(self.n_batch.max(1), 1);
        let new = &tokens[reuse..];
        let mut last_idx = 0;
        for (c, chunk) in new.chunks(self.n_batch).enumerate() {
            batch.clear();
            let last_chunk = (c + 1) * self.n_batch >= new.len();
            for (j, t) in chunk.iter().enumerate() {
                let pos = i32::try_from(self.cached.len() + j).unwrap_or(i32::MAX);
                let logits = last_chunk && j + 1 == chunk.len();
                batch
                    .add(*t, pos, &[0], logits)
                    .map_err(|e| LocalError::Decode(e.to_string()))?;
            }
            if let Err(e) = self.ctx.decode(&mut batch) {
                self.reset();
                return Err(LocalError::Decode(e.to_string()));
            }
            self.cached.extend_from_slice(chunk);
            last_idx = batch.n_tokens() - 1;
        }
        if first && new.len() > PROMPT_CACHE_MIN_NEW {
            self.save_prompt_cache();
        }
        let prefill = started.elapsed();

        // Generate.
        let started = Instant::now();
        let room = self.n_ctx.saturating_sub(tokens.len());
        let max_tokens = (req.max_tokens as usize).min(room);
        let mut stops: Vec<&str> = req
            .stop
            .iter()
            .map(String::as_str)
            .filter(|s| !s.is_empty())
            .collect();
        stops.extend(BUILTIN_STOPS);
        let hold = stops
            .iter()
            .map(|s| s.len())
            .max()
            .unwrap_or(1)
            .saturating_sub(1);
        let mut text = String::new();
        let mut utf8 = Utf8Buf::default();
        let mut emitted = 0usize;
        let mut generated = 0usize;
        let mut stop = StopReason::Length;
        let mut idx = last_idx;
        while generated < max_tokens {
            let token = self.pick(idx, grammar.as_mut(), chain.as_mut())?;
            if vocab.is_eog(token) {
                stop = StopReason::EndOfTurn;
                break;
            }
            if let Some(g) = grammar.as_mut() {
                g.accept(token);
            }
            if let Some(c) = chain.as_mut() {
                c.accept(token);
            }
            generated += 1;
            utf8.push(&vocab.token_to_piece(token, true, None), &mut text);

            let mut ended = false;
            if let Some((cut, _)) = stops
                .iter()
                .filter_map(|s| text.find(s).map(|p| (p, s)))
                .min_by_key(|(p, _)| *p)
            {
                text.truncate(cut);
                stop = StopReason::StopString;
                ended = true;
            } else if let Some(after) = req.stop_after.as_deref().filter(|a| !a.is_empty())
                && let Some(p) = text.find(after)
            {
                text.truncate(p + after.len());
                stop = StopReason::StopString;
                ended = true;
            }
            // Hand out what can no longer become part of a stop string.
            let safe = if ended {
                text.len()
            } else {
                floor_char_boundary(&text, text.len().saturating_sub(hold))
            };
            if safe > emitted {
                if !on_piece(&text[emitted..safe]) {
                    stop = StopReason::Cancelled;
                    break;
                }
                emitted = safe;
            }
            if ended || generated >= max_tokens {
                break;
            }
            // Evaluate the token to get the next logits.
            batch.clear();
            let pos = i32::try_from(self.cached.len()).unwrap_or(i32::MAX);
            batch
                .add(token, pos, &[0], true)
                .map_err(|e| LocalError::Decode(e.to_string()))?;
            if let Err(e) = self.ctx.decode(&mut batch) {
                self.reset();
                return Err(LocalError::Decode(e.to_string()));
            }
            self.cached.push(token);
            idx = 0;
        }
        if stop != StopReason::Cancelled && text.len() > emitted {
            on_piece(&text[emitted..]);
        }
        Ok(Generation {
            text,
            stop,
            prompt_tokens: tokens.len(),
            cached_tokens: reuse,
            generated_tokens: generated,
            prefill,
            decode: started.elapsed(),
        })
    }

    /// Picks the next token from the logits at batch index `idx`.
    ///
    /// With a grammar and greedy sampling, the most likely token is checked against the grammar
    /// first; the whole vocabulary goes through the grammar only when it is rejected.
    fn pick(
        &self,
        idx: i32,
        grammar: Option<&mut LlamaSampler>,
        chain: Option<&mut LlamaSampler>,
    ) -> Result<LlamaToken, LocalError> {
        let logits = self.ctx.get_logits_ith(idx);
        match (grammar, chain) {
            (None, None) => Ok(LlamaToken(argmax(logits))),
            (Some(g), None) => {
                let best = argmax(logits);
                let logit = logits
                    .get(best as usize)
                    .copied()
                    .unwrap_or(f32::NEG_INFINITY);
                let mut one = LlamaTokenDataArray::new(
                    vec![LlamaTokenData::new(LlamaToken(best), logit, 0.0)],
                    false,
                );
                one.apply_sampler(g);
                if one.data.first().is_some_and(|d| d.logit().is_finite()) {
                    return Ok(LlamaToken(best));
                }
                let mut all = self.ctx.token_data_array_ith(idx);
                all.apply_sampler(g);
                all.data
                    .iter()
                    .filter(|d| d.logit().is_finite())
                    .max_by(|a, b| a.logit().total_cmp(&b.logit()))
                    .map(LlamaTokenData::id)
                    .ok_or_else(|| LocalError::Grammar("no token satisfies the grammar".into()))
            }
            (grammar, Some(chain)) => {
                let mut all = self.ctx.token_data_array_ith(idx);
                if let Some(g) = grammar {
                    all.apply_sampler(g);
                }
                all.apply_sampler(chain);
                all.selected_token()
                    .ok_or_else(|| LocalError::Decode("the sampler selected no token".into()))
            }
        }
    }
}

fn argmax(logits: &[f32]) -> i32 {
    let mut best = 0usize;
    let mut best_v = f32::NEG_INFINITY;
    for (i, v) in logits.iter().enumerate() {
        if *v > best_v {
            best_v = *v;
            best = i;
        }
    }
    i32::try_from(best).unwrap_or(0)
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    if i >= s.len() {
        return s.len();
    }
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_computation() {
        assert_eq!(common_prefix_len(&[1, 2, 3], &[1, 2, 4, 5]), 2);
        assert_eq!(common_prefix_len::<i32>(&[], &[1]), 0);
        // A cache that holds more than the prompt (the previous answer) keeps the shared part.
        assert_eq!(reusable_prefix(&[1, 2, 3, 9, 9], &[1, 2, 3, 4]), 3);
        // An identical prompt still evaluates its last token.
        assert_eq!(reusable_prefix(&[1, 2, 3], &[1, 2, 3]), 2);
        assert_eq!(reusable_prefix(&[1, 2, 3, 4], &[1, 2]), 1);
        assert_eq!(reusable_prefix::<i32>(&[], &[]), 0);
    }

    #[test]
    fn utf8_across_pieces() {
        let mut b = Utf8Buf::default();
        let mut out = String::new();
        let e = "é".as_bytes();
        b.push(&e[..1], &mut out);
        assert_eq!(out, "");
        b.push(&e[1..], &mut out);
        assert_eq!(out, "é");
        b.push(&[0xff, b'a'], &mut out);
        assert!(out.ends_with('a'));
    }
}
