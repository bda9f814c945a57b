//! [`Sandbox`]: what a command may touch, the paths that follow from it, and whether this
//! system can enforce it ([`support`]).

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

/// How much a sandboxed command may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    /// Commands read the system and the project and write nothing (but `/dev/null` and the
    /// terminal devices).
    ReadOnly,
    /// Commands also write the project, the temp directory and the paths the user adds (the
    /// default).
    #[default]
    WorkspaceWrite,
    /// No sandbox: commands run with the user's full rights.
    Off,
}

impl SandboxMode {
    /// The name used on the command line and in the config (`read-only`, `workspace-write`,
    /// `off`).
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxMode::ReadOnly => "read-only",
            SandboxMode::WorkspaceWrite => "workspace-write",
            SandboxMode::Off => "off",
        }
    }
}

impl fmt::Display for SandboxMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for SandboxMode {
    type Err = SandboxError;

    /// ```
    /// use cairn_sandbox::SandboxMode;
    /// assert_eq!("read-only".parse::<SandboxMode>().unwrap(), SandboxMode::ReadOnly);
    /// assert!("none".parse::<SandboxMode>().is_err());
    /// ```
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "read-only" => Ok(SandboxMode::ReadOnly),
            "workspace-write" => Ok(SandboxMode::WorkspaceWrite),
            "off" => Ok(SandboxMode::Off),
            other => Err(SandboxError::UnknownMode(other.to_owned())),
        }
    }
}

/// Why a sandbox could not be set up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SandboxError {
    /// Not a sandbox mode.
    #[error("unknown sandbox mode {0:?}: use read-only, workspace-write or off")]
    UnknownMode(String),
    /// This system cannot enforce a sandbox (see [`support`]).
    #[error("this system cannot sandbox commands: {0}")]
    Unsupported(String),
    /// The Landlock rules could not be built.
    #[error("cannot build the sandbox's file rules (Landlock): {0}")]
    Landlock(String),
    /// The seccomp filter could not be built.
    #[error("cannot build the sandbox's system-call filter (seccomp): {0}")]
    Seccomp(String),
}

/// Whether this system can enforce a [`Sandbox`], probed once per process ([`support`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Support {
    /// Every restriction is enforced: Landlock ABI 6 or later (file rules, and no signals or
    /// abstract sockets out of the sandbox) and seccomp.
    Full,
    /// Landlock is older than ABI 6: the file rules hold (on ABI 1, renaming or linking across
    /// directories is always refused; before ABI 3 truncating is not controlled), but sandboxed
    /// processes may signal processes outside the sandbox. Still a sandbox.
    Partial {
        /// What is missing.
        missing: String,
    },
    /// No sandbox can be made (no Landlock, no seccomp, or not Linux). Commands then run
    /// unconfined, so a front end should ask before each one.
    Unavailable {
        /// Why, for the user.
        reason: String,
    },
}

impl Support {
    /// Whether commands can be confined (fully or partly).
    pub fn is_available(&self) -> bool {
        !matches!(self, Support::Unavailable { .. })
    }
}

/// Whether this system can enforce a sandbox; probed on first use (a few system calls, no
/// process is restricted) and remembered.
pub fn support() -> &'static Support {
    static SUPPORT: OnceLock<Support> = OnceLock::new();
    SUPPORT.get_or_init(probe)
}

#[cfg(target_os = "linux")]
fn probe() -> Support {
    crate::confine::probe()
}

#[cfg(not(target_os = "linux"))]
fn probe() -> Support {
    Support::Unavailable {
        reason: "command sandboxing needs Linux (Landlock and seccomp)".into(),
    }
}

/// System directories a sandboxed command may read and execute (those that exist).
pub const SYSTEM_READ_PATHS: &[&str] = &[
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc",
    "/opt",
    "/proc",
    "/sys",
    "/dev",
    "/nix/store",
    "/snap",
    "/run/systemd/resolve",
];

/// Toolchain directories under the home that a sandboxed command may read and execute (those
/// that exist): compilers, interpreters and their package caches. Nothing else of the home is
/// readable.
pub const HOME_TOOLCHAIN_DIRS: &[&str] = &[
    ".cargo",
    ".rustup",
    ".pyenv",
    ".rbenv",
    ".nvm",
    ".volta",
    ".bun",
    ".deno",
    ".sdkman",
    ".elan",
    ".ghcup",
    ".juliaup",
    ".local/bin",
    ".local/lib",
    ".local/share/uv",
    "go",
];

