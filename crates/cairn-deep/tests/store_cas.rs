//! `StoreBackend` edits are compare-and-swap: a writer that changed the file between the
//! edit's read and its put (another process on a shared store) does not lose its update.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use cairn_core::{
    BoxFuture, InMemoryStore, Item, PutIf, SearchQuery, SharedStore, Store, StoreError,
};
use cairn_deep::backend::{Backend, BackendRuntime, StoreBackend};
use serde_json::{Value, json};

/// A store on which "another process" rewrites `/notes.md` right before the first
/// conditional put of it lands.
struct Racy {
    inner: InMemoryStore,
    raced: AtomicBool,
}

impl Store for Racy {
    fn get<'a>(
        &'a self,
        ns: &'a [String],
        key: &'a str,
    ) -> BoxFuture<'a, Result<Option<Item>, StoreError>> {
        self.inner.get(ns, key)
    }
    fn put_if<'a>(
        &'a self,
        ns: &'a [String],
        key: &'a str,
        value: Value,
        condition: PutIf,
    ) -> BoxFuture<'a, Result<u64, StoreError>> {
        Box::pin(async move {
            if key == "/notes.md"
                && matches!(condition, PutIf::Version(_))
                && !self.raced.swap(true, Ordering::SeqCst)
            {
                let mut other = self.inner.get(ns, key).await?.unwrap().value;
                let text = other["content"].as_str().unwrap().replace("beta", "BETA");
                other["content"] = json!(text);
                self.inner.put(ns, key, other).await?;
            }
            self.inner.put_if(ns, key, value, condition).await
        })
    }
    fn delete<'a>(
        &'a self,
        ns: &'a [String],
        key: &'a str,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.inner.delete(ns, key)
    }
    fn search<'a>(
        &'a self,
        ns: &'a [String],
        q: SearchQuery,
    ) -> BoxFuture<'a, Result<Vec<Item>, StoreError>> {
        self.inner.search(ns, q)
    }
}

#[tokio::test]
async fn an_edit_racing_another_writer_keeps_both_changes() {
    let store: SharedStore = Arc::new(Racy {
        inner: InMemoryStore::new(),
        raced: AtomicBool::new(false),
    });
    let backend = StoreBackend::new().with_store(Arc::clone(&store));
    let rt = BackendRuntime::default();
    backend
        .write(&rt, "/notes.md", "alpha\nbeta\n")
        .await
        .unwrap();
    let n = backend
        .edit(&rt, "/notes.md", "alpha", "ALPHA", false)
        .await
        .unwrap();
    assert_eq!(n, 1);
    assert_eq!(
        backend.read_text(&rt, "/notes.md").await.unwrap(),
        "ALPHA\nBETA\n",
        "the other writer's change survived and the edit was applied on top"
    );
    // Creating a file that exists is refused, not overwritten.
    assert!(backend.write(&rt, "/notes.md", "x").await.is_err());
}
