//! The routes. Paths follow LangGraph's server (what `langgraph_sdk` calls) and the Agent
//! Protocol's OpenAPI document where the two differ (`/agents/…`, `POST /runs` with a
//! `thread_id` in the body, `GET /runs/{run_id}`).

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{FromRequest, Path, Query, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use cairn_core::{RunStatus, ThreadCursor, ThreadInfo, ThreadQuery, Transcript};
use cairn_store::{CancelAction, MultitaskStrategy, NewRun, RunFilter, RunRecord, RunState};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};
use utoipa::OpenApi as _;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::error::ApiError;
use crate::stream::{Modes, Source};
use crate::wire::*;
use crate::{Shared, Signal};

type S = State<Arc<Shared>>;
type ApiResult<T> = Result<T, ApiError>;

/// A JSON body: an empty body reads as `{}`; anything that is not the expected JSON is a 422
/// with serde's words (which name the field and position, never echo a value at length).
pub(crate) struct Body<T>(pub T);

impl<T: DeserializeOwned, St: Send + Sync> FromRequest<St> for Body<T> {
    type Rejection = Response;

    async fn from_request(req: Request, state: &St) -> Result<Self, Self::Rejection> {
        let bytes = Bytes::from_request(req, state)
            .await
            .map_err(IntoResponse::into_response)?;
        let text: &[u8] = if bytes.iter().all(u8::is_ascii_whitespace) {
            b"{}"
        } else {
            &bytes
        };
        serde_json::from_slice(text).map(Body).map_err(|e| {
            ApiError::invalid(format!("the request body is not valid: {e}")).into_response()
        })
    }
}

#[derive(utoipa::OpenApi)]
#[openapi(
    info(
        title = "cairn serve",
        description = "The Agent Protocol (as LangGraph's server speaks it) over cairn's durable threads."
    ),
    components(schemas(ErrorResponse))
)]
struct Doc;

fn api() -> OpenApiRouter<Arc<Shared>> {
    OpenApiRouter::with_openapi(Doc::openapi())
        .routes(routes!(ok))
        .routes(routes!(info))
        .routes(routes!(search_assistants))
        .routes(routes!(get_assistant))
        .routes(routes!(get_assistant_schemas))
        .routes(routes!(search_agents))
        .routes(routes!(get_agent))
        .routes(routes!(get_agent_schemas))
        .routes(routes!(create_thread))
        .routes(routes!(search_threads))
        .routes(routes!(get_thread, patch_thread, delete_thread))
        .routes(routes!(get_thread_state))
        .routes(routes!(get_thread_history, post_thread_history))
        .routes(routes!(copy_thread))
        .routes(routes!(create_thread_run, list_thread_runs))
        .routes(routes!(wait_thread_run))
        .routes(routes!(stream_thread_run))
        .routes(routes!(get_thread_run, delete_thread_run))
        .routes(routes!(join_thread_run))
        .routes(routes!(join_thread_run_stream))
        .routes(routes!(cancel_thread_run))
        .routes(routes!(create_run))
        .routes(routes!(wait_run))
        .routes(routes!(stream_run))
        .routes(routes!(search_runs))
        .routes(routes!(get_run, delete_run))
        .routes(routes!(join_run))
        .routes(routes!(join_run_stream))
        .routes(routes!(cancel_run))
        .routes(routes!(put_item, get_item, delete_item))
        .routes(routes!(search_items))
        .routes(routes!(list_namespaces))
}

pub(crate) fn openapi() -> utoipa::openapi::OpenApi {
    api().into_openapi()
}

pub(crate) fn router(shared: Arc<Shared>) -> Router {
    let (router, doc) = api().split_for_parts();
    let doc = Arc::new(doc);
    let limit = shared.cfg.max_body_bytes;
    router
        .route(
            "/openapi.json",
            axum::routing::get(move || {
                let doc = Arc::clone(&doc);
                async move { Json(doc.as_ref().clone()) }
            }),
        )
        .fallback(|| async { ApiError::not_found("no such route") })
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&shared),
            auth,
        ))
        .layer(axum::extract::DefaultBodyLimit::max(limit))
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(|_| {
            ApiError::internal("the server failed on this request").into_response()
        }))
        .with_state(shared)
}

/// Checks the bearer token on every route but `/ok` (constant-time comparison).
async fn auth(State(shared): S, req: Request, next: Next) -> Response {
    let Some(token) = &shared.cfg.auth_token else {
        return next.run(req).await;
    };
    if req.uri().path() == "/ok" {
        return next.run(req).await;
    }
    let given = bearer(req.headers());
    let ok = given.is_some_and(|g| {
        use subtle::ConstantTimeEq;
        g.len() == token.len() && bool::from(g.as_bytes().ct_eq(token.as_bytes()))
    });
    if ok {
        next.run(req).await
    } else {
        ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "this server needs a token: send Authorization: Bearer <token>",
        )
        .into_response()
    }
}

fn bearer(h: &HeaderMap) -> Option<&str> {
    if let Some(v) = h.get("authorization").and_then(|v| v.to_str().ok()) {
        let (scheme, rest) = v.split_once(' ')?;
        return scheme.eq_ignore_ascii_case("bearer").then_some(rest.trim());
    }
    h.get("x-api-key").and_then(|v| v.to_str().ok())
}

// ---------------------------------------------------------------------------------------------
// Health and assistants

/// The server is up.
#[utoipa::path(get, path = "/ok", responses((status = 200, body = Health)))]
async fn ok() -> Json<Health> {
    Json(Health { ok: true })
}

/// What this server is.
#[utoipa::path(get, path = "/info", responses((status = 200, body = Object)))]
async fn info(State(shared): S) -> Json<Value> {
    Json(json!({
        "name": "cairn",
        "version": env!("CARGO_PKG_VERSION"),
        "flags": {"assistants": true, "crons": false, "langsmith": false},
        "database": format!("{:?}", shared.db.engine()).to_lowercase(),
    }))
}

fn assistant_id(graph_id: &str) -> String {
    uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_DNS, graph_id.as_bytes()).to_string()
}

