//! JSON schemas for tool parameters.
//!
//! [`schema_for`] derives a parameter schema from a type with schemars: inlined (no `$ref`),
//! without the `$schema` header and title, with `additionalProperties: false` on every object.
//! [`to_strict`] rewrites a schema into the subset OpenAI's strict mode accepts.

use schemars::JsonSchema;
use serde_json::{Map, Value};

/// The parameter schema of `T`: inlined, no `$schema`/`title`, objects closed.
pub fn schema_for<T: JsonSchema>() -> Value {
    let settings = schemars::generate::SchemaSettings::draft2020_12().with(|s| {
        s.meta_schema = None;
        s.inline_subschemas = true;
    });
    let schema = settings.into_generator().into_root_schema_for::<T>();
    let mut v: Value = schema.into();
    if let Value::Object(m) = &mut v {
        m.remove("title");
        m.remove("$schema");
        m.remove("$defs");
        if !m.contains_key("properties") && m.get("type").and_then(Value::as_str) == Some("object")
        {
            m.insert("properties".into(), Value::Object(Map::new()));
        }
    }
    close_objects(&mut v);
    v
}

fn close_objects(v: &mut Value) {
    match v {
        Value::Object(m) => {
            if m.get("type").and_then(Value::as_str) == Some("object")
                && m.contains_key("properties")
                && !m.contains_key("additionalProperties")
            {
                m.insert("additionalProperties".into(), Value::Bool(false));
            }
            for (_, child) in m.iter_mut() {
                close_objects(child);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(close_objects),
        _ => {}
    }
}

/// Rewrites `schema` so OpenAI's strict mode accepts it: every object closed and all its
/// properties required (optional ones stay nullable), no `format`/`default`, `oneOf` → `anyOf`.
pub fn to_strict(schema: &Value) -> Value {
    let mut v = schema.clone();
    strictify(&mut v);
    v
}

fn strictify(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.remove("format");
            m.remove("default");
            if let Some(one_of) = m.remove("oneOf") {
                m.insert("anyOf".into(), one_of);
            }
            let is_object = match m.get("type") {
                Some(Value::String(t)) => t == "object",
                Some(Value::Array(ts)) => ts.iter().any(|t| t == "object"),
                _ => m.contains_key("properties"),
            };
            if is_object {
                let keys: Vec<Value> = m
                    .get("properties")
                    .and_then(Value::as_object)
                    .map(|p| p.keys().cloned().map(Value::String).collect())
                    .unwrap_or_default();
                m.insert("required".into(), Value::Array(keys));
                m.insert("additionalProperties".into(), Value::Bool(false));
                if !m.contains_key("properties") {
                    m.insert("properties".into(), Value::Object(Map::new()));
                }
            }
            for (_, child) in m.iter_mut() {
                strictify(child);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(strictify),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[allow(dead_code)]
    #[derive(Deserialize, JsonSchema)]
    struct Args {
        /// The city.
        city: String,
        /// How many days.
        days: Option<u32>,
        unit: Unit,
    }

    #[allow(dead_code)]
    #[derive(Deserialize, JsonSchema)]
    #[serde(rename_all = "lowercase")]
    enum Unit {
        Celsius,
        Fahrenheit,
    }

    #[test]
    fn derived_schema_is_inlined_and_closed() {
        let s = schema_for::<Args>();
        assert_eq!(s["type"], "object");
        assert_eq!(s["additionalProperties"], false);
        assert_eq!(s["properties"]["city"]["description"], "The city.");
        assert_eq!(
            s["properties"]["unit"]["enum"],
            serde_json::json!(["celsius", "fahrenheit"])
        );
        assert!(s.get("$schema").is_none() && s.get("$defs").is_none());
        let req: Vec<&str> = s["required"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert_eq!(req, ["city", "unit"]);
    }

    #[test]
    fn strict_requires_everything() {
        let s = to_strict(&schema_for::<Args>());
        assert_eq!(s["required"].as_array().unwrap().len(), 3);
        assert!(s["properties"]["days"].get("format").is_none());
        assert!(!s.to_string().contains("\"format\""));
    }
}
