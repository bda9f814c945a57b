//! Counting tests. Reference counts come from OpenAI's Python `tiktoken` 0.14
//! (`len(enc.encode_ordinary(s))`), run against the same vocabulary files.

use std::collections::BTreeMap;
use std::sync::Arc;

use cairn_core::message::{Content, FunctionCall, FunctionResult, Message, Role};
use cairn_tokens::{
    BpeCounter, CachedCounter, DEFAULT_IMAGE_TOKENS, EstimateCounter, FUNCTION_CALL_OVERHEAD,
    ImageWeight, MESSAGE_OVERHEAD, TokenCounter, counter_for_model, synthetic,
};

#[test]
fn exact_counts_match_tiktoken() {
    // (text, o200k_base, cl100k_base), from Python tiktoken.
    let cases = [
        ("hello world", 2, 2),
        ("tiktoken is great!", 6, 6),
        ("antidisestablishmentarianism", 6, 6),
        ("2 + 2 = 4", 7, 7),
        ("お誕生日おめでとう", 8, 9),
        ("", 0, 0),
    ];
    let (o, c) = (BpeCounter::o200k(), BpeCounter::cl100k());
    assert!(o.is_exact() && c.is_exact());
    for (text, n_o, n_c) in cases {
        assert_eq!(o.count_text(text), n_o, "o200k {text:?}");
        assert_eq!(c.count_text(text), n_c, "cl100k {text:?}");
    }
    assert_eq!(o.name(), "o200k_base");
    assert_eq!(c.name(), "cl100k_base");
}

#[test]
fn count_till_limit() {
    let o = BpeCounter::o200k();
    let text = "hello world ".repeat(1000);
    let n = o.count_text(&text);
    assert_eq!(o.count_text_till_limit(&text, n), Some(n));
    assert_eq!(o.count_text_till_limit(&text, 100), None);
}

#[test]
fn message_counts_parts_and_overhead() {
    let o = BpeCounter::o200k();
    // "user" is one token.
    assert_eq!(
        o.count_message(&Message::user("hello world")),
        MESSAGE_OVERHEAD + 1 + 2
    );
    let call = FunctionCall::new(
        "call_1",
        "read_file",
        &serde_json::json!({"path": "/a.txt"}),
    );
    let expected_call =
        o.count_text(&call.name) + o.count_text(&call.arguments) + FUNCTION_CALL_OVERHEAD;
    let m = Message::new(
        Role::Assistant,
        vec![
            Content::Reasoning {
                text: "hello world".into(),
            },
            Content::text("tiktoken is great!"),
            Content::FunctionCall(call),
        ],
    );
    assert_eq!(
        o.count_message(&m),
        MESSAGE_OVERHEAD + o.count_text("assistant") + 2 + 6 + expected_call
    );
    let r = Message::tool_result(FunctionResult {
        call_id: "call_1".into(),
        output: vec![Content::text("hello world"), Content::text("2 + 2 = 4")],
        is_error: false,
    });
    assert_eq!(
        o.count_message(&r),
        MESSAGE_OVERHEAD + o.count_text("tool") + 2 + 7
    );
    let mut named = Message::user("hello world");
    named.author_name = Some("researcher".into());
    assert!(o.count_message(&named) > o.count_message(&Message::user("hello world")) + 1);
    assert_eq!(
        o.count_messages(&[Message::user("hello world"), r.clone()]),
        o.count_message(&Message::user("hello world")) + o.count_message(&r)
    );
}

fn image_message() -> Message {
    Message::new(
        Role::User,
        vec![
            Content::text("hello world"),
            Content::Image {
                url: "https://example.invalid/cat.png".into(),
                media_type: None,
            },
        ],
    )
}

#[test]
fn image_weight_default_and_configurable() {
    let base = BpeCounter::o200k().count_message(&Message::user("hello world"));
    let m = image_message();
    assert_eq!(
        BpeCounter::o200k().count_message(&m),
        base + DEFAULT_IMAGE_TOKENS
    );
    let fixed = BpeCounter::o200k().with_image_weight(ImageWeight::Fixed(85));
    assert_eq!(fixed.count_message(&m), base + 85);
    let by_url = BpeCounter::o200k().with_image_weight(ImageWeight::custom(|url, _| {
        if url.ends_with(".png") { 1000 } else { 1 }
    }));
    assert_eq!(by_url.count_message(&m), base + 1000);
    // Images inside tool results count too.
    let r = Message::tool_result(FunctionResult {
        call_id: "c".into(),
        output: vec![Content::Image {
            url: "data:image/png;base64,AAAA".into(),
            media_type: None,
        }],
        is_error: false,
    });
    assert_eq!(fixed.count_message(&r), MESSAGE_OVERHEAD + 1 + 85);
    let est = EstimateCounter::new().with_image_weight(ImageWeight::Fixed(7));
    assert_eq!(est.count_image("x", None), 7);
}

#[test]
fn cache_counts_only_new_and_edited_messages() {
    let cached = CachedCounter::new(BpeCounter::o200k());
    let plain = BpeCounter::o200k();
    let mut history = synthetic::conversation(7, 5_000, &plain);
    let n = history.len();
    assert_eq!(
        cached.count_messages(&history),
        plain.count_messages(&history)
    );
    assert_eq!(cached.stats().misses, n as u64);

    history.push(Message::user("one more"));
    assert_eq!(
        cached.count_messages(&history),
        plain.count_messages(&history)
    );
    let s = cached.stats();
    assert_eq!((s.misses, s.hits), (n as u64 + 1, n as u64));

    // Edit a message in place: it must be recounted, not served stale.
    let before = cached.count_messages(&history);
    history[1] = Message::user("a much longer message than before, to change its count a lot");
    let after = cached.count_messages(&history);
    assert_eq!(after, plain.count_messages(&history));
    assert_ne!(before, after);
    // Edit inside a function result, keeping the same length.
    let i = history
        .iter()
        .position(|m| m.function_results().next().is_some())
        .unwrap_or(0);
    if let Some(Content::FunctionResult(r)) = history[i].contents.first_mut() {
        r.output = vec![Content::text("x".repeat(400))];
    }
    assert_eq!(
        cached.count_messages(&history),
        plain.count_messages(&history)
    );
    // Single-message path agrees.
    assert_eq!(
        cached.count_message(&history[i]),
        plain.count_message(&history[i])
    );
}

