//! Chat Completions (`POST /chat/completions`): request serialization from borrowed cairn
//! values, response and stream-chunk wire types, and their mapping to cairn.

use std::borrow::Cow;
use std::collections::VecDeque;

use cairn_core::{
    ChatError, ChatErrorKind, ChatOptions, ChatResponse, ChatResponseUpdate, Content, FinishReason,
    FunctionCall, Message, Role, ToolChoice, ToolSpec, UpdateEvent, Usage,
};
use serde::ser::{SerializeMap, SerializeSeq, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::StreamDecoder;
use super::tools::{ToolChoiceOf, ToolShape, ToolsOf};
use super::wire::{
    Extras, LooseText, ResponseFormat, Str, WireUsage, arguments_text, decode_error, event_error,
    nullable, text_of,
};
use crate::transport::Updates;

/// The request body.
pub(crate) struct ChatRequest<'a> {
    pub(crate) model: &'a str,
    pub(crate) messages: &'a [Message],
    pub(crate) options: &'a ChatOptions,
    pub(crate) stream: bool,
    /// Whether a stream asks for usage.
    pub(crate) stream_usage: bool,
    pub(crate) extras: Extras<'a>,
    /// `max_completion_tokens` (OpenAI) or `max_tokens` (older compatible servers).
    pub(crate) max_tokens_field: &'static str,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

impl Serialize for ChatRequest<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let o = self.options;
        let ex = &self.extras;
        let mut m = s.serialize_map(None)?;
        ex.put(&mut m, "model", self.model)?;
        ex.put(
            &mut m,
            "messages",
            &WireMessages {
                instructions: o.instructions.as_deref().filter(|i| !i.is_empty()),
                messages: self.messages,
            },
        )?;
        if let Some(t) = o.temperature {
            ex.put(&mut m, "temperature", &t)?;
        }
        if let Some(t) = o.top_p {
            ex.put(&mut m, "top_p", &t)?;
        }
        if let Some(t) = o.max_tokens {
            ex.put(&mut m, self.max_tokens_field, &t)?;
        }
        if !o.stop.is_empty() {
            ex.put(&mut m, "stop", &o.stop)?;
        }
        if let Some(seed) = o.seed {
            ex.put(&mut m, "seed", &seed)?;
        }
        if !o.tools.is_empty() {
            ex.put(&mut m, "tools", &WireTools(&o.tools))?;
            if let Some(tc) = &o.tool_choice {
                ex.put(&mut m, "tool_choice", &WireToolChoice(tc))?;
            }
            if let Some(p) = o.parallel_tool_calls {
                ex.put(&mut m, "parallel_tool_calls", &p)?;
            }
        }
        if let Some(rf) = &o.response_format {
            match ResponseFormat::from_option(rf) {
                ResponseFormat::Raw(v) => ex.put(&mut m, "response_format", v)?,
                ResponseFormat::Schema { name, schema } => ex.put(
                    &mut m,
                    "response_format",
                    &serde_json::json!({
                        "type": "json_schema",
                        "json_schema": {"name": name, "schema": schema, "strict": true}
                    }),
                )?,
            }
        }
        if self.stream {
            ex.put(&mut m, "stream", &true)?;
        }
        if self.stream && self.stream_usage {
            ex.put(
                &mut m,
                "stream_options",
                &StreamOptions {
                    include_usage: true,
                },
            )?;
        }
        ex.write(&mut m)?;
        m.end()
    }
}

/// The tools of a request (see [`ToolsOf`]).
struct WireTools<'a>(&'a [ToolSpec]);

impl Serialize for WireTools<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        ToolsOf(self.0, ToolShape::Chat).serialize(s)
    }
}

/// The tool choice of a request (see [`ToolChoiceOf`]).
struct WireToolChoice<'a>(&'a ToolChoice);

impl Serialize for WireToolChoice<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        ToolChoiceOf(self.0, ToolShape::Chat).serialize(s)
    }
}

struct WireMessages<'a> {
    instructions: Option<&'a str>,
    messages: &'a [Message],
}

