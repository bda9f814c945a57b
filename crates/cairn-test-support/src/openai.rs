//! OpenAI's wire shapes (as fakellm.py and OpenAI send them): Chat Completions and Responses,
//! plain and streamed, for a scripted [`Turn`].

use serde_json::{Value, json};

use crate::Turn;
use crate::sse::pieces;

/// A Chat Completions response for `t` (usage 11 in, 3 cached, 7 out; some unknown fields).
pub fn chat_json(t: &Turn) -> String {
    let mut msg = json!({"role": "assistant", "content": t.text, "refusal": null});
    if let Some(r) = &t.reasoning {
        msg["reasoning_content"] = json!(r);
    }
    if !t.calls.is_empty() {
        msg["tool_calls"] = t
            .calls
            .iter()
            .map(|(id, name, args)| json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}}))
            .collect();
    }
    json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m-1",
        "system_fingerprint": "fp", "service_tier": "default", "some_future_field": {"x": [1, null]},
        "choices": [{"index": 0, "message": msg, "logprobs": null,
                      "finish_reason": if t.calls.is_empty() { "stop" } else { "tool_calls" }}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18,
                  "prompt_tokens_details": {"cached_tokens": 3, "audio_tokens": null},
                  "completion_tokens_details": null}
    })
    .to_string()
}

/// The Chat Completions stream for `t`: role chunk, pieces of reasoning, text and each call's
/// arguments, finish chunk, usage chunk and `[DONE]`; `keep_alive` adds comment frames.
pub fn chat_sse(t: &Turn, keep_alive: bool) -> Vec<String> {
    let ev = |delta: Value, finish: Value| {
        format!(
            "data: {}\n\n",
            json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m-1",
                   "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
                   "usage": null})
        )
    };
    let mut out = vec![ev(
        json!({"role": "assistant", "content": "", "refusal": null}),
        Value::Null,
    )];
    if keep_alive {
        out.push(": keep-alive\r\n\r\n".into());
    }
    if let Some(r) = &t.reasoning {
        for p in pieces(r, 4) {
            out.push(ev(json!({"reasoning_content": p}), Value::Null));
        }
    }
    if let Some(text) = &t.text {
        for p in pieces(text, 3) {
            out.push(ev(json!({"content": p}), Value::Null));
        }
    }
    for (i, (id, name, args)) in t.calls.iter().enumerate() {
        out.push(ev(
            json!({"tool_calls": [{"index": i, "id": id, "type": "function", "function": {"name": name, "arguments": ""}}]}),
            Value::Null,
        ));
        for p in pieces(args, 5) {
            out.push(ev(
                json!({"tool_calls": [{"index": i, "function": {"arguments": p}}]}),
                Value::Null,
            ));
        }
        if keep_alive {
            out.push(":\n\n".into());
        }
    }
    out.push(ev(
        json!({}),
        json!(if t.calls.is_empty() {
            "stop"
        } else {
            "tool_calls"
        }),
    ));
    out.push(format!(
        "data: {}\r\n\r\n",
        json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m-1",
               "choices": [], "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18,
               "prompt_tokens_details": {"cached_tokens": 3}}})
    ));
    out.push("data: [DONE]\n\n".into());
    out
}