/// Environment variables naming toolchain homes that a sandboxed command may read and execute.
pub const TOOLCHAIN_VARS: &[&str] = &[
    "CARGO_HOME",
    "RUSTUP_HOME",
    "PYENV_ROOT",
    "RBENV_ROOT",
    "NVM_DIR",
    "VOLTA_HOME",
    "BUN_INSTALL",
    "GOROOT",
    "GOPATH",
    "JAVA_HOME",
    "VIRTUAL_ENV",
    "CONDA_PREFIX",
];

/// Devices a sandboxed command may write (besides reading all of `/dev`).
pub const WRITABLE_DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/pts",
    "/dev/shm",
];

/// What commands may touch. Build one with [`Sandbox::new`] and the builder methods; a
/// backend turns it into a [`Confinement`] for each command with [`Sandbox::confinement`].
///
/// In [`SandboxMode::WorkspaceWrite`] a command may:
/// - read and execute [`SYSTEM_READ_PATHS`], every directory on its `PATH` (and, for
///   `…/bin`, `…/sbin` or `…/shims` in a dot-directory such as `~/.pyenv/shims`, that
///   dot-directory), the [`HOME_TOOLCHAIN_DIRS`] of [`home`](Self::home), the directories
///   named by [`TOOLCHAIN_VARS`], the [`readable_roots`](Self::readable_roots) and the
///   executables the backend names (its supervisor);
/// - read and write the project, the temp directories (`$TMPDIR`, `/tmp`, `/var/tmp`), the
///   [`writable_roots`](Self::writable_roots) and [`WRITABLE_DEVICES`];
/// - create only `AF_UNIX` sockets, unless [`allow_net`](Self::allow_net);
/// - not use `ptrace`, `process_vm_readv`/`writev`, `io_uring`, `bpf`, `perf_event_open`,
///   `userfaultfd` or the kernel keyring, nor signal processes outside the sandbox.
///
/// Nothing else is reachable: not the rest of the home (`~/.ssh`, `~/.aws`, shell histories,
/// cairn's own database), not other users' files. [`SandboxMode::ReadOnly`] is the same
/// without the writable directories (the temp directories become readable only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sandbox {
    /// How much commands may change.
    pub mode: SandboxMode,
    /// Let commands use the network (any socket family).
    pub allow_net: bool,
    /// More directories (or files) commands may write, besides the project and the temp
    /// directories ([`SandboxMode::WorkspaceWrite`] only).
    pub writable_roots: Vec<PathBuf>,
    /// More directories (or files) commands may read.
    pub readable_roots: Vec<PathBuf>,
    /// The home whose [`HOME_TOOLCHAIN_DIRS`] are readable (default: `$HOME` of this process).
    pub home: Option<PathBuf>,
    /// How the user can allow what the sandbox blocked, for the note the model reads
    /// ([`blocked_hint`](Self::blocked_hint)); e.g. the command-line flags of a front end.
    pub allow_hint: String,
}

impl Default for Sandbox {
    fn default() -> Self {
        Sandbox::new(SandboxMode::default())
    }
}

impl Sandbox {
    /// A sandbox of `mode`, without network, with the process's `$HOME`.
    pub fn new(mode: SandboxMode) -> Self {
        Sandbox {
            mode,
            allow_net: false,
            writable_roots: Vec::new(),
            readable_roots: Vec::new(),
            home: std::env::var_os("HOME")
                .filter(|h| !h.is_empty())
                .map(PathBuf::from),
            allow_hint: "ask the user to change the sandbox settings".into(),
        }
    }

    /// No sandbox.
    pub fn off() -> Self {
        Sandbox::new(SandboxMode::Off)
    }

    /// Lets commands use the network (or not).
    #[must_use]
    pub fn allow_net(mut self, yes: bool) -> Self {
        self.allow_net = yes;
        self
    }

