//! [`LocalShellBackend`]: a [`FilesystemBackend`] that also runs shell commands on the host.
//!
//! How a command's processes are stopped (process groups, the optional supervisor, what
//! happens when cairn itself is killed) is described in [`supervise`](super::supervise).

use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use cairn_core::{BoxFuture, CallReview};
use cairn_sandbox::{Decision, ExecPolicy, Sandbox};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Child;

use super::supervise::Supervisor;
use super::{
    Backend, BackendRuntime, ExecOutput, Executor, FileInfo, FilesystemBackend, GrepQuery,
    GrepResult,
};
use crate::error::BackendError;

/// How long output is still read after the command's shell exited, for pipes held open by a
/// process that escaped the kill (a `setsid` child without a supervisor).
const OUTPUT_GRACE: Duration = Duration::from_millis(500);

/// How long a timed-out command's processes are waited for after the kill.
const STOP_WAIT: Duration = Duration::from_secs(5);

/// How [`LocalShellBackend`] runs commands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellConfig {
    /// Timeout when the call gives none (default 120 s).
    pub default_timeout: Duration,
    /// The longest timeout a call may ask for (default 3,600 s).
    pub max_timeout: Duration,
    /// Output beyond this many bytes is cut (default 100,000).
    pub max_output_bytes: usize,
    /// Pass the host process's environment to commands (default false: an empty environment).
    pub inherit_env: bool,
    /// Variables set for every command (after `inherit_env`).
    pub env: Vec<(String, String)>,
    /// Run each command under this supervisor process (default none), so that everything the
    /// command starts dies with it, `setsid` children included, even when the host process is
    /// killed. See [`supervise`](super::supervise). If the supervisor cannot be started, the
    /// command runs without one (and a warning is logged).
    pub supervisor: Option<Supervisor>,
    /// What commands may touch (default [`Sandbox::off`]: the user's full rights). With a mode
    /// other than off, each command (and everything it starts) is confined by the kernel
    /// (Landlock and seccomp, see [`cairn_sandbox`]); if the system cannot enforce it, commands
    /// run unconfined but [`Executor::review`] asks for each one, so none runs unconfined
    /// without a person's decision.
    pub sandbox: Sandbox,
    /// Decides per command, before it runs, whether it runs without asking, needs approval,
    /// or is forbidden (default none: approvals as configured). See
    /// [`cairn_sandbox::exec_policy`].
    pub exec_policy: Option<ExecPolicy>,
}

impl Default for ShellConfig {
    fn default() -> Self {
        ShellConfig {
            default_timeout: Duration::from_secs(120),
            max_timeout: Duration::from_secs(3_600),
            max_output_bytes: 100_000,
            inherit_env: false,
            env: Vec::new(),
            supervisor: None,
            sandbox: Sandbox::off(),
            exec_policy: None,
        }
    }
}

/// Files in a host directory (a [`FilesystemBackend`]) plus `execute`: commands run with
/// `/bin/sh -c` in the root directory, no stdin, an empty environment unless configured, a
/// timeout, and an output cap. The result is stdout, then stderr lines prefixed `[stderr] `, and
/// the exit code.
///
/// A command runs in a process group of its own. It is over when its shell exits: what it left
/// running in the background is killed then, and its output is returned (so
/// `sleep 1000 & echo started` answers `started` at once). On timeout, or when the call is
/// cancelled (its future dropped), the command's whole process tree is killed with the `kill`
/// system call. [`terminate_all_commands`] stops every command still running, for a host that
/// is about to exit. With a [`ShellConfig::supervisor`], `setsid` children are caught too, and
/// commands die even when the host is killed with `SIGKILL`; see [`supervise`](super::supervise).
///
/// By default commands run with the host user's full rights: the path checks of the file
/// operations do not apply to them. Set a [`ShellConfig::sandbox`] to confine them (the
/// `cairn` CLI runs them in [`SandboxMode::WorkspaceWrite`](cairn_sandbox::SandboxMode)), and
/// an [`ShellConfig::exec_policy`] to decide which need approval. When a sandboxed command's
/// output says a permission was denied, a line starting `[sandbox]` is added that says the
/// sandbox probably blocked it and how the user can allow it.
///
/// ```no_run
/// use cairn_deep::backend::{Executor, LocalShellBackend, ShellConfig};
/// # async fn demo() -> Result<(), cairn_deep::BackendError> {
/// let shell = LocalShellBackend::new("/tmp/work")?.with_config(ShellConfig {
///     env: vec![("PATH".into(), "/usr/bin:/bin".into())],
///     ..ShellConfig::default()
/// });
/// let out = shell.execute("echo hi", None).await?;
/// assert_eq!(out.output, "hi\n");
/// assert_eq!(out.exit_code, Some(0));
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct LocalShellBackend {
    fs: FilesystemBackend,
    config: ShellConfig,
}

