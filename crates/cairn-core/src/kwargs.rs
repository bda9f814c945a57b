//! [`Kwargs`]: named runtime values for one bucket of a run.

use serde::{Deserialize, Serialize, de::DeserializeOwned};
use serde_json::{Map, Value};

/// Named runtime values: the function-invocation bucket or the client bucket of a run.
///
/// Values are JSON so a bucket can be logged, compared and carried across a process boundary;
/// long-lived, non-serializable dependencies belong on a tool-set value or in
/// [`Extensions`](crate::Extensions) instead.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Kwargs(Map<String, Value>);

impl Kwargs {
    /// An empty bucket.
    pub fn new() -> Self {
        Kwargs(Map::new())
    }

    /// Sets `key` to `value`, returning the previous value.
    pub fn insert(&mut self, key: impl Into<String>, value: impl Into<Value>) -> Option<Value> {
        self.0.insert(key.into(), value.into())
    }

    /// Sets `key` to `value` unless it is already present (Python's `setdefault`).
    pub fn set_default(&mut self, key: impl Into<String>, value: impl Into<Value>) -> &Value {
        self.0.entry(key.into()).or_insert_with(|| value.into())
    }

    /// The raw value under `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.0.get(key)
    }

    /// The string under `key`, if it is a string.
    pub fn get_str(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(Value::as_str)
    }

    /// The value under `key` deserialized as `T`; `None` when absent or of another shape.
    pub fn get_as<T: DeserializeOwned>(&self, key: &str) -> Option<T> {
        self.0
            .get(key)
            .and_then(|v| serde_json::from_value(v.clone()).ok())
    }

    /// Removes `key`.
    pub fn remove(&mut self, key: &str) -> Option<Value> {
        self.0.remove(key)
    }

    /// Whether `key` is present.
    pub fn contains_key(&self, key: &str) -> bool {
        self.0.contains_key(key)
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the bucket is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Iterates over the entries.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &Value)> {
        self.0.iter()
    }

    /// The entries as a JSON map.
    pub fn as_map(&self) -> &Map<String, Value> {
        &self.0
    }
}

impl std::ops::Index<&str> for Kwargs {
    type Output = Value;
    /// The value under `key`, or JSON `null` when absent (like `serde_json::Value`'s indexing).
    fn index(&self, key: &str) -> &Value {
        self.0.get(key).unwrap_or(&Value::Null)
    }
}

impl<K: Into<String>, V: Into<Value>> FromIterator<(K, V)> for Kwargs {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        Kwargs(
            iter.into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        )
    }
}

impl<K: Into<String>, V: Into<Value>, const N: usize> From<[(K, V); N]> for Kwargs {
    fn from(arr: [(K, V); N]) -> Self {
        arr.into_iter().collect()
    }
}

impl From<Map<String, Value>> for Kwargs {
    fn from(m: Map<String, Value>) -> Self {
        Kwargs(m)
    }
}

impl TryFrom<Value> for Kwargs {
    type Error = crate::Error;
    fn try_from(v: Value) -> Result<Self, Self::Error> {
        match v {
            Value::Object(m) => Ok(Kwargs(m)),
            other => Err(crate::Error::InvalidInput(format!(
                "kwargs must be a JSON object, got {other}"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_default_keeps_existing() {
        let mut k = Kwargs::from([("tenant", "fabrikam")]);
        k.set_default("tenant", "contoso");
        k.set_default("request_source", "middleware");
        assert_eq!(k.get_str("tenant"), Some("fabrikam"));
        assert_eq!(k["request_source"], "middleware");
        assert!(k["missing"].is_null());
    }
}