/// `content` of a wire message.
enum WireContent<'a> {
    Null,
    Text(Cow<'a, str>),
    Parts(&'a [Content]),
}

impl Serialize for WireContent<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            WireContent::Null => s.serialize_none(),
            WireContent::Text(t) => s.serialize_str(t),
            WireContent::Parts(parts) => {
                let mut seq = s.serialize_seq(None)?;
                for p in *parts {
                    match p {
                        Content::Text { text } => seq.serialize_element(&TextPart {
                            r#type: "text",
                            text,
                        })?,
                        Content::Image { url, .. } => seq.serialize_element(&ImagePart {
                            r#type: "image_url",
                            image_url: ImageUrl { url },
                        })?,
                        _ => {}
                    }
                }
                seq.end()
            }
        }
    }
}

#[derive(Serialize)]
struct TextPart<'a> {
    r#type: &'static str,
    text: &'a str,
}

#[derive(Serialize)]
struct ImageUrl<'a> {
    url: &'a str,
}

#[derive(Serialize)]
struct ImagePart<'a> {
    r#type: &'static str,
    image_url: ImageUrl<'a>,
}

#[derive(Serialize)]
struct WireMessage<'a> {
    role: &'a str,
    content: WireContent<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_calls: Option<WireCalls<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<&'a str>,
}

struct WireCalls<'a>(&'a [Content]);

impl Serialize for WireCalls<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct F<'a> {
            name: &'a str,
            arguments: &'a str,
        }
        #[derive(Serialize)]
        struct Call<'a> {
            id: &'a str,
            r#type: &'static str,
            function: F<'a>,
        }
        s.collect_seq(self.0.iter().filter_map(|c| match c {
            Content::FunctionCall(fc) => Some(Call {
                id: &fc.call_id,
                r#type: "function",
                function: F {
                    name: &fc.name,
                    arguments: if fc.arguments.is_empty() {
                        "{}"
                    } else {
                        &fc.arguments
                    },
                },
            }),
            _ => None,
        }))
    }
}

fn has_images(parts: &[Content]) -> bool {
    parts.iter().any(|p| matches!(p, Content::Image { .. }))
}

impl Serialize for WireMessages<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(None)?;
        if let Some(i) = self.instructions {
            seq.serialize_element(&WireMessage {
                role: "system",
                content: WireContent::Text(Cow::Borrowed(i)),
                tool_calls: None,
                tool_call_id: None,
            })?;
        }
        // Images returned by tools go in one user message after the run of tool messages
        // (the API only allows text in tool messages).
        let mut tool_images: Vec<&Content> = Vec::new();
        for (idx, m) in self.messages.iter().enumerate() {
            let mut results = m.contents.iter().filter_map(|c| match c {
                Content::FunctionResult(r) => Some(r),
                _ => None,
            });
            if m.role == Role::Tool {
                for r in results.by_ref() {
                    seq.serialize_element(&WireMessage {
                        role: "tool",
                        content: WireContent::Text(text_of(&r.output).unwrap_or_default()),
                        tool_calls: None,
                        tool_call_id: Some(&r.call_id),
                    })?;
                    tool_images.extend(
                        r.output
                            .iter()
                            .filter(|c| matches!(c, Content::Image { .. })),
                    );
                }
                let next_is_tool = self
                    .messages
                    .get(idx + 1)
                    .is_some_and(|n| n.role == Role::Tool);
                if !next_is_tool && !tool_images.is_empty() {
                    let parts: Vec<Content> = tool_images.drain(..).cloned().collect();
                    seq.serialize_element(&WireMessage {
                        role: "user",
                        content: WireContent::Parts(&parts),
                        tool_calls: None,
                        tool_call_id: None,
                    })?;
                }
                continue;
            }
            let has_calls = m
                .contents
                .iter()
                .any(|c| matches!(c, Content::FunctionCall(_)));
            let has_results = m
                .contents
                .iter()
                .any(|c| matches!(c, Content::FunctionResult(_)));
            let media = has_images(&m.contents);
            let text = if media { None } else { text_of(&m.contents) };
            if text.is_some() || media || has_calls || !has_results {
                let content = match text {
                    _ if media => WireContent::Parts(&m.contents),
                    Some(t) => WireContent::Text(t),
                    None if has_calls => WireContent::Null,
                    None => WireContent::Text(Cow::Borrowed("")),
                };
                seq.serialize_element(&WireMessage {
                    role: m.role.as_str(),
                    content,
                    tool_calls: has_calls.then_some(WireCalls(&m.contents)),
                    tool_call_id: None,
                })?;
            }
            for r in results {
                seq.serialize_element(&WireMessage {
                    role: "tool",
                    content: WireContent::Text(text_of(&r.output).unwrap_or_default()),
                    tool_calls: None,
                    tool_call_id: Some(&r.call_id),
                })?;
            }
        }
        seq.end()
    }
}

