//! # cairn-deep
//!
//! The deep-agent harness of cairn, after LangChain Deep Agents. This part holds the
//! **backends** (where files live: the thread's state, a [`Store`](cairn_core::Store), a real
//! directory, or a routing composite of those; optionally a local shell) and the **built-in
//! tools** over them (`ls`, `read_file`, `write_file`, `edit_file`, `delete`, `glob`, `grep`,
//! `execute`, `write_todos`), the [`DeepAgent`] builder, and **context compression** ([`compression`]:
//! offloading large tool results and inputs to files, summarizing older messages, recovering
//! from context-overflow errors).
//!
//! ```
//! use std::sync::Arc;
//! use cairn_core::{Agent, AgentSession, ChatResponse, testing::ScriptedClient};
//! use cairn_deep::backend::StateBackend;
//! use cairn_deep::tools::filesystem_tools;
//! use serde_json::json;
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let client = ScriptedClient::from_responses([
//!     ChatResponse::tool_calls([("write_file", json!({"path": "/notes.md", "content": "hi\n"}))]),
//!     ChatResponse::text("Saved."),
//! ]);
//! let agent = Agent::builder(client)
//!     .tools(filesystem_tools(Arc::new(StateBackend::new())))
//!     .build();
//! let session = AgentSession::new();
//! agent.run("Save a note").session(&session).await.unwrap();
//! assert_eq!(StateBackend::files(session.state())["/notes.md"].content, "hi\n");
//! # });
//! ```

pub mod approval;
pub mod backend;
pub mod builder;
pub mod compression;
pub mod error;
pub mod format;
pub mod memory;
pub mod mentions;
pub mod model;
pub mod path;
pub mod profile;
pub mod prompt;
pub mod runtime;
pub mod skills;
pub mod subagents;
pub mod tools;

pub use approval::{ApprovalHandler, ApprovalRequest, Decision, DecisionKind, InterruptOn};
pub use backend::{
    Backend, BackendRuntime, CompositeBackend, Executor, FilesystemBackend, LocalShellBackend,
    SharedBackend, StateBackend, StoreBackend,
};
pub use builder::{DeepAgent, DeepAgentBuilder, DeepAgentError};
pub use compression::{Compressor, Keep, Offloading, Summarization, Trigger};
pub use error::BackendError;
pub use model::{ModelChoice, ModelResolver};
pub use profile::{HarnessProfile, ProfileRegistry};
pub use runtime::{SubagentContext, SubagentName, ToolRuntimeExt};
pub use subagents::{SubAgent, TaskTool};
pub use tools::{filesystem_tools, todo_tool};
