//! Process-tree control for [`LocalShellBackend`](super::LocalShellBackend): the command
//! supervisor, and the signal and `/proc` helpers both sides use.
//!
//! # The problem
//! A command is `/bin/sh -c CMD`, and `CMD` may start anything: background jobs
//! (`sleep 1000 &`), jobs that leave the process group (`setsid …`), daemons that fork twice.
//! Killing only the shell leaves all of those running; killing its process group misses the
//! `setsid` ones; and when cairn itself dies (Ctrl-C, `SIGTERM`, `SIGKILL`), nothing is left to
//! kill them at all. Background children also hold the output pipes open, so reading to the end
//! of the output waits for them.
//!
//! # The supervisor
//! With [`ShellConfig::supervisor`](super::ShellConfig::supervisor) set, each command runs under a
//! small supervisor process: a program that calls [`supervise_main`] (the `cairn` binary
//! re-executed as `cairn __supervise /bin/sh -c CMD`). It:
//! 1. makes itself a **child subreaper** (`PR_SET_CHILD_SUBREAPER`, Linux), so every process
//!    the command starts and then orphans (double forks, `setsid` children) is re-parented to the
//!    supervisor instead of to init, and stays findable as a descendant;
//! 2. starts the shell in a **new process group**, with its own stdout and stderr (the pipes
//!    cairn reads) and no stdin;
//! 3. watches **its stdin**, a pipe whose write end only cairn holds. End of file (or any byte)
//!    means stop: cairn closed it on purpose (timeout, cancelled call, shutdown) or cairn died —
//!    the kernel closes the pipe however cairn ends, `SIGKILL` included. It then kills the tree;
//! 4. when the shell exits (the foreground part of the command is done), **kills what is left**:
//!    the shell's process group, then every descendant found by walking the `ppid` links in
//!    `/proc` (orphans point at the supervisor), repeating until none is left, reaping them all;
//! 5. exits with the shell's exit status (dying by `SIGKILL` when the shell died by a signal, so
//!    the caller sees "no exit code" as without a supervisor). The output pipes close as the
//!    tree dies, so `sleep 1000 & echo started` returns `started` at once.
//!
//! The supervisor runs in a process group of its own, so a terminal's Ctrl-C (sent to cairn's
//! foreground group) does not kill it before cairn has had a chance to stop the command cleanly.
//! `PR_SET_PDEATHSIG` is deliberately not the mechanism: it fires when the *thread* that spawned
//! the child exits, and the async runtime's threads come and go; the stdin pipe has no such
//! trap and also covers `SIGKILL`.
//!
//! # Without a supervisor
//! Plain library use (no supervisor configured) still runs the shell in its own process group.
//! When the shell exits, the group is killed with the `kill` system call and the output is read
//! for at most a short grace period more; on timeout or cancellation the shell's descendants
//! (found in `/proc` while the shell is still alive) and its group are killed. What this mode
//! cannot catch: a `setsid` child whose shell already exited (it was re-parented to init), and
//! anything left behind when the host process is killed with `SIGKILL`. Use a supervisor for
//! those.
//!
//! Signals are sent with the `kill` system call (through `rustix`), never by running a `kill`
//! program.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

/// The first argument that makes the `cairn` binary act as a command supervisor
/// (`cairn __supervise /bin/sh -c CMD`); binaries that honour it call [`supervise_main`] with
/// the arguments after it, before doing anything else.
pub const SUPERVISE_ARG: &str = "__supervise";

/// The program a [`LocalShellBackend`](super::LocalShellBackend) starts commands under: it is
/// run as `program args... /bin/sh -c CMD` and must behave as [`supervise_main`] does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Supervisor {
    /// The program (for the `cairn` binary: its own path).
    pub program: PathBuf,
    /// Arguments before the shell's (for the `cairn` binary: [`SUPERVISE_ARG`]).
    pub args: Vec<OsString>,
}

impl Supervisor {
    /// `program __supervise`: a binary that dispatches [`SUPERVISE_ARG`] to [`supervise_main`].
    pub fn new(program: impl Into<PathBuf>) -> Self {
        Supervisor {
            program: program.into(),
            args: vec![OsString::from(SUPERVISE_ARG)],
        }
    }

