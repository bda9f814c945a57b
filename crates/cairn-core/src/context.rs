//! The contexts middleware and tools receive: one per run, one per model call, one per tool call.

use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::agent::AgentResponse;
use crate::client::{ChatOptions, ChatResponse};
use crate::error::ToolError;
use crate::extensions::Extensions;
use crate::kwargs::Kwargs;
use crate::message::{FunctionCall, Message};
use crate::session::AgentSession;
use crate::stream::UpdateSink;
use crate::tool::{SharedTool, ToolOutput};

/// What a tool call and its function middleware see (SPEC R2.3).
///
/// Function middleware receives it owned, may change `arguments` and `kwargs` before calling
/// `next` (the tool sees the changes), and may read or replace `result` afterwards. Setting
/// `result` without calling `next` skips the tool; setting `terminate` ends the agent loop after
/// this batch of calls, with no further model call.
///
/// The struct is `#[non_exhaustive]` so fields can be added: build one with
/// [`new`](Self::new) and set fields on it.
#[derive(Clone)]
#[non_exhaustive]
pub struct FunctionInvocationContext {
    /// The tool being called.
    pub function: SharedTool,
    /// The id of the call.
    pub call_id: String,
    /// The parsed arguments (a JSON object).
    pub arguments: Value,
    /// The run's function-invocation kwargs (a per-call copy).
    pub kwargs: Kwargs,
    /// The run's session, if it has one.
    pub session: Option<AgentSession>,
    /// The result: `None` before the tool ran, then its output.
    pub result: Option<ToolOutput>,
    /// Typed per-run values (runtime context, store, backend…).
    pub extensions: Extensions,
    /// Ends the agent loop after this batch when set.
    pub terminate: bool,
    /// The stream of a streaming run, for tools that produce updates (nested agents).
    pub updates: Option<UpdateSink>,
    /// Every call of the model turn this call belongs to, this one included, in the order the
    /// model gave them (ids made unique). See [`siblings`](Self::siblings).
    pub turn_calls: Arc<[FunctionCall]>,
}

impl FunctionInvocationContext {
    /// A context for calling `function` with `arguments` and nothing else set.
    pub fn new(function: SharedTool, call_id: impl Into<String>, arguments: Value) -> Self {
        FunctionInvocationContext {
            function,
            call_id: call_id.into(),
            arguments,
            kwargs: Kwargs::new(),
            session: None,
            result: None,
            extensions: Extensions::new(),
            terminate: false,
            updates: None,
            turn_calls: Arc::from([]),
        }
    }

    /// The other calls of the same model turn (all of [`turn_calls`](Self::turn_calls) but
    /// this one). A tool that must be called at most once per turn rejects itself when a
    /// sibling calls it too.
    pub fn siblings(&self) -> impl Iterator<Item = &FunctionCall> {
        self.turn_calls
            .iter()
            .filter(move |c| c.call_id != self.call_id)
    }

    /// The called tool's name.
    pub fn tool_name(&self) -> &str {
        &self.function.spec().name
    }

    /// Parses the arguments into `T`.
    pub fn parse_arguments<T: DeserializeOwned>(&self) -> Result<T, ToolError> {
        crate::tool::parse_arguments(&self.arguments)
    }
}

impl std::fmt::Debug for FunctionInvocationContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FunctionInvocationContext")
            .field("function", &self.tool_name())
            .field("call_id", &self.call_id)
            .field("arguments", &self.arguments)
            .field("kwargs", &self.kwargs)
            .field("session", &self.session)
            .field("result", &self.result)
            .field("terminate", &self.terminate)
            .field("turn_calls", &self.turn_calls.len())
            .finish_non_exhaustive()
    }
}

