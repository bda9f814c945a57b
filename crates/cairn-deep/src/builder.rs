//! [`DeepAgent`]: builds an ordinary [`Agent`] whose middleware stack is the harness (SPEC R5).
//!
//! Nothing in the agent loop is special-cased for deep agents: the harness is tools (file tools,
//! `write_todos`, `task`) and middleware a user could write with the same API:
//! - agent middleware that, once per thread, loads memory files and skill frontmatter (cached in
//!   the session) and installs the store and backend for tools, and checks the typed runtime
//!   context is present;
//! - chat middleware that sets the system prompt (SPEC R5.2 order), then the user's middleware,
//!   then the approvals section when `interrupt_on` is set;
//! - function middleware for approvals (after the user's), when a handler is given;
//! - context compression ([`crate::compression`]): agent middleware choosing the run's token
//!   counter, function middleware offloading large tool results (outside the user's), and chat
//!   middleware registered last (so it counts the request exactly as sent) that truncates old
//!   file arguments, summarizes, and recovers from context-overflow errors. Configure it with
//!   [`DeepAgentBuilder::offloading`], [`DeepAgentBuilder::summarization`] and
//!   [`DeepAgentBuilder::token_counter`]; the window is the profile's `max_input_tokens`.

use std::collections::BTreeMap;
use std::sync::Arc;

use cairn_core::{
    Agent, AgentContext, AgentSession, AnyMiddleware, BoxFuture, ChatContext, ChatOptions,
    Extensions, IntoMiddleware, IntoTool, LoopConfig, Middleware, Next, Role, SharedStore,
    SharedTool,
};

use crate::approval::{ApprovalHandler, InterruptOn};
use crate::backend::{BackendRuntime, SharedBackend, StateBackend};
use crate::compression::{Compressor, Offloading, Summarization};
use crate::memory::{MEMORY_STATE_KEY, MemoryFile, load_memory, render_memory};
use crate::model::{ModelChoice, ModelResolver};
use crate::profile::HarnessProfile;
use crate::prompt::{BASE_AGENT_PROMPT, HITL_GUIDANCE, PromptSections};
use crate::skills::{SKILLS_STATE_KEY, SkillCatalog, load_skills, render_skills};
use crate::subagents::{
    DEFAULT_MAX_CONCURRENT_SUBAGENTS, RunLimitsSetup, SubAgent, SubagentCallBudget, SubagentLimits,
    TaskTool,
};
use crate::tools::{filesystem_tools, todo_tool};

/// A deep agent could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DeepAgentError {
    /// No model was given.
    #[error("no model: call .model(...) with a client or a provider:model string")]
    NoModel,
    /// The model could not be resolved.
    #[error("model: {0}")]
    Model(#[from] cairn_core::ChatError),
    /// Two subagents share a name.
    #[error("two subagents are named `{0}`")]
    DuplicateSubagent(String),
}

#[derive(Clone)]
struct ContextCheck {
    type_name: &'static str,
    present: fn(&Extensions) -> bool,
}

/// Entry point: `DeepAgent::builder()`.
#[derive(Debug, Clone, Copy)]
pub struct DeepAgent;

impl DeepAgent {
    /// A builder with the defaults: a [`StateBackend`], a general-purpose subagent, subagents
    /// that do not delegate further.
    pub fn builder() -> DeepAgentBuilder {
        DeepAgentBuilder::default()
    }
}

/// Builds a deep agent. See the [module docs](self).
#[derive(Clone)]
pub struct DeepAgentBuilder {
    name: Option<String>,
    model: Option<ModelChoice>,
    resolver: Option<ModelResolver>,
    system_prompt: Option<String>,
    tools: Vec<SharedTool>,
    memory: Vec<String>,
    home: Option<std::path::PathBuf>,
    skills: Vec<String>,
    subagents: Vec<SubAgent>,
    general_purpose: bool,
    max_subagent_depth: usize,
    max_concurrent_subagents: usize,
    max_subagent_model_calls: Option<usize>,
    backend: Option<SharedBackend>,
    store: Option<SharedStore>,
    context: Option<ContextCheck>,
    interrupt_on: BTreeMap<String, InterruptOn>,
    approval: Option<Arc<dyn ApprovalHandler>>,
    middleware: Vec<AnyMiddleware>,
    inherited: Vec<AnyMiddleware>,
    profile: HarnessProfile,
    loop_config: LoopConfig,
    options: ChatOptions,
    offloading: Offloading,
    summarization: Summarization,
    token_counter: Option<Arc<dyn cairn_tokens::TokenCounter>>,
    depth: usize,
}

