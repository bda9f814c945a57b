//! The [`Agent`] and its run loop.
//!
//! A run goes: agent middleware → (model call through chat middleware → tool calls through
//! function middleware) repeated until the model answers without calling a tool.
//!
//! The loop never lets the model's output crash a run: an unknown tool, arguments that are not
//! JSON or do not match the schema, a tool that fails and a tool that panics each become an
//! `Error: …` tool result the model reads, and the loop goes on. After
//! [`LoopConfig::max_iterations`] model calls with tools, or
//! [`LoopConfig::max_consecutive_errors`] failing batches in a row, one last call is made with
//! tools disabled so the model can still answer.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::FutureExt;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tracing::Instrument;

use std::collections::BTreeMap;

use crate::client::{ChatClient, ChatOptions, ChatResponse, ToolChoice};
use crate::context::{AgentContext, ChatContext, FunctionInvocationContext};
use crate::error::{Error, MiddlewareKind, ToolError};
use crate::extensions::Extensions;
use crate::interrupt::{ApprovalHandler, InterruptOn};
use crate::kwargs::Kwargs;
use crate::message::{Content, FinishReason, FunctionCall, FunctionResult, Message, Role, Usage};
use crate::middleware::{
    AnyMiddleware, Endpoint, IntoMiddleware, Middleware, MiddlewareSet, Next, concat,
};
use crate::session::AgentSession;
use crate::stream::{AgentEventKind, AgentStream, UpdateMetadata, UpdateSink};
use crate::tool::{Concurrency, IntoTool, SharedTool, ToolOutput, ToolRouter, ToolSpec};

/// Text used when the last, tool-less call produced no answer.
pub const LIMIT_REACHED_TEXT: &str =
    "Function invocation limit reached before a final answer could be produced.";

/// Bounds and behaviour of the tool loop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoopConfig {
    /// Model calls with tools enabled before the final tool-less call (default 40).
    pub max_iterations: usize,
    /// Batches in a row with a failing call before the final tool-less call (default 3).
    pub max_consecutive_errors: usize,
    /// Total tool calls after which the next model call is tool-less (default: no limit).
    pub max_function_calls: Option<usize>,
    /// Run the calls of one model turn concurrently (default) or one after another in the
    /// order the model gave them.
    pub concurrent_tool_calls: bool,
    /// Include the failure's message in error results (default true). When false the model
    /// only reads `Error: Function failed.`.
    pub include_detailed_errors: bool,
}

impl Default for LoopConfig {
    fn default() -> Self {
        LoopConfig {
            max_iterations: 40,
            max_consecutive_errors: 3,
            max_function_calls: None,
            concurrent_tool_calls: true,
            include_detailed_errors: true,
        }
    }
}

/// The result of a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentResponse {
    /// The messages the run produced: assistant turns and tool results, in order.
    pub messages: Vec<Message>,
    /// Token usage summed over the run's model calls.
    pub usage: Usage,
    /// Why the last model call stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<FinishReason>,
    /// The agent that ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_name: Option<String>,
    /// The id of the last model response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_id: Option<String>,
    /// Number of model calls made.
    pub model_calls: usize,
    /// Whether middleware ended the run early.
    #[serde(default)]
    pub terminated: bool,
    /// When the run paused for approvals: the guarded calls waiting for a decision (resume
    /// with [`Agent::resume`] and [`RunRequest::decisions`]). Empty for a finished run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub interrupts: Vec<crate::interrupt::Interrupt>,
}

impl AgentResponse {
    /// The text of the assistant messages, joined.
    pub fn text(&self) -> String {
        self.messages
            .iter()
            .filter(|m| m.role == Role::Assistant)
            .map(Message::text)
            .collect()
    }

    /// The text of the last assistant message that has any.
    pub fn last_text(&self) -> Option<String> {
        self.messages
            .iter()
            .rev()
            .filter(|m| m.role == Role::Assistant)
            .map(Message::text)
            .find(|t| !t.trim().is_empty())
    }

    /// Every tool call made during the run.
    pub fn function_calls(&self) -> impl Iterator<Item = &FunctionCall> {
        self.messages.iter().flat_map(Message::function_calls)
    }
}

