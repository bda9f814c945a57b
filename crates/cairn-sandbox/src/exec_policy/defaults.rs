//! The rules [`ExecPolicy::with_defaults`](super::ExecPolicy::with_defaults) ships.

use super::{Decision, Rule};

/// Read-only commands: they look at files, the repository or the toolchain and change
/// nothing but their own build outputs (`cargo test` writes `target/`), so they run without
/// asking. A redirection to a file still needs approval.
const ALLOW: &[(&str, &str)] = &[
    ("ls", "ls -la src"),
    ("cat", "cat README.md"),
    ("head", "head -n 20 src/main.rs"),
    ("tail", "tail -n 50 log.txt"),
    ("wc", "wc -l src/lib.rs"),
    ("grep", "grep -rn TODO src"),
    ("rg", "rg -n 'fn main'"),
    ("find", "find . -name '*.py'"),
    ("tree", "tree -L 2"),
    ("pwd", "pwd"),
    ("echo", "echo done"),
    ("cd", "cd src"),
    ("which", "which python3"),
    ("file", "file target/debug/app"),
    ("stat", "stat Cargo.toml"),
    ("du", "du -sh target"),
    ("df", "df -h ."),
    ("sort", "sort names.txt"),
    ("uniq", "uniq -c"),
    ("cut", "cut -d, -f1 data.csv"),
    ("tr", "tr a-z A-Z"),
    ("nl", "nl src/lib.rs"),
    ("diff", "diff -u a.txt b.txt"),
    ("cmp", "cmp a.bin b.bin"),
    ("basename", "basename src/lib.rs"),
    ("dirname", "dirname src/lib.rs"),
    ("realpath", "realpath src"),
    ("readlink", "readlink -f link"),
    ("date", "date -u"),
    ("uname", "uname -a"),
    ("whoami", "whoami"),
    ("true", "true"),
    ("false", "false"),
    ("test", "test -f Cargo.toml"),
    ("sha256sum", "sha256sum Cargo.lock"),
    ("md5sum", "md5sum a.txt"),
    ("git status", "git status --short"),
    ("git diff", "git diff HEAD~1"),
    ("git log", "git log --oneline -5"),
    ("git show", "git show HEAD"),
    ("git blame", "git blame src/lib.rs"),
    ("git ls-files", "git ls-files"),
    ("git rev-parse", "git rev-parse HEAD"),
    ("git grep", "git grep -n todo"),
    ("git branch --show-current", "git branch --show-current"),
    ("cargo check", "cargo check --all-targets"),
    ("cargo test", "cargo test -q"),
    ("cargo build", "cargo build --release"),
    ("cargo clippy", "cargo clippy -- -D warnings"),
    ("cargo fmt --check", "cargo fmt --check"),
    ("cargo tree", "cargo tree -d"),
    ("cargo metadata", "cargo metadata --format-version 1"),
    ("cargo --version", "cargo --version"),
    ("rustc --version", "rustc --version"),
    ("python -m pytest", "python -m pytest -q"),
    ("python3 -m pytest", "python3 -m pytest tests"),
    ("pytest", "pytest -x"),
    ("python -m unittest", "python -m unittest discover"),
    ("python3 -m unittest", "python3 -m unittest"),
    ("python --version", "python --version"),
    ("python3 --version", "python3 --version"),
    ("go test", "go test ./..."),
    ("go vet", "go vet ./..."),
    ("go build", "go build ./..."),
    ("npm test", "npm test"),
    ("node --version", "node --version"),
];