impl Default for DeepAgentBuilder {
    fn default() -> Self {
        DeepAgentBuilder {
            name: None,
            model: None,
            resolver: None,
            system_prompt: None,
            tools: Vec::new(),
            memory: Vec::new(),
            home: None,
            skills: Vec::new(),
            subagents: Vec::new(),
            general_purpose: true,
            max_subagent_depth: 1,
            max_concurrent_subagents: DEFAULT_MAX_CONCURRENT_SUBAGENTS,
            max_subagent_model_calls: None,
            backend: None,
            store: None,
            context: None,
            interrupt_on: BTreeMap::new(),
            approval: None,
            middleware: Vec::new(),
            inherited: Vec::new(),
            profile: HarnessProfile::default(),
            loop_config: LoopConfig::default(),
            options: ChatOptions::default(),
            offloading: Offloading::default(),
            summarization: Summarization::default(),
            token_counter: None,
            depth: 0,
        }
    }
}

impl std::fmt::Debug for DeepAgentBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeepAgentBuilder")
            .field("name", &self.name)
            .field("model", &self.model)
            .field("tools", &self.tools.len())
            .field("memory", &self.memory)
            .field("skills", &self.skills)
            .field("subagents", &self.subagents)
            .field("profile", &self.profile)
            .field("offloading", &self.offloading)
            .field("summarization", &self.summarization)
            .finish_non_exhaustive()
    }
}

impl DeepAgentBuilder {
    /// The agent's name.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// The model: a client, or a `provider:model` string (needs a resolver).
    pub fn model(mut self, model: impl Into<ModelChoice>) -> Self {
        self.model = Some(model.into());
        self
    }

    /// The model as a client value.
    pub fn client(mut self, client: impl cairn_core::ChatClient) -> Self {
        self.model = Some(ModelChoice::client(client));
        self
    }

    /// How `provider:model` strings become clients.
    pub fn model_resolver(mut self, resolver: ModelResolver) -> Self {
        self.resolver = Some(resolver);
        self
    }

    /// The custom system prompt (first in the assembled prompt).
    pub fn system_prompt(mut self, prompt: impl Into<String>) -> Self {
        self.system_prompt = Some(prompt.into());
        self
    }

    /// Adds a user tool.
    pub fn tool(mut self, tool: impl IntoTool) -> Self {
        self.tools.push(tool.into_tool());
        self
    }

    /// Adds user tools.
    pub fn tools(mut self, tools: impl IntoIterator<Item = SharedTool>) -> Self {
        self.tools.extend(tools);
        self
    }

    /// Adds a memory file (an AGENTS.md-style file; `~/…` for a host file).
    pub fn memory(mut self, path: impl Into<String>) -> Self {
        self.memory.push(path.into());
        self
    }

    /// The directory `~` stands for in memory paths (default: `$HOME` when the file is read).
    pub fn home_dir(mut self, dir: impl Into<std::path::PathBuf>) -> Self {
        self.home = Some(dir.into());
        self
    }

    /// Adds a skill source directory (on the backend).
    pub fn skills(mut self, path: impl Into<String>) -> Self {
        self.skills.push(path.into());
        self
    }

    /// Adds a named subagent.
    pub fn subagent(mut self, subagent: SubAgent) -> Self {
        self.subagents.push(subagent);
        self
    }

    /// Whether to offer the general-purpose subagent (default true).
    pub fn general_purpose_subagent(mut self, yes: bool) -> Self {
        self.general_purpose = yes;
        self
    }

    /// How deep delegation may go: 1 (default) lets the agent delegate and subagents not.
    pub fn max_subagent_depth(mut self, depth: usize) -> Self {
        self.max_subagent_depth = depth;
        self
    }

    /// The most subagents working at once in one run, nested ones included (default
    /// [`DEFAULT_MAX_CONCURRENT_SUBAGENTS`]; at least 1). Further `task` calls wait for a free
    /// slot. See [subagent limits](crate::subagents#limits).
    pub fn max_concurrent_subagents(mut self, n: usize) -> Self {
        self.max_concurrent_subagents = n.max(1);
        self
    }

    /// The most model calls all subagents of one run may make together, nested ones included
    /// (default: [`DEFAULT_MODEL_CALLS_PER_ITERATION`](crate::subagents::DEFAULT_MODEL_CALLS_PER_ITERATION)
    /// × the loop's `max_iterations`). Once it is spent, running subagents stop and `task`
    /// answers with an error. See [subagent limits](crate::subagents#limits).
    pub fn max_subagent_model_calls(mut self, n: usize) -> Self {
        self.max_subagent_model_calls = Some(n);
        self
    }

