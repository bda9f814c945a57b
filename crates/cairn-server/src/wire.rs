//! The protocol's JSON shapes (Agent Protocol field names, as LangGraph's server and
//! `langgraph_sdk` use them) and the conversions between them and cairn's types.
//!
//! Messages are written with both vocabularies: `type` (`human`, `ai`, `tool`, `system`, as
//! LangChain serializes them) and `role` (`user`, `assistant`, `tool`, `system`, as the Agent
//! Protocol's `Message` schema says), so readers of either find what they look for. Input
//! messages are read in either form.

use cairn_core::{Content, FunctionCall, FunctionResult, Interrupt, Message, Role, Transcript};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use utoipa::ToSchema;

use crate::error::ApiError;

/// An RFC 3339 time (UTC, milliseconds) from milliseconds since the Unix epoch.
pub fn iso(ms: u64) -> String {
    let secs = ms / 1000;
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (y, m, d) = civil(days as i64);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60,
        ms % 1000
    )
}

/// Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
fn civil(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// An error answer.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ErrorResponse {
    /// A short machine-readable code (`not_found`, `conflict`, `invalid_request`, …).
    pub code: String,
    /// What went wrong, for a human.
    pub message: String,
    /// LangGraph's servers answer with `detail`; the same text.
    pub detail: String,
}

/// `GET /ok`.
#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    /// Always `true`.
    pub ok: bool,
}

/// `POST /threads`.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(default)]
pub struct ThreadCreate {
    /// The id (random when absent).
    pub thread_id: Option<String>,
    /// Metadata.
    pub metadata: Map<String, Value>,
    /// `raise` (409 when it exists) or `do_nothing` (return the existing thread).
    pub if_exists: Option<String>,
}

/// `POST /threads/search`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(default)]
pub struct ThreadSearch {
    /// Only threads with these metadata pairs.
    pub metadata: Map<String, Value>,
    /// Only threads in this status (`idle`, `busy`, `interrupted`, `error`).
    pub status: Option<String>,
    /// At most this many (1–1000; default 10).
    pub limit: usize,
    /// Skip this many.
    pub offset: usize,
}

impl Default for ThreadSearch {
    fn default() -> Self {
        ThreadSearch {
            metadata: Map::new(),
            status: None,
            limit: 10,
            offset: 0,
        }
    }
}

/// `PATCH /threads/{thread_id}`.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(default)]
pub struct ThreadPatch {
    /// Metadata merged into the thread's (`null` removes a key).
    pub metadata: Map<String, Value>,
}

/// A thread.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Thread {
    /// Its id.
    pub thread_id: String,
    /// Created at (RFC 3339).
    pub created_at: String,
    /// Last change.
    pub updated_at: String,
    /// Metadata.
    pub metadata: Map<String, Value>,
    /// `idle`, `busy`, `interrupted` or `error`.
    pub status: String,
    /// The state: `messages` and the session state (todos, files of state backends).
    pub values: Value,
    /// The calls a paused run waits on, by task id.
    pub interrupts: Map<String, Value>,
}

/// A thread's state at one checkpoint.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ThreadState {
    /// The state values.
    pub values: Value,
    /// What runs next: `["tools"]` while tool calls wait, else empty.
    pub next: Vec<String>,
    /// The checkpoint (`checkpoint_id` is the step number).
    pub checkpoint: Value,
    /// Checkpoint metadata (`step`, `source`).
    pub metadata: Value,
    /// When the step was committed.
    pub created_at: Option<String>,
    /// The previous checkpoint.
    pub parent_checkpoint: Option<Value>,
    /// Pending tasks (one per paused call).
    pub tasks: Vec<Value>,
    /// The interrupts of a paused run.
    pub interrupts: Vec<Value>,
}

/// `POST /threads/{thread_id}/history`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(default)]
pub struct HistoryRequest {
    /// At most this many states, newest first (default 10).
    pub limit: usize,
    /// Only states before this checkpoint.
    pub before: Option<Value>,
}

impl Default for HistoryRequest {
    fn default() -> Self {
        HistoryRequest {
            limit: 10,
            before: None,
        }
    }
}