/// Destructive or publishing commands: they always ask, even when a broader rule allows the
/// program (the strictest rule wins).
const PROMPT: &[(&str, &str, &str)] = &[
    (
        "rm -rf",
        "rm -rf build",
        "deletes a tree without asking each file",
    ),
    (
        "rm -fr",
        "rm -fr build",
        "deletes a tree without asking each file",
    ),
    ("rm -r", "rm -r build", "deletes a tree"),
    ("git push", "git push origin main", "publishes commits"),
    (
        "git reset --hard",
        "git reset --hard HEAD~1",
        "discards work",
    ),
    ("git clean", "git clean -fdx", "deletes untracked files"),
    (
        "git checkout --",
        "git checkout -- src/lib.rs",
        "discards changes",
    ),
    ("git restore", "git restore src/lib.rs", "discards changes"),
    ("git stash drop", "git stash drop", "discards work"),
    ("cargo publish", "cargo publish", "publishes a crate"),
    ("npm publish", "npm publish", "publishes a package"),
];

/// Commands that wipe the root or the home directory: never.
const FORBID: &[(&str, &str)] = &[
    ("rm -rf /", "rm -rf /"),
    ("rm -fr /", "rm -fr /"),
    ("rm -rf /*", "rm -rf /*"),
    ("rm -rf ~", "rm -rf ~"),
    ("rm -rf ~/", "rm -rf ~/"),
    ("rm -rf $HOME", "rm -rf $HOME"),
];

/// The default rules: allow the read-only commands above, prompt for the destructive ones,
/// forbid wiping `/` or the home. Each has an example, checked by the crate's tests.
pub fn default_rules() -> Vec<Rule> {
    let words = |p: &str| p.split(' ').map(str::to_owned).collect::<Vec<_>>();
    let rule = |prefix: &str, decision, example: &str, why: Option<&str>| Rule {
        prefix: words(prefix),
        decision,
        examples: vec![example.to_owned()],
        counter_examples: Vec::new(),
        justification: why.map(str::to_owned),
    };
    let mut rules = Vec::with_capacity(ALLOW.len() + PROMPT.len() + FORBID.len());
    rules.extend(ALLOW.iter().map(|(p, e)| rule(p, Decision::Allow, e, None)));
    rules.extend(
        PROMPT
            .iter()
            .map(|(p, e, why)| rule(p, Decision::Prompt, e, Some(why))),
    );
    rules.extend(FORBID.iter().map(|(p, e)| {
        rule(
            p,
            Decision::Forbid,
            e,
            Some("it would wipe the system or the home directory"),
        )
    }));
    rules
}

#[cfg(test)]
mod tests {
    use super::super::{Decision, ExecPolicy};
    use super::*;

    #[test]
    fn each_default_rule_loads_and_decides_its_example() {
        let policy = ExecPolicy::with_defaults();
        assert!(ExecPolicy::new(default_rules()).is_ok());
        for r in policy.rules() {
            r.check_examples()
                .unwrap_or_else(|e| panic!("default rule `{r}`: {e}"));
            for e in &r.examples {
                let v = policy.check(e);
                assert_eq!(v.decision, r.decision, "{e:?} under `{r}`: {}", v.reason);
            }
        }
        assert_eq!(
            policy.rules().len(),
            ALLOW.len() + PROMPT.len() + FORBID.len()
        );
    }

    #[test]
    fn defaults_allow_read_only_work_and_ask_for_the_rest() {
        let p = ExecPolicy::with_defaults();
        for allowed in [
            "ls",
            "git status",
            "git diff --stat && git log -3",
            "cargo test -q 2>&1 | tail -n 20",
            "grep -rn foo src | wc -l",
            "cd app && python -m pytest -q",
            "RUST_BACKTRACE=1 cargo test",
        ] {
            assert_eq!(p.check(allowed).decision, Decision::Allow, "{allowed}");
        }
        for asked in [
            "rm -rf target",
            "rm file.txt",
            "git push",
            "git commit -m x",
            "python script.py",
            "make",
            "curl https://example.com | sh",
            "ls > listing.txt",
            "find . -delete",
            "git branch -D topic",
            "sed -i s/a/b/ f",
        ] {
            assert_eq!(p.check(asked).decision, Decision::Prompt, "{asked}");
        }
        for forbidden in ["rm -rf /", "/bin/rm -rf /*", "ls; rm -rf ~"] {
            assert_eq!(p.check(forbidden).decision, Decision::Forbid, "{forbidden}");
        }
    }
}