fn assistant(shared: &Shared) -> Assistant {
    let id = assistant_id(&shared.cfg.graph_id);
    let at = iso(shared.started_ms);
    Assistant {
        assistant_id: id.clone(),
        graph_id: shared.cfg.graph_id.clone(),
        agent_id: id,
        name: shared.agent.name().unwrap_or("cairn").to_owned(),
        description: shared.agent.description().map(str::to_owned),
        config: json!({}),
        context: json!({}),
        metadata: json!({"created_by": "system"}),
        capabilities: json!({"ap.io.messages": true, "ap.io.streaming": true}),
        version: 1,
        created_at: at.clone(),
        updated_at: at,
    }
}

/// Resolves an assistant reference: the graph id, the agent's name or the assistant id.
fn find_assistant(shared: &Shared, id: Option<&str>) -> ApiResult<Assistant> {
    let a = assistant(shared);
    match id {
        None => Ok(a),
        Some(id) if id == a.assistant_id || id == a.graph_id || id == a.name => Ok(a),
        Some(id) => Err(ApiError::not_found(format!(
            "assistant {id} not found; this server runs {:?} (graph id {:?})",
            a.name, a.graph_id
        ))),
    }
}

fn matching_assistants(shared: &Shared, q: &AssistantSearch) -> Vec<Assistant> {
    let a = assistant(shared);
    let meta = a.metadata.as_object().cloned().unwrap_or_default();
    let keep = q.graph_id.as_ref().is_none_or(|g| *g == a.graph_id)
        && q.name.as_ref().is_none_or(|n| *n == a.name)
        && cairn_core::checkpoint::metadata_matches(&meta, &q.metadata)
        && q.offset == 0
        && q.limit != Some(0);
    if keep { vec![a] } else { Vec::new() }
}

/// Lists the assistants (one: the deep agent).
#[utoipa::path(post, path = "/assistants/search", request_body = AssistantSearch,
    responses((status = 200, body = Vec<Assistant>)))]
async fn search_assistants(
    State(shared): S,
    Body(q): Body<AssistantSearch>,
) -> Json<Vec<Assistant>> {
    Json(matching_assistants(&shared, &q))
}

/// One assistant.
#[utoipa::path(get, path = "/assistants/{assistant_id}",
    responses((status = 200, body = Assistant), (status = 404, body = ErrorResponse)))]
async fn get_assistant(State(shared): S, Path(id): Path<String>) -> ApiResult<Json<Assistant>> {
    find_assistant(&shared, Some(&id)).map(Json)
}

fn schemas(shared: &Shared) -> Value {
    let a = assistant(shared);
    json!({
        "graph_id": a.graph_id,
        "agent_id": a.agent_id,
        "input_schema": {"type": "object", "properties": {"messages": {"type": "array", "items": {"type": "object"}}}},
        "output_schema": {"type": "object", "properties": {"messages": {"type": "array", "items": {"type": "object"}}}},
        "state_schema": {"type": "object", "properties": {"messages": {"type": "array"}, "todos": {"type": "array"}}},
        "config_schema": {"type": "object", "properties": {"recursion_limit": {"type": "integer"}}},
    })
}

/// The assistant's input, output and state schemas.
#[utoipa::path(get, path = "/assistants/{assistant_id}/schemas",
    responses((status = 200, body = Object), (status = 404, body = ErrorResponse)))]
async fn get_assistant_schemas(State(shared): S, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    find_assistant(&shared, Some(&id))?;
    Ok(Json(schemas(&shared)))
}

/// Lists the agents (Agent Protocol).
#[utoipa::path(post, path = "/agents/search", request_body = AssistantSearch,
    responses((status = 200, body = Vec<Assistant>)))]
async fn search_agents(State(shared): S, Body(q): Body<AssistantSearch>) -> Json<Vec<Assistant>> {
    Json(matching_assistants(&shared, &q))
}

/// One agent (Agent Protocol).
#[utoipa::path(get, path = "/agents/{agent_id}",
    responses((status = 200, body = Assistant), (status = 404, body = ErrorResponse)))]
async fn get_agent(State(shared): S, Path(id): Path<String>) -> ApiResult<Json<Assistant>> {
    find_assistant(&shared, Some(&id)).map(Json)
}

/// The agent's schemas (Agent Protocol).
#[utoipa::path(get, path = "/agents/{agent_id}/schemas",
    responses((status = 200, body = Object), (status = 404, body = ErrorResponse)))]
async fn get_agent_schemas(State(shared): S, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    find_assistant(&shared, Some(&id))?;
    Ok(Json(schemas(&shared)))
}

// ---------------------------------------------------------------------------------------------
// Threads

fn thread_status(info: &ThreadInfo, active: bool) -> &'static str {
    if active {
        return "busy";
    }
    match info.status {
        RunStatus::Interrupted => "interrupted",
        RunStatus::Failed => "error",
        _ => "idle",
    }
}

fn interrupts_map(t: &Transcript) -> Map<String, Value> {
    let mut m = Map::new();
    for i in &t.interrupts {
        m.insert(i.call_id.clone(), Value::Array(vec![interrupt_json(i)]));
    }
    m
}

async fn thread_view(shared: &Shared, info: ThreadInfo) -> ApiResult<Thread> {
    let t = ThreadCursor::new(Arc::clone(&shared.cp), info.id.clone())
        .load()
        .await?;
    let active = !shared.runs.active(&info.id).await?.is_empty();
    Ok(Thread {
        thread_id: info.id.clone(),
        created_at: iso(info.created_at_ms),
        updated_at: iso(info.updated_at_ms),
        status: thread_status(&info, active).to_owned(),
        values: values_json(&t),
        interrupts: interrupts_map(&t),
        metadata: info.metadata,
    })
}

async fn thread_info(shared: &Shared, id: &str) -> ApiResult<ThreadInfo> {
    shared
        .cp
        .thread(id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("thread {id} not found")))
}

/// Creates a thread.
#[utoipa::path(post, path = "/threads", request_body = ThreadCreate,
    responses((status = 200, body = Thread), (status = 409, body = ErrorResponse), (status = 422, body = ErrorResponse)))]
