//! Tools and tool choice in the shapes of both OpenAI APIs (they differ only in nesting).

use cairn_core::tool::ToolsJsonCache;
use cairn_core::{ToolChoice, ToolSpec};
use serde::{Serialize, Serializer};
use serde_json::json;
use serde_json::value::RawValue;

/// Which API's shape tools and a named tool choice take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ToolShape {
    /// Chat Completions: `{"type": "function", "function": {name, description, parameters}}`.
    Chat,
    /// Responses: `{"type": "function", name, description, parameters, "strict": false}`.
    Responses,
}

/// The tools of a request in `.1`'s shape, rendered once per distinct tool list (an agent sends
/// the same list on every call) and then copied from a cache.
pub(crate) struct ToolsOf<'a>(pub(crate) &'a [ToolSpec], pub(crate) ToolShape);

static CHAT_TOOLS: ToolsJsonCache = ToolsJsonCache::new();
static RESPONSES_TOOLS: ToolsJsonCache = ToolsJsonCache::new();

impl Serialize for ToolsOf<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let cache = match self.1 {
            ToolShape::Chat => &CHAT_TOOLS,
            ToolShape::Responses => &RESPONSES_TOOLS,
        };
        let json = cache
            .get_or_render(self.0, |tools| {
                serde_json::to_string(&RenderTools(tools, self.1))
            })
            .map_err(serde::ser::Error::custom)?;
        json.serialize(s)
    }
}

/// A function's name, description (left out when empty) and parameter schema.
#[derive(Serialize)]
struct Function<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    description: &'a str,
    parameters: &'a RawValue,
}

/// One tool: the function nested (chat) or flat with `strict` (responses).
#[derive(Serialize)]
struct Tool<'a> {
    r#type: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    function: Option<Function<'a>>,
    #[serde(flatten)]
    flat: Option<Function<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    strict: Option<bool>,
}

/// The wire form of tool specs, serialized field by field.
struct RenderTools<'a>(&'a [ToolSpec], ToolShape);

impl Serialize for RenderTools<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let chat = self.1 == ToolShape::Chat;
        s.collect_seq(self.0.iter().map(|t| {
            let f = Function {
                name: &t.name,
                description: &t.description,
                parameters: t.parameters.json(),
            };
            let (function, flat) = if chat {
                (Some(f), None)
            } else {
                (None, Some(f))
            };
            Tool {
                r#type: "function",
                function,
                flat,
                strict: (!chat).then_some(false),
            }
        }))
    }
}

/// A tool choice in `.1`'s shape: `none`, `required`, `auto`, or the named function.
pub(crate) struct ToolChoiceOf<'a>(pub(crate) &'a ToolChoice, pub(crate) ToolShape);

impl Serialize for ToolChoiceOf<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match (self.0, self.1) {
            (ToolChoice::None, _) => s.serialize_str("none"),
            (ToolChoice::Required, _) => s.serialize_str("required"),
            (ToolChoice::Tool(name), ToolShape::Chat) => {
                json!({"type": "function", "function": {"name": name}}).serialize(s)
            }
            (ToolChoice::Tool(name), ToolShape::Responses) => {
                json!({"type": "function", "name": name}).serialize(s)
            }
            // `Auto`, and any choice added later (`ToolChoice` is non-exhaustive).
            _ => s.serialize_str("auto"),
        }
    }
}
