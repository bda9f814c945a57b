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

use crate::client::{ChatClient, ChatOptions, ChatResponse, ToolChoice};
use crate::context::{AgentContext, ChatContext, FunctionInvocationContext};
use crate::error::{Error, MiddlewareKind, ToolError};
use crate::extensions::Extensions;
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
}

impl AgentBuilder {
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
            .finish_non_exhaustive()
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

    /// Sets up a streaming run; shorthand for `agent.run(input).with_options(opts).stream()`.
    pub fn run_stream(&self, input: impl Into<RunInput>, opts: RunOptions) -> AgentStream {
        self.run(input).with_options(opts).stream()
    }
}

/// A run inside its `invoke_agent` span. The span is made here, before the future is first
/// polled, so a run that is spawned (`stream`) still nests under the caller's current span.
fn execute(
    agent: Agent,
    input: Vec<Message>,
    opts: RunOptions,
) -> impl Future<Output = crate::Result<AgentResponse>> + Send + 'static {
    let span = telemetry::agent_span(
        agent.inner.name.as_deref(),
        opts.options
            .model
            .as_deref()
            .or(agent.inner.default_options.model.as_deref()),
    );
    let traced = span.clone();
    async move {
        let result = execute_run(agent, input, opts).await;
        telemetry::record_run(&traced, &result);
        result
    }
    .instrument(span)
}

async fn execute_run(
    agent: Agent,
    input: Vec<Message>,
    opts: RunOptions,
) -> crate::Result<AgentResponse> {
    let inner = &agent.inner;
    let RunOptions {
        session,
        function_invocation_kwargs,
        client_kwargs,
        middleware: run_mw,
        tools,
        options,
        extensions,
        updates,
    } = opts;
    let ctx = AgentContext {
        agent_name: inner.name.clone(),
        messages: input,
        session,
        options: inner.default_options.merged(&options),
        tools,
        function_invocation_kwargs,
        client_kwargs,
        extensions,
        result: None,
        stream: updates.is_some(),
        updates,
    };
    let chain = concat(&inner.middleware.agent, &run_mw.agent);
    let endpoint: Endpoint<AgentContext> = {
        let agent = agent.clone();
        let chat = concat(&inner.middleware.chat, &run_mw.chat);
        let function = concat(&inner.middleware.function, &run_mw.function);
        Arc::new(move |ctx| {
            Box::pin(run_loop(
                agent.clone(),
                Arc::clone(&chat),
                Arc::clone(&function),
                ctx,
            ))
        })
    };
    let ctx = Next::new(chain, endpoint).run(ctx).await?;
    // Agent middleware that skipped `next` must have set a result: an empty reply is never
    // made up (issue #14).
    let mut response = ctx
        .result
        .ok_or(Error::MissingResult(MiddlewareKind::Agent))?;
    if response.agent_name.is_none() {
        response.agent_name = inner.name.clone();
    }
    if let Some(session) = &ctx.session {
        session.append_messages(
            ctx.messages
                .iter()
                .cloned()
                .chain(response.messages.iter().cloned()),
        );
    }
    if let Some(sink) = &ctx.updates {
        sink.emit(AgentEventKind::RunCompleted(Box::new(response.clone())));
    }
    Ok(response)
}

struct CallEnv {
    kwargs: Kwargs,
    session: Option<AgentSession>,
    extensions: Extensions,
    updates: Option<UpdateSink>,
    chain: Arc<[Arc<dyn Middleware<FunctionInvocationContext>>]>,
    endpoint: Endpoint<FunctionInvocationContext>,
    detailed: bool,
}

fn chat_endpoint(client: Arc<dyn ChatClient>) -> Endpoint<ChatContext> {
    Arc::new(move |mut c: ChatContext| {
        let client = Arc::clone(&client);
        Box::pin(async move {
            let response = crate::stream::call_model(
                client.as_ref(),
                &c.messages,
                &c.options,
                &c.client_kwargs,
                c.updates.as_ref(),
            )
            .await?;
            c.result = Some(response);
            Ok(c)
        })
    })
}

