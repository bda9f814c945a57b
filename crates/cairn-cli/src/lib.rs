//! # cairn-cli
//!
//! The `cairn` command: one deep agent (cairn-deep) on the files of a directory, streaming what
//! it does, on the embedded local model (cairn-local) or any OpenAI-compatible / Ollama endpoint
//! (cairn-providers). The binary is thin: flags ([`args`]), model choice ([`model`]), the local
//! model's harness profile ([`profile`]), terminal approvals ([`approval`]), output ([`render`]),
//! and the run and chat loops ([`app`]).

pub mod app;
pub mod approval;
pub mod args;
pub mod cap;
pub mod mcp;
pub mod model;
pub mod profile;
pub mod render;
pub mod sandbox;
pub mod secrets;
pub mod serve;
pub mod threads;

use std::process::ExitCode;
use std::sync::OnceLock;
use std::time::Duration;

use cairn_deep::backend::{SUPERVISE_ARG, Supervisor, supervise_main, terminate_all_commands};
use clap::Parser;

/// The exit status after `SIGTERM` (128 + 15).
pub const EXIT_TERMINATED: u8 = 143;

/// The exit status after `SIGHUP`, the terminal closing (128 + 1).
pub const EXIT_HANGUP: u8 = 129;

/// How long cairn waits, before it exits, for the processes of commands it stopped to be gone.
const STOP_COMMANDS_WAIT: Duration = Duration::from_secs(5);

static SUPERVISOR: OnceLock<Supervisor> = OnceLock::new();

/// The supervisor the agent's commands run under: this very binary (`cairn __supervise
/// /bin/sh -c CMD`), registered by [`main`]; `None` when the library is used by another
/// program. Under it a command's processes, `setsid` children included, die when the command
/// ends and when cairn ends, even by `SIGKILL` (see `cairn_deep::backend::supervise`).
pub fn command_supervisor() -> Option<Supervisor> {
    SUPERVISOR.get().cloned()
}

/// Parses the command line, runs it, and returns the exit status: 0 done, 1 the run failed,
/// 2 bad usage (from clap), 3 every write, edit and command was rejected
/// ([`app::EXIT_ALL_REJECTED`]), 130 interrupted, 143 `SIGTERM`, 129 `SIGHUP`.
///
/// Run as `cairn __supervise …` (hidden; how the shell backend starts each command) it is a
/// command supervisor and nothing else. On Ctrl-C, `SIGTERM` and `SIGHUP`, and at every exit,
/// the commands still running are killed, whole process trees, before cairn exits.
pub fn main() -> ExitCode {
    let mut args = std::env::args_os();
    if args.nth(1).is_some_and(|a| a == SUPERVISE_ARG) {
        return supervise_main(args);
    }
    if let Ok(s) = Supervisor::current_exe() {
        let _ = SUPERVISOR.set(s);
    }
    // First, while no other thread exists: take the API keys out of the process environment
    // and make the process non-dumpable (see `secrets`).
    let (secrets, scrub) = secrets::Secrets::take();
    let cli = args::Cli::parse();
    // OpenTelemetry GenAI spans, exported when the OTEL_* variables ask for it (see
    // docs/telemetry.md); off otherwise. Dropping the guard flushes them.
    let otel = match cairn_otel::init_from_env() {
        Ok(guard) => guard,
        Err(e) => {
            eprintln!("cairn: OpenTelemetry export is off: {e}");
            None
        }
    };
    let json = cli.global.json;
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cairn: error: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let code = match rt.block_on(async {
        tokio::select! {
            r = app::run(cli, secrets, scrub) => r,
            code = terminated() => Ok(code),
        }
    }) {
        Ok(code) => code,
        Err(e) => {
            app::report_error(&e, json);
            1
        }
    };
    // Ctrl-C, a signal, or a run that ended: kill every command still running (its whole tree)
    // and wait until its processes are gone.
    terminate_all_commands(STOP_COMMANDS_WAIT);
    // Do not wait for a blocked stdin reader (a question nobody answered, a chat prompt).
    rt.shutdown_background();
    drop(otel);
    ExitCode::from(code)
}

/// Resolves on `SIGTERM` or `SIGHUP` with the exit status for it, after a notice on stderr.
async fn terminated() -> u8 {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let (Ok(mut term), Ok(mut hup)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::hangup()),
        ) else {
            return std::future::pending().await;
        };
        let (name, code) = tokio::select! {
            _ = term.recv() => ("SIGTERM", EXIT_TERMINATED),
            _ = hup.recv() => ("SIGHUP", EXIT_HANGUP),
        };
        eprintln!("cairn: {name}: stopping the running commands");
        code
    }
    #[cfg(not(unix))]
    std::future::pending().await
}
