//! Prompt rendering: ChatML with Qwen's tool section, rendered by cairn rather than by the GGUF
//! file's Jinja template.
//!
//! The layout follows Qwen2.5's own template, with one correction: the `<tool_call>` format line
//! uses single braces (the 1.5B file's template prints doubled braces literally). The output is
//! identical for every Qwen model, and byte-stable for the same input, which is what lets the KV
//! cache be reused across turns.
//!
//! ```text
//! <|im_start|>system
//! {instructions}
//!
//! # Tools
//!
//! You may call one or more functions to assist with the user query.
//!
//! You are provided with function signatures within <tools></tools> XML tags:
//! <tools>
//! {"type": "function", "function": {"name": ..., "description": ..., "parameters": ...}}
//! </tools>
//!
//! For each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:
//! <tool_call>
//! {"name": <function-name>, "arguments": <args-json-object>}
//! </tool_call><|im_end|>
//! <|im_start|>user
//! ...<|im_end|>
//! <|im_start|>assistant
//! <tool_call>
//! {"name": "write_file", "arguments": {"path": "a.txt", "content": "hi"}}
//! </tool_call><|im_end|>
//! <|im_start|>user
//! <tool_response>
//! Wrote a.txt
//! </tool_response><|im_end|>
//! <|im_start|>assistant
//! ```
//!
//! Assistant turns are rendered from the model's raw output when it is known (see
//! [`RawReplies`]), so a conversation re-sent on the next turn starts with exactly the bytes the
//! model saw and produced.

use std::collections::{HashMap, VecDeque};

use cairn_core::{Content, FunctionCall, Message, Role, ToolSpec};
use serde_json::Value;

/// The system text Qwen models were trained with when none is given.
pub const QWEN_DEFAULT_SYSTEM: &str =
    "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";

/// The start of an assistant turn; the prompt ends with it.
pub const ASSISTANT_START: &str = "<|im_start|>assistant\n";

/// The end-of-turn marker.
pub const IM_END: &str = "<|im_end|>";

/// Which chat layout to render.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PromptFormat {
    /// Qwen2.5: ChatML, Qwen's tool section, and Qwen's default system text when none is given.
    #[default]
    Qwen,
    /// Plain ChatML (SmolLM2 and other ChatML models): the same layout, no default system text.
    ChatMl,
}

impl PromptFormat {
    /// Picks the format for a model from its GGUF metadata: Qwen for `qwen*` architectures or a
    /// template that knows `<tool_call>`, ChatML otherwise.
    pub fn detect(architecture: Option<&str>, chat_template: Option<&str>) -> PromptFormat {
        let arch_is_qwen = architecture.is_some_and(|a| a.to_ascii_lowercase().starts_with("qwen"));
        let template_has_tools = chat_template.is_some_and(|t| t.contains("<tool_call>"));
        if arch_is_qwen || template_has_tools {
            PromptFormat::Qwen
        } else {
            PromptFormat::ChatMl
        }
    }
}

/// Remembers the model's raw output for the assistant messages cairn derived from it, so that
/// re-rendering such a message reproduces the raw bytes.
///
/// The key is the canonical rendering of the message (see [`assistant_body`]); the value is the
/// text the model generated. The agent keeps only the parsed message (text and function calls,
/// the calls' arguments being the model's raw JSON text), and the client looks the raw text up
/// here when the message comes back in the next request. A conversation restored from elsewhere
/// renders canonically, which costs a re-prefill from the first differing token only.
#[derive(Debug, Default)]
pub struct RawReplies {
    map: HashMap<String, String>,
    order: VecDeque<String>,
}

impl RawReplies {
    /// How many replies are remembered (oldest forgotten first).
    pub const CAPACITY: usize = 512;

    /// Remembers `raw` as the output behind a message whose canonical body is `canonical`.
    pub fn insert(&mut self, canonical: String, raw: String) {
        if canonical == raw {
            return;
        }
        if self.map.insert(canonical.clone(), raw).is_none() {
            self.order.push_back(canonical);
            while self.order.len() > Self::CAPACITY {
                if let Some(old) = self.order.pop_front() {
                    self.map.remove(&old);
                }
            }
        }
    }

