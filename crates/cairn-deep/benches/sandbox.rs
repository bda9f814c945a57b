//! Start-up cost of a sandboxed command against an unsandboxed one, in one run (issue #13,
//! BENCHMARKS.md §9): `true` and `ls` through `LocalShellBackend::execute`, with the sandbox
//! off and in `workspace-write` (Landlock ruleset built in the parent, enforced with seccomp in
//! the child before `exec`).
//!
//! `cargo bench -p cairn-deep --bench sandbox`
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use cairn_deep::backend::{Executor, LocalShellBackend};
use cairn_sandbox::{Sandbox, SandboxMode};
use criterion::{Criterion, criterion_group, criterion_main};

fn bench(c: &mut Criterion) {
    assert!(
        cairn_sandbox::support().is_available(),
        "needs Landlock: {:?}",
        cairn_sandbox::support()
    );
    let dir = tempfile::tempdir().unwrap();
    for i in 0..20 {
        std::fs::write(dir.path().join(format!("f{i}.txt")), "x").unwrap();
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let plain = LocalShellBackend::new(dir.path())
        .unwrap()
        .env("PATH", "/usr/bin:/bin");
    let sandboxed = plain
        .clone()
        .sandbox(Sandbox::new(SandboxMode::WorkspaceWrite));
    let mut g = c.benchmark_group("execute");
    g.sample_size(50).measurement_time(Duration::from_secs(8));
    for command in ["true", "ls"] {
        for (name, shell) in [("off", &plain), ("workspace-write", &sandboxed)] {
            g.bench_function(format!("{command} / sandbox {name}"), |b| {
                b.iter(|| {
                    let out = rt.block_on(shell.execute(command, None)).unwrap();
                    assert_eq!(out.exit_code, Some(0));
                })
            });
        }
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