async fn create_thread(State(shared): S, Body(req): Body<ThreadCreate>) -> ApiResult<Json<Thread>> {
    if let Some(id) = &req.thread_id {
        check_id(id)?;
        if let Some(info) = shared.cp.thread(id).await? {
            return match req.if_exists.as_deref() {
                Some("do_nothing") => Ok(Json(thread_view(&shared, info).await?)),
                None | Some("raise") => {
                    Err(ApiError::conflict(format!("thread {id} exists already")))
                }
                Some(other) => Err(ApiError::invalid(format!(
                    "if_exists must be raise or do_nothing, not {other:?}"
                ))),
            };
        }
    }
    let info = shared
        .cp
        .create_thread(req.thread_id.as_deref(), req.metadata)
        .await?;
    Ok(Json(thread_view(&shared, info).await?))
}

fn check_id(id: &str) -> ApiResult<()> {
    if id.is_empty() || id.len() > 200 || id.chars().any(char::is_control) {
        return Err(ApiError::invalid("ids are 1–200 printable characters"));
    }
    Ok(())
}

/// Searches threads, most recently updated first.
#[utoipa::path(post, path = "/threads/search", request_body = ThreadSearch,
    responses((status = 200, body = Vec<Thread>), (status = 422, body = ErrorResponse)))]
async fn search_threads(
    State(shared): S,
    Body(q): Body<ThreadSearch>,
) -> ApiResult<Json<Vec<Thread>>> {
    if q.limit == 0 || q.limit > 1000 {
        return Err(ApiError::invalid("limit must be 1–1000"));
    }
    if let Some(s) = &q.status
        && !matches!(s.as_str(), "idle" | "busy" | "interrupted" | "error")
    {
        return Err(ApiError::invalid(format!(
            "status must be idle, busy, interrupted or error, not {s:?}"
        )));
    }
    let mut query = ThreadQuery::default();
    query.metadata = q.metadata.clone();
    if q.status.is_none() {
        query.limit = Some(q.limit);
        query.offset = q.offset;
    }
    let mut out = Vec::new();
    let mut skipped = 0;
    for info in shared.cp.list_threads(query).await? {
        let view = thread_view(&shared, info).await?;
        if let Some(s) = &q.status {
            if &view.status != s {
                continue;
            }
            if skipped < q.offset {
                skipped += 1;
                continue;
            }
        }
        out.push(view);
        if out.len() >= q.limit {
            break;
        }
    }
    Ok(Json(out))
}

/// A thread with its state (`values.messages`).
#[utoipa::path(get, path = "/threads/{thread_id}",
    responses((status = 200, body = Thread), (status = 404, body = ErrorResponse)))]
async fn get_thread(State(shared): S, Path(id): Path<String>) -> ApiResult<Json<Thread>> {
    let info = thread_info(&shared, &id).await?;
    Ok(Json(thread_view(&shared, info).await?))
}

/// Merges metadata into a thread's.
#[utoipa::path(patch, path = "/threads/{thread_id}", request_body = ThreadPatch,
    responses((status = 200, body = Thread), (status = 404, body = ErrorResponse)))]
async fn patch_thread(
    State(shared): S,
    Path(id): Path<String>,
    Body(req): Body<ThreadPatch>,
) -> ApiResult<Json<Thread>> {
    shared.cp.update_metadata(&id, req.metadata).await?;
    let info = thread_info(&shared, &id).await?;
    Ok(Json(thread_view(&shared, info).await?))
}

/// Deletes a thread, cancelling its active runs.
#[utoipa::path(delete, path = "/threads/{thread_id}",
    responses((status = 204), (status = 404, body = ErrorResponse), (status = 409, body = ErrorResponse)))]
async fn delete_thread(State(shared): S, Path(id): Path<String>) -> ApiResult<StatusCode> {
    thread_info(&shared, &id).await?;
    for r in shared.runs.active(&id).await? {
        cancel_now(&shared, &r.run_id, CancelAction::Interrupt).await?;
    }
    shared.runs.delete_thread(&id).await?;
    if !shared.cp.delete_thread(&id).await? {
        return Err(ApiError::not_found(format!("thread {id} not found")));
    }
    Ok(StatusCode::NO_CONTENT)
}

fn state_view(t: &Transcript, created_at_ms: Option<u64>, parent: Option<u64>) -> ThreadState {
    let mut values = values_json(t);
    if !t.interrupts.is_empty()
        && let Some(o) = values.as_object_mut()
    {
        o.insert(
            "__interrupt__".into(),
            Value::Array(t.interrupts.iter().map(interrupt_json).collect()),
        );
    }
    let next = if t.pending.is_empty() {
        vec![]
    } else {
        vec!["tools".to_owned()]
    };
    ThreadState {
        values,
        next,
        checkpoint: json!({"checkpoint_id": t.head.to_string(), "checkpoint_ns": ""}),
        metadata: json!({"step": t.steps, "source": "loop", "status": t.status.as_str()}),
        created_at: created_at_ms.map(iso),
        parent_checkpoint: parent
            .map(|p| json!({"checkpoint_id": p.to_string(), "checkpoint_ns": ""})),
        tasks: t
            .interrupts
            .iter()
            .map(|i| json!({"id": i.call_id, "name": "tools", "interrupts": [interrupt_json(i)]}))
            .collect(),
        interrupts: t.interrupts.iter().map(interrupt_json).collect(),
    }
}

/// The thread's current state.
#[utoipa::path(get, path = "/threads/{thread_id}/state",
    responses((status = 200, body = ThreadState), (status = 404, body = ErrorResponse)))]