    /// The subagent limits runs of this agent get.
    pub fn subagent_limits(&self) -> SubagentLimits {
        let mut limits = SubagentLimits::for_iterations(self.loop_config.max_iterations);
        limits.max_concurrent = self.max_concurrent_subagents.max(1);
        if let Some(n) = self.max_subagent_model_calls {
            limits.max_model_calls = n;
        }
        limits
    }

    /// Where files live (default: a [`StateBackend`]).
    pub fn backend(mut self, backend: SharedBackend) -> Self {
        self.backend = Some(backend);
        self
    }

    /// The long-term store tools and store backends use.
    pub fn store(mut self, store: SharedStore) -> Self {
        self.store = Some(store);
        self
    }

    /// Declares the typed runtime context runs must carry (pass it per run with
    /// `.extension(value)`). A run without it fails with a clear error before any model call.
    pub fn context_type<T: Send + Sync + 'static>(mut self) -> Self {
        self.context = Some(ContextCheck {
            type_name: std::any::type_name::<T>(),
            present: |e| e.get::<T>().is_some(),
        });
        self
    }

    /// Requires review of calls of `tool`.
    pub fn interrupt_on(mut self, tool: impl Into<String>, config: InterruptOn) -> Self {
        self.interrupt_on.insert(tool.into(), config);
        self
    }

    /// Who reviews the calls of `interrupt_on`.
    pub fn approval_handler(mut self, handler: Arc<dyn ApprovalHandler>) -> Self {
        self.approval = Some(handler);
        self
    }

    /// Adds user middleware (runs inside the harness's own).
    pub fn middleware<M>(mut self, mw: impl IntoMiddleware<M>) -> Self {
        self.middleware.push(mw.into_middleware());
        self
    }

    /// Adds middleware for this agent *and* every subagent it launches (the general-purpose
    /// one, named ones, nested ones), outside each subagent's own: an MCP tool set given
    /// here reaches the subagents as the caller's user tools do.
    pub fn inherited_middleware<M>(mut self, mw: impl IntoMiddleware<M>) -> Self {
        self.inherited.push(mw.into_middleware());
        self
    }

    /// The harness profile (merged over any set before).
    pub fn profile(mut self, profile: HarnessProfile) -> Self {
        self.profile = self.profile.merged(&profile);
        self
    }

    /// Applies the registry's profile for this agent's model (by provider, then by
    /// `provider:model`). Call after [`model`](Self::model).
    pub fn profiles(mut self, registry: &crate::profile::ProfileRegistry) -> Self {
        let key = match &self.model {
            Some(ModelChoice::Spec(s)) => s.clone(),
            Some(ModelChoice::Client(c)) => c.describe(),
            None => return self,
        };
        self.profile = self.profile.merged(&registry.resolve(&key));
        self
    }

    /// Loop bounds.
    pub fn loop_config(mut self, config: LoopConfig) -> Self {
        self.loop_config = config;
        self
    }

    /// Default chat options (model id, temperature, …).
    pub fn options(mut self, options: ChatOptions) -> Self {
        self.options = options;
        self
    }

    /// How large tool results and old file arguments are offloaded (see
    /// [`compression`](crate::compression)). A profile's `max_tool_result_tokens` overrides the
    /// result threshold.
    pub fn offloading(mut self, offloading: Offloading) -> Self {
        self.offloading = offloading;
        self
    }

    /// How older messages are summarized when the context fills up: model, prompt, trigger,
    /// keep, summary length (see [`compression`](crate::compression)). The input window is the
    /// profile's `max_input_tokens`, else the known window of the model.
    ///
    /// ```
    /// use cairn_core::{ChatResponse, testing::ScriptedClient};
    /// use cairn_deep::{DeepAgent, Keep, Summarization, Trigger};
    /// let cheap = ScriptedClient::from_responses([ChatResponse::text("## Session intent ...")]);
    /// let agent = DeepAgent::builder()
    ///     .client(ScriptedClient::from_responses([ChatResponse::text("hi")]))
    ///     .summarization(
    ///         Summarization::new()
    ///             .model(std::sync::Arc::new(cheap) as std::sync::Arc<dyn cairn_core::ChatClient>)
    ///             .trigger(Trigger::Fraction(0.8))
    ///             .keep(Keep::Messages(10)),
    ///     )
    ///     .build()
    ///     .unwrap();
    /// # let _ = agent;
    /// ```
    pub fn summarization(mut self, summarization: Summarization) -> Self {
        self.summarization = summarization;
        self
    }

    /// Counts tokens with `counter` (for example a local model's own tokenizer) instead of the
    /// counter chosen by model name. Counts are cached per message.
    pub fn token_counter(mut self, counter: Arc<dyn cairn_tokens::TokenCounter>) -> Self {
        self.token_counter = Some(counter);
        self
    }

    /// Builds the agent.
    pub fn build(self) -> Result<Agent, DeepAgentError> {
        let model = self.model.clone().ok_or(DeepAgentError::NoModel)?;
        let client = model.resolve(self.resolver.as_ref())?;
        let backend: SharedBackend = self
            .backend
            .clone()
            .unwrap_or_else(|| Arc::new(StateBackend::new()));

        let mut tools: Vec<SharedTool> = vec![Arc::new(todo_tool())];
        tools.extend(filesystem_tools(Arc::clone(&backend)));
        for t in &mut tools {
            match t.spec().name.as_str() {
                "write_file" if self.profile.write_file_overwrites => {
                    *t = crate::tools::overwriting_write_file_tool(Arc::clone(&backend));
                }
                "read_file" if self.profile.plain_file_reads => {
                    *t = crate::tools::plain_read_file_tool(Arc::clone(&backend));
                }
                "edit_file" if self.profile.edit_empty_appends => {
                    *t = crate::tools::appending_edit_file_tool(Arc::clone(&backend));
                }
                _ => {}
            }
        }
        let execute = backend.can_execute();

        let task = self.task_tool(&model, &backend)?;
        let has_task = task.is_some();
        if let Some(t) = task {
            tools.push(Arc::new(t));
        }
        tools.extend(self.tools.iter().cloned());
        let tools = self.profile.apply_to_tools(tools);

        let sections = PromptSections {
            custom: self.system_prompt.clone(),
            base: self
                .profile
                .base_system_prompt
                .clone()
                .unwrap_or_else(|| BASE_AGENT_PROMPT.to_owned()),
            suffix: self.profile.system_prompt_suffix.clone(),
            todos: tools.iter().any(|t| t.spec().name == "write_todos"),
            memory: None,
            skills: None,
            filesystem: tools.iter().any(|t| t.spec().name == "read_file"),
            execute: execute && tools.iter().any(|t| t.spec().name == "execute"),
            task: has_task && tools.iter().any(|t| t.spec().name == "task"),
            custom_last: self.profile.custom_prompt_last,
        };

        let setup = HarnessSetup(Arc::new(SetupInner {
            backend: Arc::clone(&backend),
            store: self.store.clone(),
            context: self.context.clone(),
            memory: self.memory.clone(),
            home: self.home.clone(),
            skills: self.skills.clone(),
            sections,
            read_mentioned: (self.profile.read_mentioned_files
                && !self.profile.excluded_tools.contains("read_file"))
            .then_some(self.profile.plain_file_reads),
        }));

        let mut options = self.options.clone();
        if options.max_tokens.is_none() {
            options.max_tokens = self.profile.max_reply_tokens;
        }
        let compression = self.compressor(&client, &backend)?;
        let mut b = Agent::builder_shared(client)
            .default_options(options)
            .loop_config(self.loop_config.clone())
            .tools(tools)
            .middleware(setup)
            .middleware(PromptMiddleware);
        if self.depth == 0 && has_task {
            // One set of subagent limits per run, reaching nested subagents too.
            b = b.middleware(RunLimitsSetup(self.subagent_limits()));
        }
        let [compress_setup, offload, compress_chat] = match &compression {
            Some(c) => c.middleware().map(Some),
            None => [None, None, None],
        };
        if let (Some(setup), Some(offload)) = (compress_setup, offload) {
            b = b.middleware(setup).middleware(offload);
        }
        if let Some(name) = &self.name {
            b = b.name(name.clone());
        }
        for mw in self.inherited.iter().chain(&self.middleware) {
            b = b.middleware(mw.clone());
        }
        if !self.interrupt_on.is_empty() {
            b = b.middleware(HitlPrompt);
        }
        // The loop itself holds guarded calls (see `cairn_core::interrupt`): asked of the
        // handler when there is one, else the run pauses.
        for (tool, config) in &self.interrupt_on {
            b = b.interrupt_on(tool.clone(), config.clone());
        }
        if let Some(handler) = &self.approval {
            b = b.approval_handler(Arc::clone(handler));
        }
        if let Some(chat) = compress_chat {
            // Last, so it counts and compacts the request exactly as it is sent.
            b = b.middleware(chat);
        }
        if self.depth > 0 {
            // Innermost, so every call that reaches the model (retries after compaction too)
            // takes one from the run's subagent budget.
            b = b.middleware(SubagentCallBudget);
        }
        Ok(b.build())
    }

    fn compressor(
        &self,
        client: &Arc<dyn cairn_core::ChatClient>,
        backend: &SharedBackend,
    ) -> Result<Option<Arc<Compressor>>, DeepAgentError> {
        if !self.offloading.enabled && !self.summarization.enabled {
            return Ok(None);
        }
        let summarizer = match &self.summarization.model {
            Some(m) => Some(m.resolve(self.resolver.as_ref())?),
            None => None,
        };
        let c = Compressor::new(
            self.offloading.clone(),
            self.summarization.clone(),
            Arc::clone(backend),
            Arc::clone(client),
            summarizer,
        )
        .with_window(self.profile.max_input_tokens)
        .with_result_threshold(self.profile.max_tool_result_tokens)
        .with_counter(self.token_counter.clone());
        Ok(Some(Arc::new(c)))
    }

    fn task_tool(
        &self,
        model: &ModelChoice,
        backend: &SharedBackend,
    ) -> Result<Option<TaskTool>, DeepAgentError> {
        if self.depth >= self.max_subagent_depth {
            return Ok(None);
        }
        let mut specs = Vec::new();
        if self.general_purpose
            && !self
                .subagents
                .iter()
                .any(|s| s.name == crate::subagents::GENERAL_PURPOSE)
        {
            let mut gp = SubAgent::general_purpose();
            gp.skills = self.skills.clone();
            specs.push(gp);
        }
        specs.extend(self.subagents.iter().cloned());
        if specs.is_empty() {
            return Ok(None);
        }
        let mut built = Vec::new();
        let mut seen = std::collections::BTreeSet::new();
        for spec in specs {
            if !seen.insert(spec.name.clone()) {
                return Err(DeepAgentError::DuplicateSubagent(spec.name));
            }
            let child = DeepAgentBuilder {
                name: Some(spec.name.clone()),
                model: Some(spec.model.clone().unwrap_or_else(|| model.clone())),
                resolver: self.resolver.clone(),
                system_prompt: Some(spec.system_prompt.clone()).filter(|s| !s.is_empty()),
                tools: spec.tools.clone().unwrap_or_else(|| self.tools.clone()),
                memory: Vec::new(),
                home: self.home.clone(),
                skills: spec.skills.clone(),
                subagents: self.subagents.clone(),
                general_purpose: self.general_purpose,
                max_subagent_depth: self.max_subagent_depth,
                max_concurrent_subagents: self.max_concurrent_subagents,
                max_subagent_model_calls: self.max_subagent_model_calls,
                backend: Some(Arc::clone(backend)),
                store: self.store.clone(),
                context: None,
                interrupt_on: self.interrupt_on.clone(),
                approval: self.approval.clone(),
                middleware: spec.middleware.clone(),
                inherited: self.inherited.clone(),
                profile: self.profile.clone(),
                loop_config: self.loop_config.clone(),
                options: self.options.clone(),
                offloading: self.offloading.clone(),
                summarization: self.summarization.clone(),
                token_counter: self.token_counter.clone(),
                depth: self.depth + 1,
            };
            built.push((spec.name.clone(), spec.description.clone(), child.build()?));
        }
        Ok(Some(
            TaskTool::new(built).with_limits(self.subagent_limits()),
        ))
    }
}

