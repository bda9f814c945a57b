//! Context compression (SPEC R7): offloading, argument truncation, summarization, overflow
//! recovery and stream tags, with a scripted model and a word-counting tokenizer so every
//! threshold can be hit exactly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};

use cairn_core::testing::{RecordedRequest, ScriptedClient};
use cairn_core::{
    Agent, AgentResponse, AgentSession, ChatClient, ChatContext, ChatError, ChatErrorKind,
    ChatOptions, ChatRequest, ChatResponse, Content, FnTool, FunctionCall, FunctionResult, Kwargs,
    LoopConfig, Message, Role, ToolOutput, UpdateEvent,
};
use cairn_deep::backend::SharedBackend;
use cairn_deep::compression::{
    CompactOutcome, CompressionState, Compressor, Keep, Offloading, STATE_KEY, Summarization,
    offload_message,
};
use cairn_deep::{DeepAgent, DeepAgentBuilder, HarnessProfile, StateBackend};
use cairn_tokens::TokenCounter;
use futures::{FutureExt, StreamExt};
use serde_json::json;

/// One token per whitespace-separated word: predictable thresholds.
struct Words;

impl TokenCounter for Words {
    fn name(&self) -> &str {
        "words"
    }
    fn count_text(&self, text: &str) -> usize {
        text.split_whitespace().count()
    }
}

/// A user message of exactly `tokens` tokens under [`Words`] (3 framing + 1 role + words).
fn user_of(tokens: usize, tag: &str) -> Message {
    let words: Vec<String> = (0..tokens - 4).map(|i| format!("{tag}w{i}")).collect();
    Message::user(words.join(" "))
}

fn is_summarizer(req: &RecordedRequest) -> bool {
    req.options.tools.is_empty()
        && req.messages.len() == 1
        && req.messages[0].text().contains("<messages>")
}

fn summarizer_client() -> ScriptedClient {
    let n = Arc::new(Mutex::new(0usize));
    ScriptedClient::new(move |_req| {
        let mut n = n.lock().unwrap();
        *n += 1;
        Ok(ChatResponse::text(format!(
            "## Session intent\nTest.\n\n## Summary\nSUMMARY-{n}\n\n## Artifacts\nNone.\n\n## Next steps\nNone."
        )))
    })
}

/// A compressor over a fresh [`StateBackend`] counting [`Words`], and its summarizer.
fn compressor(window: Option<usize>, offloading: Offloading) -> (Compressor, ScriptedClient) {
    let backend: SharedBackend = Arc::new(StateBackend::new());
    let summarizer = summarizer_client();
    let c = Compressor::new(
        offloading,
        Summarization::new(),
        backend,
        Arc::new(summarizer.clone()),
        None,
    )
    .with_window(window)
    .with_counter(Some(Arc::new(Words)));
    (c, summarizer)
}

fn chat_ctx(messages: Vec<Message>, session: &AgentSession) -> ChatContext {
    let mut ctx = ChatContext::new(Arc::new(messages), ChatOptions::default());
    ctx.session = Some(session.clone());
    ctx
}

/// Compacts `msgs` in `session` with `c` (not forced): the effective context and the outcome.
async fn compact(
    c: &Compressor,
    msgs: &[Message],
    session: &AgentSession,
) -> (ChatContext, CompactOutcome) {
    let mut ctx = chat_ctx(msgs.to_vec(), session);
    let out = c.compact(&mut ctx, false).await.unwrap();
    (ctx, out)
}

fn history(session: &AgentSession) -> String {
    let files = StateBackend::files(session.state());
    let path = format!("/conversation_history/{}.md", session.id());
    files
        .get(&path)
        .map(|f| f.content.clone())
        .unwrap_or_default()
}