// ---------------------------------------------------------------------------------------------
// Responses
// ---------------------------------------------------------------------------------------------

#[derive(Deserialize)]
struct WireFunction<'a> {
    #[serde(default)]
    name: Option<String>,
    #[serde(default, borrow)]
    arguments: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct WireToolCall<'a> {
    #[serde(default)]
    index: Option<usize>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default, borrow)]
    function: Option<WireFunction<'a>>,
}

#[derive(Deserialize, Default)]
struct WireMsg<'a> {
    #[serde(default)]
    content: LooseText,
    #[serde(default)]
    reasoning_content: LooseText,
    #[serde(default)]
    reasoning: LooseText,
    #[serde(default)]
    refusal: LooseText,
    #[serde(default, deserialize_with = "nullable", borrow)]
    tool_calls: Vec<WireToolCall<'a>>,
}

#[derive(Deserialize)]
struct WireChoice<'a> {
    #[serde(default)]
    index: Option<u32>,
    #[serde(default, borrow)]
    message: Option<WireMsg<'a>>,
    #[serde(default, borrow)]
    delta: Option<WireMsg<'a>>,
    #[serde(default)]
    finish_reason: LooseText,
}

/// A complete response or a stream chunk (the same shape, `message` vs `delta`).
#[derive(Deserialize)]
struct WireCompletion<'a> {
    #[serde(default, borrow)]
    id: Option<Str<'a>>,
    #[serde(default, borrow)]
    model: Option<Str<'a>>,
    #[serde(default, deserialize_with = "nullable", borrow)]
    choices: Vec<WireChoice<'a>>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default, borrow)]
    error: Option<&'a RawValue>,
}

fn error_value(raw: &RawValue) -> ChatError {
    let v: serde_json::Value = serde_json::from_str(raw.get()).unwrap_or_default();
    let wrapped = serde_json::json!({ "error": v });
    let (m, c) = super::wire::error_parts(&wrapped);
    event_error(m, c)
}

fn first_choice<'b, 'a>(choices: &'b mut [WireChoice<'a>]) -> Option<&'b mut WireChoice<'a>> {
    let pos = choices
        .iter()
        .position(|c| c.index.unwrap_or(0) == 0)
        .unwrap_or(0);
    choices.get_mut(pos)
}

/// Parses a non-streaming response body.
pub(crate) fn parse_response(body: &[u8]) -> Result<ChatResponse, ChatError> {
    let mut w: WireCompletion<'_> = serde_json::from_slice(body)
        .map_err(|e| decode_error("invalid chat completion", body, e))?;
    if let Some(e) = w.error
        && w.choices.is_empty()
        && e.get() != "null"
    {
        return Err(error_value(e));
    }
    let Some(choice) = first_choice(&mut w.choices) else {
        return Err(ChatError::new(
            ChatErrorKind::Decode,
            "the chat completion has no choices",
        ));
    };
    let msg = choice.message.take().unwrap_or_default();
    let mut contents = Vec::new();
    if let Some(r) = msg.reasoning_content.0.or(msg.reasoning.0)
        && !r.is_empty()
    {
        contents.push(Content::Reasoning { text: r });
    }
    let mut text = msg.content.0.unwrap_or_default();
    if let Some(r) = msg.refusal.0 {
        text.push_str(&r);
    }
    if !text.is_empty() {
        contents.push(Content::Text { text });
    }
    for (i, tc) in msg.tool_calls.into_iter().enumerate() {
        let (name, args) = match tc.function {
            Some(f) => (
                f.name.unwrap_or_default(),
                arguments_text(f.arguments)
                    .map_err(|e| decode_error("invalid tool-call arguments", body, e))?,
            ),
            None => (String::new(), String::new()),
        };
        contents.push(Content::FunctionCall(FunctionCall {
            call_id: tc
                .id
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| format!("call_{i}")),
            name,
            arguments: args,
        }));
    }
    Ok(ChatResponse {
        messages: vec![Message::new(Role::Assistant, contents)],
        finish_reason: choice.finish_reason.0.as_deref().map(FinishReason::from),
        usage: w.usage.as_ref().map(WireUsage::to_usage),
        model: w.model.map(Str::into_owned),
        response_id: w.id.map(Str::into_owned),
    })
}

