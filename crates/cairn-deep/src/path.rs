//! Virtual paths: absolute, POSIX-style (`/notes/a.md`), the same for every backend.

use crate::error::BackendError;

/// Normalizes a virtual path: a leading `/` is added, `.` and empty segments are dropped, `..`
/// removes the previous segment. An empty path is `/`.
///
/// Refused: `..` that would climb above `/`, paths starting with `~`, Windows paths (`C:\…`,
/// backslashes) and NUL bytes.
///
/// ```
/// use cairn_deep::path::normalize;
/// assert_eq!(normalize("notes//a/./b.md").unwrap(), "/notes/a/b.md");
/// assert_eq!(normalize("/a/../b").unwrap(), "/b");
/// assert!(normalize("/../etc/passwd").is_err());
/// assert!(normalize("~/secret").is_err());
/// ```
pub fn normalize(path: &str) -> Result<String, BackendError> {
    let p = path.trim();
    if p.contains('\0') {
        return Err(BackendError::invalid_path(path, "it contains a NUL byte"));
    }
    if p.starts_with('~') {
        return Err(BackendError::invalid_path(
            path,
            "home-directory paths are not supported. Use an absolute path under /",
        ));
    }
    let b = p.as_bytes();
    if p.contains('\\') || (b.len() >= 2 && b[0].is_ascii_alphabetic() && b[1] == b':') {
        return Err(BackendError::invalid_path(
            path,
            "Windows paths are not supported. Use a POSIX path such as /dir/file.txt",
        ));
    }
    let mut parts: Vec<&str> = Vec::new();
    for seg in p.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                if parts.pop().is_none() {
                    return Err(BackendError::invalid_path(
                        path,
                        "it climbs above the root. Use a path under /",
                    ));
                }
            }
            s => parts.push(s),
        }
    }
    Ok(format!("/{}", parts.join("/")))
}

/// The parent directory of a normalized path (`/` for `/` itself).
pub fn parent(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &path[..i],
    }
}

/// Whether normalized `path` is `dir` or lies below it.
pub fn is_within(path: &str, dir: &str) -> bool {
    dir == "/"
        || path == dir
        || (path.starts_with(dir) && path.as_bytes().get(dir.len()) == Some(&b'/'))
}

/// `path` relative to `dir` (no leading `/`); `path` must be within `dir`.
pub fn relative_to<'a>(path: &'a str, dir: &str) -> &'a str {
    if dir == "/" {
        path.trim_start_matches('/')
    } else {
        path.get(dir.len()..).unwrap_or("").trim_start_matches('/')
    }
}

/// Joins a normalized directory and a relative path.
pub fn join(dir: &str, rel: &str) -> String {
    let rel = rel.trim_start_matches('/');
    if rel.is_empty() {
        dir.to_owned()
    } else if dir == "/" {
        format!("/{rel}")
    } else {
        format!("{dir}/{rel}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes_and_refuses() {
        assert_eq!(normalize("").unwrap(), "/");
        assert_eq!(normalize("/").unwrap(), "/");
        assert_eq!(normalize("a/b/").unwrap(), "/a/b");
        assert_eq!(normalize("foo..bar.txt").unwrap(), "/foo..bar.txt");
        assert!(normalize("..").is_err());
        assert!(normalize("/a/../../b").is_err());
        assert!(normalize("C:\\x.txt").is_err());
        assert!(normalize("a\0b").is_err());
        assert_eq!(parent("/a/b"), "/a");
        assert_eq!(parent("/a"), "/");
        assert!(is_within("/mem/a", "/mem"));
        assert!(!is_within("/memo", "/mem"));
        assert_eq!(relative_to("/mem/a/b", "/mem"), "a/b");
        assert_eq!(join("/", "a"), "/a");
        assert_eq!(join("/x", "a"), "/x/a");
    }
}
