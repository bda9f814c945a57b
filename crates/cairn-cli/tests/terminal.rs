//! The `cairn` binary in a real pseudo-terminal, against a hostile scripted model (issue #16
//! items 3, 4, 5 and 17): approvals cannot be spoofed with control characters, show the whole
//! command, and nothing the model or a tool produces reaches the terminal raw.
//!
//! The test is the terminal: it opens a pty pair (`rustix::pty`), runs cairn with the slave as
//! stdin, stdout and stderr, reads every byte cairn writes from the master and types the
//! answers into it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::fs::OpenOptionsExt;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cairn_test_support::blocking::{FakeOpenAI, Reply};
use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
use rustix::termios::{Winsize, tcsetwinsize};
use serde_json::json;

/// A command that shows `ls -la` on a raw terminal (CR, then "erase line") while it runs
/// `touch PWNED`.
const SPOOF: &str = "ls -la\r\x1b[2Ktouch PWNED";

/// A command whose dangerous part starts far past character 99.
fn long_command() -> String {
    format!("echo {} ; touch HIDDEN_TAIL", "A".repeat(280))
}

/// File content with a line that a raw terminal would erase.
const HIDDEN_LINE: &str = "hello\nrm -rf ~\r\x1b[2K\nbye\n";

/// Model text with a window-title change, an OSC 52 clipboard write and a screen clear.
const HOSTILE_TEXT: &str =
    "done \x1b]0;pwned-title\x07 \x1b]52;c;cHduZWQ=\x07 \x1b[2J\x1b[H\u{202e}reversed";

fn tool_results(body: &serde_json::Value) -> usize {
    body["messages"]
        .as_array()
        .map_or(0, |m| m.iter().filter(|m| m["role"] == "tool").count())
}

fn hostile_model() -> FakeOpenAI {
    // The successful read in between keeps the agent under its limit of three failing steps
    // in a row.
    FakeOpenAI::start(|body| match tool_results(body) {
        0 => Reply::Call("execute", json!({"command": SPOOF})),
        1 => Reply::Call("read_file", json!({"path": "/evil.txt"})),
        2 => Reply::Call("execute", json!({"command": long_command()})),
        3 => Reply::Call(
            "write_file",
            json!({"path": "/notes.txt", "content": HIDDEN_LINE}),
        ),
        _ => Reply::Text(HOSTILE_TEXT.into()),
    })
}

/// A pseudo-terminal running cairn: what it printed so far, and a way to type.
struct Pty {
    master: std::fs::File,
    screen: Arc<Mutex<Vec<u8>>>,
    child: std::process::Child,
}

