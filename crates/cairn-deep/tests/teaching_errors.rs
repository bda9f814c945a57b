//! Tool errors that teach the next step (issue #17): a missing path names files of the same name
//! elsewhere or what the nearest directory holds; an `edit_file` whose `old_string` is absent
//! shows the closest lines; an empty `old_string` shows the end of the file. Empty routes of a
//! composite backend are not listed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use cairn_core::InMemoryStore;
use cairn_deep::backend::{CompositeBackend, StateBackend, StoreBackend};
use common::Tools;
use serde_json::json;

fn tools() -> Tools {
    let composite = CompositeBackend::new(StateBackend::new()).route(
        "/large_tool_results/",
        StoreBackend::new().with_store(Arc::new(InMemoryStore::new())),
    );
    Tools::new(Arc::new(composite))
}

/// The tools over a fresh state backend, the one named like `make`'s tool replaced by it (a
/// profile's variant of a file tool).
fn tools_with(make: fn(cairn_deep::backend::SharedBackend) -> cairn_core::SharedTool) -> Tools {
    let backend: cairn_deep::backend::SharedBackend = Arc::new(StateBackend::new());
    let variant = make(Arc::clone(&backend));
    let mut t = Tools::new(backend);
    for tool in &mut t.tools {
        if tool.spec().name == variant.spec().name {
            *tool = Arc::clone(&variant);
        }
    }
    t
}

#[tokio::test]
async fn not_found_names_the_file_of_that_name_or_the_nearest_directory() {
    let t = tools();
    t.ok(
        "write_file",
        json!({"file_path": "/utils.py", "content": "def sub(a, b):\n    return a + b\n"}),
    )
    .await;
    t.ok(
        "write_file",
        json!({"file_path": "/src/app/main.py", "content": "x = 1\n"}),
    )
    .await;
    assert_eq!(
        t.err("read_file", json!({"file_path": "/path/to/utils.py"}))
            .await,
        "Error: /path/to/utils.py not found. Use ls or glob to find the right path. Did you mean /utils.py?"
    );
    assert_eq!(
        t.err("read_file", json!({"file_path": "/src/app/nothere.py"}))
            .await,
        "Error: /src/app/nothere.py not found. Use ls or glob to find the right path. /src/app holds: /src/app/main.py"
    );
    let e = t.err("ls", json!({"path": "/nowhere/deeper"})).await;
    assert!(e.ends_with("/ holds: /src/, /utils.py"), "{e}");
}

#[tokio::test]
async fn a_failed_edit_shows_the_closest_lines() {
    let t = tools();
    t.ok(
        "write_file",
        json!({"file_path": "/utils.py", "content": "def sub(a, b):\n    return a + b\n\n\ndef neg(a):\n    return -a\n"}),
    )
    .await;
    let e = t
        .err(
            "edit_file",
            json!({"file_path": "/utils.py", "old_string": "return a+b", "new_string": "return a - b"}),
        )
        .await;
    assert!(
        e.ends_with("(number, tab, text):\n1\tdef sub(a, b):\n2\t    return a + b\n3\t"),
        "{e}"
    );
    t.ok(
        "write_file",
        json!({"file_path": "/notes.txt", "content": "alpha\nbeta\n"}),
    )
    .await;
    let e = t
        .err(
            "edit_file",
            json!({"file_path": "/notes.txt", "old_string": "", "new_string": "gamma"}),
        )
        .await;
    assert!(e.contains("To add text"), "{e}");
    assert!(e.ends_with("1\talpha\n2\tbeta"), "{e}");
}

#[tokio::test]
async fn an_empty_route_is_not_listed_until_it_holds_something() {
    let t = tools();
    t.ok(
        "write_file",
        json!({"file_path": "/a.py", "content": "x\n"}),
    )
    .await;
    assert_eq!(t.ok("ls", json!({"path": "/"})).await, "/a.py");
    t.ok(
        "write_file",
        json!({"file_path": "/large_tool_results/r1", "content": "big\n"}),
    )
    .await;
    assert_eq!(
        t.ok("ls", json!({"path": "/"})).await,
        "/a.py\n/large_tool_results/"
    );
}

#[tokio::test]
async fn not_found_on_the_host_filesystem_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("config.json"), "{}\n").unwrap();
    let backend =
        CompositeBackend::new(cairn_deep::backend::LocalShellBackend::new(dir.path()).unwrap())
            .route("/large_tool_results/", StateBackend::new());
    let t = Tools::new(Arc::new(backend));
    assert_eq!(
        t.err("read_file", json!({"file_path": "/proj-x1/config.json"}))
            .await,
        "Error: /proj-x1/config.json not found. Use ls or glob to find the right path. Did you mean /config.json?"
    );
}