    /// The raw output behind a canonical body, when known.
    pub fn get(&self, canonical: &str) -> Option<&str> {
        self.map.get(canonical).map(String::as_str)
    }

    /// Number of remembered replies.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

/// What to render besides the messages.
#[derive(Debug, Clone, Copy)]
pub struct RenderOptions<'a> {
    /// The layout.
    pub format: PromptFormat,
    /// Instructions placed first in the system block.
    pub instructions: Option<&'a str>,
    /// Tools listed in the system block (empty: no tool section).
    pub tools: &'a [ToolSpec],
    /// Whether to end with the start of an assistant turn.
    pub add_generation_prompt: bool,
    /// Put the tool section before the instructions in the system block (default: after, as
    /// Qwen's template does). The tool list is the same in every project while instructions
    /// may not be, so a prompt cache shared across projects covers it only when it comes first.
    pub tools_first: bool,
    /// End each turn of tool results with a reminder of the user's request and of what to do
    /// next (see [`reminder`]); small models lose the request after a few tool turns.
    pub remind: bool,
}

/// Most characters of the request a reminder repeats.
pub const REMINDER_MAX_CHARS: usize = 300;

/// The reminder that ends a turn of tool results when [`RenderOptions::remind`] is set:
/// the user's request (cut at [`REMINDER_MAX_CHARS`]), a note when the last call repeated an
/// earlier one of the same request, and the two ways on: the next tool, or (when an `answer`
/// tool is offered) `answer`.
pub fn reminder(request: &str, repeated: bool, answer_tool: bool) -> String {
    let mut r: String = request.trim().chars().take(REMINDER_MAX_CHARS).collect();
    if r.len() < request.trim().len() {
        r.push('…');
    }
    let repeat = if repeated {
        " You made that same call before."
    } else {
        ""
    };
    let done = if answer_tool {
        "call answer with the result"
    } else {
        "reply with the result"
    };
    format!(
        "\n<reminder>The request: {r}{repeat} If it is done, {done}; otherwise call the next tool.</reminder>"
    )
}