struct AgentInner {
    name: Option<String>,
    description: Option<String>,
    client: Arc<dyn ChatClient>,
    router: ToolRouter,
    middleware: MiddlewareSet,
    default_options: ChatOptions,
    config: LoopConfig,
    guards: BTreeMap<String, InterruptOn>,
    approver: Option<Arc<dyn ApprovalHandler>>,
}

/// An LLM agent: a chat client, instructions, tools and middleware. Cheap to clone.
///
/// ```
/// use cairn_core::{Agent, ChatResponse, testing::ScriptedClient};
/// # tokio_test_block(async {
/// let client = ScriptedClient::from_responses([ChatResponse::text("Hello!")]);
/// let agent = Agent::builder(client).name("Greeter").instructions("Be brief.").build();
/// let response = agent.run("Hi").await.unwrap();
/// assert_eq!(response.text(), "Hello!");
/// # });
/// # fn tokio_test_block(f: impl std::future::Future<Output = ()>) {
/// #     tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(f)
/// # }
/// ```
#[derive(Clone)]
pub struct Agent {
    inner: Arc<AgentInner>,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("name", &self.inner.name)
            .field("client", &self.inner.client.describe())
            .field("tools", &self.inner.router)
            .field("middleware", &self.inner.middleware)
            .finish_non_exhaustive()
    }
}

/// Builds an [`Agent`].
pub struct AgentBuilder {
    name: Option<String>,
    description: Option<String>,
    client: Arc<dyn ChatClient>,
    tools: Vec<SharedTool>,
    middleware: MiddlewareSet,
    default_options: ChatOptions,
    config: LoopConfig,
    guards: BTreeMap<String, InterruptOn>,
    approver: Option<Arc<dyn ApprovalHandler>>,
}

impl AgentBuilder {
    /// Guards calls of `tool`: none runs without a person's decision (see
    /// [`crate::interrupt`]). Tools whose spec says `ApprovalMode::AlwaysRequire` are guarded
    /// without this.
    pub fn interrupt_on(mut self, tool: impl Into<String>, config: InterruptOn) -> Self {
        self.guards.insert(tool.into(), config);
        self
    }

    /// Who decides on guarded calls in process. Without one, a guarded call pauses the run.
    pub fn approval_handler(mut self, handler: Arc<dyn ApprovalHandler>) -> Self {
        self.approver = Some(handler);
        self
    }

    /// The agent's name (also the default name when it is used as a tool).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// What the agent does (the default description when it is used as a tool).
    pub fn description(mut self, d: impl Into<String>) -> Self {
        self.description = Some(d.into());
        self
    }

    /// The system instructions.
    pub fn instructions(mut self, i: impl Into<String>) -> Self {
        self.default_options.instructions = Some(i.into());
        self
    }

    /// Adds a tool.
    pub fn tool(mut self, tool: impl IntoTool) -> Self {
        self.tools.push(tool.into_tool());
        self
    }

    /// Adds several tools.
    pub fn tools(mut self, tools: impl IntoIterator<Item = SharedTool>) -> Self {
        self.tools.extend(tools);
        self
    }

    /// Adds middleware of any kind: a plain `async fn(ctx, next)` or a [`Middleware`] type.
    /// The kind follows from the context type.
    pub fn middleware<M>(mut self, mw: impl IntoMiddleware<M>) -> Self {
        self.middleware.push(mw.into_middleware());
        self
    }

    /// Default chat options (run options override them field by field).
    pub fn default_options(mut self, options: ChatOptions) -> Self {
        let instructions = self.default_options.instructions.take();
        self.default_options = options;
        if self.default_options.instructions.is_none() {
            self.default_options.instructions = instructions;
        }
        self
    }

    /// The model id to request.
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.default_options.model = Some(model.into());
        self
    }

    /// Loop bounds and behaviour.
    pub fn loop_config(mut self, config: LoopConfig) -> Self {
        self.config = config;
        self
    }

    /// The agent.
    pub fn build(self) -> Agent {
        Agent {
            inner: Arc::new(AgentInner {
                name: self.name,
                description: self.description,
                client: self.client,
                router: ToolRouter::new(self.tools),
                middleware: self.middleware,
                default_options: self.default_options,
                config: self.config,
                guards: self.guards,
                approver: self.approver,
            }),
        }
    }
}

