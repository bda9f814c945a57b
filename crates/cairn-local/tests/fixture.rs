//! Tests on the SmolLM2-135M fixture (`scripts/fetch-model.sh fixture`). Each test prints a notice
//! and passes when the file is absent.

#![allow(clippy::expect_used, clippy::unwrap_used)] // test helpers may panic

use cairn_core::{
    ChatClient, ChatErrorKind, ChatOptions, ChatRequest, Content, Kwargs, Message,
    ResponseAssembler, Role, ToolChoice, ToolSpec,
};
use cairn_local::{
    GenerateRequest, KnownModel, LocalClient, LocalConfig, LocalModel, PromptFormat, StopReason,
    grammar::tool_call_grammar,
};
use futures::StreamExt;
use serde_json::{Value, json};

/// llama.cpp's threads spin while they wait, so tests that run models at the same time on a small
/// machine slow each other down badly: they take turns.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(f)
}

fn fixture(n_ctx: u32) -> Option<LocalModel> {
    let Some(path) = KnownModel::Fixture.find() else {
        assert!(
            std::env::var_os("CAIRN_REQUIRE_MODELS").is_none(),
            "CAIRN_REQUIRE_MODELS is set but the SmolLM2 fixture is missing"
        );
        eprintln!(
            "SKIPPED: the SmolLM2 fixture is not at {} (run scripts/fetch-model.sh fixture)",
            KnownModel::Fixture.path().display()
        );
        return None;
    };
    let config = LocalConfig {
        n_ctx,
        threads: Some(1),
        max_tokens: 32,
        ..Default::default()
    };
    Some(LocalModel::load(path, config).expect("the fixture loads"))
}

/// Runs `test` on the fixture loaded with `n_ctx` and a client on it, taking its turn with the
/// other model tests; does nothing when the fixture is absent.
fn with_client<F, Fut>(n_ctx: u32, test: F)
where
    F: FnOnce(LocalModel, LocalClient) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let _serial = serial();
    let Some(model) = fixture(n_ctx) else { return };
    let client = LocalClient::new(model.clone());
    block_on(test(model, client));
}

/// `msgs` and `options` with both kwargs buckets set to `kw`.
fn request<'a>(msgs: &'a [Message], options: &'a ChatOptions, kw: &'a Kwargs) -> ChatRequest<'a> {
    ChatRequest::new(msgs, options)
        .with_function_invocation_kwargs(kw)
        .with_client_kwargs(kw)
}

fn bounded_tools() -> Vec<ToolSpec> {
    vec![
        ToolSpec::new(
            "set_mode",
            "Set the speed mode.",
            json!({"type": "object", "properties": {
                "mode": {"enum": ["fast", "slow"]},
                "level": {"type": "integer"},
                "loud": {"type": "boolean"}
            }, "required": ["mode", "level"]}),
        ),
        ToolSpec::new(
            "stop",
            "Stop everything.",
            json!({"type": "object", "properties": {}}),
        ),
    ]
}

#[test]
fn loads_and_tokenizes() {
    let _serial = serial();
    let Some(model) = fixture(1024) else { return };
    let info = model.info();
    assert_eq!(info.architecture.as_deref(), Some("llama"));
    assert_eq!(info.format, PromptFormat::ChatMl);
    assert_eq!(model.context_size(), 1024);
    assert!(info.n_params > 100_000_000, "{info:?}");
    let toks = model.tokenize("Hello, world!");
    assert!(!toks.is_empty());
    assert_eq!(model.detokenize(&toks), "Hello, world!");
    // Special tokens are one token each.
    assert_eq!(model.count_tokens("<|im_start|>"), 1);
}

#[test]
fn greedy_generation_is_bounded_and_deterministic() {
    let _serial = serial();
    let Some(model) = fixture(1024) else { return };
    let prompt =
        "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n";
    let a = model
        .generate(GenerateRequest::new(prompt, 12))
        .expect("generates");
    assert!(a.generated_tokens <= 12);
    assert!(a.generated_tokens > 0);
    assert!(matches!(a.stop, StopReason::Length | StopReason::EndOfTurn));
    assert!(!a.text.is_empty());
    model.clear_cache().expect("clears");
    let b = model
        .generate(GenerateRequest::new(prompt, 12))
        .expect("generates");
    assert_eq!(a.text, b.text);
    assert_eq!(b.cached_tokens, 0);
}