#[tokio::test]
async fn summarization_fires_at_85_percent_and_keeps_10_percent() {
    let (c, summarizer) = compressor(Some(1_000), Offloading::new());
    let session = AgentSession::new();
    // 8 × 100 tokens + reply priming 3 = 803; the last message brings it to 849 or 850.
    let mut msgs: Vec<Message> = (0..8).map(|i| user_of(100, &format!("m{i}"))).collect();
    msgs.push(user_of(46, "last"));
    let mut ctx = chat_ctx(msgs.clone(), &session);
    let before = Arc::clone(&ctx.messages);
    let out = c.compact(&mut ctx, false).await.unwrap();
    assert_eq!(out.tokens_before, 849);
    assert!(!out.summarized);
    assert!(
        Arc::ptr_eq(&before, &ctx.messages),
        "below the trigger nothing is copied"
    );
    assert!(summarizer.requests().is_empty());

    msgs[8] = user_of(47, "last");
    let (ctx, out) = compact(&c, &msgs, &session).await;
    assert_eq!(out.tokens_before, 850);
    assert!(out.summarized);
    // Keep 10% = 100 tokens: the last message (47) fits, the one before (100) would not.
    assert_eq!(ctx.messages.len(), 2);
    assert!(
        ctx.messages[0]
            .text()
            .starts_with("[Context summary] The first 8 messages")
    );
    assert!(ctx.messages[0].text().contains("SUMMARY-1"));
    assert!(
        ctx.messages[0]
            .text()
            .contains(&format!("/conversation_history/{}.md", session.id()))
    );
    assert_eq!(ctx.messages[1], msgs[8]);
    assert_eq!(
        out.tokens_after,
        3 + Words.count_message(&ctx.messages[0]) + 47
    );

    // The summarizer saw the prompt's four sections and the eight messages.
    let req = &summarizer.requests()[0];
    let text = req.messages[0].text();
    for section in [
        "## Session intent",
        "## Summary",
        "## Artifacts",
        "## Next steps",
    ] {
        assert!(text.contains(section), "{section}");
    }
    assert!(text.contains("### 1. user\nm0w0 m0w1"));
    assert!(text.contains("### 8. user\nm7w0"));
    assert!(!text.contains("lastw0"));

    // State: the boundary and the summary, in the session.
    let state: CompressionState = session.state().get(STATE_KEY).unwrap();
    assert_eq!(state.cutoff, 8);
    assert_eq!(state.summarizations, 1);

    // The history file holds the eight summarized messages, as text.
    let h = history(&session);
    assert!(h.starts_with(&format!(
        "# Conversation history of thread {}\n",
        session.id()
    )));
    assert!(h.contains("## Messages 1–8 (summarized at 20"));
    for (i, m) in msgs[..8].iter().enumerate() {
        assert!(h.contains(&format!("### {}. user\n{}\n", i + 1, m.text())));
    }
    assert!(!h.contains("lastw0"));

    // The stored conversation is untouched; the next call reuses the summary.
    msgs.push(Message::assistant("ok"));
    let (ctx, out) = compact(&c, &msgs, &session).await;
    assert!(!out.summarized && out.used_summary);
    assert_eq!(ctx.messages.len(), 3);
    assert!(ctx.messages[0].text().contains("SUMMARY-1"));
    assert_eq!(summarizer.requests().len(), 1);
}

#[tokio::test]
async fn without_a_window_trigger_at_170k_and_keep_6_messages() {
    // "scripted" is not a known model: no window.
    let (c, _summarizer) = compressor(None, Offloading::new());
    let session = AgentSession::new();
    // 169 × 1,000 + 993 + 3 = 169,996 … then 170,000.
    let mut msgs: Vec<Message> = (0..169).map(|i| user_of(1_000, &format!("m{i}"))).collect();
    msgs.push(user_of(996, "last"));
    let (_, out) = compact(&c, &msgs, &session).await;
    assert_eq!(out.tokens_before, 169_999);
    assert!(!out.summarized);

    msgs[169] = user_of(997, "last");
    let (ctx, out) = compact(&c, &msgs, &session).await;
    assert_eq!(out.tokens_before, 170_000);
    assert!(out.summarized);
    assert_eq!(ctx.messages.len(), 1 + 6);
    assert_eq!(&ctx.messages[1..], &msgs[164..]);
}

