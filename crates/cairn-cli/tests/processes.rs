//! Issue #16 item 6: the processes of the agent's commands die with the command and with
//! cairn — on Ctrl-C (`SIGINT`), `SIGTERM` and even `SIGKILL` — grandchildren and `setsid`
//! children included. Each case runs the real binary against the fake OpenAI server, has the
//! model run one long command, and scans `/proc` for the command's processes afterwards.

#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use cairn_test_support::blocking::{FakeOpenAI, Reply, has_tool_result};
use cairn_test_support::process::{holders, marker, wait_gone};
use rustix::process::{Pid, Signal, kill_process};
use serde_json::json;

/// The markers of one command: a background job, a `setsid` grandchild (its own session and
/// process group) and the foreground part.
struct Tree {
    bg: String,
    grand: String,
    fg: String,
}

impl Tree {
    fn new() -> Tree {
        Tree {
            bg: marker(),
            grand: marker(),
            fg: marker(),
        }
    }

    fn command(&self) -> String {
        format!(
            "sleep {} & setsid sleep {} & sleep {}",
            self.bg, self.grand, self.fg
        )
    }

    fn marks(&self) -> [&str; 3] {
        [&self.bg, &self.grand, &self.fg]
    }

    /// Waits (at most 60 s: cairn starts, asks the model, runs the command) until every
    /// process of the command runs.
    fn wait_running(&self, cairn: &mut Child) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.marks().iter().any(|m| holders(m).is_empty()) {
            if let Some(status) = cairn.try_wait().unwrap() {
                panic!("cairn exited before the command ran: {status}");
            }
            assert!(Instant::now() < deadline, "the command never started");
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// Waits (at most `wait`) until no process of the command is left; fails naming
    /// survivors (and kills them, so a failing run leaves nothing behind).
    fn assert_gone_within(&self, wait: Duration) {
        if let Err(left) = wait_gone(&self.marks(), wait) {
            panic!("processes of the command survived cairn (waited {wait:?}): {left:?}");
        }
    }

    /// Waits up to 20 s (a loaded 2-core CI machine): what cairn left to a supervisor after it
    /// died dies soon after it.
    fn assert_all_gone(&self) {
        self.assert_gone_within(Duration::from_secs(20));
    }
}

/// A fake model that runs `command` once, then answers.
fn server(command: String) -> FakeOpenAI {
    FakeOpenAI::start(move |body| {
        if has_tool_result(body) {
            Reply::Text("done".into())
        } else {
            Reply::Call("execute", json!({"command": command, "timeout": 600}))
        }
    })
}

/// `cairn run --yes` in `dir` against `server`.
fn start(server: &FakeOpenAI, dir: &std::path::Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(["run", "--yes", "--model", "openai:fake", "run the command"])
        .current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", dir)
        .env("OPENAI_BASE_URL", &server.base_url)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Waits (at most 20 s) for cairn to exit.
fn wait_exit(cairn: &mut Child) -> ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(status) = cairn.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = cairn.kill();
            panic!("cairn did not exit");
        }
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// Runs one long command, signals cairn with `signal` while it runs, and checks that cairn
/// exits and every process of the command is gone: at once when cairn could handle the
/// signal (it kills them and waits before it exits), within a few seconds after `SIGKILL`
/// (the supervisor notices).
fn signal_case(signal: Signal) -> ExitStatus {
    let tree = Tree::new();
    let server = server(tree.command());
    let dir = tempfile::tempdir().unwrap();
    let mut cairn = start(&server, dir.path());
    tree.wait_running(&mut cairn);
    kill_process(Pid::from_raw(cairn.id() as i32).unwrap(), signal).unwrap();
    let status = wait_exit(&mut cairn);
    if signal == Signal::KILL {
        tree.assert_all_gone();
    } else {
        tree.assert_gone_within(Duration::ZERO);
    }
    status
}

#[test]
fn ctrl_c_kills_the_whole_command_tree_before_exiting() {
    let status = signal_case(Signal::INT);
    assert_eq!(status.code(), Some(130), "{status}");
}

#[test]
fn sigterm_kills_the_whole_command_tree_before_exiting() {
    let status = signal_case(Signal::TERM);
    assert_eq!(status.code(), Some(143), "{status}");
}

#[test]
fn sigkill_of_cairn_still_kills_the_whole_command_tree() {
    use std::os::unix::process::ExitStatusExt;
    let status = signal_case(Signal::KILL);
    assert_eq!(status.signal(), Some(9), "{status}");
}

/// Without any signal: a command that leaves a background job and a `setsid` child behind
/// returns when its shell exits (not at the 600 s timeout), and both die with it.
#[test]
fn leftovers_of_a_finished_command_die_and_the_run_goes_on() {
    let (bg, grand) = (marker(), marker());
    let server = server(format!("sleep {bg} & setsid sleep {grand} & echo started"));
    let dir = tempfile::tempdir().unwrap();
    let mut cairn = start(&server, dir.path());
    let status = wait_exit(&mut cairn);
    assert!(status.success(), "{status}");
    let result = server
        .bodies()
        .iter()
        .find_map(cairn_test_support::blocking::last_tool_result)
        .unwrap();
    assert!(result.starts_with("started\n"), "{result}");
    let tree = Tree {
        bg,
        grand,
        fg: marker(),
    };
    tree.assert_all_gone();
}
