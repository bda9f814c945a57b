//! [`LocalShellBackend`]: a [`FilesystemBackend`] that also runs shell commands on the host.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use cairn_core::BoxFuture;
use tokio::io::{AsyncRead, AsyncReadExt};

use super::{
    Backend, BackendRuntime, ExecOutput, Executor, FileInfo, FilesystemBackend, GrepQuery,
    GrepResult,
};
use crate::error::BackendError;

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
}

impl Default for ShellConfig {
    fn default() -> Self {
        ShellConfig {
            default_timeout: Duration::from_secs(120),
            max_timeout: Duration::from_secs(3_600),
            max_output_bytes: 100_000,
            inherit_env: false,
            env: Vec::new(),
        }
    }
}

/// Files in a host directory (a [`FilesystemBackend`]) plus `execute`: commands run with
/// `/bin/sh -c` in the root directory, no stdin, an empty environment unless configured, a
/// timeout (the whole process group is killed), and an output cap. The result is stdout, then
/// stderr lines prefixed `[stderr] `, and the exit code.
///
/// This is **not a sandbox**: a command can reach anything the host user can. The path checks
/// of the file operations do not apply to commands.
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

    /// The config.
    pub fn config(&self) -> &ShellConfig {
        &self.config
    }

    /// The file side.
    pub fn filesystem(&self) -> &FilesystemBackend {
        &self.fs
    }

    async fn run(&self, command: &str, timeout: Duration) -> Result<ExecOutput, BackendError> {
        let mut cmd = tokio::process::Command::new("/bin/sh");
        cmd.arg("-c")
            .arg(command)
            .current_dir(self.fs.root())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        if !self.config.inherit_env {
            cmd.env_clear();
        }
        cmd.envs(self.config.env.iter().map(|(k, v)| (k, v)));
        #[cfg(unix)]
        cmd.process_group(0);
        let mut child = cmd.spawn()?;
        let pid = child.id();
        let cap = self.config.max_output_bytes;
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        let work = async {
            let (out, err, status) = tokio::join!(
                read_capped(stdout, cap),
                read_capped(stderr, cap),
                child.wait()
            );
            Ok::<_, std::io::Error>((out?, err?, status?))
        };
        match tokio::time::timeout(timeout, work).await {
            Ok(Ok(((out, out_total), (err, err_total), status))) => {
                let mut text = String::from_utf8_lossy(&out).into_owned();
                let err = String::from_utf8_lossy(&err);
                for line in err.lines() {
                    if !text.is_empty() && !text.ends_with('\n') {
                        text.push('\n');
                    }
                    text.push_str("[stderr] ");
                    text.push_str(line);
                    text.push('\n');
                }
                let total = out_total + err_total;
                let mut truncated = out_total > out.len() || err_total > err.len();
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
                Ok(ExecOutput {
                    output: text,
                    exit_code: status.code(),
                    truncated,
                })
            }
            Ok(Err(e)) => Err(BackendError::Io(e)),
            Err(_) => {
                kill_group(pid);
                Err(BackendError::Timeout {
                    secs: timeout.as_secs(),
                })
            }
        }
    }
}

/// Kills the process group of the timed-out shell, so its children die with it.
fn kill_group(pid: Option<u32>) {
    #[cfg(unix)]
    if let Some(pid) = pid {
        let _ = std::process::Command::new("kill")
            .args(["-KILL", "--", &format!("-{pid}")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
    #[cfg(not(unix))]
    let _ = pid;
}

/// Reads all of `r`, keeping the first `cap` bytes; returns them and the total size.
async fn read_capped(
    r: Option<impl AsyncRead + Unpin>,
    cap: usize,
) -> std::io::Result<(Vec<u8>, usize)> {
    let Some(mut r) = r else {
        return Ok((Vec::new(), 0));
    };
    let mut kept = Vec::new();
    let mut total = 0usize;
    let mut buf = [0u8; 8192];
    loop {
        let n = r.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        total += n;
        let room = cap.saturating_sub(kept.len());
        kept.extend_from_slice(&buf[..n.min(room)]);
    }
    Ok((kept, total))
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
    fn as_executor(&self) -> Option<&dyn Executor> {
        Some(self)
    }
}
