//! Reading tool calls out of a model's raw reply.
//!
//! [`parse_reply`] is lenient: small models write calls as `<tool_call>` blocks, as JSON in a
//! ```` ```json ```` fence, or as a bare JSON object, often after some prose. Each of these is a
//! call when it is a JSON object with a string `name` and an object `arguments` (or
//! `parameters`; a string holding a JSON object is accepted too). Everything else is text. A
//! call's arguments are kept as the exact JSON text the model wrote.
//!
//! [`parse_constrained`] reads the output of a grammar-constrained turn, whose layout is fixed.

use serde::Deserialize;
use serde_json::value::RawValue;

/// A call found in a reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedCall {
    /// The tool's name.
    pub name: String,
    /// The arguments as the JSON text the model wrote.
    pub arguments: String,
}

/// A reply split into prose and calls.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ParsedReply {
    /// The text outside the calls, trimmed.
    pub text: String,
    /// The calls, in order.
    pub calls: Vec<ParsedCall>,
}

const OPEN: &str = "<tool_call>";
const CLOSE: &str = "</tool_call>";
const FENCE: &str = "```";

/// Splits a raw reply into text and tool calls (see the module docs).
pub fn parse_reply(raw: &str) -> ParsedReply {
    let mut text = String::new();
    let mut calls = Vec::new();
    let mut i = 0;
    while i < raw.len() {
        let rest = &raw[i..];
        if rest.starts_with(OPEN) {
            let inner_start = i + OPEN.len();
            let (inner_end, next) = match raw[inner_start..].find(CLOSE) {
                Some(p) => (inner_start + p, inner_start + p + CLOSE.len()),
                None => (raw.len(), raw.len()),
            };
            let found = calls_in(strip_fence(&raw[inner_start..inner_end]));
            if !found.is_empty() {
                calls.extend(found);
                i = next;
                continue;
            }
            text.push_str(OPEN);
            i = inner_start;
            continue;
        }
        if rest.starts_with(FENCE) {
            let body_start = i + FENCE.len();
            let close = raw[body_start..].find(FENCE).map(|p| body_start + p);
            let end = close.map_or(raw.len(), |c| c + FENCE.len());
            let inner = &raw[body_start..close.unwrap_or(raw.len())];
            let found = calls_in(strip_lang(inner));
            if !found.is_empty() {
                calls.extend(found);
            } else {
                // Not a call: keep the whole fence as text (and do not look inside it again).
                text.push_str(&raw[i..end]);
            }
            i = end;
            continue;
        }
        if (rest.starts_with('{') || rest.starts_with('['))
            && let Some((found, len)) = json_calls_at(rest)
        {
            calls.extend(found);
            i += len;
            continue;
        }
        let ch_len = rest.chars().next().map_or(1, char::len_utf8);
        text.push_str(&rest[..ch_len]);
        i += ch_len;
    }
    let text = if calls.is_empty() {
        text.trim().to_owned()
    } else {
        // Stray tags around calls are noise.
        text.replace(OPEN, "").replace(CLOSE, "").trim().to_owned()
    };
    ParsedReply { text, calls }
}

/// The output of a grammar-constrained turn: `<tool_call>\n{"name": "…", "arguments": …}\n
/// </tool_call>`. Returns the call even when generation stopped early (its arguments are then
/// the truncated text, which the agent reports back to the model as invalid JSON); `None` when
/// not even the name is complete.
pub fn parse_constrained(raw: &str) -> Option<ParsedCall> {
    let (name, args_start) = constrained_head(raw)?;
    let rest = &raw[args_start..];
    let arguments = rest
        .strip_suffix("}\n</tool_call>")
        .or_else(|| rest.strip_suffix("}\n</tool_call"))
        .unwrap_or(rest);
    Some(ParsedCall {
        name,
        arguments: arguments.to_owned(),
    })
}