impl LocalShellBackend {
    /// A shell backend rooted at `root` (an existing directory), default config.
    pub fn new(root: impl AsRef<Path>) -> Result<Self, BackendError> {
        Ok(Self::from_filesystem(FilesystemBackend::new(root)?))
    }

    /// Adds command execution to a filesystem backend.
    pub fn from_filesystem(fs: FilesystemBackend) -> Self {
        LocalShellBackend {
            fs,
            config: ShellConfig::default(),
        }
    }

    /// Replaces the config.
    pub fn with_config(mut self, config: ShellConfig) -> Self {
        self.config = config;
        self
    }

    /// Sets one environment variable for commands.
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.config.env.push((key.into(), value.into()));
        self
    }

    /// Runs commands under `supervisor` (see [`ShellConfig::supervisor`]).
    pub fn supervisor(mut self, supervisor: Supervisor) -> Self {
        self.config.supervisor = Some(supervisor);
        self
    }

    /// Confines commands with `sandbox` (see [`ShellConfig::sandbox`]).
    pub fn sandbox(mut self, sandbox: Sandbox) -> Self {
        self.config.sandbox = sandbox;
        self
    }

    /// Reviews commands with `policy` (see [`ShellConfig::exec_policy`]).
    pub fn exec_policy(mut self, policy: ExecPolicy) -> Self {
        self.config.exec_policy = Some(policy);
        self
    }

    /// Installs the sandbox on `cmd` (spawning `program`); returns whether it did. Without
    /// support on this system it installs nothing (the review asked for the command); a
    /// sandbox that cannot be built is an error, and the command does not run.
    fn confine(
        &self,
        cmd: &mut tokio::process::Command,
        program: &Path,
    ) -> Result<bool, BackendError> {
        if !self.config.sandbox.is_enforced() {
            if !self.config.sandbox.is_off() {
                static WARNED: std::sync::Once = std::sync::Once::new();
                WARNED.call_once(|| {
                    tracing::warn!(
                        "commands cannot be sandboxed on this system; they run unconfined after approval"
                    )
                });
            }
            return Ok(false);
        }
        let env = |key: &str| -> Option<String> {
            self.config
                .env
                .iter()
                .rev()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.clone())
                .or_else(|| {
                    self.config
                        .inherit_env
                        .then(|| std::env::var(key).ok())
                        .flatten()
                })
        };
        let executables = [program.to_path_buf()];
        match self
            .config
            .sandbox
            .confinement(self.fs.root(), &env, &executables)
        {
            Ok(Some(c)) => {
                c.install(cmd.as_std_mut());
                Ok(true)
            }
            Ok(None) => Ok(false),
            Err(e) => Err(BackendError::Sandbox(e.to_string())),
        }
    }

    /// The config.
    pub fn config(&self) -> &ShellConfig {
        &self.config
    }

    /// The file side.
    pub fn filesystem(&self) -> &FilesystemBackend {
        &self.fs
    }

    fn command(&self, supervisor: Option<&Supervisor>, command: &str) -> tokio::process::Command {
        let mut cmd = match supervisor {
            Some(s) => {
                let mut c = tokio::process::Command::new(&s.program);
                c.args(&s.args).arg("/bin/sh");
                c
            }
            None => tokio::process::Command::new("/bin/sh"),
        };
        cmd.arg("-c")
            .arg(command)
            .current_dir(self.fs.root())
            // A supervisor's stdin is the pipe that tells it to stop; only we hold its write end.
            .stdin(if supervisor.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Killing a supervisor would orphan the command; it is stopped by closing its stdin.
            .kill_on_drop(supervisor.is_none());
        if !self.config.inherit_env {
            cmd.env_clear();
        }
        cmd.envs(self.config.env.iter().map(|(k, v)| (k, v)));
        #[cfg(unix)]
        cmd.process_group(0);
        cmd
    }

    /// Starts the command; also says whether it is sandboxed.
    fn spawn(&self, command: &str) -> Result<(Running, bool), BackendError> {
        if let Some(sup) = &self.config.supervisor {
            let mut cmd = self.command(Some(sup), command);
            let confined = self.confine(&mut cmd, &sup.program)?;
            match cmd.spawn() {
                Ok(mut child) => {
                    let stop = child.stdin.take();
                    let tree = child.id().map(|pid| Tree::Supervised { pid, _stop: stop });
                    return Ok((Running::register(child, tree)?, confined));
                }
                Err(e) if confined && e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(sandbox_spawn_error(e));
                }
                Err(e) => tracing::warn!(
                    supervisor = %sup.program.display(),
                    error = %e,
                    "cannot start the command supervisor; running the command without it"
                ),
            }
        }
        let mut cmd = self.command(None, command);
        let confined = self.confine(&mut cmd, Path::new("/bin/sh"))?;
        let child = cmd.spawn().map_err(|e| {
            if confined {
                sandbox_spawn_error(e)
            } else {
                BackendError::Io(e)
            }
        })?;
        let tree = child.id().map(Tree::Group);
        Ok((Running::register(child, tree)?, confined))
    }

    async fn run(&self, command: &str, timeout: Duration) -> Result<ExecOutput, BackendError> {
        let (mut running, confined) = self.spawn(command)?;
        let cap = self.config.max_output_bytes;
        let stdout = running.child.stdout.take();
        let stderr = running.child.stderr.take();
        let mut out = Capture::default();
        let mut err = Capture::default();
        let work = collect(&mut running, stdout, stderr, &mut out, &mut err, cap);
        match tokio::time::timeout(timeout, work).await {
            Ok(Ok(status)) => {
                let mut text = String::from_utf8_lossy(&out.kept).into_owned();
                let err_text = String::from_utf8_lossy(&err.kept);
                for line in err_text.lines() {
                    if !text.is_empty() && !text.ends_with('\n') {
                        text.push('\n');
                    }
                    text.push_str("[stderr] ");
                    text.push_str(line);
                    text.push('\n');
                }
                let total = out.total + err.total;
                let mut truncated = out.total > out.kept.len() || err.total > err.kept.len();
                if text.len() > cap {
                    let mut cut = cap;
                    while !text.is_char_boundary(cut) {
                        cut -= 1;
                    }
                    text.truncate(cut);
                    truncated = true;
                }
                if truncated {
                    if !text.ends_with('\n') {
                        text.push('\n');
                    }
                    text.push_str(&format!(
                        "[output truncated: {total} bytes, only the first {cap} shown]\n"
                    ));
                }
                if confined
                    && let Some(hint) = cairn_sandbox::blocked_hint(&self.config.sandbox, &text)
                {
                    if !text.is_empty() && !text.ends_with('\n') {
                        text.push('\n');
                    }
                    text.push_str(&hint);
                    text.push('\n');
                }
                Ok(ExecOutput {
                    output: text,
                    exit_code: status.code(),
                    truncated,
                })
            }
            Ok(Err(e)) => Err(BackendError::Io(e)),
            Err(_) => {
                running.stop_and_wait().await;
                Err(BackendError::Timeout {
                    secs: timeout.as_secs(),
                })
            }
        }
    }
}

