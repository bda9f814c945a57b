//! Per-step cost of the compression middleware on a long history (see BENCHMARKS.md).
//!
//! `cargo bench -p cairn-deep --bench compression`
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::sync::Arc;

use cairn_core::testing::ScriptedClient;
use cairn_core::{AgentSession, ChatContext, ChatOptions, ChatResponse, Message};
use cairn_deep::StateBackend;
use cairn_deep::backend::SharedBackend;
use cairn_deep::compression::{Compressor, Offloading, Summarization};
use cairn_tokens::{BpeCounter, TokenCounter, synthetic};
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};

const MODEL: &str = "openai:gpt-4o";

fn history() -> Vec<Message> {
    synthetic::conversation(7, 150_000, &BpeCounter::o200k())
}

fn compressor(window: usize) -> Compressor {
    let backend: SharedBackend = Arc::new(StateBackend::new());
    let summarizer = ScriptedClient::new(|_| {
        Ok(ChatResponse::text(
            "## Session intent\nBench.\n\n## Summary\nA long session.\n\n## Artifacts\nNone.\n\n## Next steps\nContinue.",
        ))
    });
    Compressor::new(
        Offloading::new(),
        Summarization::new(),
        backend,
        Arc::new(summarizer),
        None,
    )
    .with_window(Some(window))
}

fn ctx(messages: &Arc<Vec<Message>>, session: &AgentSession) -> ChatContext {
    let mut ctx = ChatContext::new(Arc::clone(messages), ChatOptions::with_model(MODEL));
    ctx.session = Some(session.clone());
    ctx
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let msgs = Arc::new(history());
    let tokens = BpeCounter::o200k().count_messages(&msgs);
    eprintln!("history: {} messages, {tokens} tokens (o200k)", msgs.len());

    // A window large enough that nothing is summarized: the cost of counting and deciding.
    let big = compressor(1_000_000);
    let session = AgentSession::new();
    rt.block_on(big.compact(&mut ctx(&msgs, &session), false))
        .unwrap();
    let mut g = c.benchmark_group("compression_step");
    g.sample_size(20);
    g.bench_function("no_summarize_warm", |b| {
        b.iter(|| {
            let mut cx = ctx(&msgs, &session);
            let out = rt.block_on(big.compact(&mut cx, false)).unwrap();
            black_box(out)
        })
    });

    // One new turn per step: the cached counts of the old messages plus the new ones.
    let turns: Vec<Vec<Message>> = (0..64).map(|i| synthetic::next_turn(1_000 + i)).collect();
    let mut grown = (*msgs).clone();
    let mut i = 0usize;
    g.bench_function("no_summarize_one_new_turn", |b| {
        b.iter_batched(
            || {
                // Reset every 64 steps so the history stays ~150k tokens.
                if i.is_multiple_of(64) {
                    grown.truncate(msgs.len());
                }
                grown.extend(turns[i % 64].iter().cloned().map(|mut m| {
                    // Make every turn's content new to the cache.
                    if let Some(cairn_core::Content::Text { text }) = m.contents.first_mut() {
                        text.push_str(&format!(" #{i}"));
                    }
                    m
                }));
                i += 1;
                Arc::new(grown.clone())
            },
            |shared| {
                let mut cx = ctx(&shared, &session);
                let out = rt.block_on(big.compact(&mut cx, false)).unwrap();
                black_box(out)
            },
            BatchSize::SmallInput,
        )
    });

    // Cold: a fresh counter cache, every message tokenized.
    g.bench_function("no_summarize_cold", |b| {
        b.iter(|| {
            let fresh = compressor(1_000_000);
            let mut cx = ctx(&msgs, &session);
            let out = rt.block_on(fresh.compact(&mut cx, false)).unwrap();
            black_box(out)
        })
    });

    // A window of 160k: the 150k history is past 85%, so each step (on a fresh thread)
    // appends ~150k tokens of text to the history file and calls a scripted summarizer.
    let small = compressor(160_000);
    rt.block_on(small.compact(&mut ctx(&msgs, &AgentSession::new()), false))
        .unwrap();
    g.bench_function("summarize_scripted", |b| {
        b.iter(|| {
            let fresh_thread = AgentSession::new();
            let mut cx = ctx(&msgs, &fresh_thread);
            let out = rt.block_on(small.compact(&mut cx, false)).unwrap();
            assert!(out.summarized);
            black_box(out)
        })
    });

    // After summarizing: the next step reuses the summary.
    let thread = AgentSession::new();
    rt.block_on(small.compact(&mut ctx(&msgs, &thread), false))
        .unwrap();
    g.bench_function("after_summary_reuse", |b| {
        b.iter(|| {
            let mut cx = ctx(&msgs, &thread);
            let out = rt.block_on(small.compact(&mut cx, false)).unwrap();
            assert!(!out.summarized && out.used_summary);
            black_box(out)
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