async fn get_thread_state(
    State(shared): S,
    Path(id): Path<String>,
) -> ApiResult<Json<ThreadState>> {
    let info = thread_info(&shared, &id).await?;
    let steps = shared.cp.steps(&id, "", None).await?;
    let t = Transcript::from_steps(&steps);
    let parent = steps.len().checked_sub(2).map(|i| steps[i].seq);
    Ok(Json(state_view(&t, Some(info.updated_at_ms), parent)))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
struct HistoryQuery {
    /// At most this many (default 10).
    limit: Option<usize>,
    /// Only states before this checkpoint id.
    before: Option<String>,
}

async fn history(
    shared: &Shared,
    id: &str,
    limit: usize,
    before: Option<u64>,
) -> ApiResult<Vec<ThreadState>> {
    thread_info(shared, id).await?;
    let steps = shared.cp.steps(id, "", None).await?;
    let mut t = Transcript::default();
    let mut states = Vec::new();
    let mut parent = None;
    for s in &steps {
        t.apply(s.seq, &s.delta);
        if before.is_none_or(|b| s.seq < b) {
            states.push(state_view(&t, Some(s.created_at_ms), parent));
        }
        parent = Some(s.seq);
    }
    states.reverse();
    states.truncate(limit.max(1));
    Ok(states)
}

fn before_id(v: Option<&Value>) -> ApiResult<Option<u64>> {
    let Some(v) = v else { return Ok(None) };
    let text = v
        .get("checkpoint_id")
        .unwrap_or(v)
        .as_str()
        .map(str::to_owned)
        .or_else(|| v.as_u64().map(|n| n.to_string()));
    match text {
        Some(t) => t.parse().map(Some).map_err(|_| {
            ApiError::invalid(format!(
                "no checkpoint {t:?}: checkpoint ids are step numbers"
            ))
        }),
        None => Err(ApiError::invalid("before must be a checkpoint id")),
    }
}

/// The thread's past states, newest first.
#[utoipa::path(get, path = "/threads/{thread_id}/history", params(HistoryQuery),
    responses((status = 200, body = Vec<ThreadState>), (status = 404, body = ErrorResponse)))]
async fn get_thread_history(
    State(shared): S,
    Path(id): Path<String>,
    Query(q): Query<HistoryQuery>,
) -> ApiResult<Json<Vec<ThreadState>>> {
    let before = before_id(q.before.map(Value::String).as_ref())?;
    Ok(Json(
        history(&shared, &id, q.limit.unwrap_or(10), before).await?,
    ))
}

/// The thread's past states, newest first (the form `langgraph_sdk` posts).
#[utoipa::path(post, path = "/threads/{thread_id}/history", request_body = HistoryRequest,
    responses((status = 200, body = Vec<ThreadState>), (status = 404, body = ErrorResponse)))]
async fn post_thread_history(
    State(shared): S,
    Path(id): Path<String>,
    Body(q): Body<HistoryRequest>,
) -> ApiResult<Json<Vec<ThreadState>>> {
    let before = before_id(q.before.as_ref())?;
    Ok(Json(history(&shared, &id, q.limit, before).await?))
}

/// Copies a thread (a fork sharing its steps).
#[utoipa::path(post, path = "/threads/{thread_id}/copy",
    responses((status = 200, body = Thread), (status = 404, body = ErrorResponse)))]
async fn copy_thread(State(shared): S, Path(id): Path<String>) -> ApiResult<Json<Thread>> {
    let info = thread_info(&shared, &id).await?;
    let t = ThreadCursor::new(Arc::clone(&shared.cp), id.clone())
        .load()
        .await?;
    let copy = if t.head == 0 {
        shared.cp.create_thread(None, info.metadata.clone()).await?
    } else {
        let c = shared.cp.fork(&id, t.head, None).await?;
        shared
            .cp
            .update_metadata(&c.id, info.metadata.clone())
            .await?;
        thread_info(&shared, &c.id).await?
    };
    Ok(Json(thread_view(&shared, copy).await?))
}

// ---------------------------------------------------------------------------------------------
// Runs

pub(crate) fn run_view(r: &RunRecord) -> Run {
    Run {
        run_id: r.run_id.clone(),
        thread_id: r.thread_id.clone(),
        assistant_id: r.assistant_id.clone(),
        created_at: iso(r.created_at_ms),
        updated_at: iso(r.updated_at_ms),
        status: r.status.as_str().to_owned(),
        metadata: r.metadata.clone(),
        multitask_strategy: r.multitask_strategy.as_str().to_owned(),
        error: r.error.clone(),
        cancel_reason: r.cancel.map(|c| c.as_str().to_owned()),
        attempts: r.attempts,
    }
}

/// How a created run is followed.
enum Follow {
    /// Nobody waits here.
    Background,
    /// This request waits for it (wait/stream): run it here when it can start now.
    Here,
}

struct Started {
    run: RunRecord,
    source: Source,
}