/// A confined spawn that failed: the sandbox could not be applied in the child (the command
/// did not run).
fn sandbox_spawn_error(e: std::io::Error) -> BackendError {
    BackendError::Sandbox(format!("the kernel refused to apply it ({e})"))
}

/// Runs the command to the end of its shell: reads both pipes while waiting for the shell (or
/// its supervisor) to exit, then kills what the command left running and reads what is left of
/// the output for at most [`OUTPUT_GRACE`].
async fn collect(
    running: &mut Running,
    stdout: Option<impl AsyncRead + Unpin>,
    stderr: Option<impl AsyncRead + Unpin>,
    out: &mut Capture,
    err: &mut Capture,
    cap: usize,
) -> std::io::Result<ExitStatus> {
    let reads = async {
        tokio::try_join!(read_capped(stdout, out, cap), read_capped(stderr, err, cap)).map(|_| ())
    };
    tokio::pin!(reads);
    let mut read: Option<std::io::Result<()>> = None;
    let status = loop {
        tokio::select! {
            status = running.child.wait() => break status?,
            r = &mut reads, if read.is_none() => read = Some(r),
        }
    };
    running.exited();
    if read.is_none()
        && let Ok(r) = tokio::time::timeout(OUTPUT_GRACE, &mut reads).await
    {
        read = Some(r);
    }
    if let Some(Err(e)) = read {
        return Err(e);
    }
    Ok(status)
}

/// What was read from one pipe: the first `cap` bytes and the total size.
#[derive(Default)]
struct Capture {
    kept: Vec<u8>,
    total: usize,
}

