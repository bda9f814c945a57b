//! The exact text the file tools return, the same on every backend.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use cairn_core::InMemoryStore;
use cairn_deep::backend::{FilesystemBackend, SharedBackend, StateBackend, StoreBackend};
use common::Tools;
use serde_json::json;

fn numbered(n: usize) -> String {
    (1..=n).map(|i| format!("line {i}\n")).collect()
}

/// One scenario, asserted identically for each backend.
async fn contract(backend: SharedBackend) {
    let t = Tools::new(backend);

    // write / read / paging
    assert_eq!(
        t.ok(
            "write_file",
            json!({"path": "notes/a.md", "content": "alpha\nbeta\ngamma\n"})
        )
        .await,
        "Created /notes/a.md"
    );
    assert_eq!(
        t.ok("read_file", json!({"path": "/notes/a.md"})).await,
        "1\talpha\n2\tbeta\n3\tgamma"
    );
    assert_eq!(
        t.ok(
            "read_file",
            json!({"path": "/notes/a.md", "offset": 1, "limit": 1})
        )
        .await,
        "2\tbeta\n[lines 2-2 of 3; continue with offset=2]"
    );
    assert_eq!(
        t.err("read_file", json!({"path": "/notes/a.md", "offset": 3}))
            .await,
        "Error: offset 3 is past the end of /notes/a.md (3 lines). Use an offset below 3."
    );
    t.ok(
        "write_file",
        json!({"path": "/long.txt", "content": numbered(250)}),
    )
    .await;
    // The default page is 100 lines, as Deep Agents'; `file_path` is the argument's name.
    let page = t.ok("read_file", json!({"file_path": "/long.txt"})).await;
    let lines: Vec<&str> = page.lines().collect();
    assert_eq!(lines.len(), 101);
    assert_eq!(lines[0], "  1\tline 1");
    assert_eq!(lines[99], "100\tline 100");
    assert_eq!(lines[100], "[lines 1-100 of 250; continue with offset=100]");
    assert_eq!(
        t.ok("read_file", json!({"path": "/long.txt", "offset": 248}))
            .await,
        "249\tline 249\n250\tline 250"
    );

    // empty file, missing file, existing file
    t.ok("write_file", json!({"path": "/empty.txt", "content": ""}))
        .await;
    assert_eq!(
        t.ok("read_file", json!({"path": "/empty.txt"})).await,
        "[/empty.txt exists but is empty]"
    );
    assert_eq!(
        t.err("read_file", json!({"path": "/nope.md"})).await,
        "Error: /nope.md not found. Use ls or glob to find the right path. / holds: /empty.txt, /long.txt, /notes/"
    );
    assert_eq!(
        t.err("write_file", json!({"path": "/notes/a.md", "content": "x"}))
            .await,
        "Error: /notes/a.md already exists. Use edit_file to change it, or write to a new path."
    );
    assert_eq!(
        t.err("read_file", json!({"path": "/notes"})).await,
        "Error: /notes is a directory. Use ls to see its files."
    );

    // edit
    t.ok(
        "write_file",
        json!({"path": "/e.txt", "content": "foo bar foo\nbaz\n"}),
    )
    .await;
    assert_eq!(
        t.err(
            "edit_file",
            json!({"path": "/e.txt", "old_string": "nope", "new_string": "x"})
        )
        .await,
        "Error: old_string was not found in /e.txt. Read the file and copy the exact text, including whitespace."
    );
    assert_eq!(
        t.err(
            "edit_file",
            json!({"path": "/e.txt", "old_string": "foo", "new_string": "qux"})
        )
        .await,
        "Error: old_string occurs 2 times in /e.txt. Include more surrounding text to make it unique, or set replace_all to true."
    );
    assert_eq!(
        t.ok(
            "edit_file",
            json!({"path": "/e.txt", "old_string": "baz", "new_string": "BAZ"})
        )
        .await,
        "Replaced 1 occurrence in /e.txt"
    );
    assert_eq!(
        t.ok(
            "edit_file",
            json!({"path": "/e.txt", "old_string": "foo", "new_string": "qux", "replace_all": true})
        )
        .await,
        "Replaced 2 occurrences in /e.txt"
    );
    assert_eq!(
        t.ok("read_file", json!({"path": "/e.txt"})).await,
        "1\tqux bar qux\n2\tBAZ"
    );
    assert_eq!(
        t.err(
            "edit_file",
            json!({"path": "/missing.txt", "old_string": "a", "new_string": "b"})
        )
        .await,
        "Error: /missing.txt not found. Use ls or glob to find the right path. / holds: /e.txt, /empty.txt, /long.txt, /notes/"
    );

    // ls
    assert_eq!(
        t.ok("ls", json!({})).await,
        "/e.txt\n/empty.txt\n/long.txt\n/notes/"
    );
    assert_eq!(t.ok("ls", json!({"path": "/notes"})).await, "/notes/a.md");
    assert_eq!(
        t.err("ls", json!({"path": "/e.txt"})).await,
        "Error: /e.txt is a file, not a directory. Use read_file to read it."
    );

    // glob
    assert_eq!(
        t.ok("glob", json!({"pattern": "*.md"})).await,
        "/notes/a.md"
    );
    assert_eq!(
        t.ok("glob", json!({"pattern": "*.txt"})).await,
        "/e.txt\n/empty.txt\n/long.txt"
    );
    assert_eq!(
        t.ok("glob", json!({"pattern": "notes/*.md"})).await,
        "/notes/a.md"
    );
    assert_eq!(
        t.ok("glob", json!({"pattern": "*.md", "path": "/notes"}))
            .await,
        "/notes/a.md"
    );
    assert_eq!(
        t.ok("glob", json!({"pattern": "*.rs"})).await,
        "No files match '*.rs' under /."
    );

    assert!(
        t.err("glob", json!({"pattern": "*", "path": "/nope"}))
            .await
            .starts_with("Error: /nope not found. Use ls or glob to find the right path."),
        "what a missing path says, then a hint of what exists"
    );
    assert_eq!(
        t.err("glob", json!({"pattern": "*", "path": "/e.txt"}))
            .await,
        "Error: /e.txt is a file, not a directory. Use read_file to read it."
    );

    // grep modes
    assert!(
        t.err("grep", json!({"pattern": "x", "path": "/nope"}))
            .await
            .starts_with("Error: /nope not found. Use ls or glob to find the right path."),
        "what a missing path says, then a hint of what exists"
    );
    assert_eq!(
        t.ok("grep", json!({"pattern": "bar|beta", "regex": true}))
            .await,
        "/e.txt\n/notes/a.md"
    );
    assert_eq!(
        t.ok(
            "grep",
            json!({"pattern": "^(alpha|gamma)$", "regex": true, "output_mode": "content"})
        )
        .await,
        "/notes/a.md:1:alpha\n/notes/a.md:3:gamma"
    );
    assert_eq!(
        t.ok("grep", json!({"pattern": "qux", "output_mode": "count"}))
            .await,
        "/e.txt:1"
    );
    assert_eq!(
        t.ok(
            "grep",
            json!({"pattern": "line", "output_mode": "count", "glob": "*.txt"})
        )
        .await,
        "/long.txt:250"
    );
    assert_eq!(
        t.ok(
            "grep",
            json!({"pattern": "(?i)BETA", "regex": true, "path": "/notes/a.md", "output_mode": "content"})
        )
        .await,
        "/notes/a.md:2:beta"
    );
    assert_eq!(
        t.ok("grep", json!({"pattern": "zzz"})).await,
        "No matches found."
    );
    let capped = t
        .ok("grep", json!({"pattern": "line", "output_mode": "content"}))
        .await;
    let rows: Vec<&str> = capped.lines().collect();
    assert_eq!(rows.len(), 201);
    assert_eq!(rows[199], "/long.txt:200:line 200");
    assert_eq!(
        rows[200],
        "[stopped at 200 matches; narrow the search with path, glob or a more specific pattern]"
    );
    let bad = t.err("grep", json!({"pattern": "f(", "regex": true})).await;
    assert!(bad.starts_with("Error: invalid pattern 'f(': "), "{bad}");
    assert!(
        bad.ends_with(
            "Escape regex metacharacters such as ( [ . * with \\ to match them literally"
        ),
        "{bad}"
    );

    // paths
    assert_eq!(
        t.err("read_file", json!({"path": "/../etc/passwd"})).await,
        "Error: invalid path '/../etc/passwd': it climbs above the root. Use a path under /"
    );
    assert_eq!(
        t.err("ls", json!({"path": "~/x"})).await,
        "Error: invalid path '~/x': home-directory paths are not supported. Use an absolute path under /"
    );

    file_path_literal_grep_and_delete(&t).await;
}