/// Validates and queues a run on `thread_id` (created as needed for stateless runs).
async fn start_run(
    shared: &Arc<Shared>,
    thread_id: Option<String>,
    mut req: RunCreate,
    follow: Follow,
) -> ApiResult<Started> {
    let a = find_assistant(
        shared,
        req.assistant_id.as_deref().or(req.agent_id.as_deref()),
    )?;
    let strategy = match req.multitask_strategy.as_deref() {
        None => MultitaskStrategy::Reject,
        Some(s) => MultitaskStrategy::parse(s).ok_or_else(|| {
            ApiError::invalid(format!(
                "multitask_strategy must be reject, interrupt, rollback or enqueue, not {s:?}"
            ))
        })?,
    };
    if let Some(m) = &req.stream_mode {
        let modes: Vec<&str> = match m {
            Value::String(s) => vec![s.as_str()],
            Value::Array(l) => l.iter().filter_map(Value::as_str).collect(),
            _ => {
                return Err(ApiError::invalid(
                    "stream_mode must be a name or a list of names",
                ));
            }
        };
        for m in modes {
            if !matches!(
                m,
                "values"
                    | "updates"
                    | "messages"
                    | "messages-tuple"
                    | "events"
                    | "custom"
                    | "debug"
            ) {
                return Err(ApiError::invalid(format!(
                    "stream_mode {m:?} is not one of values, updates, messages, messages-tuple, events, custom, debug"
                )));
            }
        }
    }
    let input = input_messages(&req)?;
    let resume = req.command.as_ref().and_then(|c| c.get("resume")).cloned();
    if req.command.is_some() && resume.is_none() {
        return Err(ApiError::invalid(
            "command must carry resume (goto and update are not supported)",
        ));
    }
    let stateless = thread_id.is_none();
    let thread_id = match thread_id {
        Some(id) => {
            if shared.cp.thread(&id).await?.is_none() {
                if req.if_not_exists.as_deref() == Some("create") {
                    check_id(&id)?;
                    let mut meta = Map::new();
                    meta.insert("graph_id".into(), json!(a.graph_id));
                    shared.cp.create_thread(Some(&id), meta).await?;
                } else {
                    return Err(ApiError::not_found(format!(
                        "thread {id} not found (create it first, or pass if_not_exists=create)"
                    )));
                }
            }
            id
        }
        None => {
            let mut meta = Map::new();
            meta.insert("stateless".into(), json!(true));
            shared.cp.create_thread(None, meta).await?.id
        }
    };
    let t = ThreadCursor::new(Arc::clone(&shared.cp), thread_id.clone())
        .load()
        .await?;
    let active = shared.runs.active(&thread_id).await?;
    // A resume answers the interrupts the thread waits on now (checked again when it runs).
    if let Some(r) = &resume {
        if active.is_empty() {
            decisions(r, &t.interrupts)?;
        }
    } else if input.is_empty() {
        let unfinished = t.steps > 0 && matches!(t.status, RunStatus::Running | RunStatus::Failed);
        if !unfinished || !active.is_empty() {
            return Err(ApiError::invalid(
                "the run has no input: give input {\"messages\": [...]} (or command.resume for a paused run)",
            ));
        }
    } else if t.status == RunStatus::Interrupted && active.is_empty() {
        return Err(ApiError::conflict(format!(
            "thread {thread_id} is paused on {} call(s) waiting for a decision; resume it with command.resume first",
            t.interrupts.len()
        )));
    }
    if stateless {
        let mut extra = Map::new();
        extra.insert("__stateless".into(), json!(true));
        if matches!(follow, Follow::Here) {
            extra.insert("__keep_until_read".into(), json!(true));
        }
        if req.on_completion.is_none() {
            req.on_completion = Some("delete".into());
        }
        let mut kwargs =
            serde_json::to_value(&req).map_err(|e| ApiError::internal(e.to_string()))?;
        if let Some(o) = kwargs.as_object_mut() {
            o.extend(extra);
        }
        return queue(
            shared,
            thread_id,
            a.assistant_id,
            kwargs,
            req.metadata,
            strategy,
            follow,
        )
        .await;
    }
    let kwargs = serde_json::to_value(&req).map_err(|e| ApiError::internal(e.to_string()))?;
    queue(
        shared,
        thread_id,
        a.assistant_id,
        kwargs,
        req.metadata,
        strategy,
        follow,
    )
    .await
}

async fn queue(
    shared: &Arc<Shared>,
    thread_id: String,
    assistant_id: String,
    kwargs: Value,
    metadata: Map<String, Value>,
    strategy: MultitaskStrategy,
    follow: Follow,
) -> ApiResult<Started> {
    let permit = match follow {
        Follow::Here => Arc::clone(&shared.slots).try_acquire_owned().ok(),
        Follow::Background => None,
    };
    let mut new = NewRun::new(thread_id, assistant_id, kwargs);
    new.metadata = metadata;
    new.strategy = strategy;
    new.claim_for = permit
        .as_ref()
        .map(|_| (shared.cfg.worker_id.clone(), shared.cfg.lease));
    let created = shared.runs.create(new).await?;
    for d in &created.displaced {
        if let Some(local) = shared.local().get(&d.run_id) {
            let _ = local
                .cancel
                .send(Some(if strategy == MultitaskStrategy::Rollback {
                    CancelAction::Rollback
                } else {
                    CancelAction::Interrupt
                }));
        }
    }
    let source = match (created.claimed, permit) {
        (true, Some(permit)) => Source::Local(crate::worker::spawn_run(
            shared,
            created.run.clone(),
            permit,
        )),
        _ => {
            shared.wake.notify_one();
            Source::Poll
        }
    };
    Ok(Started {
        run: created.run,
        source,
    })
}

/// Waits until the run is no longer active; the final record (`None`: rolled back).
async fn wait_done(shared: &Shared, run_id: &str, source: Source) -> ApiResult<Option<RunRecord>> {
    if let Source::Local(mut rx) = source {
        loop {
            match rx.recv().await {
                Ok(Signal::Done) | Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
                _ => {}
            }
        }
    }
    loop {
        let r = shared.runs.get(run_id).await?;
        match r {
            Some(r) if r.status.is_active() => {}
            other => return Ok(other),
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

async fn wait_response(shared: &Shared, run: RunRecord) -> ApiResult<Json<RunWaitResponse>> {
    let t = ThreadCursor::new(Arc::clone(&shared.cp), run.thread_id.clone())
        .load()
        .await?;
    let values = values_json(&t);
    let messages = values["messages"].as_array().cloned().unwrap_or_default();
    let error = (run.status == RunState::Error).then(|| {
        json!({"error": "RunError", "message": shared.scrub(run.error.as_deref().unwrap_or("the run failed"))})
    });
    Ok(Json(RunWaitResponse {
        run: run_view(&run),
        values,
        messages,
        interrupt: t.interrupts.iter().map(interrupt_json).collect(),
        error,
    }))
}

async fn run_and_wait(
    shared: Arc<Shared>,
    thread_id: Option<String>,
    req: RunCreate,
) -> ApiResult<Json<RunWaitResponse>> {
    let stateless = thread_id.is_none();
    let started = start_run(&shared, thread_id, req, Follow::Here).await?;
    let id = started.run.run_id.clone();
    let thread = started.run.thread_id.clone();
    let done = wait_done(&shared, &id, started.source).await?;
    let Some(run) = done else {
        return Err(ApiError::conflict(format!("run {id} was rolled back")));
    };
    let out = wait_response(&shared, run).await;
    if stateless {
        let _ = shared.runs.delete_thread(&thread).await;
        let _ = shared.cp.delete_thread(&thread).await;
    }
    out
}

fn stream_response(
    shared: Arc<Shared>,
    started: Started,
    req: &RunCreate,
    cleanup: bool,
) -> Response {
    let modes = Modes::new(
        req.stream_mode.as_ref(),
        req.stream_subgraphs.unwrap_or(false),
        req.on_disconnect.as_deref(),
    );
    let thread = started.run.thread_id.clone();
    let after: Option<Box<dyn FnOnce() -> futures::future::BoxFuture<'static, ()> + Send>> =
        if cleanup {
            let s = Arc::clone(&shared);
            let run_id = started.run.run_id.clone();
            let thread = thread.clone();
            Some(Box::new(move || {
                Box::pin(async move {
                    let _ = wait_done(&s, &run_id, Source::Poll).await;
                    let _ = s.runs.delete_thread(&thread).await;
                    let _ = s.cp.delete_thread(&thread).await;
                })
            }))
        } else {
            None
        };
    let location = format!("/threads/{thread}/runs/{}/stream", started.run.run_id);
    let mut resp = crate::stream::respond(
        shared,
        started.run.run_id,
        thread,
        modes,
        started.source,
        after,
    )
    .into_response();
    if let Ok(v) = location.parse() {
        resp.headers_mut().insert("content-location", v);
    }
    resp
}

/// Starts a run in the background.
#[utoipa::path(post, path = "/threads/{thread_id}/runs", request_body = RunCreate,
    responses((status = 200, body = Run), (status = 404, body = ErrorResponse), (status = 409, body = ErrorResponse), (status = 422, body = ErrorResponse)))]
async fn create_thread_run(
    State(shared): S,
    Path(id): Path<String>,
    Body(req): Body<RunCreate>,
) -> ApiResult<Json<Run>> {
    let started = start_run(&shared, Some(id), req, Follow::Background).await?;
    Ok(Json(run_view(&started.run)))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
struct ListQuery {
    /// At most this many (default 10).
    limit: Option<usize>,
    /// Skip this many.
    offset: Option<usize>,
    /// Only runs in this status.
    status: Option<String>,
}

fn parse_status(s: Option<&str>) -> ApiResult<Option<RunState>> {
    s.map(|s| {
        RunState::parse(s).ok_or_else(|| {
            ApiError::invalid(format!(
                "status must be pending, running, success, error, timeout or interrupted, not {s:?}"
            ))
        })
    })
    .transpose()
}

/// The thread's runs, newest first.
#[utoipa::path(get, path = "/threads/{thread_id}/runs", params(ListQuery),
    responses((status = 200, body = Vec<Run>), (status = 404, body = ErrorResponse)))]
