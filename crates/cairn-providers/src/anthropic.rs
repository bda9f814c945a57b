//! An Anthropic [`ChatClient`] (the Messages API, `POST /v1/messages`), plain and streaming.
//!
//! ```no_run
//! use cairn_providers::anthropic::AnthropicClient;
//!
//! # fn main() -> Result<(), cairn_core::ChatError> {
//! // ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL, ANTHROPIC_MODEL:
//! let client = AnthropicClient::from_env()?;
//! // Or explicitly:
//! let client = AnthropicClient::builder()
//!     .api_key("sk-ant-…")
//!     .model("claude-sonnet-4-5")
//!     .build()?;
//! # Ok(()) }
//! ```
//!
//! # Wire mapping
//!
//! - `system` is `ChatOptions::instructions` followed by the text of any system messages
//!   (joined by a blank line).
//! - User, assistant and tool messages become `user` / `assistant` / `user` turns; consecutive
//!   turns of the same role are merged (the API requires alternation), with `tool_result`
//!   blocks placed first in a merged user turn.
//! - Content blocks: `text` (empty text is dropped), `image` (`data:` URIs as `base64`
//!   sources, other URLs as `url` sources), `tool_use` (`input` parsed from the raw arguments)
//!   and `tool_result` (text, or text and image blocks when the tool returned images;
//!   `is_error`). Arguments that are empty, invalid JSON or not an object are sent as `{}`:
//!   the agent loop answers such a call with an invalid-arguments error, which is sent as the
//!   call's `tool_result`, so the model still learns what went wrong. Reasoning from earlier
//!   turns is not resent (thinking blocks need the server's signature).
//! - `max_tokens` is required by the API: `ChatOptions::max_tokens`, else the builder's
//!   default (4096).
//! - `temperature`, `top_p`, `stop_sequences`; `seed` and `response_format` are not supported
//!   by the API and not sent.
//! - Tools are `{name, description, input_schema}`; `tool_choice` maps auto/required/none/a
//!   tool to `auto`/`any`/`none`/`tool`, and `parallel_tool_calls: false` to
//!   `disable_parallel_tool_use`. Both only when there are tools.
//! - `ChatOptions::additional_properties` and the client kwarg `extra_body` are merged into the
//!   body; the client kwarg `extra_headers` adds headers. Function-invocation kwargs are never
//!   sent.
//!
//! # Responses
//!
//! Text, tool calls (`input` kept as the server's JSON text), thinking (as reasoning); usage:
//! `input_tokens` is the whole prompt (`input_tokens` + `cache_read_input_tokens` +
//! `cache_creation_input_tokens`), `cached_input_tokens` the cache reads. Stop reasons:
//! `end_turn`/`stop_sequence` → stop, `max_tokens` → length, `tool_use` → tool calls,
//! `refusal` → content filter, others kept as they are.
//!
//! Errors keep the API's error type in the message (`… [overloaded_error]`); 429 and 5xx
//! (including 529 overloaded) are retried; `prompt is too long` is a context overflow.

use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;

use bytes::Bytes;
use cairn_core::{
    BoxFuture, ChatClient, ChatError, ChatErrorKind, ChatOptions, ChatRequest, ChatResponse,
    ChatResponseUpdate, ChatStream, Content, FinishReason, FunctionCall, Kwargs, Message, Role,
    ToolChoice, UpdateEvent, Usage,
};
use reqwest::header::{HeaderMap, HeaderName};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use crate::common::{arguments_object, finish_body, nullable, parse_data_uri, result_parts};
use crate::transport::endpoint::{Endpoint, Target};
use crate::transport::error::{decode_error, event_error, status_error};
use crate::transport::settings::client_extras;
use crate::transport::{ApiKey, Resp, StreamDecoder};
use crate::transport::{Lookup, Settings, config_error, process_env, settings_methods};

/// The default API root.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
/// The `anthropic-version` header sent by default.
pub const API_VERSION: &str = "2023-06-01";
/// The `max_tokens` sent when `ChatOptions::max_tokens` is not set.
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

