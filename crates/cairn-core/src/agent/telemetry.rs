//! Spans with `tracing` around each run, model call and tool call, named and with fields after
//! OpenTelemetry's GenAI semantic conventions, so an OpenTelemetry layer exports them as they
//! are: `invoke_agent {agent}` › `chat {model}` and `execute_tool {tool}`.
//!
//! tracing span names are static, so each span is named by its operation (`invoke_agent`,
//! `chat`, `execute_tool`) and carries the convention's full name in `otel.name`, which
//! `tracing-opentelemetry` uses as the exported name. Fields: `gen_ai.operation.name`,
//! `gen_ai.agent.name`, `gen_ai.request.model`, `gen_ai.tool.name`, `gen_ai.tool.call.id`,
//! `gen_ai.tool.type`, `gen_ai.usage.input_tokens` / `output_tokens` (recorded when the
//! response reports usage; a run's are its calls' sums), `gen_ai.response.id`, and
//! `error.type` on failure (a tool call whose result is an `Error: …` has
//! `error.type = "tool_error"`). Spans are at INFO level; with no subscriber interested,
//! making one is a check of a static flag and nothing is formatted. Content (messages,
//! arguments, results) is never recorded.

use std::sync::Arc;

use tracing::Span;
use tracing::field::Empty;

use crate::agent::AgentResponse;
use crate::client::{ChatClient, ChatOptions};
use crate::context::ChatContext;
use crate::error::Error;
use crate::message::{FunctionCall, FunctionResult, Usage};
use crate::tool::ToolRouter;

pub(crate) fn agent_span(agent: Option<&str>, model: Option<&str>) -> Span {
    let span = tracing::info_span!(
        "invoke_agent",
        otel.name = Empty,
        gen_ai.operation.name = "invoke_agent",
        gen_ai.agent.name = Empty,
        gen_ai.request.model = Empty,
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
        if let Some(model) = model {
            span.record("gen_ai.request.model", model);
        }
    }
    span
}

pub(crate) fn chat_span(
    agent: Option<&str>,
    options: &ChatOptions,
    client: &Arc<dyn ChatClient>,
) -> Span {
    let span = tracing::info_span!(
        "chat",
        otel.name = Empty,
        gen_ai.operation.name = "chat",
        gen_ai.agent.name = Empty,
        gen_ai.request.model = Empty,
        gen_ai.response.id = Empty,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        error.type = Empty,
    );
    if !span.is_disabled() {
        let model = options.model.clone().unwrap_or_else(|| client.describe());
        span.record("otel.name", format!("chat {model}"));
        span.record("gen_ai.request.model", model);
        if let Some(agent) = agent {
            span.record("gen_ai.agent.name", agent);
        }
    }
    span
}

pub(crate) fn tool_span(call: &FunctionCall, router: &ToolRouter) -> Span {
    let span = tracing::info_span!(
        "execute_tool",
        otel.name = Empty,
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = Empty,
        gen_ai.tool.call.id = Empty,
        gen_ai.tool.type = "function",
        gen_ai.tool.description = Empty,
        error.type = Empty,
    );
    if !span.is_disabled() {
        span.record("otel.name", format!("execute_tool {}", call.name));
        span.record("gen_ai.tool.name", call.name.as_str());
        span.record("gen_ai.tool.call.id", call.call_id.as_str());
        if let Some(tool) = router.get(&call.name) {
            span.record("gen_ai.tool.description", tool.spec().description.as_str());
        }
    }
    span
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
                }
                if let Some(id) = &r.response_id {
                    span.record("gen_ai.response.id", id.as_str());
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
        Ok((r, _)) if r.is_error => {
            span.record("error.type", "tool_error");
        }
        Ok(_) => {}
        Err(e) => {
            span.record("error.type", error_type(e));
        }
    }
}
