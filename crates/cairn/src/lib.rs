//! # cairn
//!
//! A Rust harness for deep agents. This facade re-exports the public API of cairn's crates:
//! the core vocabulary ([`Agent`], [`ChatClient`], [`Tool`], middleware, sessions).
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
