//! The typed runtime context of a deep agent (SPEC R6).
//!
//! A run carries typed values — a user id, API keys, a connection, feature flags — in its
//! extensions: `agent.run(task).extension(UserContext { … })`. They are never put into the
//! prompt or any model request; tools read them through their context, together with the store
//! ([`ToolRuntimeExt`]), and the `task` tool hands the same values to every subagent.
//! `DeepAgentBuilder::context_type::<T>()` makes a run without a `T` fail before any model call.

use cairn_core::{FunctionInvocationContext, SharedStore, ToolError};

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
