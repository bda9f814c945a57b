//! Subagents and the `task` tool (SPEC R8).
//!
//! `task(description, subagent_type)` runs a subagent on `description` in a fresh context,
//! autonomously, and returns its final report (the last non-empty assistant text) as the tool
//! result; the caller's context receives only that report. Several `task` calls in one turn run
//! in parallel (the agent loop runs a turn's calls concurrently).
//!
//! # What a subagent shares with its caller
//! - **Runtime context, store and other extensions**: the same values (SPEC R6.3), and the same
//!   function-invocation kwargs, except that values registered for this subagent in a
//!   [`SubagentContext`](crate::runtime::SubagentContext) replace the caller's, values
//!   registered for other subagents are left out, and
//!   [`SubagentName`](crate::runtime::SubagentName) names the subagent (SPEC R8.2; see
//!   [`runtime`](crate::runtime#per-subagent-context-spec-r82)).
//! - **Session state**: the subagent gets a session of its own whose state starts as a copy of
//!   the caller's, minus private keys (the todo list and the harness caches). When it finishes,
//!   what it changed is merged back key by key (and entry by entry inside JSON objects, so two
//!   parallel subagents writing different files of a [`StateBackend`](crate::StateBackend) both
//!   land). Files on shared backends (a directory, a store) are visible at once.
//! - **History**: none. The subagent starts from the task description alone.
//!
//! # Nesting
//! Subagents get their own `task` tool while their depth is below the builder's
//! `max_subagent_depth` (default 1: subagents do not delegate further, as in the Python
//! reference; raise it to allow deeper delegation).
//!
//! # Limits
//! One model reply can hold hundreds of `task` calls, so a run's subagents are bounded as a
//! whole ([`SubagentLimits`], set on the builder with
//! [`max_concurrent_subagents`](crate::DeepAgentBuilder::max_concurrent_subagents) and
//! [`max_subagent_model_calls`](crate::DeepAgentBuilder::max_subagent_model_calls)). The state
//! is created once per run of the top agent and reaches every subagent, nested ones included,
//! through the run's extensions:
//! - **Concurrency**: a semaphore of `max_concurrent` permits (default
//!   [`DEFAULT_MAX_CONCURRENT_SUBAGENTS`]). A subagent holds a permit while it works; further
//!   `task` calls wait for one. A subagent that is itself waiting for its own nested `task`
//!   calls lends its permit back while it waits (and takes one again before it goes on), so
//!   nesting cannot deadlock: at most `max_concurrent` subagents are *active* at once, and
//!   the waiting ones are bounded by the nesting depth.
//! - **Model calls**: a budget of `max_model_calls` model calls for all subagents of the run
//!   together (default [`DEFAULT_MODEL_CALLS_PER_ITERATION`] × the top agent's
//!   `max_iterations`). Every model call of a subagent takes one; the top agent's own calls are
//!   bounded by its `max_iterations` and are not counted. When the budget is spent, a running
//!   subagent's next model call fails and the subagent stops (what it wrote is kept), and every
//!   further `task` call returns an `Error: …` result saying so at once. A run therefore makes
//!   at most `max_iterations + 1 + max_model_calls` model calls in all.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use cairn_core::{
    Agent, AgentContext, AgentSession, AnyMiddleware, BoxFuture, ChatContext,
    FunctionInvocationContext, IntoMiddleware, Middleware, Next, SharedTool, SubRun, Tool,
    ToolError, ToolOutput, ToolSpec,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::model::ModelChoice;

/// The name of the default subagent.
pub const GENERAL_PURPOSE: &str = "general-purpose";

/// What the general-purpose subagent is told.
pub const GENERAL_PURPOSE_PROMPT: &str = "You are a subagent working on one delegated task. \
Complete it autonomously with your tools. Your final message is the only thing the caller will \
see: make it a complete, self-contained report of what you found or did, with file paths for \
anything you wrote.";

const GENERAL_PURPOSE_DESCRIPTION: &str =
    "Has your tools; for multi-step work or research whose details you need not keep.";

/// A named subagent the `task` tool can launch.
#[derive(Clone, Default)]
pub struct SubAgent {
    /// Its name (the `subagent_type` the model passes).
    pub name: String,
    /// When to use it (shown in the `task` tool's description).
    pub description: String,
    /// Its system prompt.
    pub system_prompt: String,
    /// Its model; the caller's when unset.
    pub model: Option<ModelChoice>,
    /// Its own tools; the caller's user tools when unset. The harness's file tools are added.
    pub tools: Option<Vec<SharedTool>>,
    /// Its skill sources (not inherited).
    pub skills: Vec<String>,
    /// Its own middleware (for example the MCP servers only it uses), inside the
    /// inherited middleware of the agent that launches it.
    pub middleware: Vec<AnyMiddleware>,
}