/// One tool call being streamed.
struct StreamCall {
    wire_index: usize,
    id: Option<String>,
    named: bool,
}

/// Turns chat-completion chunks into updates.
#[derive(Default)]
pub(crate) struct ChatStreamDecoder {
    calls: Vec<StreamCall>,
    finish_reason: Option<FinishReason>,
    usage: Option<Usage>,
    model: Option<String>,
    id: Option<String>,
    done: bool,
}

impl ChatStreamDecoder {
    fn finish(&mut self, out: &mut VecDeque<ChatResponseUpdate>) {
        self.done = true;
        out.push_back(
            UpdateEvent::Finished {
                finish_reason: self.finish_reason.take(),
                model: self.model.take(),
                response_id: self.id.take(),
            }
            .into(),
        );
    }

    fn on_chunk(
        &mut self,
        data: &[u8],
        out: &mut VecDeque<ChatResponseUpdate>,
    ) -> Result<(), ChatError> {
        let mut w: WireCompletion<'_> = serde_json::from_slice(data)
            .map_err(|e| decode_error("invalid chat completion chunk", data, e))?;
        if let Some(e) = w.error
            && e.get() != "null"
        {
            return Err(error_value(e));
        }
        // Every chunk repeats them: keep the first (borrowed until then, so not allocated).
        if self.id.is_none() {
            self.id = w.id.take().map(Str::into_owned);
        }
        if self.model.is_none() {
            self.model = w.model.take().map(Str::into_owned);
        }
        if let Some(choice) = first_choice(&mut w.choices) {
            if let Some(delta) = choice.delta.take().or_else(|| choice.message.take()) {
                if let Some(r) = delta.reasoning_content.0.or(delta.reasoning.0)
                    && !r.is_empty()
                {
                    out.push_back(UpdateEvent::ReasoningDelta { text: r }.into());
                }
                if let Some(t) = delta.content.0
                    && !t.is_empty()
                {
                    out.push_back(UpdateEvent::TextDelta { text: t }.into());
                }
                if let Some(t) = delta.refusal.0
                    && !t.is_empty()
                {
                    out.push_back(UpdateEvent::TextDelta { text: t }.into());
                }
                for (pos, tc) in delta.tool_calls.into_iter().enumerate() {
                    self.on_tool_delta(pos, tc, data, out)?;
                }
            }
            if let Some(f) = choice.finish_reason.0.as_deref() {
                self.finish_reason = Some(FinishReason::from(f));
            }
        }
        if let Some(u) = &w.usage {
            let u = u.to_usage();
            self.usage = Some(u);
            out.push_back(UpdateEvent::Usage(u).into());
        }
        Ok(())
    }

    fn on_tool_delta(
        &mut self,
        pos: usize,
        tc: WireToolCall<'_>,
        data: &[u8],
        out: &mut VecDeque<ChatResponseUpdate>,
    ) -> Result<(), ChatError> {
        let wire_index = tc.index.unwrap_or(pos);
        let id = tc.id.filter(|s| !s.is_empty());
        // The latest call with this wire index, unless the delta carries a different id (some
        // servers reuse index 0 for every call).
        let found = self.calls.iter().rposition(|c| c.wire_index == wire_index);
        let index = match found {
            Some(i) if id.is_none() || self.calls[i].id.is_none() || self.calls[i].id == id => i,
            _ => {
                self.calls.push(StreamCall {
                    wire_index,
                    id: None,
                    named: false,
                });
                self.calls.len() - 1
            }
        };
        let (name, args) = match tc.function {
            Some(f) => (
                f.name.filter(|n| !n.is_empty()),
                arguments_text(f.arguments)
                    .map_err(|e| decode_error("invalid tool-call arguments", data, e))?,
            ),
            None => (None, String::new()),
        };
        let is_new = found != Some(index);
        let call = &mut self.calls[index];
        let new_id = call.id.is_none() && id.is_some();
        if new_id {
            call.id = id;
        }
        let new_name = name.is_some() && !call.named;
        if is_new || new_id || new_name {
            call.named |= name.is_some();
            out.push_back(
                UpdateEvent::ToolCallStart {
                    index,
                    call_id: call.id.clone().unwrap_or_default(),
                    name: name.unwrap_or_default(),
                }
                .into(),
            );
        }
        if !args.is_empty() {
            out.push_back(
                UpdateEvent::ToolCallDelta {
                    index,
                    arguments: args,
                }
                .into(),
            );
        }
        Ok(())
    }
}