    /// Lets commands write `path` too.
    #[must_use]
    pub fn writable_root(mut self, path: impl Into<PathBuf>) -> Self {
        self.writable_roots.push(path.into());
        self
    }

    /// Lets commands read `path` too.
    #[must_use]
    pub fn readable_root(mut self, path: impl Into<PathBuf>) -> Self {
        self.readable_roots.push(path.into());
        self
    }

    /// Takes the toolchain directories from `home` (`None`: none).
    #[must_use]
    pub fn home(mut self, home: Option<PathBuf>) -> Self {
        self.home = home;
        self
    }

    /// Says how the user can allow what the sandbox blocked (see
    /// [`allow_hint`](Self::allow_hint)).
    #[must_use]
    pub fn with_allow_hint(mut self, hint: impl Into<String>) -> Self {
        self.allow_hint = hint.into();
        self
    }

    /// Whether this is [`SandboxMode::Off`].
    pub fn is_off(&self) -> bool {
        self.mode == SandboxMode::Off
    }

    /// Whether commands will actually be confined: the mode is not off and the system can
    /// enforce it ([`support`]).
    pub fn is_enforced(&self) -> bool {
        !self.is_off() && support().is_available()
    }

    /// One line for a banner: `workspace-write, no network`, `read-only, network allowed`, `off`.
    pub fn summary(&self) -> String {
        if self.is_off() {
            return "off".into();
        }
        format!(
            "{}, {}",
            self.mode,
            if self.allow_net {
                "network allowed"
            } else {
                "no network"
            }
        )
    }

    /// What the sandbox allows, in words (for the model's note).
    fn rules_in_words(&self) -> String {
        let files = match self.mode {
            SandboxMode::ReadOnly => "commands cannot write files",
            SandboxMode::WorkspaceWrite => {
                "commands can write only inside the project and the temp directory"
            }
            SandboxMode::Off => "no sandbox",
        };
        let net = if self.allow_net {
            ""
        } else {
            " and have no network"
        };
        format!("{files}{net}; the rest of the home directory is out of reach")
    }

    /// The line added to a command's output when it looks blocked ([`looks_blocked`]): that
    /// the sandbox probably stopped it, what the sandbox allows, and how the user can allow
    /// more; so the model does not retry blindly.
    pub fn blocked_hint(&self) -> String {
        format!(
            "[sandbox] This was probably blocked by cairn's sandbox ({}: {}). Do not retry it unchanged: work inside the project, or tell the user what you need ({}).",
            self.mode,
            self.rules_in_words(),
            self.allow_hint
        )
    }

    /// The paths commands working in `project` may read and write: `(read, write, devices)`,
    /// each canonicalized, missing ones left out. `env` looks up the command's environment
    /// (`PATH`, [`TOOLCHAIN_VARS`], `TMPDIR`); `executables` are files the backend runs (its
    /// supervisor).
    pub fn paths(
        &self,
        project: &Path,
        env: &dyn Fn(&str) -> Option<String>,
        executables: &[PathBuf],
    ) -> SandboxPaths {
        let mut read: Vec<PathBuf> = SYSTEM_READ_PATHS.iter().map(PathBuf::from).collect();
        let home = self.home.as_deref().and_then(|h| h.canonicalize().ok());
        if let Some(path) = env("PATH") {
            for dir in std::env::split_paths(&path) {
                if !dir.is_absolute() {
                    continue;
                }
                let Ok(dir) = dir.canonicalize() else {
                    continue;
                };
                // A PATH holding `/` or the home itself would open all of it: skip those.
                if dir.parent().is_none() || home.as_deref().is_some_and(|h| h.starts_with(&dir)) {
                    continue;
                }
                let tool_home = dir
                    .file_name()
                    .is_some_and(|n| n == "bin" || n == "sbin" || n == "shims")
                    .then(|| dir.parent())
                    .flatten()
                    .filter(|p| {
                        p.file_name()
                            .is_some_and(|n| n.to_string_lossy().starts_with('.'))
                    })
                    .map(Path::to_path_buf);
                read.push(dir);
                read.extend(tool_home);
            }
        }
        if let Some(h) = &home {
            read.extend(HOME_TOOLCHAIN_DIRS.iter().map(|d| h.join(d)));
        }
        for var in TOOLCHAIN_VARS {
            if let Some(v) = env(var).filter(|v| !v.is_empty()) {
                let p = PathBuf::from(v);
                // Never the home itself or `/` (a variable set to either would open all).
                if p.is_absolute() && p.parent().is_some() && home.as_deref() != Some(&p) {
                    read.push(p);
                }
            }
        }
        read.extend(self.readable_roots.iter().cloned());
        read.extend(executables.iter().cloned());
        read.push(project.to_path_buf());

        let mut temp: Vec<PathBuf> = vec![
            std::env::temp_dir(),
            PathBuf::from("/tmp"),
            PathBuf::from("/var/tmp"),
        ];
        if let Some(t) = env("TMPDIR").filter(|t| !t.is_empty()) {
            temp.push(PathBuf::from(t));
        }
        let mut write = Vec::new();
        match self.mode {
            SandboxMode::WorkspaceWrite => {
                write.push(project.to_path_buf());
                write.extend(temp);
                write.extend(self.writable_roots.iter().cloned());
            }
            SandboxMode::ReadOnly | SandboxMode::Off => read.extend(temp),
        }
        let devices = WRITABLE_DEVICES.iter().map(PathBuf::from).collect();
        SandboxPaths {
            read: existing(read),
            write: existing(write),
            devices: existing(devices),
        }
    }