/// Builds an [`AnthropicClient`].
#[derive(Debug, Clone)]
pub struct AnthropicClientBuilder {
    settings: Settings,
    version: String,
    default_max_tokens: u32,
}

impl Default for AnthropicClientBuilder {
    fn default() -> Self {
        AnthropicClientBuilder {
            settings: Settings::new(DEFAULT_BASE_URL),
            version: API_VERSION.to_owned(),
            default_max_tokens: DEFAULT_MAX_TOKENS,
        }
    }
}

impl AnthropicClientBuilder {
    /// A builder with the defaults: `https://api.anthropic.com`, version `2023-06-01`,
    /// `max_tokens` 4096, the [`HttpOptions`](crate::HttpOptions) defaults, 2 retries, no key.
    pub fn new() -> Self {
        Self::default()
    }

    /// A builder filled from the environment: `ANTHROPIC_API_KEY`, `ANTHROPIC_BASE_URL`
    /// (default `https://api.anthropic.com`), `ANTHROPIC_MODEL`, and the timeouts
    /// `CAIRN_CONNECT_TIMEOUT`, `CAIRN_TIMEOUT`, `CAIRN_IDLE_TIMEOUT` (seconds; an invalid one
    /// makes [`build`](Self::build) fail).
    pub fn from_env() -> Self {
        Self::from_lookup(process_env)
    }

    /// Like [`from_env`](Self::from_env), reading the variables through `lookup`.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Self {
        let lookup: Lookup<'_> = &lookup;
        let mut b = Self::default();
        b.settings.read_env(
            lookup,
            &["ANTHROPIC_API_KEY"],
            "ANTHROPIC_MODEL",
            "ANTHROPIC_BASE_URL",
        );
        b
    }

    settings_methods!("x-api-key");

    /// The `anthropic-version` header (default `2023-06-01`).
    pub fn version(mut self, version: impl Into<String>) -> Self {
        self.version = version.into();
        self
    }

    /// The `max_tokens` sent when a call does not set `ChatOptions::max_tokens` (default 4096).
    pub fn default_max_tokens(mut self, n: u32) -> Self {
        self.default_max_tokens = n;
        self
    }

    /// Builds the client. Fails with [`ChatErrorKind::Config`] on an invalid base URL or
    /// header.
    pub fn build(mut self) -> Result<AnthropicClient, ChatError> {
        let endpoint = self.settings.endpoint(
            |k| (HeaderName::from_static("x-api-key"), k.to_owned()),
            &[("anthropic-version".into(), self.version)],
        )?;
        let messages = endpoint.target("v1/messages")?;
        Ok(AnthropicClient {
            inner: Arc::new(Inner {
                endpoint,
                messages,
                api_key: self.settings.api_key,
                model: self.settings.model,
                default_max_tokens: self.default_max_tokens,
            }),
        })
    }
}

/// A client for Anthropic's Messages API. Cheap to clone (clones share one connection pool).
#[derive(Clone)]
pub struct AnthropicClient {
    inner: Arc<Inner>,
}

struct Inner {
    endpoint: Endpoint,
    messages: Target,
    api_key: Option<ApiKey>,
    model: Option<String>,
    default_max_tokens: u32,
}

impl fmt::Debug for AnthropicClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let i = &self.inner;
        i.endpoint
            .debug_client(f, "AnthropicClient", &i.model, &i.api_key)
    }
}

impl AnthropicClient {
    /// A builder with the defaults (see [`AnthropicClientBuilder::new`]).
    pub fn builder() -> AnthropicClientBuilder {
        AnthropicClientBuilder::new()
    }

    /// A client configured from the environment (see [`AnthropicClientBuilder::from_env`]).
    ///
    /// Fails with [`ChatErrorKind::Config`] when `ANTHROPIC_API_KEY` is missing.
    pub fn from_env() -> Result<Self, ChatError> {
        let b = AnthropicClientBuilder::from_env();
        if b.settings.api_key.is_none() {
            return Err(config_error("ANTHROPIC_API_KEY is not set"));
        }
        b.build()
    }