/// The rendered harness prompt of one run.
struct HarnessPrompt(String);

/// Agent middleware: installs the store, checks the runtime context, loads memory and skills
/// once per thread, and renders the harness prompt for the run.
struct HarnessSetup(Arc<SetupInner>);

struct SetupInner {
    backend: SharedBackend,
    store: Option<SharedStore>,
    context: Option<ContextCheck>,
    memory: Vec<String>,
    home: Option<std::path::PathBuf>,
    skills: Vec<String>,
    sections: PromptSections,
    /// [`HarnessProfile::read_mentioned_files`]: `Some(plain)` when on, `plain` being
    /// [`HarnessProfile::plain_file_reads`].
    read_mentioned: Option<bool>,
}

impl SetupInner {
    async fn prepare(&self, ctx: &mut AgentContext) -> cairn_core::Result<()> {
        // A run without a session gets a scratch session of its own (issue #15): its files on
        // a `StateBackend`, offloaded results and compression state live and die with the run,
        // so two sessionless runs of one agent never see each other's. (A backend used outside
        // any run still falls back to its own scratch state.)
        if ctx.session.is_none() {
            ctx.session = Some(AgentSession::with_id(format!(
                "run-{}",
                uuid::Uuid::new_v4()
            )));
        }
        if let Some(check) = &self.context
            && !(check.present)(&ctx.extensions)
        {
            return Err(cairn_core::Error::InvalidInput(format!(
                "this agent needs a runtime context of type `{}`: pass one with `.extension(value)` on the run",
                check.type_name
            )));
        }
        if let Some(store) = &self.store
            && ctx.extensions.get::<SharedStore>().is_none()
        {
            ctx.extensions.insert(Arc::clone(store));
        }
        let rt = BackendRuntime {
            session: ctx.session.clone(),
            extensions: ctx.extensions.clone(),
        };
        let mut sections = self.sections.clone();
        if !self.memory.is_empty() {
            let cached: Option<Vec<MemoryFile>> = ctx
                .session
                .as_ref()
                .and_then(|s| s.state().get(MEMORY_STATE_KEY));
            let files = match cached {
                Some(f) => f,
                None => {
                    let f = load_memory(
                        self.backend.as_ref(),
                        &rt,
                        &self.memory,
                        self.home.as_deref(),
                    )
                    .await
                    .map_err(|e| cairn_core::Error::InvalidInput(e.to_string()))?;
                    if let Some(s) = &ctx.session {
                        s.state().insert(MEMORY_STATE_KEY, &f)?;
                    }
                    f
                }
            };
            sections.memory = Some(render_memory(&self.memory, &files));
        }
        if !self.skills.is_empty() {
            let cached: Option<SkillCatalog> = ctx
                .session
                .as_ref()
                .and_then(|s| s.state().get(SKILLS_STATE_KEY));
            let catalog = match cached {
                Some(c) => c,
                None => {
                    let c = load_skills(self.backend.as_ref(), &rt, &self.skills).await;
                    if let Some(s) = &ctx.session {
                        s.state().insert(SKILLS_STATE_KEY, &c)?;
                    }
                    c
                }
            };
            sections.skills = Some(render_skills(&self.skills, &catalog));
        }
        ctx.extensions.insert(HarnessPrompt(sections.render()));
        if let Some(plain) = self.read_mentioned
            && let Some(last) = ctx.messages.last()
            && last.role == Role::User
            && last.function_results().next().is_none()
        {
            let request = last.text();
            let read =
                crate::mentions::read_mentioned(self.backend.as_ref(), &rt, &request, plain).await;
            ctx.messages.extend(read);
        }
        Ok(())
    }
}

