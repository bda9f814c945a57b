//! Hardening of the file backends and tools (issue #16): atomic writes on a full disk, no lost
//! parallel edits, FIFOs and sockets refused, tool timeouts, hard links, huge single lines.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use cairn_core::{BoxFuture, FunctionInvocationContext, InMemoryStore, SharedTool};
use cairn_deep::BackendError;
use cairn_deep::backend::{
    Backend, BackendRuntime, FileInfo, FilesystemBackend, GrepQuery, GrepResult, SharedBackend,
    StoreBackend,
};
use cairn_deep::tools::{ToolTimeout, filesystem_tools};
use common::Tools;
use serde_json::json;

/// Temporary files a backend left behind in `dir`.
fn leftovers(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".cairn-"))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Item 1: atomic write_file / edit_file.

/// A 64 KiB tmpfs mounted on a fresh directory, unmounted when dropped.
struct SmallTmpfs {
    dir: tempfile::TempDir,
}

impl SmallTmpfs {
    /// Mounts one, or returns `None` (after a notice) when this process may not mount. Under
    /// CI (env `CI` set) failing to mount is a test failure: CI runs as root.
    fn mount() -> Option<SmallTmpfs> {
        let dir = tempfile::tempdir().unwrap();
        let out = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=64k", "tmpfs"])
            .arg(dir.path())
            .output();
        let failure = match &out {
            Ok(o) if o.status.success() => return Some(SmallTmpfs { dir }),
            Ok(o) => String::from_utf8_lossy(&o.stderr).into_owned(),
            Err(e) => e.to_string(),
        };
        if std::env::var_os("CI").is_some() {
            panic!(
                "mounting a 64k tmpfs failed ({}); CI must run these tests as root: {failure}",
                dir.path().display()
            );
        }
        eprintln!("SKIPPED: cannot mount a tmpfs (not root?): {failure}");
        None
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes a filler file until the filesystem is full.
    fn fill(&self) {
        use std::io::Write;
        let mut f = std::fs::File::create(self.path().join("filler")).unwrap();
        let block = vec![b'f'; 4096];
        loop {
            if f.write_all(&block).and_then(|()| f.sync_all()).is_err() {
                break;
            }
        }
    }
}

impl Drop for SmallTmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg(self.dir.path())
            .status();
    }
}

#[tokio::test]
async fn an_edit_that_does_not_fit_on_a_full_disk_keeps_the_original() {
    let Some(fs) = SmallTmpfs::mount() else {
        return;
    };
    let original = "keep me\nbyte for byte\n";
    std::fs::write(fs.path().join("notes.md"), original).unwrap();
    std::fs::set_permissions(
        fs.path().join("notes.md"),
        std::fs::Permissions::from_mode(0o640),
    )
    .unwrap();
    fs.fill();
    let t = Tools::new(Arc::new(FilesystemBackend::new(fs.path()).unwrap()));

    let big = "x".repeat(128 * 1024);
    let err = t
        .err(
            "edit_file",
            json!({"path": "/notes.md", "old_string": "keep me", "new_string": big}),
        )
        .await;
    assert!(err.contains("No space left on device"), "{err}");
    assert_eq!(
        std::fs::read_to_string(fs.path().join("notes.md")).unwrap(),
        original
    );
    let mode = std::fs::metadata(fs.path().join("notes.md"))
        .unwrap()
        .mode();
    assert_eq!(mode & 0o7777, 0o640);
    assert_eq!(leftovers(fs.path()), Vec::<String>::new());

    // A new file that does not fit leaves nothing behind either.
    let err = t
        .err("write_file", json!({"path": "/new.md", "content": big}))
        .await;
    assert!(err.contains("No space left on device"), "{err}");
    assert!(!fs.path().join("new.md").exists());
    assert_eq!(leftovers(fs.path()), Vec::<String>::new());

    // Once there is room again, the same edit lands.
    std::fs::remove_file(fs.path().join("filler")).unwrap();
    t.ok(
        "edit_file",
        json!({"path": "/notes.md", "old_string": "keep me", "new_string": "kept"}),
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(fs.path().join("notes.md")).unwrap(),
        "kept\nbyte for byte\n"
    );
}