    /// The default model, if one was configured.
    pub fn model(&self) -> Option<&str> {
        self.inner.model.as_deref()
    }

    /// The API root as configured (with any `user:password@` in it; show it through
    /// [`redact_url`](crate::redact_url)).
    pub fn base_url(&self) -> &str {
        &self.inner.endpoint.base_url
    }
}

// ---------------------------------------------------------------------------------------------
// Requests

fn image_block(url: &str, media_type: Option<&str>) -> Value {
    match parse_data_uri(url, media_type) {
        Some((mt, data)) => json!({
            "type": "image",
            "source": {"type": "base64", "media_type": mt, "data": data}
        }),
        None => json!({"type": "image", "source": {"type": "url", "url": url}}),
    }
}

fn blocks_of(m: &Message, out: &mut Vec<Value>) {
    for c in &m.contents {
        match c {
            Content::Text { text } if !text.is_empty() => {
                out.push(json!({"type": "text", "text": text}));
            }
            Content::Image { url, media_type } => out.push(image_block(url, media_type.as_deref())),
            Content::FunctionCall(fc) => out.push(json!({
                "type": "tool_use",
                "id": fc.call_id,
                "name": fc.name,
                "input": arguments_object(&fc.arguments),
            })),
            Content::FunctionResult(r) => {
                let (text, images) = result_parts(&r.output);
                let content = if images.is_empty() {
                    Value::String(text)
                } else {
                    let mut parts = Vec::with_capacity(images.len() + 1);
                    if !text.is_empty() {
                        parts.push(json!({"type": "text", "text": text}));
                    }
                    parts.extend(images.into_iter().map(|(u, mt)| image_block(u, mt)));
                    Value::Array(parts)
                };
                let mut b = json!({
                    "type": "tool_result",
                    "tool_use_id": r.call_id,
                    "content": content,
                });
                if r.is_error {
                    b["is_error"] = Value::Bool(true);
                }
                out.push(b);
            }
            _ => {}
        }
    }
}

/// The `system` text and the alternating `messages` of a conversation.
pub(crate) fn wire_messages(messages: &[Message], options: &ChatOptions) -> (String, Vec<Value>) {
    let mut system = options.instructions.clone().unwrap_or_default();
    let mut turns: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for m in messages {
        let role = match m.role {
            Role::System => {
                let t = m.text();
                if !t.is_empty() {
                    if !system.is_empty() {
                        system.push_str("\n\n");
                    }
                    system.push_str(&t);
                }
                continue;
            }
            Role::Assistant => "assistant",
            _ => "user",
        };
        let mut blocks = Vec::new();
        blocks_of(m, &mut blocks);
        if blocks.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some((r, b)) if *r == role => b.extend(blocks),
            _ => turns.push((role, blocks)),
        }
    }
    let wire = turns
        .into_iter()
        .map(|(role, mut blocks)| {
            if role == "user" {
                // Tool results must open the user turn that answers the tool calls.
                blocks.sort_by_key(|b| b["type"] != "tool_result");
            }
            json!({"role": role, "content": blocks})
        })
        .collect();
    (system, wire)
}

fn wire_tool_choice(tc: Option<&ToolChoice>, parallel: Option<bool>) -> Option<Value> {
    let mut v = match tc {
        None if parallel == Some(false) => json!({"type": "auto"}),
        None => return None,
        Some(ToolChoice::Required) => json!({"type": "any"}),
        Some(ToolChoice::None) => json!({"type": "none"}),
        Some(ToolChoice::Tool(name)) => json!({"type": "tool", "name": name}),
        // `Auto`, and any choice added later (`ToolChoice` is non-exhaustive).
        Some(_) => json!({"type": "auto"}),
    };
    if parallel == Some(false) && v["type"] != "none" {
        v["disable_parallel_tool_use"] = Value::Bool(true);
    }
    Some(v)
}

