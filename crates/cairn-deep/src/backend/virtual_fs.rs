//! Listing, globbing and grepping over an in-memory set of files (path → content), shared by
//! [`StateBackend`](super::StateBackend) and [`StoreBackend`](super::StoreBackend).

use super::search::{Grep, PathGlob};
use super::{FileInfo, GrepQuery, GrepResult};
use crate::error::BackendError;
use crate::path::{is_within, join, normalize, relative_to};

/// The entries directly inside `dir`, given every file as (path, size).
pub fn ls<'a>(
    files: impl IntoIterator<Item = (&'a str, u64)>,
    dir: &str,
) -> Result<Vec<FileInfo>, BackendError> {
    let dir = normalize(dir)?;
    let mut out: Vec<FileInfo> = Vec::new();
    for (path, size) in files {
        if path == dir {
            return Err(BackendError::NotADirectory(dir));
        }
        if !is_within(path, &dir) {
            continue;
        }
        let rel = relative_to(path, &dir);
        match rel.split_once('/') {
            Some((first, _)) => {
                let d = join(&dir, first);
                if !out.iter().any(|e| e.is_dir && e.path == d) {
                    out.push(FileInfo::dir(d));
                }
            }
            None => out.push(FileInfo::file(path, size)),
        }
    }
    if out.is_empty() && dir != "/" {
        return Err(BackendError::NotFound(dir));
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

/// Paths under `base` matching `pattern`, sorted.
pub fn glob<'a>(
    paths: impl IntoIterator<Item = &'a str>,
    pattern: &str,
    base: &str,
) -> Result<Vec<String>, BackendError> {
    let base = normalize(base)?;
    let glob = PathGlob::new(pattern)?;
    let paths: Vec<&str> = paths.into_iter().collect();
    check_dir(&paths, &base)?;
    let mut out: Vec<String> = paths
        .into_iter()
        .filter(|p| *p != base && is_within(p, &base) && glob.is_match(relative_to(p, &base)))
        .map(str::to_owned)
        .collect();
    out.sort();
    Ok(out)
}

/// A search directory must exist (unless it is `/`) and not be a file.
fn check_dir(paths: &[&str], base: &str) -> Result<(), BackendError> {
    if paths.contains(&base) {
        return Err(BackendError::NotADirectory(base.to_owned()));
    }
    if base != "/" && !paths.iter().any(|p| is_within(p, base)) {
        return Err(BackendError::NotFound(base.to_owned()));
    }
    Ok(())
}

/// Lines matching `query` in `files` (path, content).
pub fn grep<'a>(
    files: impl IntoIterator<Item = (&'a str, &'a str)>,
    query: &GrepQuery,
) -> Result<GrepResult, BackendError> {
    let base = normalize(query.path.as_deref().unwrap_or("/"))?;
    let filter = query.glob.as_deref().map(PathGlob::new).transpose()?;
    let mut grep = Grep::new(query)?;
    let mut files: Vec<(&str, &str)> = files
        .into_iter()
        .filter(|(p, _)| is_within(p, &base))
        .collect();
    if files.is_empty() && base != "/" {
        return Err(BackendError::NotFound(base));
    }
    files.sort_by(|a, b| a.0.cmp(b.0));
    for (path, content) in files {
        if grep.is_full() {
            break;
        }
        let rel = if path == base {
            path.rsplit('/').next().unwrap_or(path)
        } else {
            relative_to(path, &base)
        };
        if filter.as_ref().is_some_and(|g| !g.is_match(rel)) {
            continue;
        }
        grep.search_slice(path, content.as_bytes())?;
    }
    Ok(grep.finish())
}

/// Checks that `path` can be created as a file among `existing` files: not present, not a
/// directory, no parent that is a file.
pub fn check_create<'a>(
    existing: impl IntoIterator<Item = &'a str>,
    path: &str,
) -> Result<(), BackendError> {
    if path == "/" {
        return Err(BackendError::IsDirectory("/".into()));
    }
    for p in existing {
        if p == path {
            return Err(BackendError::AlreadyExists(path.to_owned()));
        }
        if is_within(p, path) {
            return Err(BackendError::IsDirectory(path.to_owned()));
        }
        if is_within(path, p) {
            return Err(BackendError::NotADirectory(p.to_owned()));
        }
    }
    Ok(())
}

/// The files a delete of `path` removes among `existing` files: the file itself, or every file
/// below directory `path`. `/` is refused ([`root_delete_refused`]); nothing there is
/// [`BackendError::NotFound`].
pub fn to_delete<'a>(
    existing: impl IntoIterator<Item = &'a str>,
    path: &str,
) -> Result<Vec<String>, BackendError> {
    if path == "/" {
        return Err(root_delete_refused());
    }
    let doomed: Vec<String> = existing
        .into_iter()
        .filter(|p| is_within(p, path))
        .map(str::to_owned)
        .collect();
    if doomed.is_empty() {
        return Err(BackendError::NotFound(path.to_owned()));
    }
    Ok(doomed)
}

/// The error for deleting `/`.
pub fn root_delete_refused() -> BackendError {
    BackendError::invalid_path(
        "/",
        "the root directory cannot be deleted. Delete a file or directory inside it",
    )
}

/// Whether some file lies below `dir` (so `dir` is a directory).
pub fn is_dir<'a>(existing: impl IntoIterator<Item = &'a str>, dir: &str) -> bool {
    existing.into_iter().any(|p| p != dir && is_within(p, dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_directories_and_files() {
        let files = [("/a.md", 3u64), ("/d/x.md", 1), ("/d/e/y.md", 2)];
        let root = ls(files, "/").unwrap();
        assert_eq!(root, vec![FileInfo::file("/a.md", 3), FileInfo::dir("/d")]);
        let d = ls(files, "/d").unwrap();
        assert_eq!(d, vec![FileInfo::dir("/d/e"), FileInfo::file("/d/x.md", 1)]);
        assert!(matches!(
            ls(files, "/a.md"),
            Err(BackendError::NotADirectory(_))
        ));
        assert!(matches!(ls(files, "/nope"), Err(BackendError::NotFound(_))));
        assert!(ls([], "/").unwrap().is_empty());
    }

    #[test]
    fn create_checks() {
        let files = ["/a.md", "/d/x.md"];
        assert!(matches!(
            check_create(files, "/a.md"),
            Err(BackendError::AlreadyExists(_))
        ));
        assert!(matches!(
            check_create(files, "/d"),
            Err(BackendError::IsDirectory(_))
        ));
        assert!(matches!(
            check_create(files, "/a.md/z"),
            Err(BackendError::NotADirectory(_))
        ));
        assert!(check_create(files, "/d/y.md").is_ok());
    }

    #[test]
    fn delete_checks() {
        let files = ["/a.md", "/d/x.md", "/d/e/y.md", "/dd.md"];
        assert_eq!(to_delete(files, "/a.md").unwrap(), ["/a.md"]);
        assert_eq!(to_delete(files, "/d").unwrap(), ["/d/x.md", "/d/e/y.md"]);
        assert!(matches!(
            to_delete(files, "/nope"),
            Err(BackendError::NotFound(_))
        ));
        assert!(matches!(
            to_delete(files, "/"),
            Err(BackendError::InvalidPath { .. })
        ));
    }
}