#[test]
fn llama_cpp_accepts_generated_grammars() {
    let _serial = serial();
    let Some(model) = fixture(1024) else { return };
    let nested = ToolSpec::new(
        "write_todos",
        "Replace the todo list.",
        json!({
            "type": "object",
            "properties": {
                "todos": {"type": "array", "items": {"$ref": "#/$defs/Todo"}},
                "note": {"type": ["string", "null"]},
                "extra": {}
            },
            "$defs": {"Todo": {"type": "object", "properties": {
                "content": {"type": "string"},
                "status": {"enum": ["pending", "in_progress", "completed"]},
                "weight": {"type": "number"}
            }, "required": ["content", "status"]}}
        }),
    );
    let mut tools = bounded_tools();
    tools.push(nested);
    let grammar = tool_call_grammar(&tools).expect("a grammar");
    let mut req =
        GenerateRequest::new("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n", 3);
    req.grammar = Some(grammar);
    let out = model.generate(req).expect("llama.cpp compiles the grammar");
    assert!(
        "<tool_call>\n".starts_with(&out.text) || out.text.starts_with("<tool_call>"),
        "{:?}",
        out.text
    );
    // A broken grammar is a typed error, not a crash.
    let mut bad = GenerateRequest::new("<|im_start|>user\nhi<|im_end|>\n", 3);
    bad.grammar = Some("root ::= ( \"a\"".into());
    assert!(matches!(
        model.generate(bad),
        Err(cairn_local::LocalError::Grammar(_))
    ));
}

#[test]
fn constrained_turn_is_a_valid_call() {
    with_client(2048, |_model, client| async move {
        let options = ChatOptions {
            tools: bounded_tools(),
            tool_choice: Some(ToolChoice::Required),
            max_tokens: Some(64),
            ..Default::default()
        };
        let msgs = [Message::user("Switch to fast mode, level 3.")];
        let r = client
            .get_response(ChatRequest::new(&msgs, &options))
            .await
            .expect("responds");
        let calls: Vec<_> = r.function_calls().collect();
        assert_eq!(calls.len(), 1, "{r:?}");
        let call = calls[0];
        assert!(
            ["set_mode", "stop"].contains(&call.name.as_str()),
            "{call:?}"
        );
        let args: Value = serde_json::from_str(&call.arguments).expect("valid JSON arguments");
        if call.name == "set_mode" {
            assert!(["fast", "slow"].contains(&args["mode"].as_str().unwrap_or("")));
            assert!(args["level"].is_i64(), "{args}");
        } else {
            assert_eq!(args, json!({}));
        }
        assert!(call.call_id.starts_with("call_"));
        assert_eq!(
            r.finish_reason,
            Some(cairn_core::FinishReason::ToolCalls),
            "{r:?}"
        );
    })
}

#[test]
fn second_turn_reuses_the_kv_cache() {
    with_client(2048, |model, client| async move {
        let options = ChatOptions {
            instructions: Some("You are a terse assistant.".into()),
            tools: bounded_tools(),
            max_tokens: Some(16),
            ..Default::default()
        };
        let kw = Kwargs::default();
        let mut msgs = vec![Message::user("Switch to slow mode, level 1.")];
        let r1 = client
            .get_response(request(&msgs, &options, &kw))
            .await
            .expect("turn 1");
        let u1 = r1.usage.expect("usage");
        assert_eq!(u1.cached_input_tokens, 0);
        msgs.extend(r1.messages.clone());
        if let Some(call) = r1.function_calls().next() {
            msgs.push(Message::tool_result(cairn_core::FunctionResult {
                call_id: call.call_id.clone(),
                output: vec![Content::text("done")],
                is_error: false,
            }));
        } else {
            msgs.push(Message::user("Thanks."));
        }
        let r2 = client
            .get_response(request(&msgs, &options, &kw))
            .await
            .expect("turn 2");
        let u2 = r2.usage.expect("usage");
        // Everything up to the end of turn 1's prompt is reused (turn 1's answer is re-tokenized
        // from text, so its tokens may differ slightly).
        assert!(
            u2.cached_input_tokens >= u1.input_tokens,
            "turn 1 {u1:?}, turn 2 {u2:?}"
        );
        assert!(u2.input_tokens > u2.cached_input_tokens);

        // The same second turn from a cold cache evaluates everything.
        model.clear_cache().expect("clears");
        let cold = client
            .get_response(request(&msgs, &options, &kw))
            .await
            .expect("cold turn 2");
        let uc = cold.usage.expect("usage");
        assert_eq!(uc.cached_input_tokens, 0);
        assert_eq!(uc.input_tokens, u2.input_tokens);
    })
}

