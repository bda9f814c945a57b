//! CompositeBackend: longest prefix wins, stripped paths inside, full paths outside.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use cairn_core::InMemoryStore;
use cairn_deep::backend::{
    Backend, BackendRuntime, CompositeBackend, FilesystemBackend, StateBackend, StoreBackend,
};
use common::Tools;
use serde_json::json;

fn setup() -> (Tools, StateBackend, Arc<InMemoryStore>, Arc<InMemoryStore>) {
    let state = StateBackend::new();
    let mem = Arc::new(InMemoryStore::new());
    let deep = Arc::new(InMemoryStore::new());
    let composite = CompositeBackend::new(state.clone())
        .route("/memories/", StoreBackend::new().with_store(mem.clone()))
        .route(
            "/memories/deep",
            StoreBackend::new().with_store(deep.clone()),
        );
    (Tools::new(Arc::new(composite)), state, mem, deep)
}

#[tokio::test]
async fn routes_by_longest_prefix_and_reports_full_paths() {
    let (t, _state, mem, deep) = setup();
    assert_eq!(
        t.ok(
            "write_file",
            json!({"path": "/memories/prefs.md", "content": "brief answers\n"})
        )
        .await,
        "Created /memories/prefs.md"
    );
    assert_eq!(
        t.ok(
            "write_file",
            json!({"path": "/memories/deep/x.md", "content": "deep note\n"})
        )
        .await,
        "Created /memories/deep/x.md"
    );
    t.ok(
        "write_file",
        json!({"path": "/scratch.md", "content": "brief scratch\n"}),
    )
    .await;

    // The routed backends saw stripped paths.
    let rt = BackendRuntime::new();
    let mem_backend = StoreBackend::new().with_store(mem.clone());
    let deep_backend = StoreBackend::new().with_store(deep.clone());
    assert_eq!(
        mem_backend.read_text(&rt, "/prefs.md").await.unwrap(),
        "brief answers\n"
    );
    assert_eq!(
        deep_backend.read_text(&rt, "/x.md").await.unwrap(),
        "deep note\n"
    );
    assert!(mem_backend.read_text(&rt, "/deep/x.md").await.is_err());
    // The default got only the unrouted file.
    assert_eq!(
        StateBackend::files(t.session.state())
            .keys()
            .collect::<Vec<_>>(),
        ["/scratch.md"]
    );

    // ls / shows the route; ls of a route shows its files and nested routes, full paths.
    assert_eq!(
        t.ok("ls", json!({"path": "/"})).await,
        "/memories/\n/scratch.md"
    );
    assert_eq!(
        t.ok("ls", json!({"path": "/memories"})).await,
        "/memories/deep/\n/memories/prefs.md"
    );
    assert_eq!(
        t.ok("ls", json!({"path": "/memories/deep"})).await,
        "/memories/deep/x.md"
    );

    // read / edit / errors carry the full path.
    assert_eq!(
        t.ok("read_file", json!({"path": "/memories/prefs.md"}))
            .await,
        "1\tbrief answers"
    );
    assert_eq!(
        t.ok(
            "edit_file",
            json!({"path": "/memories/prefs.md", "old_string": "brief", "new_string": "short"})
        )
        .await,
        "Replaced 1 occurrence in /memories/prefs.md"
    );
    assert_eq!(
        t.err("read_file", json!({"path": "/memories/nothere.md"}))
            .await,
        "Error: /memories/nothere.md not found. Use ls or glob to find the right path. /memories holds: /memories/deep/, /memories/prefs.md"
    );
    assert_eq!(
        t.err(
            "write_file",
            json!({"path": "/memories/deep/x.md", "content": "again"})
        )
        .await,
        "Error: /memories/deep/x.md already exists. Use edit_file to change it, or write to a new path."
    );

    // glob and grep fan out over the routes below the search path.
    assert_eq!(
        t.ok("glob", json!({"pattern": "*.md"})).await,
        "/memories/deep/x.md\n/memories/prefs.md\n/scratch.md"
    );
    assert_eq!(
        t.ok("glob", json!({"pattern": "memories/*.md"})).await,
        "/memories/prefs.md"
    );
    assert_eq!(
        t.ok("glob", json!({"pattern": "*.md", "path": "/memories/deep"}))
            .await,
        "/memories/deep/x.md"
    );
    assert_eq!(
        t.ok(
            "grep",
            json!({"pattern": "note|short|scratch", "regex": true, "output_mode": "content"})
        )
        .await,
        "/memories/deep/x.md:1:deep note\n/memories/prefs.md:1:short answers\n/scratch.md:1:brief scratch"
    );
    assert_eq!(
        t.ok(
            "grep",
            json!({"pattern": "e", "path": "/memories", "output_mode": "count"})
        )
        .await,
        "/memories/deep/x.md:1\n/memories/prefs.md:1"
    );
    assert_eq!(
        t.ok(
            "grep",
            json!({"pattern": "note", "glob": "deep/*.md", "path": "/memories"})
        )
        .await,
        "/memories/deep/x.md"
    );
}

