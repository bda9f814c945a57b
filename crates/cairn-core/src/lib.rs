//! # cairn-core
//!
//! The small, stable vocabulary of cairn, after Microsoft Agent Framework's runtime-context
//! model: [`Message`]s, the [`ChatClient`] boundary, [`Tool`]s that receive a
//! [`FunctionInvocationContext`], [`Middleware`] around runs, model calls and tool calls,
//! [`AgentSession`]s with state, and the [`Agent`] loop.
//!
//! A run carries three separate buckets of runtime data (SPEC R1):
//! - **session** ([`AgentSession`]): conversation history and a state map;
//! - **function-invocation kwargs** ([`Kwargs`]): seen by tools and function middleware only,
//!   never by the model;
//! - **client kwargs**: seen by the chat client and chat middleware only.
//!
//! ```
//! use cairn_core::{Agent, ChatResponse, FnTool, Kwargs, ToolOutput, testing::ScriptedClient};
//! use serde_json::json;
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let send_email = FnTool::new(
//!     "send_email",
//!     "Queue an email.",
//!     json!({"type": "object", "properties": {"address": {"type": "string"}}, "required": ["address"]}),
//!     |ctx| async move {
//!         let user = ctx.kwargs.get_str("user_id").unwrap_or("?").to_owned();
//!         Ok(ToolOutput::text(format!("Queued email for {} from {user}", ctx.arguments["address"])))
//!     },
//! );
//! let client = ScriptedClient::from_responses([
//!     ChatResponse::tool_calls([("send_email", json!({"address": "finance@example.com"}))]),
//!     ChatResponse::text("Sent."),
//! ]);
//! let agent = Agent::builder(client.clone()).tool(send_email).build();
//! let response = agent
//!     .run("Email finance")
//!     .function_invocation_kwargs(Kwargs::from([("user_id", "user-123")]))
//!     .await
//!     .unwrap();
//! assert_eq!(response.text(), "Sent.");
//! // The kwargs bucket never reached the model: the first request (before the tool put the
//! // id into its own result) does not mention it, and the client got an empty bucket.
//! let requests = client.requests();
//! assert!(!requests[0].to_json().contains("user-123"));
//! assert!(requests.iter().all(|r| r.function_invocation_kwargs.is_empty()));
//! # });
//! ```

pub mod agent;
pub mod checkpoint;
pub mod client;
pub mod context;
pub mod error;
pub mod extensions;
pub mod interrupt;
pub mod kwargs;
pub mod message;
pub mod middleware;
pub mod schema;
pub mod session;
pub mod store;
pub mod stream;
pub mod testing;
pub mod tool;

pub use agent::{
    Agent, AgentBuilder, AgentResponse, AgentTool, AgentToolBuilder, ChatClientExt, LoopConfig,
    RunInput, RunOptions, RunRequest, SubRun,
};
pub use checkpoint::{
    CheckpointError, Checkpointer, InMemoryCheckpointer, LoopCounters, RunStatus,
    SharedCheckpointer, StatePatch, Step, StepDelta, StepKind, ThreadCursor, ThreadInfo,
    ThreadQuery, Transcript,
};
pub use client::{
    BoxFuture, BoxStream, ChatClient, ChatOptions, ChatRequest, ChatResponse, ChatResponseUpdate,
    ChatStream, ResponseAssembler, ToolChoice, UpdateEvent,
};
pub use context::{AgentContext, ChatContext, FunctionInvocationContext};
pub use error::{ChatError, ChatErrorKind, Error, MiddlewareKind, Result, ToolError};
pub use extensions::Extensions;
pub use interrupt::{
    ApprovalHandler, ApprovalRequest, CallReview, Decision, DecisionKind, Decisions, Interrupt,
    InterruptOn,
};
pub use kwargs::Kwargs;
pub use message::{Content, FinishReason, FunctionCall, FunctionResult, Message, Role, Usage};
pub use middleware::{
    AgentNext, AnyMiddleware, ChatNext, FromFn, FunctionNext, IntoMiddleware, Middleware,
    MiddlewareSet, Next, from_fn,
};
pub use session::{AgentSession, SessionState};
pub use store::{InMemoryStore, Item, PutIf, SearchQuery, SharedStore, Store, StoreError};
pub use stream::{AgentEvent, AgentEventKind, AgentStream, UpdateMetadata, UpdateSink, call_model};
pub use tool::{
    ApprovalMode, Concurrency, FnTool, IntoTool, IntoToolOutput, Json, RespecTool, SharedTool,
    Tool, ToolOutput, ToolParameters, ToolRouter, ToolSet, ToolSpec, ToolsJsonCache,
};

#[doc(hidden)]
pub mod __private {
    //! Re-exports used by code that `#[tool]` generates. Not a public API.
    pub use schemars;
    pub use serde;
    pub use serde_json;
}
