//! The Responses API (`POST /responses`): request serialization from borrowed cairn values,
//! response and stream-event wire types, and their mapping to cairn.
//!
//! cairn resends the whole conversation on every call (`input` items), so no server-side state
//! (`previous_response_id`, `store`) is needed; both can still be set through extra fields.

use std::borrow::Cow;
use std::collections::VecDeque;

use cairn_core::{
    ChatError, ChatErrorKind, ChatOptions, ChatResponse, ChatResponseUpdate, Content, FinishReason,
    FunctionCall, Message, Role, UpdateEvent,
};
use serde::ser::{SerializeMap, SerializeSeq, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::StreamDecoder;
use super::tools::{ToolChoiceOf, ToolShape, ToolsOf};
use super::wire::{
    Extras, LooseText, ResponseFormat, WireUsage, arguments_text, decode_error, error_parts,
    event_error, nullable, text_of,
};
use crate::transport::Updates;

/// The request body.
pub(crate) struct ResponsesRequest<'a> {
    pub(crate) model: &'a str,
    pub(crate) messages: &'a [Message],
    pub(crate) options: &'a ChatOptions,
    pub(crate) stream: bool,
    pub(crate) extras: Extras<'a>,
}

impl Serialize for ResponsesRequest<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let o = self.options;
        let ex = &self.extras;
        let mut m = s.serialize_map(None)?;
        ex.put(&mut m, "model", self.model)?;
        if let Some(i) = o.instructions.as_deref().filter(|i| !i.is_empty()) {
            ex.put(&mut m, "instructions", i)?;
        }
        ex.put(&mut m, "input", &WireInput(self.messages))?;
        if let Some(t) = o.temperature {
            ex.put(&mut m, "temperature", &t)?;
        }
        if let Some(t) = o.top_p {
            ex.put(&mut m, "top_p", &t)?;
        }
        if let Some(t) = o.max_tokens {
            ex.put(&mut m, "max_output_tokens", &t)?;
        }
        if !o.tools.is_empty() {
            ex.put(&mut m, "tools", &ToolsOf(&o.tools, ToolShape::Responses))?;
            if let Some(tc) = &o.tool_choice {
                ex.put(
                    &mut m,
                    "tool_choice",
                    &ToolChoiceOf(tc, ToolShape::Responses),
                )?;
            }
            if let Some(p) = o.parallel_tool_calls {
                ex.put(&mut m, "parallel_tool_calls", &p)?;
            }
        }
        if let Some(rf) = &o.response_format {
            let format = match ResponseFormat::from_option(rf) {
                ResponseFormat::Raw(v) => match v.get("json_schema") {
                    // A chat-completions style format: flatten it.
                    Some(js) => {
                        let mut f = serde_json::Map::new();
                        f.insert("type".into(), "json_schema".into());
                        if let Some(obj) = js.as_object() {
                            f.extend(obj.iter().map(|(k, v)| (k.clone(), v.clone())));
                        }
                        serde_json::Value::Object(f)
                    }
                    None => v.clone(),
                },
                ResponseFormat::Schema { name, schema } => serde_json::json!({
                    "type": "json_schema", "name": name, "schema": schema, "strict": true
                }),
            };
            ex.put(&mut m, "text", &serde_json::json!({ "format": format }))?;
        }
        if self.stream {
            ex.put(&mut m, "stream", &true)?;
        }
        ex.write(&mut m)?;
        m.end()
    }
}

struct WireInput<'a>(&'a [Message]);

#[derive(Serialize)]
struct InputText<'a> {
    r#type: &'static str,
    text: &'a str,
}

#[derive(Serialize)]
struct InputImage<'a> {
    r#type: &'static str,
    image_url: &'a str,
}

/// Content parts as `input_text` / `input_image`.
struct InputParts<'a>(&'a [Content]);

impl Serialize for InputParts<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(None)?;
        for p in self.0 {
            match p {
                Content::Text { text } => seq.serialize_element(&InputText {
                    r#type: "input_text",
                    text,
                })?,
                Content::Image { url, .. } => seq.serialize_element(&InputImage {
                    r#type: "input_image",
                    image_url: url,
                })?,
                _ => {}
            }
        }
        seq.end()
    }
}