impl SubAgent {
    /// A subagent with a name and a description.
    pub fn new(name: impl Into<String>, description: impl Into<String>) -> Self {
        SubAgent {
            name: name.into(),
            description: description.into(),
            ..Default::default()
        }
    }

    /// Sets the system prompt.
    pub fn system_prompt(mut self, p: impl Into<String>) -> Self {
        self.system_prompt = p.into();
        self
    }

    /// Sets the model (a client or a `provider:model` string).
    pub fn model(mut self, m: impl Into<ModelChoice>) -> Self {
        self.model = Some(m.into());
        self
    }

    /// Sets the tools (instead of inheriting the caller's user tools).
    pub fn tools(mut self, tools: impl IntoIterator<Item = SharedTool>) -> Self {
        self.tools = Some(tools.into_iter().collect());
        self
    }

    /// Adds a skill source.
    pub fn skill_source(mut self, path: impl Into<String>) -> Self {
        self.skills.push(path.into());
        self
    }

    /// Adds middleware of its own: agent middleware that adds tools to its runs (an MCP
    /// tool set) gives it tools the caller does not have.
    pub fn middleware<M>(mut self, mw: impl IntoMiddleware<M>) -> Self {
        self.middleware.push(mw.into_middleware());
        self
    }

    pub(crate) fn general_purpose() -> Self {
        SubAgent {
            name: GENERAL_PURPOSE.into(),
            description: GENERAL_PURPOSE_DESCRIPTION.into(),
            system_prompt: GENERAL_PURPOSE_PROMPT.into(),
            ..Default::default()
        }
    }
}

impl std::fmt::Debug for SubAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SubAgent")
            .field("name", &self.name)
            .field("description", &self.description)
            .finish_non_exhaustive()
    }
}

/// Whether a session-state key stays with its agent (never copied into nor merged back from
/// a subagent).
pub fn is_private_state_key(key: &str) -> bool {
    key == crate::tools::todo::TODOS_KEY || key.starts_with("cairn.") || key.starts_with('_')
}

/// Merges what a subagent changed (`after` vs `before`) into `target`.
///
/// Keys the subagent left alone are untouched. A JSON object the subagent changed is merged
/// entry by entry (entries it added or changed are written, entries it removed are removed), so
/// parallel subagents writing different files both land. Other changed values are replaced.
fn merge_changes(
    target: &mut Map<String, Value>,
    before: &Map<String, Value>,
    after: &Map<String, Value>,
) {
    let empty = Map::new();
    for (k, new) in after {
        if is_private_state_key(k) || before.get(k) == Some(new) {
            continue;
        }
        let old_obj = match before.get(k) {
            Some(Value::Object(o)) => Some(o),
            None => Some(&empty),
            Some(_) => None,
        };
        match (old_obj, new, target.get_mut(k)) {
            (Some(old), Value::Object(new_obj), Some(Value::Object(t))) => {
                for (sk, sv) in new_obj {
                    if old.get(sk) != Some(sv) {
                        t.insert(sk.clone(), sv.clone());
                    }
                }
                for sk in old.keys() {
                    if !new_obj.contains_key(sk) {
                        t.remove(sk);
                    }
                }
            }
            _ => {
                target.insert(k.clone(), new.clone());
            }
        }
    }
    for k in before.keys() {
        if !after.contains_key(k) && !is_private_state_key(k) {
            target.remove(k);
        }
    }
}

#[derive(Deserialize, JsonSchema)]
struct TaskArgs {
    /// The complete task: everything the subagent needs to know, and what its report must contain.
    description: String,
    /// Which subagent to use.
    subagent_type: String,
}

/// Default for [`SubagentLimits::max_concurrent`].
pub const DEFAULT_MAX_CONCURRENT_SUBAGENTS: usize = 4;

/// The default budget of subagent model calls per run is this many times the top agent's
/// `max_iterations` (400 for the default 40).
pub const DEFAULT_MODEL_CALLS_PER_ITERATION: usize = 10;

/// Bounds on all subagents of one run, nested ones included (see [Limits](self#limits)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubagentLimits {
    /// The most subagents working at once (at least 1).
    pub max_concurrent: usize,
    /// The most model calls all subagents of a run may make together.
    pub max_model_calls: usize,
}