/// #15 item 2: `file_path` (with `path` as its alias), literal grep by default with `regex`
/// for regular expressions, Deep Agents' `output_mode` names, and `delete`.
async fn file_path_literal_grep_and_delete(t: &Tools) {
    // file_path everywhere; path still works (above), both at once is refused.
    assert_eq!(
        t.ok(
            "write_file",
            json!({"file_path": "/lit/src.py", "content": "x = f(a.b)\ny = f(aXb)\nprint(x|y)\n"})
        )
        .await,
        "Created /lit/src.py"
    );
    assert_eq!(
        t.ok(
            "edit_file",
            json!({"file_path": "/lit/src.py", "old_string": "print", "new_string": "show"})
        )
        .await,
        "Replaced 1 occurrence in /lit/src.py"
    );
    assert_eq!(
        t.ok("read_file", json!({"file_path": "/lit/src.py", "limit": 1}))
            .await,
        "1\tx = f(a.b)\n[lines 1-1 of 3; continue with offset=1]"
    );
    let both = t
        .err(
            "read_file",
            json!({"file_path": "/lit/src.py", "path": "/lit/src.py"}),
        )
        .await;
    assert!(both.contains("duplicate field"), "{both}");

    // Literal by default: metacharacters are text, no escaping needed.
    assert_eq!(
        t.ok(
            "grep",
            json!({"pattern": "f(a.b)", "path": "/lit", "output_mode": "content"})
        )
        .await,
        "/lit/src.py:1:x = f(a.b)"
    );
    assert_eq!(
        t.ok(
            "grep",
            json!({"pattern": "x|y", "path": "/lit", "output_mode": "content"})
        )
        .await,
        "/lit/src.py:3:show(x|y)"
    );
    // regex: true is a regular expression ("." matches the X too).
    assert_eq!(
        t.ok(
            "grep",
            json!({"pattern": "f\\(a.b\\)", "regex": true, "path": "/lit", "output_mode": "count"})
        )
        .await,
        "/lit/src.py:2"
    );
    // A literal search that finds nothing but looks like a regex says how to use one.
    assert_eq!(
        t.ok("grep", json!({"pattern": "f\\(a.*\\)", "path": "/lit"}))
            .await,
        "No matches found. The pattern was searched as exact text; set regex true to use it as a regular expression."
    );
    // Deep Agents' mode name, and the old one as an alias.
    for mode in ["files_with_matches", "files"] {
        assert_eq!(
            t.ok(
                "grep",
                json!({"pattern": "f(", "path": "/lit", "output_mode": mode})
            )
            .await,
            "/lit/src.py"
        );
    }

    // delete: a file, then a directory with everything in it; missing paths and / refused.
    t.ok(
        "write_file",
        json!({"file_path": "/lit/deep/more.txt", "content": "m\n"}),
    )
    .await;
    t.ok(
        "write_file",
        json!({"file_path": "/lit/keep.txt", "content": "k\n"}),
    )
    .await;
    assert_eq!(
        t.ok("delete", json!({"file_path": "/lit/keep.txt"})).await,
        "Deleted /lit/keep.txt"
    );
    assert!(
        t.err("read_file", json!({"file_path": "/lit/keep.txt"}))
            .await
            .starts_with("Error: /lit/keep.txt not found. Use ls or glob to find the right path."),
        "what a missing path says, then a hint of what exists"
    );
    assert!(
        t.err("delete", json!({"file_path": "/lit/keep.txt"}))
            .await
            .starts_with("Error: /lit/keep.txt not found. Use ls or glob to find the right path."),
        "what a missing path says, then a hint of what exists"
    );
    assert_eq!(
        t.ok("delete", json!({"path": "/lit"})).await,
        "Deleted /lit"
    );
    assert!(
        t.err("ls", json!({"path": "/lit"}))
            .await
            .starts_with("Error: /lit not found. Use ls or glob to find the right path."),
        "what a missing path says, then a hint of what exists"
    );
    assert_eq!(
        t.err("delete", json!({"file_path": "/"})).await,
        "Error: invalid path '/': the root directory cannot be deleted. Delete a file or directory inside it"
    );
    assert_eq!(
        t.err("delete", json!({"file_path": "/../x"})).await,
        "Error: invalid path '/../x': it climbs above the root. Use a path under /"
    );
    // Other files are untouched.
    assert_eq!(
        t.ok("ls", json!({})).await,
        "/e.txt\n/empty.txt\n/long.txt\n/notes/"
    );
}

