//! FilesystemBackend never reaches outside its root.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use cairn_deep::backend::{Backend, BackendRuntime, FilesystemBackend};
use proptest::prelude::*;

/// A root with a symlink out of it, one inside it, and a dangling one; plus a sibling
/// directory outside the root holding a secret.
fn fixture() -> (tempfile::TempDir, FilesystemBackend) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    let outside = tmp.path().join("outside");
    std::fs::create_dir_all(root.join("sub/inner")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret.txt"), "secret").unwrap();
    std::fs::write(root.join("sub/ok.txt"), "ok").unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::symlink;
        symlink(&outside, root.join("escape")).unwrap();
        symlink(outside.join("secret.txt"), root.join("sub/secret_link")).unwrap();
        symlink(root.join("sub"), root.join("inside")).unwrap();
        symlink(tmp.path().join("nowhere"), root.join("dangling")).unwrap();
        symlink("../../outside", root.join("sub/rel_escape")).unwrap();
    }
    let fs = FilesystemBackend::new(&root).unwrap();
    (tmp, fs)
}

fn segment() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("..".to_string()),
        Just(".".to_string()),
        Just(String::new()),
        Just("~".to_string()),
        Just("escape".to_string()),
        Just("inside".to_string()),
        Just("dangling".to_string()),
        Just("sub".to_string()),
        Just("secret_link".to_string()),
        Just("rel_escape".to_string()),
        Just("outside".to_string()),
        Just("root".to_string()),
        "[a-z]{1,3}",
    ]
}

fn path_strategy() -> impl Strategy<Value = String> {
    (any::<bool>(), prop::collection::vec(segment(), 0..8))
        .prop_map(|(abs, segs)| format!("{}{}", if abs { "/" } else { "" }, segs.join("/")))
}

fn inside(root: &Path, p: &Path) -> bool {
    // Whatever exists of the resolved path must canonicalize under the root.
    let mut probe = p.to_path_buf();
    loop {
        if let Ok(c) = std::fs::canonicalize(&probe) {
            return c.starts_with(root);
        }
        if !probe.pop() {
            return false;
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn generated_paths_never_resolve_outside(path in path_strategy()) {
        let (_tmp, fs) = fixture();
        if let Ok(resolved) = fs.resolve(&path) {
            prop_assert!(resolved.starts_with(fs.root()), "{path} -> {resolved:?}");
            prop_assert!(inside(fs.root(), &resolved), "{path} -> {resolved:?}");
        }
    }

    #[test]
    fn reads_and_writes_never_touch_outside(path in path_strategy()) {
        let (tmp, fs) = fixture();
        let rt = BackendRuntime::new();
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            if let Ok(text) = fs.read_text(&rt, &path).await {
                prop_assert_ne!(text, "secret");
            }
            let _ = fs.write(&rt, &format!("{path}/new.txt"), "x").await;
            let _ = fs.write(&rt, &path, "x").await;
            let _ = fs.edit(&rt, &path, "secret", "pwned", true).await;
            Ok(())
        })?;
        let outside = tmp.path().join("outside");
        let names: Vec<_> = std::fs::read_dir(&outside).unwrap().map(|e| e.unwrap().file_name()).collect();
        prop_assert_eq!(names.len(), 1);
        prop_assert_eq!(std::fs::read_to_string(outside.join("secret.txt")).unwrap(), "secret");
        prop_assert!(!tmp.path().join("new.txt").exists());
    }
}

