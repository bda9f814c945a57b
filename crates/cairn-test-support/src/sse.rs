//! Server-sent-event builders: frames in each provider's style and awkward splits of a body.

use serde_json::Value;

/// One `data:` frame, `\n\n`-terminated (OpenAI Chat Completions style).
pub fn data(v: &Value) -> String {
    format!("data: {v}\n\n")
}

/// One `data:` frame, `\r\n\r\n`-terminated (Gemini style).
pub fn data_crlf(v: &Value) -> String {
    format!("data: {v}\r\n\r\n")
}

/// One named frame: `event: <name>` and `data:` (OpenAI Responses and Anthropic style).
pub fn event(name: &str, v: &Value) -> String {
    format!("event: {name}\ndata: {v}\n\n")
}

/// Named frames whose event name is each value's `type` field (Anthropic's messages stream).
pub fn typed_events(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| event(e["type"].as_str().unwrap_or("message"), e))
        .collect()
}

/// `data:` frames with `\r\n\r\n` endings, one per chunk (Gemini's `alt=sse` stream).
pub fn data_frames_crlf(chunks: &[Value]) -> Vec<String> {
    chunks.iter().map(data_crlf).collect()
}

/// `bytes` cut into pieces of the cycling `sizes` (a size of 0 counts as 1).
pub fn split(bytes: &[u8], sizes: &[usize]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut i = 0;
    let mut k = 0;
    while i < bytes.len() {
        let n = sizes
            .get(k % sizes.len().max(1))
            .copied()
            .unwrap_or(1)
            .max(1);
        let end = (i + n).min(bytes.len());
        out.push(bytes[i..end].to_vec());
        i = end;
        k += 1;
    }
    out
}

/// Splits that hit awkward boundaries (inside UTF-8 sequences, between `\r` and `\n`, …).
pub const SPLITS: &[&[usize]] = &[&[1], &[2, 3], &[7, 1, 13], &[64], &[100_000]];

/// `s` in pieces of `n` characters (never inside a character).
pub fn pieces(s: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = s.chars().collect();
    chars.chunks(n.max(1)).map(|c| c.iter().collect()).collect()
}