impl Middleware<AgentContext> for HarnessSetup {
    fn process(
        &self,
        mut ctx: AgentContext,
        next: Next<AgentContext>,
    ) -> BoxFuture<'static, cairn_core::Result<AgentContext>> {
        let this = Arc::clone(&self.0);
        Box::pin(async move {
            this.prepare(&mut ctx).await?;
            next.run(ctx).await
        })
    }
}

/// Chat middleware: the system prompt of each model call is the harness prompt of the run.
struct PromptMiddleware;

impl Middleware<ChatContext> for PromptMiddleware {
    fn process(
        &self,
        mut ctx: ChatContext,
        next: Next<ChatContext>,
    ) -> BoxFuture<'static, cairn_core::Result<ChatContext>> {
        if let Some(p) = ctx.extensions.get::<HarnessPrompt>() {
            ctx.options.instructions = Some(p.0.clone());
        }
        next.run(ctx)
    }
}

/// Chat middleware: appends the approvals section after user middleware prompts.
struct HitlPrompt;

impl Middleware<ChatContext> for HitlPrompt {
    fn process(
        &self,
        mut ctx: ChatContext,
        next: Next<ChatContext>,
    ) -> BoxFuture<'static, cairn_core::Result<ChatContext>> {
        let base = ctx.options.instructions.take().unwrap_or_default();
        ctx.options.instructions = Some(if base.is_empty() {
            HITL_GUIDANCE.to_owned()
        } else {
            format!("{base}\n\n{HITL_GUIDANCE}")
        });
        next.run(ctx)
    }
}
