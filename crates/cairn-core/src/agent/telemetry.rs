//! Spans with `tracing` around each run, model call and tool call, named and attributed as
//! OpenTelemetry's GenAI semantic conventions say, so an OpenTelemetry layer
//! (`tracing-opentelemetry`; the `cairn-otel` crate sets one up from `OTEL_*` variables) exports
//! them as they are. Any other `tracing` subscriber sees the same spans.
//!
//! | span | name (`otel.name`) | kind | attributes |
//! | --- | --- | --- | --- |
//! | a run | `invoke_agent {agent}` | internal | `gen_ai.operation.name`, `gen_ai.provider.name`, `gen_ai.agent.name`, `gen_ai.request.model`, `gen_ai.conversation.id` (the thread, else the session), usage totals, `error.type` |
//! | a model call | `chat {model}` | client | `gen_ai.operation.name`, `gen_ai.provider.name`, `gen_ai.request.model`, `gen_ai.agent.name`, `gen_ai.conversation.id`, `gen_ai.request.{temperature,top_p,max_tokens,seed}` when set, `gen_ai.response.{id,model,finish_reasons}`, `gen_ai.usage.{input_tokens,output_tokens,cache_read.input_tokens}`, `error.type` |
//! | a tool call | `execute_tool {tool}` | internal | `gen_ai.operation.name`, `gen_ai.tool.name`, `gen_ai.tool.call.id`, `gen_ai.tool.type`, `gen_ai.tool.description`, `error.type` (`tool_error` for an `Error: …` result) |
//!
//! tracing span names are static, so each span is named by its operation and carries the
//! convention's full name in `otel.name` and its kind in `otel.kind`, which
//! `tracing-opentelemetry` uses for the exported span. A subagent's run is an `invoke_agent`
//! span inside the `execute_tool task` span that started it.
//!
//! **Content is opt-in** ([`set_capture_content`], off by default): with it, model calls
//! record `gen_ai.system_instructions`, `gen_ai.input.messages` and `gen_ai.output.messages`,
//! and tool calls `gen_ai.tool.call.arguments` and `gen_ai.tool.call.result`, as JSON in the
//! conventions' message schema. Function-invocation kwargs and client kwargs are never
//! recorded, with or without it.
//!
//! Cost: spans are at INFO level; with no subscriber interested, making one is a check of a
//! static flag, and nothing is formatted or serialized.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::{Value, json};
use tracing::Span;
use tracing::field::Empty;

use crate::agent::AgentResponse;
use crate::client::{ChatClient, ChatOptions};
use crate::context::ChatContext;
use crate::error::Error;
use crate::message::{Content, FinishReason, FunctionCall, FunctionResult, Message, Usage};
use crate::tool::ToolRouter;

static CAPTURE_CONTENT: AtomicBool = AtomicBool::new(false);

/// Turns recording of message contents, instructions, tool arguments and tool results on spans
/// on or off for this process (off by default). The CLI turns it on when
/// `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`.
pub fn set_capture_content(on: bool) {
    CAPTURE_CONTENT.store(on, Ordering::Relaxed);
}

/// Whether contents are recorded (see [`set_capture_content`]).
pub fn capture_content() -> bool {
    CAPTURE_CONTENT.load(Ordering::Relaxed)
}

/// The provider and model a client names in [`ChatClient::describe`] (`openai:gpt-4.1`),
/// with the provider spelled as the conventions' `gen_ai.provider.name` values.
fn provider_and_model(client: &Arc<dyn ChatClient>) -> (String, Option<String>) {
    let d = client.describe();
    let (provider, model) = match d.split_once(':') {
        Some((p, m)) => (p.to_owned(), Some(m.to_owned()).filter(|m| !m.is_empty())),
        None => (d, None),
    };
    let provider = match provider.as_str() {
        "gemini" | "google" | "google_genai" => "gcp.gemini".to_owned(),
        "local" => "cairn.local".to_owned(),
        _ => provider,
    };
    (provider, model)
}