fn function_endpoint() -> Endpoint<FunctionInvocationContext> {
    Arc::new(|mut ctx: FunctionInvocationContext| {
        Box::pin(async move {
            let tool = Arc::clone(&ctx.function);
            let outcome = AssertUnwindSafe(tool.invoke(&ctx)).catch_unwind().await;
            let name = ctx.tool_name().to_owned();
            ctx.result = Some(match outcome {
                Ok(Ok(out)) => out,
                Ok(Err(ToolError::InvalidArguments(msg))) => ToolOutput::error(format!(
                    "Error: Argument parsing failed for {name}: {msg}. Call {name} again with arguments that match its schema."
                )),
                Ok(Err(e)) => ToolOutput::error(format!("Error: {name} failed: {e}")),
                Err(panic) => {
                    let msg = panic
                        .downcast_ref::<&str>()
                        .map(|s| (*s).to_owned())
                        .or_else(|| panic.downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "unknown panic".to_owned());
                    ToolOutput::error(format!("Error: {name} crashed: {msg}"))
                }
            });
            Ok(ctx)
        })
    })
}

fn error_result(call_id: &str, text: String) -> FunctionResult {
    FunctionResult {
        call_id: call_id.to_owned(),
        output: vec![Content::text(text)],
        is_error: true,
    }
}

/// Runs one tool call through function middleware. Returns the result and whether the loop
/// must stop.
async fn invoke_call(
    call: FunctionCall,
    router: &ToolRouter,
    env: &CallEnv,
    turn_calls: &Arc<[FunctionCall]>,
) -> crate::Result<(FunctionResult, bool)> {
    let span = telemetry::tool_span(&call, router);
    let outcome = invoke_call_traced(call, router, env, turn_calls)
        .instrument(span.clone())
        .await;
    telemetry::record_tool(&span, &outcome);
    outcome
}

async fn invoke_call_traced(
    call: FunctionCall,
    router: &ToolRouter,
    env: &CallEnv,
    turn_calls: &Arc<[FunctionCall]>,
) -> crate::Result<(FunctionResult, bool)> {
    let Some(tool) = router.get(&call.name) else {
        let names: Vec<&str> = router.specs().iter().map(|s| s.name.as_str()).collect();
        let text = if names.is_empty() {
            format!(
                "Error: Requested function \"{}\" not found: no tools are available. Answer without calling a tool.",
                call.name
            )
        } else {
            format!(
                "Error: Requested function \"{}\" not found. Available tools: {}.",
                call.name,
                names.join(", ")
            )
        };
        return Ok((error_result(&call.call_id, text), false));
    };
    let raw = call.arguments.trim();
    let arguments = if raw.is_empty() {
        Value::Object(Default::default())
    } else {
        match serde_json::from_str::<Value>(raw) {
            Ok(v @ Value::Object(_)) => v,
            Ok(Value::Null) => Value::Object(Default::default()),
            Ok(other) => {
                let text = format!(
                    "Error: Argument parsing failed for {}: expected a JSON object, got {}. Call {} again with a JSON object that matches its schema.",
                    call.name,
                    kind_of(&other),
                    call.name
                );
                return Ok((error_result(&call.call_id, text), false));
            }
            Err(e) => {
                let text = format!(
                    "Error: Argument parsing failed for {}: the arguments are not valid JSON ({e}). Call {} again with a JSON object that matches its schema.",
                    call.name, call.name
                );
                return Ok((error_result(&call.call_id, text), false));
            }
        }
    };
    let ctx = FunctionInvocationContext {
        function: Arc::clone(tool),
        call_id: call.call_id.clone(),
        arguments,
        kwargs: env.kwargs.clone(),
        session: env.session.clone(),
        result: None,
        extensions: env.extensions.clone(),
        terminate: false,
        updates: env.updates.clone(),
        turn_calls: Arc::clone(turn_calls),
    };
    let ctx = Next::new(Arc::clone(&env.chain), Arc::clone(&env.endpoint))
        .run(ctx)
        .await?;
    let out = ctx
        .result
        .ok_or(Error::MissingResult(MiddlewareKind::Function))?;
    let output = if out.is_error && !env.detailed {
        vec![Content::text("Error: Function failed.")]
    } else {
        out.parts
    };
    let result = FunctionResult {
        call_id: call.call_id,
        output,
        is_error: out.is_error,
    };
    if let Some(sink) = &env.updates {
        sink.emit(AgentEventKind::ToolResult(result.clone()));
    }
    Ok((result, ctx.terminate))
}