/// A run request (`POST /threads/{id}/runs`, `/runs`, their `/wait` and `/stream` forms).
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(default)]
pub struct RunCreate {
    /// The assistant to run (LangGraph's name).
    pub assistant_id: Option<String>,
    /// The agent to run (the Agent Protocol's name).
    pub agent_id: Option<String>,
    /// The thread (Agent Protocol `POST /runs`; with LangGraph it is in the path).
    pub thread_id: Option<String>,
    /// The input: `{"messages": [...]}`, a list of messages, or a string.
    pub input: Option<Value>,
    /// Input messages (the Agent Protocol's field).
    pub messages: Option<Vec<Value>>,
    /// A command: `{"resume": …}` answers a paused run's interrupts.
    pub command: Option<Value>,
    /// Run metadata.
    pub metadata: Map<String, Value>,
    /// Configuration (`recursion_limit` caps model calls).
    pub config: Option<Value>,
    /// Stream modes: `values` (default), `updates`, `messages`, `messages-tuple`, `events`.
    pub stream_mode: Option<Value>,
    /// Whether subagent events are streamed too (their event names carry the namespace).
    pub stream_subgraphs: Option<bool>,
    /// `reject` (default), `interrupt`, `rollback` or `enqueue`.
    pub multitask_strategy: Option<String>,
    /// `reject` (default) or `create` when the thread does not exist.
    pub if_not_exists: Option<String>,
    /// `delete` or `keep` the thread of a stateless run when it ends.
    pub on_completion: Option<String>,
    /// `cancel` (default for streams) or `continue` when the client disconnects.
    pub on_disconnect: Option<String>,
}

/// A run.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Run {
    /// Its id.
    pub run_id: String,
    /// Its thread.
    pub thread_id: String,
    /// The assistant it runs.
    pub assistant_id: String,
    /// Created at.
    pub created_at: String,
    /// Last change.
    pub updated_at: String,
    /// `pending`, `running`, `success`, `error`, `timeout` or `interrupted`.
    pub status: String,
    /// Metadata.
    pub metadata: Map<String, Value>,
    /// The strategy it was created with.
    pub multitask_strategy: String,
    /// Why it failed, when it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Why it was cancelled (`interrupt` or `rollback`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cancel_reason: Option<String>,
    /// How many workers started it (more than 1: it was taken over after a worker died).
    pub attempts: u32,
}

/// `POST /runs/search`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(default)]
pub struct RunSearch {
    /// Only runs of this thread.
    pub thread_id: Option<String>,
    /// Only runs in this status.
    pub status: Option<String>,
    /// Only runs with these metadata pairs.
    pub metadata: Map<String, Value>,
    /// At most this many (default 10).
    pub limit: usize,
    /// Skip this many.
    pub offset: usize,
}

impl Default for RunSearch {
    fn default() -> Self {
        RunSearch {
            thread_id: None,
            status: None,
            metadata: Map::new(),
            limit: 10,
            offset: 0,
        }
    }
}

/// What `…/runs/wait` answers: the state values at the end (so `result["messages"]` works as
/// with LangGraph), plus the run and the messages (the Agent Protocol's `RunWaitResponse`).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct RunWaitResponse {
    /// The run.
    pub run: Run,
    /// The state values.
    pub values: Value,
    /// The conversation.
    pub messages: Vec<Value>,
    /// The interrupts of a paused run.
    #[serde(
        rename = "__interrupt__",
        skip_serializing_if = "Vec::is_empty",
        default
    )]
    pub interrupt: Vec<Value>,
    /// The error of a failed run.
    #[serde(rename = "__error__", skip_serializing_if = "Option::is_none", default)]
    pub error: Option<Value>,
}

/// An assistant (agent) this server runs.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Assistant {
    /// Its id.
    pub assistant_id: String,
    /// The graph id clients name it by (`agent`).
    pub graph_id: String,
    /// The Agent Protocol's id.
    pub agent_id: String,
    /// Its name.
    pub name: String,
    /// What it does.
    pub description: Option<String>,
    /// Configuration.
    pub config: Value,
    /// Context.
    pub context: Value,
    /// Metadata.
    pub metadata: Value,
    /// Protocol features it supports.
    pub capabilities: Value,
    /// Version.
    pub version: u32,
    /// Created at.
    pub created_at: String,
    /// Last change.
    pub updated_at: String,
}