pub(crate) fn agent_span(
    agent: Option<&str>,
    model: Option<&str>,
    client: &Arc<dyn ChatClient>,
    conversation: Option<&str>,
) -> Span {
    let span = tracing::info_span!(
        "invoke_agent",
        otel.name = Empty,
        otel.kind = "internal",
        gen_ai.operation.name = "invoke_agent",
        gen_ai.provider.name = Empty,
        gen_ai.agent.name = Empty,
        gen_ai.request.model = Empty,
        gen_ai.conversation.id = Empty,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        error.type = Empty,
    );
    if !span.is_disabled() {
        match agent {
            Some(name) => {
                span.record("otel.name", format!("invoke_agent {name}"));
                span.record("gen_ai.agent.name", name);
            }
            None => {
                span.record("otel.name", "invoke_agent");
            }
        }
        let (provider, described) = provider_and_model(client);
        span.record("gen_ai.provider.name", provider);
        if let Some(model) = model.map(str::to_owned).or(described) {
            span.record("gen_ai.request.model", model);
        }
        if let Some(c) = conversation {
            span.record("gen_ai.conversation.id", c);
        }
    }
    span
}

pub(crate) fn chat_span(ctx: &ChatContext, client: &Arc<dyn ChatClient>) -> Span {
    let span = tracing::info_span!(
        "chat",
        otel.name = Empty,
        otel.kind = "client",
        gen_ai.operation.name = "chat",
        gen_ai.provider.name = Empty,
        gen_ai.agent.name = Empty,
        gen_ai.conversation.id = Empty,
        gen_ai.request.model = Empty,
        gen_ai.request.temperature = Empty,
        gen_ai.request.top_p = Empty,
        gen_ai.request.max_tokens = Empty,
        gen_ai.request.seed = Empty,
        gen_ai.response.id = Empty,
        gen_ai.response.model = Empty,
        gen_ai.response.finish_reasons = Empty,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        gen_ai.usage.cache_read.input_tokens = Empty,
        gen_ai.system_instructions = Empty,
        gen_ai.input.messages = Empty,
        gen_ai.output.messages = Empty,
        error.type = Empty,
    );
    if !span.is_disabled() {
        let options: &ChatOptions = &ctx.options;
        let (provider, described) = provider_and_model(client);
        let model = options
            .model
            .clone()
            .or(described)
            .unwrap_or_else(|| provider.clone());
        span.record("otel.name", format!("chat {model}"));
        span.record("gen_ai.provider.name", provider);
        span.record("gen_ai.request.model", model);
        if let Some(agent) = &ctx.agent_name {
            span.record("gen_ai.agent.name", agent.as_str());
        }
        if let Some(s) = &ctx.session {
            span.record("gen_ai.conversation.id", s.id());
        }
        if let Some(t) = options.temperature {
            span.record("gen_ai.request.temperature", f64::from(t));
        }
        if let Some(t) = options.top_p {
            span.record("gen_ai.request.top_p", f64::from(t));
        }
        if let Some(m) = options.max_tokens {
            span.record("gen_ai.request.max_tokens", i64::from(m));
        }
        if let Some(s) = options.seed {
            span.record("gen_ai.request.seed", s);
        }
        if capture_content() {
            if let Some(i) = options.instructions.as_deref().filter(|i| !i.is_empty()) {
                span.record(
                    "gen_ai.system_instructions",
                    json!([{"type": "text", "content": i}]).to_string(),
                );
            }
            let input: Vec<Value> = ctx.messages.iter().map(|m| message_json(m, None)).collect();
            span.record("gen_ai.input.messages", Value::Array(input).to_string());
        }
    }
    span
}

pub(crate) fn tool_span(call: &FunctionCall, router: &ToolRouter) -> Span {
    let span = tracing::info_span!(
        "execute_tool",
        otel.name = Empty,
        otel.kind = "internal",
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = Empty,
        gen_ai.tool.call.id = Empty,
        gen_ai.tool.type = "function",
        gen_ai.tool.description = Empty,
        gen_ai.tool.call.arguments = Empty,
        gen_ai.tool.call.result = Empty,
        error.type = Empty,
    );
    if !span.is_disabled() {
        span.record("otel.name", format!("execute_tool {}", call.name));
        span.record("gen_ai.tool.name", call.name.as_str());
        span.record("gen_ai.tool.call.id", call.call_id.as_str());
        if let Some(tool) = router.get(&call.name) {
            span.record("gen_ai.tool.description", tool.spec().description.as_str());
        }
        if capture_content() {
            span.record("gen_ai.tool.call.arguments", call.arguments.as_str());
        }
    }
    span
}

