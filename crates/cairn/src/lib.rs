//! # cairn
//!
//! A Rust harness for deep agents. This facade re-exports the public API of cairn's crates:
//! the core vocabulary ([`Agent`], [`ChatClient`], [`Tool`], middleware, sessions), the
//! `#[tool]`/`#[tools]` macros, and the model providers ([`providers`]: [`OpenAIClient`] and
//! [`client_for_model`] for `provider:model` strings).
//!
//! ```
//! use cairn::{Agent, ChatResponse, testing::ScriptedClient};
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let agent = Agent::builder(ScriptedClient::from_responses([ChatResponse::text("hi")])).build();
//! assert_eq!(agent.run("hello").await.unwrap().text(), "hi");
//! # });
//! ```

pub use cairn_core::*;

/// `#[tool]` and `#[tools]`: tools from ordinary functions and methods.
pub use cairn_macros::{tool, tools};

/// Model providers: OpenAI-compatible endpoints (Chat Completions and Responses) and
/// `provider:model` resolution.
pub use cairn_providers as providers;
pub use cairn_providers::{Api, OpenAIClient, client_for_model};