type CallOutcome = crate::Result<(FunctionResult, bool)>;

/// Runs the calls of one model turn and returns their outcomes in the calls' order.
///
/// With `concurrent` the calls run together, gated by each tool's [`Concurrency`]: an
/// `Exclusive` call waits for the calls listed before it and holds back those listed after
/// it (a fair read/write lock taken in the model's order), and a `Limited(n)` tool has at
/// most `n` of its calls running at once. Without `concurrent` they run one after another.
async fn run_batch(
    calls: &Arc<[FunctionCall]>,
    router: &ToolRouter,
    env: &CallEnv,
    concurrent: bool,
) -> Vec<CallOutcome> {
    if !concurrent || calls.len() < 2 {
        let mut v = Vec::with_capacity(calls.len());
        for c in calls.iter() {
            v.push(invoke_call(c.clone(), router, env, calls).await);
        }
        return v;
    }
    let concurrency = |c: &FunctionCall| {
        router
            .get(&c.name)
            .map_or(Concurrency::Parallel, |t| t.spec().concurrency)
    };
    if calls.iter().all(|c| concurrency(c).is_parallel()) {
        return futures::future::join_all(
            calls
                .iter()
                .map(|c| invoke_call(c.clone(), router, env, calls)),
        )
        .await;
    }
    let gate = tokio::sync::RwLock::new(());
    let mut limits: std::collections::HashMap<&str, tokio::sync::Semaphore> =
        std::collections::HashMap::new();
    for c in calls.iter() {
        if let Concurrency::Limited(n) = concurrency(c) {
            limits
                .entry(c.name.as_str())
                .or_insert_with(|| tokio::sync::Semaphore::new(n.get()));
        }
    }
    let (gate, limits) = (&gate, &limits);
    futures::future::join_all(calls.iter().map(|c| async move {
        if concurrency(c) == Concurrency::Exclusive {
            let _alone = gate.write().await;
            return invoke_call(c.clone(), router, env, calls).await;
        }
        let _shared = gate.read().await;
        let _permit = match limits.get(c.name.as_str()) {
            Some(limit) => limit.acquire().await.ok(),
            None => None,
        };
        invoke_call(c.clone(), router, env, calls).await
    }))
    .await
}

