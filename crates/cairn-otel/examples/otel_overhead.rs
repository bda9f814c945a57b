//! BENCHMARKS.md §10: CPU time per model call with tracing off, with the OTLP exporter on, and
//! with content capture on, in one process. Each run is one model call (an OpenAI-compatible
//! client against a local server, ~2 KB of conversation) inside an agent run: two spans
//! (`invoke_agent`, `chat`) per call. CPU is the whole process's user+system time (the
//! exporter's thread included), read from /proc/self/stat.
//!
//! `cargo run --release -p cairn-otel --example otel_overhead [CALLS]`

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Instant;

use cairn_core::Agent;
use cairn_otel::OtelConfig;
use cairn_providers::OpenAIClient;
use cairn_test_support::openai::chat_json;
use cairn_test_support::{Reply, TestServer, Turn};

/// Process CPU time (user + system) in seconds, from /proc/self/stat (clock ticks, 100 Hz).
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = after.split_whitespace().collect();
    // Fields 14 and 15 (utime, stime) are at 11 and 12 after the command name.
    let ticks: f64 = f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap();
    ticks / 100.0
}

async fn phase(name: &str, agent: &Agent, calls: usize, question: &str) -> (f64, f64) {
    for _ in 0..calls / 10 {
        agent.run(question).await.unwrap();
    }
    let (c0, t0) = (cpu_seconds(), Instant::now());
    for _ in 0..calls {
        agent.run(question).await.unwrap();
    }
    let cpu = (cpu_seconds() - c0) / calls as f64 * 1e6;
    let wall = t0.elapsed().as_secs_f64() / calls as f64 * 1e6;
    println!("{name:<28} {cpu:>8.1} µs CPU/call {wall:>8.1} µs wall/call");
    (cpu, wall)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let calls: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(3000);
    let answer = chat_json(&Turn::text(
        "The answer is 42, as computed from the figures above.",
    ));
    let model = TestServer::start(move |_, _| Reply::ok(answer.clone())).await;
    let receiver = TestServer::start(|_, _| Reply::ok("")).await;
    let client = OpenAIClient::builder()
        .base_url(model.url())
        .api_key("sk-bench")
        .model("bench-model")
        .build()
        .unwrap();
    let agent = Agent::builder(client)
        .name("bench")
        .instructions("You are a careful assistant. ".repeat(20))
        .build();
    let question =
        "Summarize the quarterly figures: ".to_owned() + &"revenue 1234, cost 567; ".repeat(40);
    println!(
        "{calls} model calls per phase, after {} warm-up calls",
        calls / 10
    );
    let (off, _) = phase("tracing off", &agent, calls, &question).await;
    let guard =
        cairn_otel::init(&OtelConfig::new(format!("{}/v1/traces", receiver.root()))).unwrap();
    let (on, _) = phase("OTLP exporter on", &agent, calls, &question).await;
    cairn_core::agent::telemetry::set_capture_content(true);
    let (content, _) = phase("OTLP + content capture", &agent, calls, &question).await;
    guard.shutdown();
    let exports = receiver.requests();
    let bytes: usize = exports.iter().map(|r| r.body.len()).sum();
    println!(
        "exporter on: +{:.1} µs CPU/call ({:+.0}%); content: +{:.1} µs ({:+.0}%); {} exports, {:.1} MB",
        on - off,
        (on - off) / off * 100.0,
        content - off,
        (content - off) / off * 100.0,
        exports.len(),
        bytes as f64 / 1e6
    );
}
