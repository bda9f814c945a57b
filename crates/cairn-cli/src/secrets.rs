//! API keys and other credentials from the environment: read once, then removed from the
//! process.
//!
//! # Why and how
//!
//! `execute` runs shell commands as children of cairn. Their own environment is scrubbed
//! ([`SHELL_ENV`](crate::app::SHELL_ENV)), but a child can read its parent's environment as it
//! was at start-up from `/proc/$PPID/environ`, and the parent's memory from `/proc/$PPID/mem`.
//! So, at the very start of `main`, before any other thread exists:
//!
//! 1. [`Secrets::take`] copies the credential variables ([`is_secret_name`]: every `*_API_KEY`,
//!    and the providers' `*_BASE_URL`, which may hold `user:password@`) into a [`Secrets`] value
//!    that the CLI passes explicitly to the provider builders (see [`crate::model::load`]);
//! 2. it overwrites the values of those variables with NUL bytes in the original environment
//!    block (the memory between `env_start` and `env_end` of `/proc/self/stat`, which is what
//!    `/proc/PID/environ` shows; `unsetenv` would not change it) through `/proc/self/mem` (safe
//!    code: a file write), and checks that the values are gone. From then on `std::env::var`
//!    of such a variable returns an empty string, so nothing may read them from the
//!    environment again: use [`Secrets::get`];
//! 3. it marks the process non-dumpable (`PR_SET_DUMPABLE` 0), so processes of the same user
//!    can no longer open its `/proc/PID/{environ,mem}` or attach a debugger to it. Children
//!    become dumpable again when they `exec`.
//!
//! Every value taken is also registered for redaction: [`redact`] replaces it (and
//! `user:password@` in URLs) in everything the CLI prints (see [`crate::render::sanitize`]).
//!
//! Elsewhere than on Linux the values are read but the environment is left as it is.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::OnceLock;

/// The base-URL variables of the providers: they may carry `user:password@`.
pub const BASE_URL_VARS: &[&str] = &[
    "OPENAI_BASE_URL",
    "OLLAMA_BASE_URL",
    "ANTHROPIC_BASE_URL",
    "GEMINI_BASE_URL",
];

/// Values shorter than this are not redacted in output (they would match ordinary text).
pub const MIN_REDACTED_LEN: usize = 8;

/// What replaces a secret in output.
pub const REDACTED: &str = "[redacted]";

/// Whether the variable `name` is taken out of the environment: any `*_API_KEY` (the providers
/// read `OPENAI_API_KEY`, `ANTHROPIC_API_KEY`, `GEMINI_API_KEY`, `GOOGLE_API_KEY` and
/// `OLLAMA_API_KEY`) and the [`BASE_URL_VARS`].
pub fn is_secret_name(name: &str) -> bool {
    name.ends_with("_API_KEY") || BASE_URL_VARS.contains(&name)
}

/// The credentials read from the environment at start-up.
#[derive(Default, Clone)]
pub struct Secrets {
    vars: BTreeMap<String, String>,
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Secrets")
            .field("names", &self.vars.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

/// How taking the secrets out of the process went (for `--verbose` and tests).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScrubReport {
    /// Variables whose values were overwritten in the original environment block.
    pub scrubbed: Vec<String>,
    /// Why the environment block could not be scrubbed, if it could not.
    pub scrub_error: Option<String>,
    /// Why the process could not be made non-dumpable, if it could not.
    pub dumpable_error: Option<String>,
}

impl Secrets {
    /// Secrets from explicit pairs (tests, embedding).
    pub fn from_pairs<K: Into<String>, V: Into<String>>(
        pairs: impl IntoIterator<Item = (K, V)>,
    ) -> Secrets {
        Secrets {
            vars: pairs
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        }
    }