/// Gives every function call of one model reply its own id, in place, so each call is
/// executed and answered under an id no other call of the reply shares.
///
/// Models sometimes repeat an id (two `call_1`s) or leave it empty. Answering both calls under
/// one id would make the next request ambiguous (providers reject it, or pair the wrong
/// result with a call). The first call keeps its id; a later duplicate `id` becomes `id_2`
/// (`id_3`, … — the first suffix no call of the reply uses) and an empty id becomes
/// `call_<n>` (`n` the call's 1-based position in the reply). The renamed id is what the
/// history keeps in the assistant message and what its result answers, so the conversation
/// sent next is consistent. (Streamed `ToolCallStart` updates, emitted while the reply was
/// still arriving, carry the id as the model sent it.)
fn unique_call_ids(produced: &mut [Message]) {
    let ids: Vec<&str> = produced
        .iter()
        .flat_map(Message::function_calls)
        .map(|c| c.call_id.as_str())
        .collect();
    let mut seen: std::collections::HashSet<&str> = std::collections::HashSet::new();
    if ids.iter().all(|id| !id.is_empty() && seen.insert(id)) {
        return;
    }
    let mut taken: std::collections::HashSet<String> =
        ids.iter().map(|id| (*id).to_owned()).collect();
    let mut used: std::collections::HashSet<String> = std::collections::HashSet::new();
    let mut position = 0usize;
    for m in produced.iter_mut() {
        for c in &mut m.contents {
            let Content::FunctionCall(fc) = c else {
                continue;
            };
            position += 1;
            if !fc.call_id.is_empty() && used.insert(fc.call_id.clone()) {
                continue;
            }
            let base = if fc.call_id.is_empty() {
                "call".to_owned()
            } else {
                fc.call_id.clone()
            };
            let mut n = if fc.call_id.is_empty() { position } else { 2 };
            let mut candidate = format!("{base}_{n}");
            while taken.contains(&candidate) {
                n += 1;
                candidate = format!("{base}_{n}");
            }
            taken.insert(candidate.clone());
            used.insert(candidate.clone());
            fc.call_id = candidate;
        }
    }
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

async fn run_loop(
    agent: Agent,
    chat_chain: Arc<[Arc<dyn Middleware<ChatContext>>]>,
    function_chain: Arc<[Arc<dyn Middleware<FunctionInvocationContext>>]>,
    mut ctx: AgentContext,
) -> crate::Result<AgentContext> {
    let inner = &agent.inner;
    let config = &inner.config;
    let router = inner.router.merged(&ctx.tools);
    let specs = router.specs();

    // The conversation is shared with each model call's context without copying: a chat
    // middleware that edits `messages` gets its own copy (copy-on-write), so the stored
    // conversation is never rewritten by what one call sends.
    let mut conversation: Arc<Vec<Message>> = Arc::new(match &ctx.session {
        Some(s) => s.messages(),
        None => Vec::new(),
    });
    Arc::make_mut(&mut conversation).extend(ctx.messages.iter().cloned());
    let produced_from = conversation.len();

    let env = CallEnv {
        kwargs: ctx.function_invocation_kwargs.clone(),
        session: ctx.session.clone(),
        extensions: ctx.extensions.clone(),
        updates: ctx.updates.clone(),
        chain: function_chain,
        endpoint: function_endpoint(),
        detailed: config.include_detailed_errors,
    };
    let endpoint = chat_endpoint(Arc::clone(&inner.client));

    let mut response = AgentResponse {
        agent_name: inner.name.clone(),
        ..Default::default()
    };
    let mut iteration = 0usize;
    let mut consecutive_errors = 0usize;
    let mut function_calls = 0usize;
    let mut force_final = false;

    loop {
        let final_call = force_final || iteration >= config.max_iterations || specs.is_empty();
        let mut options = ctx.options.clone();
        if !specs.is_empty() {
            options.tools = specs.to_vec();
            if final_call {
                options.tool_choice = Some(ToolChoice::None);
            } else if iteration > 0 && options.tool_choice == Some(ToolChoice::Required) {
                options.tool_choice = Some(ToolChoice::Auto);
            }
        }
        let chat_ctx = ChatContext {
            agent_name: inner.name.clone(),
            messages: Arc::clone(&conversation),
            options,
            client_kwargs: ctx.client_kwargs.clone(),
            session: ctx.session.clone(),
            extensions: ctx.extensions.clone(),
            result: None,
            terminate: false,
            iteration,
            updates: ctx.updates.clone(),
        };
        let span = telemetry::chat_span(inner.name.as_deref(), &chat_ctx.options, &inner.client);
        let chat_ctx = Next::new(Arc::clone(&chat_chain), Arc::clone(&endpoint))
            .run(chat_ctx)
            .instrument(span.clone())
            .await;
        telemetry::record_chat(&span, &chat_ctx);
        let chat_ctx = chat_ctx?;
        response.model_calls += 1;
        let ChatResponse {
            messages: mut produced,
            finish_reason,
            usage,
            response_id,
            ..
        } = chat_ctx
            .result
            .ok_or(Error::MissingResult(MiddlewareKind::Chat))?;
        // Drop the call's handle on the conversation before appending to it, so the append
        // does not copy it.
        let stop_requested = chat_ctx.terminate;
        drop(chat_ctx.messages);
        if let Some(u) = usage {
            response.usage.add(&u);
        }
        response.finish_reason = finish_reason;
        if response_id.is_some() {
            response.response_id = response_id;
        }
        for m in &mut produced {
            if m.author_name.is_none() {
                m.author_name = inner.name.clone();
            }
        }
        unique_call_ids(&mut produced);
        let calls: Arc<[FunctionCall]> = produced
            .iter()
            .flat_map(Message::function_calls)
            .cloned()
            .collect();
        if final_call && !specs.is_empty() {
            // The model was told not to call tools; calls it made anyway are dropped so the
            // history never holds a call without a result.
            for m in &mut produced {
                m.contents
                    .retain(|c| !matches!(c, Content::FunctionCall(_)));
            }
            produced.retain(|m| !m.contents.is_empty());
            let has_text = produced.iter().any(|m| !m.text().trim().is_empty());
            if !has_text && (force_final || iteration >= config.max_iterations) {
                produced.push(Message::assistant(LIMIT_REACHED_TEXT));
            }
        }
        Arc::make_mut(&mut conversation).extend(produced);
        if stop_requested {
            response.terminated = true;
            break;
        }
        if calls.is_empty() || final_call {
            break;
        }

        let results = run_batch(&calls, &router, &env, config.concurrent_tool_calls).await;
        let mut any_error = false;
        let mut terminate = false;
        for r in results {
            let (result, stop) = r?;
            any_error |= result.is_error;
            terminate |= stop;
            function_calls += 1;
            Arc::make_mut(&mut conversation).push(Message::tool_result(result));
        }
        if terminate {
            response.terminated = true;
            break;
        }
        if any_error {
            consecutive_errors += 1;
            if consecutive_errors >= config.max_consecutive_errors {
                force_final = true;
            }
        } else {
            consecutive_errors = 0;
        }
        if config
            .max_function_calls
            .is_some_and(|max| function_calls >= max)
        {
            force_final = true;
        }
        iteration += 1;
    }
    response.messages = match Arc::try_unwrap(conversation) {
        Ok(mut all) => all.split_off(produced_from),
        Err(shared) => shared[produced_from..].to_vec(),
    };
    ctx.result = Some(response);
    Ok(ctx)
}

/// Builds the tool form of an agent (SPEC R4). See [`Agent::as_tool`].
#[must_use]
pub struct AgentToolBuilder {
    agent: Agent,
    name: Option<String>,
    description: Option<String>,
    arg_name: String,
    arg_description: Option<String>,
    propagate_session: bool,
    approval_mode: crate::tool::ApprovalMode,
}

impl AgentToolBuilder {
    /// The tool name (default: the agent's name, sanitized).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }
    /// The tool description (default: the agent's description).
    pub fn description(mut self, d: impl Into<String>) -> Self {
        self.description = Some(d.into());
        self
    }
    /// The name of the one string argument (default `task`).
    pub fn arg_name(mut self, n: impl Into<String>) -> Self {
        self.arg_name = n.into();
        self
    }
    /// The argument's description (default `Task for <tool name>`).
    pub fn arg_description(mut self, d: impl Into<String>) -> Self {
        self.arg_description = Some(d.into());
        self
    }
    /// `true`: the sub-agent shares the caller's session state; `false` (default): it gets a
    /// session of its own.
    pub fn propagate_session(mut self, yes: bool) -> Self {
        self.propagate_session = yes;
        self
    }
    /// Whether calls need approval.
    pub fn approval_mode(mut self, mode: crate::tool::ApprovalMode) -> Self {
        self.approval_mode = mode;
        self
    }
    /// The tool.
    pub fn build(self) -> AgentTool {
        let name = crate::tool::sanitize_tool_name(
            self.name
                .as_deref()
                .or(self.agent.name())
                .unwrap_or("agent"),
        );
        let arg_description = self
            .arg_description
            .unwrap_or_else(|| format!("Task for {name}"));
        let parameters = serde_json::json!({
            "type": "object",
            "properties": { &self.arg_name: { "type": "string", "description": arg_description } },
            "required": [&self.arg_name],
            "additionalProperties": false,
        });
        let mut spec = ToolSpec::new(
            name,
            self.description
                .or_else(|| self.agent.description().map(str::to_owned))
                .unwrap_or_default(),
            parameters,
        );
        spec.approval_mode = self.approval_mode;
        AgentTool {
            spec,
            agent: self.agent,
            arg_name: self.arg_name,
            propagate_session: self.propagate_session,
        }
    }
}

impl IntoTool for AgentToolBuilder {
    fn into_tool(self) -> SharedTool {
        Arc::new(self.build())
    }
}

/// An agent exposed as a tool.
pub struct AgentTool {
    spec: ToolSpec,
    agent: Agent,
    arg_name: String,
    propagate_session: bool,
}

impl crate::tool::Tool for AgentTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn invoke<'a>(
        &'a self,
        ctx: &'a FunctionInvocationContext,
    ) -> crate::client::BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            let task = ctx
                .arguments
                .get(&self.arg_name)
                .and_then(Value::as_str)
                .ok_or_else(|| {
                    ToolError::InvalidArguments(format!(
                        "missing string argument `{}`",
                        self.arg_name
                    ))
                })?;
            let session = if self.propagate_session {
                ctx.session
                    .as_ref()
                    .map(AgentSession::sharing_state)
                    .unwrap_or_default()
            } else {
                AgentSession::new()
            };
            let mut req = self
                .agent
                .run(task)
                .session(&session)
                .function_invocation_kwargs(ctx.kwargs.clone())
                .extensions(&ctx.extensions);
            if let Some(sink) = &ctx.updates {
                req = req.updates(
                    sink.nested(self.spec.name.clone(), self.agent.name().map(str::to_owned)),
                );
            }
            let response = req.await.map_err(|e| ToolError::failed(e.to_string()))?;
            Ok(ToolOutput::text(response.text()))
        })
    }
}

