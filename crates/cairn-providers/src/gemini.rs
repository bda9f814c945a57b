//! A Google Gemini [`ChatClient`] (`generateContent` / `streamGenerateContent`), plain and
//! streaming.
//!
//! ```no_run
//! use cairn_providers::gemini::GeminiClient;
//!
//! # fn main() -> Result<(), cairn_core::ChatError> {
//! // GEMINI_API_KEY (or GOOGLE_API_KEY), GEMINI_BASE_URL, GEMINI_MODEL:
//! let client = GeminiClient::from_env()?;
//! // Or explicitly:
//! let client = GeminiClient::builder()
//!     .api_key("AIza…")
//!     .model("gemini-2.5-flash")
//!     .build()?;
//! # Ok(()) }
//! ```
//!
//! # Wire mapping
//!
//! - `POST {base}/v1beta/models/{model}:generateContent`, streams
//!   `:streamGenerateContent?alt=sse`; the key goes in the `x-goog-api-key` header.
//! - `systemInstruction` is `ChatOptions::instructions` followed by the text of any system
//!   messages.
//! - `contents` alternate `user` and `model` turns (consecutive turns of the same role are
//!   merged; tool results are user turns). Parts: `text`, `inlineData` (`data:` URIs),
//!   `fileData` (other URLs), `functionCall {name, args}` (arguments that are empty, invalid
//!   JSON or not an object are sent as `{}`) and `functionResponse {name, response}`, with
//!   `response` `{"result": text}` or, for failed calls, `{"error": text}`; images a tool
//!   returned follow as `inlineData` parts. Gemini wants the function *name* with a result: it
//!   is taken from the call with the same id earlier in the conversation; a result without
//!   one is sent as text instead. Reasoning is not resent.
//! - Tools are one `{functionDeclarations: […]}`, the schemas cleaned to Gemini's subset
//!   (unsupported keywords such as `additionalProperties`, `$schema`, `default` are dropped;
//!   `["T", "null"]` types become `nullable`). `toolConfig.functionCallingConfig.mode`:
//!   auto/required/none → `AUTO`/`ANY`/`NONE`; a named tool → `ANY` with
//!   `allowedFunctionNames`.
//! - `generationConfig`: `temperature`, `topP`, `maxOutputTokens`, `stopSequences`, `seed`; a
//!   JSON-schema `response_format` becomes `responseMimeType: application/json` with a cleaned
//!   `responseSchema` (`{"type": "json_object"}` only sets the MIME type).
//! - `ChatOptions::additional_properties` and the client kwarg `extra_body` are merged into the
//!   body; the client kwarg `extra_headers` adds headers. Function-invocation kwargs are never
//!   sent.
//!
//! # Responses
//!
//! Gemini gives calls no ids (unless it sends `functionCall.id`): they get `call_<n>`, `n`
//! counting the function calls of the conversation, so ids are unique in a conversation and
//! the same for a plain and a streamed call. Streams send whole function calls: each gives a
//! `ToolCallStart` and one `ToolCallDelta` with the full arguments. Finish reasons: `STOP` →
//! stop (tool calls when the answer has calls), `MAX_TOKENS` → length, `SAFETY`,
//! `RECITATION`, `BLOCKLIST`, `PROHIBITED_CONTENT`, `SPII`, `IMAGE_SAFETY` → content filter, a
//! blocked prompt → content filter, others kept as they are. Usage: `promptTokenCount`,
//! `candidatesTokenCount` + `thoughtsTokenCount`, `cachedContentTokenCount`.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use cairn_core::{
    BoxFuture, ChatClient, ChatError, ChatOptions, ChatRequest, ChatResponse, ChatResponseUpdate,
    ChatStream, Content, FinishReason, Message, ToolChoice, UpdateEvent, Usage,
};
use reqwest::header::HeaderName;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use crate::common::{
    arguments_object, finish_body, nullable, parse_data_uri, result_parts, system_and_turns,
};
use crate::transport::error::{ApiError, decode_error, event_error, status_error};
use crate::transport::settings::client_extras;
use crate::transport::{ClientCore, Payload, ProviderEnv, Resp, Settings, StreamDecoder, Updates};
use crate::transport::{client_methods, settings_methods};

/// The default API root.
pub const DEFAULT_BASE_URL: &str = "https://generativelanguage.googleapis.com";

