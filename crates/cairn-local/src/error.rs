//! The errors of the local model.

use std::path::PathBuf;

use cairn_core::{ChatError, ChatErrorKind};

/// Something went wrong loading or running the local model.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LocalError {
    /// The model file does not exist.
    #[error("model file not found: {path}. {hint}")]
    ModelMissing {
        /// Where the file was looked for.
        path: PathBuf,
        /// What to do about it (for the known models: which fetch command to run).
        hint: String,
    },
    /// llama.cpp could not be initialised.
    #[error("llama.cpp backend failed to initialise: {0}")]
    Backend(String),
    /// The file could not be loaded as a GGUF model.
    #[error("could not load the model {path}: {message}")]
    Load {
        /// The file.
        path: PathBuf,
        /// llama.cpp's reason.
        message: String,
    },
    /// The inference context (KV cache) could not be created.
    #[error("could not create the inference context: {0}")]
    Context(String),
    /// The prompt does not fit the context window.
    #[error(
        "the prompt has {prompt_tokens} tokens but the context window holds {n_ctx} (at least one token must be left to answer)"
    )]
    ContextOverflow {
        /// Tokens in the rendered prompt.
        prompt_tokens: usize,
        /// The context size.
        n_ctx: usize,
    },
    /// A tool grammar was rejected by llama.cpp.
    #[error("llama.cpp rejected the tool-call grammar: {0}")]
    Grammar(String),
    /// Evaluating tokens failed.
    #[error("llama.cpp failed to evaluate the prompt: {0}")]
    Decode(String),
    /// The worker thread is gone (it panicked or the model was dropped).
    #[error("the local model's worker thread has stopped")]
    WorkerGone,
    /// A configuration value is invalid.
    #[error("invalid configuration: {0}")]
    Config(String),
}

impl From<LocalError> for ChatError {
    fn from(e: LocalError) -> Self {
        let kind = match &e {
            LocalError::ContextOverflow { .. } => ChatErrorKind::ContextOverflow,
            LocalError::ModelMissing { .. } | LocalError::Config(_) | LocalError::Grammar(_) => {
                ChatErrorKind::Config
            }
            _ => ChatErrorKind::Other,
        };
        let message = e.to_string();
        ChatError::new(kind, message).with_source(e)
    }
}