enum MsgContent<'a> {
    Text(Cow<'a, str>),
    Parts(&'a [Content]),
}

impl Serialize for MsgContent<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            MsgContent::Text(t) => s.serialize_str(t),
            MsgContent::Parts(p) => InputParts(p).serialize(s),
        }
    }
}

#[derive(Serialize)]
struct MsgItem<'a> {
    role: &'a str,
    content: MsgContent<'a>,
}

#[derive(Serialize)]
struct CallItem<'a> {
    r#type: &'static str,
    call_id: &'a str,
    name: &'a str,
    arguments: &'a str,
}

#[derive(Serialize)]
struct OutputItem<'a> {
    r#type: &'static str,
    call_id: &'a str,
    output: MsgContent<'a>,
}

fn has_images(parts: &[Content]) -> bool {
    parts.iter().any(|p| matches!(p, Content::Image { .. }))
}

impl Serialize for WireInput<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(None)?;
        for m in self.0 {
            let role = match m.role {
                Role::Tool => None,
                ref r => Some(r.as_str()),
            };
            if let Some(role) = role {
                let content = if has_images(&m.contents) {
                    Some(MsgContent::Parts(&m.contents))
                } else {
                    text_of(&m.contents).map(MsgContent::Text)
                };
                let empty = m.contents.is_empty();
                match content {
                    Some(content) => seq.serialize_element(&MsgItem { role, content })?,
                    None if empty => seq.serialize_element(&MsgItem {
                        role,
                        content: MsgContent::Text(Cow::Borrowed("")),
                    })?,
                    None => {}
                }
            }
            for c in &m.contents {
                match c {
                    Content::FunctionCall(fc) => seq.serialize_element(&CallItem {
                        r#type: "function_call",
                        call_id: &fc.call_id,
                        name: &fc.name,
                        arguments: if fc.arguments.is_empty() {
                            "{}"
                        } else {
                            &fc.arguments
                        },
                    })?,
                    Content::FunctionResult(r) => {
                        let output = if has_images(&r.output) {
                            MsgContent::Parts(&r.output)
                        } else {
                            MsgContent::Text(text_of(&r.output).unwrap_or_default())
                        };
                        seq.serialize_element(&OutputItem {
                            r#type: "function_call_output",
                            call_id: &r.call_id,
                            output,
                        })?
                    }
                    _ => {}
                }
            }
        }
        seq.end()
    }
}

// ---------------------------------------------------------------------------------------------
// Responses
// ---------------------------------------------------------------------------------------------

#[derive(Deserialize, Default)]
struct WirePart {
    #[serde(default, rename = "type")]
    kind: LooseText,
    #[serde(default)]
    text: LooseText,
    #[serde(default)]
    refusal: LooseText,
}

#[derive(Deserialize, Default)]
struct WireItem<'a> {
    #[serde(default, rename = "type")]
    kind: LooseText,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    call_id: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default, borrow)]
    arguments: Option<&'a RawValue>,
    #[serde(default, deserialize_with = "nullable")]
    content: Vec<WirePart>,
    #[serde(default, deserialize_with = "nullable")]
    summary: Vec<WirePart>,
}

#[derive(Deserialize, Default)]
struct IncompleteDetails {
    #[serde(default)]
    reason: LooseText,
}

#[derive(Deserialize)]
struct WireResponse<'a> {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    status: LooseText,
    #[serde(default, borrow, deserialize_with = "nullable")]
    output: Vec<WireItem<'a>>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default, borrow)]
    error: Option<&'a RawValue>,
    #[serde(default)]
    incomplete_details: Option<IncompleteDetails>,
}