#[tokio::test]
async fn the_overwriting_write_file_replaces_an_existing_file() {
    let backend: cairn_deep::backend::SharedBackend = Arc::new(StateBackend::new());
    let mut t = Tools::new(Arc::clone(&backend));
    for tool in &mut t.tools {
        if tool.spec().name == "write_file" {
            *tool = cairn_deep::tools::overwriting_write_file_tool(Arc::clone(&backend));
        }
    }
    assert_eq!(
        t.ok(
            "write_file",
            json!({"file_path": "/notes.txt", "content": "alpha\n"})
        )
        .await,
        "Created /notes.txt"
    );
    assert_eq!(
        t.ok(
            "write_file",
            json!({"file_path": "/notes.txt", "content": "alpha\nbeta\n"})
        )
        .await,
        "Overwrote /notes.txt"
    );
    assert_eq!(
        t.ok("read_file", json!({"file_path": "/notes.txt"})).await,
        "1\talpha\n2\tbeta"
    );
    // A rewrite that drops most of the file is refused.
    let e = t
        .err(
            "write_file",
            json!({"file_path": "/notes.txt", "content": "gamma\n"}),
        )
        .await;
    assert!(e.contains("would drop 2 of its 2 words"), "{e}");
    // It shows what the file holds, to be written whole with the change.
    assert!(
        e.contains("It holds now:\nalpha\nbeta\nWrite all of it"),
        "{e}"
    );
    // A JSON file written on one line with a field added keeps its words.
    t.ok(
        "write_file",
        json!({"file_path": "/p.json", "content": "{\n  \"name\": \"web\",\n  \"private\": true\n}\n"}),
    )
    .await;
    // The same words on one line are not written: the change the model meant is missing.
    let e = t
        .err(
            "write_file",
            json!({"file_path": "/p.json", "content": "{\"name\": \"web\", \"private\": true}"}),
        )
        .await;
    assert!(
        e.contains("/p.json was not written: this text has the same words as the file"),
        "{e}"
    );
    assert_eq!(
        t.ok("read_file", json!({"file_path": "/p.json"})).await,
        "1\t{\n2\t  \"name\": \"web\",\n3\t  \"private\": true\n4\t}"
    );
    assert_eq!(
        t.ok(
            "write_file",
            json!({"file_path": "/p.json", "content": "{\"name\": \"web\", \"private\": true, \"license\": \"MIT\"}"}),
        )
        .await,
        "Overwrote /p.json"
    );
    let e = t
        .err(
            "write_file",
            json!({"file_path": "/p.json", "content": "{\"license\": \"MIT\"}"}),
        )
        .await;
    assert!(e.contains("would drop 4 of its 6 words"), "{e}");
    // Words count, not lines: the same text on one line keeps them, and the new word is in.
    assert_eq!(
        t.ok(
            "write_file",
            json!({"file_path": "/notes.txt", "content": "alpha beta gamma"})
        )
        .await,
        "Overwrote /notes.txt"
    );
    // Writing the same text back changes nothing, and says so.
    let e = t
        .err(
            "write_file",
            json!({"file_path": "/notes.txt", "content": "alpha beta gamma\n"}),
        )
        .await;
    assert!(
        e.contains("already holds exactly this text; nothing changed"),
        "{e}"
    );
    // So does an edit whose new text is the old one.
    let e = t
        .err(
            "edit_file",
            json!({"file_path": "/notes.txt", "old_string": "beta", "new_string": "beta"}),
        )
        .await;
    assert!(e.contains("would change nothing"), "{e}");
    // The plain tool still refuses.
    let plain = Tools::new(backend);
    plain.session.state().replace(t.session.state().snapshot());
    let e = plain
        .err(
            "write_file",
            json!({"file_path": "/notes.txt", "content": "x"}),
        )
        .await;
    assert!(e.contains("already exists"), "{e}");
}