#[cfg(unix)]
#[tokio::test]
async fn symlinks_out_of_the_root_are_refused() {
    let (_tmp, fs) = fixture();
    let rt = BackendRuntime::new();
    let e = fs.read_text(&rt, "/escape/secret.txt").await.unwrap_err();
    assert_eq!(
        e.to_model_message(),
        "Error: invalid path '/escape/secret.txt': it goes through a symlink that leads outside the workspace. Use another path"
    );
    assert!(fs.read_text(&rt, "/sub/secret_link").await.is_err());
    assert!(
        fs.read_text(&rt, "/sub/rel_escape/secret.txt")
            .await
            .is_err()
    );
    assert!(fs.write(&rt, "/dangling", "x").await.is_err());
    assert!(fs.write(&rt, "/escape/new.txt", "x").await.is_err());
    // A link that stays inside works.
    assert_eq!(fs.read_text(&rt, "/inside/ok.txt").await.unwrap(), "ok");
    // Absolute host paths are virtual: they land under the root.
    let e = fs.read_text(&rt, "/etc/passwd").await.unwrap_err();
    assert_eq!(
        e.to_model_message(),
        "Error: /etc/passwd not found. Use ls or glob to find the right path."
    );
    // Walks do not follow links out.
    let all = fs.glob(&rt, "**", "/").await.unwrap();
    assert!(all.iter().all(|p| !p.contains("secret")), "{all:?}");
    let hits = fs
        .grep(&rt, &cairn_deep::backend::GrepQuery::new("secret"))
        .await
        .unwrap();
    assert!(hits.matches.is_empty(), "{hits:?}");
}

#[tokio::test]
async fn writes_create_parents_and_honour_gitignore_in_walks() {
    let tmp = tempfile::tempdir().unwrap();
    let fs = FilesystemBackend::new(tmp.path()).unwrap();
    let rt = BackendRuntime::new();
    fs.write(&rt, "/a/b/c.txt", "deep").await.unwrap();
    assert_eq!(
        std::fs::read_to_string(tmp.path().join("a/b/c.txt")).unwrap(),
        "deep"
    );
    std::fs::write(tmp.path().join(".gitignore"), "target/\n").unwrap();
    std::fs::create_dir_all(tmp.path().join("target")).unwrap();
    std::fs::write(tmp.path().join("target/out.txt"), "deep").unwrap();
    std::fs::create_dir_all(tmp.path().join(".git")).unwrap();
    std::fs::write(tmp.path().join(".git/config"), "deep").unwrap();
    assert_eq!(fs.glob(&rt, "*.txt", "/").await.unwrap(), ["/a/b/c.txt"]);
    let hits = fs
        .grep(&rt, &cairn_deep::backend::GrepQuery::new("deep"))
        .await
        .unwrap();
    assert_eq!(hits.matches.len(), 1);
    assert_eq!(hits.matches[0].path, "/a/b/c.txt");
}

#[cfg(unix)]
#[tokio::test]
async fn delete_stays_in_the_root_and_removes_links_not_their_targets() {
    let (tmp, fs) = fixture();
    let rt = BackendRuntime::new();
    let root = fs.root().to_path_buf();
    let secret = tmp.path().join("outside/secret.txt");
    // A symlink leading out is removed itself; its target stays.
    fs.delete(&rt, "/sub/secret_link").await.unwrap();
    assert!(std::fs::symlink_metadata(root.join("sub/secret_link")).is_err());
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "secret");
    // Nothing through a symlink out of the root is reachable.
    let e = fs.delete(&rt, "/escape/secret.txt").await.unwrap_err();
    assert!(e.to_string().contains("outside the workspace"), "{e}");
    assert!(secret.exists());
    // A directory holding a symlink to an outside directory: the tree goes, the outside stays.
    fs.delete(&rt, "/sub").await.unwrap();
    assert!(!root.join("sub").exists());
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "secret");
    // No temporary directory is left behind.
    let left: Vec<String> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".cairn-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    // A dangling symlink can be deleted; a missing path and the root cannot.
    fs.delete(&rt, "/dangling").await.unwrap();
    assert!(matches!(
        fs.delete(&rt, "/sub").await,
        Err(cairn_deep::BackendError::NotFound(p)) if p == "/sub"
    ));
    assert!(fs.delete(&rt, "/").await.is_err());
    assert!(fs.delete(&rt, "/..").await.is_err());
    assert!(root.exists());
}