#[tokio::test]
async fn an_edit_keeps_mode_and_owner_and_leaves_no_temporary_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("run.sh");
    std::fs::write(&file, "echo one\n").unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o751)).unwrap();
    // Only root can give a file away; then the edit must keep the owner too.
    let given_away = std::os::unix::fs::chown(&file, Some(4242), Some(4343)).is_ok();
    let t = Tools::new(Arc::new(FilesystemBackend::new(dir.path()).unwrap()));
    t.ok(
        "edit_file",
        json!({"path": "/run.sh", "old_string": "one", "new_string": "two"}),
    )
    .await;
    let md = std::fs::metadata(&file).unwrap();
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "echo two\n");
    assert_eq!(md.mode() & 0o7777, 0o751);
    if given_away {
        assert_eq!((md.uid(), md.gid()), (4242, 4343));
    }
    assert_eq!(leftovers(dir.path()), Vec::<String>::new());
}

// ---------------------------------------------------------------------------------------------
// Item 2: parallel edits of one file.

fn markers_file(n: usize) -> String {
    // Enough padding that a read-modify-write takes a while, so unserialized edits overlap.
    let pad = "p".repeat(200_000);
    (0..n).map(|i| format!("MARK{i}\n{pad}\n")).collect()
}

async fn parallel_edits(backend: SharedBackend, rt: BackendRuntime, path: &str) {
    let tasks: Vec<_> = (0..8)
        .map(|i| {
            let (backend, rt, path) = (backend.clone(), rt.clone(), path.to_owned());
            tokio::spawn(async move {
                backend
                    .edit(
                        &rt,
                        &path,
                        &format!("MARK{i}\n"),
                        &format!("DONE{i}\n"),
                        false,
                    )
                    .await
            })
        })
        .collect();
    for (i, t) in tasks.into_iter().enumerate() {
        assert_eq!(t.await.unwrap().unwrap(), 1, "edit {i} failed");
    }
    let text = backend.read_text(&rt, path).await.unwrap();
    for i in 0..8 {
        assert!(text.contains(&format!("DONE{i}\n")), "edit {i} was lost");
        assert!(!text.contains(&format!("MARK{i}\n")));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn eight_parallel_edits_of_one_file_all_land_on_the_filesystem() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("shared.txt"), markers_file(8)).unwrap();
    let fs = FilesystemBackend::new(dir.path()).unwrap();
    // Clones share the locks, so edits through two handles are serialized too.
    let a: SharedBackend = Arc::new(fs.clone());
    parallel_edits(a, BackendRuntime::new(), "/shared.txt").await;

    // And through the edit_file tool, half the calls via a second clone of the backend.
    std::fs::write(dir.path().join("tool.txt"), markers_file(8)).unwrap();
    let t1 = Arc::new(Tools::new(Arc::new(fs.clone())));
    let t2 = Arc::new(Tools::new(Arc::new(fs)));
    let calls: Vec<_> = (0..8)
        .map(|i| {
            let t = if i % 2 == 0 { t1.clone() } else { t2.clone() };
            tokio::spawn(async move {
                t.call(
                    "edit_file",
                    json!({"path": "/tool.txt", "old_string": format!("MARK{i}\n"), "new_string": format!("DONE{i}\n")}),
                )
                .await
            })
        })
        .collect();
    for c in calls {
        let (text, is_error) = c.await.unwrap();
        assert!(!is_error, "{text}");
    }
    let text = std::fs::read_to_string(dir.path().join("tool.txt")).unwrap();
    for i in 0..8 {
        assert!(text.contains(&format!("DONE{i}\n")), "edit {i} was lost");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn eight_parallel_edits_of_one_file_all_land_in_a_store() {
    let store = Arc::new(InMemoryStore::new());
    let backend = StoreBackend::new().with_store(store);
    let rt = BackendRuntime::new();
    backend
        .write(&rt, "/shared.txt", &markers_file(8))
        .await
        .unwrap();
    parallel_edits(Arc::new(backend), rt, "/shared.txt").await;
}

// ---------------------------------------------------------------------------------------------
// Item 8: non-regular files and tool timeouts.

fn mkfifo(path: &Path) {
    let ok = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap()
        .success();
    assert!(ok, "mkfifo {} failed", path.display());
}

#[tokio::test]
async fn fifos_and_sockets_are_refused_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    mkfifo(&dir.path().join("pipe"));
    let _listener = std::os::unix::net::UnixListener::bind(dir.path().join("sock")).unwrap();
    std::fs::write(dir.path().join("a.txt"), "findme\n").unwrap();
    let t = Tools::new(Arc::new(FilesystemBackend::new(dir.path()).unwrap()));

    let err = within(t.err("read_file", json!({"path": "/pipe"})))
        .await
        .expect("read_file on a FIFO hung");
    assert_eq!(
        err,
        "Error: /pipe is a FIFO (named pipe), not a regular file; only regular files can be read or changed. Use another path."
    );
    let err = within(t.err(
        "edit_file",
        json!({"path": "/pipe", "old_string": "a", "new_string": "b"}),
    ))
    .await
    .expect("edit_file on a FIFO hung");
    assert!(err.contains("is a FIFO (named pipe)"), "{err}");
    let err = within(t.err("read_file", json!({"path": "/sock"})))
        .await
        .expect("read_file on a socket hung");
    assert!(
        err.contains("/sock is a socket, not a regular file"),
        "{err}"
    );
    let err = within(t.err("read_file", json!({"path": "/../../dev/null"})))
        .await
        .unwrap();
    assert!(err.contains("invalid path"), "{err}");

    // Searches walk past them.
    let found = within(t.ok("grep", json!({"pattern": "findme"})))
        .await
        .expect("grep hung on a FIFO");
    assert_eq!(found, "/a.txt");
    let found = within(t.ok("grep", json!({"pattern": "x", "path": "/pipe"})))
        .await
        .expect("grep of a FIFO hung");
    assert_eq!(found, "No matches found.");
}

/// Bounded so that a regression fails instead of hanging the suite.
fn within<F: std::future::Future>(f: F) -> tokio::time::Timeout<F> {
    tokio::time::timeout(Duration::from_secs(20), f)
}

/// A backend whose every operation never completes.
struct NeverBackend;

fn never<'a, T: Send + 'a>() -> BoxFuture<'a, Result<T, BackendError>> {
    Box::pin(std::future::pending())
}

