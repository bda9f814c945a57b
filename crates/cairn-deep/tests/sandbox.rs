//! `execute` in the sandbox (issue #13): Landlock and seccomp applied to the command's
//! processes by LocalShellBackend. These run on the CI kernel (Landlock ABI 7); on a kernel
//! without Landlock they fail, saying so, rather than pass without testing anything.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![cfg(target_os = "linux")]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use cairn_core::CallReview;
use cairn_deep::backend::{Executor, LocalShellBackend};
use cairn_deep::tools::execute_tool;
use cairn_sandbox::{ExecPolicy, Sandbox, SandboxMode};
use serde_json::json;

/// A directory outside every writable root: under the target directory, not the temp dir.
fn outside() -> tempfile::TempDir {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let tmp = std::env::temp_dir().canonicalize().unwrap();
    let d = dir.path().canonicalize().unwrap();
    assert!(
        !d.starts_with(&tmp) && !d.starts_with("/tmp") && !d.starts_with("/var/tmp"),
        "the test needs a directory outside the temp directories, got {}",
        d.display()
    );
    dir
}

fn require_landlock() {
    let s = cairn_sandbox::support();
    assert!(
        s.is_available(),
        "these tests need a kernel with Landlock and seccomp: {s:?}"
    );
}

/// A backend in `root` confined to `mode`, with `home` as the home (and `$HOME`).
fn shell(root: &Path, mode: SandboxMode, home: &Path) -> LocalShellBackend {
    require_landlock();
    LocalShellBackend::new(root)
        .unwrap()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", home.display().to_string())
        .sandbox(
            Sandbox::new(mode)
                .home(Some(home.to_path_buf()))
                .with_allow_hint("--sandbox off"),
        )
}

async fn run(shell: &LocalShellBackend, command: &str) -> (String, Option<i32>) {
    let out = shell.execute(command, None).await.unwrap();
    (out.output, out.exit_code)
}

#[tokio::test]
async fn cannot_create_modify_or_delete_outside_the_writable_roots() {
    let project = tempfile::tempdir().unwrap();
    let out = outside();
    let o = out.path().canonicalize().unwrap();
    std::fs::write(o.join("victim.txt"), "original\n").unwrap();
    std::fs::write(project.path().join("mine.txt"), "mine\n").unwrap();
    let sh = shell(project.path(), SandboxMode::WorkspaceWrite, out.path());
    let o = o.display();
    let attempts = [
        format!("echo pwned > {o}/new.txt"),
        format!("echo pwned >> {o}/victim.txt"),
        format!("cp mine.txt {o}/copied.txt"),
        format!("cp mine.txt {o}/victim.txt"),
        format!("mv {o}/victim.txt stolen.txt"),
        format!("mv mine.txt {o}/moved.txt"),
        format!("rm -f {o}/victim.txt"),
        format!("mkdir {o}/newdir"),
        format!("ln -s {o}/victim.txt link && echo pwned > link"),
        format!("ln {o}/victim.txt hard && echo pwned >> hard"),
        format!("python3 -c \"open('{o}/py.txt', 'w').write('x')\""),
        format!("python3 -c \"open('{o}/victim.txt', 'a').write('pwned')\""),
        format!("python3 -c \"import os; os.remove('{o}/victim.txt')\""),
        format!("truncate -s 0 {o}/victim.txt"),
    ];
    for cmd in &attempts {
        let (text, code) = run(&sh, cmd).await;
        assert_ne!(code, Some(0), "{cmd} succeeded:\n{text}");
        assert!(
            text.contains("[sandbox] This was probably blocked by cairn's sandbox"),
            "{cmd}: no sandbox note in\n{text}"
        );
    }
    let o = out.path();
    assert_eq!(
        std::fs::read_to_string(o.join("victim.txt")).unwrap(),
        "original\n"
    );
    let names: Vec<String> = std::fs::read_dir(o)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["victim.txt"]);
    assert!(!project.path().join("stolen.txt").exists());
    assert!(project.path().join("mine.txt").exists());

    // The project and the temp directory stay writable, and a plain success has no note.
    let (text, code) = run(
        &sh,
        "echo ok > inside.txt && mkdir -p d/e && mv inside.txt d/e/ && t=$(mktemp) && echo tmp > $t && cat $t d/e/inside.txt && rm $t",
    )
    .await;
    assert_eq!((text.as_str(), code), ("tmp\nok\n", Some(0)));

    // The same command without the sandbox does write outside: the test can fail.
    let off = LocalShellBackend::new(project.path())
        .unwrap()
        .env("PATH", "/usr/bin:/bin");
    let (_, code) = run(&off, &format!("echo x > {}/control.txt", o.display())).await;
    assert_eq!(code, Some(0));
    assert!(o.join("control.txt").exists());
}

