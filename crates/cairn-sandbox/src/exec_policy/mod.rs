//! The exec policy: prefix rules over the parsed command line decide, before a command runs,
//! whether it runs without asking ([`Decision::Allow`]), needs a person's approval
//! ([`Decision::Prompt`]), or never runs ([`Decision::Forbid`]).
//!
//! - A command line is parsed ([`parse`]) into simple commands (split at `;`, `&&`, `||`, `|`,
//!   …). A [`Rule`] matches a simple command when its prefix words are the command's first
//!   words (`git push` matches `git push origin main`, not `git pushx`). For `prompt` and
//!   `forbid` rules the program may also be named with a directory (`/usr/bin/git push`);
//!   an `allow` rule needs the program exactly as written in the rule, so `./ls` is not
//!   allowed by a rule for `ls`.
//! - Every simple command gets the **strictest** decision of the rules that match it, and
//!   [`Decision::Prompt`] when none does; the line gets the strictest decision of its
//!   commands. So `ls && rm -rf build` needs approval although `ls` is allowed, and a broad
//!   `allow git` cannot open `git push` when a rule says `prompt git push`.
//! - A command that would be allowed but writes a file through a redirection (`ls > out`) or a
//!   writing argument (`find -delete`, `sort -o`) needs approval instead.
//! - A line the parser cannot judge (command substitution, here-documents, subshells,
//!   control structures, `sh -c`, `eval`, `xargs`, `sudo`, `find -exec`, …; see
//!   [`Line::opaque`]) needs approval, unless a command it could see is forbidden.
//! - Rules carry examples (`match`, `not_match`) that are checked when the policy is built:
//!   a rule whose example does not behave as claimed is an error, so a typo in a rule is
//!   found when it loads, not when it fails to protect.
//!
//! [`ExecPolicy::with_defaults`] ships rules that allow common read-only commands (`ls`,
//! `cat`, `grep`, `rg`, `git status|diff|log`, `cargo check|test`, `python -m pytest`, …; see
//! [`default_rules`]), ask for a few destructive ones even when a broader rule allows their
//! program, and forbid wiping the root or the home directory.
//!
//! ```
//! use cairn_sandbox::{Decision, ExecPolicy, Rule};
//! let policy = ExecPolicy::with_defaults()
//!     .with_rules([Rule::new("git push", Decision::Forbid)
//!         .unwrap()
//!         .matching("git push origin main")
//!         .not_matching("git pull")])
//!     .unwrap();
//! assert_eq!(policy.check("git status").decision, Decision::Allow);
//! assert_eq!(policy.check("git status && git push").decision, Decision::Forbid);
//! assert_eq!(policy.check("make install").decision, Decision::Prompt);
//! assert_eq!(policy.check("ls $(echo /)").decision, Decision::Prompt);
//! ```

mod defaults;
mod parse;

use std::fmt;

use serde::{Deserialize, Serialize};

pub use defaults::default_rules;
pub use parse::{Line, SimpleCommand, parse};

/// What happens to a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// Runs without asking.
    Allow,
    /// Runs once a person approves it (when the front end asks at all: `--yes` approves
    /// everything that is not forbidden).
    Prompt,
    /// Never runs; the model is told why.
    Forbid,
}

impl Decision {
    /// `allow`, `prompt` or `forbid`.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Allow => "allow",
            Decision::Prompt => "prompt",
            Decision::Forbid => "forbid",
        }
    }
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A rule that does not load.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// The prefix is empty or is not plain words.
    #[error("exec rule prefix {prefix:?} is not usable: {why}")]
    BadPrefix {
        /// The prefix as given.
        prefix: String,
        /// What is wrong with it.
        why: String,
    },
    /// A `match` example that the rule does not match.
    #[error("exec rule `{rule}`: its example {example:?} does not match it")]
    ExampleNotMatched {
        /// The rule (`decision prefix`).
        rule: String,
        /// The example.
        example: String,
    },
    /// A `not_match` example that the rule matches.
    #[error("exec rule `{rule}`: its example {example:?} matches it but is listed under not_match")]
    ExampleMatched {
        /// The rule (`decision prefix`).
        rule: String,
        /// The example.
        example: String,
    },
}