impl Agent {
    /// The tool form of this agent (SPEC R4): one required string argument (`task` unless
    /// renamed); the caller's function-invocation kwargs and extensions flow into the
    /// sub-agent's run, at any depth of delegation.
    pub fn as_tool(&self) -> AgentToolBuilder {
        AgentToolBuilder {
            agent: self.clone(),
            name: None,
            description: None,
            arg_name: "task".into(),
            arg_description: None,
            propagate_session: false,
            approval_mode: Default::default(),
        }
    }
}

impl From<AnyMiddleware> for MiddlewareSet {
    fn from(m: AnyMiddleware) -> Self {
        let mut s = MiddlewareSet::default();
        s.push(m);
        s
    }
}

impl From<Error> for ToolError {
    fn from(e: Error) -> Self {
        ToolError::failed(e)
    }
}

/// Spans with `tracing` around each run, model call and tool call, named and with fields after
/// OpenTelemetry's GenAI semantic conventions, so an OpenTelemetry layer exports them as they
/// are: `invoke_agent {agent}` › `chat {model}` and `execute_tool {tool}`.
///
/// tracing span names are static, so each span is named by its operation (`invoke_agent`,
/// `chat`, `execute_tool`) and carries the convention's full name in `otel.name`, which
/// `tracing-opentelemetry` uses as the exported name. Fields: `gen_ai.operation.name`,
/// `gen_ai.agent.name`, `gen_ai.request.model`, `gen_ai.tool.name`, `gen_ai.tool.call.id`,
/// `gen_ai.tool.type`, `gen_ai.usage.input_tokens` / `output_tokens` (recorded when the
/// response reports usage; a run's are its calls' sums), `gen_ai.response.id`, and
/// `error.type` on failure (a tool call whose result is an `Error: …` has
/// `error.type = "tool_error"`). Spans are at INFO level; with no subscriber interested,
/// making one is a check of a static flag and nothing is formatted. Content (messages,
/// arguments, results) is never recorded.
mod telemetry {
    use std::sync::Arc;

