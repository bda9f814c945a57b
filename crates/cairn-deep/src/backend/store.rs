//! [`StoreBackend`]: files as items of a [`Store`](cairn_core::Store) namespace.

use std::sync::Arc;

use cairn_core::{BoxFuture, PutIf, SearchQuery, SharedStore, StoreError};

/// How many times an edit is applied again when another writer changed the file meanwhile.
const EDIT_ATTEMPTS: usize = 8;

use super::state::{FileData, now_ms};
use super::{Backend, BackendRuntime, FileInfo, GrepQuery, GrepResult, KeyedLocks, virtual_fs};
use crate::error::BackendError;
use crate::path::normalize;

type NamespaceFn = dyn Fn(&BackendRuntime) -> Vec<String> + Send + Sync;

/// Files kept in a [`Store`](cairn_core::Store), so they outlive the thread: each file is the
/// item `namespace`/`path` with a [`FileData`] JSON value.
///
/// The store is the one given to [`with_store`](Self::with_store), else the run's
/// [`SharedStore`] from the extensions. The namespace defaults to `["filesystem"]`; make it per
/// user with [`namespace_fn`](Self::namespace_fn). Items in deeper namespaces are not files of
/// this one.
///
/// `edit` reads the item and puts it back with [`PutIf::Version`] (compare-and-swap): when
/// another writer changed the file in between (another process on a shared SQLite or
/// PostgreSQL store), the edit is applied again to the new content, so no update is lost and
/// an edit whose text is gone fails instead of overwriting. `write` creates with
/// [`PutIf::Absent`]. Clones of one backend also take a lock per (namespace, path), so edits
/// within one process do not even retry.
///
/// ```
/// use std::sync::Arc;
/// use cairn_core::InMemoryStore;
/// use cairn_deep::backend::{Backend, BackendRuntime, StoreBackend};
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let store = Arc::new(InMemoryStore::new());
/// let backend = StoreBackend::new().with_store(store.clone()).namespace(["memories"]);
/// let rt = BackendRuntime::new();
/// backend.write(&rt, "/prefs.md", "brief answers").await.unwrap();
/// let item = cairn_core::Store::get(&*store, &["memories".to_string()], "/prefs.md").await.unwrap();
/// assert_eq!(item.unwrap().value["content"], "brief answers");
/// # });
/// ```
#[derive(Clone)]
pub struct StoreBackend {
    store: Option<SharedStore>,
    namespace: Arc<NamespaceFn>,
    /// Per-(namespace, path) locks for read-modify-write, shared by clones.
    locks: KeyedLocks<(Vec<String>, String)>,
}

impl std::fmt::Debug for StoreBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreBackend")
            .field("store", &self.store.is_some())
            .finish_non_exhaustive()
    }
}

impl Default for StoreBackend {
    fn default() -> Self {
        Self::new()
    }
}

impl StoreBackend {
    /// A backend over the run's store, namespace `["filesystem"]`.
    pub fn new() -> Self {
        StoreBackend {
            store: None,
            namespace: Arc::new(|_| vec!["filesystem".to_owned()]),
            locks: KeyedLocks::default(),
        }
    }

    /// Uses `store` instead of the run's.
    pub fn with_store(mut self, store: SharedStore) -> Self {
        self.store = Some(store);
        self
    }

    /// A fixed namespace.
    pub fn namespace<S: Into<String>>(mut self, ns: impl IntoIterator<Item = S>) -> Self {
        let ns: Vec<String> = ns.into_iter().map(Into::into).collect();
        self.namespace = Arc::new(move |_| ns.clone());
        self
    }

    /// A namespace computed per call (for example from a user id in the extensions).
    pub fn namespace_fn(
        mut self,
        f: impl Fn(&BackendRuntime) -> Vec<String> + Send + Sync + 'static,
    ) -> Self {
        self.namespace = Arc::new(f);
        self
    }

    fn store(&self, rt: &BackendRuntime) -> Result<SharedStore, BackendError> {
        self.store.clone().or_else(|| rt.store()).ok_or_else(|| {
            BackendError::Unsupported(
                "this path is backed by a store, but no store is configured. Use another path."
                    .into(),
            )
        })
    }

    async fn all(
        &self,
        store: &SharedStore,
        ns: &[String],
    ) -> Result<Vec<(String, FileData)>, BackendError> {
        let items = store.search(ns, SearchQuery::default()).await?;
        Ok(items
            .into_iter()
            .filter(|i| i.namespace == ns)
            .filter_map(|i| {
                let data: FileData = serde_json::from_value(i.value).ok()?;
                Some((i.key, data))
            })
            .collect())
    }

    async fn get(
        &self,
        store: &SharedStore,
        ns: &[String],
        path: &str,
    ) -> Result<FileData, BackendError> {
        if let Some(item) = store.get(ns, path).await?
            && let Ok(data) = serde_json::from_value::<FileData>(item.value)
        {
            return Ok(data);
        }
        let all = self.all(store, ns).await?;
        if virtual_fs::is_dir(all.iter().map(|(p, _)| p.as_str()), path) {
            Err(BackendError::IsDirectory(path.to_owned()))
        } else {
            Err(BackendError::NotFound(path.to_owned()))
        }
    }