/// The tool name and the byte offset where its arguments start, once the head of a constrained
/// call is complete.
pub fn constrained_head(raw: &str) -> Option<(String, usize)> {
    const HEAD: &str = "<tool_call>\n{\"name\": ";
    const SEP: &str = ", \"arguments\": ";
    let after = raw.strip_prefix(HEAD)?;
    let mut stream = serde_json::Deserializer::from_str(after).into_iter::<String>();
    let name = stream.next()?.ok()?;
    let off = stream.byte_offset();
    if after[off..].starts_with(SEP) {
        Some((name, HEAD.len() + off + SEP.len()))
    } else {
        None
    }
}

/// Drops a leading ```` ```json ```` line and a trailing fence, if present.
fn strip_fence(s: &str) -> &str {
    let t = s.trim();
    match t.strip_prefix(FENCE) {
        Some(body) => strip_lang(body.strip_suffix(FENCE).unwrap_or(body)),
        None => t,
    }
}

/// Drops the language tag line of a fence body (`json\n{…}` → `{…}`).
fn strip_lang(body: &str) -> &str {
    let first_line_end = body.find('\n').unwrap_or(0);
    let tag = &body[..first_line_end];
    if tag
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == ' ')
    {
        body[first_line_end..].trim()
    } else {
        body.trim()
    }
}

/// All calls in a block that should hold nothing but JSON (one or more objects, or an array).
fn calls_in(block: &str) -> Vec<ParsedCall> {
    let mut out = Vec::new();
    let mut rest = block.trim_start();
    while !rest.is_empty() {
        match json_calls_at(rest) {
            Some((found, len)) => {
                out.extend(found);
                rest = rest[len..].trim_start_matches(|c: char| c.is_whitespace() || c == ',');
            }
            None => break,
        }
    }
    if rest.trim().is_empty() {
        out
    } else {
        Vec::new()
    }
}

/// Parses one JSON value at the start of `s`: a call object or an array of call objects. Returns
/// the calls and the length of the JSON text.
fn json_calls_at(s: &str) -> Option<(Vec<ParsedCall>, usize)> {
    let mut stream = serde_json::Deserializer::from_str(s).into_iter::<&RawValue>();
    let raw = stream.next()?.ok()?;
    let len = stream.byte_offset();
    let text = raw.get();
    if text.starts_with('[') {
        let items: Vec<&RawValue> = serde_json::from_str(text).ok()?;
        let calls: Option<Vec<ParsedCall>> = items.iter().map(|r| call_from(r.get())).collect();
        let calls = calls?;
        if calls.is_empty() {
            return None;
        }
        Some((calls, len))
    } else {
        Some((vec![call_from(text)?], len))
    }
}

#[derive(Deserialize)]
struct RawCall<'a> {
    name: String,
    #[serde(borrow, default)]
    arguments: Option<&'a RawValue>,
    #[serde(borrow, default)]
    parameters: Option<&'a RawValue>,
}

fn call_from(object: &str) -> Option<ParsedCall> {
    let c: RawCall<'_> = serde_json::from_str(object).ok()?;
    let args = c.arguments.or(c.parameters)?.get();
    let arguments = if args.starts_with('{') {
        args.to_owned()
    } else if args.starts_with('"') {
        // A JSON object encoded as a string.
        let inner: String = serde_json::from_str(args).ok()?;
        let v: serde_json::Value = serde_json::from_str(&inner).ok()?;
        if !v.is_object() {
            return None;
        }
        inner
    } else {
        return None;
    };
    if c.name.trim().is_empty() {
        return None;
    }
    Some(ParsedCall {
        name: c.name,
        arguments,
    })
}

