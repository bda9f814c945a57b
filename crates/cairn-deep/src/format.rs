//! The model-facing text of file operations, shared by every backend and tool: numbered and
//! paged lines, long-line splitting, exact-string replacement, and listing / glob / grep output.

use crate::backend::{FileInfo, GrepMatch, GrepResult};
use crate::error::BackendError;

/// Lines `read_file` returns when no `limit` is given.
pub const DEFAULT_READ_LIMIT: usize = 200;
/// Longer lines are split into continuation rows numbered `N.1`, `N.2`, …
pub const MAX_LINE_CHARS: usize = 2_000;
/// A page stops early when its rows pass this many characters.
pub const MAX_READ_CHARS: usize = 60_000;
/// Longest line text shown in grep content output.
pub const MAX_GREP_LINE_CHARS: usize = 500;
/// Most paths `ls` and `glob` print.
pub const MAX_LISTED_PATHS: usize = 500;

/// Renders lines `offset..offset+limit` (0-based) of `content` with right-aligned line
/// numbers, a tab, then the line. Lines over [`MAX_LINE_CHARS`] continue on rows `N.1`, `N.2`
/// (they do not count against `limit`). When lines remain, a last line says where to continue.
///
/// ```
/// use cairn_deep::format::render_page;
/// let text = render_page("/a.txt", "one\ntwo\nthree\n", 0, 2).unwrap();
/// assert_eq!(text, "1\tone\n2\ttwo\n[lines 1-2 of 3; continue with offset=2]");
/// ```
pub fn render_page(
    path: &str,
    content: &str,
    offset: usize,
    limit: usize,
) -> Result<String, BackendError> {
    if content.trim().is_empty() {
        return Ok(format!("[{path} exists but is empty]"));
    }
    let lines: Vec<&str> = content.lines().collect();
    let total = lines.len();
    if offset >= total {
        return Err(BackendError::OffsetPastEnd {
            path: path.to_owned(),
            offset,
            lines: total,
        });
    }
    let limit = limit.max(1);
    let mut rows: Vec<(String, &str)> = Vec::new();
    let mut chars = 0usize;
    let mut end = offset;
    for (i, line) in lines.iter().enumerate().skip(offset).take(limit) {
        if chars > MAX_READ_CHARS && end > offset {
            break;
        }
        let n = i + 1;
        for (k, chunk) in split_chars(line, MAX_LINE_CHARS).into_iter().enumerate() {
            let label = if k == 0 {
                n.to_string()
            } else {
                format!("{n}.{k}")
            };
            chars += chunk.len() + label.len() + 2;
            rows.push((label, chunk));
        }
        end = i + 1;
    }
    let width = rows.iter().map(|(l, _)| l.len()).max().unwrap_or(1);
    let mut out = String::with_capacity(chars);
    for (i, (label, text)) in rows.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&format!("{label:>width$}\t{text}"));
    }
    if end < total {
        out.push_str(&format!(
            "\n[lines {}-{end} of {total}; continue with offset={end}]",
            offset + 1
        ));
    }
    Ok(out)
}

/// Splits `s` into pieces of at most `max` characters (at least one piece).
pub fn split_chars(s: &str, max: usize) -> Vec<&str> {
    let max = max.max(1);
    let mut out = Vec::new();
    let mut start = 0;
    let mut count = 0;
    for (i, _) in s.char_indices() {
        if count == max {
            out.push(&s[start..i]);
            start = i;
            count = 0;
        }
        count += 1;
    }
    out.push(&s[start..]);
    out
}

/// Cuts `s` to at most `max` characters, marking a cut with `…`.
pub fn truncate_chars(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_owned(),
    }
}

/// Replaces `old` with `new` in `content`: exactly one occurrence unless `replace_all`.
/// Returns the new content and the number of occurrences replaced.
///
/// ```
/// use cairn_deep::format::replace;
/// assert_eq!(replace("/a", "a b a", "b", "c", false).unwrap(), ("a c a".to_string(), 1));
/// assert!(replace("/a", "a b a", "a", "c", false).is_err());
/// assert_eq!(replace("/a", "a b a", "a", "c", true).unwrap().1, 2);
/// ```
pub fn replace(
    path: &str,
    content: &str,
    old: &str,
    new: &str,
    replace_all: bool,
) -> Result<(String, usize), BackendError> {
    if old.is_empty() {
        return Err(BackendError::EmptyOldString);
    }
    let count = content.matches(old).count();
    match count {
        0 => Err(BackendError::NoMatch(path.to_owned())),
        1 => Ok((content.replacen(old, new, 1), 1)),
        n if replace_all => Ok((content.replace(old, new), n)),
        n => Err(BackendError::MultipleMatches {
            path: path.to_owned(),
            count: n,
        }),
    }
}