impl Backend for NeverBackend {
    fn ls<'a>(
        &'a self,
        _: &'a BackendRuntime,
        _: &'a str,
    ) -> BoxFuture<'a, Result<Vec<FileInfo>, BackendError>> {
        never()
    }
    fn read_text<'a>(
        &'a self,
        _: &'a BackendRuntime,
        _: &'a str,
    ) -> BoxFuture<'a, Result<String, BackendError>> {
        never()
    }
    fn write<'a>(
        &'a self,
        _: &'a BackendRuntime,
        _: &'a str,
        _: &'a str,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        never()
    }
    fn edit<'a>(
        &'a self,
        _: &'a BackendRuntime,
        _: &'a str,
        _: &'a str,
        _: &'a str,
        _: bool,
    ) -> BoxFuture<'a, Result<usize, BackendError>> {
        never()
    }
    fn glob<'a>(
        &'a self,
        _: &'a BackendRuntime,
        _: &'a str,
        _: &'a str,
    ) -> BoxFuture<'a, Result<Vec<String>, BackendError>> {
        never()
    }
    fn grep<'a>(
        &'a self,
        _: &'a BackendRuntime,
        _: &'a GrepQuery,
    ) -> BoxFuture<'a, Result<GrepResult, BackendError>> {
        never()
    }
    fn delete<'a>(
        &'a self,
        _: &'a BackendRuntime,
        _: &'a str,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        never()
    }
}

async fn call_with(
    tool: &SharedTool,
    args: serde_json::Value,
    timeout: Option<Duration>,
) -> (String, bool) {
    let mut ctx = FunctionInvocationContext::new(Arc::clone(tool), "call_1", args);
    if let Some(d) = timeout {
        ctx.extensions.insert(ToolTimeout(d));
    }
    let out = tool.invoke(&ctx).await.unwrap();
    (out.text_content(), out.is_error)
}