/// One prefix rule. In a config file (TOML):
///
/// ```toml
/// [[exec_rules]]
/// prefix = "git push"            # or ["git", "push"]
/// decision = "prompt"            # allow | prompt | forbid
/// match = ["git push origin main"]
/// not_match = ["git pull"]
/// justification = "pushing publishes work"
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "RawRule", into = "RawRule")]
pub struct Rule {
    /// The words a command must start with.
    pub prefix: Vec<String>,
    /// What happens to matching commands.
    pub decision: Decision,
    /// Command lines this rule must match (checked when the policy is built).
    pub examples: Vec<String>,
    /// Command lines this rule must not match (checked when the policy is built).
    pub counter_examples: Vec<String>,
    /// Why, shown with the decision.
    pub justification: Option<String>,
}

/// A prefix as written: one string of shell words, or a list of words.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
enum RawPrefix {
    Line(String),
    Words(Vec<String>),
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    prefix: RawPrefix,
    decision: Decision,
    #[serde(default, rename = "match", skip_serializing_if = "Vec::is_empty")]
    matches: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    not_match: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    justification: Option<String>,
}

impl TryFrom<RawRule> for Rule {
    type Error = PolicyError;
    fn try_from(raw: RawRule) -> Result<Self, PolicyError> {
        let prefix = match raw.prefix {
            RawPrefix::Line(line) => split_prefix(&line)?,
            RawPrefix::Words(words) => words,
        };
        if prefix.is_empty() || prefix.iter().any(String::is_empty) {
            return Err(PolicyError::BadPrefix {
                prefix: prefix.join(" "),
                why: "it needs at least one word, and no empty words".into(),
            });
        }
        Ok(Rule {
            prefix,
            decision: raw.decision,
            examples: raw.matches,
            counter_examples: raw.not_match,
            justification: raw.justification,
        })
    }
}

impl From<Rule> for RawRule {
    fn from(r: Rule) -> Self {
        RawRule {
            prefix: RawPrefix::Words(r.prefix),
            decision: r.decision,
            matches: r.examples,
            not_match: r.counter_examples,
            justification: r.justification,
        }
    }
}

/// The words of a prefix written as one string: a single simple command of plain words.
fn split_prefix(line: &str) -> Result<Vec<String>, PolicyError> {
    let bad = |why: &str| PolicyError::BadPrefix {
        prefix: line.to_owned(),
        why: why.to_owned(),
    };
    let parsed = parse(line);
    if let Some(why) = parsed.opaque.filter(|w| !w.contains("runs a command")) {
        return Err(bad(&format!("it contains {why}")));
    }
    match parsed.commands.as_slice() {
        [one] if one.writes.is_none() => Ok(one.words.clone()),
        [] => Err(bad("it has no words")),
        _ => Err(bad(
            "it must be one command without operators or redirections",
        )),
    }
}

impl Rule {
    /// A rule for commands starting with the words of `prefix` (shell words: `"git push"`).
    pub fn new(prefix: &str, decision: Decision) -> Result<Self, PolicyError> {
        Rule::try_from(RawRule {
            prefix: RawPrefix::Line(prefix.to_owned()),
            decision,
            matches: Vec::new(),
            not_match: Vec::new(),
            justification: None,
        })
    }

    /// Adds an example this rule must match.
    #[must_use]
    pub fn matching(mut self, example: impl Into<String>) -> Self {
        self.examples.push(example.into());
        self
    }

    /// Adds an example this rule must not match.
    #[must_use]
    pub fn not_matching(mut self, example: impl Into<String>) -> Self {
        self.counter_examples.push(example.into());
        self
    }

    /// Says why (shown with the decision).
    #[must_use]
    pub fn justified(mut self, why: impl Into<String>) -> Self {
        self.justification = Some(why.into());
        self
    }

    /// Whether this rule matches the simple command `cmd`.
    pub fn matches(&self, cmd: &SimpleCommand) -> bool {
        if cmd.words.len() < self.prefix.len() {
            return false;
        }
        let program_ok = cmd.words[0] == self.prefix[0]
            || (self.decision != Decision::Allow && cmd.program() == Some(&self.prefix[0]));
        program_ok
            && self
                .prefix
                .iter()
                .zip(&cmd.words)
                .skip(1)
                .all(|(p, w)| p == w)
    }

    /// Whether this rule matches some simple command of the command line `line`.
    pub fn matches_line(&self, line: &str) -> bool {
        parse(line).commands.iter().any(|c| self.matches(c))
    }

    /// Checks the examples: every `match` example matches, no `not_match` example does.
    pub fn check_examples(&self) -> Result<(), PolicyError> {
        if let Some(e) = self.examples.iter().find(|e| !self.matches_line(e)) {
            return Err(PolicyError::ExampleNotMatched {
                rule: self.to_string(),
                example: e.clone(),
            });
        }
        if let Some(e) = self.counter_examples.iter().find(|e| self.matches_line(e)) {
            return Err(PolicyError::ExampleMatched {
                rule: self.to_string(),
                example: e.clone(),
            });
        }
        Ok(())
    }
}