    /// Reads the secret variables, removes their values from the process environment and
    /// makes the process non-dumpable (see the module documentation). Call it first thing in
    /// `main`, before any thread is started; call it once.
    pub fn take() -> (Secrets, ScrubReport) {
        let secrets = Secrets {
            vars: std::env::vars_os()
                .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
                .filter(|(k, v)| is_secret_name(k) && !v.is_empty())
                .collect(),
        };
        register_for_redaction(&secrets);
        let mut report = ScrubReport::default();
        let names: Vec<&str> = secrets.vars.keys().map(String::as_str).collect();
        #[cfg(target_os = "linux")]
        {
            if !names.is_empty() {
                match scrub::environ_block(&names) {
                    Ok(done) => report.scrubbed = done,
                    Err(e) => report.scrub_error = Some(e.to_string()),
                }
            }
            if let Err(e) = rustix::process::set_dumpable_behavior(
                rustix::process::DumpableBehavior::NotDumpable,
            ) {
                report.dumpable_error = Some(e.to_string());
            }
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = names;
            report.scrub_error = Some("only supported on Linux".into());
        }
        (secrets, report)
    }

    /// Every secret value (trimmed, non-blank): texts a server must never send back.
    pub fn values(&self) -> Vec<String> {
        self.vars
            .values()
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
            .collect()
    }

    /// The value of a secret variable (trimmed), if it was set and not blank.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.vars
            .get(name)
            .map(|v| v.trim())
            .filter(|v| !v.is_empty())
    }

    /// A variable by name: from the secrets for a secret name (whose environment value is
    /// gone), else from the environment. Blank values count as unset.
    pub fn var(&self, name: &str) -> Option<String> {
        if is_secret_name(name) {
            return self.get(name).map(str::to_owned);
        }
        std::env::var(name).ok().filter(|v| !v.trim().is_empty())
    }

    /// The values to redact from output: every value at least [`MIN_REDACTED_LEN`] long, and
    /// the passwords of URLs.
    fn redactions(&self) -> Vec<String> {
        let mut out = Vec::new();
        for v in self.vars.values() {
            let v = v.trim();
            if v.chars().count() >= MIN_REDACTED_LEN {
                out.push(v.to_owned());
            }
            if let Some((_, password)) = url_userinfo(v).and_then(|u| u.split_once(':'))
                && password.chars().count() >= 4
            {
                out.push(password.to_owned());
            }
        }
        // Longest first, so that a value containing another is replaced whole.
        out.sort_by_key(|s| std::cmp::Reverse(s.len()));
        out.dedup();
        out
    }
}

static REDACT: OnceLock<Vec<String>> = OnceLock::new();

/// Registers the values of `secrets` for [`redact`] (the first registration wins).
pub fn register_for_redaction(secrets: &Secrets) {
    let _ = REDACT.set(secrets.redactions());
}

/// `text` with every registered secret replaced by [`REDACTED`] and every `user:password@` (or
/// `user@`) of a URL replaced by `***@`.
///
/// Streamed text arrives in pieces; a secret split across two pieces is not caught here (the
/// providers redact their own errors, and the key never reaches the model or the tools).
pub fn redact(text: &str) -> Cow<'_, str> {
    let mut out = redact_url_credentials(text);
    if let Some(values) = REDACT.get() {
        for v in values {
            if out.contains(v.as_str()) {
                out = Cow::Owned(out.replace(v.as_str(), REDACTED));
            }
        }
    }
    out
}

/// The `user:password` part of a URL's authority, if any.
fn url_userinfo(url: &str) -> Option<&str> {
    let (_, rest) = url.split_once("://")?;
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..end];
    authority.rfind('@').map(|at| &authority[..at])
}

/// `text` with the credentials of every URL in it (`scheme://user:password@host`) replaced by
/// `***` ([`cairn_providers::redact_url`]).
pub fn redact_url_credentials(text: &str) -> Cow<'_, str> {
    if text.contains("://") && text.contains('@') {
        Cow::Owned(cairn_providers::redact_url(text))
    } else {
        Cow::Borrowed(text)
    }
}

#[cfg(target_os = "linux")]
mod scrub {
    //! Overwriting values in the process's original environment block.

    use std::fs::OpenOptions;
    use std::io::{Error, ErrorKind, Result};
    use std::os::unix::fs::FileExt;