#[tokio::test]
async fn state_backend_contract() {
    contract(Arc::new(StateBackend::new())).await;
}

#[tokio::test]
async fn store_backend_contract() {
    let store = Arc::new(InMemoryStore::new());
    contract(Arc::new(StoreBackend::new().with_store(store))).await;
}

#[tokio::test]
async fn filesystem_backend_contract() {
    let dir = tempfile::tempdir().unwrap();
    contract(Arc::new(FilesystemBackend::new(dir.path()).unwrap())).await;
}

#[tokio::test]
async fn long_lines_are_split_and_binary_files_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("bin.dat"), b"ab\0cd").unwrap();
    std::fs::write(
        dir.path().join("long.txt"),
        format!("{}\nend\n", "x".repeat(4_500)),
    )
    .unwrap();
    let t = Tools::new(Arc::new(FilesystemBackend::new(dir.path()).unwrap()));
    assert_eq!(
        t.err("read_file", json!({"path": "/bin.dat"})).await,
        "Error: /bin.dat is a binary file and cannot be shown as text."
    );
    // grep skips binary files
    assert_eq!(
        t.ok("grep", json!({"pattern": "ab"})).await,
        "No matches found."
    );
    let page = t.ok("read_file", json!({"path": "/long.txt"})).await;
    let rows: Vec<(&str, usize)> = page
        .lines()
        .map(|l| {
            let (label, text) = l.split_once('\t').unwrap();
            (label.trim(), text.len())
        })
        .collect();
    assert_eq!(rows, [("1", 2000), ("1.1", 2000), ("1.2", 500), ("2", 3)]);
}

