//! The model-facing text of file operations, shared by every backend and tool: numbered and
//! paged lines, long-line splitting, exact-string replacement, and listing / glob / grep output.

use crate::backend::{FileInfo, GrepMatch, GrepResult};
use crate::error::BackendError;

/// Lines `read_file` returns when no `limit` is given (Deep Agents' default too); a page is
/// also capped at about [`MAX_READ_CHARS`], so a file of very long lines cannot flood the
/// context.
pub const DEFAULT_READ_LIMIT: usize = 100;
/// Longer lines are split into continuation rows numbered `N.1`, `N.2`, …
pub const MAX_LINE_CHARS: usize = 2_000;
/// A page stops early when its rows pass this many characters.
pub const MAX_READ_CHARS: usize = 60_000;
/// Longest line text shown in grep content output.
pub const MAX_GREP_LINE_CHARS: usize = 500;
/// Most paths `ls` and `glob` print.
pub const MAX_LISTED_PATHS: usize = 500;

/// A page of [`render_page`] without its line numbers: each numbered row's text (a long line's
/// continuation rows become lines of their own), the bracketed notes unchanged.
///
/// ```
/// use cairn_deep::format::{render_page, without_line_numbers};
/// let page = render_page("/a.txt", "one\n\tx = 2\nthree\n", 0, 2).unwrap();
/// assert_eq!(without_line_numbers(&page), "one\n\tx = 2\n[lines 1-2 of 3; continue with offset=2]");
/// ```
pub fn without_line_numbers(page: &str) -> String {
    page.lines()
        .map(|row| match row.split_once('\t') {
            Some((label, text))
                if !label.trim().is_empty()
                    && label
                        .trim_start()
                        .chars()
                        .all(|c| c.is_ascii_digit() || c == '.') =>
            {
                text
            }
            _ => row,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `text` without the line numbers of a [`render_page`] page that a model copied into it, or
/// `None` when it does not look copied from one.
///
/// It looks copied when its first line and at least two lines in all carry a `N<tab>` label
/// (spaces before it allowed), and the labelled lines count up by one from the first; unlabelled
/// lines (a line the model added after the copied ones) are kept as they are. Only the label is
/// removed, so `1\talpha\n2\tbeta\ngamma` becomes `alpha\nbeta\ngamma`.
///
/// A text can have such labels of its own (a tab-separated table with a numbered first column):
/// callers compare with the file's old text first (see the overwriting `write_file`).
///
/// ```
/// use cairn_deep::format::strip_copied_line_numbers;
/// assert_eq!(strip_copied_line_numbers("1\talpha\n2\tbeta\n3\tgamma\n").as_deref(), Some("alpha\nbeta\ngamma\n"));
/// assert_eq!(strip_copied_line_numbers("alpha\n2\tbeta\n"), None);
/// ```
pub fn strip_copied_line_numbers(text: &str) -> Option<String> {
    fn label(line: &str) -> Option<(u64, &str)> {
        let (head, rest) = line.split_once('\t')?;
        let n = head.trim_start_matches(' ');
        if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        Some((n.parse().ok()?, rest))
    }
    let mut out = String::with_capacity(text.len());
    let mut next: Option<u64> = None;
    let mut labelled = 0usize;
    for (i, line) in text.split_inclusive('\n').enumerate() {
        let body = line.strip_suffix('\n').unwrap_or(line);
        match label(body) {
            Some((n, rest)) if next.is_none_or(|want| want == n) => {
                next = Some(n + 1);
                labelled += 1;
                out.push_str(rest);
                if line.ends_with('\n') {
                    out.push('\n');
                }
            }
            // A numbered line out of sequence: numbers of the text's own, not a copied page.
            Some(_) => return None,
            None if i == 0 => return None,
            None => out.push_str(line),
        }
    }
    (labelled >= 2).then_some(out)
}

/// Renders lines `offset..offset+limit` (0-based) of `content` with right-aligned line
/// numbers, a tab, then the line. Lines over [`MAX_LINE_CHARS`] continue on rows `N.1`, `N.2`
/// (they do not count against `limit`). When lines remain, a last line says where to continue.
///
/// A page holds about [`MAX_READ_CHARS`] bytes of rows: it stops before a line once the budget
/// is spent, or before a long line that would overrun it (that line then starts the next page).
/// A line too long for a page of its own (a minified file) is cut at the budget, with a row
/// saying how long it is, how much was shown, and how to go on: `read_file` cannot page
/// inside one line.
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
    // (line number, characters shown, characters in the line) of a line cut at the budget.
    let mut cut: Option<(usize, usize, usize)> = None;
    'lines: for (i, line) in lines.iter().enumerate().skip(offset).take(limit) {
        if end > offset
            && (chars > MAX_READ_CHARS || chars + line.len() > MAX_READ_CHARS + MAX_LINE_CHARS)
        {
            break;
        }
        let n = i + 1;
        let mut shown = 0usize;
        for (k, chunk) in chunks(line, MAX_LINE_CHARS).enumerate() {
            if k > 0 && chars >= MAX_READ_CHARS {
                cut = Some((n, shown, line.chars().count()));
                end = i + 1;
                break 'lines;
            }
            let label = if k == 0 {
                n.to_string()
            } else {
                format!("{n}.{k}")
            };
            chars += chunk.len() + label.len() + 2;
            shown += chunk.chars().count();
            rows.push((label, chunk));
        }
        end = i + 1;
    }
    let width = rows.iter().map(|(l, _)| l.len()).max().unwrap_or(1);
    let mut out = String::with_capacity(chars + 200);
    for (i, (label, text)) in rows.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&format!("{label:>width$}\t{text}"));
    }
    if let Some((n, shown, len)) = cut {
        out.push_str(&format!(
            "\n[line {n} is cut: it has {len} characters and only the first {shown} are shown. read_file cannot page inside a line; find text in it with grep{}]",
            if end < total {
                format!(", and continue with offset={end} for the lines after it")
            } else {
                String::new()
            }
        ));
    }
    if end < total {
        out.push_str(&format!(
            "\n[lines {}-{end} of {total}; continue with offset={end}]",
            offset + 1
        ));
    }
    Ok(out)
}