impl WireResponse<'_> {
    fn failure(&self) -> Option<ChatError> {
        let status = self.status.0.as_deref();
        let has_error = self.error.is_some_and(|e| e.get() != "null");
        if status == Some("failed") || (has_error && self.output.is_empty()) {
            let v: serde_json::Value = self
                .error
                .and_then(|e| serde_json::from_str(e.get()).ok())
                .unwrap_or_default();
            let (m, c) = error_parts(&serde_json::json!({ "error": v }));
            return Some(event_error(
                m.or_else(|| Some("the response failed".to_owned())),
                c,
            ));
        }
        None
    }

    fn finish_reason(&self, has_calls: bool) -> Option<FinishReason> {
        match self.status.0.as_deref() {
            Some("incomplete") => Some(
                match self
                    .incomplete_details
                    .as_ref()
                    .and_then(|d| d.reason.0.as_deref())
                {
                    Some("content_filter") => FinishReason::ContentFilter,
                    _ => FinishReason::Length,
                },
            ),
            _ if has_calls => Some(FinishReason::ToolCalls),
            Some("completed") | None => Some(FinishReason::Stop),
            Some(other) => Some(FinishReason::from(other)),
        }
    }
}

fn reasoning_text(item: &WireItem<'_>, out: &mut String) {
    for p in item.content.iter().chain(&item.summary) {
        if let Some(t) = &p.text.0 {
            out.push_str(t);
        }
    }
}

/// Parses a non-streaming response body.
pub(crate) fn parse_response(body: &[u8]) -> Result<ChatResponse, ChatError> {
    let w: WireResponse<'_> =
        serde_json::from_slice(body).map_err(|e| decode_error("invalid response", body, e))?;
    if let Some(e) = w.failure() {
        return Err(e);
    }
    let mut reasoning = String::new();
    let mut text = String::new();
    let mut calls = Vec::new();
    for item in &w.output {
        match item.kind.0.as_deref() {
            Some("message") => {
                for p in &item.content {
                    match p.kind.0.as_deref() {
                        Some("refusal") => {
                            if let Some(t) = p.refusal.0.as_deref().or(p.text.0.as_deref()) {
                                text.push_str(t);
                            }
                        }
                        _ => {
                            if let Some(t) = &p.text.0 {
                                text.push_str(t);
                            }
                        }
                    }
                }
            }
            Some("reasoning") => reasoning_text(item, &mut reasoning),
            Some("function_call") => {
                let i = calls.len();
                calls.push(FunctionCall {
                    call_id: item
                        .call_id
                        .clone()
                        .or_else(|| item.id.clone())
                        .filter(|s| !s.is_empty())
                        .unwrap_or_else(|| format!("call_{i}")),
                    name: item.name.clone().unwrap_or_default(),
                    arguments: arguments_text(item.arguments)
                        .map_err(|e| decode_error("invalid tool-call arguments", body, e))?,
                });
            }
            _ => {}
        }
    }
    let mut contents = Vec::new();
    if !reasoning.is_empty() {
        contents.push(Content::Reasoning { text: reasoning });
    }
    if !text.is_empty() {
        contents.push(Content::Text { text });
    }
    let finish_reason = w.finish_reason(!calls.is_empty());
    contents.extend(calls.into_iter().map(Content::FunctionCall));
    Ok(ChatResponse {
        messages: vec![Message::new(Role::Assistant, contents)],
        finish_reason,
        usage: w.usage.as_ref().map(WireUsage::to_usage),
        model: w.model,
        response_id: w.id,
    })
}

#[derive(Deserialize)]
struct WireEvent<'a> {
    #[serde(default, rename = "type")]
    kind: LooseText,
    #[serde(default)]
    output_index: Option<usize>,
    #[serde(default)]
    delta: LooseText,
    #[serde(default)]
    text: LooseText,
    #[serde(default, borrow)]
    arguments: Option<&'a RawValue>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default, borrow)]
    item: Option<WireItem<'a>>,
    #[serde(default, borrow)]
    response: Option<&'a RawValue>,
    #[serde(default)]
    message: LooseText,
    #[serde(default)]
    code: LooseText,
    #[serde(default, borrow)]
    error: Option<&'a RawValue>,
}

