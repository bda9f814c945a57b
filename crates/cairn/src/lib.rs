//! # cairn
//!
//! A Rust harness for deep agents. This facade re-exports the public API of cairn's crates:
//! the core vocabulary ([`Agent`], [`ChatClient`], [`Tool`], middleware, sessions), the
//! `#[tool]`/`#[tools]` macros, the model providers ([`providers`]: [`OpenAIClient`] and
//! [`client_for_model`] for `provider:model` strings), and the deep-agent harness ([`deep`],
//! with [`DeepAgent::builder`] resolving model strings through the providers), and durable
//! threads and memory on SQLite or PostgreSQL ([`persistence`]: [`persistence::open`] gives a
//! [`Database`] with a checkpointer and a store).
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
pub use cairn_providers::{AnthropicClient, Api, GeminiClient, OpenAIClient, client_for_model};

/// The deep-agent harness: backends, built-in tools, subagents, memory, skills, profiles.
pub use cairn_deep as deep;
pub use cairn_deep::{
    Backend, CompositeBackend, FilesystemBackend, HarnessProfile, LocalShellBackend, StateBackend,
    StoreBackend, SubAgent, ToolRuntimeExt,
};

/// Durable threads and long-term memory: the [`Checkpointer`] and [`Store`] on SQLite,
/// PostgreSQL or in memory (`cairn-store`).
pub use cairn_store as persistence;
pub use cairn_store::Database;

/// `cairn serve` as a library: an Agent Protocol (LangGraph-compatible) HTTP server over an
/// agent and a database, many workers on one PostgreSQL database (feature `server`).
#[cfg(feature = "server")]
pub use cairn_server as server;

/// MCP: the tools of MCP servers as cairn tools (`McpToolset`, `McpConfig`), and an agent
/// served over MCP (`mcp::server`) (feature `mcp`).
#[cfg(feature = "mcp")]
pub use cairn_mcp as mcp;

/// OpenTelemetry export of the GenAI spans the library emits through `tracing` (feature
/// `otel`); content capture is `cairn::agent::telemetry::set_capture_content`.
#[cfg(feature = "otel")]
pub use cairn_otel as otel;

/// Resolves a `provider:model` string (`openai:gpt-4.1`, `ollama:qwen2.5`) to a client.
pub fn resolve_model(spec: &str) -> Result<std::sync::Arc<dyn ChatClient>, ChatError> {
    client_for_model(spec)
}

/// Builds deep agents; model strings are resolved with [`resolve_model`].
///
/// ```
/// use cairn::{ChatResponse, DeepAgent, testing::ScriptedClient};
/// let agent = DeepAgent::builder()
///     .client(ScriptedClient::from_responses([ChatResponse::text("hi")]))
///     .system_prompt("You are a research assistant.")
///     .build()
///     .unwrap();
/// assert!(agent.tools().iter().any(|t| t.spec().name == "write_todos"));
/// ```
#[derive(Debug, Clone, Copy)]
pub struct DeepAgent;

impl DeepAgent {
    /// A deep-agent builder that understands `provider:model` strings.
    pub fn builder() -> cairn_deep::DeepAgentBuilder {
        cairn_deep::DeepAgent::builder().model_resolver(std::sync::Arc::new(resolve_model))
    }
}
