//! # cairn-server
//!
//! `cairn serve`: an HTTP server that speaks the **Agent Protocol** as LangGraph's server and
//! its Python client (`langgraph_sdk`) use it — threads, background runs, `wait` and SSE
//! `stream` runs, cancellation with the multitask strategies, the store — over cairn's durable
//! threads. Runs are queued in the database ([`cairn_store::RunQueue`]); every server process
//! is a worker that claims runs under a lease, so any number of processes on one PostgreSQL
//! database share the threads, runs and store, and a run whose worker died is taken over and
//! continued from its last committed step. SQLite is the single-machine default.
//!
//! ```no_run
//! # async fn demo(agent: cairn_core::Agent) -> Result<(), Box<dyn std::error::Error>> {
//! let db = cairn_store::open("cairn.db").await?;
//! let server = cairn_server::Server::new(agent, db, cairn_server::ServerConfig::default())?;
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:2024").await?;
//! server.serve(listener, std::future::pending()).await?;
//! # Ok(()) }
//! ```
//!
//! The design (how runs move, what a stream sends, how a takeover resumes) is written down in
//! `docs/serve.md`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use cairn_core::{Agent, SharedCheckpointer, SharedStore};
use cairn_store::{Database, RunQueue};
use tokio::sync::{Notify, Semaphore, broadcast, watch};

mod api;
pub mod error;
mod stream;
pub mod wire;
mod worker;

pub use error::ApiError;

/// How a server behaves.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ServerConfig {
    /// When set, every route but `/ok` needs `Authorization: Bearer <token>` (or
    /// `x-api-key: <token>`).
    pub auth_token: Option<String>,
    /// This worker's name in the run queue (random when empty).
    pub worker_id: String,
    /// How long a claim on a run lasts without renewal; a dead worker's runs are taken over
    /// after it.
    pub lease: Duration,
    /// How often the worker looks for queued runs (and renews its leases, at most every
    /// lease / 3).
    pub poll: Duration,
    /// The most runs this process executes at once.
    pub max_runs: usize,
    /// The largest request body accepted, in bytes.
    pub max_body_bytes: usize,
    /// The assistant's graph id (`agent`); clients may also name it by the agent's name or
    /// its assistant id.
    pub graph_id: String,
    /// Texts never to send back (API keys): replaced in every error message.
    pub redact: Vec<String>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            auth_token: None,
            worker_id: String::new(),
            lease: Duration::from_secs(30),
            poll: Duration::from_millis(100),
            max_runs: 8,
            max_body_bytes: 10 * 1024 * 1024,
            graph_id: "agent".into(),
            redact: Vec::new(),
        }
    }
}

impl ServerConfig {
    /// Requires this bearer token.
    pub fn auth_token(mut self, token: impl Into<String>) -> Self {
        self.auth_token = Some(token.into()).filter(|t: &String| !t.is_empty());
        self
    }

    /// Sets the lease.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// Sets the poll interval.
    pub fn poll(mut self, poll: Duration) -> Self {
        self.poll = poll;
        self
    }

    /// Sets the most concurrent runs.
    pub fn max_runs(mut self, n: usize) -> Self {
        self.max_runs = n.max(1);
        self
    }

    /// Sets the body limit.
    pub fn max_body_bytes(mut self, n: usize) -> Self {
        self.max_body_bytes = n;
        self
    }

    /// Names the worker.
    pub fn worker_id(mut self, id: impl Into<String>) -> Self {
        self.worker_id = id.into();
        self
    }

    /// Texts to scrub from every answer.
    pub fn redact(mut self, secrets: impl IntoIterator<Item = String>) -> Self {
        self.redact
            .extend(secrets.into_iter().filter(|s| s.len() >= 4));
        self
    }
}

