//! Deterministic synthetic conversations and texts for benchmarks and tests.
//!
//! Everything here is generated in code from a fixed seed (no data files), so a benchmark or a
//! test sees byte-identical input on every machine. The content mixes the kinds of text an agent
//! history holds: English prose, Rust and Python code, JSON tool arguments, tool results (file
//! listings, grep hits, logs, JSON), plus some accented Latin, Cyrillic, CJK and emoji.

use cairn_core::message::{Content, FunctionCall, FunctionResult, Message, Role};

use crate::TokenCounter;

/// A small deterministic pseudo-random generator (SplitMix64).
#[derive(Debug, Clone)]
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

const WORDS: &[&str] = &[
    "the",
    "agent",
    "reads",
    "a",
    "file",
    "and",
    "then",
    "writes",
    "summary",
    "of",
    "its",
    "findings",
    "to",
    "disk",
    "because",
    "context",
    "window",
    "is",
    "limited",
    "model",
    "tokens",
    "history",
    "message",
    "tool",
    "result",
    "should",
    "never",
    "be",
    "split",
    "from",
    "call",
    "when",
    "compression",
    "starts",
    "we",
    "keep",
    "recent",
    "turns",
    "verbatim",
    "older",
    "ones",
    "are",
    "replaced",
    "by",
    "structured",
    "notes",
    "about",
    "intent",
    "artifacts",
    "next",
    "steps",
    "however",
    "sometimes",
    "user",
    "asks",
    "for",
    "something",
    "unexpected",
    "like",
    "refactoring",
    "entire",
    "module",
    "or",
    "explaining",
    "why",
    "test",
    "fails",
    "on",
    "CI",
    "but",
    "passes",
    "locally",
    "which",
    "usually",
    "means",
    "race",
    "condition",
    "timezone",
    "difference",
    "missing",
    "environment",
    "variable",
    "dependency",
    "version",
    "mismatch",
    "Rust",
    "compiler",
    "borrow",
    "checker",
    "lifetime",
    "trait",
    "object",
    "async",
    "runtime",
    "Tokio",
    "executor",
    "future",
    "stream",
    "channel",
    "mutex",
    "deadlock",
    "performance",
    "benchmark",
    "latency",
    "throughput",
    "allocation",
    "cache",
    "hit",
    "miss",
    "eviction",
    "internationalization",
    "counterintuitive",
    "straightforward",
    "approximately",
    "exactly",
];

const NAMES: &[&str] = &[
    "parse_config",
    "load_session",
    "TokenBudget",
    "compact_history",
    "offload_result",
    "ChatClient",
    "run_agent",
    "MiddlewareStack",
    "FileBackend",
    "summarize_messages",
];

const INTL: &[&str] = &[
    "Le modèle résume l'historique avant de dépasser la fenêtre de contexte.",
    "Die Zusammenfassung enthält Absicht, Artefakte und nächste Schritte — übersichtlich.",
    "Модель сжимает историю сообщений, когда окно контекста почти заполнено.",
    "模型在上下文窗口快满时会压缩历史消息，并保留最近的对话。",
    "コンテキストウィンドウが一杯になる前に、エージェントは履歴を要約します。",
    "에이전트는 도구 결과가 너무 크면 파일로 저장하고 경로만 남깁니다.",
    "Ölçüm sonuçları: ağırlık 85, önbellek isabeti %97 — çok iyi! 🎉🚀",
    "El agente guarda el resultado en «/large_tool_results/» y sólo deja una vista previa.",
];

fn sentence(rng: &mut Rng) -> String {
    let n = 6 + rng.below(14);
    let mut s = String::new();
    for i in 0..n {
        let w = rng.pick(WORDS);
        if i == 0 {
            let mut c = w.chars();
            if let Some(f) = c.next() {
                s.extend(f.to_uppercase());
                s.push_str(c.as_str());
            }
        } else {
            s.push(' ');
            s.push_str(w);
        }
        if i + 1 < n && rng.below(9) == 0 {
            s.push(',');
        }
    }
    s.push_str(rng.pick(&[".", ".", ".", "?", "!", ":"]));
    s
}

fn prose(rng: &mut Rng, sentences: usize) -> String {
    let mut out = String::new();
    for i in 0..sentences {
        if i > 0 {
            out.push_str(if rng.below(5) == 0 { "\n\n" } else { " " });
        }
        if rng.below(12) == 0 {
            out.push_str(rng.pick(INTL));
        } else {
            out.push_str(&sentence(rng));
        }
        if rng.below(15) == 0 {
            out.push_str(&format!(
                " See `{}` (line {}, {}%).",
                rng.pick(NAMES),
                rng.below(5000),
                rng.below(100)
            ));
        }
    }
    out
}

