//! The run's `tracing` spans: `invoke_agent` › `chat` and `execute_tool`, with the fields of
//! OpenTelemetry's GenAI conventions. A small capturing subscriber records every span's name,
//! parent and fields.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cairn_core::testing::ScriptedClient;
use cairn_core::{Agent, ChatResponse, FnTool, ToolOutput, Usage};
use serde_json::json;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

#[derive(Debug, Clone)]
struct SpanRec {
    name: &'static str,
    parent: Option<u64>,
    fields: HashMap<String, String>,
}

#[derive(Default)]
struct State {
    spans: Vec<SpanRec>,
    /// Entered spans, innermost last (the tests run on one thread).
    stack: Vec<u64>,
}

#[derive(Clone, Default)]
struct Capture(Arc<Mutex<State>>);

struct Fields<'a>(&'a mut HashMap<String, String>);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().to_owned(), value.to_string());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}

impl Subscriber for Capture {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, attrs: &Attributes<'_>) -> Id {
        let mut st = self.0.lock().unwrap();
        let parent = match attrs.parent() {
            Some(p) => Some(p.into_u64()),
            None if attrs.is_contextual() => st.stack.last().copied(),
            None => None,
        };
        let mut fields = HashMap::new();
        attrs.record(&mut Fields(&mut fields));
        st.spans.push(SpanRec {
            name: attrs.metadata().name(),
            parent,
            fields,
        });
        Id::from_u64(st.spans.len() as u64)
    }
    fn record(&self, id: &Id, values: &Record<'_>) {
        let mut st = self.0.lock().unwrap();
        let i = id.into_u64() as usize - 1;
        values.record(&mut Fields(&mut st.spans[i].fields));
    }
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, _: &Event<'_>) {}
    fn enter(&self, id: &Id) {
        self.0.lock().unwrap().stack.push(id.into_u64());
    }
    fn exit(&self, id: &Id) {
        let mut st = self.0.lock().unwrap();
        if let Some(i) = st.stack.iter().rposition(|s| *s == id.into_u64()) {
            st.stack.remove(i);
        }
    }
}

fn usage(input: u64, output: u64) -> Option<Usage> {
    Some(Usage {
        input_tokens: input,
        output_tokens: output,
        ..Default::default()
    })
}

#[tokio::test(flavor = "current_thread")]
async fn runs_model_calls_and_tool_calls_have_genai_spans() {
    let capture = Capture::default();
    let _guard = tracing::subscriber::set_default(capture.clone());
    tracing::callsite::rebuild_interest_cache();

    let mut first =
        ChatResponse::tool_calls([("echo", json!({"text": "hi"})), ("nope", json!({}))]);
    first.usage = usage(10, 3);
    first.response_id = Some("resp-1".into());
    let mut second = ChatResponse::text("done");
    second.usage = usage(20, 1);
    let echo = FnTool::new(
        "echo",
        "Echo the text back.",
        json!({"type": "object", "properties": {"text": {"type": "string"}}}),
        |ctx| async move { Ok(ToolOutput::text(ctx.arguments["text"].to_string())) },
    );
    let agent = Agent::builder(ScriptedClient::from_responses([first, second]))
        .name("Greeter")
        .model("m-1")
        .tool(echo)
        .build();
    let r = agent.run("go").await.unwrap();
    assert_eq!(r.text(), "done");

    let spans = capture.0.lock().unwrap().spans.clone();
    let names: Vec<&str> = spans.iter().map(|s| s.name).collect();
    assert_eq!(
        names,
        [
            "invoke_agent",
            "chat",
            "execute_tool",
            "execute_tool",
            "chat"
        ]
    );
    let field = |i: usize, k: &str| spans[i].fields.get(k).map(String::as_str);

    // The run.
    assert_eq!(spans[0].parent, None);
    assert_eq!(field(0, "otel.name"), Some("invoke_agent Greeter"));
    assert_eq!(field(0, "gen_ai.operation.name"), Some("invoke_agent"));
    assert_eq!(field(0, "gen_ai.agent.name"), Some("Greeter"));
    assert_eq!(field(0, "gen_ai.request.model"), Some("m-1"));
    assert_eq!(field(0, "gen_ai.usage.input_tokens"), Some("30"));
    assert_eq!(field(0, "gen_ai.usage.output_tokens"), Some("4"));
    assert_eq!(field(0, "error.type"), None);

    // Model calls, children of the run.
    for i in [1, 4] {
        assert_eq!(spans[i].parent, Some(1), "chat span {i} is inside the run");
        assert_eq!(field(i, "otel.name"), Some("chat m-1"));
        assert_eq!(field(i, "gen_ai.operation.name"), Some("chat"));
        assert_eq!(field(i, "gen_ai.request.model"), Some("m-1"));
    }
    assert_eq!(field(1, "gen_ai.usage.input_tokens"), Some("10"));
    assert_eq!(field(1, "gen_ai.usage.output_tokens"), Some("3"));
    assert_eq!(field(1, "gen_ai.response.id"), Some("resp-1"));
    assert_eq!(field(4, "gen_ai.usage.input_tokens"), Some("20"));

    // Tool calls, children of the run (not of the model call that asked for them).
    for i in [2, 3] {
        assert_eq!(spans[i].parent, Some(1), "tool span {i} is inside the run");
        assert_eq!(field(i, "gen_ai.operation.name"), Some("execute_tool"));
        assert_eq!(field(i, "gen_ai.tool.type"), Some("function"));
    }
    assert_eq!(field(2, "otel.name"), Some("execute_tool echo"));
    assert_eq!(field(2, "gen_ai.tool.name"), Some("echo"));
    assert_eq!(field(2, "gen_ai.tool.call.id"), Some("call_0"));
    assert_eq!(
        field(2, "gen_ai.tool.description"),
        Some("Echo the text back.")
    );
    assert_eq!(field(2, "error.type"), None);
    assert_eq!(field(3, "gen_ai.tool.name"), Some("nope"));
    assert_eq!(field(3, "gen_ai.tool.call.id"), Some("call_1"));
    assert_eq!(field(3, "error.type"), Some("tool_error"));
}

#[tokio::test(flavor = "current_thread")]
async fn a_failed_run_records_the_error_type() {
    let capture = Capture::default();
    let _guard = tracing::subscriber::set_default(capture.clone());
    tracing::callsite::rebuild_interest_cache();
    let client = ScriptedClient::new(|_| {
        Err(cairn_core::ChatError::new(
            cairn_core::ChatErrorKind::Other,
            "boom",
        ))
    });
    let agent = Agent::builder(client).name("Failing").build();
    assert!(agent.run("go").await.is_err());
    let spans = capture.0.lock().unwrap().spans.clone();
    let names: Vec<&str> = spans.iter().map(|s| s.name).collect();
    assert_eq!(names, ["invoke_agent", "chat"]);
    assert_eq!(
        spans[1].fields.get("error.type").map(String::as_str),
        Some("chat_error")
    );
    assert_eq!(
        spans[0].fields.get("error.type").map(String::as_str),
        Some("chat_error")
    );
}
