//! # cairn-local
//!
//! cairn's embedded model: a GGUF file run in this process through llama.cpp (`llama-cpp-2`),
//! behind the same [`ChatClient`](cairn_core::ChatClient) trait as the remote providers, so an
//! agent runs with no API key and no server.
//!
//! - [`LocalModel::load`] loads a GGUF file and starts a worker thread that owns llama.cpp's
//!   context and KV cache; [`LocalClient`] implements `ChatClient` (and its streaming twin) on top.
//! - The default model is Qwen2.5-Coder-1.5B-Instruct Q4_K_M, fetched and verified by
//!   `scripts/fetch-model.sh` into `$CAIRN_MODEL_DIR` (default `~/.cache/cairn/models`);
//!   [`default_model_path`] finds it or says which command to run. Any GGUF file works too.
//! - cairn renders the prompt itself ([`prompt`]): ChatML with Qwen's tool section, byte-stable.
//! - Turns where the agent must act are sampled under a grammar built from the tools' schemas
//!   ([`grammar`]), so the reply is one valid call of a real tool; other turns are read by a
//!   lenient parser ([`parse`]). See [`LocalClient`] for the rule.
//! - Each request reuses the KV cache for the longest common token prefix with the previous one,
//!   so a turn pays only for its new tokens ([`Usage::cached_input_tokens`](cairn_core::Usage)
//!   says how many were reused).
//! - For a harness: [`LocalModel::context_size`], [`LocalModel::count_tokens`] and
//!   [`LocalClient::render_prompt`].
//!
//! ```no_run
//! use cairn_core::Agent;
//! use cairn_local::{LocalClient, LocalConfig, LocalModel, default_model_path};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let path = default_model_path()?; // error: "run `scripts/fetch-model.sh default`"
//! let model = tokio::task::spawn_blocking(move || LocalModel::load(path, LocalConfig::default()))
//!     .await??;
//! let agent = Agent::builder(LocalClient::new(model))
//!     .instructions("You are a helpful coding agent.")
//!     .build();
//! let answer = agent.run("Say hello in one word.").await?;
//! println!("{}", answer.text());
//! # Ok(()) }
//! ```
//!
//! ## Building
//!
//! `llama-cpp-2` builds llama.cpp from source with CMake and generates bindings with bindgen:
//! `scripts/install-build-deps.sh` installs `cmake`, `clang` and `libclang-dev`. The first build
//! takes about 4 minutes on 2 cores. For a binary that runs on the machine that built it, build
//! with `RUSTFLAGS="-C target-cpu=native"`: llama.cpp then uses the CPU's native features (AVX2
//! and so on), which made prefill about 1.4× faster here. This is not set in a committed
//! `.cargo/config.toml`, because it would change every crate of the workspace and make binaries
//! that may not run on other machines.

pub mod client;
pub mod engine;
pub mod error;
pub mod grammar;
pub mod models;
pub mod parse;
pub mod prompt;

pub use client::{ANSWER_TOOL, LocalClient, answer_tool_spec};
pub use engine::{
    GenerateRequest, Generation, LocalConfig, LocalModel, ModelInfo, PROMPT_CACHE_MIN_NEW,
    Sampling, StopReason, ToolGrammar, common_prefix_len, reusable_prefix,
};
pub use error::LocalError;
pub use models::{KnownModel, default_model_path, model_dir, resolve_model};
pub use prompt::PromptFormat;
