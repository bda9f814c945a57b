//! Middleware around runs, model calls and tool calls (SPEC R3).
//!
//! One mechanism serves all three kinds: a [`Middleware<C>`] receives the context `C` *owned*
//! together with a [`Next<C>`], and returns the context when it is done. `next` takes nothing but
//! the context, so a plain `async fn(ctx, next)` is middleware:
//!
//! ```
//! use cairn_core::{FunctionInvocationContext, FunctionNext, Result};
//!
//! async fn enrich_tool_runtime_context(
//!     mut ctx: FunctionInvocationContext,
//!     next: FunctionNext,
//! ) -> Result<FunctionInvocationContext> {
//!     ctx.kwargs.set_default("tenant", "contoso");
//!     ctx.kwargs.set_default("request_source", "middleware");
//!     next.run(ctx).await
//! }
//! ```
//!
//! - **Before `next`**: change the context; downstream sees the change.
//! - **After `next`**: read or replace `ctx.result`.
//! - **Short-circuit**: set `ctx.result` and return without calling `next`. Returning without
//!   calling `next` *and* without a result fails the run with
//!   [`Error::MissingResult`](crate::Error::MissingResult): cairn never makes up an empty reply.
//! - **Terminate**: set `ctx.terminate` (chat and function contexts) to end the loop.
//! - **Errors**: an `Err` returned by middleware aborts the run with that error (fail closed).
//!   To tell the *model* about a problem instead, set an error result
//!   (`ToolOutput::error("Error: …")`) and return `Ok`.
//!
//! Order: agent-level middleware wraps run-level middleware; within each list, the first
//! registered is the outermost. `Next` is `Clone`, so middleware may call it more than once
//! (a retry, or summarizing and trying again after a context overflow).

use std::sync::Arc;

use crate::client::BoxFuture;
use crate::context::{AgentContext, ChatContext, FunctionInvocationContext};

/// Middleware over a context `C`.
pub trait Middleware<C>: Send + Sync + 'static {
    /// Handles the context, usually by calling `next.run(ctx)` somewhere inside.
    fn process(&self, ctx: C, next: Next<C>) -> BoxFuture<'static, crate::Result<C>>;
}

pub(crate) type Endpoint<C> = Arc<dyn Fn(C) -> BoxFuture<'static, crate::Result<C>> + Send + Sync>;

/// The rest of the chain: the next middleware, or the operation itself at the end.
pub struct Next<C> {
    chain: Arc<[Arc<dyn Middleware<C>>]>,
    index: usize,
    endpoint: Endpoint<C>,
}

impl<C> Clone for Next<C> {
    fn clone(&self) -> Self {
        Next {
            chain: Arc::clone(&self.chain),
            index: self.index,
            endpoint: Arc::clone(&self.endpoint),
        }
    }
}

impl<C: Send + 'static> Next<C> {
    pub(crate) fn new(chain: Arc<[Arc<dyn Middleware<C>>]>, endpoint: Endpoint<C>) -> Self {
        Next {
            chain,
            index: 0,
            endpoint,
        }
    }

    /// Runs the rest of the chain with `ctx` and returns the context it produced.
    pub fn run(self, ctx: C) -> BoxFuture<'static, crate::Result<C>> {
        match self.chain.get(self.index).cloned() {
            Some(mw) => {
                let next = Next {
                    chain: self.chain,
                    index: self.index + 1,
                    endpoint: self.endpoint,
                };
                mw.process(ctx, next)
            }
            None => (self.endpoint)(ctx),
        }
    }
}

/// `Next` for agent middleware.
pub type AgentNext = Next<AgentContext>;
/// `Next` for chat middleware.
pub type ChatNext = Next<ChatContext>;
/// `Next` for function middleware.
pub type FunctionNext = Next<FunctionInvocationContext>;

/// Middleware from an async function or closure `(ctx, next) -> Result<ctx>`.
pub struct FromFn<F>(F);

/// Wraps an async function as middleware (as `axum::middleware::from_fn` does).
pub fn from_fn<F>(f: F) -> FromFn<F> {
    FromFn(f)
}

impl<C, F, Fut> Middleware<C> for FromFn<F>
where
    C: Send + 'static,
    F: Fn(C, Next<C>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = crate::Result<C>> + Send + 'static,
{
    fn process(&self, ctx: C, next: Next<C>) -> BoxFuture<'static, crate::Result<C>> {
        Box::pin((self.0)(ctx, next))
    }
}