/// What chat middleware sees around one model call.
///
/// It holds the client bucket (`client_kwargs`) but never the function-invocation kwargs.
/// Middleware may edit `messages` and `options` before `next` (the dynamic system prompt of SPEC
/// R3.4 edits `options.instructions`), replace `result` after it, or set `result` without calling
/// `next` to skip the model.
///
/// `messages` is shared with the agent's stored conversation: edit it with
/// `Arc::make_mut(&mut ctx.messages)` (which copies it first) or replace it with a new `Arc`.
/// Either way the change applies to this call only; the conversation the agent keeps is never
/// rewritten by chat middleware.
///
/// The struct is `#[non_exhaustive]` so fields can be added: build one with
/// [`new`](Self::new) (or [`fork`](Self::fork) an existing one) and set fields on it.
#[derive(Debug)]
#[non_exhaustive]
pub struct ChatContext {
    /// The agent's name.
    pub agent_name: Option<String>,
    /// The conversation sent to the model (copy-on-write; see above).
    pub messages: std::sync::Arc<Vec<Message>>,
    /// The options of the call, tools included.
    pub options: ChatOptions,
    /// Values for the chat client.
    pub client_kwargs: Kwargs,
    /// The run's session.
    pub session: Option<AgentSession>,
    /// Typed per-run values.
    pub extensions: Extensions,
    /// The response: `None` before the model answered.
    pub result: Option<ChatResponse>,
    /// Ends the run after this call when set.
    pub terminate: bool,
    /// Which model call of the run this is (0-based).
    pub iteration: usize,
    /// The stream of a streaming run.
    pub updates: Option<UpdateSink>,
}

/// What agent middleware sees around a whole run.
///
/// Middleware may edit the input `messages`, options, tools and both kwargs buckets before
/// `next`, and read or replace `result` after it. Setting `result` without calling `next` skips
/// the run entirely (no model call).
///
/// The struct is `#[non_exhaustive]` so fields can be added: build one with
/// [`new`](Self::new) and set fields on it.
#[derive(Debug)]
#[non_exhaustive]
pub struct AgentContext {
    /// The agent's name.
    pub agent_name: Option<String>,
    /// The new input messages of this run (history from the session is added after the chain).
    pub messages: Vec<Message>,
    /// The run's session.
    pub session: Option<AgentSession>,
    /// Run-level chat options (merged over the agent's defaults).
    pub options: ChatOptions,
    /// Extra tools for this run.
    pub tools: Vec<SharedTool>,
    /// Values for tools and function middleware only.
    pub function_invocation_kwargs: Kwargs,
    /// Values for the chat client and chat middleware only.
    pub client_kwargs: Kwargs,
    /// Typed per-run values.
    pub extensions: Extensions,
    /// The run's response: `None` before it ran.
    pub result: Option<AgentResponse>,
    /// Whether the run streams.
    pub stream: bool,
    /// The stream of a streaming run.
    pub updates: Option<UpdateSink>,
}

impl ChatContext {
    /// A context for sending `messages` with `options`, everything else empty (iteration 0,
    /// no session, no stream).
    pub fn new(messages: std::sync::Arc<Vec<Message>>, options: ChatOptions) -> Self {
        ChatContext {
            agent_name: None,
            messages,
            options,
            client_kwargs: Kwargs::new(),
            session: None,
            extensions: Extensions::new(),
            result: None,
            terminate: false,
            iteration: 0,
            updates: None,
        }
    }

    /// A copy of this context without its result, for middleware that calls `next` again
    /// (a retry after summarizing). The messages stay shared until either copy edits them.
    pub fn fork(&self) -> Self {
        ChatContext {
            agent_name: self.agent_name.clone(),
            messages: std::sync::Arc::clone(&self.messages),
            options: self.options.clone(),
            client_kwargs: self.client_kwargs.clone(),
            session: self.session.clone(),
            extensions: self.extensions.clone(),
            result: None,
            terminate: self.terminate,
            iteration: self.iteration,
            updates: self.updates.clone(),
        }
    }
}

impl AgentContext {
    /// A context for a run on `messages`, everything else empty (no session, no tools, empty
    /// kwargs buckets, not streaming).
    pub fn new(messages: Vec<Message>) -> Self {
        AgentContext {
            agent_name: None,
            messages,
            session: None,
            options: ChatOptions::default(),
            tools: Vec::new(),
            function_invocation_kwargs: Kwargs::new(),
            client_kwargs: Kwargs::new(),
            extensions: Extensions::new(),
            result: None,
            stream: false,
            updates: None,
        }
    }
}

impl std::fmt::Debug for dyn crate::tool::Tool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tool({})", self.spec().name)
    }
}
