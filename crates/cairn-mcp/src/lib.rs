//! # cairn-mcp
//!
//! The Model Context Protocol for cairn, over the official Rust SDK (`rmcp`):
//! - **client** ([`McpToolset`]): the tools of MCP servers, reached over a child process's
//!   stdio or the streamable-HTTP transport, become ordinary cairn tools named
//!   `mcp__<server>__<tool>`, with the server's JSON schema passed through. Results (text,
//!   images, structured content, `isError`) map to tool output; a server error, a timeout or
//!   a server that dies mid-call is an `Error: …` result the model reads, never a failed run.
//! - **configuration** ([`McpConfig`]): the `mcpServers` JSON users already write.
//! - **server** ([`server`]): an agent exposed as an MCP server with `run` and `reply` tools.
//!
//! ```no_run
//! use cairn_mcp::{McpConfig, McpToolset, ServerConfig};
//! # async fn demo(client: cairn_core::testing::ScriptedClient) {
//! let mut config = McpConfig::default();
//! config.servers.insert(
//!     "fs".into(),
//!     ServerConfig::stdio("npx", ["-y", "@modelcontextprotocol/server-filesystem", "."]),
//! );
//! let mcp = McpToolset::new(&config);
//! let agent = cairn_core::Agent::builder(client).middleware(mcp.clone()).build();
//! let answer = agent.run("List the files").await;
//! mcp.shutdown().await;
//! # }
//! ```
//!
//! Design notes: `docs/mcp.md`.

pub mod client;
pub mod config;
pub mod error;
pub mod server;
pub mod tool;
pub mod toolset;

pub use client::McpClient;
pub use config::{McpConfig, ServerConfig, Transport};
pub use error::{ClientError, ConfigError};
pub use tool::McpTool;
pub use toolset::{McpToolset, ServerState, ServerStatus, ToolInfo};