/// A streamed output item.
struct StreamItem {
    output_index: usize,
    /// For function calls: the cairn call index.
    call: Option<usize>,
    /// Whether deltas were seen (then `.done` events repeat what was already sent).
    had_delta: bool,
}

/// Turns Responses stream events into updates.
#[derive(Default)]
pub(crate) struct ResponsesStreamDecoder {
    items: Vec<StreamItem>,
    calls: usize,
    done: bool,
}

impl ResponsesStreamDecoder {
    fn item(&mut self, output_index: usize) -> &mut StreamItem {
        let pos = match self
            .items
            .iter()
            .rposition(|i| i.output_index == output_index)
        {
            Some(p) => p,
            None => {
                self.items.push(StreamItem {
                    output_index,
                    call: None,
                    had_delta: false,
                });
                self.items.len() - 1
            }
        };
        &mut self.items[pos]
    }

    /// The call index of the function-call item at `output_index`, starting it if needed.
    fn call_at(
        &mut self,
        output_index: usize,
        item: Option<&WireItem<'_>>,
        name: Option<&str>,
        out: &mut VecDeque<ChatResponseUpdate>,
    ) -> usize {
        let next = self.calls;
        let slot = self.item(output_index);
        if let Some(c) = slot.call {
            return c;
        }
        slot.call = Some(next);
        self.calls += 1;
        let call_id = item
            .and_then(|i| i.call_id.clone().or_else(|| i.id.clone()))
            .unwrap_or_default();
        let name = item
            .and_then(|i| i.name.clone())
            .or_else(|| name.map(str::to_owned))
            .unwrap_or_default();
        out.push_back(
            UpdateEvent::ToolCallStart {
                index: next,
                call_id,
                name,
            }
            .into(),
        );
        next
    }