fn rust_code(rng: &mut Rng, fns: usize) -> String {
    let mut out = String::from("use std::collections::HashMap;\nuse std::sync::Arc;\n\n");
    for _ in 0..fns {
        let name = rng.pick(NAMES).to_lowercase();
        let n = rng.below(1000);
        out.push_str(&format!(
            "/// {}\npub fn {name}_{n}(input: &str, limit: usize) -> Result<Vec<String>, Error> {{\n",
            sentence(rng)
        ));
        out.push_str("    let mut out = Vec::with_capacity(limit);\n");
        out.push_str(&format!(
            "    for (i, line) in input.lines().enumerate().take({}) {{\n",
            rng.below(500)
        ));
        out.push_str("        if line.trim().is_empty() {\n            continue;\n        }\n");
        out.push_str(&format!(
            "        let key = format!(\"{{}}:{{}}\", i, line.len() * {});\n",
            rng.below(97)
        ));
        out.push_str("        out.push(key);\n    }\n    Ok(out)\n}\n\n");
    }
    out
}

fn python_code(rng: &mut Rng, fns: usize) -> String {
    let mut out = String::from("import json\nfrom pathlib import Path\n\n\n");
    for _ in 0..fns {
        let name = rng.pick(NAMES).to_lowercase();
        out.push_str(&format!(
            "def {name}(path: Path, threshold: int = {}) -> dict:\n    \"\"\"{}\"\"\"\n",
            rng.below(20_000),
            sentence(rng)
        ));
        out.push_str("    data = json.loads(path.read_text())\n");
        out.push_str("    return {k: v for k, v in data.items() if len(str(v)) > threshold}\n\n\n");
    }
    out
}

fn json_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    out
}

fn listing(rng: &mut Rng, lines: usize) -> String {
    let mut out = String::new();
    for _ in 0..lines {
        out.push_str(&format!(
            "-rw-r--r--  1 agent staff {:>8} Nov {:>2} 1{}:{:02} src/{}/{}.rs\n",
            rng.below(200_000),
            1 + rng.below(30),
            rng.below(10),
            rng.below(60),
            rng.pick(&["core", "tools", "middleware", "backend", "tokens"]),
            rng.pick(NAMES).to_lowercase()
        ));
    }
    out
}

fn log_lines(rng: &mut Rng, lines: usize) -> String {
    let mut out = String::new();
    for _ in 0..lines {
        out.push_str(&format!(
            "2026-11-{:02}T{:02}:{:02}:{:02}.{:03}Z {} cairn::{}: {} elapsed_ms={} id={:016x}\n",
            1 + rng.below(30),
            rng.below(24),
            rng.below(60),
            rng.below(60),
            rng.below(1000),
            rng.pick(&["INFO ", "WARN ", "DEBUG", "ERROR"]),
            rng.pick(&["agent", "tools::fs", "compaction", "client"]),
            sentence(rng),
            rng.below(10_000),
            rng.next()
        ));
    }
    out
}

fn grep_hits(rng: &mut Rng, lines: usize) -> String {
    let mut out = String::new();
    for _ in 0..lines {
        out.push_str(&format!(
            "crates/cairn-{}/src/{}.rs:{}:    let {} = {}(&ctx, {})?;\n",
            rng.pick(&["core", "tools", "tokens"]),
            rng.pick(NAMES).to_lowercase(),
            1 + rng.below(900),
            rng.pick(WORDS),
            rng.pick(NAMES).to_lowercase(),
            rng.below(64)
        ));
    }
    out
}

fn json_result(rng: &mut Rng, items: usize) -> String {
    let mut out = String::from("{\n  \"results\": [\n");
    for i in 0..items {
        out.push_str(&format!(
            "    {{\"id\": {}, \"title\": \"{}\", \"score\": 0.{:04}, \"tags\": [\"{}\", \"{}\"]}}{}\n",
            rng.below(100_000),
            json_escape(&sentence(rng)),
            rng.below(10_000),
            rng.pick(WORDS),
            rng.pick(WORDS),
            if i + 1 < items { "," } else { "" }
        ));
    }
    out.push_str("  ],\n  \"total\": ");
    out.push_str(&items.to_string());
    out.push_str("\n}\n");
    out
}

