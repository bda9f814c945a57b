//! Exact count of a ~170,000-token synthetic history (o200k_base): cold, and incrementally with
//! the history cached plus one new message. `cargo bench -p cairn-tokens --bench count`.
#![allow(missing_docs)] // criterion_main! generates an undocumented `main`.

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use cairn_core::message::Message;
use cairn_tokens::{BpeCounter, CachedCounter, EstimateCounter, TokenCounter, synthetic};
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};

fn count(c: &mut Criterion) {
    let exact = BpeCounter::o200k();
    let history = synthetic::conversation(42, 170_000, &exact);
    let total = exact.count_messages(&history);
    let bytes: usize = history
        .iter()
        .map(|m| serde_json::to_string(m).map(|s| s.len()).unwrap_or(0))
        .sum();
    println!(
        "history: {} messages, {total} tokens (o200k_base), ~{bytes} bytes as JSON",
        history.len()
    );

    let mut g = c.benchmark_group("history_170k");
    g.sample_size(20);

    // (a) cold: no cache, every message tokenized.
    g.bench_function("cold/uncached", |b| {
        b.iter(|| exact.count_messages(black_box(&history)))
    });
    // (a') cold through an empty cache (adds fingerprinting and inserts).
    g.bench_function("cold/empty_cache", |b| {
        b.iter_batched(
            || CachedCounter::new(BpeCounter::o200k()),
            |cached| cached.count_messages(black_box(&history)),
            BatchSize::LargeInput,
        )
    });

    // (b) incremental: the history is cached, one new message per step.
    let cached = CachedCounter::new(BpeCounter::o200k());
    cached.count_messages(&history);
    let step = AtomicU64::new(0);
    let new_message = || {
        let i = step.fetch_add(1, Ordering::Relaxed);
        Message::user(format!(
            "Step {i}: please rerun the failing test in crates/cairn-core, then summarize what \
             changed in the compaction middleware since the last run, and list the files you \
             touched with one line each about why. Keep the answer short."
        ))
    };
    let mut grown = history.clone();
    grown.push(new_message());
    println!(
        "new message: {} tokens",
        exact.count_message(&grown[grown.len() - 1])
    );
    g.bench_function("incremental/cached+1_new", |b| {
        b.iter_custom(|iters| {
            let mut elapsed = Duration::ZERO;
            for _ in 0..iters {
                let last = grown.len() - 1;
                grown[last] = new_message();
                let start = Instant::now();
                black_box(cached.count_messages(black_box(&grown)));
                elapsed += start.elapsed();
            }
            elapsed
        })
    });
    // (b') all cached: the floor (fingerprint every message, look it up).
    g.bench_function("incremental/all_cached", |b| {
        b.iter(|| cached.count_messages(black_box(&history)))
    });
    // For scale: the estimate over the whole history, uncached.
    let estimate = EstimateCounter::new();
    g.bench_function("cold/estimate", |b| {
        b.iter(|| estimate.count_messages(black_box(&history)))
    });
    g.finish();
}

criterion_group!(benches, count);
criterion_main!(benches);