/// Pieces of `s` of at most `max` characters (at least one piece), lazily.
fn chunks(s: &str, max: usize) -> impl Iterator<Item = &str> {
    let max = max.max(1);
    let mut rest = Some(s);
    std::iter::from_fn(move || {
        let r = rest?;
        match r.char_indices().nth(max) {
            Some((i, _)) => {
                rest = Some(&r[i..]);
                Some(&r[..i])
            }
            None => {
                rest = None;
                Some(r)
            }
        }
    })
}

/// Splits `s` into pieces of at most `max` characters (at least one piece).
pub fn split_chars(s: &str, max: usize) -> Vec<&str> {
    chunks(s, max).collect()
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
    /// Paths of matching files (`"files_with_matches"`, as Deep Agents and ripgrep name it;
    /// `"files"` is accepted too).
    #[default]
    #[serde(alias = "files")]
    FilesWithMatches,
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
        GrepOutput::FilesWithMatches => {
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
        let what = if mode == GrepOutput::FilesWithMatches {
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
    fn copied_line_numbers_are_recognized_only_as_a_page_would_show_them() {
        // Padded labels, as a page with ten or more lines shows them.
        assert_eq!(
            strip_copied_line_numbers(" 9\tl9\n10\tl10\n").as_deref(),
            Some("l9\nl10\n")
        );
        // An added line without a label is kept.
        assert_eq!(
            strip_copied_line_numbers("1\talpha\n2\tbeta\ngamma").as_deref(),
            Some("alpha\nbeta\ngamma")
        );
        // One labelled line is not enough; numbers out of sequence are the text's own.
        assert_eq!(strip_copied_line_numbers("1\talpha\n"), None);
        assert_eq!(strip_copied_line_numbers("1\ta\n3\tb\n"), None);
        assert_eq!(strip_copied_line_numbers("x\ty\n1\ta\n2\tb\n"), None);
        assert_eq!(strip_copied_line_numbers(""), None);
    }

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
        assert_eq!(split_chars("", 2), [""]);
        assert_eq!(split_chars("abcd", 2), ["ab", "cd"]);
    }

    #[test]
    fn a_line_too_long_for_a_page_is_cut_and_says_so() {
        let huge = "z".repeat(5 * MAX_READ_CHARS);
        let page = render_page("/min.js", &format!("{huge}\nnext\n"), 0, 10).unwrap();
        assert!(
            page.len() < MAX_READ_CHARS + 2 * MAX_LINE_CHARS,
            "{}",
            page.len()
        );
        let last: Vec<&str> = page.lines().rev().take(2).collect();
        assert_eq!(last[0], "[lines 1-1 of 2; continue with offset=1]");
        assert!(
            last[1]
                .starts_with("[line 1 is cut: it has 300000 characters and only the first 60000"),
            "{}",
            last[1]
        );
        // A long line after others starts the next page instead of being cut.
        let page = render_page("/m", &format!("a\n{huge}\n"), 0, 10).unwrap();
        assert_eq!(page, "1\ta\n[lines 1-1 of 2; continue with offset=1]");
    }
}