impl Pty {
    fn spawn(mut cmd: std::process::Command) -> Pty {
        let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY).unwrap();
        grantpt(&master).unwrap();
        unlockpt(&master).unwrap();
        tcsetwinsize(
            &master,
            Winsize {
                ws_row: 50,
                ws_col: 80,
                ws_xpixel: 0,
                ws_ypixel: 0,
            },
        )
        .unwrap();
        let name = ptsname(&master, Vec::new()).unwrap();
        let slave = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(rustix::fs::OFlags::NOCTTY.bits() as i32)
            .open(name.to_str().unwrap())
            .unwrap();
        let fd = |f: &std::fs::File| Stdio::from(OwnedFd::from(f.try_clone().unwrap()));
        let child = cmd
            .stdin(fd(&slave))
            .stdout(fd(&slave))
            .stderr(fd(&slave))
            .spawn()
            .unwrap();
        drop(slave);
        let master = std::fs::File::from(master);
        let screen = Arc::new(Mutex::new(Vec::new()));
        let mut reader = master.try_clone().unwrap();
        let sink = Arc::clone(&screen);
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            // Ends with EIO once cairn exited and closed the slave.
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        Pty {
            master,
            screen,
            child,
        }
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.screen.lock().unwrap()).into_owned()
    }

    /// Waits until the screen holds `needle` `count` times.
    fn wait_for(&self, needle: &str, count: usize) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.text().matches(needle).count() < count {
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {needle:?} x{count}; screen:\n{}",
                self.text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn type_line(&mut self, line: &str) {
        self.master
            .write_all(format!("{line}\n").as_bytes())
            .unwrap();
        self.master.flush().unwrap();
    }

    fn wait_exit(&mut self) -> Option<i32> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                // Let the reader drain what is left.
                std::thread::sleep(Duration::from_millis(100));
                return status.code();
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("cairn did not exit; screen:\n{}", self.text());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

#[test]
fn approvals_and_output_cannot_be_spoofed_on_a_terminal() {
    let server = hostile_model();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("evil.txt"),
        "line one\n\x1b]52;c;Y2xpcA==\x07\x1b[1A\x1b[2Kfake ok\n",
    )
    .unwrap();
    let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("cairn"));
    cmd.current_dir(dir.path())
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", dir.path())
        .env("TERM", "xterm")
        .env("NO_COLOR", "1")
        .env("OPENAI_BASE_URL", &server.base_url)
        .args(["run", "-m", "openai:fake", "look around"]);
    let mut pty = Pty::spawn(cmd);

    // Three guarded calls: reject each (with an empty reason).
    for i in 1..=3 {
        pty.wait_for("[r]eject", i);
        pty.type_line("r");
        pty.wait_for("reason for the agent (optional) > ", i);
        pty.type_line("");
    }
    let code = pty.wait_exit();
    let raw = pty.screen.lock().unwrap().clone();
    let screen = pty.text();

    // Item 3 and 5: not one escape character from the model, a file name or a file reached the
    // terminal (colors are off, so cairn itself sends none either).
    assert!(
        !raw.contains(&0x1b) && !raw.contains(&0x07),
        "raw control characters on the terminal:\n{screen:?}"
    );
    assert!(!screen.contains('\u{202e}'), "{screen:?}");
    // The spoofing command is shown with its control characters escaped, and flagged.
    assert!(screen.contains(r"$ ls -la\r\x1b[2Ktouch PWNED"), "{screen}");
    assert!(screen.contains("⚠ the call contains control"), "{screen}");
    // Item 4: the whole long command is shown, wrapped to the 80 columns of the terminal.
    let unwrapped = screen.replace("\r\n      ", "");
    assert!(
        unwrapped.contains(&format!("$ {}", long_command())),
        "{screen}"
    );
    assert!(
        screen
            .lines()
            .filter(|l| l.starts_with("    ") && !l.starts_with("    ✗"))
            .all(|l| l.trim_end_matches('\r').chars().count() <= 80),
        "a line of a question is wider than the terminal:\n{screen}"
    );
    // The file content's erased line is visible, and the exact size is stated.
    assert!(screen.contains(r"│ rm -rf ~\r\x1b[2K"), "{screen}");
    assert!(
        screen.contains(&format!(
            "create /notes.txt (3 lines, {} bytes)",
            HIDDEN_LINE.len()
        )),
        "{screen}"
    );
    // Item 5: the tool result preview and the model's text are escaped.
    assert!(screen.contains(r"\x1b]52;c;Y2xpcA==\x07"), "{screen}");
    assert!(screen.contains(r"done \x1b]0;pwned-title\x07"), "{screen}");
    assert!(screen.contains(r"\u{202e}reversed"), "{screen}");
    // Nothing ran.
    for f in ["PWNED", "HIDDEN_TAIL", "notes.txt"] {
        assert!(!dir.path().join(f).exists(), "{f} was created");
    }
    // Item 17: every guarded call was rejected: a distinct exit status.
    assert_eq!(code, Some(3), "{screen}");
    assert!(
        screen.contains("every file write, edit and command"),
        "{screen}"
    );
}

#[test]
fn an_approved_long_command_runs_whole_and_exits_0() {
    let server = FakeOpenAI::start(|body| match tool_results(body) {
        0 => Reply::Call("execute", json!({"command": long_command()})),
        _ => Reply::Text("ok".into()),
    });
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("cairn"));
    cmd.current_dir(dir.path())
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", dir.path())
        .env("NO_COLOR", "1")
        .env("OPENAI_BASE_URL", &server.base_url)
        .args(["run", "-m", "openai:fake", "go"]);
    let mut pty = Pty::spawn(cmd);
    pty.wait_for("[a]pprove", 1);
    pty.type_line("a");
    let code = pty.wait_exit();
    let screen = pty.text();
    assert!(
        screen
            .replace("\r\n      ", "")
            .contains(&format!("$ {}", long_command())),
        "{screen}"
    );
    assert!(dir.path().join("HIDDEN_TAIL").exists(), "{screen}");
    assert_eq!(code, Some(0), "{screen}");
}