impl Inner {
    fn body(
        &self,
        messages: &[Message],
        options: &ChatOptions,
        client_kwargs: &Kwargs,
        stream: bool,
    ) -> Result<(Bytes, Option<HeaderMap>), ChatError> {
        let model = options
            .model
            .as_deref()
            .or(self.model.as_deref())
            .ok_or_else(|| {
                config_error(
                    "no model: set ChatOptions::model, the builder's model or ANTHROPIC_MODEL",
                )
            })?;
        let (extra_body, extra_headers) = client_extras(client_kwargs)?;
        let (system, wire) = wire_messages(messages, options);
        let mut b = Map::new();
        b.insert("model".into(), model.into());
        b.insert(
            "max_tokens".into(),
            options.max_tokens.unwrap_or(self.default_max_tokens).into(),
        );
        if !system.is_empty() {
            b.insert("system".into(), system.into());
        }
        b.insert("messages".into(), wire.into());
        if let Some(t) = options.temperature {
            b.insert("temperature".into(), json!(t));
        }
        if let Some(t) = options.top_p {
            b.insert("top_p".into(), json!(t));
        }
        if !options.stop.is_empty() {
            b.insert("stop_sequences".into(), json!(options.stop));
        }
        if !options.tools.is_empty() {
            let tools: Vec<Value> = options
                .tools
                .iter()
                .map(|t| {
                    let schema = match t.parameters.value() {
                        Value::Object(o) if !o.is_empty() => t.parameters.value().clone(),
                        _ => json!({"type": "object", "properties": {}}),
                    };
                    let mut v = json!({"name": t.name, "input_schema": schema});
                    if !t.description.is_empty() {
                        v["description"] = t.description.clone().into();
                    }
                    v
                })
                .collect();
            b.insert("tools".into(), tools.into());
            if let Some(tc) =
                wire_tool_choice(options.tool_choice.as_ref(), options.parallel_tool_calls)
            {
                b.insert("tool_choice".into(), tc);
            }
        }
        if stream {
            b.insert("stream".into(), true.into());
        }
        let body = finish_body(b, &options.additional_properties, extra_body)?;
        Ok((body, extra_headers))
    }

    async fn open(
        &self,
        messages: &[Message],
        options: &ChatOptions,
        client_kwargs: &Kwargs,
        stream: bool,
    ) -> Result<Resp, ChatError> {
        let (body, headers) = self.body(messages, options, client_kwargs, stream)?;
        self.endpoint
            .send(
                &self.messages,
                &body,
                headers.as_ref(),
                stream,
                status_error,
            )
            .await
    }

    async fn complete(
        &self,
        messages: &[Message],
        options: &ChatOptions,
        client_kwargs: &Kwargs,
    ) -> Result<ChatResponse, ChatError> {
        let resp = self.open(messages, options, client_kwargs, false).await?;
        parse_response(&resp.bytes().await?)
    }
}

// ---------------------------------------------------------------------------------------------
// Responses

#[derive(Debug, Default, Deserialize)]
struct WireUsage {
    #[serde(default, deserialize_with = "nullable")]
    input_tokens: u64,
    #[serde(default, deserialize_with = "nullable")]
    output_tokens: u64,
    #[serde(default, deserialize_with = "nullable")]
    cache_read_input_tokens: u64,
    #[serde(default, deserialize_with = "nullable")]
    cache_creation_input_tokens: u64,
}

impl WireUsage {
    fn to_usage(&self) -> Usage {
        Usage {
            input_tokens: self.input_tokens
                + self.cache_read_input_tokens
                + self.cache_creation_input_tokens,
            output_tokens: self.output_tokens,
            cached_input_tokens: self.cache_read_input_tokens,
        }
    }
}

/// A content block (a plain struct rather than a tagged enum, so `input` can stay raw and
/// unknown block types pass).
#[derive(Debug, Deserialize)]
struct Block<'a> {
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    thinking: Option<String>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default, borrow)]
    input: Option<&'a RawValue>,
}