/// `client.as_agent()`, the seed's shortcut for `Agent::builder(client)`.
pub trait ChatClientExt: ChatClient + Sized {
    /// An agent builder over this client.
    #[allow(clippy::wrong_self_convention)]
    fn as_agent(self) -> AgentBuilder {
        Agent::builder(self)
    }
}

impl<T: ChatClient> ChatClientExt for T {}

/// What a run is asked: text, one message or several.
#[derive(Debug, Clone, Default)]
pub struct RunInput(pub Vec<Message>);

impl From<&str> for RunInput {
    fn from(s: &str) -> Self {
        RunInput(vec![Message::user(s)])
    }
}
impl From<String> for RunInput {
    fn from(s: String) -> Self {
        RunInput(vec![Message::user(s)])
    }
}
impl From<&String> for RunInput {
    fn from(s: &String) -> Self {
        RunInput(vec![Message::user(s.as_str())])
    }
}
impl From<Message> for RunInput {
    fn from(m: Message) -> Self {
        RunInput(vec![m])
    }
}
impl From<Vec<Message>> for RunInput {
    fn from(v: Vec<Message>) -> Self {
        RunInput(v)
    }
}
impl From<()> for RunInput {
    fn from(_: ()) -> Self {
        RunInput(Vec::new())
    }
}

/// Everything a run can be given besides its input (SPEC R1: the three buckets are separate).
#[derive(Default, Clone)]
pub struct RunOptions {
    /// The session to read history from and write to.
    pub session: Option<AgentSession>,
    /// Values for tools and function middleware only.
    pub function_invocation_kwargs: Kwargs,
    /// Values for the chat client and chat middleware only.
    pub client_kwargs: Kwargs,
    /// Run-level middleware (inside the agent's own).
    pub middleware: MiddlewareSet,
    /// Extra tools for this run.
    pub tools: Vec<SharedTool>,
    /// Chat options overriding the agent's defaults.
    pub options: ChatOptions,
    /// Typed per-run values for middleware and tools.
    pub extensions: Extensions,
    /// Where to stream updates (set by nested runs).
    pub updates: Option<UpdateSink>,
    /// The thread the run continues and commits every step to (issue #9).
    pub thread: Option<crate::checkpoint::ThreadCursor>,
    /// Continue the thread's unfinished run instead of starting one (see [`Agent::resume`]).
    pub resume: bool,
    /// Decisions for the interrupts of a paused run, by interrupt id.
    pub decisions: Option<crate::interrupt::Decisions>,
}

impl std::fmt::Debug for RunOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunOptions")
            .field("session", &self.session)
            .field(
                "function_invocation_kwargs",
                &self.function_invocation_kwargs,
            )
            .field("client_kwargs", &self.client_kwargs)
            .field("middleware", &self.middleware)
            .field("tools", &self.tools.len())
            .field("options", &self.options)
            .field("thread", &self.thread)
            .field("resume", &self.resume)
            .finish_non_exhaustive()
    }
}

/// What [`Agent::sub_run`] found for a tool call's sub-run.
#[derive(Debug)]
pub enum SubRun {
    /// Start it (a new run; on a thread, recorded in the call's namespace).
    Run(RunRequest),
    /// It was cut off or paused: continue it.
    Resume {
        /// The sub-run's first step folded (its starting state).
        first: Box<crate::checkpoint::Transcript>,
        /// The resume request.
        request: RunRequest,
    },
    /// It had finished: its transcript; nothing runs.
    Finished {
        /// The sub-run's first step folded (its starting state).
        first: Box<crate::checkpoint::Transcript>,
        /// The whole sub-run.
        done: Box<crate::checkpoint::Transcript>,
    },
}

impl std::fmt::Debug for RunRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunRequest")
            .field("agent", &self.agent.name())
            .field("input", &self.input.len())
            .field("opts", &self.opts)
            .finish()
    }
}

