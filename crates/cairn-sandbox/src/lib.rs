//! # cairn-sandbox
//!
//! Command safety for cairn's `execute` tool, in two parts:
//!
//! - **[`Sandbox`]**: what a command's processes may touch. On Linux it is enforced by the
//!   kernel in the child process, between `fork` and `exec`: **Landlock** rules let it read the
//!   system (`/usr`, `/bin`, `/lib*`, `/etc`, …), the directories on its `PATH` and the
//!   toolchains' homes, and the project; write only the project, the temp directory and the
//!   paths the user adds (in [`SandboxMode::WorkspaceWrite`]; nothing in
//!   [`SandboxMode::ReadOnly`]); nothing else of the user's home. A **seccomp** filter denies
//!   creating sockets other than `AF_UNIX` (unless the network is allowed) and `ptrace` and
//!   similar escapes. Everything the command starts inherits both. See [`Sandbox`] for the exact
//!   lists, and [`support`] for kernels without Landlock.
//! - **[`ExecPolicy`]**: prefix rules over the parsed command line that decide, before anything
//!   runs, whether a command is allowed without asking, needs a person's approval, or is
//!   forbidden; the strictest matching rule wins, and command lines the parser cannot judge
//!   (command substitution, `eval`, pipes into `sh`, …) need approval. See [`exec_policy`].
//!
//! The design and its limits are in `docs/sandbox.md`.
//!
//! ```no_run
//! use cairn_sandbox::{Sandbox, SandboxMode};
//! # fn demo() -> Result<(), cairn_sandbox::SandboxError> {
//! let sandbox = Sandbox::new(SandboxMode::WorkspaceWrite);
//! let mut cmd = std::process::Command::new("/bin/sh");
//! cmd.args(["-c", "echo hi > note.txt"]).current_dir("/tmp/project");
//! let env = |key: &str| std::env::var(key).ok();
//! if let Some(confinement) = sandbox.confinement("/tmp/project".as_ref(), &env, &[])? {
//!     confinement.install(&mut cmd);
//! }
//! let status = cmd.status();
//! # Ok(()) }
//! ```
//!
//! **`unsafe`.** The workspace forbids `unsafe` code; this crate denies it and allows it on a
//! single function, [`Confinement::install`], which calls `Command::pre_exec`. The hook only
//! makes system calls (`prctl`, `landlock_restrict_self`, `seccomp`) on data prepared in the
//! parent: it allocates nothing and takes no lock, as the code between `fork` and `exec` must.

pub mod exec_policy;
mod sandbox;

#[cfg(target_os = "linux")]
mod confine;

#[cfg(feature = "testing")]
pub mod testing;

pub use exec_policy::{Decision, ExecPolicy, PolicyError, Rule, Verdict};
pub use sandbox::{
    Confinement, HOME_TOOLCHAIN_DIRS, SYSTEM_READ_PATHS, Sandbox, SandboxError, SandboxMode,
    SandboxPaths, Support, TOOLCHAIN_VARS, WRITABLE_DEVICES, blocked_hint, looks_blocked, support,
};