impl fmt::Display for Rule {
    /// `decision prefix words`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.decision, self.prefix.join(" "))
    }
}

/// The decision for a command line and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// What happens.
    pub decision: Decision,
    /// Why, in a short phrase for a person or the model (`rule \`forbid git push\``,
    /// `no rule allows \`make\``, `it uses command substitution, which the exec policy cannot
    /// judge`).
    pub reason: String,
}

/// Prefix rules, checked when built. See the [module docs](self).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecPolicy {
    rules: Vec<Rule>,
}

impl ExecPolicy {
    /// No rules: every command needs approval, nothing is forbidden.
    pub fn empty() -> Self {
        ExecPolicy::default()
    }

    /// The [`default_rules`].
    pub fn with_defaults() -> Self {
        ExecPolicy {
            rules: default_rules(),
        }
    }

    /// A policy of `rules`, after checking their examples.
    pub fn new(rules: impl IntoIterator<Item = Rule>) -> Result<Self, PolicyError> {
        ExecPolicy::empty().with_rules(rules)
    }

    /// This policy with `rules` added, after checking their examples.
    pub fn with_rules(
        mut self,
        rules: impl IntoIterator<Item = Rule>,
    ) -> Result<Self, PolicyError> {
        for r in rules {
            r.check_examples()?;
            self.rules.push(r);
        }
        Ok(self)
    }

    /// The rules, in the order given.
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// The decision for the command line `command`.
    pub fn check(&self, command: &str) -> Verdict {
        let line = parse(command);
        let mut worst: Option<Verdict> = None;
        let mut raise = |v: Verdict| {
            if worst.as_ref().is_none_or(|w| v.decision > w.decision) {
                worst = Some(v);
            }
        };
        // First, so that its reason is the one given when no command is forbidden.
        if let Some(why) = &line.opaque {
            raise(Verdict {
                decision: Decision::Prompt,
                reason: format!("it uses {why}, which the exec policy cannot judge"),
            });
        }
        for cmd in &line.commands {
            raise(self.check_command(cmd));
        }
        worst.unwrap_or(Verdict {
            decision: Decision::Allow,
            reason: "it runs nothing".into(),
        })
    }

