//! Messages and their content parts.
//!
//! A [`Message`] has a [`Role`] and a list of [`Content`] parts: text, reasoning, images, function
//! calls made by the model and the results of those calls. Function-call arguments are kept as the
//! raw JSON text the model produced, so nothing is lost when the model writes invalid JSON and the
//! history can be replayed byte for byte.

use serde::{Deserialize, Serialize};

/// Who wrote a message.
///
/// Unknown roles (a compatible server may invent one) are kept as [`Role::Other`] rather than
/// rejected.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Role {
    /// Instructions for the model.
    System,
    /// The user (or the application speaking for the user).
    User,
    /// The model.
    Assistant,
    /// Results of tool calls.
    Tool,
    /// A role this version of cairn does not know.
    Other(String),
}

impl Role {
    /// The wire name of the role (`"system"`, `"user"`, …).
    pub fn as_str(&self) -> &str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
            Role::Other(s) => s,
        }
    }
}

impl From<&str> for Role {
    fn from(s: &str) -> Self {
        match s {
            "system" | "developer" => Role::System,
            "user" => Role::User,
            "assistant" | "model" => Role::Assistant,
            "tool" | "function" => Role::Tool,
            other => Role::Other(other.to_owned()),
        }
    }
}

impl Serialize for Role {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Role {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Ok(Role::from(s.as_str()))
    }
}

/// A call of a tool requested by the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionCall {
    /// The id the model gave the call; the result refers to it.
    pub call_id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments as the raw JSON text the model produced (possibly invalid).
    pub arguments: String,
}

impl FunctionCall {
    /// A call with arguments given as a JSON value.
    pub fn new(
        call_id: impl Into<String>,
        name: impl Into<String>,
        arguments: &serde_json::Value,
    ) -> Self {
        FunctionCall {
            call_id: call_id.into(),
            name: name.into(),
            arguments: arguments.to_string(),
        }
    }
}

/// The result of a tool call, sent back to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionResult {
    /// The id of the call this answers.
    pub call_id: String,
    /// The output: text parts, and images where the tool returned some.
    pub output: Vec<Content>,
    /// Whether the output reports a failure (bad arguments, a failing tool, …).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_error: bool,
}

impl FunctionResult {
    /// The text parts of the output joined together.
    pub fn text(&self) -> String {
        join_text(&self.output)
    }
}

/// One part of a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Content {
    /// Plain text.
    Text {
        /// The text.
        text: String,
    },
    /// Reasoning the model exposed (not a final answer).
    Reasoning {
        /// The reasoning text.
        text: String,
    },
    /// An image, by URL or `data:` URI.
    Image {
        /// `https://…` or `data:image/png;base64,…`.
        url: String,
        /// The media type when known, e.g. `image/png`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        media_type: Option<String>,
    },
    /// A tool call requested by the model.
    FunctionCall(FunctionCall),
    /// The result of a tool call.
    FunctionResult(FunctionResult),
}

impl Content {
    /// A text part.
    pub fn text(text: impl Into<String>) -> Self {
        Content::Text { text: text.into() }
    }

    /// The text of a text part, `None` for other parts.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Content::Text { text } => Some(text),
            _ => None,
        }
    }
}

pub(crate) fn join_text(parts: &[Content]) -> String {
    let mut out = String::new();
    for p in parts {
        if let Content::Text { text } = p {
            out.push_str(text);
        }
    }
    out
}

/// A message of a conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Who wrote it.
    pub role: Role,
    /// Its parts, in order.
    pub contents: Vec<Content>,
    /// An optional author name (for example the agent that wrote it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub author_name: Option<String>,
    /// Metadata: what made this message when it was not the user, the model or a tool — for
    /// example `"summarization"` on the message a deep agent puts in place of summarized ones
    /// (Deep Agents' `additional_kwargs["lc_source"]`). Never sent to a model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

impl Message {
    /// A message with the given role and parts.
    pub fn new(role: Role, contents: Vec<Content>) -> Self {
        Message {
            role,
            contents,
            author_name: None,
            source: None,
        }
    }

    /// The same message tagged with `source` (see [`Message::source`]).
    pub fn with_source(mut self, source: impl Into<String>) -> Self {
        self.source = Some(source.into());
        self
    }

