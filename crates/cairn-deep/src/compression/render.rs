//! Text forms of messages: for the history file, for the summarizer, and the summary message.

use std::fmt::Write as _;
use std::time::{SystemTime, UNIX_EPOCH};

use cairn_core::{Content, Message};

/// Renders `messages` as Markdown-ish text, one `### role` section per message. Parts longer
/// than `max_part_chars` are cut (the history file passes `None` and keeps everything).
pub(crate) fn render_messages(
    messages: &[Message],
    first_index: usize,
    max_part_chars: Option<usize>,
) -> String {
    let mut out = String::new();
    for (i, m) in messages.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        render_message(m, first_index + i, max_part_chars, &mut out);
    }
    out
}

fn cap(text: &str, max: Option<usize>) -> String {
    match max {
        Some(max) => match text.char_indices().nth(max) {
            Some((i, _)) => {
                let rest = text[i..].chars().count();
                format!("{}… [{rest} more characters]", &text[..i])
            }
            None => text.to_owned(),
        },
        None => text.to_owned(),
    }
}

/// One message: `### <n>. <role>` then its parts.
pub(crate) fn render_message(m: &Message, index: usize, max: Option<usize>, out: &mut String) {
    let _ = write!(out, "### {}. {}", index + 1, m.role.as_str());
    if let Some(name) = &m.author_name {
        let _ = write!(out, " ({name})");
    }
    out.push('\n');
    render_parts(&m.contents, max, out);
}

fn render_parts(parts: &[Content], max: Option<usize>, out: &mut String) {
    for part in parts {
        match part {
            Content::Text { text } => {
                out.push_str(&cap(text, max));
            }
            Content::Reasoning { text } => {
                let _ = write!(out, "[reasoning] {}", cap(text, max));
            }
            Content::Image { url, media_type } => {
                if url.starts_with("data:") {
                    let _ = write!(
                        out,
                        "[image: inline {} data, not kept in this record]",
                        media_type.as_deref().unwrap_or("image")
                    );
                } else {
                    let _ = write!(out, "[image: {url}]");
                }
            }
            Content::FunctionCall(call) => {
                let _ = write!(
                    out,
                    "[tool call {} (id {})] {}",
                    call.name,
                    call.call_id,
                    cap(&call.arguments, max)
                );
            }
            Content::FunctionResult(result) => {
                let _ = writeln!(
                    out,
                    "[tool result for {}{}]",
                    result.call_id,
                    if result.is_error { ", an error" } else { "" }
                );
                render_parts(&result.output, max, out);
            }
            other => {
                let _ = write!(out, "[{other:?}]");
            }
        }
        out.push('\n');
    }
}

/// The text of the summarization request: the prompt with the messages in place of
/// `{messages}` (or after it).
pub(crate) fn summarizer_input(
    prompt: &str,
    previous_summary: Option<&str>,
    rendered: &str,
    omitted: usize,
    history_path: Option<&str>,
) -> String {
    let mut block = String::new();
    if let Some(prev) = previous_summary {
        let _ = write!(
            block,
            "<previous_summary>\n{}\n</previous_summary>\n\n",
            prev.trim()
        );
    }
    if omitted > 0 {
        let place = history_path.unwrap_or("the history file");
        let _ = write!(
            block,
            "[{omitted} messages between the first one and those below were left out to fit the summarizer's input; they are in {place}.]\n\n"
        );
    }
    let _ = write!(block, "<messages>\n{}</messages>", rendered);
    if prompt.contains("{messages}") {
        prompt.replace("{messages}", &block)
    } else {
        format!("{}\n\n{block}", prompt.trim_end())
    }
}

/// The message that stands for the summarized part of the conversation, tagged with
/// [`SUMMARIZATION_SOURCE`](super::SUMMARIZATION_SOURCE) in its metadata ([`Message::source`]).
pub(crate) fn summary_message(summary: &str, summarized: usize, path: Option<&str>) -> Message {
    let whereabouts = match path {
        Some(p) => format!(
            " The full text of those messages is saved in `{p}`: search it with `grep` or page through it with `read_file` when you need a detail the summary left out."
        ),
        None => String::new(),
    };
    Message::user(format!(
        "[Context summary] The first {summarized} messages of this conversation were replaced by the summary below to stay within the context window.{whereabouts}\n\n<summary>\n{}\n</summary>",
        summary.trim()
    ))
    .with_source(super::config::SUMMARIZATION_SOURCE)
}