impl SubagentLimits {
    /// The defaults for a top agent with `max_iterations`: [`DEFAULT_MAX_CONCURRENT_SUBAGENTS`]
    /// at once, [`DEFAULT_MODEL_CALLS_PER_ITERATION`] × `max_iterations` model calls.
    pub fn for_iterations(max_iterations: usize) -> Self {
        SubagentLimits {
            max_concurrent: DEFAULT_MAX_CONCURRENT_SUBAGENTS,
            max_model_calls: max_iterations.saturating_mul(DEFAULT_MODEL_CALLS_PER_ITERATION),
        }
    }
}

impl Default for SubagentLimits {
    fn default() -> Self {
        Self::for_iterations(cairn_core::LoopConfig::default().max_iterations)
    }
}

/// What `task` and a stopped subagent say once the budget is spent.
const BUDGET_SPENT: &str = "the subagents of this run have used up their budget of";

/// The subagent limits of one run: the permits and the model-call budget, shared by every
/// subagent of the run through its extensions.
struct RunLimits {
    limits: SubagentLimits,
    permits: Arc<Semaphore>,
    calls: AtomicUsize,
}

impl RunLimits {
    fn new(limits: SubagentLimits) -> Arc<Self> {
        Arc::new(RunLimits {
            limits,
            permits: Arc::new(Semaphore::new(limits.max_concurrent.max(1))),
            calls: AtomicUsize::new(0),
        })
    }

    /// Takes one model call from the budget; false when it is spent.
    fn take_call(&self) -> bool {
        let max = self.limits.max_model_calls;
        self.calls
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .is_ok()
    }

    fn spent(&self) -> bool {
        self.calls.load(Ordering::Acquire) >= self.limits.max_model_calls
    }

    fn spent_message(&self) -> String {
        format!("{BUDGET_SPENT} {} model calls", self.limits.max_model_calls)
    }
}

/// Agent middleware of the top agent: gives each run its own [`RunLimits`] (kept when the run
/// already carries one, e.g. a deep agent run as a tool of another).
pub(crate) struct RunLimitsSetup(pub(crate) SubagentLimits);

impl Middleware<AgentContext> for RunLimitsSetup {
    fn process(
        &self,
        mut ctx: AgentContext,
        next: Next<AgentContext>,
    ) -> BoxFuture<'static, cairn_core::Result<AgentContext>> {
        if ctx.extensions.get::<RunLimits>().is_none() {
            ctx.extensions.insert_arc(RunLimits::new(self.0));
        }
        next.run(ctx)
    }
}

/// Chat middleware of subagents: each model call takes one from the run's budget; when it is
/// spent the call fails, which stops the subagent.
pub(crate) struct SubagentCallBudget;

impl Middleware<ChatContext> for SubagentCallBudget {
    fn process(
        &self,
        ctx: ChatContext,
        next: Next<ChatContext>,
    ) -> BoxFuture<'static, cairn_core::Result<ChatContext>> {
        if let Some(limits) = ctx.extensions.get::<RunLimits>()
            && !limits.take_call()
        {
            let message = limits.spent_message();
            return Box::pin(async move { Err(cairn_core::Error::middleware(message)) });
        }
        next.run(ctx)
    }
}

/// The permit of one running subagent, in its run's extensions so its own `task` calls can
/// lend the permit back while they wait.
struct SubagentSlot {
    limits: Arc<RunLimits>,
    state: Mutex<SlotState>,
}

struct SlotState {
    permit: Option<OwnedSemaphorePermit>,
    /// Nested `task` calls of this subagent in progress.
    waiting: usize,
}

impl SubagentSlot {
    fn lock(&self) -> std::sync::MutexGuard<'_, SlotState> {
        // Each critical section only swaps a permit or a counter: a poisoned state is usable.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Gives the permit back for good (the subagent finished).
    fn release(&self) {
        self.lock().permit = None;
    }
}

/// A nested `task` call in progress: its caller's permit is lent back until the last of its
/// nested calls ends.
struct Suspension(Option<Arc<SubagentSlot>>);

impl Suspension {
    fn new(slot: Arc<SubagentSlot>) -> Self {
        let mut s = slot.lock();
        s.waiting += 1;
        s.permit = None;
        drop(s);
        Suspension(Some(slot))
    }