    use tracing::Span;
    use tracing::field::Empty;

    use crate::agent::AgentResponse;
    use crate::client::{ChatClient, ChatOptions};
    use crate::context::ChatContext;
    use crate::error::Error;
    use crate::message::{FunctionCall, FunctionResult, Usage};
    use crate::tool::ToolRouter;

    pub(super) fn agent_span(agent: Option<&str>, model: Option<&str>) -> Span {
        let span = tracing::info_span!(
            "invoke_agent",
            otel.name = Empty,
            gen_ai.operation.name = "invoke_agent",
            gen_ai.agent.name = Empty,
            gen_ai.request.model = Empty,
            gen_ai.usage.input_tokens = Empty,
            gen_ai.usage.output_tokens = Empty,
            error.type = Empty,
        );
        if !span.is_disabled() {
            match agent {
                Some(name) => {
                    span.record("otel.name", format!("invoke_agent {name}"));
                    span.record("gen_ai.agent.name", name);
                }
                None => {
                    span.record("otel.name", "invoke_agent");
                }
            }
            if let Some(model) = model {
                span.record("gen_ai.request.model", model);
            }
        }
        span
    }

    pub(super) fn chat_span(
        agent: Option<&str>,
        options: &ChatOptions,
        client: &Arc<dyn ChatClient>,
    ) -> Span {
        let span = tracing::info_span!(
            "chat",
            otel.name = Empty,
            gen_ai.operation.name = "chat",
            gen_ai.agent.name = Empty,
            gen_ai.request.model = Empty,
            gen_ai.response.id = Empty,
            gen_ai.usage.input_tokens = Empty,
            gen_ai.usage.output_tokens = Empty,
            error.type = Empty,
        );
        if !span.is_disabled() {
            let model = options.model.clone().unwrap_or_else(|| client.describe());
            span.record("otel.name", format!("chat {model}"));
            span.record("gen_ai.request.model", model);
            if let Some(agent) = agent {
                span.record("gen_ai.agent.name", agent);
            }
        }
        span
    }