/// How much of a streamed unconstrained reply can be shown as text already: the reply up to the
/// first place where a call might start (`<tool_call>`, a fence, a `{` or `[`), without leading
/// or trailing whitespace. What is returned is always a prefix of [`parse_reply`]'s final text.
pub fn streamable_text(raw: &str) -> &str {
    let mut cut = raw.len();
    for (i, c) in raw.char_indices() {
        let rest = &raw[i..];
        let blocks = match c {
            '{' | '[' => true,
            '<' => [OPEN, CLOSE]
                .iter()
                .any(|tag| rest.starts_with(tag) || tag.starts_with(rest)),
            '`' => rest.starts_with(FENCE) || FENCE.starts_with(rest),
            _ => false,
        };
        if blocks {
            cut = i;
            break;
        }
    }
    raw[..cut].trim()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(name: &str, args: &str) -> ParsedCall {
        ParsedCall {
            name: name.into(),
            arguments: args.into(),
        }
    }

    #[test]
    fn tags() {
        let r = parse_reply(
            "<tool_call>\n{\"name\": \"ls\", \"arguments\": {\"path\": \"/\"}}\n</tool_call>",
        );
        assert_eq!(r.text, "");
        assert_eq!(r.calls, vec![call("ls", r#"{"path": "/"}"#)]);
        // Two calls in one block, and an unterminated block.
        let r = parse_reply(
            "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n{\"name\": \"b\", \"arguments\": {\"x\":1}}",
        );
        assert_eq!(r.calls, vec![call("a", "{}"), call("b", r#"{"x":1}"#)]);
    }

    #[test]
    fn fences_after_prose() {
        let r = parse_reply(
            "I'll create the file.\n```json\n{\"name\": \"write_file\", \"arguments\": {\"path\": \"hello.py\", \"content\": \"print('hi')\\n\"}}\n```\n",
        );
        assert_eq!(r.text, "I'll create the file.");
        assert_eq!(
            r.calls,
            vec![call(
                "write_file",
                r#"{"path": "hello.py", "content": "print('hi')\n"}"#
            )]
        );
    }

    #[test]
    fn bare_json_and_variants() {
        let r = parse_reply(r#"{"name": "ls", "parameters": {"path": "."}}"#);
        assert_eq!(r.calls, vec![call("ls", r#"{"path": "."}"#)]);
        let r = parse_reply(r#"{"name": "ls", "arguments": "{\"path\": \".\"}"}"#);
        assert_eq!(r.calls, vec![call("ls", r#"{"path": "."}"#)]);
        let r =
            parse_reply(r#"[{"name": "a", "arguments": {}}, {"name": "b", "arguments": {}}] done"#);
        assert_eq!(r.calls, vec![call("a", "{}"), call("b", "{}")]);
        assert_eq!(r.text, "done");
    }

    #[test]
    fn garbage_is_text() {
        for s in [
            "Hello! The file is written.",
            "Use {braces} like this: {\"a\": 1}",
            "```python\nprint({'name': 1})\n```",
            "<tool_call>not json</tool_call>",
            "{\"name\": \"x\"}",
            "[1, 2, 3]",
            "",
        ] {
            let r = parse_reply(s);
            assert!(r.calls.is_empty(), "{s:?} gave {:?}", r.calls);
            assert_eq!(r.text, s.trim(), "{s:?}");
        }
    }

    #[test]
    fn constrained_output() {
        let raw = "<tool_call>\n{\"name\": \"write_file\", \"arguments\": {\"path\": \"a\", \"content\": \"}\"}}\n</tool_call>";
        assert_eq!(
            parse_constrained(raw),
            Some(call("write_file", r#"{"path": "a", "content": "}"}"#))
        );
        // Cut off by the token limit.
        assert_eq!(
            parse_constrained("<tool_call>\n{\"name\": \"w\", \"arguments\": {\"pa"),
            Some(call("w", r#"{"pa"#))
        );
        assert_eq!(parse_constrained("<tool_call>\n{\"name\": \"wri"), None);
    }

    #[test]
    fn streamable_prefix_is_a_prefix_of_the_final_text() {
        let raw = "  Let me check.\n```json\n{\"name\": \"ls\", \"arguments\": {}}\n```";
        assert_eq!(streamable_text(raw), "Let me check.");
        assert!(parse_reply(raw).text.starts_with(streamable_text(raw)));
        assert_eq!(streamable_text("a < b and <tool"), "a < b and");
        assert_eq!(streamable_text("ok `x` fine"), "ok `x` fine");
        assert_eq!(streamable_text("ok ``"), "ok");
        assert_eq!(streamable_text("ok </tool_call>"), "ok");
        assert_eq!(streamable_text("plain "), "plain");
    }
}