/// One synthetic turn: a user message, an assistant message with reasoning and tool calls, the
/// tool results, and a final assistant answer.
fn turn(rng: &mut Rng, index: usize) -> Vec<Message> {
    let mut msgs = Vec::with_capacity(4);
    msgs.push(Message::user({
        let n = 2 + rng.below(6);
        prose(rng, n)
    }));

    let mut calls = Vec::new();
    let mut results = Vec::new();
    let n_calls = 1 + rng.below(3);
    for c in 0..n_calls {
        let call_id = format!("call_{index}_{c}_{:08x}", rng.next() & 0xffff_ffff);
        let (name, args, output) = match rng.below(6) {
            0 => {
                let code = {
                    let n = 1 + rng.below(3);
                    rust_code(rng, n)
                };
                let args = format!(
                    "{{\"path\":\"/src/{}.rs\",\"content\":\"{}\"}}",
                    rng.pick(NAMES).to_lowercase(),
                    json_escape(&code)
                );
                ("write_file", args, "Wrote 1 file.".to_owned())
            }
            1 => (
                "read_file",
                format!(
                    "{{\"path\": \"/src/{}.py\", \"offset\": 0, \"limit\": 200}}",
                    rng.below(50)
                ),
                {
                    let n = 2 + rng.below(4);
                    python_code(rng, n)
                },
            ),
            2 => ("ls", "{\"path\": \"/src\"}".to_owned(), {
                let n = 10 + rng.below(30);
                listing(rng, n)
            }),
            3 => (
                "grep",
                format!(
                    "{{\"pattern\": \"{}\", \"glob\": \"**/*.rs\"}}",
                    rng.pick(NAMES)
                ),
                {
                    let n = 5 + rng.below(25);
                    grep_hits(rng, n)
                },
            ),
            4 => (
                "search",
                format!(
                    "{{\"query\": \"{}\", \"max_results\": {}}}",
                    json_escape(&sentence(rng)),
                    3 + rng.below(10)
                ),
                {
                    let n = 3 + rng.below(10);
                    json_result(rng, n)
                },
            ),
            _ => (
                "shell",
                "{\"command\": \"cargo test -p cairn-core 2>&1 | tail -n 40\"}".to_owned(),
                {
                    let n = 5 + rng.below(30);
                    log_lines(rng, n)
                },
            ),
        };
        calls.push(Content::FunctionCall(FunctionCall {
            call_id: call_id.clone(),
            name: name.to_owned(),
            arguments: args,
        }));
        results.push(Message::tool_result(FunctionResult {
            call_id,
            output: vec![Content::text(output)],
            is_error: rng.below(10) == 0,
        }));
    }
    let mut assistant = vec![Content::Reasoning {
        text: {
            let n = 1 + rng.below(4);
            prose(rng, n)
        },
    }];
    assistant.push(Content::text({
        let n = 1 + rng.below(2);
        prose(rng, n)
    }));
    assistant.extend(calls);
    msgs.push(Message::new(Role::Assistant, assistant));
    msgs.extend(results);
    msgs.push(Message::assistant({
        let n = 2 + rng.below(8);
        prose(rng, n)
    }));
    msgs
}

/// A deterministic synthetic conversation of at least `target_tokens` tokens as counted by
/// `counter` (system prompt first, then whole turns).
///
/// The same `seed`, target and counter always give the same messages.
pub fn conversation(seed: u64, target_tokens: usize, counter: &dyn TokenCounter) -> Vec<Message> {
    let mut rng = Rng(seed);
    let mut msgs = vec![Message::system(prose(&mut rng, 12))];
    let mut total = counter.count_message(&msgs[0]);
    let mut i = 0;
    while total < target_tokens {
        let t = turn(&mut rng, i);
        total += counter.count_messages(&t);
        msgs.extend(t);
        i += 1;
    }
    msgs
}

/// A deterministic synthetic turn (user, assistant with tool calls, tool results, answer); used
/// to grow a conversation by one step in benchmarks.
pub fn next_turn(seed: u64) -> Vec<Message> {
    turn(&mut Rng(seed), 0)
}

/// Labelled texts of different kinds (prose, code, JSON, logs, CJK, …) plus tokenizer edge cases
/// (whitespace runs, `\r\n`, long digit runs, contractions, emoji), for comparing counters.
pub fn texts(seed: u64) -> Vec<(&'static str, String)> {
    let mut rng = Rng(seed);
    let mut out = vec![
        ("prose", prose(&mut rng, 60)),
        ("rust", rust_code(&mut rng, 8)),
        ("python", python_code(&mut rng, 8)),
        ("json", json_result(&mut rng, 20)),
        ("listing", listing(&mut rng, 30)),
        ("logs", log_lines(&mut rng, 30)),
        ("grep", grep_hits(&mut rng, 30)),
        ("cjk", INTL[3..6].join("\n").repeat(8)),
        (
            "european",
            [INTL[0], INTL[1], INTL[2], INTL[6], INTL[7]]
                .join(" ")
                .repeat(6),
        ),
    ];
    let edge: &[&str] = &[
        "",
        " ",
        "hello world",
        "  leading and trailing   ",
        "tabs\tand\t\ttabs\n\n\n  \n",
        "windows\r\nline\r\nendings\r\n",
        "1234567890123456789 3.14159 1e-9 0xDEADBEEF",
        "I'm, you're, they'll, we'd, it's, I'VE, DON'T",
        "emoji 👩‍👩‍👧‍👦 🏳️‍🌈 ✨ and combining é (e\u{301})",
        "<|endoftext|> is plain text here",
        "    indented\n        more\n            deeper\n",
        "URL https://example.invalid/a/b?c=d&e=f#g and path /usr/local/bin/",
        "trailing spaces then newline   \n   x",
        "ALLCAPSWORDS CamelCaseIdentifiers snake_case_names kebab-case-names",
    ];
    out.extend(edge.iter().map(|s| ("edge", (*s).to_owned())));
    out
}
