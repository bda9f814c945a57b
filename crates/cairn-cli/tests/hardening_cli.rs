//! Issue #16 item 17: an `AGENTS.md` symlink that leads outside the root is skipped with a
//! notice instead of failing the run; `--help` says what `--root` confines and documents the
//! exit status of a run whose guarded calls were all rejected. Hermetic: a fake OpenAI server on
//! 127.0.0.1.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use assert_cmd::Command;
use cairn_test_support::blocking::{FakeOpenAI, Reply};

#[cfg(unix)]
#[test]
fn an_agents_md_symlink_out_of_the_root_is_skipped_with_a_notice() {
    let server = FakeOpenAI::start(|_| Reply::Text("fine".into()));
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("private.md"), "OUTSIDE-SECRET").unwrap();
    std::os::unix::fs::symlink(
        outside.path().join("private.md"),
        dir.path().join("AGENTS.md"),
    )
    .unwrap();
    let out = Command::cargo_bin("cairn")
        .unwrap()
        .current_dir(dir.path())
        .env_clear()
        .env("OPENAI_BASE_URL", &server.base_url)
        .env("NO_COLOR", "1")
        .args(["run", "-y", "-m", "openai:fake", "hello"])
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("not loading AGENTS.md"), "{stderr}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("fine"));
    let bodies = server.bodies();
    assert!(!bodies[0].to_string().contains("OUTSIDE-SECRET"));
}

#[test]
fn an_agents_md_inside_the_root_is_loaded() {
    let server = FakeOpenAI::start(|_| Reply::Text("fine".into()));
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("AGENTS.md"), "Use tabs, MEMORY-MARK.").unwrap();
    Command::cargo_bin("cairn")
        .unwrap()
        .current_dir(dir.path())
        .env_clear()
        .env("OPENAI_BASE_URL", &server.base_url)
        .args(["run", "-y", "-m", "openai:fake", "hello"])
        .timeout(std::time::Duration::from_secs(60))
        .assert()
        .success();
    assert!(server.bodies()[0].to_string().contains("MEMORY-MARK"));
}

#[test]
fn help_says_what_root_confines_and_documents_exit_status_3() {
    let out = Command::cargo_bin("cairn")
        .unwrap()
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(
        help.contains("3 the agent asked to write, edit or run"),
        "{help}"
    );
    // Commands are confined by the sandbox (issue #13), and the help says how far.
    assert!(help.contains("confined by --sandbox"), "{help}");
    assert!(
        help.contains("off (they run with your full rights"),
        "{help}"
    );
    assert!(
        !help.contains("it cannot read or write files outside it"),
        "{help}"
    );
}
