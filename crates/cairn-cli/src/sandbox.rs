//! Command safety for the CLI: the sandbox and the exec policy of the agent's shell commands,
//! from the flags (`--sandbox`, `--allow-net`) and the user's config file
//! (`~/.config/cairn/config.toml`, or `$CAIRN_CONFIG`).
//!
//! ```toml
//! # ~/.config/cairn/config.toml
//! sandbox = "workspace-write"        # or "read-only"; "off" only with the --sandbox off flag
//! allow_net = false                  # let commands use the network
//! writable_roots = ["~/.cache/pip"]  # more directories commands may write
//! readable_roots = []                # more directories commands may read
//! default_exec_rules = true          # the shipped allow/prompt/forbid rules
//!
//! [[exec_rules]]
//! prefix = "git push"
//! decision = "forbid"                # allow | prompt | forbid
//! match = ["git push origin main"]   # checked when the file loads
//! not_match = ["git pull"]
//! ```
//!
//! Only the user's own file is read, never one in the project: a repository must not be able
//! to loosen the sandbox of the agent working in it.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail};
use cairn_sandbox::{ExecPolicy, Rule, Sandbox, SandboxMode, Support};
use serde::Deserialize;

/// The user's config file, under `$HOME`.
pub const USER_CONFIG: &str = ".config/cairn/config.toml";

/// What the model is told the user can do when the sandbox blocked a command.
pub const ALLOW_HINT: &str = "the user can rerun cairn with --allow-net or --sandbox off, or add writable_roots in ~/.config/cairn/config.toml";

/// The command-safety keys of the config file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SafetyConfig {
    /// `read-only` or `workspace-write` (`off` is refused here: it needs the flag).
    pub sandbox: Option<SandboxMode>,
    /// Let commands use the network.
    pub allow_net: Option<bool>,
    /// More directories commands may write (`~/` is the home).
    #[serde(default)]
    pub writable_roots: Vec<String>,
    /// More directories commands may read (`~/` is the home).
    #[serde(default)]
    pub readable_roots: Vec<String>,
    /// Whether the shipped exec rules apply (default true).
    pub default_exec_rules: Option<bool>,
    /// The user's own exec rules, added to the defaults.
    #[serde(default)]
    pub exec_rules: Vec<Rule>,
}

impl SafetyConfig {
    /// Parses a config file's text (`path` names it in errors).
    pub fn parse(text: &str, path: &Path) -> Result<Self> {
        let c: SafetyConfig =
            toml::from_str(text).with_context(|| format!("cannot read {}", path.display()))?;
        if c.sandbox == Some(SandboxMode::Off) {
            bail!(
                "{}: sandbox = \"off\" is not accepted in the config file; turning the sandbox off needs the command-line flag --sandbox off",
                path.display()
            );
        }
        Ok(c)
    }

    /// The user's config: `$CAIRN_CONFIG`, else `~/.config/cairn/config.toml`; empty when the
    /// file does not exist.
    pub fn load(lookup: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let path = match lookup("CAIRN_CONFIG").filter(|p| !p.is_empty()) {
            Some(p) => PathBuf::from(p),
            None => match lookup("HOME").filter(|h| !h.is_empty()) {
                Some(h) => Path::new(&h).join(USER_CONFIG),
                None => return Ok(SafetyConfig::default()),
            },
        };
        match std::fs::read_to_string(&path) {
            Ok(text) => SafetyConfig::parse(&text, &path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(SafetyConfig::default()),
            Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
        }
    }
}

/// The sandbox and exec policy the agent's commands run under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandSafety {
    /// What commands may touch.
    pub sandbox: Sandbox,
    /// Which commands run without asking, need approval, or never run.
    pub exec_policy: ExecPolicy,
}

impl Default for CommandSafety {
    /// `workspace-write` without network, the default exec rules.
    fn default() -> Self {
        CommandSafety {
            sandbox: Sandbox::new(SandboxMode::WorkspaceWrite).with_allow_hint(ALLOW_HINT),
            exec_policy: ExecPolicy::with_defaults(),
        }
    }
}

