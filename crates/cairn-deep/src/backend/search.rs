//! Globbing and searching shared by the backends: `globset` for patterns, `grep-regex` +
//! `grep-searcher` for content.

use globset::{GlobBuilder, GlobMatcher};
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, sinks::Lossy};

use super::{GrepMatch, GrepQuery, GrepResult};
use crate::error::BackendError;

/// A glob with the tools' rules: no `/` in the pattern → it matches file names at any depth;
/// otherwise it matches the path relative to the search directory (a leading `/` is ignored).
/// `*` never crosses `/`; `**` does; `{a,b}` alternates.
#[derive(Debug, Clone)]
pub struct PathGlob {
    matcher: GlobMatcher,
    name_only: bool,
}

impl PathGlob {
    /// Compiles `pattern`.
    pub fn new(pattern: &str) -> Result<Self, BackendError> {
        let p = pattern.trim().trim_start_matches('/');
        let p = if p.is_empty() { "**" } else { p };
        let glob = GlobBuilder::new(p)
            .literal_separator(true)
            .backslash_escape(true)
            .build()
            .map_err(|e| BackendError::InvalidPattern {
                pattern: pattern.to_owned(),
                message: format!("{}. Fix the glob (e.g. **/*.rs)", e.kind()),
            })?;
        Ok(PathGlob {
            matcher: glob.compile_matcher(),
            name_only: !p.contains('/'),
        })
    }

    /// Whether `rel` (a path relative to the search directory, no leading `/`) matches.
    pub fn is_match(&self, rel: &str) -> bool {
        if self.name_only {
            let name = rel.rsplit('/').next().unwrap_or(rel);
            self.matcher.is_match(name)
        } else {
            self.matcher.is_match(rel)
        }
    }
}

/// A compiled grep: matcher, searcher, caps.
pub struct Grep {
    matcher: RegexMatcher,
    searcher: Searcher,
    max_matches: usize,
    max_per_file: Option<u64>,
    /// What was found so far.
    pub result: GrepResult,
}

impl Grep {
    /// Compiles `query.pattern` (as exact text when `query.literal`).
    pub fn new(query: &GrepQuery) -> Result<Self, BackendError> {
        let matcher = RegexMatcherBuilder::new()
            .line_terminator(Some(b'\n'))
            .fixed_strings(query.literal)
            .build(&query.pattern)
            .map_err(|e| BackendError::InvalidPattern {
                pattern: query.pattern.clone(),
                message: format!(
                    "{}. Escape regex metacharacters such as ( [ . * with \\ to match them literally",
                    first_line(&e.to_string())
                ),
            })?;
        let searcher = SearcherBuilder::new()
            .line_number(true)
            .binary_detection(BinaryDetection::quit(0))
            .build();
        Ok(Grep {
            matcher,
            searcher,
            max_matches: query.max_matches.max(1),
            max_per_file: query.max_per_file,
            result: GrepResult::default(),
        })
    }

    /// Whether the total cap was reached.
    pub fn is_full(&self) -> bool {
        self.result.truncated
    }

    /// Searches in-memory `content` of file `path`. Binary content (a NUL byte) is skipped.
    pub fn search_slice(&mut self, path: &str, content: &[u8]) -> Result<(), BackendError> {
        let mut sink = self.sink(path);
        let mut found = Vec::new();
        let (matcher, searcher, budget) = (&self.matcher, &mut self.searcher, sink.budget);
        searcher
            .search_slice(
                matcher,
                content,
                Lossy(|line, text| {
                    found.push((line, text.trim_end_matches(['\n', '\r']).to_owned()));
                    Ok((found.len() as u64) < budget)
                }),
            )
            .map_err(BackendError::Io)?;
        sink.found = found;
        self.absorb(sink);
        Ok(())
    }

    /// Searches the file at host path `file`, reported as virtual path `path`.
    pub fn search_file(&mut self, path: &str, file: &std::path::Path) -> Result<(), BackendError> {
        let mut sink = self.sink(path);
        let mut found = Vec::new();
        let (matcher, searcher, budget) = (&self.matcher, &mut self.searcher, sink.budget);
        searcher
            .search_path(
                matcher,
                file,
                Lossy(|line, text| {
                    found.push((line, text.trim_end_matches(['\n', '\r']).to_owned()));
                    Ok((found.len() as u64) < budget)
                }),
            )
            .map_err(BackendError::Io)?;
        sink.found = found;
        self.absorb(sink);
        Ok(())
    }

    fn sink(&self, path: &str) -> Pending {
        let left = (self.max_matches - self.result.matches.len().min(self.max_matches)) as u64;
        // One more than the cap, to learn whether there was more.
        let budget = match self.max_per_file {
            Some(n) => n.min(left + 1),
            None => left + 1,
        }
        .max(1);
        Pending {
            path: path.to_owned(),
            budget,
            found: Vec::new(),
        }
    }

    fn absorb(&mut self, pending: Pending) {
        for (line, text) in pending.found {
            if self.result.matches.len() >= self.max_matches {
                self.result.truncated = true;
                break;
            }
            self.result.matches.push(GrepMatch {
                path: pending.path.clone(),
                line,
                text,
            });
        }
    }

    /// The result.
    pub fn finish(self) -> GrepResult {
        self.result
    }
}

struct Pending {
    path: String,
    budget: u64,
    found: Vec<(u64, String)>,
}

fn first_line(s: &str) -> String {
    // regex-syntax errors span several lines (pattern, caret, message); keep the message.
    let lines: Vec<&str> = s.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    lines
        .iter()
        .rev()
        .find(|l| l.starts_with("error:"))
        .map(|l| l.to_string())
        .unwrap_or_else(|| lines.last().map(|l| l.to_string()).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_follow_the_rules() {
        let g = PathGlob::new("*.rs").unwrap();
        assert!(g.is_match("a.rs") && g.is_match("src/deep/a.rs"));
        let g = PathGlob::new("src/*.rs").unwrap();
        assert!(g.is_match("src/a.rs") && !g.is_match("src/x/a.rs"));
        let g = PathGlob::new("/**/*.{md,txt}").unwrap();
        assert!(g.is_match("a/b/c.md") && g.is_match("c.txt"));
        assert!(PathGlob::new("a[").is_err());
    }

    #[test]
    fn greps_with_caps() {
        let mut q = GrepQuery::new("b.");
        q.max_matches = 2;
        let mut g = Grep::new(&q).unwrap();
        g.search_slice("/a", b"ba\nbb\nbc\n").unwrap();
        let r = g.finish();
        assert_eq!(r.matches.len(), 2);
        assert!(r.truncated);
        let mut g = Grep::new(&GrepQuery::new("x")).unwrap();
        g.search_slice("/bin", b"x\0x\n").unwrap();
        assert!(g.finish().matches.is_empty());
        let e = Grep::new(&GrepQuery::new("f(")).err().unwrap();
        assert!(e.to_string().contains("Escape regex metacharacters"), "{e}");
        // Literal: metacharacters are plain text.
        let mut q = GrepQuery::new("f(x.y");
        q.literal = true;
        let mut g = Grep::new(&q).unwrap();
        g.search_slice("/a", b"call f(x.y)\nf(xzy\n").unwrap();
        let r = g.finish();
        assert_eq!(r.matches.len(), 1);
        assert_eq!(r.matches[0].line, 1);
    }
}