#[derive(Debug, Deserialize)]
struct WireError {
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    message: Option<String>,
}

#[derive(Debug, Deserialize)]
struct WireMessage<'a> {
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default, deserialize_with = "nullable", borrow)]
    content: Vec<Block<'a>>,
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<WireError>,
}

fn finish_reason(s: &str) -> FinishReason {
    match s {
        "end_turn" | "stop_sequence" => FinishReason::Stop,
        "refusal" => FinishReason::ContentFilter,
        other => FinishReason::from(other),
    }
}

/// The arguments text of a tool call's `input` (`{}` when missing).
fn input_text(input: Option<&RawValue>) -> String {
    match input.map(RawValue::get) {
        None | Some("null") => "{}".to_owned(),
        Some(s) => s.to_owned(),
    }
}

fn wire_error(e: Option<WireError>) -> ChatError {
    let (message, kind) = e.map_or((None, None), |e| (e.message, e.kind));
    event_error(message, kind)
}

/// Parses a non-streaming response body.
pub(crate) fn parse_response(body: &[u8]) -> Result<ChatResponse, ChatError> {
    let w: WireMessage<'_> = serde_json::from_slice(body)
        .map_err(|e| decode_error("invalid Anthropic message", body, e))?;
    if w.kind.as_deref() == Some("error") || w.error.is_some() {
        return Err(wire_error(w.error));
    }
    let (mut text, mut reasoning, mut calls) = (String::new(), String::new(), Vec::new());
    for b in w.content {
        match b.kind.as_deref() {
            Some("text") => text.push_str(b.text.as_deref().unwrap_or("")),
            Some("thinking") => reasoning.push_str(b.thinking.as_deref().unwrap_or("")),
            Some("tool_use") => calls.push(Content::FunctionCall(FunctionCall {
                call_id: b.id.unwrap_or_default(),
                name: b.name.unwrap_or_default(),
                arguments: input_text(b.input),
            })),
            _ => {}
        }
    }
    let mut contents = Vec::with_capacity(calls.len() + 2);
    if !reasoning.is_empty() {
        contents.push(Content::Reasoning { text: reasoning });
    }
    if !text.is_empty() {
        contents.push(Content::Text { text });
    }
    contents.extend(calls);
    Ok(ChatResponse {
        messages: vec![Message::new(Role::Assistant, contents)],
        finish_reason: w.stop_reason.as_deref().map(finish_reason),
        usage: w.usage.as_ref().map(WireUsage::to_usage),
        model: w.model,
        response_id: w.id,
    })
}

// ---------------------------------------------------------------------------------------------
// Streams

#[derive(Debug, Deserialize)]
struct StartMessage {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Debug, Default, Deserialize)]
struct Delta {
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    partial_json: Option<String>,
    #[serde(default)]
    thinking: Option<String>,
    #[serde(default)]
    stop_reason: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Event<'a> {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    index: Option<usize>,
    #[serde(default)]
    message: Option<StartMessage>,
    #[serde(default, borrow)]
    content_block: Option<Block<'a>>,
    #[serde(default)]
    delta: Option<Delta>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<WireError>,
}

/// A tool-use block being streamed.
struct OpenCall {
    block: usize,
    call: usize,
    has_args: bool,
}

/// Turns Messages-API stream events into updates.
#[derive(Default)]
pub(crate) struct AnthropicStreamDecoder {
    calls: Vec<OpenCall>,
    n_calls: usize,
    usage: WireUsage,
    has_usage: bool,
    finish_reason: Option<FinishReason>,
    model: Option<String>,
    id: Option<String>,
    done: bool,
}

impl AnthropicStreamDecoder {
    fn finish(&mut self, out: &mut VecDeque<ChatResponseUpdate>) {
        self.done = true;
        if self.has_usage {
            out.push_back(UpdateEvent::Usage(self.usage.to_usage()).into());
        }
        out.push_back(
            UpdateEvent::Finished {
                finish_reason: self.finish_reason.take(),
                model: self.model.take(),
                response_id: self.id.take(),
            }
            .into(),
        );
    }