/// What [`GeminiClientBuilder::from_env`] reads.
static ENV: ProviderEnv = ProviderEnv {
    default_base_url: DEFAULT_BASE_URL,
    keys: &["GEMINI_API_KEY", "GOOGLE_API_KEY"],
    model: "GEMINI_MODEL",
    base_url: "GEMINI_BASE_URL",
    headers: &[],
    missing_key: "GEMINI_API_KEY (or GOOGLE_API_KEY) is not set",
    key_required_for: None,
};

/// Builds a [`GeminiClient`].
#[derive(Debug, Clone)]
pub struct GeminiClientBuilder {
    settings: Settings,
}

impl Default for GeminiClientBuilder {
    fn default() -> Self {
        GeminiClientBuilder {
            settings: Settings::new(&ENV),
        }
    }
}

impl GeminiClientBuilder {
    /// A builder with the defaults: `https://generativelanguage.googleapis.com`, the
    /// [`HttpOptions`](crate::HttpOptions) defaults, 2 retries, no key.
    pub fn new() -> Self {
        Self::default()
    }

    settings_methods!(
        "x-goog-api-key",
        ENV,
        /// A builder filled from the environment: `GEMINI_API_KEY` (or `GOOGLE_API_KEY`),
        /// `GEMINI_BASE_URL` (default `https://generativelanguage.googleapis.com`) and
        /// `GEMINI_MODEL`.
        /// Also reads the timeouts `CAIRN_CONNECT_TIMEOUT`, `CAIRN_TIMEOUT`,
        /// `CAIRN_IDLE_TIMEOUT` (seconds; an invalid one makes [`build`](Self::build) fail).
    );

    /// Builds the client. Fails with [`ChatErrorKind::Config`](cairn_core::ChatErrorKind) on
    /// an invalid base URL or header.
    pub fn build(self) -> Result<GeminiClient, ChatError> {
        let core = self.settings.into_core(
            &ENV,
            |k| (HeaderName::from_static("x-goog-api-key"), k.to_owned()),
            &[],
        )?;
        Ok(GeminiClient {
            inner: Arc::new(Inner { core }),
        })
    }
}

/// A client for Gemini's `generateContent` API. Cheap to clone (clones share one connection
/// pool).
#[derive(Clone)]
pub struct GeminiClient {
    inner: Arc<Inner>,
}

struct Inner {
    core: ClientCore,
}

client_methods!(GeminiClient, GeminiClientBuilder, ENV, debug,
    /// Fails with [`ChatErrorKind::Config`](cairn_core::ChatErrorKind) when neither
    /// `GEMINI_API_KEY` nor `GOOGLE_API_KEY` is set.
);

// ---------------------------------------------------------------------------------------------
// Requests

/// The schema keywords Gemini accepts.
const SCHEMA_KEYS: &[&str] = &[
    "type",
    "format",
    "title",
    "description",
    "nullable",
    "enum",
    "items",
    "properties",
    "required",
    "anyOf",
    "minimum",
    "maximum",
    "minItems",
    "maxItems",
    "minLength",
    "maxLength",
    "minProperties",
    "maxProperties",
    "pattern",
    "propertyOrdering",
];

/// A JSON schema reduced to the subset Gemini accepts.
pub(crate) fn clean_schema(schema: &Value) -> Value {
    let Value::Object(o) = schema else {
        return schema.clone();
    };
    let mut out = Map::new();
    for (k, v) in o {
        match k.as_str() {
            "properties" => {
                if let Value::Object(props) = v {
                    let cleaned: Map<String, Value> = props
                        .iter()
                        .map(|(name, s)| (name.clone(), clean_schema(s)))
                        .collect();
                    out.insert(k.clone(), Value::Object(cleaned));
                }
            }
            "items" => {
                out.insert(k.clone(), clean_schema(v));
            }
            "anyOf" => {
                if let Value::Array(a) = v {
                    out.insert(
                        k.clone(),
                        Value::Array(a.iter().map(clean_schema).collect()),
                    );
                }
            }
            "type" => match v {
                Value::Array(types) => {
                    let mut non_null = types.iter().filter(|t| t.as_str() != Some("null"));
                    if let Some(t) = non_null.next() {
                        out.insert(k.clone(), t.clone());
                    }
                    if types.iter().any(|t| t.as_str() == Some("null")) {
                        out.insert("nullable".into(), Value::Bool(true));
                    }
                }
                other => {
                    out.insert(k.clone(), other.clone());
                }
            },
            "const" => {
                out.insert("enum".into(), Value::Array(vec![v.clone()]));
            }
            key if SCHEMA_KEYS.contains(&key) => {
                out.insert(k.clone(), v.clone());
            }
            _ => {}
        }
    }
    Value::Object(out)
}

