//! Request-body helpers the providers' wire mappings share. (The HTTP plumbing is in
//! [`crate::transport`].)

use bytes::Bytes;
use cairn_core::{ChatError, ChatOptions, Content, Message, Role};
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

use crate::transport::config_error;

/// Deserializes `null` as the type's default (for `Vec`s and other defaults).
pub(crate) fn nullable<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Option::unwrap_or_default)
}

/// Merges `additional_properties`, then `extra_body`, into `body` (replacing fields) and
/// serializes it.
pub(crate) fn finish_body(
    mut body: Map<String, Value>,
    props: &Map<String, Value>,
    extra: Option<&Map<String, Value>>,
) -> Result<Bytes, ChatError> {
    for (k, v) in props.iter().chain(extra.into_iter().flatten()) {
        body.insert(k.clone(), v.clone());
    }
    serde_json::to_vec(&body).map(Bytes::from).map_err(|e| {
        config_error(format!("the request could not be serialized: {e}")).with_source(e)
    })
}

/// A `data:<media type>;base64,<data>` URI split into media type and data.
pub(crate) fn parse_data_uri<'a>(
    url: &'a str,
    media_type: Option<&'a str>,
) -> Option<(&'a str, &'a str)> {
    let rest = url.strip_prefix("data:")?;
    let (meta, data) = rest.split_once(',')?;
    let mt = meta.strip_suffix(";base64")?;
    let mt = if mt.is_empty() {
        media_type.unwrap_or("application/octet-stream")
    } else {
        mt
    };
    Some((mt, data))
}

/// Tool-call arguments (raw JSON text) as the object providers want: empty text is `{}`;
/// invalid JSON or a non-object is also `{}` (the agent loop answers such a call with an
/// invalid-arguments error result, which the model reads next to it).
pub(crate) fn arguments_object(arguments: &str) -> Value {
    if arguments.trim().is_empty() {
        return Value::Object(Map::new());
    }
    match serde_json::from_str::<Value>(arguments) {
        Ok(v @ Value::Object(_)) => v,
        _ => Value::Object(Map::new()),
    }
}

/// The text of a tool result's outputs, and its images (as `(url, media type)`).
pub(crate) fn result_parts(output: &[Content]) -> (String, Vec<(&str, Option<&str>)>) {
    let mut text = String::new();
    let mut images = Vec::new();
    for c in output {
        match c {
            Content::Text { text: t } => text.push_str(t),
            Content::Image { url, media_type } => {
                images.push((url.as_str(), media_type.as_deref()))
            }
            _ => {}
        }
    }
    (text, images)
}

/// A conversation as the alternating turns the Anthropic and Gemini APIs want, and its system
/// text apart: `ChatOptions::instructions` followed by the text of any system messages (joined
/// by a blank line). Assistant messages are `assistant` turns, the others `user` turns;
/// `parts(i, out)` writes message `i`'s parts, a message without any is dropped, and
/// consecutive turns of the same role are merged.
pub(crate) fn system_and_turns(
    messages: &[Message],
    options: &ChatOptions,
    assistant: &'static str,
    mut parts: impl FnMut(usize, &mut Vec<Value>),
) -> (String, Vec<(&'static str, Vec<Value>)>) {
    let mut system = options.instructions.clone().unwrap_or_default();
    let mut turns: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        let role = match m.role {
            Role::System => {
                let t = m.text();
                if !t.is_empty() {
                    if !system.is_empty() {
                        system.push_str("\n\n");
                    }
                    system.push_str(&t);
                }
                continue;
            }
            Role::Assistant => assistant,
            _ => "user",
        };
        let mut out = Vec::new();
        parts(i, &mut out);
        if out.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some((r, p)) if *r == role => p.extend(out),
            _ => turns.push((role, out)),
        }
    }
    (system, turns)
}
