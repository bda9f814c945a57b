//! Three everyday tasks of `../shared/bench/agentic/run.py` run by the `cairn` binary on the real
//! default model (three that passed in every measured run of BENCHMARKS.md §8.1) (Qwen2.5-Coder-1.5B-Instruct Q4_K_M), checked the way the suite checks them:
//! the files on disk and the answer printed on stdout. A regression of the local harness (the
//! answer action, `execute` in the project directory, the prompt layout) fails here.
//!
//! Skips with a `SKIPPED:` notice when the model is not cached (`scripts/fetch-model.sh
//! default`); fails instead with `CAIRN_REQUIRE_MODELS=1` (set by CI). The tasks run one after
//! the other in one test, so the machine's cores serve one model at a time; the second and
//! third task reuse the prompt cache the first one wrote.

#![allow(clippy::unwrap_used, clippy::expect_used)]
#![cfg(feature = "local")]

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use cairn_local::KnownModel;

/// One task: its files, its prompt, and the check of the outcome (directory, stdout).
struct Task {
    name: &'static str,
    files: &'static [(&'static str, &'static str)],
    prompt: &'static str,
    check: fn(&Path, &str) -> bool,
}

fn python(dir: &Path, args: &[&str]) -> Option<std::process::Output> {
    Command::new("python3")
        .args(args)
        .current_dir(dir)
        .output()
        .ok()
}

const TASKS: &[Task] = &[
    Task {
        name: "new-module",
        files: &[("README.md", "# pkg\n")],
        prompt: "Create the package app: app/__init__.py (empty) and app/core.py with a function answer() that returns 42.",
        check: |dir, _| {
            python(
                dir,
                &["-c", "from app.core import answer; assert answer() == 42"],
            )
            .is_some_and(|o| o.status.success())
        },
    },
    Task {
        name: "create-and-run",
        files: &[("README.md", "# scratch\n")],
        prompt: "Create sum.py that prints the sum of 17 and 25 computed by Python, run it with python3, and tell me what it printed.",
        check: |dir, out| {
            let ran = python(dir, &["sum.py"])
                .is_some_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "42");
            let source = std::fs::read_to_string(dir.join("sum.py")).unwrap_or_default();
            ran && out.contains("42") && !source.contains("42")
        },
    },
    Task {
        name: "flip-flag",
        files: &[("settings.py", "NAME = 'demo'\nDEBUG = True\nWORKERS = 4\n")],
        prompt: "Turn DEBUG off in settings.py.",
        check: |dir, _| {
            python(
                dir,
                &[
                    "-c",
                    "import settings as s; assert s.DEBUG is False and s.WORKERS == 4 and s.NAME == 'demo'",
                ],
            )
            .is_some_and(|o| o.status.success())
        },
    },
];

#[test]
fn the_default_model_finishes_three_everyday_tasks() {
    if KnownModel::Default.find().is_none() {
        assert!(
            std::env::var_os("CAIRN_REQUIRE_MODELS").is_none(),
            "CAIRN_REQUIRE_MODELS is set but the default model is missing"
        );
        eprintln!(
            "SKIPPED: the default model is not at {} (run scripts/fetch-model.sh default)",
            KnownModel::Default.path().display()
        );
        return;
    }
    let mut failed = Vec::new();
    for task in TASKS {
        // A fixed folder name: the prompt names the project's folder, and with a random one the
        // greedy model's choices would change from run to run.
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join(task.name);
        std::fs::create_dir(&dir).unwrap();
        let home = tempfile::tempdir().unwrap();
        for (rel, body) in task.files {
            std::fs::write(dir.join(rel), body).unwrap();
        }
        let t = Instant::now();
        let out = Command::new(env!("CARGO_BIN_EXE_cairn"))
            .args(["--model", "local:", "run", "--yes", task.prompt])
            .current_dir(&dir)
            .env("HOME", home.path())
            .env("CAIRN_MODEL_DIR", cairn_local::model_dir())
            .env("CAIRN_DB", home.path().join("cairn.db"))
            .env("NO_COLOR", "1")
            .env_remove("OPENAI_API_KEY")
            .env_remove("OPENAI_BASE_URL")
            .env_remove("CAIRN_MODEL")
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let ok = out.status.success() && (task.check)(&dir, &stdout);
        eprintln!(
            "{}: {} in {:.1}s\n{stdout}{}",
            task.name,
            if ok { "passed" } else { "FAILED" },
            t.elapsed().as_secs_f64(),
            String::from_utf8_lossy(&out.stderr)
        );
        if !ok {
            failed.push(task.name);
        }
    }
    assert!(failed.is_empty(), "failed: {failed:?}");
}