/// `ls` output: one path per line, directories ending in `/`.
pub fn render_ls(path: &str, entries: &[FileInfo]) -> String {
    if entries.is_empty() {
        return format!("{path} is empty.");
    }
    let mut lines: Vec<String> = entries
        .iter()
        .take(MAX_LISTED_PATHS)
        .map(|e| {
            if e.is_dir && e.path != "/" {
                format!("{}/", e.path)
            } else {
                e.path.clone()
            }
        })
        .collect();
    if entries.len() > MAX_LISTED_PATHS {
        lines.push(format!(
            "[{} more entries not shown; use glob with a narrower pattern]",
            entries.len() - MAX_LISTED_PATHS
        ));
    }
    lines.join("\n")
}

/// `glob` output: one path per line, or a no-match notice.
pub fn render_glob(pattern: &str, base: &str, paths: &[String]) -> String {
    if paths.is_empty() {
        return format!("No files match '{pattern}' under {base}.");
    }
    let mut lines: Vec<&str> = paths
        .iter()
        .take(MAX_LISTED_PATHS)
        .map(String::as_str)
        .collect();
    let note;
    if paths.len() > MAX_LISTED_PATHS {
        note = format!(
            "[{} more paths not shown; use a narrower pattern or path]",
            paths.len() - MAX_LISTED_PATHS
        );
        lines.push(&note);
    }
    lines.join("\n")
}

/// What `grep` prints.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum GrepOutput {
    /// Paths of matching files.
    #[default]
    Files,
    /// `path:line:text` rows.
    Content,
    /// `path:count` rows.
    Count,
}

/// Renders grep results in `mode`. `cap` is the limit the search ran with (for the note).
pub fn render_grep(result: &GrepResult, mode: GrepOutput, cap: usize) -> String {
    if result.matches.is_empty() {
        return "No matches found.".to_owned();
    }
    let mut out = match mode {
        GrepOutput::Files => {
            let mut files: Vec<&str> = Vec::new();
            for m in &result.matches {
                if files.last() != Some(&m.path.as_str()) && !files.contains(&m.path.as_str()) {
                    files.push(&m.path);
                }
            }
            files.join("\n")
        }
        GrepOutput::Content => result
            .matches
            .iter()
            .map(|m: &GrepMatch| {
                format!(
                    "{}:{}:{}",
                    m.path,
                    m.line,
                    truncate_chars(&m.text, MAX_GREP_LINE_CHARS)
                )
            })
            .collect::<Vec<_>>()
            .join("\n"),
        GrepOutput::Count => {
            let mut counts: Vec<(&str, usize)> = Vec::new();
            for m in &result.matches {
                match counts.iter_mut().find(|(p, _)| *p == m.path) {
                    Some((_, n)) => *n += 1,
                    None => counts.push((&m.path, 1)),
                }
            }
            counts
                .iter()
                .map(|(p, n)| format!("{p}:{n}"))
                .collect::<Vec<_>>()
                .join("\n")
        }
    };
    if result.truncated {
        let what = if mode == GrepOutput::Files {
            "files"
        } else {
            "matches"
        };
        out.push_str(&format!(
            "\n[stopped at {cap} {what}; narrow the search with path, glob or a more specific pattern]"
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_and_notices() {
        assert_eq!(
            render_page("/e", " \n", 0, 10).unwrap(),
            "[/e exists but is empty]"
        );
        let e = render_page("/a", "x\ny\n", 5, 10).unwrap_err();
        assert_eq!(
            e.to_model_message(),
            "Error: offset 5 is past the end of /a (2 lines). Use an offset below 2."
        );
        let content: String = (1..=12).map(|i| format!("l{i}\n")).collect();
        assert_eq!(
            render_page("/a", &content, 8, 100).unwrap(),
            " 9\tl9\n10\tl10\n11\tl11\n12\tl12"
        );
    }

    #[test]
    fn a_page_stops_at_the_character_budget() {
        let line = "y".repeat(1_000);
        let content: String = (0..100).map(|_| format!("{line}\n")).collect();
        let page = render_page("/big", &content, 0, 100).unwrap();
        assert!(page.len() < MAX_READ_CHARS + 2 * 1_010);
        assert!(
            page.ends_with("; continue with offset=60]"),
            "{}",
            &page[page.len() - 60..]
        );
    }

    #[test]
    fn splits_long_lines() {
        let long = "a".repeat(MAX_LINE_CHARS * 2 + 5);
        let text = render_page("/l", &format!("{long}\nshort"), 0, 1).unwrap();
        let labels: Vec<&str> = text
            .lines()
            .map(|l| l.split('\t').next().unwrap_or("").trim())
            .collect();
        assert_eq!(
            labels,
            [
                "1",
                "1.1",
                "1.2",
                "[lines 1-1 of 2; continue with offset=1]"
            ]
        );
        assert_eq!(split_chars("héllo", 2), ["hé", "ll", "o"]);
    }
}
