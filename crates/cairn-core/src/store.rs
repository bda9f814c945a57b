//! Long-term memory: a namespaced key → JSON value [`Store`] (SPEC R10.2).
//!
//! Namespaces are paths of strings (`["memories", "user-123"]`); within one, keys are unique.
//! [`InMemoryStore`] serves tests and single-process use; persistent stores (SQLite, PostgreSQL)
//! implement the same trait in their own crates. Tools reach the run's store through
//! `ctx.extensions.get_arc::<SharedStore>()`-style handles that the harness installs.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::client::BoxFuture;

/// A stored value with its address and timestamps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Item {
    /// The namespace path.
    pub namespace: Vec<String>,
    /// The key within the namespace.
    pub key: String,
    /// The value.
    pub value: Value,
    /// Creation time, milliseconds since the Unix epoch.
    pub created_at_ms: u64,
    /// Last update time, milliseconds since the Unix epoch.
    pub updated_at_ms: u64,
    /// Increases by one with every put (1 for a new item); [`Store::put_if`] compares it.
    #[serde(default)]
    pub version: u64,
}

/// What to search for in a store.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SearchQuery {
    /// Only keys starting with this.
    pub key_prefix: Option<String>,
    /// At most this many items (`None`: all).
    pub limit: Option<usize>,
    /// Skip this many items first.
    pub offset: usize,
}

/// A failed store operation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The storage engine failed.
    #[error("store backend failed: {0}")]
    Backend(String),
    /// A value could not be encoded or decoded.
    #[error("store value is not valid JSON: {0}")]
    Serde(#[from] serde_json::Error),
    /// The request was malformed (for example an empty key).
    #[error("invalid store request: {0}")]
    Invalid(String),
    /// A conditional put found another version than the one expected: someone else changed
    /// the item since it was read.
    #[error(
        "store item {key:?} was changed by another writer (expected {expected:?}, found {found:?})"
    )]
    Conflict {
        /// The key.
        key: String,
        /// What the writer expected.
        expected: PutIf,
        /// The version found (`None`: absent).
        found: Option<u64>,
    },
}

/// The condition of a [`Store::put_if`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PutIf {
    /// Put whatever is there.
    Always,
    /// Put only if there is no item.
    Absent,
    /// Put only if the item is at this version (compare-and-swap after a read).
    Version(u64),
}

impl PutIf {
    /// Whether an item at `found` (`None`: absent) satisfies the condition.
    pub fn holds(self, found: Option<u64>) -> bool {
        match self {
            PutIf::Always => true,
            PutIf::Absent => found.is_none(),
            PutIf::Version(v) => found == Some(v),
        }
    }
}

/// Namespaced key → JSON value storage.
pub trait Store: Send + Sync + 'static {
    /// The item at `namespace`/`key`.
    fn get<'a>(
        &'a self,
        namespace: &'a [String],
        key: &'a str,
    ) -> BoxFuture<'a, Result<Option<Item>, StoreError>>;

    /// Creates or replaces the item at `namespace`/`key`.
    fn put<'a>(
        &'a self,
        namespace: &'a [String],
        key: &'a str,
        value: Value,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            self.put_if(namespace, key, value, PutIf::Always)
                .await
                .map(|_| ())
        })
    }

    /// Creates or replaces the item if `condition` holds, atomically; returns the item's new
    /// version, or [`StoreError::Conflict`] when the condition does not hold (nothing is
    /// written then). Two writers that read version `v` and both put with
    /// `PutIf::Version(v)`: one succeeds, the other gets the conflict and must read again.
    fn put_if<'a>(
        &'a self,
        namespace: &'a [String],
        key: &'a str,
        value: Value,
        condition: PutIf,
    ) -> BoxFuture<'a, Result<u64, StoreError>>;

    /// Deletes the item; deleting a missing item is not an error.
    fn delete<'a>(
        &'a self,
        namespace: &'a [String],
        key: &'a str,
    ) -> BoxFuture<'a, Result<(), StoreError>>;

    /// Items whose namespace starts with `namespace_prefix`, ordered by namespace then key.
    fn search<'a>(
        &'a self,
        namespace_prefix: &'a [String],
        query: SearchQuery,
    ) -> BoxFuture<'a, Result<Vec<Item>, StoreError>>;
}

/// A shared store handle, as kept in [`Extensions`](crate::Extensions).
pub type SharedStore = Arc<dyn Store>;

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

type ItemMap = BTreeMap<(Vec<String>, String), Item>;

/// A store in memory. Clones share the data.
#[derive(Clone, Default)]
pub struct InMemoryStore {
    items: Arc<RwLock<ItemMap>>,
}

impl InMemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }
}

impl std::fmt::Debug for InMemoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.items.read().map(|m| m.len()).unwrap_or(0);
        f.debug_struct("InMemoryStore").field("items", &n).finish()
    }
}

