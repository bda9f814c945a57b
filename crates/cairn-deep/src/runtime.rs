//! The typed runtime context of a deep agent (SPEC R6).
//!
//! A run carries typed values — a user id, API keys, a connection, feature flags — in its
//! extensions: `agent.run(task).extension(UserContext { … })`. They are never put into the
//! prompt or any model request; tools read them through their context, together with the store
//! ([`ToolRuntimeExt`]), and the `task` tool hands the same values to every subagent.
//! `DeepAgentBuilder::context_type::<T>()` makes a run without a `T` fail before any model call.
//!
//! # Per-subagent context (SPEC R8.2)
//! Deep Agents passes the whole runtime context to every subagent and namespaces per-subagent
//! settings by *key*: `context={"researcher_max_depth": 3, …}`, read in a tool that checks
//! which agent it runs in (`lc_agent_name` in the run's metadata). cairn's runtime context is
//! typed, so the namespace is the subagent's name and the value keeps its type: put a
//! [`SubagentContext`] on the run, holding values per subagent name. When `task` launches
//! subagent `name`:
//! - the values registered for `name` are added to the subagent's extensions, replacing the
//!   caller's value of the same type, so its tools read them with the ordinary
//!   `ctx.runtime_context::<T>()`;
//! - values registered for other subagents are not added: a subagent never sees another's;
//! - the [`SubagentContext`] itself is dropped, unless the subagent has a `task` tool of its
//!   own (`max_subagent_depth` > 1): then it goes on without `name`'s entry, so the nested
//!   subagents still get theirs;
//! - [`SubagentName`] tells its tools which subagent they run in (the counterpart of
//!   `lc_agent_name`); the top agent's run has none.
//!
//! ```
//! use cairn_deep::runtime::SubagentContext;
//! struct SearchDepth(u32);
//! let per_subagent = SubagentContext::new()
//!     .with("researcher", SearchDepth(3))
//!     .with("fact-checker", SearchDepth(1));
//! assert!(per_subagent.for_subagent("researcher").is_some());
//! // agent.run(task).extension(SearchDepth(5)).extension(per_subagent)
//! ```

use std::collections::BTreeMap;

use cairn_core::{Extensions, FunctionInvocationContext, SharedStore, ToolError};

use crate::backend::BackendRuntime;

/// What a tool reads from its run, on top of `FunctionInvocationContext`.
pub trait ToolRuntimeExt {
    /// The run's runtime context of type `T`, or an error telling the model it is missing.
    fn runtime_context<T: Send + Sync + 'static>(&self) -> Result<&T, ToolError>;
    /// The run's long-term store, if one is configured.
    fn store(&self) -> Option<SharedStore>;
    /// The handle backends take.
    fn backend_runtime(&self) -> BackendRuntime;
}

impl ToolRuntimeExt for FunctionInvocationContext {
    fn runtime_context<T: Send + Sync + 'static>(&self) -> Result<&T, ToolError> {
        self.extensions.get::<T>().ok_or_else(|| {
            ToolError::failed(format!(
                "this tool needs a runtime context of type `{}`, and the run has none",
                std::any::type_name::<T>()
            ))
        })
    }

    fn store(&self) -> Option<SharedStore> {
        self.extensions.get::<SharedStore>().cloned()
    }

    fn backend_runtime(&self) -> BackendRuntime {
        BackendRuntime::from_context(self)
    }
}

/// Typed runtime context for named subagents only (see [Per-subagent
/// context](self#per-subagent-context-spec-r82)): put it on a run with `.extension(…)`.
#[derive(Clone, Default)]
pub struct SubagentContext {
    by_name: BTreeMap<String, Extensions>,
}