impl StreamDecoder for ChatStreamDecoder {
    fn on_event(&mut self, data: &[u8], out: &mut Updates) -> Result<(), ChatError> {
        if self.done {
            return Ok(());
        }
        if data.trim_ascii() == b"[DONE]" {
            self.finish(out);
            return Ok(());
        }
        self.on_chunk(data, out)
    }

    fn is_done(&self) -> bool {
        self.done
    }

    fn on_eof(&mut self, pending: Option<Vec<u8>>, out: &mut Updates) -> Result<(), ChatError> {
        if self.done {
            return Ok(());
        }
        let done_marker = pending
            .as_deref()
            .is_some_and(|d| d.trim_ascii() == b"[DONE]");
        if done_marker || self.finish_reason.is_some() {
            self.finish(out);
            return Ok(());
        }
        Err(ChatError::new(
            ChatErrorKind::StreamInterrupted,
            "the chat completion stream ended before a finish reason or [DONE]",
        ))
    }
}

#[cfg(test)]
mod perf_probe {
    use super::*;

    #[test]
    #[ignore = "timing probe: cargo test --release -- --ignored --nocapture"]
    fn parse_and_serialize_timing() {
        let body = br#"{"id": "chatcmpl-57ac85c8731a31cc130e6943", "object": "chat.completion", "created": 1700000000, "model": "fake-model", "system_fingerprint": "fp_fakellm", "choices": [{"index": 0, "message": {"role": "assistant", "content": null, "refusal": null, "tool_calls": [{"id": "call_5_0", "type": "function", "function": {"name": "echo", "arguments": "{\"text\": \"hi\"}"}}]}, "logprobs": null, "finish_reason": "tool_calls"}], "usage": {"prompt_tokens": 250, "completion_tokens": 5, "total_tokens": 255, "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0}, "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0, "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}}}"#;
        let n = 200_000;
        let t = std::time::Instant::now();
        for _ in 0..n {
            std::hint::black_box(parse_response(std::hint::black_box(body)).unwrap());
        }
        println!("parse: {:?}/call", t.elapsed() / n);
        let mut msgs = vec![Message::user("[scenario:loop steps=20] go")];
        for i in 0..5 {
            msgs.push(Message::new(
                Role::Assistant,
                vec![Content::FunctionCall(FunctionCall::new(
                    format!("call_{i}_0"),
                    "echo",
                    &serde_json::json!({"text":"hi"}),
                ))],
            ));
            msgs.push(Message::tool_result(cairn_core::FunctionResult {
                call_id: format!("call_{i}_0"),
                output: vec![Content::text("hi")],
                is_error: false,
            }));
        }
        let o = ChatOptions {
            tools: vec![ToolSpec::new(
                "echo",
                "Echo.",
                serde_json::json!({"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}),
            )],
            ..Default::default()
        };
        let props = serde_json::Map::new();
        let t = std::time::Instant::now();
        for _ in 0..n {
            let req = ChatRequest {
                model: "fake-model",
                messages: &msgs,
                options: &o,
                stream: false,
                stream_usage: true,
                extras: Extras {
                    props: &props,
                    body: None,
                },
                max_tokens_field: "max_tokens",
            };
            std::hint::black_box(serde_json::to_vec(&req).unwrap());
        }
        println!("serialize: {:?}/call", t.elapsed() / n);
    }
}
