//! What cairn exports for a deep-agent run with a subagent, decoded by an in-process
//! OTLP/HTTP receiver (protobuf): span names, parent/child links, kinds and the GenAI
//! conventions' required attributes; no content without the opt-in.

mod receiver;

use cairn_core::testing::ScriptedClient;
use cairn_core::{ChatOptions, ChatResponse, FinishReason, Usage};
use cairn_deep::DeepAgent;
use cairn_otel::OtelConfig;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use receiver::{attr, spans};
use serde_json::json;

fn answer(text: &str, id: &str) -> ChatResponse {
    let mut r = ChatResponse::text(text);
    r.usage = Some(Usage {
        input_tokens: 100,
        output_tokens: 7,
        ..Default::default()
    });
    r.response_id = Some(id.into());
    r.model = Some("m-2026".into());
    r.finish_reason = Some(FinishReason::Stop);
    r
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_with_a_subagent_exports_nested_genai_spans() {
    let server = receiver::start().await;
    let guard = cairn_otel::init(&OtelConfig::new(format!("{}/v1/traces", server.root())))
        .expect("exporter");
    let client = ScriptedClient::from_responses([
        ChatResponse::tool_calls([(
            "task",
            json!({"description": "count the files", "subagent_type": "general-purpose"}),
        )]),
        answer("there are 3 files", "resp-sub"),
        answer("Done: 3 files.", "resp-top"),
    ]);
    let agent = DeepAgent::builder()
        .name("orchestrator")
        .client(client)
        .options(ChatOptions::with_model("m-2026"))
        .build()
        .unwrap();
    let r = agent.run("how many files?").await.unwrap();
    assert_eq!(r.text(), "Done: 3 files.");
    guard.shutdown();

    let spans = spans(&server);
    let named = |n: &str| -> Vec<_> { spans.iter().filter(|s| s.name == n).collect() };
    let top = named("invoke_agent orchestrator");
    assert_eq!(
        top.len(),
        1,
        "{:?}",
        spans.iter().map(|s| &s.name).collect::<Vec<_>>()
    );
    let top = top[0];
    let task = named("execute_tool task");
    assert_eq!(task.len(), 1);
    let task = task[0];
    let sub = named("invoke_agent general-purpose");
    assert_eq!(sub.len(), 1);
    let sub = sub[0];
    let chats = named("chat m-2026");
    assert_eq!(chats.len(), 3);

    // One trace; the subagent's run is inside the task call, which is inside the top run.
    assert!(spans.iter().all(|s| s.trace_id == top.trace_id));
    assert!(top.parent_span_id.is_empty());
    assert_eq!(task.parent_span_id, top.span_id);
    assert_eq!(sub.parent_span_id, task.span_id);
    let chats_under = |p: &[u8]| chats.iter().filter(|c| c.parent_span_id == p).count();
    assert_eq!(chats_under(&top.span_id), 2);
    assert_eq!(chats_under(&sub.span_id), 1);

    // Kinds and required attributes.
    assert_eq!(top.kind, SpanKind::Internal as i32);
    assert_eq!(task.kind, SpanKind::Internal as i32);
    for c in &chats {
        assert_eq!(c.kind, SpanKind::Client as i32);
        assert_eq!(attr(c, "gen_ai.operation.name").as_deref(), Some("chat"));
        assert_eq!(attr(c, "gen_ai.provider.name").as_deref(), Some("scripted"));
        assert_eq!(attr(c, "gen_ai.request.model").as_deref(), Some("m-2026"));
    }
    let sub_chat = chats
        .iter()
        .find(|c| c.parent_span_id == sub.span_id)
        .unwrap();
    assert_eq!(
        attr(sub_chat, "gen_ai.response.id").as_deref(),
        Some("resp-sub")
    );
    assert_eq!(
        attr(sub_chat, "gen_ai.response.model").as_deref(),
        Some("m-2026")
    );
    assert_eq!(
        attr(sub_chat, "gen_ai.usage.input_tokens").as_deref(),
        Some("100")
    );
    assert_eq!(
        attr(sub_chat, "gen_ai.usage.output_tokens").as_deref(),
        Some("7")
    );
    assert_eq!(
        attr(sub_chat, "gen_ai.response.finish_reasons").as_deref(),
        Some(r#"["stop"]"#)
    );
    assert_eq!(
        attr(sub_chat, "gen_ai.agent.name").as_deref(),
        Some("general-purpose")
    );
    assert_eq!(
        attr(top, "gen_ai.operation.name").as_deref(),
        Some("invoke_agent")
    );
    assert_eq!(
        attr(top, "gen_ai.agent.name").as_deref(),
        Some("orchestrator")
    );
    assert_eq!(
        attr(top, "gen_ai.provider.name").as_deref(),
        Some("scripted")
    );
    assert_eq!(
        attr(top, "gen_ai.usage.input_tokens").as_deref(),
        Some("100")
    );
    assert_eq!(
        attr(sub, "gen_ai.agent.name").as_deref(),
        Some("general-purpose")
    );
    assert_eq!(
        attr(task, "gen_ai.operation.name").as_deref(),
        Some("execute_tool")
    );
    assert_eq!(attr(task, "gen_ai.tool.name").as_deref(), Some("task"));
    assert_eq!(attr(task, "gen_ai.tool.call.id").as_deref(), Some("call_0"));
    assert_eq!(attr(task, "gen_ai.tool.type").as_deref(), Some("function"));
    // No content without the opt-in.
    for s in &spans {
        for k in [
            "gen_ai.input.messages",
            "gen_ai.output.messages",
            "gen_ai.system_instructions",
            "gen_ai.tool.call.arguments",
            "gen_ai.tool.call.result",
        ] {
            assert!(attr(s, k).is_none(), "{} has {k}", s.name);
        }
    }
    let all = format!("{spans:?}");
    assert!(!all.contains("count the files") && !all.contains("how many files"));
}