    /// The confinement of one command working in `project` (`None` when the mode is
    /// [`SandboxMode::Off`]); install it on the command with [`Confinement::install`]. See
    /// [`paths`](Self::paths) for `env` and `executables`. Fails when this system cannot
    /// sandbox ([`support`]) or the rules cannot be built.
    pub fn confinement(
        &self,
        project: &Path,
        env: &dyn Fn(&str) -> Option<String>,
        executables: &[PathBuf],
    ) -> Result<Option<Confinement>, SandboxError> {
        if self.is_off() {
            return Ok(None);
        }
        if let Support::Unavailable { reason } = support() {
            return Err(SandboxError::Unsupported(reason.clone()));
        }
        let paths = self.paths(project, env, executables);
        Confinement::prepare(&paths, self.allow_net).map(Some)
    }
}

/// The canonical forms of the paths that exist, without repeats.
fn existing(paths: Vec<PathBuf>) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::with_capacity(paths.len());
    for p in paths {
        if let Ok(c) = p.canonicalize()
            && !out.contains(&c)
        {
            out.push(c);
        }
    }
    out
}

/// The paths of one command's sandbox ([`Sandbox::paths`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SandboxPaths {
    /// Read and execute.
    pub read: Vec<PathBuf>,
    /// Read, write, create, remove.
    pub write: Vec<PathBuf>,
    /// Devices: read and write, no creating or removing.
    pub devices: Vec<PathBuf>,
}

/// One command's sandbox, ready to be applied in the child: the Landlock ruleset (its rules
/// already added) and the compiled seccomp filter. Made by [`Sandbox::confinement`].
pub struct Confinement {
    #[cfg(target_os = "linux")]
    inner: crate::confine::Prepared,
}

impl fmt::Debug for Confinement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Confinement").finish_non_exhaustive()
    }
}

impl Confinement {
    #[cfg(target_os = "linux")]
    fn prepare(paths: &SandboxPaths, allow_net: bool) -> Result<Self, SandboxError> {
        Ok(Confinement {
            inner: crate::confine::Prepared::new(paths, allow_net)?,
        })
    }

    #[cfg(not(target_os = "linux"))]
    fn prepare(_paths: &SandboxPaths, _allow_net: bool) -> Result<Self, SandboxError> {
        Err(SandboxError::Unsupported(
            "command sandboxing needs Linux (Landlock and seccomp)".into(),
        ))
    }

    /// Makes `cmd` confine itself when it is spawned: in the child, before `exec`, it enforces
    /// the Landlock ruleset (with `no_new_privs`) and then the seccomp filter. If either fails,
    /// the spawn fails (the command never runs unconfined): with `EOPNOTSUPP` when the kernel
    /// did not enforce the ruleset, else the error of the failed call.
    pub fn install(self, cmd: &mut std::process::Command) {
        #[cfg(target_os = "linux")]
        self.inner.install(cmd);
        #[cfg(not(target_os = "linux"))]
        let _ = cmd;
    }
}