/// Renders a conversation into the prompt text.
pub fn render(messages: &[Message], opts: RenderOptions<'_>, raw: Option<&RawReplies>) -> String {
    let mut out = String::new();

    // The system block: instructions, then leading system messages.
    let mut system_parts: Vec<String> = Vec::new();
    if let Some(i) = opts.instructions.filter(|i| !i.is_empty()) {
        system_parts.push(i.to_owned());
    }
    let mut rest = messages;
    while let Some((first, tail)) = rest.split_first() {
        if first.role != Role::System {
            break;
        }
        let t = first.text();
        if !t.is_empty() {
            system_parts.push(t);
        }
        rest = tail;
    }
    let system = if system_parts.is_empty() {
        match opts.format {
            PromptFormat::Qwen => Some(QWEN_DEFAULT_SYSTEM.to_owned()),
            PromptFormat::ChatMl => None,
        }
    } else {
        Some(system_parts.join("\n\n"))
    };
    if !opts.tools.is_empty() && opts.tools_first {
        out.push_str("<|im_start|>system\n");
        out.push_str(&tool_section(opts.tools));
        if let Some(s) = &system {
            out.push_str("\n\n");
            out.push_str(s);
        }
        out.push_str("<|im_end|>\n");
    } else if !opts.tools.is_empty() {
        out.push_str("<|im_start|>system\n");
        if let Some(s) = &system {
            out.push_str(s);
            out.push_str("\n\n");
        }
        out.push_str(&tool_section(opts.tools));
        out.push_str("<|im_end|>\n");
    } else if let Some(s) = &system {
        out.push_str("<|im_start|>system\n");
        out.push_str(s);
        out.push_str("<|im_end|>\n");
    }

    // The turns. Consecutive tool results share one user turn, as in Qwen's template.
    let mut in_tool_turn = false;
    // For reminders: the last request, the calls made since, and whether the last repeated one.
    let mut request = String::new();
    let mut calls_seen: Vec<(String, String)> = Vec::new();
    let mut repeated = false;
    let close_tool_turn = |out: &mut String, request: &str, repeated: bool| {
        if opts.remind && !request.is_empty() {
            let answer = opts.tools.iter().any(|t| t.name == "answer");
            out.push_str(&reminder(request, repeated, answer));
        }
        out.push_str("<|im_end|>\n");
    };
    for m in rest {
        let results: Vec<String> = m.function_results().map(|r| r.text()).collect();
        let is_results = m.role == Role::Tool || (!results.is_empty() && m.role == Role::User);
        if is_results {
            if !in_tool_turn {
                out.push_str("<|im_start|>user");
                in_tool_turn = true;
            }
            for r in &results {
                out.push_str("\n<tool_response>\n");
                out.push_str(r);
                out.push_str("\n</tool_response>");
            }
            if results.is_empty() {
                // A tool message with plain text instead of a result.
                out.push_str("\n<tool_response>\n");
                out.push_str(&m.text());
                out.push_str("\n</tool_response>");
            }
            continue;
        }
        if in_tool_turn {
            close_tool_turn(&mut out, &request, repeated);
            in_tool_turn = false;
        }
        match &m.role {
            Role::Assistant => {
                repeated = false;
                for c in m.function_calls() {
                    let key = (c.name.clone(), c.arguments.trim().to_owned());
                    repeated |= calls_seen.contains(&key);
                    calls_seen.push(key);
                }
                let canonical = assistant_body(m);
                let body = raw
                    .and_then(|r| r.get(&canonical))
                    .unwrap_or(canonical.as_str());
                out.push_str(ASSISTANT_START);
                out.push_str(body);
                out.push_str("<|im_end|>\n");
            }
            role => {
                if *role == Role::User {
                    request = m.text();
                    calls_seen.clear();
                }
                out.push_str("<|im_start|>");
                out.push_str(role.as_str());
                out.push('\n');
                out.push_str(&m.text());
                out.push_str("<|im_end|>\n");
            }
        }
    }
    if in_tool_turn {
        close_tool_turn(&mut out, &request, repeated);
    }
    if opts.add_generation_prompt {
        out.push_str(ASSISTANT_START);
    }
    out
}

/// The tool section of the system block (without the closing `<|im_end|>`).
pub fn tool_section(tools: &[ToolSpec]) -> String {
    let mut out = String::from(
        "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n\
         You are provided with function signatures within <tools></tools> XML tags:\n<tools>",
    );
    for t in tools {
        out.push('\n');
        let v = serde_json::json!({
            "type": "function",
            "function": {
                "name": t.name,
                "description": t.description,
                "parameters": t.parameters,
            }
        });
        write_json(&mut out, &v);
    }
    out.push_str(
        "\n</tools>\n\nFor each function call, return a json object with function name and arguments \
         within <tool_call></tool_call> XML tags:\n<tool_call>\n\
         {\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>",
    );
    out
}

/// The canonical text of an assistant message between `<|im_start|>assistant\n` and
/// `<|im_end|>`: its text, then one `<tool_call>` block per call (Qwen's layout).
pub fn assistant_body(m: &Message) -> String {
    let mut out = m.text();
    for c in m.contents.iter() {
        if let Content::FunctionCall(fc) = c {
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(&tool_call_block(fc));
        }
    }
    out
}

/// `<tool_call>\n{"name": "…", "arguments": …}\n</tool_call>` for one call; the arguments are the
/// call's raw JSON text.
pub fn tool_call_block(fc: &FunctionCall) -> String {
    let args = if fc.arguments.trim().is_empty() {
        "{}"
    } else {
        fc.arguments.as_str()
    };
    let mut out = String::from("<tool_call>\n{\"name\": ");
    write_json(&mut out, &Value::String(fc.name.clone()));
    out.push_str(", \"arguments\": ");
    out.push_str(args);
    out.push_str("}\n</tool_call>");
    out
}