/// A message in the conventions' JSON schema (`{"role", "parts": [...]}`).
fn message_json(m: &Message, finish: Option<&FinishReason>) -> Value {
    let parts: Vec<Value> = m
        .contents
        .iter()
        .map(|c| match c {
            Content::Text { text } => json!({"type": "text", "content": text}),
            Content::Reasoning { text } => json!({"type": "reasoning", "content": text}),
            Content::Image { url, media_type } => {
                if url.starts_with("data:") {
                    json!({"type": "blob", "modality": "image", "mime_type": media_type})
                } else {
                    json!({"type": "uri", "modality": "image", "uri": url, "mime_type": media_type})
                }
            }
            Content::FunctionCall(fc) => {
                let args = serde_json::from_str::<Value>(&fc.arguments)
                    .unwrap_or_else(|_| Value::String(fc.arguments.clone()));
                json!({"type": "tool_call", "id": fc.call_id, "name": fc.name, "arguments": args})
            }
            Content::FunctionResult(r) => {
                json!({"type": "tool_call_response", "id": r.call_id, "response": r.text()})
            }
        })
        .collect();
    let mut v = json!({"role": m.role.as_str(), "parts": parts});
    if let Some(f) = finish {
        v["finish_reason"] = Value::String(finish_reason(f).to_owned());
    }
    v
}

fn finish_reason(f: &FinishReason) -> &str {
    match f {
        FinishReason::Stop => "stop",
        FinishReason::Length => "length",
        FinishReason::ToolCalls => "tool_call",
        FinishReason::ContentFilter => "content_filter",
        FinishReason::Other(o) => o,
    }
}

fn record_usage(span: &Span, usage: &Usage) {
    span.record("gen_ai.usage.input_tokens", usage.input_tokens);
    span.record("gen_ai.usage.output_tokens", usage.output_tokens);
}

/// A low-cardinality name for what failed (`error.type`).
pub(crate) fn error_type(e: &Error) -> &'static str {
    match e {
        Error::Chat(c) if c.is_context_overflow() => "context_overflow",
        Error::Chat(_) => "chat_error",
        Error::Middleware(_) => "middleware_error",
        Error::MissingResult(_) => "middleware_error",
        Error::InvalidInput(_) => "invalid_input",
        Error::Cancelled => "cancelled",
        Error::Serde(_) => "serialization_error",
        Error::Internal(_) => "internal_error",
        Error::Checkpoint(_) => "checkpoint_error",
        Error::Interrupted(_) => "interrupted",
    }
}

pub(crate) fn record_run(span: &Span, result: &crate::Result<AgentResponse>) {
    if span.is_disabled() {
        return;
    }
    match result {
        Ok(r) => {
            if r.usage != Usage::default() {
                record_usage(span, &r.usage);
            }
        }
        Err(e) => {
            span.record("error.type", error_type(e));
        }
    }
}

pub(crate) fn record_chat(span: &Span, result: &crate::Result<ChatContext>) {
    if span.is_disabled() {
        return;
    }
    match result {
        Ok(ctx) => {
            if let Some(r) = &ctx.result {
                if let Some(u) = &r.usage {
                    record_usage(span, u);
                    if u.cached_input_tokens > 0 {
                        span.record(
                            "gen_ai.usage.cache_read.input_tokens",
                            u.cached_input_tokens,
                        );
                    }
                }
                if let Some(id) = &r.response_id {
                    span.record("gen_ai.response.id", id.as_str());
                }
                if let Some(m) = &r.model {
                    span.record("gen_ai.response.model", m.as_str());
                }
                if let Some(f) = &r.finish_reason {
                    span.record(
                        "gen_ai.response.finish_reasons",
                        json!([finish_reason(f)]).to_string(),
                    );
                }
                if capture_content() {
                    let out: Vec<Value> = r
                        .messages
                        .iter()
                        .map(|m| message_json(m, r.finish_reason.as_ref()))
                        .collect();
                    span.record("gen_ai.output.messages", Value::Array(out).to_string());
                }
            }
        }
        Err(e) => {
            span.record("error.type", error_type(e));
        }
    }
}

pub(crate) fn record_tool(span: &Span, result: &crate::Result<(FunctionResult, bool)>) {
    if span.is_disabled() {
        return;
    }
    match result {
        Ok((r, _)) => {
            if r.is_error {
                span.record("error.type", "tool_error");
            }
            if capture_content() {
                span.record("gen_ai.tool.call.result", r.text());
            }
        }
        Err(e) => {
            span.record("error.type", error_type(e));
        }
    }
}