fn call(id: &str, name: &str, args: serde_json::Value) -> Content {
    Content::FunctionCall(FunctionCall::new(id, name, &args))
}

fn result(id: &str, text: String) -> Message {
    Message::tool_result(FunctionResult {
        call_id: id.into(),
        output: vec![Content::text(text)],
        is_error: false,
    })
}

fn words(n: usize, tag: &str) -> String {
    (0..n)
        .map(|i| format!("{tag}{i}"))
        .collect::<Vec<_>>()
        .join(" ")
}

#[tokio::test]
async fn a_call_and_its_results_are_never_split() {
    let (c, _summarizer) = compressor(Some(1_000), Offloading::new());
    let session = AgentSession::new();
    let mut msgs: Vec<Message> = (0..8).map(|i| user_of(100, &format!("m{i}"))).collect();
    // A turn with two parallel calls; the keep budget (100) would cut between the results.
    msgs.push(Message::new(
        Role::Assistant,
        vec![
            call("a", "search", json!({"q": "x"})),
            call("b", "search", json!({"q": "y"})),
        ],
    ));
    msgs.push(result("a", words(40, "ra")));
    msgs.push(result("b", words(40, "rb")));
    let (ctx, out) = compact(&c, &msgs, &session).await;
    assert!(out.summarized);
    let kept = &ctx.messages[1..];
    // The whole group is kept (over budget rather than split) …
    assert_eq!(kept, &msgs[8..]);
    // … and every result in the effective context has its call.
    for m in ctx.messages.iter() {
        for r in m.function_results() {
            assert!(
                ctx.messages
                    .iter()
                    .flat_map(Message::function_calls)
                    .any(|c| c.call_id == r.call_id)
            );
        }
    }
}

#[tokio::test]
async fn file_arguments_are_truncated_only_past_the_trigger() {
    let (c, summarizer) = compressor(Some(1_000), Offloading::new().tool_input_tokens(100));
    let session = AgentSession::new();
    let content = words(300, "c");
    let write = Message::new(
        Role::Assistant,
        vec![call(
            "w1",
            "write_file",
            json!({"path": "/report.md", "content": content}),
        )],
    );
    let base = vec![
        user_of(100, "task"),
        write.clone(),
        result("w1", "Created /report.md".into()),
    ];
    // ≈ 100 + 300 + 12 + … = under 850: untouched.
    let mut msgs = base.clone();
    msgs.push(user_of(300, "a"));
    let (ctx, out) = compact(&c, &msgs, &session).await;
    assert!(out.tokens_before < 850);
    assert_eq!(out.truncated_calls, 0);
    assert_eq!(ctx.messages.as_slice(), msgs.as_slice());

    // Past 85%: the old write's content becomes a pointer, which frees enough; no summary.
    msgs.push(user_of(130, "b"));
    msgs.push(Message::assistant("noted"));
    let (ctx, out) = compact(&c, &msgs, &session).await;
    assert!(out.tokens_before >= 850, "{out:?}");
    assert_eq!(out.truncated_calls, 1);
    assert!(!out.summarized);
    assert!(out.tokens_after < 850);
    let args = &ctx.messages[1].function_calls().next().unwrap().arguments;
    let v: serde_json::Value = serde_json::from_str(args).unwrap();
    assert_eq!(v["path"], "/report.md");
    let content = v["content"].as_str().unwrap();
    assert!(
        content.contains("(argument truncated: ") && content.contains("/report.md holds them"),
        "{content}"
    );
    // Derived only: the stored message still has the full content.
    assert_eq!(msgs[1], write);
    assert!(summarizer.requests().is_empty());
}

// ---- offloading tool results (function middleware, through the deep agent) ----

fn big_tool(name: &'static str, output: ToolOutput) -> FnTool {
    FnTool::new(
        name,
        "Returns a canned output.",
        json!({"type": "object", "properties": {}}),
        move |_ctx| {
            let out = output.clone();
            async move { Ok(out) }
        },
    )
}