async fn list_thread_runs(
    State(shared): S,
    Path(id): Path<String>,
    Query(q): Query<ListQuery>,
) -> ApiResult<Json<Vec<Run>>> {
    thread_info(&shared, &id).await?;
    let mut f = RunFilter::default();
    f.thread_id = Some(id);
    f.status = parse_status(q.status.as_deref())?;
    f.limit = q.limit.unwrap_or(10);
    f.offset = q.offset.unwrap_or(0);
    Ok(Json(
        shared.runs.list(f).await?.iter().map(run_view).collect(),
    ))
}

/// Runs and waits for the end; answers the final state.
#[utoipa::path(post, path = "/threads/{thread_id}/runs/wait", request_body = RunCreate,
    responses((status = 200, body = RunWaitResponse), (status = 404, body = ErrorResponse), (status = 409, body = ErrorResponse), (status = 422, body = ErrorResponse)))]
async fn wait_thread_run(
    State(shared): S,
    Path(id): Path<String>,
    Body(req): Body<RunCreate>,
) -> ApiResult<Json<RunWaitResponse>> {
    run_and_wait(shared, Some(id), req).await
}

/// Runs and streams its events (SSE).
#[utoipa::path(post, path = "/threads/{thread_id}/runs/stream", request_body = RunCreate,
    responses((status = 200, description = "text/event-stream"), (status = 404, body = ErrorResponse), (status = 409, body = ErrorResponse), (status = 422, body = ErrorResponse)))]
async fn stream_thread_run(
    State(shared): S,
    Path(id): Path<String>,
    Body(req): Body<RunCreate>,
) -> ApiResult<Response> {
    let started = start_run(&shared, Some(id), req.clone(), Follow::Here).await?;
    Ok(stream_response(shared, started, &req, false))
}

async fn run_of_thread(shared: &Shared, thread: &str, run: &str) -> ApiResult<RunRecord> {
    match shared.runs.get(run).await? {
        Some(r) if r.thread_id == thread => Ok(r),
        _ => Err(ApiError::not_found(format!(
            "run {run} not found in thread {thread}"
        ))),
    }
}

/// One run.
#[utoipa::path(get, path = "/threads/{thread_id}/runs/{run_id}",
    responses((status = 200, body = Run), (status = 404, body = ErrorResponse)))]
async fn get_thread_run(
    State(shared): S,
    Path((t, r)): Path<(String, String)>,
) -> ApiResult<Json<Run>> {
    Ok(Json(run_view(&run_of_thread(&shared, &t, &r).await?)))
}

/// Deletes a finished run.
#[utoipa::path(delete, path = "/threads/{thread_id}/runs/{run_id}",
    responses((status = 204), (status = 404, body = ErrorResponse), (status = 409, body = ErrorResponse)))]
async fn delete_thread_run(
    State(shared): S,
    Path((t, r)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    run_of_thread(&shared, &t, &r).await?;
    shared.runs.delete(&r).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn join(shared: &Shared, run: RunRecord) -> ApiResult<Json<RunWaitResponse>> {
    let id = run.run_id.clone();
    let local = shared.local().get(&id).map(|l| l.events.subscribe());
    let source = local.map_or(Source::Poll, Source::Local);
    match wait_done(shared, &id, source).await? {
        Some(r) => wait_response(shared, r).await,
        None => Err(ApiError::conflict(format!("run {id} was rolled back"))),
    }
}

/// Waits for a run to end; answers the final state.
#[utoipa::path(get, path = "/threads/{thread_id}/runs/{run_id}/join",
    responses((status = 200, body = RunWaitResponse), (status = 404, body = ErrorResponse)))]
async fn join_thread_run(
    State(shared): S,
    Path((t, r)): Path<(String, String)>,
) -> ApiResult<Json<RunWaitResponse>> {
    let run = run_of_thread(&shared, &t, &r).await?;
    join(&shared, run).await
}

