//! One-off comparison of `bpe-openai` (the backend of `BpeCounter`) with `tiktoken-rs` on the
//! same texts: load time, agreement and throughput. Run with
//! `cargo bench -p cairn-tokens --features compare-tiktoken --bench compare`.
#![allow(missing_docs)] // criterion_main! generates an undocumented `main`.

use std::hint::black_box;
use std::time::Instant;

use cairn_core::message::Content;
use cairn_tokens::{BpeCounter, synthetic};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

fn history_text() -> String {
    let history = synthetic::conversation(42, 170_000, &BpeCounter::o200k());
    let mut text = String::new();
    for m in &history {
        for c in &m.contents {
            match c {
                Content::Text { text: t } | Content::Reasoning { text: t } => text.push_str(t),
                Content::FunctionCall(f) => text.push_str(&f.arguments),
                Content::FunctionResult(r) => text.push_str(&r.text()),
                _ => {}
            }
            text.push('\n');
        }
    }
    text
}

fn compare(c: &mut Criterion) {
    let t = Instant::now();
    let tk_o200k = tiktoken_rs::o200k_base_singleton();
    println!("load tiktoken-rs o200k_base: {:?}", t.elapsed());
    let t = Instant::now();
    let bp_o200k = bpe_openai::o200k_base();
    println!("load bpe-openai o200k_base: {:?}", t.elapsed());
    let t = Instant::now();
    let tk_cl100k = tiktoken_rs::cl100k_base_singleton();
    println!("load tiktoken-rs cl100k_base: {:?}", t.elapsed());
    let t = Instant::now();
    let bp_cl100k = bpe_openai::cl100k_base();
    println!("load bpe-openai cl100k_base: {:?}", t.elapsed());

    let text = history_text();
    let (a, b) = (
        tk_o200k.count_ordinary(&text),
        bp_o200k.count(text.as_str()),
    );
    println!(
        "history: {} bytes, o200k tiktoken-rs={a} bpe-openai={b}",
        text.len()
    );
    let (a2, b2) = (
        tk_cl100k.count_ordinary(&text),
        bp_cl100k.count(text.as_str()),
    );
    println!("history: cl100k tiktoken-rs={a2} bpe-openai={b2}");

    let mut g = c.benchmark_group("history_170k_text");
    g.sample_size(10);
    g.throughput(Throughput::Bytes(text.len() as u64));
    g.bench_function("o200k/tiktoken-rs", |bench| {
        bench.iter(|| tk_o200k.count_ordinary(black_box(&text)))
    });
    g.bench_function("o200k/bpe-openai", |bench| {
        bench.iter(|| bp_o200k.count(black_box(text.as_str())))
    });
    g.bench_function("cl100k/tiktoken-rs", |bench| {
        bench.iter(|| tk_cl100k.count_ordinary(black_box(&text)))
    });
    g.bench_function("cl100k/bpe-openai", |bench| {
        bench.iter(|| bp_cl100k.count(black_box(text.as_str())))
    });
    g.finish();
}

criterion_group!(benches, compare);
criterion_main!(benches);
