//! [`CompositeBackend`]: path prefixes routed to other backends.

use std::sync::Arc;

use cairn_core::BoxFuture;

use super::search::PathGlob;
use super::{Backend, BackendRuntime, Executor, FileInfo, GrepQuery, GrepResult, SharedBackend};
use crate::error::BackendError;
use crate::path::{is_within, normalize, parent, relative_to};

/// Routes path prefixes to backends, the rest to a default.
///
/// - The longest matching prefix wins; the routed backend sees the path with the prefix
///   stripped (`/memories/a.md` → `/a.md`), and results and errors carry the full path again.
/// - `ls` of a directory shows the routes directly inside it that hold something as
///   directories (so `ls /` shows `/memories/` once a memory is saved; an empty route is not
///   listed, but can still be listed, read and written by its path).
/// - `glob` and `grep` over a directory that contains routes search the default and every
///   route below it.
/// - `execute` goes to the default backend.
/// - `delete` of a route's own prefix, or of a directory with routes below it, is refused.
///
/// ```
/// use cairn_deep::backend::{Backend, BackendRuntime, CompositeBackend, StateBackend, StoreBackend};
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let store = std::sync::Arc::new(cairn_core::InMemoryStore::new());
/// let backend = CompositeBackend::new(StateBackend::new())
///     .route("/memories/", StoreBackend::new().with_store(store));
/// let rt = BackendRuntime::new();
/// backend.write(&rt, "/memories/prefs.md", "brief").await.unwrap();
/// let root: Vec<String> = backend.ls(&rt, "/").await.unwrap().into_iter().map(|e| e.path).collect();
/// assert_eq!(root, ["/memories"]);
/// # });
/// ```
#[derive(Clone)]
pub struct CompositeBackend {
    default: SharedBackend,
    /// (normalized prefix without trailing `/`, backend), longest prefix first.
    routes: Vec<(String, SharedBackend)>,
}

impl std::fmt::Debug for CompositeBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompositeBackend")
            .field(
                "routes",
                &self.routes.iter().map(|(p, _)| p).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

struct Target<'a> {
    prefix: Option<&'a str>,
    backend: &'a SharedBackend,
    inner: String,
}

impl Target<'_> {
    fn full(&self, inner: &str) -> String {
        full_path(self.prefix, inner)
    }
}

fn full_path(prefix: Option<&str>, inner: &str) -> String {
    match prefix {
        None => inner.to_owned(),
        Some(p) if inner == "/" || inner.is_empty() => p.to_owned(),
        Some(p) => format!("{p}{inner}"),
    }
}

impl CompositeBackend {
    /// A composite whose unrouted paths go to `default`.
    pub fn new(default: impl Backend) -> Self {
        Self::new_shared(Arc::new(default))
    }

    /// As [`new`](Self::new), with a shared backend.
    pub fn new_shared(default: SharedBackend) -> Self {
        CompositeBackend {
            default,
            routes: Vec::new(),
        }
    }

    /// Routes `prefix` (e.g. `/memories/`; the trailing `/` is optional) to `backend`.
    pub fn route(self, prefix: &str, backend: impl Backend) -> Self {
        self.route_shared(prefix, Arc::new(backend))
    }