    /// The running executable as the supervisor (for binaries that dispatch [`SUPERVISE_ARG`]
    /// early in `main`).
    pub fn current_exe() -> std::io::Result<Self> {
        Ok(Self::new(std::env::current_exe()?))
    }
}

/// The supervisor's `main`: runs `args` (a program and its arguments, optionally after `--`)
/// as a supervised command and returns its exit status. See the [module docs](self).
///
/// Call it first thing in `main` when the first argument is [`SUPERVISE_ARG`], with the
/// arguments after it, and return its result from `main`:
///
/// ```no_run
/// fn main() -> std::process::ExitCode {
///     let mut args = std::env::args_os().skip(1);
///     if args.next().is_some_and(|a| a == cairn_deep::backend::SUPERVISE_ARG) {
///         return cairn_deep::backend::supervise_main(args);
///     }
///     // … the program's own work …
///     std::process::ExitCode::SUCCESS
/// }
/// ```
pub fn supervise_main(args: impl IntoIterator<Item = OsString>) -> ExitCode {
    let mut args = args.into_iter().peekable();
    if args.peek().is_some_and(|a| a == "--") {
        args.next();
    }
    let Some(program) = args.next() else {
        eprintln!("cairn: {SUPERVISE_ARG}: no command given");
        return ExitCode::from(2);
    };
    imp::supervise(program, args.collect())
}

#[cfg(unix)]
mod imp {
    use std::ffi::OsString;
    use std::io::Read;
    use std::os::unix::process::CommandExt;
    use std::process::{ExitCode, Stdio};
    use std::time::{Duration, Instant};

    use rustix::process::{Signal, WaitOptions, getpid, wait};

    use super::tree;

    /// How long the supervisor keeps killing and reaping after the shell exits before it gives
    /// up on processes that will not die (stuck in uninterruptible sleep).
    const CLEANUP_LIMIT: Duration = Duration::from_secs(5);

    pub(super) fn supervise(program: OsString, args: Vec<OsString>) -> ExitCode {
        #[cfg(any(target_os = "linux", target_os = "android"))]
        if let Err(e) = rustix::process::set_child_subreaper(Some(getpid())) {
            // Still useful without it: the process group is killed, only `setsid` orphans of an
            // exited shell can escape.
            eprintln!("cairn: supervisor: cannot become a subreaper: {e}");
        }
        let shell = std::process::Command::new(&program)
            .args(&args)
            .stdin(Stdio::null())
            .process_group(0)
            .spawn();
        let shell = match shell {
            Ok(s) => s,
            Err(e) => {
                eprintln!(
                    "cairn: supervisor: cannot start {}: {e}",
                    program.to_string_lossy()
                );
                return ExitCode::from(127);
            }
        };
        let Some(shell_pid) = tree::pid(shell.id()) else {
            return ExitCode::from(127);
        };
        // The shell is reaped below with wait(), never through `shell` (dropping a std Child
        // neither kills nor waits).
        drop(shell);

        // Stop when cairn closes our stdin or dies (the kernel closes the pipe either way).
        std::thread::spawn(move || {
            let mut buf = [0u8; 64];
            loop {
                match std::io::stdin().read(&mut buf) {
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    _ => break,
                }
            }
            tree::kill_group(shell_pid);
            for p in tree::descendants(getpid().as_raw_pid()) {
                tree::kill(p);
            }
        });

        // Reap everything (orphans re-parented to us included) until the shell itself exits.
        let status = loop {
            match wait(WaitOptions::empty()) {
                Ok(Some((pid, status))) if pid == shell_pid => break Some(status),
                Ok(_) => continue,
                Err(rustix::io::Errno::INTR) => continue,
                Err(_) => break None,
            }
        };
        cleanup(shell_pid);
        match status.and_then(|s| s.exit_status()) {
            Some(code) => ExitCode::from(u8::try_from(code & 0xff).unwrap_or(1)),
            None => {
                // Killed by a signal: die the same way, so the caller sees no exit code.
                let _ = rustix::process::kill_process(getpid(), Signal::KILL);
                ExitCode::from(137)
            }
        }
    }