fn follow_stream(shared: Arc<Shared>, run: RunRecord, q: &StreamQuery) -> Response {
    let local = shared
        .local()
        .get(&run.run_id)
        .map(|l| l.events.subscribe());
    let source = local.map_or(Source::Poll, Source::Local);
    let req = RunCreate {
        stream_mode: q.stream_mode.clone().map(Value::String),
        on_disconnect: Some("continue".into()),
        ..Default::default()
    };
    stream_response(shared, Started { run, source }, &req, false)
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
struct StreamQuery {
    /// A stream mode (default `values`).
    stream_mode: Option<String>,
}

/// Streams an existing run's events from now on (SSE).
#[utoipa::path(get, path = "/threads/{thread_id}/runs/{run_id}/stream", params(StreamQuery),
    responses((status = 200, description = "text/event-stream"), (status = 404, body = ErrorResponse)))]
async fn join_thread_run_stream(
    State(shared): S,
    Path((t, r)): Path<(String, String)>,
    Query(q): Query<StreamQuery>,
) -> ApiResult<Response> {
    let run = run_of_thread(&shared, &t, &r).await?;
    Ok(follow_stream(shared, run, &q))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
struct CancelQuery {
    /// Wait for the run to stop.
    wait: Option<String>,
    /// `interrupt` (default) or `rollback`.
    action: Option<String>,
}

async fn cancel_now(shared: &Shared, run_id: &str, action: CancelAction) -> ApiResult<RunRecord> {
    let r = shared.runs.cancel(run_id, action).await?;
    if let Some(local) = shared.local().get(run_id) {
        let _ = local.cancel.send(Some(action));
    }
    Ok(r)
}

async fn cancel(shared: &Shared, run: RunRecord, q: &CancelQuery) -> ApiResult<StatusCode> {
    let action = match q.action.as_deref() {
        None | Some("interrupt") => CancelAction::Interrupt,
        Some("rollback") => CancelAction::Rollback,
        Some(other) => {
            return Err(ApiError::invalid(format!(
                "action must be interrupt or rollback, not {other:?}"
            )));
        }
    };
    cancel_now(shared, &run.run_id, action).await?;
    if matches!(q.wait.as_deref(), Some("1" | "true" | "True")) {
        wait_done(shared, &run.run_id, Source::Poll).await?;
    }
    Ok(StatusCode::NO_CONTENT)
}

/// Cancels a run: a pending one at once, a running one within a lease renewal.
#[utoipa::path(post, path = "/threads/{thread_id}/runs/{run_id}/cancel", params(CancelQuery),
    responses((status = 204), (status = 404, body = ErrorResponse), (status = 409, body = ErrorResponse)))]
async fn cancel_thread_run(
    State(shared): S,
    Path((t, r)): Path<(String, String)>,
    Query(q): Query<CancelQuery>,
) -> ApiResult<StatusCode> {
    let run = run_of_thread(&shared, &t, &r).await?;
    cancel(&shared, run, &q).await
}

/// Starts a run in the background: on `thread_id` (Agent Protocol), else on a new thread
/// deleted when it ends (unless `on_completion` is `keep`).
#[utoipa::path(post, path = "/runs", request_body = RunCreate,
    responses((status = 200, body = Run), (status = 404, body = ErrorResponse), (status = 409, body = ErrorResponse), (status = 422, body = ErrorResponse)))]
async fn create_run(State(shared): S, Body(req): Body<RunCreate>) -> ApiResult<Json<Run>> {
    let thread = req.thread_id.clone();
    let started = start_run(&shared, thread, req, Follow::Background).await?;
    Ok(Json(run_view(&started.run)))
}

/// Runs and waits (stateless unless `thread_id` is given).
#[utoipa::path(post, path = "/runs/wait", request_body = RunCreate,
    responses((status = 200, body = RunWaitResponse), (status = 404, body = ErrorResponse), (status = 409, body = ErrorResponse), (status = 422, body = ErrorResponse)))]
async fn wait_run(
    State(shared): S,
    Body(req): Body<RunCreate>,
) -> ApiResult<Json<RunWaitResponse>> {
    let thread = req.thread_id.clone();
    run_and_wait(shared, thread, req).await
}

/// Runs and streams (stateless unless `thread_id` is given).
#[utoipa::path(post, path = "/runs/stream", request_body = RunCreate,
    responses((status = 200, description = "text/event-stream"), (status = 404, body = ErrorResponse), (status = 409, body = ErrorResponse), (status = 422, body = ErrorResponse)))]
async fn stream_run(State(shared): S, Body(req): Body<RunCreate>) -> ApiResult<Response> {
    let thread = req.thread_id.clone();
    let stateless = thread.is_none();
    let started = start_run(&shared, thread, req.clone(), Follow::Here).await?;
    Ok(stream_response(shared, started, &req, stateless))
}

/// Searches runs, newest first.
#[utoipa::path(post, path = "/runs/search", request_body = RunSearch,
    responses((status = 200, body = Vec<Run>), (status = 422, body = ErrorResponse)))]
async fn search_runs(State(shared): S, Body(q): Body<RunSearch>) -> ApiResult<Json<Vec<Run>>> {
    let mut f = RunFilter::default();
    f.thread_id = q.thread_id;
    f.status = parse_status(q.status.as_deref())?;
    f.metadata = q.metadata;
    f.limit = q.limit.clamp(1, 1000);
    f.offset = q.offset;
    Ok(Json(
        shared.runs.list(f).await?.iter().map(run_view).collect(),
    ))
}

async fn run_by_id(shared: &Shared, id: &str) -> ApiResult<RunRecord> {
    shared
        .runs
        .get(id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("run {id} not found")))
}

/// One run (Agent Protocol).
#[utoipa::path(get, path = "/runs/{run_id}",
    responses((status = 200, body = Run), (status = 404, body = ErrorResponse)))]
async fn get_run(State(shared): S, Path(id): Path<String>) -> ApiResult<Json<Run>> {
    Ok(Json(run_view(&run_by_id(&shared, &id).await?)))
}

/// Deletes a finished run (Agent Protocol).
#[utoipa::path(delete, path = "/runs/{run_id}",
    responses((status = 204), (status = 404, body = ErrorResponse), (status = 409, body = ErrorResponse)))]
