//! Cross-check `BpeCounter` (bpe-openai) against `tiktoken-rs`, an independent implementation of
//! the same encodings. Only built with `--features compare-tiktoken`.
#![cfg(feature = "compare-tiktoken")]

use cairn_tokens::{BpeCounter, TokenCounter, synthetic};

#[test]
fn bpe_openai_agrees_with_tiktoken_rs() {
    let o200k = BpeCounter::o200k();
    let cl100k = BpeCounter::cl100k();
    let tk_o200k = tiktoken_rs::o200k_base_singleton();
    let tk_cl100k = tiktoken_rs::cl100k_base_singleton();
    let mut disagreements = Vec::new();
    let mut n = 0;
    for seed in 0..20u64 {
        for (kind, text) in synthetic::texts(seed) {
            n += 1;
            let (a, b) = (o200k.count_text(&text), tk_o200k.count_ordinary(&text));
            if a != b {
                disagreements.push(format!(
                    "o200k {kind} seed {seed}: bpe {a} tiktoken {b}: {text:?}"
                ));
            }
            let (a, b) = (cl100k.count_text(&text), tk_cl100k.count_ordinary(&text));
            if a != b {
                disagreements.push(format!(
                    "cl100k {kind} seed {seed}: bpe {a} tiktoken {b}: {text:?}"
                ));
            }
        }
    }
    assert!(
        disagreements.is_empty(),
        "{} of {n} texts disagree:\n{}",
        disagreements.len(),
        disagreements.join("\n")
    );
}