    /// `env_start` and `env_end` (fields 50 and 51) of `/proc/self/stat`.
    pub(super) fn env_range() -> Result<(u64, u64)> {
        let stat = std::fs::read_to_string("/proc/self/stat")?;
        // Field 2 (the command name) is in parentheses and may contain spaces: count from the
        // last `)`, after which field 3 starts.
        let after = stat
            .rfind(')')
            .map(|i| &stat[i + 1..])
            .ok_or_else(|| Error::new(ErrorKind::InvalidData, "unexpected /proc/self/stat"))?;
        let fields: Vec<&str> = after.split_whitespace().collect();
        let field = |n: usize| -> Result<u64> {
            fields
                .get(n - 3)
                .and_then(|f| f.parse().ok())
                .ok_or_else(|| Error::new(ErrorKind::InvalidData, "no env_start/env_end in stat"))
        };
        let (start, end) = (field(50)?, field(51)?);
        if end <= start || end - start > 64 * 1024 * 1024 {
            return Err(Error::new(
                ErrorKind::InvalidData,
                "implausible environment block bounds",
            ));
        }
        Ok((start, end))
    }

    /// Overwrites the values of `names` in the original environment block with NUL bytes and
    /// checks that they are gone; returns the names it overwrote.
    pub(super) fn environ_block(names: &[&str]) -> Result<Vec<String>> {
        let (start, end) = env_range()?;
        let mem = OpenOptions::new()
            .read(true)
            .write(true)
            .open("/proc/self/mem")?;
        let len = usize::try_from(end - start)
            .map_err(|_| Error::new(ErrorKind::InvalidData, "environment block too large"))?;
        let mut block = vec![0u8; len];
        mem.read_exact_at(&mut block, start)?;
        let mut done = Vec::new();
        let mut offset = 0usize;
        for entry in block.split(|b| *b == 0) {
            let entry_start = offset;
            offset += entry.len() + 1;
            let Some(eq) = entry.iter().position(|b| *b == b'=') else {
                continue;
            };
            let Ok(name) = std::str::from_utf8(&entry[..eq]) else {
                continue;
            };
            let value_len = entry.len() - eq - 1;
            if value_len == 0 || !names.contains(&name) {
                continue;
            }
            let at = start + (entry_start + eq + 1) as u64;
            mem.write_all_at(&vec![0u8; value_len], at)?;
            let mut check = vec![1u8; value_len];
            mem.read_exact_at(&mut check, at)?;
            if check.iter().any(|b| *b != 0) {
                return Err(Error::other(format!(
                    "the value of {name} is still in the environment block"
                )));
            }
            done.push(name.to_owned());
        }
        Ok(done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_names() {
        assert!(is_secret_name("OPENAI_API_KEY"));
        assert!(is_secret_name("SOME_OTHER_API_KEY"));
        assert!(is_secret_name("OPENAI_BASE_URL"));
        assert!(!is_secret_name("PATH"));
        assert!(!is_secret_name("OPENAI_MODEL"));
    }

    #[test]
    fn url_credentials_are_redacted() {
        assert_eq!(
            redact_url_credentials("error for url (http://user:pw@host:8/v1/chat)"),
            "error for url (http://***@host:8/v1/chat)"
        );
        assert_eq!(
            redact_url_credentials("https://tok@h and http://h2/x@y"),
            "https://***@h and http://h2/x@y"
        );
        assert_eq!(redact_url_credentials("a@b c://d"), "a@b c://d");
        assert_eq!(url_userinfo("http://u:p@h/x"), Some("u:p"));
        assert_eq!(url_userinfo("http://h/u:p@x"), None);
    }

    #[test]
    fn redactions_hold_long_values_and_url_passwords() {
        let s = Secrets::from_pairs([
            ("OPENAI_API_KEY", "sk-test-SECRET"),
            ("OLLAMA_API_KEY", "short"),
            ("OPENAI_BASE_URL", "http://bob:hunter22@h/v1"),
        ]);
        let r = s.redactions();
        assert!(r.contains(&"sk-test-SECRET".to_owned()));
        assert!(r.contains(&"hunter22".to_owned()));
        assert!(!r.contains(&"short".to_owned()));
        assert_eq!(s.get("OPENAI_API_KEY"), Some("sk-test-SECRET"));
        assert_eq!(s.var("OPENAI_API_KEY").as_deref(), Some("sk-test-SECRET"));
        assert_eq!(s.var("ANTHROPIC_API_KEY"), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_environment_block_bounds_are_readable() {
        let (start, end) = scrub::env_range().unwrap();
        assert!(end > start);
    }
}
