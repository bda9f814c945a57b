//! A typed map that carries per-run values which are not JSON: the deep agent's typed runtime
//! context, a store handle, a backend, a stream writer.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::Arc;

/// A map from type to one shared value of that type.
///
/// Cloning is cheap (values are reference counted). Values set on a run flow to every model call's
/// [`ChatContext`](crate::ChatContext) and every tool call's
/// [`FunctionInvocationContext`](crate::FunctionInvocationContext), and into sub-agents run as
/// tools. They never reach a model request.
#[derive(Clone, Default)]
pub struct Extensions {
    map: HashMap<TypeId, Arc<dyn Any + Send + Sync>>,
}

impl Extensions {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// Stores `value`, replacing any value of the same type.
    pub fn insert<T: Send + Sync + 'static>(&mut self, value: T) {
        self.map.insert(TypeId::of::<T>(), Arc::new(value));
    }

    /// Stores an already shared value.
    pub fn insert_arc<T: Send + Sync + 'static>(&mut self, value: Arc<T>) {
        self.map.insert(TypeId::of::<T>(), value);
    }

    /// The value of type `T`, if any.
    pub fn get<T: Send + Sync + 'static>(&self) -> Option<&T> {
        self.map
            .get(&TypeId::of::<T>())
            .and_then(|v| v.downcast_ref::<T>())
    }

    /// A shared handle to the value of type `T`, if any.
    pub fn get_arc<T: Send + Sync + 'static>(&self) -> Option<Arc<T>> {
        self.map
            .get(&TypeId::of::<T>())
            .and_then(|v| Arc::clone(v).downcast::<T>().ok())
    }

    /// Removes the value of type `T`.
    pub fn remove<T: Send + Sync + 'static>(&mut self) -> bool {
        self.map.remove(&TypeId::of::<T>()).is_some()
    }

    /// Copies every entry of `other` into `self` (entries of `other` win).
    pub fn extend(&mut self, other: &Extensions) {
        for (k, v) in &other.map {
            self.map.insert(*k, Arc::clone(v));
        }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether the map is empty.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

impl std::fmt::Debug for Extensions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Extensions")
            .field("len", &self.map.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_get() {
        #[derive(Debug, PartialEq)]
        struct UserId(String);
        let mut e = Extensions::new();
        e.insert(UserId("u1".into()));
        e.insert(7u32);
        assert_eq!(e.get::<UserId>(), Some(&UserId("u1".into())));
        assert_eq!(e.get::<u32>(), Some(&7));
        assert!(e.get::<u64>().is_none());
        let c = e.clone();
        assert_eq!(c.get_arc::<UserId>().unwrap().0, "u1");
    }
}