    /// Kills the shell's group and every descendant, and reaps them, until none is left.
    fn cleanup(shell_pid: rustix::process::Pid) {
        let me = getpid().as_raw_pid();
        let deadline = Instant::now() + CLEANUP_LIMIT;
        loop {
            tree::kill_group(shell_pid);
            let left = tree::descendants(me);
            for p in &left {
                tree::kill(*p);
            }
            while let Ok(Some(_)) = wait(WaitOptions::NOHANG) {}
            if left.is_empty() || Instant::now() >= deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

#[cfg(not(unix))]
mod imp {
    use std::ffi::OsString;
    use std::process::ExitCode;

    pub(super) fn supervise(program: OsString, args: Vec<OsString>) -> ExitCode {
        match std::process::Command::new(program).args(args).status() {
            Ok(s) => ExitCode::from(s.code().and_then(|c| u8::try_from(c).ok()).unwrap_or(1)),
            Err(e) => {
                eprintln!("cairn: supervisor: {e}");
                ExitCode::from(127)
            }
        }
    }
}

/// Process-tree helpers: `kill` without a program, and descendants by `ppid` links in `/proc`.
#[cfg(unix)]
pub(crate) mod tree {
    use rustix::process::{Pid, Signal, kill_process, kill_process_group};

    /// A pid that is safe to signal: positive and never init (`kill(-1)` / `kill(1)` would
    /// reach far more than one command).
    pub(crate) fn pid(raw: impl TryInto<i32>) -> Option<Pid> {
        let raw: i32 = raw.try_into().ok()?;
        if raw > 1 { Pid::from_raw(raw) } else { None }
    }

    /// `SIGKILL` to one process; gone already is fine.
    pub(crate) fn kill(raw: i32) {
        if let Some(p) = pid(raw) {
            let _ = kill_process(p, Signal::KILL);
        }
    }

    /// `SIGKILL` to a process group; an empty group is fine.
    pub(crate) fn kill_group(pgid: Pid) {
        if pgid.as_raw_pid() > 1 {
            let _ = kill_process_group(pgid, Signal::KILL);
        }
    }

    /// Every live descendant of `root` (children, their children, …), by the `ppid` links in
    /// `/proc`; empty where there is no `/proc`. Zombies count until they are reaped.
    pub(crate) fn descendants(root: i32) -> Vec<i32> {
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        let mut children: std::collections::HashMap<i32, Vec<i32>> = Default::default();
        for entry in dir.flatten() {
            let Some(p) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<i32>().ok())
            else {
                continue;
            };
            if let Some((_, ppid)) = stat(p) {
                children.entry(ppid).or_default().push(p);
            }
        }
        let mut out = Vec::new();
        let mut stack = vec![root];
        while let Some(p) = stack.pop() {
            if let Some(kids) = children.remove(&p) {
                for k in kids {
                    out.push(k);
                    stack.push(k);
                }
            }
        }
        out
    }

    /// A process's state letter and parent pid from `/proc/PID/stat`.
    pub(crate) fn stat(raw: i32) -> Option<(char, i32)> {
        let text = std::fs::read_to_string(format!("/proc/{raw}/stat")).ok()?;
        // The command name (field 2) is in parentheses and may itself hold ") ".
        let rest = &text[text.rfind(')')? + 1..];
        let mut fields = rest.split_whitespace();
        let state = fields.next()?.chars().next()?;
        let ppid = fields.next()?.parse().ok()?;
        Some((state, ppid))
    }

    /// Whether the process has exited (gone, or a zombie not yet reaped). Without `/proc`, asks
    /// the kernel whether it can be signalled.
    pub(crate) fn exited(raw: i32) -> bool {
        if std::path::Path::new("/proc/self/stat").exists() {
            !matches!(stat(raw), Some((s, _)) if s != 'Z' && s != 'X')
        } else {
            pid(raw).is_none_or(|p| rustix::process::test_kill_process(p).is_err())
        }
    }
}