fn media_part(url: &str, media_type: Option<&str>) -> Value {
    match parse_data_uri(url, media_type) {
        Some((mt, data)) => json!({"inlineData": {"mimeType": mt, "data": data}}),
        None => json!({"fileData": {
            "mimeType": media_type.unwrap_or("image/jpeg"),
            "fileUri": url,
        }}),
    }
}

/// The name of the call `call_id` answers: the nearest earlier call with that id.
fn call_name<'a>(earlier: &'a [Message], call_id: &str) -> Option<&'a str> {
    earlier
        .iter()
        .rev()
        .flat_map(|m| m.function_calls().collect::<Vec<_>>().into_iter().rev())
        .find(|c| c.call_id == call_id)
        .map(|c| c.name.as_str())
}

fn parts_of(messages: &[Message], at: usize, out: &mut Vec<Value>) {
    for c in &messages[at].contents {
        match c {
            Content::Text { text } if !text.is_empty() => out.push(json!({"text": text})),
            Content::Image { url, media_type } => out.push(media_part(url, media_type.as_deref())),
            Content::FunctionCall(fc) => out.push(json!({"functionCall": {
                "name": fc.name,
                "args": arguments_object(&fc.arguments),
            }})),
            Content::FunctionResult(r) => {
                let (text, images) = result_parts(&r.output);
                match call_name(&messages[..=at], &r.call_id) {
                    Some(name) => {
                        let key = if r.is_error { "error" } else { "result" };
                        out.push(json!({"functionResponse": {
                            "name": name,
                            "response": {key: text},
                        }}));
                    }
                    None => out.push(json!({
                        "text": format!("Result of tool call {}: {text}", r.call_id)
                    })),
                }
                out.extend(images.into_iter().map(|(u, mt)| media_part(u, mt)));
            }
            _ => {}
        }
    }
}

/// The system instruction text and the alternating `contents` of a conversation.
pub(crate) fn wire_contents(messages: &[Message], options: &ChatOptions) -> (String, Vec<Value>) {
    let (system, turns) = system_and_turns(messages, options, "model", |i, out| {
        parts_of(messages, i, out)
    });
    let wire = turns
        .into_iter()
        .map(|(role, parts)| json!({"role": role, "parts": parts}))
        .collect();
    (system, wire)
}

fn tool_config(tc: &ToolChoice) -> Value {
    let (mode, only) = match tc {
        ToolChoice::Required => ("ANY", None),
        ToolChoice::None => ("NONE", None),
        ToolChoice::Tool(name) => ("ANY", Some(name)),
        // `Auto`, and any choice added later (`ToolChoice` is non-exhaustive).
        _ => ("AUTO", None),
    };
    let mut cfg = json!({"mode": mode});
    if let Some(n) = only {
        cfg["allowedFunctionNames"] = json!([n]);
    }
    json!({"functionCallingConfig": cfg})
}

fn generation_config(o: &ChatOptions) -> Map<String, Value> {
    let mut g = Map::new();
    if let Some(t) = o.temperature {
        g.insert("temperature".into(), json!(t));
    }
    if let Some(t) = o.top_p {
        g.insert("topP".into(), json!(t));
    }
    if let Some(t) = o.max_tokens {
        g.insert("maxOutputTokens".into(), json!(t));
    }
    if !o.stop.is_empty() {
        g.insert("stopSequences".into(), json!(o.stop));
    }
    if let Some(s) = o.seed {
        g.insert("seed".into(), json!(s));
    }
    if let Some(rf) = &o.response_format {
        match rf.get("type").and_then(Value::as_str) {
            Some("text") => {}
            Some("json_object") => {
                g.insert("responseMimeType".into(), "application/json".into());
            }
            _ => {
                let schema = rf
                    .get("json_schema")
                    .and_then(|j| j.get("schema"))
                    .or_else(|| rf.get("schema"))
                    .unwrap_or(rf);
                g.insert("responseMimeType".into(), "application/json".into());
                g.insert("responseSchema".into(), clean_schema(schema));
            }
        }
    }
    g
}