    async fn put_if(
        &self,
        store: &SharedStore,
        ns: &[String],
        path: &str,
        data: &FileData,
        condition: PutIf,
    ) -> Result<(), BackendError> {
        let v = serde_json::to_value(data).map_err(|e| BackendError::Other(e.to_string()))?;
        store.put_if(ns, path, v, condition).await?;
        Ok(())
    }
}

impl Backend for StoreBackend {
    fn ls<'a>(
        &'a self,
        rt: &'a BackendRuntime,
        path: &'a str,
    ) -> BoxFuture<'a, Result<Vec<FileInfo>, BackendError>> {
        Box::pin(async move {
            let store = self.store(rt)?;
            let ns = (self.namespace)(rt);
            let all = self.all(&store, &ns).await?;
            virtual_fs::ls(
                all.iter()
                    .map(|(p, f)| (p.as_str(), f.content.len() as u64)),
                path,
            )
        })
    }

    fn read_text<'a>(
        &'a self,
        rt: &'a BackendRuntime,
        path: &'a str,
    ) -> BoxFuture<'a, Result<String, BackendError>> {
        Box::pin(async move {
            let path = normalize(path)?;
            let store = self.store(rt)?;
            let ns = (self.namespace)(rt);
            Ok(self.get(&store, &ns, &path).await?.content)
        })
    }

    fn write<'a>(
        &'a self,
        rt: &'a BackendRuntime,
        path: &'a str,
        content: &'a str,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        Box::pin(async move {
            let path = normalize(path)?;
            let store = self.store(rt)?;
            let ns = (self.namespace)(rt);
            let _guard = self.locks.lock((ns.clone(), path.clone())).await;
            let all = self.all(&store, &ns).await?;
            virtual_fs::check_create(all.iter().map(|(p, _)| p.as_str()), &path)?;
            self.put_if(&store, &ns, &path, &FileData::new(content), PutIf::Absent)
                .await
                .map_err(|e| match e {
                    BackendError::Store(StoreError::Conflict { .. }) => {
                        BackendError::AlreadyExists(path.clone())
                    }
                    e => e,
                })
        })
    }

    fn edit<'a>(
        &'a self,
        rt: &'a BackendRuntime,
        path: &'a str,
        old: &'a str,
        new: &'a str,
        replace_all: bool,
    ) -> BoxFuture<'a, Result<usize, BackendError>> {
        Box::pin(async move {
            let path = normalize(path)?;
            let store = self.store(rt)?;
            let ns = (self.namespace)(rt);
            let _guard = self.locks.lock((ns.clone(), path.clone())).await;
            for _ in 0..EDIT_ATTEMPTS {
                let version = store.get(&ns, &path).await?.map(|i| i.version);
                let mut data = self.get(&store, &ns, &path).await?;
                let (updated, n) =
                    crate::format::replace(&path, &data.content, old, new, replace_all)?;
                data.content = updated;
                data.modified_at_ms = now_ms();
                let condition = version.map_or(PutIf::Absent, PutIf::Version);
                match self.put_if(&store, &ns, &path, &data, condition).await {
                    Ok(()) => return Ok(n),
                    Err(BackendError::Store(StoreError::Conflict { .. })) => continue,
                    Err(e) => return Err(e),
                }
            }
            Err(BackendError::Other(format!(
                "{path} kept changing under the edit ({EDIT_ATTEMPTS} attempts); read it again and retry"
            )))
        })
    }

    fn delete<'a>(
        &'a self,
        rt: &'a BackendRuntime,
        path: &'a str,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        Box::pin(async move {
            let path = normalize(path)?;
            let store = self.store(rt)?;
            let ns = (self.namespace)(rt);
            let _guard = self.locks.lock((ns.clone(), path.clone())).await;
            let all = self.all(&store, &ns).await?;
            // A directory is its files, deleted one item at a time (a store has no
            // transaction across items).
            for p in virtual_fs::to_delete(all.iter().map(|(p, _)| p.as_str()), &path)? {
                store.delete(&ns, &p).await?;
            }
            Ok(())
        })
    }

    fn glob<'a>(
        &'a self,
        rt: &'a BackendRuntime,
        pattern: &'a str,
        path: &'a str,
    ) -> BoxFuture<'a, Result<Vec<String>, BackendError>> {
        Box::pin(async move {
            let store = self.store(rt)?;
            let ns = (self.namespace)(rt);
            let all = self.all(&store, &ns).await?;
            virtual_fs::glob(all.iter().map(|(p, _)| p.as_str()), pattern, path)
        })
    }

    fn grep<'a>(
        &'a self,
        rt: &'a BackendRuntime,
        query: &'a GrepQuery,
    ) -> BoxFuture<'a, Result<GrepResult, BackendError>> {
        Box::pin(async move {
            let store = self.store(rt)?;
            let ns = (self.namespace)(rt);
            let all = self.all(&store, &ns).await?;
            virtual_fs::grep(
                all.iter().map(|(p, f)| (p.as_str(), f.content.as_str())),
                query,
            )
        })
    }
}