    /// A system message with one text part.
    pub fn system(text: impl Into<String>) -> Self {
        Message::new(Role::System, vec![Content::text(text)])
    }

    /// A user message with one text part.
    pub fn user(text: impl Into<String>) -> Self {
        Message::new(Role::User, vec![Content::text(text)])
    }

    /// An assistant message with one text part.
    pub fn assistant(text: impl Into<String>) -> Self {
        Message::new(Role::Assistant, vec![Content::text(text)])
    }

    /// A tool message carrying one result.
    pub fn tool_result(result: FunctionResult) -> Self {
        Message::new(Role::Tool, vec![Content::FunctionResult(result)])
    }

    /// The text parts joined together.
    pub fn text(&self) -> String {
        join_text(&self.contents)
    }

    /// The function calls in this message.
    pub fn function_calls(&self) -> impl Iterator<Item = &FunctionCall> {
        self.contents.iter().filter_map(|c| match c {
            Content::FunctionCall(fc) => Some(fc),
            _ => None,
        })
    }

    /// The function results in this message.
    pub fn function_results(&self) -> impl Iterator<Item = &FunctionResult> {
        self.contents.iter().filter_map(|c| match c {
            Content::FunctionResult(r) => Some(r),
            _ => None,
        })
    }
}

/// Token usage reported by a model call (or summed over a run).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Tokens in the prompt.
    pub input_tokens: u64,
    /// Tokens generated.
    pub output_tokens: u64,
    /// Prompt tokens served from a cache, when the server says so.
    #[serde(default)]
    pub cached_input_tokens: u64,
}

impl Usage {
    /// Adds another usage to this one.
    pub fn add(&mut self, other: &Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cached_input_tokens += other.cached_input_tokens;
    }

    /// Input plus output tokens.
    pub fn total(&self) -> u64 {
        self.input_tokens + self.output_tokens
    }
}

/// Why the model stopped.
///
/// `#[non_exhaustive]`: reasons providers add (a refusal, a paused turn) may become variants;
/// until then they arrive as [`FinishReason::Other`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FinishReason {
    /// A natural end of the answer.
    Stop,
    /// The output token limit was reached.
    Length,
    /// The model asked for tool calls.
    ToolCalls,
    /// The server filtered the content.
    ContentFilter,
    /// A reason this version of cairn does not know.
    Other(String),
}

impl FinishReason {
    /// The wire name.
    pub fn as_str(&self) -> &str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::Length => "length",
            FinishReason::ToolCalls => "tool_calls",
            FinishReason::ContentFilter => "content_filter",
            FinishReason::Other(s) => s,
        }
    }
}

impl From<&str> for FinishReason {
    fn from(s: &str) -> Self {
        match s {
            "stop" | "end_turn" | "completed" | "STOP" => FinishReason::Stop,
            "length" | "max_tokens" | "MAX_TOKENS" | "incomplete" => FinishReason::Length,
            "tool_calls" | "function_call" | "tool_use" => FinishReason::ToolCalls,
            "content_filter" | "SAFETY" => FinishReason::ContentFilter,
            other => FinishReason::Other(other.to_owned()),
        }
    }
}

impl Serialize for FinishReason {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for FinishReason {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Ok(FinishReason::from(s.as_str()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_roles_and_finish_reasons_survive() {
        let r: Role = serde_json::from_str("\"critic\"").unwrap();
        assert_eq!(r, Role::Other("critic".into()));
        assert_eq!(serde_json::to_string(&r).unwrap(), "\"critic\"");
        let f: FinishReason = serde_json::from_str("\"paused\"").unwrap();
        assert_eq!(f.as_str(), "paused");
    }

    #[test]
    fn message_round_trip() {
        let m = Message::new(
            Role::Assistant,
            vec![
                Content::text("hi"),
                Content::FunctionCall(FunctionCall::new(
                    "c1",
                    "echo",
                    &serde_json::json!({"text": "x"}),
                )),
            ],
        );
        let back: Message = serde_json::from_str(&serde_json::to_string(&m).unwrap()).unwrap();
        assert_eq!(back, m);
        assert_eq!(back.function_calls().count(), 1);
    }
}