/// `POST /assistants/search`, `POST /agents/search`.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(default)]
pub struct AssistantSearch {
    /// Only assistants of this graph.
    pub graph_id: Option<String>,
    /// Only assistants of this name.
    pub name: Option<String>,
    /// Only assistants with these metadata pairs.
    pub metadata: Map<String, Value>,
    /// At most this many.
    pub limit: Option<usize>,
    /// Skip this many.
    pub offset: usize,
}

/// `PUT /store/items`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct StorePut {
    /// The namespace path.
    pub namespace: Vec<String>,
    /// The key in it.
    pub key: String,
    /// The value (a JSON object).
    pub value: Map<String, Value>,
}

/// `DELETE /store/items`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct StoreDelete {
    /// The namespace path.
    #[serde(default)]
    pub namespace: Vec<String>,
    /// The key.
    pub key: String,
}

/// `GET /store/items` query.
#[derive(Debug, Deserialize, ToSchema)]
pub struct StoreGet {
    /// The namespace, dot-separated (`a.b`), as `langgraph_sdk` sends it.
    #[serde(default)]
    pub namespace: Option<String>,
    /// The key.
    pub key: String,
}

/// `POST /store/items/search`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(default)]
pub struct StoreSearch {
    /// Only items under this namespace prefix.
    pub namespace_prefix: Vec<String>,
    /// Only items whose value has these pairs.
    pub filter: Option<Map<String, Value>>,
    /// At most this many (default 10).
    pub limit: usize,
    /// Skip this many.
    pub offset: usize,
    /// A text query (matched as a substring of the value's JSON).
    pub query: Option<String>,
}

impl Default for StoreSearch {
    fn default() -> Self {
        StoreSearch {
            namespace_prefix: Vec::new(),
            filter: None,
            limit: 10,
            offset: 0,
            query: None,
        }
    }
}

/// `POST /store/namespaces`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(default)]
pub struct StoreNamespaces {
    /// Only namespaces starting with this.
    pub prefix: Vec<String>,
    /// Only namespaces ending with this.
    pub suffix: Vec<String>,
    /// Cut namespaces to this depth.
    pub max_depth: Option<usize>,
    /// At most this many (default 100).
    pub limit: usize,
    /// Skip this many.
    pub offset: usize,
}

impl Default for StoreNamespaces {
    fn default() -> Self {
        StoreNamespaces {
            prefix: Vec::new(),
            suffix: Vec::new(),
            max_depth: None,
            limit: 100,
            offset: 0,
        }
    }
}

/// A store item.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct StoreItem {
    /// Its namespace.
    pub namespace: Vec<String>,
    /// Its key.
    pub key: String,
    /// Its value.
    pub value: Value,
    /// Created at.
    pub created_at: String,
    /// Last change.
    pub updated_at: String,
}

/// `POST /store/items/search` answer.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct StoreItems {
    /// The items.
    pub items: Vec<StoreItem>,
}

/// `POST /store/namespaces` answer.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Namespaces {
    /// The namespaces.
    pub namespaces: Vec<Vec<String>>,
}