    /// As [`route`](Self::route), with a shared backend. A prefix that does not normalize
    /// (it climbs above `/`) or is `/` itself is ignored.
    pub fn route_shared(mut self, prefix: &str, backend: SharedBackend) -> Self {
        if let Ok(p) = normalize(prefix)
            && p != "/"
        {
            self.routes.retain(|(q, _)| *q != p);
            self.routes.push((p, backend));
            self.routes
                .sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.0.cmp(&b.0)));
        }
        self
    }

    /// The route prefixes, longest first.
    pub fn prefixes(&self) -> impl Iterator<Item = &str> {
        self.routes.iter().map(|(p, _)| p.as_str())
    }

    fn target(&self, path: &str) -> Result<Target<'_>, BackendError> {
        let norm = normalize(path)?;
        for (prefix, backend) in &self.routes {
            if is_within(&norm, prefix) {
                let rest = &norm[prefix.len()..];
                return Ok(Target {
                    prefix: Some(prefix),
                    backend,
                    inner: if rest.is_empty() {
                        "/".to_owned()
                    } else {
                        rest.to_owned()
                    },
                });
            }
        }
        Ok(Target {
            prefix: None,
            backend: &self.default,
            inner: norm,
        })
    }

    /// The prefix of the route that owns full path `path` (`None`: the default).
    fn owner(&self, path: &str) -> Option<&str> {
        self.routes
            .iter()
            .find(|(p, _)| is_within(path, p))
            .map(|(p, _)| p.as_str())
    }

    /// Routes strictly below directory `dir`.
    fn routes_below<'a>(
        &'a self,
        dir: &'a str,
    ) -> impl Iterator<Item = &'a (String, SharedBackend)> {
        self.routes
            .iter()
            .filter(move |(p, _)| p != dir && is_within(p, dir))
    }
}