#[test]
fn raw_output_round_trips_into_the_next_prompt() {
    with_client(2048, |model, client| async move {
        let options = ChatOptions {
            tools: bounded_tools(),
            tool_choice: Some(ToolChoice::Auto),
            max_tokens: Some(24),
            ..Default::default()
        };
        let kw = Kwargs::default();
        // After a tool result the turn is free; whatever the model wrote must come back verbatim.
        let mut msgs = vec![
            Message::user("Stop."),
            Message::new(
                Role::Assistant,
                vec![Content::FunctionCall(cairn_core::FunctionCall {
                    call_id: "c0".into(),
                    name: "stop".into(),
                    arguments: "{}".into(),
                })],
            ),
            Message::tool_result(cairn_core::FunctionResult {
                call_id: "c0".into(),
                output: vec![Content::text("stopped")],
                is_error: false,
            }),
        ];
        let before = client.render_prompt(&msgs, &options);
        let raw = model
            .generate(GenerateRequest {
                stop: vec![],
                ..GenerateRequest::new(before.clone(), 24)
            })
            .expect("raw")
            .text;
        model.clear_cache().expect("clears");
        let r = client
            .get_response(request(&msgs, &options, &kw))
            .await
            .expect("responds");
        msgs.extend(r.messages);
        let after = client.render_prompt(&msgs, &options);
        assert!(
            after.starts_with(&format!("{before}{raw}<|im_end|>\n")),
            "raw {raw:?} not kept in {after:?}"
        );
    })
}

#[test]
fn streaming_folds_into_the_same_response() {
    with_client(2048, |model, client| async move {
        let kw = Kwargs::default();
        for choice in [ToolChoice::Required, ToolChoice::None] {
            let options = ChatOptions {
                tools: bounded_tools(),
                tool_choice: Some(choice.clone()),
                max_tokens: Some(24),
                ..Default::default()
            };
            let msgs = [Message::user("Go fast at level 2, then tell me about it.")];
            model.clear_cache().expect("clears");
            let whole = client
                .get_response(request(&msgs, &options, &kw))
                .await
                .expect("responds");
            model.clear_cache().expect("clears");
            let mut stream = client.get_streaming_response(request(&msgs, &options, &kw));
            let mut asm = ResponseAssembler::new();
            let mut n = 0;
            while let Some(u) = stream.next().await {
                asm.push(&u.expect("update").event);
                n += 1;
            }
            assert!(asm.is_finished());
            let mut folded = asm.finish();
            // Call ids are generated per call; compare the rest.
            let ids: Vec<String> = whole.function_calls().map(|c| c.call_id.clone()).collect();
            for (c, id) in folded.messages[0]
                .contents
                .iter_mut()
                .zip(ids.iter().cycle())
            {
                if let Content::FunctionCall(fc) = c {
                    fc.call_id = id.clone();
                }
            }
            assert_eq!(folded, whole, "choice {choice:?} after {n} updates");
        }
    })
}

#[test]
fn overflow_is_a_context_overflow_error() {
    with_client(64, |_model, client| async move {
        let kw = Kwargs::default();
        let long = "word ".repeat(200);
        let err = client
            .get_response(request(
                &[Message::user(long)],
                &ChatOptions::default(),
                &kw,
            ))
            .await
            .expect_err("too long");
        assert_eq!(err.kind(), ChatErrorKind::ContextOverflow, "{err}");
        assert!(err.is_context_overflow());
    })
}