#[test]
fn cache_is_bounded() {
    let cached = CachedCounter::with_capacity(EstimateCounter::new(), 16);
    for i in 0..1000 {
        cached.count_message(&Message::user(format!("message {i}")));
    }
    assert!(cached.stats().entries <= 32);
    cached.clear();
    assert_eq!(cached.stats().entries, 0);
}

#[test]
fn cache_is_thread_safe() {
    let plain = BpeCounter::o200k();
    let history = Arc::new(synthetic::conversation(3, 3_000, &plain));
    let expected = plain.count_messages(&history);
    let cached = Arc::new(CachedCounter::with_capacity(BpeCounter::o200k(), 8));
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let (c, h) = (cached.clone(), history.clone());
            std::thread::spawn(move || (0..5).map(|_| c.count_messages(&h)).collect::<Vec<_>>())
        })
        .collect();
    for h in handles {
        for n in h.join().unwrap() {
            assert_eq!(n, expected);
        }
    }
}

#[test]
fn estimate_error_per_kind() {
    let exact = BpeCounter::o200k();
    let est = EstimateCounter::new();
    let mut by_kind: BTreeMap<&str, (usize, usize, usize)> = BTreeMap::new();
    for seed in 0..20 {
        for (kind, text) in synthetic::texts(seed) {
            let e = by_kind.entry(kind).or_default();
            e.0 += exact.count_text(&text);
            e.1 += est.count_text(&text);
            e.2 += text.chars().count().div_ceil(4);
        }
    }
    let history = synthetic::conversation(42, 50_000, &exact);
    let e = by_kind.entry("history").or_default();
    e.0 += exact.count_messages(&history);
    e.1 += est.count_messages(&history);
    let mut bad = Vec::new();
    println!("kind       o200k  estimate  err    chars/4  err");
    for (kind, (x, y, z)) in &by_kind {
        let err = (*y as f64 - *x as f64) / *x as f64 * 100.0;
        let err4 = (*z as f64 - *x as f64) / *x as f64 * 100.0;
        println!("{kind:<10} {x:>6} {y:>8} {err:>+6.1}% {z:>8} {err4:>+6.1}%");
        if *kind != "edge" && *kind != "history" && err.abs() >= 20.0 {
            bad.push(format!("{kind}: {err:+.1}%"));
        }
    }
    assert!(bad.is_empty(), "{bad:?}");
    let (x, y, _) = by_kind["history"];
    let err = (y as f64 - x as f64) / x as f64;
    assert!(err.abs() < 0.10, "history: {:.1}%", err * 100.0);
}

#[test]
fn estimate_sanity() {
    let e = EstimateCounter::new();
    assert_eq!(e.count_text(""), 0);
    assert!((1..=3).contains(&e.count_text("hello world")));
    // CJK costs about one token per character, far more than chars/4.
    assert!(e.count_text("模型在上下文窗口快满时会压缩历史消息") >= 15);
    let scaled = EstimateCounter::new().with_scale(2.0);
    let text = "The agent reads a file and then writes a summary.";
    assert!(scaled.count_text(text) >= 2 * e.count_text(text) - 1);
    assert!(!e.is_exact());
}

#[test]
fn counter_for_model_picks_exact_where_known() {
    for (model, name) in [
        ("openai:gpt-4o", "o200k_base"),
        ("gpt-4.1-mini", "o200k_base"),
        ("gpt-5", "o200k_base"),
        ("o3-mini", "o200k_base"),
        ("o1", "o200k_base"),
        ("gpt-4-turbo", "cl100k_base"),
        ("gpt-3.5-turbo-0125", "cl100k_base"),
        ("text-embedding-3-small", "cl100k_base"),
        ("anthropic:claude-sonnet-4-5", "estimate"),
        ("qwen2.5:7b", "estimate"),
        ("something-else", "estimate"),
    ] {
        let c = counter_for_model(model);
        assert_eq!(c.name(), name, "{model}");
        assert_eq!(c.is_exact(), name != "estimate", "{model}");
    }
    // The estimate for non-OpenAI models carries a safety margin.
    let text = "The agent reads a file and then writes a summary of its findings.";
    assert!(
        counter_for_model("claude-3-5-sonnet").count_text(text)
            >= EstimateCounter::new().count_text(text)
    );
}

#[test]
fn custom_counter_via_trait() {
    struct Words;
    impl TokenCounter for Words {
        fn name(&self) -> &str {
            "words"
        }
        fn is_exact(&self) -> bool {
            true
        }
        fn count_text(&self, text: &str) -> usize {
            text.split_whitespace().count()
        }
    }
    let c: Arc<dyn TokenCounter> = Arc::new(Words);
    let cached = CachedCounter::new(c);
    assert_eq!(
        cached.count_message(&Message::user("a b c")),
        MESSAGE_OVERHEAD + 1 + 3
    );
    assert_eq!(
        cached.count_message(&image_message()),
        MESSAGE_OVERHEAD + 1 + 2 + DEFAULT_IMAGE_TOKENS
    );
}