#[tokio::test]
async fn cannot_read_the_home_outside_the_project() {
    let home = outside();
    let h = home.path().canonicalize().unwrap();
    std::fs::create_dir_all(h.join(".ssh")).unwrap();
    std::fs::write(h.join(".ssh/id_ed25519"), "SECRET-KEY-MATERIAL\n").unwrap();
    std::fs::write(h.join(".bash_history"), "SECRET-HISTORY\n").unwrap();
    let project = h.join("project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(project.join("README"), "readable\n").unwrap();
    let sh = shell(&project, SandboxMode::WorkspaceWrite, &h);
    let snoop = "cat README; cat $HOME/.ssh/id_ed25519; cat ../.bash_history; ls $HOME; python3 -c \"print(open('$HOME/.ssh/id_ed25519').read())\"";
    let (text, _) = run(&sh, snoop).await;
    assert!(text.starts_with("readable\n"), "{text}");
    assert!(!text.contains("SECRET"), "{text}");
    assert!(text.contains("Permission denied"), "{text}");
    assert!(text.contains("[sandbox]"), "{text}");

    // Control: unsandboxed, the same command reads the planted key.
    let off = LocalShellBackend::new(&project)
        .unwrap()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", h.display().to_string());
    let (text, _) = run(&off, snoop).await;
    assert!(text.contains("SECRET-KEY-MATERIAL"), "{text}");
}

#[tokio::test]
async fn cannot_connect_to_a_loopback_socket_unless_the_network_is_allowed() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let project = tempfile::tempdir().unwrap();
    let home = outside();
    let connect = format!(
        "python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=5); print('connected')\""
    );
    let sh = shell(project.path(), SandboxMode::WorkspaceWrite, home.path());
    let (text, code) = run(&sh, &connect).await;
    assert_ne!(code, Some(0), "{text}");
    assert!(!text.contains("connected\n"), "{text}");
    assert!(text.contains("Operation not permitted"), "{text}");
    assert!(text.contains("no network"), "{text}");
    assert!(
        listener.accept().is_err(),
        "a connection reached the listener"
    );
    // AF_UNIX sockets still work (many tools talk to themselves over them).
    let (text, code) = run(
        &sh,
        "python3 -c \"import socket; a, b = socket.socketpair(); a.send(b'unix ok'); print(b.recv(9).decode())\"",
    )
    .await;
    assert_eq!((text.as_str(), code), ("unix ok\n", Some(0)));

    // With the network allowed the same command connects.
    let net = shell(project.path(), SandboxMode::WorkspaceWrite, home.path()).sandbox(
        Sandbox::new(SandboxMode::WorkspaceWrite)
            .home(Some(home.path().into()))
            .allow_net(true),
    );
    let (text, code) = run(&net, &connect).await;
    assert_eq!((text.as_str(), code), ("connected\n", Some(0)));
}

#[tokio::test]
async fn the_kernel_filter_is_on_and_inherited() {
    let project = tempfile::tempdir().unwrap();
    let home = outside();
    let sh = shell(project.path(), SandboxMode::WorkspaceWrite, home.path());
    // A grandchild (sh -> sh -> grep) reads its own status: seccomp filter mode, no new privs.
    let (text, code) = run(
        &sh,
        "sh -c 'grep -E \"^(Seccomp|NoNewPrivs):\" /proc/self/status'",
    )
    .await;
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("NoNewPrivs:\t1"), "{text}");
    assert!(text.contains("Seccomp:\t2"), "{text}");
}

#[tokio::test]
async fn read_only_mode_writes_nothing_but_reads_the_project() {
    let project = tempfile::tempdir().unwrap();
    std::fs::write(project.path().join("a.txt"), "content\n").unwrap();
    let home = outside();
    let sh = shell(project.path(), SandboxMode::ReadOnly, home.path());
    let (text, code) = run(&sh, "cat a.txt && echo > /dev/null && wc -l < a.txt").await;
    assert_eq!((text.as_str(), code), ("content\n1\n", Some(0)));
    let (text, code) = run(&sh, "echo new > b.txt").await;
    assert_ne!(code, Some(0));
    assert!(
        text.contains("read-only: commands cannot write files"),
        "{text}"
    );
    let (_, code) = run(&sh, "rm a.txt").await;
    assert_ne!(code, Some(0));
    assert!(project.path().join("a.txt").exists());
    assert!(!project.path().join("b.txt").exists());
}