/// A model that calls `tool` once, then answers.
fn one_call(tool: &'static str, args: serde_json::Value) -> ScriptedClient {
    ScriptedClient::new(move |req| {
        Ok(if req.tool_results() == 0 {
            ChatResponse::tool_calls([(tool, args.clone())])
        } else {
            ChatResponse::text("done")
        })
    })
}

/// A deep agent on `client` counting [`Words`].
fn words_agent(client: ScriptedClient) -> DeepAgentBuilder {
    DeepAgent::builder()
        .client(client)
        .token_counter(Arc::new(Words))
}

/// Runs `agent` on `input` in a new session: the session and the response.
async fn run_in_session(agent: &Agent, input: &str) -> (AgentSession, AgentResponse) {
    let session = AgentSession::new();
    let response = agent.run(input).session(&session).await.unwrap();
    (session, response)
}

fn tool_result_text(session: &AgentSession) -> FunctionResult {
    session
        .messages()
        .iter()
        .flat_map(|m| m.function_results().cloned().collect::<Vec<_>>())
        .next()
        .unwrap()
}

#[tokio::test]
async fn large_results_are_offloaded_with_a_head_and_tail_preview() {
    // 30 lines × 5 words = 150 tokens; the threshold is 149 (offloaded) vs 150 (kept).
    let text: String = (1..=30)
        .map(|i| format!("row {i} alpha beta gamma\n"))
        .collect();
    for (threshold, offloaded) in [(150, false), (149, true)] {
        let backend = Arc::new(StateBackend::new());
        let agent = words_agent(one_call("fetch", json!({})))
            .backend(backend.clone())
            .tool(big_tool("fetch", ToolOutput::text(text.clone())))
            .offloading(Offloading::new().tool_result_tokens(threshold))
            .build()
            .unwrap();
        let (session, _) = run_in_session(&agent, "go").await;
        let r = tool_result_text(&session);
        if !offloaded {
            assert_eq!(r.text(), text);
            continue;
        }
        let path = "/large_tool_results/call_0";
        let expected = format!(
            "This tool result was too large for the context (150 tokens, 30 lines), so it was saved to {path}.\n\
             Read it in pages with read_file (path \"{path}\", offset and limit, e.g. offset 5 limit 200), or search it with grep (path \"{path}\").\n\
             The first 5 and last 5 lines:\n{}... [20 lines truncated] ...\n{}",
            (1..=5)
                .map(|i| format!("{i:>2}\trow {i} alpha beta gamma\n"))
                .collect::<String>(),
            (26..=30)
                .map(|i| format!("{i:>2}\trow {i} alpha beta gamma\n"))
                .collect::<String>()
        );
        assert_eq!(r.text(), expected);
        assert_eq!(r.text(), offload_message(path, &text, 150, 10));
        assert_eq!(
            StateBackend::files(session.state())[path].content,
            text.trim_end_matches('\n').to_owned() + "\n"
        );
    }
}