#[tokio::test]
async fn a_route_hides_the_default_beneath_it_and_execute_follows_the_default() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("memories")).unwrap();
    std::fs::write(dir.path().join("memories/shadowed.md"), "hidden").unwrap();
    std::fs::write(dir.path().join("top.md"), "top").unwrap();
    let store = Arc::new(InMemoryStore::new());
    let composite = CompositeBackend::new(FilesystemBackend::new(dir.path()).unwrap())
        .route("/memories", StoreBackend::new().with_store(store));
    assert!(!composite.can_execute());
    let t = Tools::new(Arc::new(composite));
    // An empty route is not listed (issue #17); the default's shadowed directory is not either.
    assert_eq!(t.ok("ls", json!({})).await, "/top.md");
    assert_eq!(t.ok("glob", json!({"pattern": "*.md"})).await, "/top.md");
    assert_eq!(
        t.ok("grep", json!({"pattern": "hidden"})).await,
        "No matches found."
    );
    assert!(t.tools.iter().all(|tool| tool.spec().name != "execute"));

    let shell = cairn_deep::LocalShellBackend::new(dir.path()).unwrap();
    let composite = CompositeBackend::new(shell).route("/memories", StateBackend::new());
    assert!(composite.can_execute());
}

#[tokio::test]
async fn delete_goes_to_the_owning_route_and_never_removes_a_route() {
    let (t, state, mem, _deep) = setup();
    t.ok(
        "write_file",
        json!({"file_path": "/memories/a.md", "content": "a\n"}),
    )
    .await;
    t.ok(
        "write_file",
        json!({"file_path": "/notes/n.md", "content": "n\n"}),
    )
    .await;
    assert_eq!(
        t.ok("delete", json!({"file_path": "/memories/a.md"})).await,
        "Deleted /memories/a.md"
    );
    let ns = ["filesystem".to_string()];
    assert!(
        cairn_core::Store::get(&*mem, &ns, "/a.md")
            .await
            .unwrap()
            .is_none()
    );
    // Errors carry the full path.
    assert_eq!(
        t.err("delete", json!({"file_path": "/memories/a.md"}))
            .await,
        "Error: /memories/a.md not found. Use ls or glob to find the right path. /memories is empty."
    );
    assert_eq!(
        t.err("delete", json!({"file_path": "/memories"})).await,
        "Error: invalid path '/memories': it is where separate storage is mounted, and cannot be deleted. Delete the files inside it"
    );
    // The default backend's own files are deleted there.
    assert_eq!(
        t.ok("delete", json!({"file_path": "/notes"})).await,
        "Deleted /notes"
    );
    assert!(StateBackend::files(t.session.state()).is_empty());
    let _ = state;
}

#[tokio::test]
async fn delete_of_a_directory_holding_a_route_is_refused() {
    let state = StateBackend::new();
    let store = Arc::new(InMemoryStore::new());
    let backend = CompositeBackend::new(state).route(
        "/work/memories/",
        StoreBackend::new().with_store(store.clone()),
    );
    let rt = BackendRuntime::new();
    backend.write(&rt, "/work/a.md", "a").await.unwrap();
    backend
        .write(&rt, "/work/memories/m.md", "m")
        .await
        .unwrap();
    let e = backend.delete(&rt, "/work").await.unwrap_err();
    assert!(e.to_string().contains("/work/memories"), "{e}");
    assert_eq!(backend.read_text(&rt, "/work/a.md").await.unwrap(), "a");
    assert_eq!(
        backend.read_text(&rt, "/work/memories/m.md").await.unwrap(),
        "m"
    );
}