/// The function calls already in the conversation (to number new ones).
fn calls_before(messages: &[Message]) -> usize {
    messages.iter().map(|m| m.function_calls().count()).sum()
}

/// Gemini's error bodies carry the HTTP code in `error.code` and the meaningful name in
/// `error.status`: report the latter.
fn gemini_status_error(status: u16, body: &[u8], retry_after: Option<Duration>) -> ApiError {
    if let Ok(mut v) = serde_json::from_slice::<Value>(body)
        && let Some(s) = v
            .pointer("/error/status")
            .and_then(Value::as_str)
            .map(str::to_owned)
        && let Some(e) = v.get_mut("error")
    {
        e["code"] = Value::String(s);
        if let Ok(rewritten) = serde_json::to_vec(&v) {
            return status_error(status, &rewritten, retry_after);
        }
    }
    status_error(status, body, retry_after)
}

impl Inner {
    fn body(&self, r: &ChatRequest<'_>) -> Result<Payload, ChatError> {
        let (messages, options) = (r.messages, r.options);
        let (extra_body, extra_headers) = client_extras(r.client_kwargs)?;
        let (system, contents) = wire_contents(messages, options);
        let mut b = Map::new();
        if !system.is_empty() {
            b.insert(
                "systemInstruction".into(),
                json!({"parts": [{"text": system}]}),
            );
        }
        b.insert("contents".into(), contents.into());
        if !options.tools.is_empty() {
            let decls: Vec<Value> = options
                .tools
                .iter()
                .map(|t| {
                    let mut d = json!({"name": t.name});
                    if !t.description.is_empty() {
                        d["description"] = t.description.clone().into();
                    }
                    // An object schema without properties is rejected: leave it out.
                    let has_props = t
                        .parameters
                        .get("properties")
                        .and_then(Value::as_object)
                        .is_some_and(|p| !p.is_empty());
                    if has_props {
                        d["parameters"] = clean_schema(&t.parameters);
                    }
                    d
                })
                .collect();
            b.insert("tools".into(), json!([{"functionDeclarations": decls}]));
            if let Some(tc) = &options.tool_choice {
                b.insert("toolConfig".into(), tool_config(tc));
            }
        }
        let g = generation_config(options);
        if !g.is_empty() {
            b.insert("generationConfig".into(), Value::Object(g));
        }
        let body = finish_body(b, &options.additional_properties, extra_body)?;
        Ok(Payload {
            body,
            extra_headers,
        })
    }

    async fn open(&self, r: &ChatRequest<'_>, stream: bool) -> Result<Resp, ChatError> {
        let model = self.core.model(r.options)?;
        let model = model.strip_prefix("models/").unwrap_or(model);
        let path = if stream {
            format!("v1beta/models/{model}:streamGenerateContent?alt=sse")
        } else {
            format!("v1beta/models/{model}:generateContent")
        };
        let e = &self.core.endpoint;
        let target = e.target(&path)?;
        let payload = self.body(r)?;
        e.send(&target, &payload, stream, gemini_status_error).await
    }

    async fn complete(&self, r: ChatRequest<'_>) -> Result<ChatResponse, ChatError> {
        let resp = self.open(&r, false).await?;
        let body = resp.bytes().await?;
        let mut d = GeminiStreamDecoder::new(calls_before(r.messages));
        let mut updates = VecDeque::new();
        d.on_chunk(&body, &mut updates)?;
        d.finish(&mut updates);
        let mut asm = cairn_core::ResponseAssembler::new();
        for u in &updates {
            asm.push(&u.event);
        }
        Ok(asm.finish())
    }
}

// ---------------------------------------------------------------------------------------------
// Responses

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireCall<'a> {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default, borrow)]
    args: Option<&'a RawValue>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WirePart<'a> {
    #[serde(default)]
    text: Option<String>,
    #[serde(default, deserialize_with = "nullable")]
    thought: bool,
    #[serde(default, borrow)]
    function_call: Option<WireCall<'a>>,
}