#[tokio::test]
async fn profile_threshold_images_file_tools_and_failed_writes() {
    let big = words(500, "x");
    let image = Content::Image {
        url: "https://example.com/a.png".into(),
        media_type: Some("image/png".into()),
    };

    // The profile's max_tool_result_tokens overrides the configured threshold; images stay.
    let backend = Arc::new(StateBackend::new());
    let agent = words_agent(one_call("fetch", json!({})))
        .backend(backend.clone())
        .profile(HarnessProfile {
            max_tool_result_tokens: Some(100),
            ..Default::default()
        })
        .tool(big_tool(
            "fetch",
            ToolOutput {
                parts: vec![Content::text(big.clone()), image.clone()],
                is_error: false,
            },
        ))
        .build()
        .unwrap();
    let (session, _) = run_in_session(&agent, "go").await;
    let r = tool_result_text(&session);
    assert!(r.text().contains("saved to /large_tool_results/call_0"));
    assert_eq!(r.output[1], image, "the image part is kept");

    // An image-only result is never offloaded.
    let agent = words_agent(one_call("shot", json!({})))
        .offloading(Offloading::new().tool_result_tokens(0))
        .tool(big_tool(
            "shot",
            ToolOutput {
                parts: vec![image.clone()],
                is_error: false,
            },
        ))
        .build()
        .unwrap();
    let (session, _) = run_in_session(&agent, "go").await;
    assert_eq!(tool_result_text(&session).output, vec![image.clone()]);

    // read_file pages instead of being offloaded.
    let session = AgentSession::new();
    StateBackend::insert_file(session.state(), "/big.txt", &big).unwrap();
    let agent = words_agent(one_call("read_file", json!({"path": "/big.txt"})))
        .offloading(Offloading::new().tool_result_tokens(10))
        .build()
        .unwrap();
    agent.run("go").session(&session).await.unwrap();
    let page = tool_result_text(&session).text();
    assert!(page.trim_start().starts_with("1\tx0 x1"), "{page}");

    // A write that fails keeps the original result.
    let agent = words_agent(one_call("fetch", json!({})))
        .offloading(
            Offloading::new()
                .tool_result_tokens(10)
                .results_dir("/../outside"),
        )
        .tool(big_tool("fetch", ToolOutput::text(big.clone())))
        .build()
        .unwrap();
    let (session, _) = run_in_session(&agent, "go").await;
    assert_eq!(tool_result_text(&session).text(), big);
}

// ---- overflow recovery, streaming, long runs (through the deep agent) ----

fn overflow() -> ChatError {
    ChatError::new(
        ChatErrorKind::ContextOverflow,
        "maximum context length exceeded",
    )
}

/// A model that calls `work` `steps` times (each result `result_words` words tagged with the
/// step), then answers; summarizer requests get a summary. `limit`: requests over this many
/// words fail with a context overflow.
fn worker(steps: usize, limit: Option<usize>) -> ScriptedClient {
    let n = Arc::new(Mutex::new(0usize));
    ScriptedClient::new(move |req| {
        if is_summarizer(req) {
            let mut n = n.lock().unwrap();
            *n += 1;
            return Ok(ChatResponse::text(format!(
                "## Session intent\nWork.\n\n## Summary\nSUMMARY-{n}\n\n## Artifacts\nNone.\n\n## Next steps\nGo on."
            )));
        }
        if let Some(limit) = limit {
            let size: usize = req.messages.iter().map(|m| Words.count_message(m)).sum();
            if size > limit {
                return Err(overflow());
            }
        }
        let done = req
            .messages
            .iter()
            .rev()
            .flat_map(|m| m.function_results())
            .next()
            .map(|r| {
                r.text()
                    .split_whitespace()
                    .next()
                    .and_then(|w| w.strip_prefix("step-"))
                    .and_then(|s| s.parse::<usize>().ok())
                    .unwrap_or(0)
            })
            .unwrap_or(0);
        Ok(if done < steps {
            ChatResponse::tool_calls([("work", json!({"step": done + 1}))])
        } else {
            ChatResponse::text("all done")
        })
    })
}

fn work_tool(result_words: usize) -> FnTool {
    FnTool::new(
        "work",
        "Does one step.",
        json!({"type": "object", "properties": {"step": {"type": "integer"}}}),
        move |ctx| async move {
            let step = ctx.arguments["step"].as_u64().unwrap_or(0);
            let body = words(result_words, &format!("s{step}w"));
            Ok(ToolOutput::text(format!("step-{step} {body}")))
        },
    )
}

/// A deep agent on `client` counting [`Words`], with a `work` tool of 100-word results.
fn work_agent(client: &ScriptedClient) -> DeepAgentBuilder {
    words_agent(client.clone()).tool(work_tool(100))
}

fn request_tokens(req: &RecordedRequest) -> usize {
    let tools = serde_json::to_string(&req.options.tools).unwrap();
    let instructions = req.options.instructions.clone().unwrap_or_default();
    Words.count_text(&tools)
        + Words.count_message(&Message::system(instructions))
        + Words.count_messages(&req.messages)
        + 3
}

