//! Gemini `generateContent` / `streamGenerateContent?alt=sse` wire shapes for a scripted
//! [`Turn`].

use serde_json::{Value, json};

use crate::Turn;
use crate::server::Recorded;
use crate::sse::{data_frames_crlf, pieces};

/// The model version the builders report.
pub const MODEL_VERSION: &str = "gemini-test-001";

/// One `GenerateContentResponse` with a single candidate of these `parts`, an optional
/// `finishReason` and optional `usageMetadata`.
pub fn chunk(parts: Value, finish: Option<&str>, usage: Option<Value>) -> Value {
    let mut cand = json!({"content": {"role": "model", "parts": parts}, "index": 0});
    if let Some(f) = finish {
        cand["finishReason"] = f.into();
    }
    let mut v =
        json!({"candidates": [cand], "modelVersion": MODEL_VERSION, "responseId": "resp_1"});
    if let Some(u) = usage {
        v["usageMetadata"] = u;
    }
    v
}

fn parts(t: &Turn) -> Vec<Value> {
    let mut out = Vec::new();
    if let Some(r) = &t.reasoning {
        out.push(json!({"text": r, "thought": true}));
    }
    if let Some(text) = &t.text {
        out.push(json!({"text": text}));
    }
    for (_, name, args) in &t.calls {
        let args: Value = serde_json::from_str(args).unwrap_or_else(|_| json!({}));
        out.push(json!({"functionCall": {"name": name, "args": args}}));
    }
    out
}

fn usage() -> Value {
    json!({"promptTokenCount": 11, "candidatesTokenCount": 3, "totalTokenCount": 14})
}

/// A `generateContent` response for `t` (finish `STOP`, usage 11 in, 3 out). Gemini sends no
/// call ids; the client makes them.
pub fn generate_json(t: &Turn) -> String {
    chunk(Value::Array(parts(t)), Some("STOP"), Some(usage())).to_string()
}

/// The `streamGenerateContent?alt=sse` stream for `t`: a chunk per 3 characters of text, one
/// per call, then an empty chunk with the finish reason and usage.
pub fn stream_sse(t: &Turn) -> Vec<String> {
    let mut chunks = Vec::new();
    for p in parts(t) {
        match p["text"].as_str() {
            Some(text) => {
                for piece in pieces(text, 3) {
                    let mut q = p.clone();
                    q["text"] = json!(piece);
                    chunks.push(chunk(json!([q]), None, None));
                }
            }
            None => chunks.push(chunk(json!([p]), None, None)),
        }
    }
    chunks.push(chunk(json!([]), Some("STOP"), Some(usage())));
    data_frames_crlf(&chunks)
}

/// A Gemini error body: `{"error": {"code", "message", "status"}}`.
pub fn error_body(code: u16, status: &str, message: &str) -> String {
    json!({"error": {"code": code, "message": message, "status": status}}).to_string()
}

/// Whether a request is a streaming one (Gemini streams by path, not by body).
pub fn is_stream(r: &Recorded) -> bool {
    r.path.contains(":streamGenerateContent")
}

/// How many `functionResponse` parts a request body carries: the step of a tool loop.
pub fn tool_results(body: &Value) -> usize {
    body["contents"]
        .as_array()
        .map(|cs| {
            cs.iter()
                .flat_map(|c| c["parts"].as_array().cloned().unwrap_or_default())
                .filter(|p| p.get("functionResponse").is_some())
                .count()
        })
        .unwrap_or(0)
}