#[tokio::test]
async fn state_files_live_in_the_session_as_json() {
    let t = Tools::new(Arc::new(StateBackend::new()));
    t.ok("write_file", json!({"path": "/a.md", "content": "hi"}))
        .await;
    let files = t.session.state().get_value("files").unwrap();
    assert_eq!(files["/a.md"]["content"], "hi");
    let restored = cairn_core::AgentSession::from_json(&t.session.to_json().unwrap()).unwrap();
    assert_eq!(StateBackend::files(restored.state())["/a.md"].content, "hi");
}

#[tokio::test]
async fn store_backend_uses_the_run_store_and_namespace() {
    use cairn_deep::backend::{Backend, BackendRuntime};
    let store: cairn_core::SharedStore = Arc::new(InMemoryStore::new());
    let backend = StoreBackend::new().namespace(["memories", "u1"]);
    let rt = BackendRuntime::new().with_store(store.clone());
    backend.write(&rt, "/prefs.md", "brief").await.unwrap();
    let ns = vec!["memories".to_string(), "u1".to_string()];
    let item = store.get(&ns, "/prefs.md").await.unwrap().unwrap();
    assert_eq!(item.value["content"], "brief");
    // Another namespace does not see it.
    let other = StoreBackend::new().namespace(["memories", "u2"]);
    assert!(other.read_text(&rt, "/prefs.md").await.is_err());
    // Without any store the error says so.
    let e = StoreBackend::new()
        .ls(&BackendRuntime::new(), "/")
        .await
        .unwrap_err();
    assert!(e.to_string().contains("no store is configured"));
}
