//! Files the request names, read for the model before its first turn
//! ([`HarnessProfile::read_mentioned_files`](crate::HarnessProfile::read_mentioned_files)).
//!
//! "utils.py is wrong: …" — a small model asked this often edits a guessed text without reading
//! the file, or answers in prose. When the profile asks for it, the run's input gets, after the
//! user's message, a `read_file` call of each small existing file the message names, with its
//! result: the same messages the model would have produced by reading the files itself, so the
//! thread's history tells what happened (the messages carry [`MENTIONS_SOURCE`]) and the model's
//! first turn starts from the files' text.

use cairn_core::{Content, FunctionCall, FunctionResult, Message, Role};

use crate::backend::{Backend, BackendRuntime};

/// [`Message::source`] of the messages this adds.
pub const MENTIONS_SOURCE: &str = "mentioned_files";

/// Most files read for one message.
pub const MAX_MENTIONED_FILES: usize = 3;

/// Largest file read, in bytes; larger ones are left to the model.
pub const MAX_MENTIONED_BYTES: usize = 3_000;

/// The file paths a request names, in order, without repeats: words with a file extension or a
/// `/` (`utils.py`, `app/core.py`, `/config.json`), stripped of quotes and trailing punctuation,
/// as absolute paths of the file tools. URLs and options are not paths.
pub fn mentioned_paths(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for word in text.split(|c: char| c.is_whitespace() || "`'\"(),;<>[]{}".contains(c)) {
        let word = word.trim_end_matches(['.', ':', '!', '?']);
        if word.is_empty() || word.starts_with('-') || word.contains("://") {
            continue;
        }
        if !word
            .chars()
            .all(|c| c.is_alphanumeric() || "._-/".contains(c))
        {
            continue;
        }
        let name = word.rsplit('/').next().unwrap_or(word);
        let has_extension = name
            .rsplit_once('.')
            .is_some_and(|(stem, ext)| !stem.is_empty() && !ext.is_empty());
        if !has_extension && !word.contains('/') {
            continue;
        }
        if word.split('/').any(|part| part == "..") {
            continue;
        }
        let path = if word.starts_with('/') {
            word.to_owned()
        } else {
            format!("/{}", word.trim_start_matches("./"))
        };
        if !out.contains(&path) {
            out.push(path);
        }
    }
    out
}

/// The messages to add after the user's `request`: one assistant turn calling `read_file` for
/// each named file that exists and is small, and one result per call, as `read_file` shows it
/// (without line numbers when `plain`). Empty when no named path is such a file.
pub async fn read_mentioned(
    backend: &dyn Backend,
    rt: &BackendRuntime,
    request: &str,
    plain: bool,
) -> Vec<Message> {
    let mut calls = Vec::new();
    let mut results = Vec::new();
    for path in mentioned_paths(request) {
        if calls.len() == MAX_MENTIONED_FILES {
            break;
        }
        // The whole file must be small, not only its first page.
        match backend.read_text(rt, &path).await {
            Ok(whole) if whole.len() <= MAX_MENTIONED_BYTES => {}
            _ => continue,
        }
        let Ok(text) = backend
            .read(rt, &path, 0, crate::format::DEFAULT_READ_LIMIT)
            .await
        else {
            continue;
        };
        let text = if plain {
            crate::format::without_line_numbers(&text)
        } else {
            text
        };
        let call_id = format!("mentioned-{}", calls.len() + 1);
        calls.push(Content::FunctionCall(FunctionCall::new(
            call_id.clone(),
            "read_file",
            &serde_json::json!({ "file_path": path }),
        )));
        results.push(
            Message::new(
                Role::Tool,
                vec![Content::FunctionResult(FunctionResult {
                    call_id,
                    output: vec![Content::text(text)],
                    is_error: false,
                })],
            )
            .with_source(MENTIONS_SOURCE),
        );
    }
    if calls.is_empty() {
        return Vec::new();
    }
    let mut out = vec![Message::new(Role::Assistant, calls).with_source(MENTIONS_SOURCE)];
    out.extend(results);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_words_with_an_extension_or_a_slash() {
        assert_eq!(
            mentioned_paths("utils.py is wrong: sub(5, 3) returns 8. Fix it."),
            ["/utils.py"]
        );
        assert_eq!(
            mentioned_paths(
                "python3 test_shapes.py fails. Fix shapes.py (not the test), see `app/core.py`."
            ),
            ["/test_shapes.py", "/shapes.py", "/app/core.py"]
        );
        assert_eq!(
            mentioned_paths("Add a \"license\" field to package.json, then ./notes.txt and src/"),
            ["/package.json", "/notes.txt", "/src/"]
        );
        // Not paths: URLs, options, a number, parent escapes, plain words.
        assert!(
            mentioned_paths("see https://example.com/a.html --flag=x.y .5 ../secret.txt ok")
                .is_empty()
        );
        assert_eq!(mentioned_paths("a.py a.py /a.py"), ["/a.py"]);
    }
}