#[tokio::test]
async fn an_overwrite_drops_line_numbers_copied_from_a_read_but_not_a_files_own() {
    let t = tools_with(cairn_deep::tools::overwriting_write_file_tool);
    t.ok(
        "write_file",
        json!({"file_path": "/notes.txt", "content": "alpha\nbeta\n"}),
    )
    .await;
    // The read's `1\talpha` rows copied back, with a new last line (the 1.5B model's append).
    assert_eq!(
        t.ok(
            "write_file",
            json!({"file_path": "/notes.txt", "content": "1\talpha\n2\tbeta\n3\tgamma\n"})
        )
        .await,
        "Overwrote /notes.txt (without the read_file line numbers that were copied into the text)"
    );
    assert_eq!(
        t.ok("read_file", json!({"file_path": "/notes.txt"})).await,
        "1\talpha\n2\tbeta\n3\tgamma"
    );
    // Copied numbers and nothing else new: the same text, so nothing changed.
    let e = t
        .err(
            "write_file",
            json!({"file_path": "/notes.txt", "content": "1\talpha\n2\tbeta\n3\tgamma"}),
        )
        .await;
    assert!(e.contains("nothing changed"), "{e}");
    // A table whose rows are numbered on disk keeps its numbers.
    t.ok(
        "write_file",
        json!({"file_path": "/ids.tsv", "content": "1\tann\n2\tbob\n"}),
    )
    .await;
    assert_eq!(
        t.ok(
            "write_file",
            json!({"file_path": "/ids.tsv", "content": "1\tann\n2\tbob\n3\tcy\n"})
        )
        .await,
        "Overwrote /ids.tsv"
    );
    assert_eq!(
        t.ok("read_file", json!({"file_path": "/ids.tsv"})).await,
        "1\t1\tann\n2\t2\tbob\n3\t3\tcy"
    );
    // Created files are written as given.
    t.ok(
        "write_file",
        json!({"file_path": "/new.tsv", "content": "1\tx\n2\ty\n"}),
    )
    .await;
    assert_eq!(
        t.ok("read_file", json!({"file_path": "/new.tsv"})).await,
        "1\t1\tx\n2\t2\ty"
    );
}

#[tokio::test]
async fn the_appending_edit_file_adds_text_for_an_empty_old_string() {
    let t = tools_with(cairn_deep::tools::appending_edit_file_tool);
    t.ok(
        "write_file",
        json!({"file_path": "/notes.txt", "content": "alpha\nbeta\n"}),
    )
    .await;
    assert_eq!(
        t.ok(
            "edit_file",
            json!({"file_path": "/notes.txt", "old_string": "", "new_string": "gamma"})
        )
        .await,
        "Added the text at the end of /notes.txt (an empty old_string appends)"
    );
    assert_eq!(
        t.ok("read_file", json!({"file_path": "/notes.txt"})).await,
        "1\talpha\n2\tbeta\n3\tgamma"
    );
    // A file without a final newline gets the text on a line of its own, and keeps its style.
    t.ok(
        "write_file",
        json!({"file_path": "/a.txt", "content": "one"}),
    )
    .await;
    t.ok(
        "edit_file",
        json!({"file_path": "/a.txt", "old_string": "", "new_string": "two"}),
    )
    .await;
    assert_eq!(
        t.ok("read_file", json!({"file_path": "/a.txt"})).await,
        "1\tone\n2\ttwo"
    );
    // A missing file is still an error that names the path; other edits are unchanged.
    let e = t
        .err(
            "edit_file",
            json!({"file_path": "/nope.txt", "old_string": "", "new_string": "x"}),
        )
        .await;
    assert!(e.contains("/nope.txt not found"), "{e}");
    assert_eq!(
        t.ok(
            "edit_file",
            json!({"file_path": "/a.txt", "old_string": "two", "new_string": "2"})
        )
        .await,
        "Replaced 1 occurrence in /a.txt"
    );
    // The ordinary edit_file refuses an empty old_string.
    let plain = tools();
    plain
        .ok(
            "write_file",
            json!({"file_path": "/n.txt", "content": "alpha\n"}),
        )
        .await;
    let e = plain
        .err(
            "edit_file",
            json!({"file_path": "/n.txt", "old_string": "", "new_string": "beta"}),
        )
        .await;
    assert!(e.contains("old_string is empty"), "{e}");
}

#[tokio::test]
async fn a_path_prefixed_with_the_project_folder_name_finds_the_file() {
    let top = tempfile::tempdir().unwrap();
    let dir = top.path().join("flip-flag");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("settings.py"), "DEBUG = True\n").unwrap();
    let t = Tools::new(Arc::new(
        cairn_deep::backend::LocalShellBackend::new(&dir).unwrap(),
    ));
    assert_eq!(
        t.ok("read_file", json!({"file_path": "/flip-flag/settings.py"}))
            .await,
        "1\tDEBUG = True"
    );
    assert_eq!(
        t.ok(
            "edit_file",
            json!({"file_path": "/flip-flag/settings.py", "old_string": "True", "new_string": "False"})
        )
        .await,
        "Replaced 1 occurrence in /settings.py"
    );
    assert_eq!(
        t.ok("ls", json!({"path": "/flip-flag"})).await,
        "/settings.py"
    );
    // A real folder of that name wins.
    std::fs::create_dir(dir.join("flip-flag")).unwrap();
    std::fs::write(dir.join("flip-flag/inner.txt"), "x\n").unwrap();
    assert_eq!(
        t.ok("ls", json!({"path": "/flip-flag"})).await,
        "/flip-flag/inner.txt"
    );
}