#[tokio::test]
async fn builds_and_tests_a_small_python_project() {
    let project = tempfile::tempdir().unwrap();
    let p = project.path();
    std::fs::write(p.join("calc.py"), "def add(a, b):\n    return a + b\n").unwrap();
    std::fs::write(
        p.join("test_calc.py"),
        "import unittest\nfrom calc import add\n\nclass T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n",
    )
    .unwrap();
    let home = outside();
    let sh = shell(p, SandboxMode::WorkspaceWrite, home.path());
    let (text, code) = run(
        &sh,
        "python3 -m compileall -q . && python3 -m unittest -v 2>&1",
    )
    .await;
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("test_add"), "{text}");
    assert!(text.contains("OK"), "{text}");
    assert!(p.join("__pycache__").is_dir());
}

/// The toolchain that runs this test: cargo's directory, and the homes it reads.
fn toolchain() -> (PathBuf, Vec<(String, String)>) {
    let cargo = PathBuf::from(std::env::var("CARGO").expect("cargo sets CARGO for tests"));
    let bin = cargo.parent().unwrap().to_path_buf();
    let env = ["CARGO_HOME", "RUSTUP_HOME", "RUSTUP_TOOLCHAIN"]
        .into_iter()
        .filter_map(|k| std::env::var(k).ok().map(|v| (k.to_owned(), v)))
        .collect();
    (bin, env)
}

#[tokio::test]
async fn builds_and_tests_a_small_rust_project() {
    let project = tempfile::tempdir().unwrap();
    let p = project.path();
    std::fs::create_dir_all(p.join("src")).unwrap();
    std::fs::write(
        p.join("Cargo.toml"),
        "[package]\nname = \"tiny\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\n",
    )
    .unwrap();
    std::fs::write(
        p.join("src/lib.rs"),
        "pub fn double(x: u32) -> u32 { x * 2 }\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn doubles() { assert_eq!(super::double(21), 42); }\n}\n",
    )
    .unwrap();
    let (bin, env) = toolchain();
    // The real home: its ~/.cargo and ~/.rustup are readable, nothing else of it.
    let home = PathBuf::from(std::env::var("HOME").unwrap());
    require_landlock();
    let mut sh = LocalShellBackend::new(p)
        .unwrap()
        .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
        .env("HOME", home.display().to_string())
        .sandbox(Sandbox::new(SandboxMode::WorkspaceWrite).home(Some(home)));
    for (k, v) in env {
        sh = sh.env(k, v);
    }
    let out = sh
        .execute(
            "cargo test --offline 2>&1",
            Some(std::time::Duration::from_secs(600)),
        )
        .await
        .unwrap();
    assert_eq!(out.exit_code, Some(0), "{}", out.output);
    assert!(
        out.output.contains("test tests::doubles ... ok"),
        "{}",
        out.output
    );
    assert!(p.join("target").is_dir());
}

#[tokio::test]
async fn a_timed_out_command_dies_with_its_whole_process_group() {
    let project = tempfile::tempdir().unwrap();
    let home = outside();
    let sh = shell(project.path(), SandboxMode::WorkspaceWrite, home.path());
    let err = sh
        .execute(
            "sleep 1000 & echo $! > bg.pid; sleep 1000",
            Some(std::time::Duration::from_secs(1)),
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("timed out"), "{err}");
    let pid: i32 = std::fs::read_to_string(project.path().join("bg.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // The kill is sent before `execute` returns; wait for the kernel to finish it (a process
    // that survived would stay in state S forever and fail this loop's check below).
    let gone = |pid: i32| match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .and_then(|rest| rest.split_whitespace().next())
            .is_some_and(|state| state == "Z" || state == "X"),
    };
    let mut waited = 0;
    while !gone(pid) && waited < 500 {
        std::thread::sleep(std::time::Duration::from_millis(10));
        waited += 1;
    }
    assert!(
        gone(pid),
        "the background `sleep 1000` outlived the command"
    );
}

#[tokio::test]
async fn the_exec_policy_reviews_each_execute_call() {
    let project = tempfile::tempdir().unwrap();
    let backend = LocalShellBackend::new(project.path())
        .unwrap()
        .exec_policy(ExecPolicy::with_defaults());
    let tool = execute_tool(Arc::new(backend));
    let review = |c: &str| tool.review_call(&json!({ "command": c }));
    assert_eq!(review("git status"), CallReview::Allow);
    assert_eq!(review("cargo test -q | tail -n 5"), CallReview::Allow);
    assert_eq!(review("rm -rf build"), CallReview::AsConfigured);
    assert_eq!(review("echo $(id)"), CallReview::AsConfigured);
    match review("rm -rf /") {
        CallReview::Forbid { reason } => {
            assert!(reason.contains("rule `forbid rm -rf /`"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
    // Without a policy every call is left to the configured approvals.
    let plain = execute_tool(Arc::new(LocalShellBackend::new(project.path()).unwrap()));
    assert_eq!(
        plain.review_call(&json!({"command": "rm -rf /"})),
        CallReview::AsConfigured
    );
}
