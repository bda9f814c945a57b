//! Memory: AGENTS.md-style files loaded into the system prompt (SPEC R5.3).
//!
//! Every configured file is read once per thread (the first run of a session; the contents are
//! cached in the session's state under [`MEMORY_STATE_KEY`]) and rendered in full into the
//! system prompt — no progressive disclosure. A path starting with `~` is a file on the host
//! (`~` is the home directory); any other path is read through the agent's backend, where the
//! agent can also update it with `edit_file`. A missing file is skipped, and so is a file the
//! backend refuses to reach (e.g. an `AGENTS.md` symlink that leads outside a filesystem
//! backend's root: the agent could not read or edit it either), with a `tracing` warning; any
//! other failure is an error naming the file.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::backend::{Backend, BackendRuntime};
use crate::error::BackendError;
use crate::prompt::MEMORY_GUIDANCE;

/// Session-state key of the cached memory contents.
pub const MEMORY_STATE_KEY: &str = "cairn.memory";

/// One loaded memory file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryFile {
    /// The path as configured.
    pub path: String,
    /// Its contents, HTML comments removed and trailing whitespace trimmed.
    pub content: String,
}

/// A memory file could not be read.
#[derive(Debug, thiserror::Error)]
#[error("could not load memory file {path}: {message}")]
pub struct MemoryError {
    /// The file.
    pub path: String,
    /// What went wrong.
    pub message: String,
}

fn expand_home(path: &str, home: Option<&Path>) -> Option<PathBuf> {
    let rest = path.strip_prefix('~')?;
    let home = match home {
        Some(h) => h.to_path_buf(),
        None => PathBuf::from(std::env::var_os("HOME")?),
    };
    Some(home.join(rest.trim_start_matches('/')))
}

/// Reads the memory files; missing ones, and ones the backend refuses to reach
/// ([`BackendError::InvalidPath`]: outside its root), are skipped. `~` expands to `home`, or to
/// `$HOME` when `home` is `None`.
pub async fn load_memory(
    backend: &dyn Backend,
    rt: &BackendRuntime,
    sources: &[String],
    home: Option<&Path>,
) -> Result<Vec<MemoryFile>, MemoryError> {
    let mut out = Vec::new();
    for path in sources {
        let text = if path.starts_with('~') {
            let Some(host) = expand_home(path, home) else {
                return Err(MemoryError {
                    path: path.clone(),
                    message: "HOME is not set, so `~` cannot be expanded".into(),
                });
            };
            match tokio::fs::read_to_string(&host).await {
                Ok(t) => t,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => {
                    return Err(MemoryError {
                        path: path.clone(),
                        message: e.to_string(),
                    });
                }
            }
        } else {
            match backend.read_text(rt, path).await {
                Ok(t) => t,
                Err(BackendError::NotFound(_)) => continue,
                Err(e @ BackendError::InvalidPath { .. }) => {
                    tracing::warn!(path = %path, error = %e, "memory file skipped");
                    continue;
                }
                Err(e) => {
                    return Err(MemoryError {
                        path: path.clone(),
                        message: e.to_string(),
                    });
                }
            }
        };
        out.push(MemoryFile {
            path: path.clone(),
            content: strip_html_comments(&text).trim_end().to_owned(),
        });
    }
    Ok(out)
}

fn strip_html_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("<!--") {
        out.push_str(&rest[..start]);
        match rest[start..].find("-->") {
            Some(end) => rest = &rest[start + end + 3..],
            None => {
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

/// The memory section of the system prompt.
pub fn render_memory(sources: &[String], files: &[MemoryFile]) -> String {
    let mut s = String::from("## Memory\n<agent_memory>\n");
    if files.is_empty() {
        s.push_str("(No memory saved yet.)\n");
    }
    for f in files {
        s.push_str(&format!("From {}:\n{}\n\n", f.path, f.content));
    }
    if s.ends_with("\n\n") {
        s.pop();
    }
    s.push_str("</agent_memory>\n");
    s.push_str(MEMORY_GUIDANCE);
    let editable: Vec<String> = sources
        .iter()
        .filter(|p| !p.starts_with('~'))
        .map(|p| format!("`{p}`"))
        .collect();
    if !editable.is_empty() {
        s.push_str(&format!(" Memory files: {}.", editable.join(", ")));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_comments_and_renders() {
        assert_eq!(strip_html_comments("a<!-- x -->b<!-- y"), "ab");
        let files = vec![MemoryFile {
            path: "/AGENTS.md".into(),
            content: "Use tabs.".into(),
        }];
        let r = render_memory(&["/AGENTS.md".into(), "~/.cairn/AGENTS.md".into()], &files);
        assert!(r.starts_with(
            "## Memory\n<agent_memory>\nFrom /AGENTS.md:\nUse tabs.\n</agent_memory>\n"
        ));
        assert!(r.ends_with("Memory files: `/AGENTS.md`."));
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn a_memory_symlink_out_of_the_root_is_skipped() {
        use crate::backend::FilesystemBackend;
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret.md"), "outside").unwrap();
        std::os::unix::fs::symlink(
            outside.path().join("secret.md"),
            root.path().join("AGENTS.md"),
        )
        .unwrap();
        std::fs::write(root.path().join("NOTES.md"), "inside").unwrap();
        let backend = FilesystemBackend::new(root.path()).unwrap();
        let rt = BackendRuntime::default();
        let files = load_memory(
            &backend,
            &rt,
            &["/AGENTS.md".into(), "/NOTES.md".into()],
            None,
        )
        .await
        .unwrap();
        assert_eq!(files.len(), 1);
        assert_eq!(files[0].content, "inside");
    }
}