    /// Ends the wait; the last nested call to end takes a permit again for the caller.
    async fn resume(mut self) {
        let Some(slot) = self.0.take() else { return };
        {
            let mut s = slot.lock();
            s.waiting -= 1;
            if s.waiting > 0 || s.permit.is_some() {
                return;
            }
        }
        let Ok(permit) = Arc::clone(&slot.limits.permits).acquire_owned().await else {
            return;
        };
        let mut s = slot.lock();
        // Another nested call may have started meanwhile: then the caller still waits.
        if s.waiting == 0 && s.permit.is_none() {
            s.permit = Some(permit);
        }
    }
}

impl Drop for Suspension {
    fn drop(&mut self) {
        // Cancelled before `resume`: only the count is restored.
        if let Some(slot) = self.0.take() {
            slot.lock().waiting -= 1;
        }
    }
}

/// The `task` tool.
pub struct TaskTool {
    spec: ToolSpec,
    agents: BTreeMap<String, Agent>,
    /// Used by runs that carry no limits of their own (a `TaskTool` on a plain agent without
    /// the deep agent's setup): then the bounds hold per tool instead of per run.
    fallback: Arc<RunLimits>,
}

impl TaskTool {
    /// A `task` tool over named, already built subagents (`(name, description, agent)`).
    pub fn new(agents: Vec<(String, String, Agent)>) -> Self {
        let mut list = String::new();
        for (name, description, _) in &agents {
            list.push_str(&format!("\n- {name}: {description}"));
        }
        let description = format!(
            "Run a subagent in a fresh context; it returns one final report. Subagents:{list}"
        );
        let spec = ToolSpec::new(
            "task",
            description,
            cairn_core::schema::schema_for::<TaskArgs>(),
        );
        TaskTool {
            spec,
            agents: agents.into_iter().map(|(n, _, a)| (n, a)).collect(),
            fallback: RunLimits::new(SubagentLimits::default()),
        }
    }

    /// The limits used when a run carries none of its own (a `TaskTool` on a plain agent; a
    /// deep agent gives each run its own). Only subagents built by
    /// [`DeepAgent`](crate::DeepAgent) count their model calls.
    pub fn with_limits(mut self, limits: SubagentLimits) -> Self {
        self.fallback = RunLimits::new(limits);
        self
    }

    /// The names of the subagents it can launch.
    pub fn subagent_names(&self) -> impl Iterator<Item = &str> {
        self.agents.keys().map(String::as_str)
    }

    async fn run(&self, ctx: &FunctionInvocationContext) -> Result<ToolOutput, ToolError> {
        let args: TaskArgs = ctx.parse_arguments()?;
        let Some(agent) = self.agents.get(&args.subagent_type) else {
            let allowed: Vec<&str> = self.agents.keys().map(String::as_str).collect();
            return Ok(ToolOutput::error(format!(
                "Error: there is no subagent type \"{}\". Use one of: {}.",
                args.subagent_type,
                allowed.join(", ")
            )));
        };
        let limits = ctx
            .extensions
            .get_arc::<RunLimits>()
            .unwrap_or_else(|| Arc::clone(&self.fallback));
        let spent = |limits: &RunLimits| {
            ToolOutput::error(format!(
                "Error: {}; no more subagents can run. Do the rest yourself with your own tools, or answer with what you have.",
                limits.spent_message()
            ))
        };
        if limits.spent() {
            return Ok(spent(&limits));
        }
        // A subagent calling `task` lends its own permit back while it waits for this one.
        let suspension = ctx
            .extensions
            .get_arc::<SubagentSlot>()
            .map(Suspension::new);
        let Ok(permit) = Arc::clone(&limits.permits).acquire_owned().await else {
            return Err(ToolError::failed("the subagent limits are closed"));
        };
        if limits.spent() {
            drop(permit);
            if let Some(s) = suspension {
                s.resume().await;
            }
            return Ok(spent(&limits));
        }
        let slot = Arc::new(SubagentSlot {
            limits: Arc::clone(&limits),
            state: Mutex::new(SlotState {
                permit: Some(permit),
                waiting: 0,
            }),
        });
        let mut extensions = ctx.extensions.clone();
        let delegates = agent.tools().iter().any(|t| t.spec().name == "task");
        crate::runtime::SubagentContext::scope(&mut extensions, &args.subagent_type, delegates);
        extensions.insert_arc(Arc::clone(&limits));
        extensions.insert_arc(Arc::clone(&slot));

        let before = ctx
            .session
            .as_ref()
            .map(|s| s.state().snapshot())
            .unwrap_or_default();
        let child = AgentSession::new();
        child.state().with(|m| {
            for (k, v) in &before {
                if !is_private_state_key(k) {
                    m.insert(k.clone(), v.clone());
                }
            }
        });
        let mut copied = child.state().snapshot();
        // On a durable thread the subagent's run is recorded under the parent's thread, in a
        // namespace named after this call, so re-running the call after a cut-off or a pause
        // continues the subagent (or returns its answer, if it had finished).
        let sub = agent
            .sub_run(ctx, args.description)
            .await
            .map_err(|e| ToolError::failed(format!("the subagent's thread: {e}")))?;
        let result = match sub {
            // It had finished: its answer and its files, as if it had just run.
            SubRun::Finished { first, done } => {
                copied = first.state;
                let response = done.response();
                child.state().replace(done.state);
                Ok(response)
            }
            SubRun::Resume { first, request } => {
                copied = first.state;
                run_subagent(
                    request,
                    &child,
                    ctx,
                    &extensions,
                    &args.subagent_type,
                    agent,
                )
                .await
            }
            SubRun::Run(request) => {
                run_subagent(
                    request,
                    &child,
                    ctx,
                    &extensions,
                    &args.subagent_type,
                    agent,
                )
                .await
            }
        };
        slot.release();
        drop(extensions);
        if let Some(s) = suspension {
            s.resume().await;
        }
        // Merge what the subagent changed even when it failed part-way: its files are real.
        if let Some(parent) = &ctx.session {
            let after = child.state().snapshot();
            parent.state().with(|m| merge_changes(m, &copied, &after));
        }
        let response = match result {
            Ok(r) => r,
            Err(cairn_core::Error::Middleware(m)) if m.starts_with(BUDGET_SPENT) => {
                return Ok(ToolOutput::error(format!(
                    "Error: the subagent was stopped: {m}. What it wrote so far is kept. Do the rest yourself with your own tools, or answer with what you have."
                )));
            }
            Err(e) => return Err(ToolError::failed(format!("the subagent failed: {e}"))),
        };
        if !response.interrupts.is_empty() {
            // A guarded call inside pauses the whole run; the decision comes back through
            // this call when the run is resumed.
            return Err(ToolError::Interrupted(response.interrupts));
        }
        Ok(report(&response))
    }
}