impl SubagentContext {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `value` for the subagent named `subagent` (replacing its value of the same type).
    pub fn with<T: Send + Sync + 'static>(mut self, subagent: impl Into<String>, value: T) -> Self {
        self.insert(subagent, value);
        self
    }

    /// Adds `value` for the subagent named `subagent` (replacing its value of the same type).
    pub fn insert<T: Send + Sync + 'static>(&mut self, subagent: impl Into<String>, value: T) {
        self.by_name
            .entry(subagent.into())
            .or_default()
            .insert(value);
    }

    /// The values registered for `subagent`, if any.
    pub fn for_subagent(&self, subagent: &str) -> Option<&Extensions> {
        self.by_name.get(subagent)
    }

    /// The names that have values.
    pub fn subagents(&self) -> impl Iterator<Item = &str> {
        self.by_name.keys().map(String::as_str)
    }

    /// Turns a caller's extensions into those of subagent `name`: see [Per-subagent
    /// context](self#per-subagent-context-spec-r82).
    /// `delegates`: whether that subagent has a `task` tool of its own.
    pub(crate) fn scope(extensions: &mut Extensions, name: &str, delegates: bool) {
        extensions.insert(SubagentName(name.to_owned()));
        let Some(per) = extensions.get_arc::<SubagentContext>() else {
            return;
        };
        let mut rest = (*per).clone();
        if let Some(own) = rest.by_name.remove(name) {
            extensions.extend(&own);
        }
        if !delegates || rest.by_name.is_empty() {
            extensions.remove::<SubagentContext>();
        } else {
            extensions.insert(rest);
        }
    }
}

impl std::fmt::Debug for SubagentContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map()
            .entries(self.by_name.iter().map(|(k, v)| (k, v.len())))
            .finish()
    }
}

/// The name of the subagent a tool runs in (Deep Agents' `lc_agent_name`), set by `task` in the
/// subagent's extensions: `ctx.runtime_context::<SubagentName>()`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubagentName(pub String);

/// What a dynamic system prompt is built from: the run's typed values and store.
#[derive(Clone)]
pub struct PromptRequest {
    /// The run's typed values (the runtime context among them).
    pub extensions: cairn_core::Extensions,
    /// The run's store, if any.
    pub store: Option<SharedStore>,
}

impl std::fmt::Debug for PromptRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PromptRequest")
            .field("extensions", &self.extensions)
            .field("store", &self.store.is_some())
            .finish()
    }
}

impl PromptRequest {
    /// The runtime context of type `T`, if the run has one.
    pub fn context<T: Send + Sync + 'static>(&self) -> Option<&T> {
        self.extensions.get::<T>()
    }
}

/// Chat middleware that builds part of the system prompt per model call from the runtime
/// context and the store (SPEC R3.4): `f` returns a section to append, or `None`.
///
/// ```
/// use cairn_deep::runtime::{dynamic_system_prompt, PromptRequest};
/// struct Role { admin: bool }
/// let mw = dynamic_system_prompt(|req: PromptRequest| async move {
///     Some(match req.context::<Role>() {
///         Some(r) if r.admin => "You have admin rights.".to_owned(),
///         _ => "You have read-only rights.".to_owned(),
///     })
/// });
/// # let _ = mw;
/// ```
pub fn dynamic_system_prompt<F, Fut>(f: F) -> DynamicSystemPrompt<F>
where
    F: Fn(PromptRequest) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Option<String>> + Send + 'static,
{
    DynamicSystemPrompt(f)
}

/// See [`dynamic_system_prompt`].
pub struct DynamicSystemPrompt<F>(F);

impl<F, Fut> cairn_core::Middleware<cairn_core::ChatContext> for DynamicSystemPrompt<F>
where
    F: Fn(PromptRequest) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Option<String>> + Send + 'static,
{
    fn process(
        &self,
        mut ctx: cairn_core::ChatContext,
        next: cairn_core::ChatNext,
    ) -> cairn_core::BoxFuture<'static, cairn_core::Result<cairn_core::ChatContext>> {
        let fut = (self.0)(PromptRequest {
            store: ctx.extensions.get::<SharedStore>().cloned(),
            extensions: ctx.extensions.clone(),
        });
        Box::pin(async move {
            if let Some(section) = fut.await.filter(|s| !s.trim().is_empty()) {
                let base = ctx.options.instructions.take().unwrap_or_default();
                ctx.options.instructions = Some(if base.is_empty() {
                    section
                } else {
                    format!("{base}\n\n{section}")
                });
            }
            next.run(ctx).await
        })
    }
}
