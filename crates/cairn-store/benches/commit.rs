//! The cost of committing a thread step by step, as the run loop does: a 300-turn thread, each
//! turn an assistant tool call with a ~1 KB argument (one commit) and its tool result (another),
//! on SQLite (and PostgreSQL when `CAIRN_TEST_POSTGRES_URL` is set).
//!
//! ```sh
//! cargo bench -p cairn-store --bench commit
//! ```
//!
//! Prints the time per committed step (p50, p99; the first 50 and the last 50 to show it stays
//! flat), the stored bytes per step (the delta JSON), and the database size after the thread
//! against the raw size of the conversation (the sum of its messages' JSON).
//! `CAIRN_BENCH_KEEP=/tmp/bench.db` keeps a copy of the SQLite file (for `dbstat`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use cairn_core::{
    Content, FunctionCall, FunctionResult, LoopCounters, Message, Role, RunStatus, StepDelta,
    StepKind, Transcript, Usage,
};
use cairn_store::{Database, OpenOptions};
use serde_json::json;

const TURNS: usize = 300;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn p50(v: &[Duration]) -> Duration {
    let mut s = v.to_vec();
    s.sort();
    percentile(&s, 0.5)
}

fn us(d: Duration) -> String {
    format!("{:.0} µs", d.as_secs_f64() * 1e6)
}

/// A ~1 KB file body that differs per turn, as a model writing code would send.
fn body(turn: usize) -> String {
    let mut s = String::new();
    let mut line = 0;
    while s.len() < 1000 {
        s.push_str(&format!(
            "fn step_{turn}_{line}(x: u64) -> u64 {{ x.wrapping_mul({}) ^ {line} }}\n",
            turn * 31 + line
        ));
        line += 1;
    }
    s
}

struct Figures {
    times: Vec<Duration>,
    turn_times: Vec<Duration>,
    delta_bytes: usize,
    steps: usize,
    conversation_bytes: usize,
}

async fn commit_thread(db: &Database) -> Figures {
    let cp = db.checkpointer();
    let thread = cp.create_thread(None, Default::default()).await.unwrap();
    let mut times = Vec::new();
    let mut turn_times = Vec::new();
    let mut delta_bytes = 0;
    let mut counters = LoopCounters::default();
    let mut commit = async |d: StepDelta, parent: u64, times: &mut Vec<Duration>| {
        delta_bytes += serde_json::to_string(&d).unwrap().len();
        let start = Instant::now();
        let seq = cp.append(&thread.id, "", parent, &d).await.unwrap();
        let took = start.elapsed();
        times.push(took);
        (seq, took)
    };
    let mut input = StepDelta::new(StepKind::Input);
    input.messages = vec![Message::user(
        "Write the step functions of the simulator into src/, one file per step.",
    )];
    input.status = RunStatus::Running;
    let (mut head, _) = commit(input, 0, &mut times).await;
    for turn in 0..TURNS {
        counters.iteration += 1;
        counters.model_calls += 1;
        counters.function_calls += 1;
        counters.usage.add(&Usage {
            input_tokens: 900 + 700 * turn as u64,
            output_tokens: 310,
            cached_input_tokens: 600 * turn as u64,
        });
        let call_id = format!("call_{turn:04}_a8f3c2");
        let args = json!({"path": format!("/src/step_{turn}.rs"), "content": body(turn)});
        let mut model = StepDelta::new(StepKind::Model);
        model.messages = vec![Message::new(
            Role::Assistant,
            vec![Content::FunctionCall(FunctionCall::new(
                call_id.clone(),
                "write_file",
                &args,
            ))],
        )];
        model.status = RunStatus::Running;
        model.counters = counters.clone();
        let (seq, t1) = commit(model, head, &mut times).await;
        let mut tools = StepDelta::new(StepKind::Tools);
        tools.results = vec![FunctionResult {
            call_id,
            output: vec![Content::text(format!(
                "Updated file /src/step_{turn}.rs ({} bytes, {} lines). The file compiles; \
                 run the tests with `cargo test` to check the new step against the previous ones.",
                body(turn).len(),
                body(turn).lines().count()
            ))],
            is_error: false,
        }];
        tools.status = RunStatus::Running;
        // As the run loop commits it: a tools step leaves the counters as they are and stores
        // none.
        let (seq2, t2) = commit(tools, seq, &mut times).await;
        head = seq2;
        turn_times.push(t1 + t2);
    }
    let steps = cp.steps(&thread.id, "", None).await.unwrap();
    let transcript = Transcript::from_steps(&steps);
    assert_eq!(transcript.messages.len(), 1 + 2 * TURNS);
    let conversation_bytes = transcript
        .messages
        .iter()
        .map(|m| serde_json::to_string(m).unwrap().len())
        .sum();
    Figures {
        steps: steps.len(),
        times,
        turn_times,
        delta_bytes,
        conversation_bytes,
    }
}