impl CommandSafety {
    /// The flags over the config over the defaults. `home` expands `~/` in the config's paths
    /// and names the home whose toolchains commands may use.
    pub fn resolve(
        mode_flag: Option<SandboxMode>,
        allow_net_flag: bool,
        config: SafetyConfig,
        home: Option<&Path>,
    ) -> Result<Self> {
        let mode = mode_flag
            .or(config.sandbox)
            .unwrap_or(SandboxMode::WorkspaceWrite);
        let expand = |p: &str| -> Result<PathBuf> {
            let path = match (p.strip_prefix("~/"), home) {
                (Some(rest), Some(h)) => h.join(rest),
                (Some(_), None) => bail!("{p}: there is no home directory to expand ~ in"),
                (None, _) => PathBuf::from(p),
            };
            if !path.is_absolute() {
                bail!("{p}: sandbox roots must be absolute paths (or start with ~/)");
            }
            Ok(path)
        };
        let mut sandbox = Sandbox::new(mode)
            .home(home.map(Path::to_path_buf))
            .allow_net(allow_net_flag || config.allow_net.unwrap_or(false))
            .with_allow_hint(ALLOW_HINT);
        for p in &config.writable_roots {
            sandbox = sandbox.writable_root(expand(p)?);
        }
        for p in &config.readable_roots {
            sandbox = sandbox.readable_root(expand(p)?);
        }
        let base = if config.default_exec_rules.unwrap_or(true) {
            ExecPolicy::with_defaults()
        } else {
            ExecPolicy::empty()
        };
        let exec_policy = base
            .with_rules(config.exec_rules)
            .context("an exec rule of the config does not load")?;
        Ok(CommandSafety {
            sandbox,
            exec_policy,
        })
    }

    /// Whether every command needs a decision because a sandbox was asked for and this
    /// system cannot enforce it (the old-kernel fallback).
    pub fn asks_for_every_command(&self) -> bool {
        !self.sandbox.is_off() && !cairn_sandbox::support().is_available()
    }

    /// What the banner says about commands: `sandbox: workspace-write, no network`,
    /// `sandbox OFF: commands run with your full rights`, or the fallback.
    pub fn banner(&self) -> String {
        if self.sandbox.is_off() {
            "sandbox OFF: commands run with your full rights".into()
        } else if self.asks_for_every_command() {
            "no sandbox on this system: asking before every command".into()
        } else {
            format!("sandbox: {}", self.sandbox.summary())
        }
    }

    /// The one-time warning for a system that cannot sandbox, when a sandbox was asked for.
    pub fn fallback_warning(&self) -> Option<String> {
        if self.sandbox.is_off() {
            return None;
        }
        match cairn_sandbox::support() {
            Support::Unavailable { reason } => Some(format!(
                "cairn: commands cannot be sandboxed on this system ({reason}); cairn will ask before running each one, even with --yes. --sandbox off runs them unconfined without asking."
            )),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_win_over_the_config_and_off_needs_the_flag() {
        let p = Path::new("/home/u/.config/cairn/config.toml");
        let c = SafetyConfig::parse(
            "sandbox = \"read-only\"\nallow_net = true\nwritable_roots = [\"~/.cache/pip\"]\n",
            p,
        )
        .unwrap();
        let home = Path::new("/home/u");
        let s = CommandSafety::resolve(None, false, c.clone(), Some(home)).unwrap();
        assert_eq!(s.sandbox.mode, SandboxMode::ReadOnly);
        assert!(s.sandbox.allow_net);
        assert_eq!(
            s.sandbox.writable_roots,
            [PathBuf::from("/home/u/.cache/pip")]
        );
        let s = CommandSafety::resolve(Some(SandboxMode::Off), false, c, Some(home)).unwrap();
        assert!(s.sandbox.is_off());
        let err = SafetyConfig::parse("sandbox = \"off\"\n", p).unwrap_err();
        assert!(format!("{err:#}").contains("--sandbox off"), "{err:#}");
        let d = CommandSafety::resolve(None, false, SafetyConfig::default(), None).unwrap();
        assert_eq!(d.sandbox.mode, SandboxMode::WorkspaceWrite);
        assert!(!d.sandbox.allow_net);
        assert_eq!(d.exec_policy, ExecPolicy::with_defaults());
    }

    #[test]
    fn config_rules_are_checked_and_typos_are_errors() {
        let p = Path::new("c.toml");
        let c = SafetyConfig::parse(
            "default_exec_rules = false\n[[exec_rules]]\nprefix = \"make\"\ndecision = \"allow\"\nmatch = [\"make test\"]\n",
            p,
        )
        .unwrap();
        let s = CommandSafety::resolve(None, false, c, None).unwrap();
        assert_eq!(s.exec_policy.rules().len(), 1);
        let bad = SafetyConfig::parse(
            "[[exec_rules]]\nprefix = \"make\"\ndecision = \"allow\"\nmatch = [\"cmake\"]\n",
            p,
        )
        .unwrap();
        let err = CommandSafety::resolve(None, false, bad, None).unwrap_err();
        assert!(format!("{err:#}").contains("does not match"), "{err:#}");
        assert!(SafetyConfig::parse("alow_net = true\n", p).is_err());
        assert!(SafetyConfig::parse("writable_roots = [\"rel\"]\n", p).is_ok());
        let rel = SafetyConfig::parse("writable_roots = [\"rel\"]\n", p).unwrap();
        assert!(CommandSafety::resolve(None, false, rel, None).is_err());
    }
}