#[tokio::test]
async fn context_overflow_summarizes_and_retries_once() {
    // The window is unknown (170k trigger, never reached); the provider overflows past 600
    // words of messages.
    let client = worker(6, Some(600));
    let agent = work_agent(&client).build().unwrap();
    let (session, response) = run_in_session(&agent, "do the work").await;
    assert_eq!(response.text(), "all done");
    let reqs = client.requests();
    let first_overflow = reqs
        .iter()
        .position(|r| !is_summarizer(r) && Words.count_messages(&r.messages) > 600)
        .unwrap();
    assert!(is_summarizer(&reqs[first_overflow + 1]));
    let retry = &reqs[first_overflow + 2];
    assert!(retry.messages[0].text().contains("SUMMARY-1"));
    assert!(Words.count_messages(&retry.messages) <= 600);
    // Keep 6 messages (no window): summary + the last 6 stored messages.
    assert_eq!(retry.messages.len(), 7);
    let state = CompressionState::of(&session).unwrap();
    assert!(state.summarizations >= 1);
}

#[tokio::test]
async fn a_run_without_a_session_recovers_too() {
    let client = worker(6, Some(600));
    let backend = Arc::new(StateBackend::new());
    let agent = work_agent(&client).backend(backend).build().unwrap();
    let response = agent.run("do the work").await.unwrap();
    assert_eq!(response.text(), "all done");
    let retry = client
        .requests()
        .into_iter()
        .find(|r| !is_summarizer(r) && r.messages[0].text().contains("SUMMARY-1"))
        .unwrap();
    assert!(
        retry.messages[0]
            .text()
            .contains("saved in `/conversation_history/run-")
    );
}

#[tokio::test]
async fn a_summarizer_that_overflows_gets_half_the_input() {
    // The summarizer overflows when it sees more than 4 messages.
    let summarized = Arc::new(Mutex::new(Vec::<usize>::new()));
    let seen = Arc::clone(&summarized);
    let main = worker(12, Some(1_000));
    let client = ScriptedClient::new(move |req| {
        if is_summarizer(req) {
            let n = req.messages[0].text().matches("\n### ").count();
            seen.lock().unwrap().push(n);
            if n > 4 {
                return Err(overflow());
            }
        }
        let (messages, options) = (req.messages.clone(), req.options.clone());
        let none = Kwargs::new();
        main.get_response(
            ChatRequest::new(&messages, &options)
                .with_function_invocation_kwargs(&none)
                .with_client_kwargs(&none),
        )
        .now_or_never()
        .unwrap()
    });
    let agent = work_agent(&client).build().unwrap();
    let (_, response) = run_in_session(&agent, "do the work").await;
    assert_eq!(response.text(), "all done");
    let sizes = summarized.lock().unwrap().clone();
    assert!(sizes.len() >= 2, "{sizes:?}");
    assert!(sizes[0] > 4 && sizes.iter().any(|&n| n <= 4), "{sizes:?}");
    // The halved request says what was left out and where it is.
    let halved = client
        .requests()
        .into_iter()
        .find(|r| is_summarizer(r) && r.messages[0].text().contains("were left out"))
        .unwrap();
    assert!(halved.messages[0].text().contains("/conversation_history/"));
}

#[tokio::test]
async fn summarization_updates_are_tagged_in_the_stream() {
    let client = worker(6, Some(600));
    let agent = work_agent(&client).build().unwrap();
    let session = AgentSession::new();
    let mut stream = agent.run("do the work").session(&session).stream();
    let mut summary_text = String::new();
    let mut agent_text = String::new();
    while let Some(u) = stream.next().await {
        if let Some(UpdateEvent::TextDelta { text }) = u.model_event() {
            match u.metadata.source.as_deref() {
                Some("summarization") => summary_text.push_str(text),
                None => agent_text.push_str(text),
                Some(other) => panic!("unexpected source {other}"),
            }
        }
    }
    assert!(summary_text.contains("SUMMARY-1"), "{summary_text}");
    assert!(!agent_text.contains("SUMMARY"), "{agent_text}");
    assert_eq!(agent_text, "all done");
}

