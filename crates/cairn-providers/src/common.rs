//! Request-body helpers the providers' wire mappings share. (The HTTP plumbing is in
//! [`crate::transport`].)

use bytes::Bytes;
use cairn_core::{ChatError, Content};
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
