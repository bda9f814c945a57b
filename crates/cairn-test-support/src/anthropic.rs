//! Anthropic Messages wire shapes for a scripted [`Turn`]: the plain message and its
//! `event:`-named stream.

use serde_json::{Value, json};

use crate::Turn;
use crate::sse::{pieces, typed_events};

/// The model name the builders report.
pub const MODEL: &str = "claude-test";

fn blocks(t: &Turn) -> Vec<Value> {
    let mut out = Vec::new();
    if let Some(r) = &t.reasoning {
        out.push(json!({"type": "thinking", "thinking": r, "signature": "sig"}));
    }
    if let Some(text) = &t.text {
        out.push(json!({"type": "text", "text": text}));
    }
    for (id, name, args) in &t.calls {
        let input: Value = serde_json::from_str(args).unwrap_or_else(|_| json!({}));
        out.push(json!({"type": "tool_use", "id": id, "name": name, "input": input}));
    }
    out
}

fn stop_reason(t: &Turn) -> &'static str {
    if t.calls.is_empty() {
        "end_turn"
    } else {
        "tool_use"
    }
}

/// A Messages API response for `t` (usage 11 in, 3 out).
pub fn message_json(t: &Turn) -> String {
    json!({"id": "msg_1", "type": "message", "role": "assistant", "model": MODEL,
           "content": blocks(t), "stop_reason": stop_reason(t), "stop_sequence": null,
           "usage": {"input_tokens": 11, "output_tokens": 3}})
    .to_string()
}

/// The Messages stream for `t`: `message_start`, a block per thought/text/call with its deltas
/// (text in pieces of 3 characters, arguments in pieces of 5), `message_delta`, `message_stop`.
pub fn message_sse(t: &Turn) -> Vec<String> {
    let mut ev = vec![
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
        "role": "assistant", "model": MODEL, "content": [], "stop_reason": null,
        "usage": {"input_tokens": 11, "output_tokens": 1}}}),
    ];
    for (i, b) in blocks(t).iter().enumerate() {
        match b["type"].as_str() {
            Some("thinking") => {
                ev.push(json!({"type": "content_block_start", "index": i, "content_block": {"type": "thinking", "thinking": ""}}));
                for p in pieces(b["thinking"].as_str().unwrap_or_default(), 4) {
                    ev.push(json!({"type": "content_block_delta", "index": i, "delta": {"type": "thinking_delta", "thinking": p}}));
                }
                ev.push(json!({"type": "content_block_delta", "index": i, "delta": {"type": "signature_delta", "signature": "sig"}}));
            }
            Some("text") => {
                ev.push(json!({"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}}));
                for p in pieces(b["text"].as_str().unwrap_or_default(), 3) {
                    ev.push(json!({"type": "content_block_delta", "index": i, "delta": {"type": "text_delta", "text": p}}));
                }
            }
            _ => {
                ev.push(json!({"type": "content_block_start", "index": i, "content_block": {"type": "tool_use", "id": b["id"], "name": b["name"], "input": {}}}));
                for p in pieces(&b["input"].to_string(), 5) {
                    ev.push(json!({"type": "content_block_delta", "index": i, "delta": {"type": "input_json_delta", "partial_json": p}}));
                }
            }
        }
        ev.push(json!({"type": "content_block_stop", "index": i}));
    }
    ev.push(json!({"type": "message_delta", "delta": {"stop_reason": stop_reason(t), "stop_sequence": null}, "usage": {"output_tokens": 3}}));
    ev.push(json!({"type": "message_stop"}));
    typed_events(&ev)
}

/// An Anthropic error body: `{"type": "error", "error": {"type": kind, "message"}}`.
pub fn error_body(kind: &str, message: &str) -> String {
    json!({"type": "error", "error": {"type": kind, "message": message}}).to_string()
}

/// The in-stream error event Anthropic sends (e.g. `overloaded_error`).
pub fn error_event(kind: &str, message: &str) -> String {
    crate::sse::event(
        "error",
        &json!({"type": "error", "error": {"type": kind, "message": message}}),
    )
}

/// How many `tool_result` blocks a Messages request body carries: the step of a tool loop.
pub fn tool_results(body: &Value) -> usize {
    body["messages"]
        .as_array()
        .map(|ms| {
            ms.iter()
                .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
                .filter(|b| b["type"] == "tool_result")
                .count()
        })
        .unwrap_or(0)
}