/// A run being set up. `.await` it for the response, or call [`stream`](Self::stream).
#[must_use = "a run does nothing until it is awaited or streamed"]
pub struct RunRequest {
    agent: Agent,
    input: Vec<Message>,
    opts: RunOptions,
}

impl RunRequest {
    /// The session to continue and write to.
    pub fn session(mut self, session: &AgentSession) -> Self {
        self.opts.session = Some(session.clone());
        self
    }

    /// Values only tools and function middleware see (never the model).
    pub fn function_invocation_kwargs(mut self, kwargs: impl Into<Kwargs>) -> Self {
        self.opts.function_invocation_kwargs = kwargs.into();
        self
    }

    /// Values only the chat client and chat middleware see.
    pub fn client_kwargs(mut self, kwargs: impl Into<Kwargs>) -> Self {
        self.opts.client_kwargs = kwargs.into();
        self
    }

    /// Adds run-level middleware (inside the agent-level middleware).
    pub fn middleware<M>(mut self, mw: impl IntoMiddleware<M>) -> Self {
        self.opts.middleware.push(mw.into_middleware());
        self
    }

    /// Adds a tool for this run only.
    pub fn tool(mut self, tool: impl IntoTool) -> Self {
        self.opts.tools.push(tool.into_tool());
        self
    }

    /// Chat options overriding the agent's defaults.
    pub fn options(mut self, options: ChatOptions) -> Self {
        self.opts.options = options;
        self
    }

    /// Adds a typed value middleware and tools can read from `extensions`.
    pub fn extension<T: Send + Sync + 'static>(mut self, value: T) -> Self {
        self.opts.extensions.insert(value);
        self
    }

    /// Adds all of `extensions`.
    pub fn extensions(mut self, extensions: &Extensions) -> Self {
        self.opts.extensions.extend(extensions);
        self
    }

    /// Runs on a durable thread: the thread's history and state are loaded first, and every
    /// step of the run is committed to it before the loop goes on, so a run cut off at any
    /// point can be continued with [`Agent::resume`]. The thread must exist
    /// ([`Checkpointer::create_thread`](crate::Checkpointer::create_thread)).
    pub fn thread(mut self, cursor: crate::checkpoint::ThreadCursor) -> Self {
        self.opts.thread = Some(cursor);
        self
    }

    /// Decisions for a paused run's interrupts (by [`Interrupt::id`](crate::Interrupt)): every
    /// interrupt needs one, and an id that names no interrupt is an error; nothing runs or is
    /// committed before they are checked.
    pub fn decisions(
        mut self,
        decisions: impl IntoIterator<Item = (String, crate::interrupt::Decision)>,
    ) -> Self {
        self.opts.decisions = Some(decisions.into_iter().collect());
        self
    }

    /// Replaces all options at once.
    pub fn with_options(mut self, opts: RunOptions) -> Self {
        self.opts = opts;
        self
    }

    /// Streams the run's updates into an existing sink (used by nested agents) instead of
    /// a new stream.
    pub fn updates(mut self, sink: UpdateSink) -> Self {
        self.opts.updates = Some(sink);
        self
    }

    /// Runs in the background and streams its [`AgentEvent`](crate::AgentEvent)s; the last is
    /// [`AgentEventKind::RunCompleted`]. Must be called inside a Tokio runtime.
    pub fn stream(mut self) -> AgentStream {
        let (sink, rx) = UpdateSink::channel(UpdateMetadata {
            agent_name: self.agent.inner.name.clone(),
            ..Default::default()
        });
        self.opts.updates = Some(sink);
        let handle = tokio::spawn(execute(self.agent, self.input, self.opts));
        AgentStream::new(rx, handle)
    }
}

impl IntoFuture for RunRequest {
    type Output = crate::Result<AgentResponse>;
    type IntoFuture = crate::client::BoxFuture<'static, crate::Result<AgentResponse>>;
    fn into_future(self) -> Self::IntoFuture {
        Box::pin(execute(self.agent, self.input, self.opts))
    }
}

impl Agent {
    /// Starts building an agent over `client`.
    pub fn builder(client: impl ChatClient) -> AgentBuilder {
        Self::builder_shared(Arc::new(client))
    }