#[tokio::test]
async fn a_long_run_stays_under_the_window_and_the_history_keeps_everything() {
    const STEPS: usize = 300;
    let window = 6_000;
    let client = worker(STEPS, None);
    let agent = words_agent(client.clone())
        .profile(HarnessProfile {
            max_input_tokens: Some(window),
            ..Default::default()
        })
        .loop_config(LoopConfig {
            max_iterations: STEPS + 10,
            ..Default::default()
        })
        .tool(work_tool(120))
        .build()
        .unwrap();
    let (session, response) = run_in_session(&agent, "do the work").await;
    assert_eq!(response.text(), "all done");
    let reqs = client.requests();
    let main: Vec<&RecordedRequest> = reqs.iter().filter(|r| !is_summarizer(r)).collect();
    assert_eq!(main.len(), STEPS + 1);
    for r in &main {
        let t = request_tokens(r);
        assert!(t < window, "a request of {t} tokens");
    }
    let state = CompressionState::of(&session).unwrap();
    assert!(state.summarizations > 5, "{state:?}");
    let peak = main.iter().map(|r| request_tokens(r)).max().unwrap();
    eprintln!(
        "{STEPS} steps, {} stored messages, {} summarizations, largest request {peak} tokens of {window}",
        session.message_count(),
        state.summarizations
    );
    // Every stored message before the boundary is in the history file; everything after it is
    // in the last request.
    let stored = session.messages();
    let h = history(&session);
    for (i, m) in stored[..state.cutoff].iter().enumerate() {
        assert!(h.contains(&format!("### {}. {}\n", i + 1, m.role.as_str())));
        for r in m.function_results() {
            assert!(h.contains(&r.text()), "result of message {i}");
        }
    }
    for step in 1..=STEPS {
        let tag = format!("step-{step} ");
        let in_history = h.contains(&tag);
        let in_last = main
            .last()
            .unwrap()
            .messages
            .iter()
            .any(|m| m.function_results().any(|r| r.text().starts_with(&tag)));
        assert!(in_history || in_last, "step {step} was lost");
    }
    // The stored conversation was never rewritten.
    assert_eq!(stored.len(), 1 + 2 * STEPS + 1);
}

#[tokio::test]
async fn keep_by_messages_and_custom_prompt_through_the_builder() {
    let client = worker(10, None);
    let agent = words_agent(client.clone())
        .summarization(
            Summarization::new()
                .trigger(cairn_deep::Trigger::Messages(12))
                .keep(Keep::Messages(3))
                .prompt("Summarize tersely.\n{messages}\nEnd."),
        )
        .tool(work_tool(5))
        .build()
        .unwrap();
    run_in_session(&agent, "do the work").await;
    let reqs = client.requests();
    let s = reqs.iter().find(|r| is_summarizer(r)).unwrap();
    let text = s.messages[0].text();
    assert!(text.starts_with("Summarize tersely.\n<messages>\n"));
    assert!(text.ends_with("</messages>\nEnd."));
    let after = &reqs[reqs.iter().position(is_summarizer).unwrap() + 1];
    // summary + at least 3 kept messages, starting at a call (never a lone result).
    assert!(after.messages.len() >= 4);
    assert!(after.messages[1].function_results().next().is_none());
}

#[tokio::test]
async fn a_separate_summarization_model() {
    let main = worker(10, None);
    let cheap = summarizer_client();
    let agent = words_agent(main.clone())
        .summarization(
            Summarization::new()
                .model(Arc::new(cheap.clone()) as Arc<dyn ChatClient>)
                .trigger(cairn_deep::Trigger::Messages(8))
                .keep(Keep::Messages(2)),
        )
        .tool(work_tool(5))
        .build()
        .unwrap();
    run_in_session(&agent, "do the work").await;
    assert!(!main.requests().iter().any(is_summarizer));
    assert!(!cheap.requests().is_empty());
    assert!(cheap.requests().iter().all(is_summarizer));
    let last = main.requests().last().unwrap().clone();
    assert!(last.messages[0].text().contains("SUMMARY-"));
}