// Paused time: the runtime jumps to the deadline as soon as everything is idle, so this takes
// no wall-clock time and does not depend on the machine's load.
#[tokio::test(start_paused = true)]
async fn every_file_tool_call_times_out_with_an_error_result() {
    let tools = filesystem_tools(Arc::new(NeverBackend));
    let by_name = |n: &str| tools.iter().find(|t| t.spec().name == n).unwrap().clone();
    let calls = [
        ("ls", json!({})),
        ("read_file", json!({"path": "/a"})),
        ("glob", json!({"pattern": "*"})),
        ("grep", json!({"pattern": "x"})),
        ("write_file", json!({"path": "/a", "content": "x"})),
        (
            "edit_file",
            json!({"path": "/a", "old_string": "x", "new_string": "y"}),
        ),
        ("delete", json!({"file_path": "/a"})),
    ];
    for (name, args) in calls {
        let (text, is_error) = call_with(
            &by_name(name),
            args.clone(),
            Some(Duration::from_millis(250)),
        )
        .await;
        assert!(is_error, "{name}: {text}");
        assert!(
            text.starts_with(&format!("Error: {name} timed out after 250ms")),
            "{name}: {text}"
        );
        if name == "write_file" || name == "edit_file" || name == "delete" {
            assert!(text.contains("may still be applied"), "{text}");
        }
        // Without a ToolTimeout in the run, the default applies.
        let (text, _) = call_with(&by_name(name), args, None).await;
        assert!(
            text.starts_with(&format!("Error: {name} timed out after 60s")),
            "{text}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Item 15: hard links.

#[tokio::test]
async fn a_hard_link_to_an_outside_file_cannot_be_edited() {
    let outside = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    let secret: PathBuf = outside.path().join("config.toml");
    std::fs::write(&secret, "owner = \"me\"\n").unwrap();
    std::fs::hard_link(&secret, root.path().join("linked.toml")).unwrap();
    let t = Tools::new(Arc::new(FilesystemBackend::new(root.path()).unwrap()));

    let err = t
        .err(
            "edit_file",
            json!({"path": "/linked.toml", "old_string": "me", "new_string": "attacker"}),
        )
        .await;
    assert_eq!(
        err,
        "Error: /linked.toml has 2 hard links, and another one may be a file outside the workspace, so it cannot be changed here. Write the new content to a new file instead."
    );
    assert_eq!(
        std::fs::read_to_string(&secret).unwrap(),
        "owner = \"me\"\n"
    );
    // The link is still the same file (not detached by a rename either).
    let (a, b) = (
        std::fs::metadata(&secret).unwrap(),
        std::fs::metadata(root.path().join("linked.toml")).unwrap(),
    );
    assert_eq!((a.dev(), a.ino()), (b.dev(), b.ino()));
    // Reading through a hard link is allowed; the limit is documented on FilesystemBackend.
    assert_eq!(
        t.ok("read_file", json!({"path": "/linked.toml"})).await,
        "1\towner = \"me\""
    );
}

// ---------------------------------------------------------------------------------------------
// Item 16: one huge line.

#[tokio::test]
async fn a_five_megabyte_single_line_is_cut_to_one_page() {
    let dir = tempfile::tempdir().unwrap();
    let line: String = "var a=1;".repeat(5 * 1024 * 1024 / 8);
    std::fs::write(dir.path().join("app.min.js"), format!("{line}\n// end\n")).unwrap();
    let t = Tools::new(Arc::new(FilesystemBackend::new(dir.path()).unwrap()));
    let page = t.ok("read_file", json!({"path": "/app.min.js"})).await;
    assert!(page.len() < 100_000, "a page of {} bytes", page.len());
    let tail: Vec<&str> = page.lines().rev().take(2).collect();
    assert_eq!(
        tail[1],
        "[line 1 is cut: it has 5242880 characters and only the first 60000 are shown. read_file cannot page inside a line; find text in it with grep, and continue with offset=1 for the lines after it]"
    );
    assert_eq!(tail[0], "[lines 1-1 of 2; continue with offset=1]");
    assert_eq!(
        t.ok("read_file", json!({"path": "/app.min.js", "offset": 1}))
            .await,
        "2\t// end"
    );
}