    pub(super) fn tool_span(call: &FunctionCall, router: &ToolRouter) -> Span {
        let span = tracing::info_span!(
            "execute_tool",
            otel.name = Empty,
            gen_ai.operation.name = "execute_tool",
            gen_ai.tool.name = Empty,
            gen_ai.tool.call.id = Empty,
            gen_ai.tool.type = "function",
            gen_ai.tool.description = Empty,
            error.type = Empty,
        );
        if !span.is_disabled() {
            span.record("otel.name", format!("execute_tool {}", call.name));
            span.record("gen_ai.tool.name", call.name.as_str());
            span.record("gen_ai.tool.call.id", call.call_id.as_str());
            if let Some(tool) = router.get(&call.name) {
                span.record("gen_ai.tool.description", tool.spec().description.as_str());
            }
        }
        span
    }

    fn record_usage(span: &Span, usage: &Usage) {
        span.record("gen_ai.usage.input_tokens", usage.input_tokens);
        span.record("gen_ai.usage.output_tokens", usage.output_tokens);
    }

    /// A low-cardinality name for what failed (`error.type`).
    pub(super) fn error_type(e: &Error) -> &'static str {
        match e {
            Error::Chat(c) if c.is_context_overflow() => "context_overflow",
            Error::Chat(_) => "chat_error",
            Error::Middleware(_) => "middleware_error",
            Error::MissingResult(_) => "middleware_error",
            Error::InvalidInput(_) => "invalid_input",
            Error::Cancelled => "cancelled",
            Error::Serde(_) => "serialization_error",
            Error::Internal(_) => "internal_error",
        }
    }

    pub(super) fn record_run(span: &Span, result: &crate::Result<AgentResponse>) {
        if span.is_disabled() {
            return;
        }
        match result {
            Ok(r) => {
                if r.usage != Usage::default() {
                    record_usage(span, &r.usage);
                }
            }
            Err(e) => {
                span.record("error.type", error_type(e));
            }
        }
    }

    pub(super) fn record_chat(span: &Span, result: &crate::Result<ChatContext>) {
        if span.is_disabled() {
            return;
        }
        match result {
            Ok(ctx) => {
                if let Some(r) = &ctx.result {
                    if let Some(u) = &r.usage {
                        record_usage(span, u);
                    }
                    if let Some(id) = &r.response_id {
                        span.record("gen_ai.response.id", id.as_str());
                    }
                }
            }
            Err(e) => {
                span.record("error.type", error_type(e));
            }
        }
    }

    pub(super) fn record_tool(span: &Span, result: &crate::Result<(FunctionResult, bool)>) {
        if span.is_disabled() {
            return;
        }
        match result {
            Ok((r, _)) if r.is_error => {
                span.record("error.type", "tool_error");
            }
            Ok(_) => {}
            Err(e) => {
                span.record("error.type", error_type(e));
            }
        }
    }
}