fn responses_items(t: &Turn) -> Vec<Value> {
    let mut items = Vec::new();
    if let Some(r) = &t.reasoning {
        items.push(json!({"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": r}]}));
    }
    if let Some(text) = &t.text {
        items.push(
            json!({"type": "message", "id": "msg_1", "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]}),
        );
    }
    for (i, (id, name, args)) in t.calls.iter().enumerate() {
        items.push(
            json!({"type": "function_call", "id": format!("fc_{i}"), "call_id": id,
            "name": name, "arguments": args, "status": "completed"}),
        );
    }
    items
}

/// A Responses API response object for `t` with this `status` (`output` replaces the items).
pub fn responses_json_value(t: &Turn, status: &str, output: Option<Vec<Value>>) -> Value {
    json!({
        "id": "resp_1", "object": "response", "created_at": 1, "status": status, "error": null,
        "incomplete_details": null, "instructions": null, "model": "m-1",
        "output": output.unwrap_or_else(|| responses_items(t)),
        "parallel_tool_calls": true, "reasoning": {"effort": null, "summary": null},
        "tools": [], "unknown_future": true,
        "usage": if status == "completed" {
            json!({"input_tokens": 11, "input_tokens_details": {"cached_tokens": 3},
                   "output_tokens": 7, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 18})
        } else { Value::Null }
    })
}

/// A completed Responses API response for `t`.
pub fn responses_json(t: &Turn) -> String {
    responses_json_value(t, "completed", None).to_string()
}

/// The Responses API stream for `t` (`response.created` … `response.completed`, with
/// sequence numbers); `keep_alive` adds a comment frame.
pub fn responses_sse(t: &Turn, keep_alive: bool) -> Vec<String> {
    let mut out = Vec::new();
    let mut seq = 0;
    let mut ev = |out: &mut Vec<String>, typ: &str, mut data: Value| {
        data["type"] = json!(typ);
        data["sequence_number"] = json!(seq);
        seq += 1;
        out.push(format!("event: {typ}\ndata: {data}\n\n"));
    };
    ev(
        &mut out,
        "response.created",
        json!({"response": responses_json_value(t, "in_progress", Some(vec![]))}),
    );
    if keep_alive {
        out.push(": ping\n\n".into());
    }
    for (idx, item) in responses_items(t).into_iter().enumerate() {
        match item["type"].as_str().unwrap_or_default() {
            "reasoning" => {
                ev(
                    &mut out,
                    "response.output_item.added",
                    json!({"output_index": idx, "item": {"type": "reasoning", "id": "rs_1", "summary": []}}),
                );
                for p in pieces(item["summary"][0]["text"].as_str().unwrap_or_default(), 4) {
                    ev(
                        &mut out,
                        "response.reasoning_summary_text.delta",
                        json!({"output_index": idx, "item_id": "rs_1", "summary_index": 0, "delta": p}),
                    );
                }
                ev(
                    &mut out,
                    "response.output_item.done",
                    json!({"output_index": idx, "item": item}),
                );
            }
            "message" => {
                ev(
                    &mut out,
                    "response.output_item.added",
                    json!({"output_index": idx, "item": {"type": "message", "id": "msg_1", "status": "in_progress", "role": "assistant", "content": []}}),
                );
                let text = item["content"][0]["text"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                for p in pieces(&text, 3) {
                    ev(
                        &mut out,
                        "response.output_text.delta",
                        json!({"output_index": idx, "item_id": "msg_1", "content_index": 0, "delta": p, "logprobs": []}),
                    );
                }
                ev(
                    &mut out,
                    "response.output_text.done",
                    json!({"output_index": idx, "item_id": "msg_1", "content_index": 0, "text": text}),
                );
                ev(
                    &mut out,
                    "response.output_item.done",
                    json!({"output_index": idx, "item": item}),
                );
            }
            _ => {
                let mut added = item.clone();
                added["arguments"] = json!("");
                added["status"] = json!("in_progress");
                ev(
                    &mut out,
                    "response.output_item.added",
                    json!({"output_index": idx, "item": added}),
                );
                let args = item["arguments"].as_str().unwrap_or_default().to_owned();
                for p in pieces(&args, 5) {
                    ev(
                        &mut out,
                        "response.function_call_arguments.delta",
                        json!({"output_index": idx, "item_id": item["id"], "delta": p}),
                    );
                }
                ev(
                    &mut out,
                    "response.function_call_arguments.done",
                    json!({"output_index": idx, "item_id": item["id"], "name": item["name"], "arguments": args}),
                );
                ev(
                    &mut out,
                    "response.output_item.done",
                    json!({"output_index": idx, "item": item}),
                );
            }
        }
    }
    ev(
        &mut out,
        "response.completed",
        json!({"response": responses_json_value(t, "completed", None)}),
    );
    out
}

/// An OpenAI error body: `{"error": {"message", "type", "code"}}`.
pub fn error_body(message: &str, kind: &str, code: Option<&str>) -> String {
    json!({"error": {"message": message, "type": kind, "param": null, "code": code}}).to_string()
}