/// A cairn message as protocol JSON; `index` makes its id stable across reads.
pub fn message_json(m: &Message, index: usize) -> Value {
    let (kind, role) = match m.role {
        Role::System => ("system", "system"),
        Role::User => ("human", "user"),
        Role::Assistant => ("ai", "assistant"),
        Role::Tool => ("tool", "tool"),
        _ => ("ai", "assistant"),
    };
    let mut out = Map::new();
    out.insert("type".into(), json!(kind));
    out.insert("role".into(), json!(role));
    out.insert("id".into(), json!(format!("msg_{index}")));
    let images: Vec<Value> = m
        .contents
        .iter()
        .filter_map(|c| match c {
            Content::Image { url, .. } => {
                Some(json!({"type": "image_url", "image_url": {"url": url}}))
            }
            _ => None,
        })
        .collect();
    let mut text = m.text();
    if m.role == Role::Tool
        && let Some(r) = m.contents.iter().find_map(|c| match c {
            Content::FunctionResult(r) => Some(r),
            _ => None,
        })
    {
        text = r.text();
        out.insert("tool_call_id".into(), json!(r.call_id));
        out.insert(
            "status".into(),
            json!(if r.is_error { "error" } else { "success" }),
        );
    }
    let content = if images.is_empty() {
        json!(text)
    } else {
        let mut blocks = Vec::new();
        if !text.is_empty() {
            blocks.push(json!({"type": "text", "text": text}));
        }
        blocks.extend(images);
        Value::Array(blocks)
    };
    out.insert("content".into(), content);
    let calls: Vec<Value> = m.function_calls().map(call_json).collect();
    if m.role == Role::Assistant {
        out.insert("tool_calls".into(), Value::Array(calls));
    }
    if let Some(name) = &m.author_name {
        out.insert("name".into(), json!(name));
    }
    if let Some(source) = &m.source {
        out.insert("additional_kwargs".into(), json!({"lc_source": source}));
    }
    Value::Object(out)
}

fn call_json(c: &FunctionCall) -> Value {
    let args: Value = serde_json::from_str(&c.arguments).unwrap_or_else(|_| json!({}));
    json!({"id": c.call_id, "name": c.name, "args": args, "type": "tool_call"})
}

/// The messages of a transcript as protocol JSON.
pub fn messages_json(messages: &[Message]) -> Vec<Value> {
    messages
        .iter()
        .enumerate()
        .map(|(i, m)| message_json(m, i))
        .collect()
}

/// A thread's state values: `messages` and the session state's keys.
pub fn values_json(t: &Transcript) -> Value {
    let mut v = Map::new();
    v.insert("messages".into(), Value::Array(messages_json(&t.messages)));
    for (k, val) in &t.state {
        if k != "messages" {
            v.insert(k.clone(), val.clone());
        }
    }
    Value::Object(v)
}

/// An interrupt as protocol JSON: LangChain's human-in-the-loop value
/// (`action_requests`, `review_configs`) with cairn's id.
pub fn interrupt_json(i: &Interrupt) -> Value {
    json!({
        "id": i.id,
        "value": {
            "action_requests": [{
                "name": i.tool,
                "args": i.arguments,
                "description": i.description.clone().unwrap_or_else(|| format!("Tool execution requires approval: {}", i.tool)),
            }],
            "review_configs": [{
                "action_name": i.tool,
                "allowed_decisions": i.allowed_decisions,
            }],
            "call_id": i.call_id,
            "namespace": i.namespace,
        },
    })
}

/// Reads one input message (`{"role"|"type": …, "content": …}`).
pub fn parse_message(v: &Value) -> Result<Message, ApiError> {
    let Some(obj) = v.as_object() else {
        if let Some(s) = v.as_str() {
            return Ok(Message::user(s));
        }
        return Err(ApiError::invalid(
            "a message must be an object with role and content",
        ));
    };
    let role = obj
        .get("role")
        .or_else(|| obj.get("type"))
        .and_then(Value::as_str)
        .unwrap_or("user");
    let role = match role {
        "user" | "human" => Role::User,
        "assistant" | "ai" => Role::Assistant,
        "system" | "developer" => Role::System,
        other => {
            return Err(ApiError::invalid(format!(
                "message role {other:?} is not one of user, assistant, system (or human, ai)"
            )));
        }
    };
    let mut contents = Vec::new();
    match obj.get("content") {
        Some(Value::String(s)) => contents.push(Content::text(s.clone())),
        Some(Value::Array(blocks)) => {
            for b in blocks {
                match b.get("type").and_then(Value::as_str) {
                    Some("text") => contents.push(Content::text(
                        b.get("text").and_then(Value::as_str).unwrap_or_default(),
                    )),
                    Some("image_url") => {
                        let url = b
                            .get("image_url")
                            .and_then(|u| u.get("url").or(Some(u)))
                            .and_then(Value::as_str)
                            .ok_or_else(|| ApiError::invalid("image_url block without a url"))?;
                        contents.push(Content::Image {
                            url: url.to_owned(),
                            media_type: None,
                        });
                    }
                    Some(other) => {
                        return Err(ApiError::invalid(format!(
                            "content block type {other:?} is not supported (text, image_url)"
                        )));
                    }
                    None => match b.as_str() {
                        Some(s) => contents.push(Content::text(s)),
                        None => return Err(ApiError::invalid("a content block needs a type")),
                    },
                }
            }
        }
        Some(Value::Null) | None => {}
        Some(_) => {
            return Err(ApiError::invalid(
                "message content must be a string or a list",
            ));
        }
    }
    Ok(Message::new(role, contents))
}

