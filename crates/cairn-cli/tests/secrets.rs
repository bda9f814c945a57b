//! The API key stays out of reach of the agent's commands and out of what cairn prints
//! (issue #16 items 9 and 10). Hermetic: a fake OpenAI server on 127.0.0.1.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use assert_cmd::Command;
use cairn_test_support::blocking::{
    FakeOpenAI, Reply, closed_port, has_tool_result, last_tool_result,
};
use serde_json::json;

const KEY: &str = "sk-test-SECRET";

/// Reads the environment and command line of every ancestor of the shell (cairn, and a
/// command supervisor between them if there is one), as a prompt-injected model would.
const SNOOP: &str = r#"p=$PPID
while [ "$(cat /proc/$p/comm)" = cairn ]; do
  echo "== $p"
  cat /proc/$p/environ | tr '\0' '\n'
  grep -a sk-test /proc/$p/cmdline /proc/$p/environ
  p=$(sed 's/.*) //' /proc/$p/stat | cut -d' ' -f2)
done 2>&1
echo SNOOP-DONE"#;

fn cairn(server: &FakeOpenAI, dir: &std::path::Path) -> Command {
    let mut c = server.command(env!("CARGO_BIN_EXE_cairn"), dir);
    c.env("OPENAI_API_KEY", KEY);
    let mut c = Command::from_std(c);
    c.timeout(std::time::Duration::from_secs(60));
    c
}

#[test]
fn execute_cannot_read_the_api_key_from_cairns_environment() {
    let server = FakeOpenAI::start(|body| {
        if has_tool_result(body) {
            Reply::Text("done".into())
        } else {
            Reply::Call("execute", json!({"command": SNOOP}))
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let out = cairn(&server, dir.path())
        .args(["run", "--yes", "-m", "openai:fake", "snoop"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let bodies = server.bodies();
    assert_eq!(bodies.len(), 2, "{bodies:?}");
    let result = last_tool_result(&bodies[1]).unwrap();
    // The command ran and looked at cairn itself.
    assert!(result.contains("SNOOP-DONE"), "{result}");
    assert!(result.contains("== "), "{result}");
    eprintln!("RESULT:\n{result}");
    assert!(
        !result.contains(KEY),
        "the key leaked to a command:\n{result}"
    );
    assert!(
        !result.contains("SECRET"),
        "the key leaked to a command:\n{result}"
    );
    // The server still got the key, on every request.
    let heads = server.headers.lock().unwrap().clone();
    assert_eq!(heads.len(), 2);
    for h in &heads {
        assert!(
            h.iter()
                .any(|l| l.eq_ignore_ascii_case(&format!("authorization: Bearer {KEY}"))),
            "{h:?}"
        );
    }
    // And nothing cairn printed shows it.
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!stdout.contains(KEY) && !stderr.contains(KEY));
}

#[test]
fn the_key_and_url_credentials_are_redacted_from_what_cairn_prints() {
    // A model (or a server error body) that echoes the key back.
    let server = FakeOpenAI::start(|body| {
        if has_tool_result(body) {
            Reply::Text(format!(
                "your key is {KEY}, via http://bob:hunter22@example.com/x"
            ))
        } else {
            Reply::Call("execute", json!({"command": format!("echo {KEY}")}))
        }
    });
    let dir = tempfile::tempdir().unwrap();
    for json in [false, true] {
        let mut c = cairn(&server, dir.path());
        c.args(["run", "--yes", "-m", "openai:fake", "echo"]);
        if json {
            c.arg("--json");
        }
        let out = c.output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        assert!(!stdout.contains(KEY), "{stdout}");
        assert!(!stderr.contains(KEY), "{stderr}");
        assert!(!stdout.contains("hunter22"), "{stdout}");
        assert!(stdout.contains("[redacted]"), "{stdout}");
        assert!(stdout.contains("http://***@example.com/x"), "{stdout}");
    }
}

#[test]
fn a_password_in_the_base_url_is_not_printed() {
    let dir = tempfile::tempdir().unwrap();
    // Nothing listens on this port (bound, then dropped): the connection error names the URL.
    let port = closed_port();
    let out = Command::cargo_bin("cairn")
        .unwrap()
        .current_dir(dir.path())
        .env_clear()
        .env(
            "OPENAI_BASE_URL",
            format!("http://alice:pa55word-xyz@127.0.0.1:{port}/v1"),
        )
        .env("CAIRN_TIMEOUT", "5")
        .env("NO_COLOR", "1")
        .args(["run", "-y", "-v", "-m", "openai:fake", "hello"])
        .timeout(std::time::Duration::from_secs(120))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(all.contains("cairn: error:"), "{all}");
    assert!(!all.contains("pa55word-xyz"), "{all}");
    assert!(!all.contains("alice:"), "{all}");
}