fn poisoned<T>(_: T) -> StoreError {
    StoreError::Backend("the in-memory store's lock was poisoned by a panic".into())
}

impl Store for InMemoryStore {
    fn get<'a>(
        &'a self,
        namespace: &'a [String],
        key: &'a str,
    ) -> BoxFuture<'a, Result<Option<Item>, StoreError>> {
        let r = self
            .items
            .read()
            .map_err(poisoned)
            .map(|m| m.get(&(namespace.to_vec(), key.to_owned())).cloned());
        Box::pin(async move { r })
    }

    fn put_if<'a>(
        &'a self,
        namespace: &'a [String],
        key: &'a str,
        value: Value,
        condition: PutIf,
    ) -> BoxFuture<'a, Result<u64, StoreError>> {
        let r = if key.is_empty() {
            Err(StoreError::Invalid("the key is empty".into()))
        } else {
            self.items.write().map_err(poisoned).and_then(|mut m| {
                let now = now_ms();
                let id = (namespace.to_vec(), key.to_owned());
                let old = m.get(&id);
                let found = old.map(|i| i.version);
                if !condition.holds(found) {
                    return Err(StoreError::Conflict {
                        key: key.to_owned(),
                        expected: condition,
                        found,
                    });
                }
                let created = old.map(|i| i.created_at_ms).unwrap_or(now);
                let version = found.unwrap_or(0) + 1;
                m.insert(
                    id,
                    Item {
                        namespace: namespace.to_vec(),
                        key: key.to_owned(),
                        value,
                        created_at_ms: created,
                        updated_at_ms: now,
                        version,
                    },
                );
                Ok(version)
            })
        };
        Box::pin(async move { r })
    }

    fn delete<'a>(
        &'a self,
        namespace: &'a [String],
        key: &'a str,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let r = self.items.write().map_err(poisoned).map(|mut m| {
            m.remove(&(namespace.to_vec(), key.to_owned()));
        });
        Box::pin(async move { r })
    }

    fn search<'a>(
        &'a self,
        namespace_prefix: &'a [String],
        query: SearchQuery,
    ) -> BoxFuture<'a, Result<Vec<Item>, StoreError>> {
        let r = self.items.read().map_err(poisoned).map(|m| {
            m.values()
                .filter(|i| i.namespace.starts_with(namespace_prefix))
                .filter(|i| {
                    query
                        .key_prefix
                        .as_deref()
                        .is_none_or(|p| i.key.starts_with(p))
                })
                .skip(query.offset)
                .take(query.limit.unwrap_or(usize::MAX))
                .cloned()
                .collect()
        });
        Box::pin(async move { r })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ns(parts: &[&str]) -> Vec<String> {
        parts.iter().map(|s| s.to_string()).collect()
    }

    #[tokio::test]
    async fn put_get_search_delete() {
        let s = InMemoryStore::new();
        let a = ns(&["memories", "u1"]);
        s.put(&a, "prefs", serde_json::json!({"tone": "brief"}))
            .await
            .unwrap();
        s.put(&a, "projects", serde_json::json!(["cairn"]))
            .await
            .unwrap();
        s.put(&ns(&["memories", "u2"]), "prefs", serde_json::json!({}))
            .await
            .unwrap();
        let item = s.get(&a, "prefs").await.unwrap().unwrap();
        assert_eq!(item.value["tone"], "brief");
        let all = s
            .search(&ns(&["memories"]), SearchQuery::default())
            .await
            .unwrap();
        assert_eq!(all.len(), 3);
        let q = SearchQuery {
            key_prefix: Some("pro".into()),
            ..Default::default()
        };
        assert_eq!(s.search(&a, q).await.unwrap().len(), 1);
        s.delete(&a, "prefs").await.unwrap();
        assert!(s.get(&a, "prefs").await.unwrap().is_none());
        assert!(s.put(&a, "", serde_json::json!(1)).await.is_err());
    }

    #[tokio::test]
    async fn put_if_is_compare_and_swap() {
        let s = InMemoryStore::new();
        let a = ns(&["n"]);
        assert_eq!(s.put_if(&a, "k", 1.into(), PutIf::Absent).await.unwrap(), 1);
        assert!(matches!(
            s.put_if(&a, "k", 2.into(), PutIf::Absent).await,
            Err(StoreError::Conflict { found: Some(1), .. })
        ));
        assert_eq!(
            s.put_if(&a, "k", 2.into(), PutIf::Version(1))
                .await
                .unwrap(),
            2
        );
        assert!(
            s.put_if(&a, "k", 3.into(), PutIf::Version(1))
                .await
                .is_err()
        );
        assert_eq!(s.get(&a, "k").await.unwrap().unwrap().value, 2);
    }
}