/// Whether a command's output looks like the sandbox stopped something: it mentions a denied
/// permission, a read-only file system or an unreachable network (`Permission denied`,
/// `Operation not permitted`, Python's `PermissionError`, …). A heuristic: the same words
/// appear when the system itself refuses, so the note says "probably".
pub fn looks_blocked(output: &str) -> bool {
    const SIGNS: &[&str] = &[
        "Permission denied",
        "permission denied",
        "Operation not permitted",
        "operation not permitted",
        "Read-only file system",
        "Network is unreachable",
        "Invalid cross-device link",
        "PermissionError",
        "EACCES",
        "EPERM",
        "(os error 1)",
        "(os error 13)",
    ];
    SIGNS.iter().any(|s| output.contains(s))
}

/// The note for the model when `output` looks blocked by `sandbox` ([`looks_blocked`]), else
/// `None`. Never a note when the sandbox is off.
pub fn blocked_hint(sandbox: &Sandbox, output: &str) -> Option<String> {
    (!sandbox.is_off() && looks_blocked(output)).then(|| sandbox.blocked_hint())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse_and_print() {
        for m in [
            SandboxMode::ReadOnly,
            SandboxMode::WorkspaceWrite,
            SandboxMode::Off,
        ] {
            assert_eq!(m.as_str().parse::<SandboxMode>(), Ok(m));
        }
        assert_eq!(SandboxMode::default(), SandboxMode::WorkspaceWrite);
        assert!(
            "danger"
                .parse::<SandboxMode>()
                .unwrap_err()
                .to_string()
                .contains("read-only, workspace-write or off")
        );
    }

    #[test]
    fn paths_keep_the_home_out_but_its_toolchains_in() {
        let home = tempfile::tempdir().unwrap();
        let project = home.path().join("proj");
        std::fs::create_dir_all(&project).unwrap();
        std::fs::create_dir_all(home.path().join(".ssh")).unwrap();
        std::fs::create_dir_all(home.path().join(".cargo/bin")).unwrap();
        std::fs::create_dir_all(home.path().join(".pyenv/shims")).unwrap();
        let path = format!(
            "{}:{}:/usr/bin:{}",
            home.path().join(".pyenv/shims").display(),
            home.path().display(),
            "relative/bin"
        );
        let env = |k: &str| (k == "PATH").then(|| path.clone());
        let sb = Sandbox::new(SandboxMode::WorkspaceWrite).home(Some(home.path().into()));
        let p = sb.paths(&project, &env, &[]);
        let h = home.path().canonicalize().unwrap();
        assert!(p.read.contains(&h.join(".cargo")));
        assert!(p.read.contains(&h.join(".pyenv")), "{:?}", p.read);
        assert!(p.read.contains(&h.join(".pyenv/shims")));
        assert!(!p.read.contains(&h), "the home itself is never opened");
        assert!(!p.read.iter().any(|r| r.ends_with(".ssh")));
        assert!(p.write.contains(&h.join("proj")));
        assert!(
            p.write
                .contains(&std::env::temp_dir().canonicalize().unwrap())
        );
        let ro = Sandbox::new(SandboxMode::ReadOnly).home(Some(home.path().into()));
        let p = ro.paths(&project, &env, &[]);
        assert!(p.write.is_empty());
        assert!(p.read.contains(&h.join("proj")));
    }

    #[test]
    fn the_hint_says_what_is_allowed_and_how_to_allow_more() {
        let sb = Sandbox::new(SandboxMode::WorkspaceWrite).with_allow_hint("--sandbox off");
        let hint = blocked_hint(&sb, "sh: 1: cannot create /etc/x: Permission denied").unwrap();
        assert!(hint.starts_with("[sandbox] "), "{hint}");
        assert!(hint.contains("only inside the project"), "{hint}");
        assert!(hint.contains("no network"), "{hint}");
        assert!(hint.contains("--sandbox off"), "{hint}");
        assert!(!hint.contains('\n'));
        assert_eq!(blocked_hint(&sb, "all fine"), None);
        assert_eq!(blocked_hint(&Sandbox::off(), "Permission denied"), None);
    }
}
