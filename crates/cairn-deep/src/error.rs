//! [`BackendError`]: what a backend operation can fail with.
//!
//! Its `Display` text is written for the model: it says what went wrong and what to do next.
//! Tools put it after `Error: ` (see [`BackendError::to_model_message`]).

use cairn_core::StoreError;

/// A failed backend operation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BackendError {
    /// The path is malformed or leaves the backend's root.
    #[error("invalid path '{path}': {reason}")]
    InvalidPath {
        /// The path as given.
        path: String,
        /// Why it was refused, with what to use instead.
        reason: String,
    },
    /// Nothing exists at the path.
    #[error("{0} not found. Use ls or glob to find the right path.")]
    NotFound(String),
    /// A file operation was given a directory.
    #[error("{0} is a directory. Use ls to see its files.")]
    IsDirectory(String),
    /// A directory operation was given a file.
    #[error("{0} is a file, not a directory. Use read_file to read it.")]
    NotADirectory(String),
    /// `write` refuses to replace an existing file.
    #[error("{0} already exists. Use edit_file to change it, or write to a new path.")]
    AlreadyExists(String),
    /// The file is not UTF-8 text.
    #[error("{0} is a binary file and cannot be shown as text.")]
    Binary(String),
    /// `read` was given an offset at or past the last line.
    #[error(
        "offset {offset} is past the end of {path} ({lines} lines). Use an offset below {lines}."
    )]
    OffsetPastEnd {
        /// The file.
        path: String,
        /// The offset asked for (0-based line).
        offset: usize,
        /// Number of lines in the file.
        lines: usize,
    },
    /// `edit` found no occurrence of the old string.
    #[error(
        "old_string was not found in {0}. Read the file and copy the exact text, including whitespace."
    )]
    NoMatch(String),
    /// `edit` found several occurrences without `replace_all`.
    #[error(
        "old_string occurs {count} times in {path}. Include more surrounding text to make it unique, or set replace_all to true."
    )]
    MultipleMatches {
        /// The file.
        path: String,
        /// How many occurrences.
        count: usize,
    },
    /// `edit` was given an empty old string.
    #[error("old_string is empty. Give the exact text to replace.")]
    EmptyOldString,
    /// A glob or regular expression did not compile.
    #[error("invalid pattern '{pattern}': {message}")]
    InvalidPattern {
        /// The pattern.
        pattern: String,
        /// The compiler's complaint, with a hint.
        message: String,
    },
    /// The file exceeds the backend's size limit.
    #[error(
        "{path} is {size} bytes, over the {max}-byte limit. Use grep to find the parts you need."
    )]
    TooLarge {
        /// The file.
        path: String,
        /// Its size.
        size: u64,
        /// The limit.
        max: u64,
    },
    /// The path is something other than a regular file or a directory (a FIFO, a socket, a
    /// device): file tools refuse it before opening it, since reading a FIFO can block forever.
    #[error(
        "{path} is a {kind}, not a regular file; only regular files can be read or changed. Use another path."
    )]
    NotRegularFile {
        /// The file.
        path: String,
        /// What it is instead ("FIFO (named pipe)", "socket", "device", …).
        kind: String,
    },
    /// A write or edit through a file with more than one hard link: another link may lie
    /// outside the workspace, and changing it would change that file too.
    #[error(
        "{path} has {links} hard links, and another one may be a file outside the workspace, so it cannot be changed here. Write the new content to a new file instead."
    )]
    HardLinked {
        /// The file.
        path: String,
        /// Its link count.
        links: u64,
    },
    /// The backend cannot do this (for example, run commands).
    #[error("{0}")]
    Unsupported(String),
    /// A command ran past its timeout and was killed.
    #[error(
        "the command timed out after {secs}s and was killed. Give a larger timeout or run something faster."
    )]
    Timeout {
        /// The timeout in seconds.
        secs: u64,
    },
    /// The command's sandbox could not be set up, so the command did not run (it never runs
    /// unconfined when a sandbox was asked for and the system supports one).
    #[error(
        "the command could not be sandboxed, so it did not run: {0}. Tell the user; this is not something a different command can fix."
    )]
    Sandbox(String),
    /// The store failed.
    #[error("storage failed: {0}")]
    Store(#[from] StoreError),
    /// The operating system failed.
    #[error("I/O failed: {0}")]
    Io(#[from] std::io::Error),
    /// Anything else.
    #[error("{0}")]
    Other(String),
}

impl BackendError {
    /// An [`InvalidPath`](Self::InvalidPath) error.
    pub fn invalid_path(path: impl Into<String>, reason: impl Into<String>) -> Self {
        BackendError::InvalidPath {
            path: path.into(),
            reason: reason.into(),
        }
    }

    /// The text a tool returns to the model: `Error: ` and the message.
    pub fn to_model_message(&self) -> String {
        format!("Error: {self}")
    }

    /// Rewrites every path in the error with `f` (a composite backend restores the full path).
    pub fn map_path(self, f: impl Fn(&str) -> String) -> Self {
        use BackendError as E;
        match self {
            E::InvalidPath { path, reason } => E::InvalidPath {
                path: f(&path),
                reason,
            },
            E::NotFound(p) => E::NotFound(f(&p)),
            E::IsDirectory(p) => E::IsDirectory(f(&p)),
            E::NotADirectory(p) => E::NotADirectory(f(&p)),
            E::AlreadyExists(p) => E::AlreadyExists(f(&p)),
            E::Binary(p) => E::Binary(f(&p)),
            E::OffsetPastEnd {
                path,
                offset,
                lines,
            } => E::OffsetPastEnd {
                path: f(&path),
                offset,
                lines,
            },
            E::NoMatch(p) => E::NoMatch(f(&p)),
            E::MultipleMatches { path, count } => E::MultipleMatches {
                path: f(&path),
                count,
            },
            E::TooLarge { path, size, max } => E::TooLarge {
                path: f(&path),
                size,
                max,
            },
            E::NotRegularFile { path, kind } => E::NotRegularFile {
                path: f(&path),
                kind,
            },
            E::HardLinked { path, links } => E::HardLinked {
                path: f(&path),
                links,
            },
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_messages_start_with_error_and_map_paths() {
        let e = BackendError::NotFound("/a.md".into());
        assert_eq!(
            e.to_model_message(),
            "Error: /a.md not found. Use ls or glob to find the right path."
        );
        let e = e.map_path(|p| format!("/mem{p}"));
        assert!(e.to_string().starts_with("/mem/a.md not found"));
    }
}