    fn merge_usage(&mut self, u: &WireUsage) {
        self.has_usage = true;
        // message_start carries the input side, message_delta the (cumulative) output side.
        if u.input_tokens > 0 {
            self.usage.input_tokens = u.input_tokens;
        }
        if u.cache_read_input_tokens > 0 {
            self.usage.cache_read_input_tokens = u.cache_read_input_tokens;
        }
        if u.cache_creation_input_tokens > 0 {
            self.usage.cache_creation_input_tokens = u.cache_creation_input_tokens;
        }
        if u.output_tokens > 0 {
            self.usage.output_tokens = u.output_tokens;
        }
    }

    fn close_call(&mut self, block: usize, out: &mut VecDeque<ChatResponseUpdate>) {
        if let Some(pos) = self.calls.iter().position(|c| c.block == block) {
            let c = self.calls.swap_remove(pos);
            if !c.has_args {
                out.push_back(
                    UpdateEvent::ToolCallDelta {
                        index: c.call,
                        arguments: "{}".into(),
                    }
                    .into(),
                );
            }
        }
    }
}

impl StreamDecoder for AnthropicStreamDecoder {
    fn on_event(
        &mut self,
        _event: &[u8],
        data: &[u8],
        out: &mut VecDeque<ChatResponseUpdate>,
    ) -> Result<(), ChatError> {
        let ev: Event<'_> = serde_json::from_slice(data)
            .map_err(|e| decode_error("invalid Anthropic stream event", data, e))?;
        let index = ev.index.unwrap_or(0);
        match ev.kind.as_str() {
            "message_start" => {
                if let Some(m) = ev.message {
                    self.id = m.id;
                    self.model = m.model;
                    if let Some(u) = &m.usage {
                        self.merge_usage(u);
                    }
                }
            }
            "content_block_start" => {
                if let Some(Block {
                    kind: Some(k),
                    text,
                    thinking,
                    id,
                    name,
                    input,
                }) = ev.content_block
                {
                    match k.as_str() {
                        "text" => {
                            if let Some(text) = text.filter(|t| !t.is_empty()) {
                                out.push_back(UpdateEvent::TextDelta { text }.into());
                            }
                        }
                        "thinking" => {
                            if let Some(text) = thinking.filter(|t| !t.is_empty()) {
                                out.push_back(UpdateEvent::ReasoningDelta { text }.into());
                            }
                        }
                        "tool_use" => {
                            let (id, name) = (id.unwrap_or_default(), name.unwrap_or_default());
                            let call = self.n_calls;
                            self.n_calls += 1;
                            out.push_back(
                                UpdateEvent::ToolCallStart {
                                    index: call,
                                    call_id: id,
                                    name,
                                }
                                .into(),
                            );
                            // The start carries `input: {}`; a non-empty one is the whole input.
                            let start = input.map(RawValue::get).unwrap_or("{}");
                            let has_args = !matches!(
                                start.replace(char::is_whitespace, "").as_str(),
                                "{}" | "null"
                            );
                            if has_args {
                                out.push_back(
                                    UpdateEvent::ToolCallDelta {
                                        index: call,
                                        arguments: start.to_owned(),
                                    }
                                    .into(),
                                );
                            }
                            self.calls.push(OpenCall {
                                block: index,
                                call,
                                has_args,
                            });
                        }
                        _ => {}
                    }
                }
            }
            "content_block_delta" => {
                let d = ev.delta.unwrap_or_default();
                match d.kind.as_deref() {
                    Some("text_delta") => {
                        if let Some(t) = d.text.filter(|t| !t.is_empty()) {
                            out.push_back(UpdateEvent::TextDelta { text: t }.into());
                        }
                    }
                    Some("thinking_delta") => {
                        if let Some(t) = d.thinking.filter(|t| !t.is_empty()) {
                            out.push_back(UpdateEvent::ReasoningDelta { text: t }.into());
                        }
                    }
                    Some("input_json_delta") => {
                        if let Some(j) = d.partial_json.filter(|j| !j.is_empty())
                            && let Some(c) = self.calls.iter_mut().find(|c| c.block == index)
                        {
                            c.has_args = true;
                            out.push_back(
                                UpdateEvent::ToolCallDelta {
                                    index: c.call,
                                    arguments: j,
                                }
                                .into(),
                            );
                        }
                    }
                    _ => {}
                }
            }
            "content_block_stop" => self.close_call(index, out),
            "message_delta" => {
                if let Some(r) = ev.delta.and_then(|d| d.stop_reason) {
                    self.finish_reason = Some(finish_reason(&r));
                }
                if let Some(u) = &ev.usage {
                    self.merge_usage(u);
                }
            }
            "message_stop" => {
                let open: Vec<usize> = self.calls.iter().map(|c| c.block).collect();
                for b in open {
                    self.close_call(b, out);
                }
                self.finish(out);
            }
            "error" => return Err(wire_error(ev.error)),
            _ => {}
        }
        Ok(())
    }