/// Reads all of `r` into `into`, keeping the first `cap` bytes.
async fn read_capped(
    r: Option<impl AsyncRead + Unpin>,
    into: &mut Capture,
    cap: usize,
) -> std::io::Result<()> {
    let Some(mut r) = r else {
        return Ok(());
    };
    let mut buf = [0u8; 8192];
    loop {
        let n = r.read(&mut buf).await?;
        if n == 0 {
            return Ok(());
        }
        into.total += n;
        let room = cap.saturating_sub(into.kept.len());
        into.kept.extend_from_slice(&buf[..n.min(room)]);
    }
}

/// The processes of one running command, as the registry of live commands knows them.
enum Tree {
    /// The shell itself, leader of its own process group (no supervisor).
    Group(u32),
    /// A supervisor, in a process group of its own; dropping `_stop` (the write end of its
    /// stdin) tells it to kill the command's tree.
    Supervised {
        pid: u32,
        _stop: Option<tokio::process::ChildStdin>,
    },
}

impl Tree {
    /// Kills the command's processes now; returns the pids to wait for. `exited` says the
    /// direct child was already reaped (its pid may no longer be ours to signal).
    fn stop(self, exited: bool) -> Vec<i32> {
        #[cfg(unix)]
        {
            use super::supervise::tree;
            match self {
                Tree::Group(pid) => {
                    let Some(group) = tree::pid(pid) else {
                        return Vec::new();
                    };
                    if exited {
                        tree::kill_group(group);
                        return Vec::new();
                    }
                    // Descendants first, while their parent links still lead to the shell.
                    let mut found = tree::descendants(group.as_raw_pid());
                    tree::kill_group(group);
                    tree::kill(group.as_raw_pid());
                    for p in &found {
                        tree::kill(*p);
                    }
                    found.push(group.as_raw_pid());
                    found
                }
                Tree::Supervised { pid, _stop } => {
                    drop(_stop);
                    let Some(sup) = tree::pid(pid).filter(|_| !exited) else {
                        return Vec::new();
                    };
                    // The supervisor kills the tree when its stdin closes; kill what we can
                    // see from here too, so the kill does not depend on it alone.
                    let mut found = tree::descendants(sup.as_raw_pid());
                    for p in &found {
                        tree::kill(*p);
                    }
                    found.push(sup.as_raw_pid());
                    found
                }
            }
        }
        #[cfg(not(unix))]
        {
            let _ = (self, exited);
            Vec::new()
        }
    }
}

#[derive(Default)]
struct Registry {
    next: u64,
    live: std::collections::BTreeMap<u64, (Tree, bool)>,
    closing: bool,
}

/// Every command running in this process, so a host can stop them all before it exits.
static LIVE: Mutex<Registry> = Mutex::new(Registry {
    next: 0,
    live: std::collections::BTreeMap::new(),
    closing: false,
});

fn registry() -> std::sync::MutexGuard<'static, Registry> {
    // Every critical section is a single map operation: a poisoned registry is still consistent.
    LIVE.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A spawned command, registered as live until it is dropped. Dropping it before the command
/// finished (a cancelled call) kills the command's tree.
struct Running {
    child: Child,
    id: Option<u64>,
}

impl Running {
    fn register(child: Child, tree: Option<Tree>) -> Result<Running, BackendError> {
        let Some(tree) = tree else {
            return Ok(Running { child, id: None });
        };
        let mut reg = registry();
        if reg.closing {
            drop(reg);
            tree.stop(false);
            return Err(BackendError::Other(
                "the program is shutting down; the command was stopped".into(),
            ));
        }
        let id = reg.next;
        reg.next += 1;
        reg.live.insert(id, (tree, false));
        Ok(Running {
            child,
            id: Some(id),
        })
    }

    /// The shell (or its supervisor) exited and was reaped: without a supervisor, kill what is
    /// left of its process group now.
    fn exited(&mut self) {
        let Some(id) = self.id else { return };
        let mut reg = registry();
        if let Some(entry) = reg.live.get_mut(&id) {
            entry.1 = true;
            if let Tree::Group(pid) = entry.0 {
                drop(reg);
                #[cfg(unix)]
                if let Some(group) = super::supervise::tree::pid(pid) {
                    super::supervise::tree::kill_group(group);
                }
                #[cfg(not(unix))]
                let _ = pid;
            }
        }
    }

    /// Kills the command's tree (it is no longer live).
    fn stop(&mut self) -> Vec<i32> {
        let Some(id) = self.id.take() else {
            return Vec::new();
        };
        let entry = registry().live.remove(&id);
        match entry {
            Some((tree, exited)) => tree.stop(exited),
            None => Vec::new(),
        }
    }