/// The server could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// The database has no run queue.
    #[error(transparent)]
    Runs(#[from] cairn_store::RunError),
    /// Listening failed.
    #[error("the server stopped: {0}")]
    Io(#[from] std::io::Error),
}

/// What a run executing in this process tells its watchers.
#[derive(Debug, Clone)]
pub(crate) enum Signal {
    /// An event of the run's stream.
    Event(Arc<cairn_core::AgentEvent>),
    /// The run ended (its record is final in the database).
    Done,
}

/// A run executing in this process.
pub(crate) struct LocalRun {
    pub(crate) events: broadcast::Sender<Signal>,
    pub(crate) cancel: watch::Sender<Option<cairn_store::CancelAction>>,
}

pub(crate) struct Shared {
    pub(crate) agent: Agent,
    pub(crate) db: Database,
    pub(crate) cp: SharedCheckpointer,
    pub(crate) store: SharedStore,
    pub(crate) runs: RunQueue,
    pub(crate) cfg: ServerConfig,
    pub(crate) local: Mutex<HashMap<String, Arc<LocalRun>>>,
    pub(crate) wake: Notify,
    pub(crate) slots: Arc<Semaphore>,
    pub(crate) started_ms: u64,
}

impl Shared {
    pub(crate) fn local(&self) -> MutexGuard<'_, HashMap<String, Arc<LocalRun>>> {
        self.local.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `text` with every configured secret replaced.
    pub(crate) fn scrub(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for s in &self.cfg.redact {
            if out.contains(s.as_str()) {
                out = out.replace(s.as_str(), "[redacted]");
            }
        }
        out
    }
}

/// An Agent Protocol server over one agent and one database.
#[derive(Clone)]
pub struct Server {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("worker", &self.shared.cfg.worker_id)
            .field("engine", &self.shared.db.engine())
            .finish_non_exhaustive()
    }
}

impl Server {
    /// A server running `agent` on `db` (SQLite or PostgreSQL: the run queue lives there).
    pub fn new(agent: Agent, db: Database, mut cfg: ServerConfig) -> Result<Self, ServeError> {
        let runs = db.runs()?;
        if cfg.worker_id.is_empty() {
            cfg.worker_id = format!("worker-{}", uuid::Uuid::new_v4());
        }
        let slots = Arc::new(Semaphore::new(cfg.max_runs.max(1)));
        Ok(Server {
            shared: Arc::new(Shared {
                cp: db.checkpointer(),
                store: db.store(),
                runs,
                agent,
                db,
                cfg,
                local: Mutex::new(HashMap::new()),
                wake: Notify::new(),
                slots,
                started_ms: worker::now_ms(),
            }),
        })
    }

    /// The HTTP routes (without the background worker; see [`Server::start_worker`]).
    pub fn router(&self) -> axum::Router {
        api::router(Arc::clone(&self.shared))
    }

    /// The OpenAPI document of the routes, generated from the handlers' types.
    pub fn openapi(&self) -> utoipa::openapi::OpenApi {
        api::openapi()
    }

    /// Starts the worker that claims queued runs and renews leases; it stops when the
    /// returned handle is dropped or aborted.
    pub fn start_worker(&self) -> WorkerHandle {
        WorkerHandle {
            tasks: worker::start(Arc::clone(&self.shared)),
        }
    }

    /// Serves on `listener` with a worker until `shutdown` resolves.
    pub async fn serve(
        &self,
        listener: tokio::net::TcpListener,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> Result<(), ServeError> {
        use axum::serve::ListenerExt as _;
        let _worker = self.start_worker();
        // SSE sends many small writes: no Nagle delay on them.
        let listener = listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        axum::serve(listener, self.router())
            .with_graceful_shutdown(shutdown)
            .await?;
        Ok(())
    }
}

/// The background worker of a [`Server`]; dropping it stops the worker (runs in flight are
/// dropped with it and taken over by another worker once their lease expires).
#[derive(Debug)]
pub struct WorkerHandle {
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for WorkerHandle {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}