    /// Starts building an agent over a shared client.
    pub fn builder_shared(client: Arc<dyn ChatClient>) -> AgentBuilder {
        AgentBuilder {
            name: None,
            description: None,
            client,
            tools: Vec::new(),
            middleware: MiddlewareSet::default(),
            default_options: ChatOptions::default(),
            config: LoopConfig::default(),
            guards: BTreeMap::new(),
            approver: None,
        }
    }

    /// The agent's name.
    pub fn name(&self) -> Option<&str> {
        self.inner.name.as_deref()
    }

    /// The agent's description.
    pub fn description(&self) -> Option<&str> {
        self.inner.description.as_deref()
    }

    /// The agent's system instructions.
    pub fn instructions(&self) -> Option<&str> {
        self.inner.default_options.instructions.as_deref()
    }

    /// The agent's tools.
    pub fn tools(&self) -> &[SharedTool] {
        self.inner.router.tools()
    }

    /// The agent's chat client.
    pub fn client(&self) -> &Arc<dyn ChatClient> {
        &self.inner.client
    }

    /// A new, empty session for this agent.
    pub fn create_session(&self) -> AgentSession {
        AgentSession::new()
    }

    /// Sets up a run on `input`.
    pub fn run(&self, input: impl Into<RunInput>) -> RunRequest {
        RunRequest {
            agent: self.clone(),
            input: input.into().0,
            opts: RunOptions::default(),
        }
    }

    /// Sets up the continuation of `thread`'s unfinished run (one whose process was killed, or
    /// that failed): the loop starts from the last committed step. Tool calls whose results
    /// were committed are not run again; calls that were running when the run was cut off
    /// run again. A thread whose last run completed has nothing to resume (an error).
    pub fn resume(&self, thread: crate::checkpoint::ThreadCursor) -> RunRequest {
        let mut req = self.run(());
        req.opts.thread = Some(thread);
        req.opts.resume = true;
        req
    }

    /// Sets up the run a tool call starts (a subagent, an agent used as a tool). On a durable
    /// thread (the call's context carries a [`ThreadCursor`](crate::ThreadCursor)) the run is
    /// recorded in the namespace of that call ([`ThreadCursor::child`](crate::ThreadCursor::child)),
    /// so when the call runs again after a cut-off or a pause, the sub-run continues from its
    /// own steps ([`SubRun::Run`] with a resume) or, if it had finished, its transcript is
    /// returned ([`SubRun::Finished`]) and nothing runs again. Without a thread it is a plain
    /// run.
    pub async fn sub_run(
        &self,
        ctx: &crate::context::FunctionInvocationContext,
        input: impl Into<RunInput>,
    ) -> Result<SubRun, crate::checkpoint::CheckpointError> {
        let Some(cursor) = ctx
            .extensions
            .get::<crate::checkpoint::ThreadCursor>()
            .map(|c| c.child(&ctx.call_id))
        else {
            return Ok(SubRun::Run(self.run(input)));
        };
        let prior = cursor
            .checkpointer
            .steps(&cursor.thread_id, &cursor.namespace, None)
            .await?;
        if prior.is_empty() {
            return Ok(SubRun::Run(self.run(input).thread(cursor)));
        }
        let done = Box::new(crate::checkpoint::Transcript::from_steps(&prior));
        let first = Box::new(crate::checkpoint::Transcript::from_steps(&prior[..1]));
        if done.status == crate::checkpoint::RunStatus::Completed {
            return Ok(SubRun::Finished { first, done });
        }
        Ok(SubRun::Resume {
            first,
            request: self.resume(cursor),
        })
    }

    /// Sets up a streaming run; shorthand for `agent.run(input).with_options(opts).stream()`.
    pub fn run_stream(&self, input: impl Into<RunInput>, opts: RunOptions) -> AgentStream {
        self.run(input).with_options(opts).stream()
    }
}

mod as_tool;
mod durable;
mod run;
pub mod telemetry;
mod tools;

pub use as_tool::{AgentTool, AgentToolBuilder};
use run::execute;