/// Runs (or resumes) a subagent in its own session, streaming into the caller's updates
/// under its name and this call's id.
async fn run_subagent(
    request: cairn_core::RunRequest,
    child: &AgentSession,
    ctx: &FunctionInvocationContext,
    extensions: &cairn_core::Extensions,
    subagent_type: &str,
    agent: &Agent,
) -> cairn_core::Result<cairn_core::AgentResponse> {
    let mut req = request
        .session(child)
        .function_invocation_kwargs(ctx.kwargs.clone())
        .extensions(extensions);
    if let Some(sink) = &ctx.updates {
        req = req.updates(sink.nested(
            format!("{subagent_type}:{}", ctx.call_id),
            agent.name().map(str::to_owned),
        ));
    }
    req.await
}

/// What `task` returns: the subagent's last answer.
fn report(response: &cairn_core::AgentResponse) -> ToolOutput {
    ToolOutput::text(
        response
            .last_text()
            .unwrap_or_else(|| "(The subagent finished without a report.)".to_owned()),
    )
}

impl Tool for TaskTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    fn invoke<'a>(
        &'a self,
        ctx: &'a FunctionInvocationContext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(self.run(ctx))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_keeps_parallel_writes_and_private_keys() {
        let before: Map<String, Value> = serde_json::from_value(json!({
            "files": {"/a": 1, "/b": 2}, "todos": [1], "topic": "x"
        }))
        .unwrap();
        let mut target = before.clone();
        // Another subagent already added /c.
        target["files"]["/c"] = json!(3);
        let after: Map<String, Value> = serde_json::from_value(json!({
            "files": {"/a": 10, "/d": 4}, "todos": [9], "topic": "x", "new": true
        }))
        .unwrap();
        merge_changes(&mut target, &before, &after);
        assert_eq!(target["files"], json!({"/a": 10, "/c": 3, "/d": 4}));
        assert_eq!(target["todos"], json!([1]), "private keys stay");
        assert_eq!(target["new"], json!(true));
        // Two subagents that each create the key merge instead of overwriting each other.
        let mut t = Map::new();
        let none = Map::new();
        merge_changes(
            &mut t,
            &none,
            &serde_json::from_value(json!({"files": {"/x": 1}})).unwrap(),
        );
        merge_changes(
            &mut t,
            &none,
            &serde_json::from_value(json!({"files": {"/y": 2}})).unwrap(),
        );
        assert_eq!(t["files"], json!({"/x": 1, "/y": 2}));
    }
}