impl Backend for CompositeBackend {
    fn ls<'a>(
        &'a self,
        rt: &'a BackendRuntime,
        path: &'a str,
    ) -> BoxFuture<'a, Result<Vec<FileInfo>, BackendError>> {
        Box::pin(async move {
            let t = self.target(path)?;
            let dir = t.full(&t.inner);
            let has_child_routes = self.routes.iter().any(|(p, _)| parent(p) == dir);
            let mut entries = match t.backend.ls(rt, &t.inner).await {
                Ok(v) => v,
                Err(BackendError::NotFound(_)) if has_child_routes => Vec::new(),
                Err(e) => return Err(e.map_path(|p| t.full(p))),
            };
            for e in &mut entries {
                e.path = t.full(&e.path);
            }
            // Entries the default has under a route are shadowed by the route.
            entries.retain(|e| self.owner(&e.path) == t.prefix);
            for (prefix, _) in &self.routes {
                if parent(prefix) == dir {
                    entries.retain(|e| e.path != *prefix);
                    // An empty route is not listed: a small model reported the internal
                    // `/large_tool_results/` as part of the project (issue #17).
                    if self.ls(rt, prefix).await.is_ok_and(|v| !v.is_empty()) {
                        entries.push(FileInfo::dir(prefix.clone()));
                    }
                }
            }
            entries.sort_by(|a, b| a.path.cmp(&b.path));
            Ok(entries)
        })
    }

    fn read_text<'a>(
        &'a self,
        rt: &'a BackendRuntime,
        path: &'a str,
    ) -> BoxFuture<'a, Result<String, BackendError>> {
        Box::pin(async move {
            let t = self.target(path)?;
            t.backend
                .read_text(rt, &t.inner)
                .await
                .map_err(|e| e.map_path(|p| t.full(p)))
        })
    }

    fn read<'a>(
        &'a self,
        rt: &'a BackendRuntime,
        path: &'a str,
        offset: usize,
        limit: usize,
    ) -> BoxFuture<'a, Result<String, BackendError>> {
        Box::pin(async move {
            // Rendered here, so notices name the full path.
            let norm = normalize(path)?;
            let text = self.read_text(rt, &norm).await?;
            crate::format::render_page(&norm, &text, offset, limit)
        })
    }

    fn write<'a>(
        &'a self,
        rt: &'a BackendRuntime,
        path: &'a str,
        content: &'a str,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        Box::pin(async move {
            let t = self.target(path)?;
            t.backend
                .write(rt, &t.inner, content)
                .await
                .map_err(|e| e.map_path(|p| t.full(p)))
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
            let t = self.target(path)?;
            t.backend
                .edit(rt, &t.inner, old, new, replace_all)
                .await
                .map_err(|e| e.map_path(|p| t.full(p)))
        })
    }

    fn glob<'a>(
        &'a self,
        rt: &'a BackendRuntime,
        pattern: &'a str,
        path: &'a str,
    ) -> BoxFuture<'a, Result<Vec<String>, BackendError>> {
        Box::pin(async move {
            let t = self.target(path)?;
            let base = t.full(&t.inner);
            let below: Vec<_> = self.routes_below(&base).collect();
            let mut out = match t.backend.glob(rt, pattern, &t.inner).await {
                Ok(v) => v.iter().map(|p| t.full(p)).collect(),
                Err(BackendError::NotFound(_)) if !below.is_empty() => Vec::new(),
                Err(e) => return Err(e.map_path(|p| t.full(p))),
            };
            out.retain(|p: &String| self.owner(p) == t.prefix);
            let glob = PathGlob::new(pattern)?;
            for (prefix, backend) in below {
                for inner in backend.glob(rt, "**", "/").await? {
                    let full = full_path(Some(prefix), &inner);
                    if self.owner(&full) == Some(prefix.as_str())
                        && glob.is_match(relative_to(&full, &base))
                    {
                        out.push(full);
                    }
                }
            }
            out.sort();
            out.dedup();
            Ok(out)
        })
    }

    fn grep<'a>(
        &'a self,
        rt: &'a BackendRuntime,
        query: &'a GrepQuery,
    ) -> BoxFuture<'a, Result<GrepResult, BackendError>> {
        Box::pin(async move {
            let t = self.target(query.path.as_deref().unwrap_or("/"))?;
            let base = t.full(&t.inner);
            let below: Vec<_> = self.routes_below(&base).collect();
            let q = GrepQuery {
                path: Some(t.inner.clone()),
                ..query.clone()
            };
            let mut result = match t.backend.grep(rt, &q).await {
                Ok(r) => r,
                Err(BackendError::NotFound(_)) if !below.is_empty() => GrepResult::default(),
                Err(e) => return Err(e.map_path(|p| t.full(p))),
            };
            for m in &mut result.matches {
                m.path = t.full(&m.path);
            }
            result.matches.retain(|m| self.owner(&m.path) == t.prefix);
            // A glob with `/` is relative to `base`, so for routes below it is applied here.
            let filter = query.glob.as_deref().map(PathGlob::new).transpose()?;
            let name_only = query
                .glob
                .as_deref()
                .is_some_and(|g| !g.trim_start_matches('/').contains('/'));
            for (prefix, backend) in below {
                let q = GrepQuery {
                    path: Some("/".to_owned()),
                    glob: if name_only { query.glob.clone() } else { None },
                    ..query.clone()
                };
                let r = backend.grep(rt, &q).await?;
                result.truncated |= r.truncated;
                for mut m in r.matches {
                    m.path = full_path(Some(prefix), &m.path);
                    if self.owner(&m.path) == Some(prefix.as_str())
                        && filter
                            .as_ref()
                            .is_none_or(|g| g.is_match(relative_to(&m.path, &base)))
                    {
                        result.matches.push(m);
                    }
                }
            }
            result.matches.sort_by(|a, b| a.path.cmp(&b.path));
            if result.matches.len() > query.max_matches {
                result.matches.truncate(query.max_matches);
                result.truncated = true;
            }
            Ok(result)
        })
    }

    fn delete<'a>(
        &'a self,
        rt: &'a BackendRuntime,
        path: &'a str,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        Box::pin(async move {
            let t = self.target(path)?;
            let full = t.full(&t.inner);
            if t.prefix.is_some() && t.inner == "/" {
                return Err(BackendError::invalid_path(
                    full,
                    "it is where separate storage is mounted, and cannot be deleted. Delete the files inside it",
                ));
            }
            let below = self
                .routes_below(&full)
                .next()
                .map(|(route, _)| route.clone());
            if let Some(route) = below {
                return Err(BackendError::invalid_path(
                    full,
                    format!(
                        "it contains {route}, where separate storage is mounted. Delete the files inside it one by one"
                    ),
                ));
            }
            t.backend
                .delete(rt, &t.inner)
                .await
                .map_err(|e| e.map_path(|p| t.full(p)))
        })
    }

    fn as_executor(&self) -> Option<&dyn Executor> {
        self.default.as_executor()
    }
}