/// Writes JSON the way Python's `json.dumps` does by default (`", "` and `": "` separators), which
/// is what Qwen's template (`tojson`) produced in training. Non-ASCII text is kept as it is.
pub fn write_json(out: &mut String, v: &Value) {
    match v {
        Value::Object(map) => {
            out.push('{');
            for (i, (k, val)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_json_str(out, k);
                out.push_str(": ");
                write_json(out, val);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, val) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_json(out, val);
            }
            out.push(']');
        }
        Value::String(s) => write_json_str(out, s),
        other => out.push_str(&other.to_string()),
    }
}

fn write_json_str(out: &mut String, s: &str) {
    out.push_str(&Value::String(s.to_owned()).to_string());
}

/// [`write_json`] into a new string.
pub fn to_json(v: &Value) -> String {
    let mut s = String::new();
    write_json(&mut s, v);
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_core::FunctionResult;
    use serde_json::json;

    fn write_tool() -> ToolSpec {
        ToolSpec::new(
            "write_file",
            "Write a file.",
            json!({"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}, "required": ["path", "content"]}),
        )
    }

    #[test]
    fn python_style_json() {
        assert_eq!(
            to_json(&json!({"a": [1, "é\"", null], "b": {}, "c": true})),
            r#"{"a": [1, "é\"", null], "b": {}, "c": true}"#
        );
    }

    #[test]
    fn renders_qwen_tools_and_turns_exactly() {
        let call = FunctionCall {
            call_id: "c1".into(),
            name: "write_file".into(),
            arguments: r#"{"path": "a.txt", "content": "hi"}"#.into(),
        };
        let msgs = vec![
            Message::user("Write hi to a.txt"),
            Message::new(Role::Assistant, vec![Content::FunctionCall(call)]),
            Message::tool_result(FunctionResult {
                call_id: "c1".into(),
                output: vec![Content::text("Wrote a.txt")],
                is_error: false,
            }),
        ];
        let tools = [write_tool()];
        let got = render(
            &msgs,
            RenderOptions {
                format: PromptFormat::Qwen,
                instructions: Some("Be brief."),
                tools: &tools,
                add_generation_prompt: true,
                tools_first: false,
                remind: false,
            },
            None,
        );
        let want = "<|im_start|>system\nBe brief.\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"write_file\", \"description\": \"Write a file.\", \"parameters\": {\"type\": \"object\", \"properties\": {\"path\": {\"type\": \"string\"}, \"content\": {\"type\": \"string\"}}, \"required\": [\"path\", \"content\"]}}}\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n<|im_start|>user\nWrite hi to a.txt<|im_end|>\n<|im_start|>assistant\n<tool_call>\n{\"name\": \"write_file\", \"arguments\": {\"path\": \"a.txt\", \"content\": \"hi\"}}\n</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\nWrote a.txt\n</tool_response><|im_end|>\n<|im_start|>assistant\n";
        assert_eq!(got, want);
    }

    #[test]
    fn renders_plain_chat_and_defaults() {
        let msgs = vec![
            Message::system("Sys."),
            Message::user("Hi"),
            Message::assistant("Hello!"),
            Message::user("Bye"),
        ];
        let opts = RenderOptions {
            format: PromptFormat::ChatMl,
            instructions: None,
            tools: &[],
            add_generation_prompt: true,
            tools_first: false,
            remind: false,
        };
        assert_eq!(
            render(&msgs, opts, None),
            "<|im_start|>system\nSys.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n"
        );
        let qwen = RenderOptions {
            format: PromptFormat::Qwen,
            ..opts
        };
        assert_eq!(
            render(&[Message::user("Hi")], qwen, None),
            format!(
                "<|im_start|>system\n{QWEN_DEFAULT_SYSTEM}<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
            )
        );
        let chatml_no_system = render(&[Message::user("Hi")], opts, None);
        assert_eq!(
            chatml_no_system,
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
        );
    }

    #[test]
    fn consecutive_results_share_a_turn_and_raw_text_round_trips() {
        let fc = |id: &str| FunctionCall {
            call_id: id.into(),
            name: "ls".into(),
            arguments: "{}".into(),
        };
        let assistant = Message::new(
            Role::Assistant,
            vec![
                Content::text("Listing."),
                Content::FunctionCall(fc("a")),
                Content::FunctionCall(fc("b")),
            ],
        );
        let res = |id: &str, t: &str| {
            Message::tool_result(FunctionResult {
                call_id: id.into(),
                output: vec![Content::text(t)],
                is_error: false,
            })
        };
        let msgs = vec![assistant.clone(), res("a", "x"), res("b", "y")];
        let opts = RenderOptions {
            format: PromptFormat::ChatMl,
            instructions: None,
            tools: &[],
            add_generation_prompt: false,
            tools_first: false,
            remind: false,
        };
        let canonical = assistant_body(&assistant);
        assert_eq!(
            canonical,
            "Listing.\n<tool_call>\n{\"name\": \"ls\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"ls\", \"arguments\": {}}\n</tool_call>"
        );
        assert_eq!(
            render(&msgs, opts, None),
            format!(
                "<|im_start|>assistant\n{canonical}<|im_end|>\n<|im_start|>user\n<tool_response>\nx\n</tool_response>\n<tool_response>\ny\n</tool_response><|im_end|>\n"
            )
        );
        let mut raw = RawReplies::default();
        let model_said = "Listing.\n```json\n{\"name\": \"ls\", \"arguments\": {}}\n```".to_owned();
        raw.insert(canonical, model_said.clone());
        assert!(render(&msgs, opts, Some(&raw)).contains(&model_said));
    }

    #[test]
    fn tools_first_and_reminders() {
        let call = |id: &str| {
            Message::new(
                Role::Assistant,
                vec![Content::FunctionCall(FunctionCall {
                    call_id: id.into(),
                    name: "write_file".into(),
                    arguments: r#"{"path": "a.txt", "content": "hi"}"#.into(),
                })],
            )
        };
        let result = |id: &str| {
            Message::tool_result(FunctionResult {
                call_id: id.into(),
                output: vec![Content::text("Wrote a.txt")],
                is_error: false,
            })
        };
        let msgs = vec![
            Message::user("Write hi to a.txt"),
            call("c1"),
            result("c1"),
            call("c2"),
            result("c2"),
        ];
        let tools = [write_tool()];
        let got = render(
            &msgs,
            RenderOptions {
                format: PromptFormat::Qwen,
                instructions: Some("Be brief."),
                tools: &tools,
                add_generation_prompt: true,
                tools_first: true,
                remind: true,
            },
            None,
        );
        let system = format!(
            "<|im_start|>system\n{}\n\nBe brief.<|im_end|>\n",
            tool_section(&tools)
        );
        assert!(got.starts_with(&system), "{got}");
        let first = "Wrote a.txt\n</tool_response>\n<reminder>The request: Write hi to a.txt If it is done, reply with the result; otherwise call the next tool.</reminder><|im_end|>";
        let second = "Wrote a.txt\n</tool_response>\n<reminder>The request: Write hi to a.txt You made that same call before. If it is done, reply with the result; otherwise call the next tool.</reminder><|im_end|>";
        assert_eq!(got.matches(first).count(), 1, "{got}");
        assert_eq!(got.matches(second).count(), 1, "{got}");
        // With an `answer` tool the reminder names it; long requests are cut.
        let long = "x".repeat(REMINDER_MAX_CHARS + 10);
        let r = reminder(&long, false, true);
        assert!(r.contains("call answer with the result"), "{r}");
        assert!(
            r.contains(&format!("{}…", "x".repeat(REMINDER_MAX_CHARS))),
            "{r}"
        );
    }

    #[test]
    fn detects_formats() {
        assert_eq!(
            PromptFormat::detect(Some("qwen2"), None),
            PromptFormat::Qwen
        );
        assert_eq!(
            PromptFormat::detect(Some("llama"), Some("{{ '<tool_call>' }}")),
            PromptFormat::Qwen
        );
        assert_eq!(
            PromptFormat::detect(Some("llama"), None),
            PromptFormat::ChatMl
        );
    }
}
