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
use std::sync::Arc;

use cairn_core::{
    BoxFuture, ChatClient, ChatError, ChatErrorKind, ChatOptions, ChatRequest, ChatResponse,
    ChatResponseUpdate, ChatStream, Content, FinishReason, FunctionCall, Message, Role, ToolChoice,
    UpdateEvent, Usage,
};
use reqwest::header::HeaderName;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use crate::common::{
    arguments_object, finish_body, nullable, parse_data_uri, result_parts, system_and_turns,
};
use crate::transport::endpoint::Target;
use crate::transport::error::{decode_error, event_error, status_error};
use crate::transport::settings::client_extras;
use crate::transport::{ClientCore, Payload, ProviderEnv, Resp, Settings, StreamDecoder, Updates};
use crate::transport::{client_methods, settings_methods};

/// The default API root.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
/// The `anthropic-version` header sent by default.
pub const API_VERSION: &str = "2023-06-01";
/// The `max_tokens` sent when `ChatOptions::max_tokens` is not set.
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

/// What [`AnthropicClientBuilder::from_env`] reads.
static ENV: ProviderEnv = ProviderEnv {
    default_base_url: DEFAULT_BASE_URL,
    keys: &["ANTHROPIC_API_KEY"],
    model: "ANTHROPIC_MODEL",
    base_url: "ANTHROPIC_BASE_URL",
    headers: &[],
    missing_key: "ANTHROPIC_API_KEY is not set",
    key_required_for: None,
};

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
            settings: Settings::new(&ENV),
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

    settings_methods!(
        "x-api-key",
        ENV,
        /// A builder filled from the environment: `ANTHROPIC_API_KEY`, `ANTHROPIC_BASE_URL`
        /// (default `https://api.anthropic.com`), `ANTHROPIC_MODEL`, and the timeouts
        /// `CAIRN_CONNECT_TIMEOUT`, `CAIRN_TIMEOUT`, `CAIRN_IDLE_TIMEOUT` (seconds; an invalid
        /// one makes [`build`](Self::build) fail).
    );

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
    pub fn build(self) -> Result<AnthropicClient, ChatError> {
        let core = self.settings.into_core(
            &ENV,
            |k| (HeaderName::from_static("x-api-key"), k.to_owned()),
            &[("anthropic-version".into(), self.version)],
        )?;
        let messages = core.endpoint.target("v1/messages")?;
        let default_max_tokens = self.default_max_tokens;
        Ok(AnthropicClient {
            inner: Arc::new(Inner {
                core,
                messages,
                default_max_tokens,
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
    core: ClientCore,
    messages: Target,
    default_max_tokens: u32,
}

client_methods!(AnthropicClient, AnthropicClientBuilder, ENV, debug,
    /// Fails with [`ChatErrorKind::Config`] when `ANTHROPIC_API_KEY` is missing.
);

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
    let (system, turns) = system_and_turns(messages, options, "assistant", |i, out| {
        blocks_of(&messages[i], out)
    });
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
    fn body(&self, r: &ChatRequest<'_>, stream: bool) -> Result<Payload, ChatError> {
        let (messages, options) = (r.messages, r.options);
        let model = self.core.model(options)?;
        let (extra_body, extra_headers) = client_extras(r.client_kwargs)?;
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
        Ok(Payload {
            body,
            extra_headers,
        })
    }

    async fn open(&self, r: &ChatRequest<'_>, stream: bool) -> Result<Resp, ChatError> {
        let payload = self.body(r, stream)?;
        let e = &self.core.endpoint;
        e.send(&self.messages, &payload, stream, status_error).await
    }

    async fn complete(&self, r: ChatRequest<'_>) -> Result<ChatResponse, ChatError> {
        let resp = self.open(&r, false).await?;
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
    fn on_event(&mut self, data: &[u8], out: &mut Updates) -> Result<(), ChatError> {
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

    fn on_eof(&mut self, pending: Option<Vec<u8>>, out: &mut Updates) -> Result<(), ChatError> {
        if let Some(p) = pending {
            self.on_event(&p, out)?;
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
        i.core.endpoint.respond(i.complete(request))
    }

    fn get_streaming_response<'a>(&'a self, request: ChatRequest<'a>) -> ChatStream<'a> {
        let i = &self.inner;
        let open = async move { i.open(&request, true).await };
        i.core
            .endpoint
            .stream(open, AnthropicStreamDecoder::default())
    }

    fn describe(&self) -> String {
        self.inner.core.describe("anthropic")
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