/// Middleware of any of the three kinds, ready to register.
#[derive(Clone)]
pub enum AnyMiddleware {
    /// Around a run.
    Agent(Arc<dyn Middleware<AgentContext>>),
    /// Around a model call.
    Chat(Arc<dyn Middleware<ChatContext>>),
    /// Around a tool call.
    Function(Arc<dyn Middleware<FunctionInvocationContext>>),
}

impl std::fmt::Debug for AnyMiddleware {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            AnyMiddleware::Agent(_) => "AgentMiddleware",
            AnyMiddleware::Chat(_) => "ChatMiddleware",
            AnyMiddleware::Function(_) => "FunctionMiddleware",
        })
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for crate::AgentContext {}
    impl Sealed for crate::ChatContext {}
    impl Sealed for crate::FunctionInvocationContext {}
}

/// The three middleware contexts. The kind of a middleware follows from its context type.
pub trait MiddlewareContext: sealed::Sealed + Send + Sized + 'static {
    /// Files middleware over this context under its kind.
    fn wrap(mw: Arc<dyn Middleware<Self>>) -> AnyMiddleware;
}

impl MiddlewareContext for AgentContext {
    fn wrap(mw: Arc<dyn Middleware<Self>>) -> AnyMiddleware {
        AnyMiddleware::Agent(mw)
    }
}
impl MiddlewareContext for ChatContext {
    fn wrap(mw: Arc<dyn Middleware<Self>>) -> AnyMiddleware {
        AnyMiddleware::Chat(mw)
    }
}
impl MiddlewareContext for FunctionInvocationContext {
    fn wrap(mw: Arc<dyn Middleware<Self>>) -> AnyMiddleware {
        AnyMiddleware::Function(mw)
    }
}

/// Anything that can be registered as middleware: a plain `async fn(ctx, next)`, a type
/// implementing [`Middleware`], or an [`AnyMiddleware`]. `M` is a marker that lets the compiler
/// pick the conversion; callers never name it.
pub trait IntoMiddleware<M> {
    /// The conversion.
    fn into_middleware(self) -> AnyMiddleware;
}

#[doc(hidden)]
pub struct ViaTrait<C>(std::marker::PhantomData<C>);
#[doc(hidden)]
pub struct ViaFn<C, Fut>(std::marker::PhantomData<(C, Fut)>);

impl<C: MiddlewareContext, T: Middleware<C>> IntoMiddleware<ViaTrait<C>> for T {
    fn into_middleware(self) -> AnyMiddleware {
        C::wrap(Arc::new(self))
    }
}

impl<C, F, Fut> IntoMiddleware<ViaFn<C, Fut>> for F
where
    C: MiddlewareContext,
    F: Fn(C, Next<C>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = crate::Result<C>> + Send + 'static,
{
    fn into_middleware(self) -> AnyMiddleware {
        C::wrap(Arc::new(FromFn(self)))
    }
}

impl IntoMiddleware<()> for AnyMiddleware {
    fn into_middleware(self) -> AnyMiddleware {
        self
    }
}

/// Middleware of all three kinds, each list in registration order (outermost first).
#[derive(Clone, Default)]
pub struct MiddlewareSet {
    /// Around runs.
    pub agent: Vec<Arc<dyn Middleware<AgentContext>>>,
    /// Around model calls.
    pub chat: Vec<Arc<dyn Middleware<ChatContext>>>,
    /// Around tool calls.
    pub function: Vec<Arc<dyn Middleware<FunctionInvocationContext>>>,
}

impl MiddlewareSet {
    /// Adds one middleware to the list of its kind.
    pub fn push(&mut self, mw: AnyMiddleware) {
        match mw {
            AnyMiddleware::Agent(m) => self.agent.push(m),
            AnyMiddleware::Chat(m) => self.chat.push(m),
            AnyMiddleware::Function(m) => self.function.push(m),
        }
    }

    /// Whether no middleware is registered.
    pub fn is_empty(&self) -> bool {
        self.agent.is_empty() && self.chat.is_empty() && self.function.is_empty()
    }
}

impl std::fmt::Debug for MiddlewareSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MiddlewareSet")
            .field("agent", &self.agent.len())
            .field("chat", &self.chat.len())
            .field("function", &self.function.len())
            .finish()
    }
}

pub(crate) fn concat<C>(
    outer: &[Arc<dyn Middleware<C>>],
    inner: &[Arc<dyn Middleware<C>>],
) -> Arc<[Arc<dyn Middleware<C>>]> {
    outer.iter().chain(inner.iter()).cloned().collect()
}