    fn check_command(&self, cmd: &SimpleCommand) -> Verdict {
        let rule = self
            .rules
            .iter()
            .filter(|r| r.matches(cmd))
            .max_by_key(|r| r.decision);
        let shown = cmd.words.join(" ");
        match rule {
            None => Verdict {
                decision: Decision::Prompt,
                reason: format!(
                    "no rule allows `{}`",
                    cmd.words.first().map_or("", String::as_str)
                ),
            },
            Some(r) if r.decision == Decision::Allow => match &cmd.writes {
                Some(target) => Verdict {
                    decision: Decision::Prompt,
                    reason: format!("`{shown}` writes {target}"),
                },
                None => Verdict {
                    decision: Decision::Allow,
                    reason: format!("rule `{r}`"),
                },
            },
            Some(r) => Verdict {
                decision: r.decision,
                reason: match &r.justification {
                    Some(j) => format!("rule `{r}` ({j})"),
                    None => format!("rule `{r}`"),
                },
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(policy: &ExecPolicy, line: &str) -> Decision {
        policy.check(line).decision
    }

    #[test]
    fn strictest_match_wins() {
        let p = ExecPolicy::new([
            Rule::new("git", Decision::Allow).unwrap(),
            Rule::new("git push", Decision::Prompt).unwrap(),
            Rule::new("git push --force", Decision::Forbid).unwrap(),
        ])
        .unwrap();
        assert_eq!(d(&p, "git status"), Decision::Allow);
        assert_eq!(d(&p, "git push origin main"), Decision::Prompt);
        assert_eq!(d(&p, "git push --force origin"), Decision::Forbid);
        // Order of the rules does not matter.
        let mut rules = p.rules().to_vec();
        rules.reverse();
        let r = ExecPolicy::new(rules).unwrap();
        assert_eq!(d(&r, "git push origin main"), Decision::Prompt);
        assert_eq!(d(&r, "git push --force"), Decision::Forbid);
        // Across the commands of a line.
        assert_eq!(d(&p, "git status && git push"), Decision::Prompt);
        assert_eq!(
            d(&p, "git status; git push --force | git log"),
            Decision::Forbid
        );
        // A forbidden command is forbidden even in a line that cannot be judged.
        assert_eq!(d(&p, "git push --force $(echo x)"), Decision::Forbid);
        assert_eq!(d(&p, "git log $(echo x)"), Decision::Prompt);
    }

    #[test]
    fn allow_needs_the_program_as_written_but_forbid_sees_through_paths() {
        let p = ExecPolicy::new([
            Rule::new("ls", Decision::Allow).unwrap(),
            Rule::new("shred", Decision::Forbid).unwrap(),
        ])
        .unwrap();
        assert_eq!(d(&p, "ls -la"), Decision::Allow);
        assert_eq!(d(&p, "./ls"), Decision::Prompt);
        assert_eq!(d(&p, "/usr/bin/shred x"), Decision::Forbid);
        assert_eq!(d(&p, "lsof"), Decision::Prompt);
    }

    #[test]
    fn writing_turns_allow_into_prompt() {
        let p = ExecPolicy::new([Rule::new("echo", Decision::Allow).unwrap()]).unwrap();
        assert_eq!(d(&p, "echo hi"), Decision::Allow);
        assert_eq!(d(&p, "echo hi > /dev/null 2>&1"), Decision::Allow);
        let v = p.check("echo hi > notes.txt");
        assert_eq!(v.decision, Decision::Prompt);
        assert!(v.reason.contains("writes notes.txt"), "{}", v.reason);
    }

    #[test]
    fn unparseable_lines_fall_back_to_prompt() {
        let p = ExecPolicy::new([
            Rule::new("echo", Decision::Allow).unwrap(),
            Rule::new("cat", Decision::Allow).unwrap(),
        ])
        .unwrap();
        for line in [
            "echo $(rm -rf ~)",
            "echo `id`",
            "cat <<EOF\nx\nEOF",
            "cat x | sh",
            "eval echo hi",
            "(echo hi)",
            "echo 'oops",
        ] {
            let v = p.check(line);
            assert_eq!(v.decision, Decision::Prompt, "{line:?}");
            assert!(v.reason.contains("cannot judge"), "{line:?}: {}", v.reason);
        }
        assert_eq!(d(&p, ""), Decision::Allow);
    }

    #[test]
    fn examples_are_checked_when_rules_load() {
        let ok = Rule::new("git push", Decision::Prompt)
            .unwrap()
            .matching("git push origin")
            .matching("ls && /usr/bin/git push")
            .not_matching("git pull");
        assert!(ExecPolicy::new([ok]).is_ok());
        let bad = Rule::new("git push", Decision::Prompt)
            .unwrap()
            .matching("git pull");
        assert!(matches!(
            ExecPolicy::new([bad]),
            Err(PolicyError::ExampleNotMatched { .. })
        ));
        let bad = Rule::new("rm", Decision::Prompt)
            .unwrap()
            .not_matching("rm -rf x");
        let err = ExecPolicy::new([bad]).unwrap_err();
        assert!(err.to_string().contains("not_match"), "{err}");
        assert!(Rule::new("", Decision::Allow).is_err());
        assert!(Rule::new("ls | wc", Decision::Allow).is_err());
        assert!(Rule::new("echo $(x)", Decision::Allow).is_err());
    }

    #[test]
    fn rules_load_from_toml() {
        #[derive(Deserialize)]
        struct Config {
            exec_rules: Vec<Rule>,
        }
        let text = r#"
            [[exec_rules]]
            prefix = "git push"
            decision = "forbid"
            match = ["git push origin main"]
            not_match = ["git pull"]
            justification = "publishing needs a person"

            [[exec_rules]]
            prefix = ["npm", "run", "lint"]
            decision = "allow"
        "#;
        let c: Config = toml::from_str(text).unwrap();
        let p = ExecPolicy::new(c.exec_rules).unwrap();
        let v = p.check("git push origin main");
        assert_eq!(v.decision, Decision::Forbid);
        assert_eq!(
            v.reason,
            "rule `forbid git push` (publishing needs a person)"
        );
        assert_eq!(d(&p, "npm run lint --fix"), Decision::Allow);
        let bad = "[[exec_rules]]\nprefix = \"x\"\ndecision = \"maybe\"\n";
        assert!(toml::from_str::<Config>(bad).is_err());
        let typo = "[[exec_rules]]\nprefix = \"x\"\ndecision = \"allow\"\nmatches = [\"x\"]\n";
        assert!(toml::from_str::<Config>(typo).is_err());
    }
}