/// The header of one summarization event in the history file.
pub(crate) fn history_header(from: usize, to: usize) -> String {
    format!(
        "## Messages {}–{} (summarized at {})\n\n",
        from + 1,
        to,
        iso_now()
    )
}

/// A stable 64-bit fingerprint of a message (FNV-1a over its JSON form), stored with the
/// summary boundary to notice a conversation that was replaced.
pub(crate) fn fingerprint(m: &Message) -> u64 {
    let json = serde_json::to_string(m).unwrap_or_default();
    fnv(0, json.as_bytes())
}

/// FNV-1a of `bytes`, continuing from `seed` (0 starts afresh).
pub(crate) fn fnv(seed: u64, bytes: &[u8]) -> u64 {
    let mut h: u64 = if seed == 0 {
        0xcbf2_9ce4_8422_2325
    } else {
        seed
    };
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// The longest tool-call id used as an offload file name as it is.
const MAX_NAME_CHARS: usize = 64;

/// A short, safe file name for the result of call `call_id` (deepagents #5559, #6302: some
/// providers send 1.5 KB ids, some none). An id of at most 64 characters of
/// `[A-Za-z0-9_-]` is used as it is; any other id becomes its first 32 safe characters, a dash
/// and a 16-hex-digit hash of the whole id (`call-<hash>` when nothing safe is left), so
/// distinct ids keep distinct names and no name exceeds 49 characters.
pub(crate) fn offload_name(call_id: &str) -> String {
    let safe = sanitize(call_id);
    if !call_id.is_empty() && safe == call_id && call_id.len() <= MAX_NAME_CHARS {
        return safe;
    }
    let hash = fnv(0, call_id.as_bytes());
    let prefix: String = safe.chars().take(32).collect();
    let prefix = prefix.trim_matches('_');
    if prefix.is_empty() {
        format!("call-{hash:016x}")
    } else {
        format!("{prefix}-{hash:016x}")
    }
}

/// Only `[A-Za-z0-9_-]` stays in a file name; everything else becomes `_`.
pub(crate) fn sanitize(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() { "_".to_owned() } else { s }
}

/// The current UTC time as `YYYY-MM-DDTHH:MM:SSZ`.
pub(crate) fn iso_now() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3_600,
        (rem % 3_600) / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_core::{FunctionCall, FunctionResult, Role};

    #[test]
    fn renders_calls_results_and_images() {
        let msgs = vec![
            Message::user("hi"),
            Message::new(
                Role::Assistant,
                vec![Content::FunctionCall(FunctionCall {
                    call_id: "c1".into(),
                    name: "grep".into(),
                    arguments: "{\"pattern\":\"x\"}".into(),
                })],
            ),
            Message::tool_result(FunctionResult {
                call_id: "c1".into(),
                output: vec![
                    Content::text("found"),
                    Content::Image {
                        url: "data:image/png;base64,AAAA".into(),
                        media_type: Some("image/png".into()),
                    },
                ],
                is_error: false,
            }),
        ];
        let text = render_messages(&msgs, 0, None);
        assert_eq!(
            text,
            "### 1. user\nhi\n\n### 2. assistant\n[tool call grep (id c1)] {\"pattern\":\"x\"}\n\n### 3. tool\n[tool result for c1]\nfound\n[image: inline image/png data, not kept in this record]\n\n"
        );
        assert_eq!(cap("abcdef", Some(3)), "abc… [3 more characters]");
    }

    #[test]
    fn offload_names_are_short_safe_and_distinct() {
        assert_eq!(offload_name("call_abc-1"), "call_abc-1");
        let long = "x".repeat(1_536);
        let name = offload_name(&long);
        assert_eq!(name.len(), 32 + 1 + 16, "{name}");
        assert!(name.starts_with(&"x".repeat(32)));
        assert_ne!(name, offload_name(&"x".repeat(1_535)));
        let empty = offload_name("");
        assert!(empty.starts_with("call-") && empty.len() == 21, "{empty}");
        let odd = offload_name("../../etc/passwd");
        assert!(
            odd.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'),
            "{odd}"
        );
        assert_ne!(odd, offload_name("..__etc_passwd"));
    }

    #[test]
    fn the_summary_message_is_tagged() {
        let m = summary_message("s", 3, None);
        assert_eq!(m.source.as_deref(), Some("summarization"));
    }

    #[test]
    fn iso_dates() {
        let s = iso_now();
        assert_eq!(s.len(), 20);
        assert!(s.starts_with("20"));
        assert_eq!(sanitize("call/1.x"), "call_1_x");
    }
}
