//! Model profile lookup.

use cairn_tokens::{Encoding, ModelProfile, profile_for_model};

fn input(model: &str) -> Option<usize> {
    profile_for_model(model).map(|p| p.max_input_tokens)
}

#[test]
fn known_families() {
    let cases: &[(&str, Option<usize>)] = &[
        ("gpt-4o", Some(128_000)),
        ("openai:gpt-4o-2024-08-06", Some(128_000)),
        ("OpenAI:GPT-4o-mini", Some(128_000)),
        ("gpt-4.1", Some(1_047_576)),
        ("openai:gpt-4.1-nano", Some(1_047_576)),
        ("gpt-5", Some(272_000)),
        ("gpt-5-mini", Some(272_000)),
        ("o1", Some(200_000)),
        ("o1-mini", Some(128_000)),
        ("o3", Some(200_000)),
        ("o3-mini-2025-01-31", Some(200_000)),
        ("o4-mini", Some(200_000)),
        ("gpt-4", Some(8_192)),
        ("gpt-4-0613", Some(8_192)),
        ("gpt-4-32k", Some(32_768)),
        ("gpt-4-turbo-2024-04-09", Some(128_000)),
        ("gpt-3.5-turbo", Some(16_385)),
        ("anthropic:claude-3-5-sonnet-20241022", Some(200_000)),
        ("claude-sonnet-4-5", Some(200_000)),
        ("claude-opus-4-1-20250805", Some(200_000)),
        (
            "bedrock:us.anthropic.claude-3-7-sonnet-20250219-v1:0",
            Some(200_000),
        ),
        ("google:gemini-2.5-pro", Some(1_048_576)),
        ("gemini-1.5-pro-002", Some(2_097_152)),
        ("gemini-pro", Some(30_720)),
        ("Qwen/Qwen2.5-7B-Instruct", Some(32_768)),
        ("ollama:qwen2.5:14b", Some(32_768)),
        ("meta-llama/Meta-Llama-3.1-8B-Instruct", Some(131_072)),
        ("llama3.2:3b", Some(131_072)),
        ("llama3-8b-8192", Some(8_192)),
        ("mistral-large-latest", Some(131_072)),
        ("mistral:7b", Some(32_768)),
        ("mixtral-8x7b-instruct", Some(32_768)),
        ("unknown-model", None),
        ("o10", None),
        ("", None),
    ];
    for (model, expected) in cases {
        assert_eq!(input(model), *expected, "{model}");
    }
}

#[test]
fn output_limits_and_encodings() {
    let p = profile_for_model("claude-opus-4-20250514").unwrap();
    assert_eq!(p.max_output_tokens, Some(32_000));
    assert_eq!(p.encoding, None);
    let p = profile_for_model("claude-opus-4-5").unwrap();
    assert_eq!(p.max_output_tokens, Some(64_000));
    let p = profile_for_model("openai:gpt-4o").unwrap();
    assert_eq!(p.max_output_tokens, Some(16_384));
    assert_eq!(p.encoding, Some(Encoding::O200kBase));
    assert_eq!(
        profile_for_model("gpt-4").unwrap().encoding,
        Some(Encoding::Cl100kBase)
    );
}

#[test]
fn overrides() {
    let p = profile_for_model("openai:gpt-4o")
        .unwrap()
        .with_max_input_tokens(4_000);
    assert_eq!(p.max_input_tokens, 4_000);
    assert_eq!(p.max_output_tokens, Some(16_384));
    let mine = ModelProfile::new(10_000).with_max_output_tokens(Some(1_000));
    assert_eq!(
        (mine.max_input_tokens, mine.max_output_tokens),
        (10_000, Some(1_000))
    );
}