#[derive(Debug, Default, Deserialize)]
struct WireContent<'a> {
    #[serde(default, deserialize_with = "nullable", borrow)]
    parts: Vec<WirePart<'a>>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireCandidate<'a> {
    #[serde(default, borrow)]
    content: Option<WireContent<'a>>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireUsage {
    #[serde(default, deserialize_with = "nullable")]
    prompt_token_count: u64,
    #[serde(default, deserialize_with = "nullable")]
    candidates_token_count: u64,
    #[serde(default, deserialize_with = "nullable")]
    thoughts_token_count: u64,
    #[serde(default, deserialize_with = "nullable")]
    cached_content_token_count: u64,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PromptFeedback {
    #[serde(default)]
    block_reason: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireResponse<'a> {
    #[serde(default, deserialize_with = "nullable", borrow)]
    candidates: Vec<WireCandidate<'a>>,
    #[serde(default)]
    usage_metadata: Option<WireUsage>,
    #[serde(default)]
    model_version: Option<String>,
    #[serde(default)]
    response_id: Option<String>,
    #[serde(default)]
    prompt_feedback: Option<PromptFeedback>,
    #[serde(default)]
    error: Option<Value>,
}

fn finish_reason(s: &str, has_calls: bool) -> FinishReason {
    match s {
        "STOP" if has_calls => FinishReason::ToolCalls,
        "STOP" => FinishReason::Stop,
        "MAX_TOKENS" => FinishReason::Length,
        "SAFETY" | "RECITATION" | "BLOCKLIST" | "PROHIBITED_CONTENT" | "SPII" | "IMAGE_SAFETY" => {
            FinishReason::ContentFilter
        }
        other => FinishReason::Other(other.to_owned()),
    }
}

/// Turns `GenerateContentResponse` chunks into updates (a plain response is one chunk).
pub(crate) struct GeminiStreamDecoder {
    /// The number of the next call (for `call_<n>` ids).
    next_id: usize,
    /// Calls in this answer.
    calls: usize,
    finish: Option<String>,
    usage: Option<Usage>,
    model: Option<String>,
    id: Option<String>,
    done: bool,
}

impl GeminiStreamDecoder {
    pub(crate) fn new(first_id: usize) -> Self {
        GeminiStreamDecoder {
            next_id: first_id,
            calls: 0,
            finish: None,
            usage: None,
            model: None,
            id: None,
            done: false,
        }
    }

    fn on_chunk(
        &mut self,
        data: &[u8],
        out: &mut VecDeque<ChatResponseUpdate>,
    ) -> Result<(), ChatError> {
        let w: WireResponse<'_> = serde_json::from_slice(data)
            .map_err(|e| decode_error("invalid Gemini response", data, e))?;
        if let Some(e) = w.error.filter(|e| !e.is_null()) {
            let message = e.get("message").and_then(Value::as_str).map(str::to_owned);
            let code = e.get("status").and_then(Value::as_str).map(str::to_owned);
            return Err(event_error(message, code));
        }
        if self.id.is_none() {
            self.id = w.response_id;
        }
        if self.model.is_none() {
            self.model = w.model_version;
        }
        if let Some(r) = w.prompt_feedback.and_then(|p| p.block_reason) {
            self.finish = Some(r);
        }
        if let Some(u) = w.usage_metadata {
            self.usage = Some(Usage {
                input_tokens: u.prompt_token_count,
                output_tokens: u.candidates_token_count + u.thoughts_token_count,
                cached_input_tokens: u.cached_content_token_count,
            });
        }
        let Some(c) = w.candidates.into_iter().next() else {
            return Ok(());
        };
        for p in c.content.unwrap_or_default().parts {
            if let Some(fc) = p.function_call {
                let index = self.calls;
                self.calls += 1;
                let call_id = match fc.id.filter(|i| !i.is_empty()) {
                    Some(id) => id,
                    None => format!("call_{}", self.next_id),
                };
                self.next_id += 1;
                out.push_back(
                    UpdateEvent::ToolCallStart {
                        index,
                        call_id,
                        name: fc.name.unwrap_or_default(),
                    }
                    .into(),
                );
                let args = match fc.args.map(RawValue::get) {
                    None | Some("null") => "{}".to_owned(),
                    Some(a) => a.to_owned(),
                };
                out.push_back(
                    UpdateEvent::ToolCallDelta {
                        index,
                        arguments: args,
                    }
                    .into(),
                );
            } else if let Some(t) = p.text.filter(|t| !t.is_empty()) {
                out.push_back(if p.thought {
                    UpdateEvent::ReasoningDelta { text: t }.into()
                } else {
                    UpdateEvent::TextDelta { text: t }.into()
                });
            }
        }
        if let Some(f) = c.finish_reason {
            self.finish = Some(f);
        }
        Ok(())
    }

    fn finish(&mut self, out: &mut VecDeque<ChatResponseUpdate>) {
        self.done = true;
        if let Some(u) = self.usage.take() {
            out.push_back(UpdateEvent::Usage(u).into());
        }
        let has_calls = self.calls > 0;
        let finish_reason = self.finish.take().map(|f| finish_reason(&f, has_calls));
        out.push_back(
            UpdateEvent::Finished {
                finish_reason,
                model: self.model.take(),
                response_id: self.id.take(),
            }
            .into(),
        );
    }
}

impl StreamDecoder for GeminiStreamDecoder {
    fn on_event(&mut self, data: &[u8], out: &mut Updates) -> Result<(), ChatError> {
        if data.iter().all(u8::is_ascii_whitespace) {
            return Ok(());
        }
        self.on_chunk(data, out)
    }

    fn is_done(&self) -> bool {
        self.done
    }

    fn on_eof(&mut self, pending: Option<Vec<u8>>, out: &mut Updates) -> Result<(), ChatError> {
        if let Some(p) = pending {
            self.on_event(&p, out)?;
        }
        self.finish(out);
        Ok(())
    }
}

impl ChatClient for GeminiClient {
    fn get_response<'a>(
        &'a self,
        request: ChatRequest<'a>,
    ) -> BoxFuture<'a, Result<ChatResponse, ChatError>> {
        let i = &self.inner;
        i.core.endpoint.respond(i.complete(request))
    }

    fn get_streaming_response<'a>(&'a self, request: ChatRequest<'a>) -> ChatStream<'a> {
        let i = &self.inner;
        let decoder = GeminiStreamDecoder::new(calls_before(request.messages));
        let open = async move { i.open(&request, true).await };
        i.core.endpoint.stream(open, decoder)
    }

    fn describe(&self) -> String {
        self.inner.core.describe("gemini")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_core::{FunctionCall, Role};

    #[test]
    fn cleans_schemas() {
        let s = json!({
            "$schema": "x", "type": "object", "additionalProperties": false,
            "properties": {
                "a": {"type": ["string", "null"], "default": "d"},
                "b": {"type": "array", "items": {"type": "integer", "examples": [1]}},
                "c": {"const": "k"}
            },
            "required": ["a"]
        });
        assert_eq!(
            clean_schema(&s),
            json!({
                "type": "object",
                "properties": {
                    "a": {"type": "string", "nullable": true},
                    "b": {"type": "array", "items": {"type": "integer"}},
                    "c": {"enum": ["k"]}
                },
                "required": ["a"]
            })
        );
    }

    #[test]
    fn results_carry_the_call_name() {
        let msgs = vec![
            Message::user("go"),
            Message::new(
                Role::Assistant,
                vec![Content::FunctionCall(FunctionCall::new(
                    "call_0",
                    "echo",
                    &json!({"t": 1}),
                ))],
            ),
            Message::tool_result(cairn_core::FunctionResult {
                call_id: "call_0".into(),
                output: vec![Content::text("ok")],
                is_error: false,
            }),
            Message::tool_result(cairn_core::FunctionResult {
                call_id: "nope".into(),
                output: vec![Content::text("x")],
                is_error: false,
            }),
        ];
        let (_, c) = wire_contents(&msgs, &ChatOptions::default());
        assert_eq!(c.len(), 3);
        assert_eq!(c[1]["role"], "model");
        assert_eq!(c[2]["parts"][0]["functionResponse"]["name"], "echo");
        assert_eq!(
            c[2]["parts"][0]["functionResponse"]["response"],
            json!({"result": "ok"})
        );
        assert!(c[2]["parts"][1]["text"].as_str().unwrap().contains("nope"));
    }
}