    /// Kills the command's tree and waits (at most [`STOP_WAIT`]) for its direct child to end:
    /// the shell, or the supervisor once it has killed and reaped the tree. (A supervisor is
    /// never killed itself: that would orphan what it has not killed yet.)
    async fn stop_and_wait(&mut self) {
        self.stop();
        let _ = tokio::time::timeout(STOP_WAIT, self.child.wait()).await;
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        // Runs before `child` is dropped, while the shell's descendants still point at it.
        self.stop();
    }
}

/// Stops every command still running in this process (their whole trees) and waits up to
/// `wait` for them to be gone; returns how many there were. Commands started afterwards are
/// stopped at once with an error, so call this only when the process is about to exit (on
/// Ctrl-C, `SIGTERM`, or at the end of `main`).
pub fn terminate_all_commands(wait: Duration) -> usize {
    let entries: Vec<(Tree, bool)> = {
        let mut reg = registry();
        reg.closing = true;
        std::mem::take(&mut reg.live).into_values().collect()
    };
    let count = entries.len();
    let mut pids = Vec::new();
    for (tree, exited) in entries {
        pids.extend(tree.stop(exited));
    }
    let deadline = std::time::Instant::now() + wait;
    #[cfg(unix)]
    while !pids.iter().all(|p| super::supervise::tree::exited(*p))
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(10));
    }
    #[cfg(not(unix))]
    let _ = (pids, deadline);
    count
}

impl Executor for LocalShellBackend {
    fn execute<'a>(
        &'a self,
        command: &'a str,
        timeout: Option<Duration>,
    ) -> BoxFuture<'a, Result<ExecOutput, BackendError>> {
        let timeout = timeout.unwrap_or(self.config.default_timeout);
        Box::pin(self.run(command, timeout))
    }

    fn max_timeout(&self) -> Duration {
        self.config.max_timeout
    }

    fn default_timeout(&self) -> Duration {
        self.config.default_timeout
    }

    fn working_dir(&self) -> Option<&Path> {
        Some(self.fs.root())
    }

    /// The exec policy's decision (forbid, allow; `prompt` leaves it to the configured
    /// approvals), except that every command not forbidden needs a decision when a sandbox was
    /// asked for and this system cannot enforce it.
    fn review(&self, command: &str) -> CallReview {
        let verdict = self.config.exec_policy.as_ref().map(|p| p.check(command));
        if let Some(v) = &verdict
            && v.decision == Decision::Forbid
        {
            return CallReview::Forbid {
                reason: format!("the exec policy forbids it ({})", v.reason),
            };
        }
        if !self.config.sandbox.is_off()
            && let cairn_sandbox::Support::Unavailable { reason } = cairn_sandbox::support()
        {
            return CallReview::Ask {
                reason: format!(
                    "commands cannot be sandboxed here ({reason}), so each one needs approval"
                ),
            };
        }
        match verdict {
            Some(v) if v.decision == Decision::Allow => CallReview::Allow,
            _ => CallReview::AsConfigured,
        }
    }
}

impl Backend for LocalShellBackend {
    fn ls<'a>(
        &'a self,
        rt: &'a BackendRuntime,
        path: &'a str,
    ) -> BoxFuture<'a, Result<Vec<FileInfo>, BackendError>> {
        self.fs.ls(rt, path)
    }
    fn read_text<'a>(
        &'a self,
        rt: &'a BackendRuntime,
        path: &'a str,
    ) -> BoxFuture<'a, Result<String, BackendError>> {
        self.fs.read_text(rt, path)
    }
    fn write<'a>(
        &'a self,
        rt: &'a BackendRuntime,
        path: &'a str,
        content: &'a str,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        self.fs.write(rt, path, content)
    }
    fn edit<'a>(
        &'a self,
        rt: &'a BackendRuntime,
        path: &'a str,
        old: &'a str,
        new: &'a str,
        replace_all: bool,
    ) -> BoxFuture<'a, Result<usize, BackendError>> {
        self.fs.edit(rt, path, old, new, replace_all)
    }
    fn glob<'a>(
        &'a self,
        rt: &'a BackendRuntime,
        pattern: &'a str,
        path: &'a str,
    ) -> BoxFuture<'a, Result<Vec<String>, BackendError>> {
        self.fs.glob(rt, pattern, path)
    }
    fn grep<'a>(
        &'a self,
        rt: &'a BackendRuntime,
        query: &'a GrepQuery,
    ) -> BoxFuture<'a, Result<GrepResult, BackendError>> {
        self.fs.grep(rt, query)
    }
    fn delete<'a>(
        &'a self,
        rt: &'a BackendRuntime,
        path: &'a str,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        self.fs.delete(rt, path)
    }
    fn as_executor(&self) -> Option<&dyn Executor> {
        Some(self)
    }
}