fn report(engine: &str, f: &Figures, stored: &[(&str, u64)]) {
    let mut sorted = f.times.clone();
    sorted.sort();
    let n = f.times.len();
    println!("## {engine}: {} committed steps ({TURNS} turns)", f.steps);
    println!("| figure | value |");
    println!("| --- | ---: |");
    println!(
        "| p50 per committed step | {} |",
        us(percentile(&sorted, 0.5))
    );
    println!(
        "| p99 per committed step | {} |",
        us(percentile(&sorted, 0.99))
    );
    println!("| p50, first 50 steps | {} |", us(p50(&f.times[..50])));
    println!("| p50, last 50 steps | {} |", us(p50(&f.times[n - 50..])));
    println!(
        "| p50 per turn (call + result) | {} |",
        us(p50(&f.turn_times))
    );
    println!(
        "| stored delta per step (mean JSON length) | {} B |",
        f.delta_bytes / n
    );
    println!(
        "| conversation (sum of the messages' JSON) | {} B |",
        f.conversation_bytes
    );
    println!("| delta JSON, all steps | {} B |", f.delta_bytes);
    for (what, bytes) in stored {
        println!(
            "| {what} | {bytes} B ({:.2}× the conversation) |",
            *bytes as f64 / f.conversation_bytes as f64
        );
    }
    println!();
}

fn file_len(p: &std::path::Path) -> u64 {
    std::fs::metadata(p).map(|m| m.len()).unwrap_or(0)
}

async fn sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bench.db");
    let db = cairn_store::open(path.to_str().unwrap()).await.unwrap();
    let f = commit_thread(&db).await;
    let wal = dir.path().join("bench.db-wal");
    let live = file_len(&path) + file_len(&wal);
    db.close().await;
    let closed = file_len(&path) + file_len(&wal);
    if let Some(keep) = std::env::var_os("CAIRN_BENCH_KEEP") {
        std::fs::copy(&path, keep).unwrap();
    }
    report(
        "SQLite (WAL, synchronous=NORMAL)",
        &f,
        &[
            ("database file + WAL, open", live),
            ("database file after close (WAL checkpointed)", closed),
        ],
    );
}

async fn postgres(url: &str) {
    let schema = format!("cairn_bench_{}", std::process::id());
    let db = cairn_store::open_with(url, OpenOptions::new().schema(&schema))
        .await
        .unwrap();
    let f = commit_thread(&db).await;
    db.close().await;
    use sqlx::Connection;
    let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
    let size: i64 = sqlx::query_scalar(&format!(
        "SELECT pg_total_relation_size('{schema}.steps') + pg_total_relation_size('{schema}.threads')"
    ))
    .fetch_one(&mut conn)
    .await
    .unwrap();
    sqlx::query(&format!("DROP SCHEMA {schema} CASCADE"))
        .execute(&mut conn)
        .await
        .unwrap();
    report(
        "PostgreSQL (local, 127.0.0.1)",
        &f,
        &[("steps + threads tables with indexes", size as u64)],
    );
}

fn main() {
    // `cargo bench` passes `--bench`; nothing to parse.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        sqlite().await;
        match std::env::var("CAIRN_TEST_POSTGRES_URL") {
            Ok(url) if !url.is_empty() => postgres(&url).await,
            _ => println!("(PostgreSQL skipped: CAIRN_TEST_POSTGRES_URL is not set)"),
        }
    });
}