/// The prompt cache file carries a first prompt's KV cache to the next process (here: the next
/// load): the second model reuses it and answers exactly as the first did.
#[test]
fn the_prompt_cache_serves_the_next_load() {
    let _serial = serial();
    let Some(path) = KnownModel::Fixture.find() else {
        fixture(64);
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("prompt.kv");
    let config = LocalConfig {
        n_ctx: 1024,
        threads: Some(1),
        max_tokens: 8,
        prompt_cache: Some(cache.clone()),
        ..Default::default()
    };
    let system = "<|im_start|>system\n".to_owned()
        + &"You are a careful assistant who answers in one short sentence. ".repeat(30)
        + "<|im_end|>\n";
    let prompt =
        |q: &str| format!("{system}<|im_start|>user\n{q}<|im_end|>\n<|im_start|>assistant\n");
    let first = LocalModel::load(&path, config.clone()).unwrap();
    let a = first
        .generate(GenerateRequest::new(prompt("Name a colour."), 8))
        .unwrap();
    assert_eq!(a.cached_tokens, 0);
    assert!(cache.is_file(), "the first prompt was saved");
    drop(first);
    let second = LocalModel::load(&path, config.clone()).unwrap();
    let b = second
        .generate(GenerateRequest::new(prompt("Name a colour."), 8))
        .unwrap();
    assert!(
        b.cached_tokens + 1 >= b.prompt_tokens,
        "{} of {}",
        b.cached_tokens,
        b.prompt_tokens
    );
    assert!(!b.text.is_empty());
    drop(second);
    // Another question shares the system block only.
    let third = LocalModel::load(&path, config).unwrap();
    let c = third
        .generate(GenerateRequest::new(prompt("Name an animal."), 8))
        .unwrap();
    assert!(
        c.cached_tokens > 300 && c.cached_tokens < c.prompt_tokens,
        "{} of {}",
        c.cached_tokens,
        c.prompt_tokens
    );
    // A damaged file is ignored.
    drop(third);
    std::fs::write(&cache, b"not a state file").unwrap();
    let fourth = LocalModel::load(
        &path,
        LocalConfig {
            prompt_cache: Some(cache),
            n_ctx: 1024,
            threads: Some(1),
            ..Default::default()
        },
    )
    .unwrap();
    let d = fourth
        .generate(GenerateRequest::new(prompt("Name a colour."), 8))
        .unwrap();
    assert_eq!(d.cached_tokens, 0);
    assert_eq!(d.text, a.text);
}

/// A constrained turn that repeats a failed call is sampled again; whether or not it changes,
/// a streamed turn sends only the accepted sample (one call start), the same as the whole
/// response.
#[test]
fn a_repeated_failed_call_is_resampled_and_streamed_once() {
    let _serial = serial();
    let Some(path) = KnownModel::Fixture.find() else {
        fixture(64);
        return;
    };
    let model = LocalModel::load(
        path,
        LocalConfig {
            n_ctx: 2048,
            threads: Some(1),
            max_tokens: 32,
            resample_repeats: 2,
            ..Default::default()
        },
    )
    .expect("loads");
    let client = LocalClient::new(model.clone());
    block_on(async move {
        let kw = Kwargs::default();
        let options = ChatOptions {
            tools: bounded_tools(),
            tool_choice: Some(ToolChoice::Required),
            max_tokens: Some(32),
            ..Default::default()
        };
        // What the greedy turn calls, answered with an error as if it had failed.
        let ask = [Message::user("Stop now.")];
        let first = client
            .get_response(request(&ask, &options, &kw))
            .await
            .expect("responds");
        let call = first.function_calls().next().expect("a call").clone();
        let mut msgs = ask.to_vec();
        msgs.push(Message::new(
            Role::Assistant,
            vec![Content::FunctionCall(call.clone())],
        ));
        msgs.push(Message::new(
            Role::Tool,
            vec![Content::FunctionResult(cairn_core::FunctionResult {
                call_id: call.call_id.clone(),
                output: vec![Content::text("Error: not now")],
                is_error: true,
            })],
        ));
        model.clear_cache().expect("clears");
        let whole = client
            .get_response(request(&msgs, &options, &kw))
            .await
            .expect("responds");
        assert_eq!(whole.function_calls().count(), 1, "{whole:?}");
        model.clear_cache().expect("clears");
        let mut stream = client.get_streaming_response(request(&msgs, &options, &kw));
        let mut asm = ResponseAssembler::new();
        let mut starts = 0;
        while let Some(u) = stream.next().await {
            let event = u.expect("update").event;
            starts += usize::from(matches!(
                event,
                cairn_core::UpdateEvent::ToolCallStart { .. }
            ));
            asm.push(&event);
        }
        assert_eq!(starts, 1);
        let mut folded = asm.finish();
        let id = whole.function_calls().next().map(|c| c.call_id.clone());
        for c in &mut folded.messages[0].contents {
            if let (Content::FunctionCall(fc), Some(id)) = (c, &id) {
                fc.call_id = id.clone();
            }
        }
        assert_eq!(folded, whole);
    });
}