    fn on_data(
        &mut self,
        data: &[u8],
        out: &mut VecDeque<ChatResponseUpdate>,
    ) -> Result<(), ChatError> {
        let ev: WireEvent<'_> = serde_json::from_slice(data)
            .map_err(|e| decode_error("invalid response stream event", data, e))?;
        let oi = ev.output_index.unwrap_or(0);
        match ev.kind.0.as_deref().unwrap_or("") {
            "response.output_text.delta" | "response.refusal.delta" => {
                if let Some(t) = ev.delta.0
                    && !t.is_empty()
                {
                    self.item(oi).had_delta = true;
                    out.push_back(UpdateEvent::TextDelta { text: t }.into());
                }
            }
            "response.output_text.done" | "response.refusal.done" => {
                let seen = self.item(oi).had_delta;
                if !seen
                    && let Some(t) = ev.text.0.or(ev.delta.0)
                    && !t.is_empty()
                {
                    self.item(oi).had_delta = true;
                    out.push_back(UpdateEvent::TextDelta { text: t }.into());
                }
            }
            "response.reasoning_text.delta"
            | "response.reasoning_summary_text.delta"
            | "response.reasoning.delta" => {
                if let Some(t) = ev.delta.0
                    && !t.is_empty()
                {
                    self.item(oi).had_delta = true;
                    out.push_back(UpdateEvent::ReasoningDelta { text: t }.into());
                }
            }
            "response.output_item.added" => {
                if let Some(item) = &ev.item
                    && item.kind.0.as_deref() == Some("function_call")
                {
                    let index = self.call_at(oi, Some(item), None, out);
                    let args = arguments_text(item.arguments)
                        .map_err(|e| decode_error("invalid tool-call arguments", data, e))?;
                    if !args.is_empty() {
                        self.item(oi).had_delta = true;
                        out.push_back(
                            UpdateEvent::ToolCallDelta {
                                index,
                                arguments: args,
                            }
                            .into(),
                        );
                    }
                }
            }
            "response.function_call_arguments.delta" => {
                let index = self.call_at(oi, None, None, out);
                if let Some(d) = ev.delta.0
                    && !d.is_empty()
                {
                    self.item(oi).had_delta = true;
                    out.push_back(
                        UpdateEvent::ToolCallDelta {
                            index,
                            arguments: d,
                        }
                        .into(),
                    );
                }
            }
            "response.function_call_arguments.done" => {
                let index = self.call_at(oi, None, ev.name.as_deref(), out);
                if !self.item(oi).had_delta {
                    let args = arguments_text(ev.arguments)
                        .map_err(|e| decode_error("invalid tool-call arguments", data, e))?;
                    self.item(oi).had_delta = true;
                    if !args.is_empty() {
                        out.push_back(
                            UpdateEvent::ToolCallDelta {
                                index,
                                arguments: args,
                            }
                            .into(),
                        );
                    }
                }
            }
            "response.output_item.done" => {
                let Some(item) = &ev.item else { return Ok(()) };
                let seen = self.item(oi).had_delta;
                match item.kind.0.as_deref() {
                    Some("function_call") => {
                        let index = self.call_at(oi, Some(item), None, out);
                        if !seen {
                            self.item(oi).had_delta = true;
                            let args = arguments_text(item.arguments).map_err(|e| {
                                decode_error("invalid tool-call arguments", data, e)
                            })?;
                            if !args.is_empty() {
                                out.push_back(
                                    UpdateEvent::ToolCallDelta {
                                        index,
                                        arguments: args,
                                    }
                                    .into(),
                                );
                            }
                        }
                    }
                    Some("message") if !seen => {
                        let mut text = String::new();
                        for p in &item.content {
                            if let Some(t) = p.text.0.as_deref().or(p.refusal.0.as_deref()) {
                                text.push_str(t);
                            }
                        }
                        self.item(oi).had_delta = true;
                        if !text.is_empty() {
                            out.push_back(UpdateEvent::TextDelta { text }.into());
                        }
                    }
                    Some("reasoning") if !seen => {
                        let mut text = String::new();
                        reasoning_text(item, &mut text);
                        self.item(oi).had_delta = true;
                        if !text.is_empty() {
                            out.push_back(UpdateEvent::ReasoningDelta { text }.into());
                        }
                    }
                    _ => {}
                }
            }
            "response.completed" | "response.incomplete" | "response.failed" => {
                let Some(raw) = ev.response else {
                    return Err(ChatError::new(
                        ChatErrorKind::Decode,
                        "a terminal response event carries no response",
                    ));
                };
                let r: WireResponse<'_> = serde_json::from_str(raw.get())
                    .map_err(|e| decode_error("invalid response", raw.get().as_bytes(), e))?;
                if let Some(e) = r.failure() {
                    return Err(e);
                }
                if let Some(u) = &r.usage {
                    out.push_back(UpdateEvent::Usage(u.to_usage()).into());
                }
                let has_calls = self.calls > 0
                    || r.output
                        .iter()
                        .any(|i| i.kind.0.as_deref() == Some("function_call"));
                self.done = true;
                out.push_back(
                    UpdateEvent::Finished {
                        finish_reason: r.finish_reason(has_calls),
                        model: r.model,
                        response_id: r.id,
                    }
                    .into(),
                );
            }
            "error" => {
                let (m, c) = match ev.error {
                    Some(e) if e.get() != "null" => {
                        let v: serde_json::Value =
                            serde_json::from_str(e.get()).unwrap_or_default();
                        error_parts(&serde_json::json!({ "error": v }))
                    }
                    _ => (ev.message.0, ev.code.0),
                };
                return Err(event_error(m, c));
            }
            _ => {}
        }
        Ok(())
    }
}

impl StreamDecoder for ResponsesStreamDecoder {
    fn on_event(&mut self, data: &[u8], out: &mut Updates) -> Result<(), ChatError> {
        if self.done || data.trim_ascii() == b"[DONE]" {
            return Ok(());
        }
        self.on_data(data, out)
    }

    fn is_done(&self) -> bool {
        self.done
    }

    fn on_eof(&mut self, _pending: Option<Vec<u8>>, _out: &mut Updates) -> Result<(), ChatError> {
        if self.done {
            Ok(())
        } else {
            Err(ChatError::new(
                ChatErrorKind::StreamInterrupted,
                "the response stream ended before response.completed",
            ))
        }
    }
}