/// The input messages of a run request.
pub fn input_messages(req: &RunCreate) -> Result<Vec<Message>, ApiError> {
    let mut out = Vec::new();
    if let Some(input) = &req.input {
        match input {
            Value::Null => {}
            Value::String(s) => out.push(Message::user(s.clone())),
            Value::Array(list) => {
                for m in list {
                    out.push(parse_message(m)?);
                }
            }
            Value::Object(o) => match o.get("messages") {
                Some(Value::Array(list)) => {
                    for m in list {
                        out.push(parse_message(m)?);
                    }
                }
                Some(Value::Null) | None => {}
                Some(_) => return Err(ApiError::invalid("input.messages must be a list")),
            },
            _ => {
                return Err(ApiError::invalid(
                    "input must be {\"messages\": [...]}, a list of messages or a string",
                ));
            }
        }
    }
    if let Some(list) = &req.messages {
        for m in list {
            out.push(parse_message(m)?);
        }
    }
    Ok(out)
}

/// The decisions a `command.resume` value gives for `interrupts`.
///
/// Accepted forms: LangChain's `{"decisions": [d, …]}` (in the order of the interrupts), a
/// list `[d, …]`, a map by interrupt id (`{id: d}` or `{id: {"decisions": [d]}}`), or one
/// decision for all. A decision is `{"type": "approve"}`, `{"type": "reject", "message": …}`,
/// `{"type": "edit", "edited_action": {"name": …, "args": {…}}}` (or cairn's
/// `{"type": "edit", "arguments": {…}}`), or the words `"approve"` / `"reject"`.
pub fn decisions(
    resume: &Value,
    interrupts: &[Interrupt],
) -> Result<cairn_core::Decisions, ApiError> {
    let mut out = cairn_core::Decisions::new();
    if interrupts.is_empty() {
        return Err(ApiError::conflict(
            "the thread has no paused run to resume (no interrupts wait for decisions)",
        ));
    }
    let in_order = |list: &[Value], out: &mut cairn_core::Decisions| -> Result<(), ApiError> {
        if list.len() != interrupts.len() {
            return Err(ApiError::invalid(format!(
                "{} decisions for {} interrupts ({}); give one per interrupt, in order",
                list.len(),
                interrupts.len(),
                interrupts
                    .iter()
                    .map(|i| i.id.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        for (i, d) in interrupts.iter().zip(list) {
            out.insert(i.id.clone(), decision(d)?);
        }
        Ok(())
    };
    match resume {
        Value::Array(list) => in_order(list, &mut out)?,
        Value::Object(o) if o.contains_key("decisions") => match o.get("decisions") {
            Some(Value::Array(list)) => in_order(list, &mut out)?,
            _ => return Err(ApiError::invalid("resume.decisions must be a list")),
        },
        Value::Object(o) if o.contains_key("type") => {
            let d = decision(resume)?;
            for i in interrupts {
                out.insert(i.id.clone(), d.clone());
            }
        }
        Value::Object(o) => {
            for (id, d) in o {
                let Some(i) = interrupts.iter().find(|i| &i.id == id || &i.call_id == id) else {
                    return Err(ApiError::invalid(format!(
                        "no interrupt is named {id:?}; waiting: {}",
                        interrupts
                            .iter()
                            .map(|i| i.id.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )));
                };
                let d = match d.get("decisions").and_then(Value::as_array) {
                    Some(list) if list.len() == 1 => &list[0],
                    Some(_) => {
                        return Err(ApiError::invalid(format!(
                            "interrupt {id} takes exactly one decision"
                        )));
                    }
                    None => d,
                };
                out.insert(i.id.clone(), decision(d)?);
            }
        }
        Value::String(_) => {
            let d = decision(resume)?;
            for i in interrupts {
                out.insert(i.id.clone(), d.clone());
            }
        }
        _ => {
            return Err(ApiError::invalid(
                "command.resume must be a decision, a list or a map",
            ));
        }
    }
    Ok(out)
}

fn decision(v: &Value) -> Result<cairn_core::Decision, ApiError> {
    use cairn_core::Decision;
    let kind = v
        .as_str()
        .or_else(|| v.get("type").and_then(Value::as_str))
        .ok_or_else(|| ApiError::invalid("a decision needs a type: approve, edit or reject"))?;
    Ok(match kind {
        "approve" | "accept" => Decision::Approve,
        "reject" | "ignore" | "response" => Decision::Reject {
            message: v
                .get("message")
                .or_else(|| v.get("args"))
                .and_then(Value::as_str)
                .map(str::to_owned),
        },
        "edit" => {
            let arguments = v
                .get("edited_action")
                .and_then(|a| a.get("args"))
                .or_else(|| v.get("arguments"))
                .or_else(|| v.get("args").and_then(|a| a.get("args")))
                .cloned()
                .ok_or_else(|| {
                    ApiError::invalid(
                        "an edit decision needs edited_action.args (the new arguments)",
                    )
                })?;
            if !arguments.is_object() {
                return Err(ApiError::invalid("edited arguments must be a JSON object"));
            }
            Decision::Edit { arguments }
        }
        other => {
            return Err(ApiError::invalid(format!(
                "decision type {other:?} is not approve, edit or reject"
            )));
        }
    })
}

/// A cancelled result for a call a stopped run left without one.
pub fn cancelled_result(call_id: &str) -> FunctionResult {
    FunctionResult {
        call_id: call_id.to_owned(),
        output: vec![Content::text(
            "Error: this call did not finish: the run was cancelled (multitask interrupt).",
        )],
        is_error: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_rfc3339() {
        assert_eq!(iso(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso(1_764_547_200_123), "2025-12-01T00:00:00.123Z");
    }

    #[test]
    fn input_in_every_form() {
        let req = RunCreate {
            input: Some(
                json!({"messages": [{"role": "user", "content": "hi"}, {"type": "human", "content": [{"type": "text", "text": "there"}]}]}),
            ),
            ..Default::default()
        };
        let m = input_messages(&req).unwrap();
        assert_eq!(m.len(), 2);
        assert_eq!(m[1].text(), "there");
        let req = RunCreate {
            input: Some(json!("just text")),
            ..Default::default()
        };
        assert_eq!(input_messages(&req).unwrap()[0].text(), "just text");
        let bad = RunCreate {
            input: Some(json!({"messages": [{"role": "wizard", "content": "x"}]})),
            ..Default::default()
        };
        assert!(input_messages(&bad).is_err());
    }

    #[test]
    fn resume_values_become_decisions() {
        let a = Interrupt::new("write_file", "c1", json!({"file_path": "/a"}));
        let b = Interrupt::new("execute", "c2", json!({"command": "ls"}));
        let both = [a.clone(), b.clone()];
        let d = decisions(
            &json!({"decisions": [{"type": "approve"}, {"type": "reject", "message": "no"}]}),
            &both,
        )
        .unwrap();
        assert_eq!(d[&a.id], cairn_core::Decision::Approve);
        assert!(
            matches!(&d[&b.id], cairn_core::Decision::Reject { message: Some(m) } if m == "no")
        );
        let d = decisions(
            &json!({ b.id.clone(): {"type": "edit", "edited_action": {"name": "execute", "args": {"command": "pwd"}}}, a.id.clone(): "approve" }),
            &both,
        )
        .unwrap();
        assert!(
            matches!(&d[&b.id], cairn_core::Decision::Edit { arguments } if arguments["command"] == "pwd")
        );
        assert!(decisions(&json!({"decisions": [{"type": "approve"}]}), &both).is_err());
        assert!(decisions(&json!({"type": "approve"}), &[]).is_err());
    }
}
