//! Wire helpers shared by both OpenAI APIs: tolerant deserializers, usage, error bodies and the
//! merging of extra request fields.

use std::borrow::Cow;
use std::fmt;

use cairn_core::{Content, Usage};
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

pub(crate) use crate::common::nullable;

/// A string borrowed from the input when it has no escapes (owned otherwise), for fields that
/// are often read but rarely kept.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Str<'a>(pub(crate) Cow<'a, str>);

impl Str<'_> {
    pub(crate) fn into_owned(self) -> String {
        self.0.into_owned()
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Str<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Str<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Str<'de>, E> {
                Ok(Str(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Str<'de>, E> {
                Ok(Str(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Str<'de>, E> {
                Ok(Str(Cow::Owned(v)))
            }
        }
        d.deserialize_str(V)
    }
}

/// A string field that tolerates other shapes: a string is kept, an array of `{text}` parts is
/// joined, anything else (`null`, numbers, objects) becomes `None`.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct LooseText(pub(crate) Option<String>);

impl<'de> Deserialize<'de> for LooseText {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = LooseText;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string, an array of text parts, or anything else")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<LooseText, E> {
                Ok(LooseText(Some(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<LooseText, E> {
                Ok(LooseText(Some(v)))
            }
            fn visit_unit<E: de::Error>(self) -> Result<LooseText, E> {
                Ok(LooseText(None))
            }
            fn visit_none<E: de::Error>(self) -> Result<LooseText, E> {
                Ok(LooseText(None))
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<LooseText, D::Error> {
                d.deserialize_any(V)
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<LooseText, E> {
                Ok(LooseText(None))
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<LooseText, E> {
                Ok(LooseText(None))
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<LooseText, E> {
                Ok(LooseText(None))
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<LooseText, E> {
                Ok(LooseText(None))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<LooseText, A::Error> {
                while m.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(LooseText(None))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<LooseText, A::Error> {
                #[derive(Deserialize)]
                struct Part {
                    #[serde(default)]
                    text: LooseText,
                }
                let mut out: Option<String> = None;
                while let Some(p) = s.next_element::<Part>()? {
                    if let Some(t) = p.text.0 {
                        out.get_or_insert_with(String::new).push_str(&t);
                    }
                }
                Ok(LooseText(out))
            }
        }
        d.deserialize_any(V)
    }
}

/// Tool-call arguments as text: a JSON string is decoded, any other JSON value (some servers
/// send an object) is kept as its JSON text.
pub(crate) fn arguments_text(raw: Option<&RawValue>) -> Result<String, serde_json::Error> {
    match raw {
        None => Ok(String::new()),
        Some(r) => {
            let s = r.get();
            if s.starts_with('"') {
                serde_json::from_str(s)
            } else if s == "null" {
                Ok(String::new())
            } else {
                Ok(s.to_owned())
            }
        }
    }
}

#[derive(Debug, Default, Deserialize)]
struct TokenDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

/// Usage in either API's shape.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct WireUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    prompt_tokens_details: Option<TokenDetails>,
    #[serde(default)]
    input_tokens_details: Option<TokenDetails>,
}

impl WireUsage {
    pub(crate) fn to_usage(&self) -> Usage {
        let cached = self
            .prompt_tokens_details
            .as_ref()
            .or(self.input_tokens_details.as_ref())
            .and_then(|d| d.cached_tokens)
            .unwrap_or(0);
        Usage {
            input_tokens: self.prompt_tokens.or(self.input_tokens).unwrap_or(0),
            output_tokens: self.completion_tokens.or(self.output_tokens).unwrap_or(0),
            cached_input_tokens: cached,
        }
    }
}

/// The text parts of `parts`: borrowed when there is exactly one, joined otherwise.
pub(crate) fn text_of(parts: &[Content]) -> Option<Cow<'_, str>> {
    let mut texts = parts.iter().filter_map(|p| match p {
        Content::Text { text } => Some(text.as_str()),
        _ => None,
    });
    let first = texts.next()?;
    match texts.next() {
        None => Some(Cow::Borrowed(first)),
        Some(second) => {
            let mut s = String::with_capacity(first.len() + second.len());
            s.push_str(first);
            s.push_str(second);
            texts.for_each(|t| s.push_str(t));
            Some(Cow::Owned(s))
        }
    }
}

/// Extra request fields: `options.additional_properties`, then `client_kwargs["extra_body"]`.
/// They replace typed fields of the same name.
#[derive(Clone, Copy)]
pub(crate) struct Extras<'a> {
    pub(crate) props: &'a Map<String, Value>,
    pub(crate) body: Option<&'a Map<String, Value>>,
}

impl<'a> Extras<'a> {
    fn overrides(&self, key: &str) -> bool {
        (!self.props.is_empty() && self.props.contains_key(key))
            || self.body.is_some_and(|b| b.contains_key(key))
    }

    /// Writes `key: value` unless an extra field replaces it.
    pub(crate) fn put<M: SerializeMap, T: Serialize + ?Sized>(
        &self,
        m: &mut M,
        key: &str,
        value: &T,
    ) -> Result<(), M::Error> {
        if self.overrides(key) {
            Ok(())
        } else {
            m.serialize_entry(key, value)
        }
    }

    /// Writes the extra fields.
    pub(crate) fn write<M: SerializeMap>(&self, m: &mut M) -> Result<(), M::Error> {
        for (k, v) in self.props {
            if !self.body.is_some_and(|b| b.contains_key(k)) {
                m.serialize_entry(k, v)?;
            }
        }
        if let Some(b) = self.body {
            for (k, v) in b {
                m.serialize_entry(k, v)?;
            }
        }
        Ok(())
    }
}

/// A JSON schema in `options.response_format` wrapped the way the API expects, or a value that
/// already is an API response format, passed on as it is.
pub(crate) enum ResponseFormat<'a> {
    /// Already in the API's shape.
    Raw(&'a Value),
    /// A bare JSON schema: name and strict schema.
    Schema { name: &'a str, schema: Value },
}

impl<'a> ResponseFormat<'a> {
    pub(crate) fn from_option(v: &'a Value) -> Self {
        let ty = v.get("type").and_then(Value::as_str);
        let is_format = matches!(ty, Some("json_object" | "text"))
            || (ty == Some("json_schema")
                && (v.get("json_schema").is_some() || v.get("schema").is_some()));
        if is_format {
            return ResponseFormat::Raw(v);
        }
        let name = v
            .get("title")
            .and_then(Value::as_str)
            .filter(|t| cairn_core::tool::is_valid_tool_name(t))
            .unwrap_or("response");
        ResponseFormat::Schema {
            name,
            schema: cairn_core::schema::to_strict(v),
        }
    }
}

// The status → error mapping moved to the transport; the OpenAI mappers keep importing it here.
pub(crate) use crate::transport::error::{decode_error, error_parts, event_error};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loose_text_tolerates_shapes() {
        let t: LooseText = serde_json::from_str("\"a\\nb\"").unwrap();
        assert_eq!(t.0.as_deref(), Some("a\nb"));
        let t: LooseText = serde_json::from_str("null").unwrap();
        assert_eq!(t.0, None);
        let t: LooseText =
            serde_json::from_str(r#"[{"type":"text","text":"x"},{"text":"y"}]"#).unwrap();
        assert_eq!(t.0.as_deref(), Some("xy"));
        let t: LooseText = serde_json::from_str(r#"{"a":[1,2]}"#).unwrap();
        assert_eq!(t.0, None);
    }

    #[test]
    fn arguments_accept_objects() {
        let raw: Box<RawValue> = serde_json::from_str(r#"{"a": 1}"#).unwrap();
        assert_eq!(arguments_text(Some(&raw)).unwrap(), r#"{"a": 1}"#);
        let raw: Box<RawValue> = serde_json::from_str(r#""{\"a\":1}""#).unwrap();
        assert_eq!(arguments_text(Some(&raw)).unwrap(), r#"{"a":1}"#);
    }
}