    fn is_done(&self) -> bool {
        self.done
    }

    fn on_eof(
        &mut self,
        pending: Option<Vec<u8>>,
        out: &mut VecDeque<ChatResponseUpdate>,
    ) -> Result<(), ChatError> {
        if let Some(p) = pending {
            self.on_event(b"", &p, out)?;
        }
        if self.done {
            Ok(())
        } else {
            Err(ChatError::new(
                ChatErrorKind::StreamInterrupted,
                "the stream ended before message_stop",
            ))
        }
    }
}

impl ChatClient for AnthropicClient {
    fn get_response<'a>(
        &'a self,
        request: ChatRequest<'a>,
    ) -> BoxFuture<'a, Result<ChatResponse, ChatError>> {
        let i = &self.inner;
        i.endpoint
            .respond(i.complete(request.messages, request.options, request.client_kwargs))
    }

    fn get_streaming_response<'a>(&'a self, request: ChatRequest<'a>) -> ChatStream<'a> {
        let i = &self.inner;
        i.endpoint.stream(
            i.open(
                request.messages,
                request.options,
                request.client_kwargs,
                true,
            ),
            AnthropicStreamDecoder::default(),
        )
    }

    fn describe(&self) -> String {
        match &self.inner.model {
            Some(m) => format!("anthropic:{m}"),
            None => "anthropic".to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merges_turns_and_orders_tool_results_first() {
        let call = FunctionCall::new("c1", "echo", &json!({"a": 1}));
        let msgs = vec![
            Message::system("sys"),
            Message::user("hi"),
            Message::user("again"),
            Message::new(Role::Assistant, vec![Content::FunctionCall(call)]),
            Message::user("note"),
            Message::tool_result(cairn_core::FunctionResult {
                call_id: "c1".into(),
                output: vec![Content::text("out")],
                is_error: true,
            }),
        ];
        let opts = ChatOptions {
            instructions: Some("inst".into()),
            ..ChatOptions::default()
        };
        let (system, wire) = wire_messages(&msgs, &opts);
        assert_eq!(system, "inst\n\nsys");
        assert_eq!(wire.len(), 3);
        assert_eq!(wire[0]["content"].as_array().map(Vec::len), Some(2));
        assert_eq!(wire[1]["content"][0]["input"], json!({"a": 1}));
        assert_eq!(wire[2]["content"][0]["type"], "tool_result");
        assert_eq!(wire[2]["content"][0]["is_error"], true);
        assert_eq!(wire[2]["content"][1]["text"], "note");
    }

    #[test]
    fn images_and_bad_arguments() {
        let b = image_block("data:image/png;base64,AAAA", None);
        assert_eq!(b["source"]["media_type"], "image/png");
        assert_eq!(b["source"]["data"], "AAAA");
        assert_eq!(
            image_block("https://x/y.png", None)["source"]["type"],
            "url"
        );
        assert_eq!(arguments_object("{oops"), json!({}));
    }
}