async fn delete_run(State(shared): S, Path(id): Path<String>) -> ApiResult<StatusCode> {
    run_by_id(&shared, &id).await?;
    shared.runs.delete(&id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Waits for a run (Agent Protocol).
#[utoipa::path(get, path = "/runs/{run_id}/wait",
    responses((status = 200, body = RunWaitResponse), (status = 404, body = ErrorResponse)))]
async fn join_run(State(shared): S, Path(id): Path<String>) -> ApiResult<Json<RunWaitResponse>> {
    let run = run_by_id(&shared, &id).await?;
    join(&shared, run).await
}

/// Streams a run (Agent Protocol).
#[utoipa::path(get, path = "/runs/{run_id}/stream", params(StreamQuery),
    responses((status = 200, description = "text/event-stream"), (status = 404, body = ErrorResponse)))]
async fn join_run_stream(
    State(shared): S,
    Path(id): Path<String>,
    Query(q): Query<StreamQuery>,
) -> ApiResult<Response> {
    let run = run_by_id(&shared, &id).await?;
    Ok(follow_stream(shared, run, &q))
}

/// Cancels a run (Agent Protocol).
#[utoipa::path(post, path = "/runs/{run_id}/cancel", params(CancelQuery),
    responses((status = 204), (status = 404, body = ErrorResponse), (status = 409, body = ErrorResponse)))]
async fn cancel_run(
    State(shared): S,
    Path(id): Path<String>,
    Query(q): Query<CancelQuery>,
) -> ApiResult<StatusCode> {
    let run = run_by_id(&shared, &id).await?;
    cancel(&shared, run, &q).await
}

// ---------------------------------------------------------------------------------------------
// Store

fn item_view(i: cairn_core::Item) -> StoreItem {
    StoreItem {
        namespace: i.namespace,
        key: i.key,
        value: i.value,
        created_at: iso(i.created_at_ms),
        updated_at: iso(i.updated_at_ms),
    }
}

fn check_namespace(ns: &[String]) -> ApiResult<()> {
    if ns.is_empty() {
        return Err(ApiError::invalid("the namespace needs at least one label"));
    }
    if ns.iter().any(|l| l.is_empty() || l.contains('.')) {
        return Err(ApiError::invalid(
            "namespace labels are non-empty and contain no '.'",
        ));
    }
    Ok(())
}

/// Stores an item.
#[utoipa::path(put, path = "/store/items", request_body = StorePut,
    responses((status = 204), (status = 422, body = ErrorResponse)))]
async fn put_item(State(shared): S, Body(req): Body<StorePut>) -> ApiResult<StatusCode> {
    check_namespace(&req.namespace)?;
    if req.key.is_empty() {
        return Err(ApiError::invalid("the key is empty"));
    }
    shared
        .store
        .put(&req.namespace, &req.key, Value::Object(req.value))
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Reads an item (`namespace` dot-separated).
#[utoipa::path(get, path = "/store/items", params(("namespace" = Option<String>, Query, description = "dot-separated namespace"), ("key" = String, Query, description = "the key")),
    responses((status = 200, body = StoreItem), (status = 404, body = ErrorResponse), (status = 422, body = ErrorResponse)))]
async fn get_item(State(shared): S, Query(q): Query<StoreGet>) -> ApiResult<Json<StoreItem>> {
    let ns: Vec<String> = q
        .namespace
        .as_deref()
        .filter(|s| !s.is_empty())
        .map(|s| s.split('.').map(str::to_owned).collect())
        .unwrap_or_default();
    check_namespace(&ns)?;
    match shared.store.get(&ns, &q.key).await? {
        Some(i) => Ok(Json(item_view(i))),
        None => Err(ApiError::not_found(format!(
            "no item {:?} in namespace {}",
            q.key,
            ns.join(".")
        ))),
    }
}

/// Deletes an item.
#[utoipa::path(delete, path = "/store/items", request_body = StoreDelete,
    responses((status = 204), (status = 422, body = ErrorResponse)))]
async fn delete_item(State(shared): S, Body(req): Body<StoreDelete>) -> ApiResult<StatusCode> {
    check_namespace(&req.namespace)?;
    shared.store.delete(&req.namespace, &req.key).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Searches items under a namespace prefix.
#[utoipa::path(post, path = "/store/items/search", request_body = StoreSearch,
    responses((status = 200, body = StoreItems), (status = 422, body = ErrorResponse)))]
async fn search_items(State(shared): S, Body(q): Body<StoreSearch>) -> ApiResult<Json<StoreItems>> {
    let all = shared
        .store
        .search(&q.namespace_prefix, cairn_core::SearchQuery::default())
        .await?;
    let items = all
        .into_iter()
        .filter(|i| {
            q.filter
                .as_ref()
                .is_none_or(|f| f.iter().all(|(k, v)| i.value.get(k) == Some(v)))
        })
        .filter(|i| {
            q.query.as_ref().is_none_or(|text| {
                i.value
                    .to_string()
                    .to_lowercase()
                    .contains(&text.to_lowercase())
            })
        })
        .skip(q.offset)
        .take(q.limit.clamp(1, 1000))
        .map(item_view)
        .collect();
    Ok(Json(StoreItems { items }))
}

/// Lists namespaces.
#[utoipa::path(post, path = "/store/namespaces", request_body = StoreNamespaces,
    responses((status = 200, body = Namespaces), (status = 422, body = ErrorResponse)))]
async fn list_namespaces(
    State(shared): S,
    Body(q): Body<StoreNamespaces>,
) -> ApiResult<Json<Namespaces>> {
    let all = shared
        .store
        .search(&q.prefix, cairn_core::SearchQuery::default())
        .await?;
    let mut seen: Vec<Vec<String>> = Vec::new();
    for i in all {
        let mut ns = i.namespace;
        if !q.suffix.is_empty() && !ns.ends_with(&q.suffix) {
            continue;
        }
        if let Some(d) = q.max_depth {
            ns.truncate(d);
        }
        if seen.last() != Some(&ns) && !seen.contains(&ns) {
            seen.push(ns);
        }
    }
    let namespaces = seen
        .into_iter()
        .skip(q.offset)
        .take(q.limit.clamp(1, 1000))
        .collect();
    Ok(Json(Namespaces { namespaces }))
}
