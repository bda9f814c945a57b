//! With content capture on and the JSON wire format, the exported spans carry the messages,
//! but never a function-invocation kwarg nor the provider's API key.

mod receiver;

use cairn_core::{Agent, FnTool, Kwargs, ToolOutput};
use cairn_otel::{OtelConfig, OtlpProtocol};
use cairn_providers::OpenAIClient;
use cairn_test_support::Turn;
use cairn_test_support::openai::chat_json;
use cairn_test_support::{Reply, TestServer};
use receiver::{attr, spans};
use serde_json::json;

const API_KEY: &str = "sk-cairn-test-key-5f1e9a";
const KWARG: &str = "kw-user-token-77c2d0";

#[tokio::test(flavor = "multi_thread")]
async fn spans_hold_no_kwarg_and_no_api_key_even_with_content() {
    let receiver = receiver::start().await;
    let mut config = OtelConfig::new(format!("{}/v1/traces", receiver.root()));
    config.protocol = OtlpProtocol::HttpJson;
    config.capture_content = true;
    let guard = cairn_otel::init(&config).expect("exporter");

    let model = TestServer::scripted(vec![
        Reply::ok(chat_json(&Turn::call(
            "c1",
            "lookup",
            json!({"query": "weather"}),
        ))),
        Reply::ok(chat_json(&Turn::text("It is sunny."))),
    ])
    .await;
    let client = OpenAIClient::builder()
        .base_url(model.url())
        .api_key(API_KEY)
        .model("gpt-test")
        .build()
        .unwrap();
    let lookup = FnTool::new(
        "lookup",
        "Looks something up for the user.",
        json!({"type": "object", "properties": {"query": {"type": "string"}}}),
        |ctx| async move {
            // The tool uses the kwarg, and does not echo it.
            let ok = ctx.kwargs.get_str("user_token") == Some(KWARG);
            Ok(ToolOutput::text(if ok {
                "sunny, authorized"
            } else {
                "unauthorized"
            }))
        },
    );
    let agent = Agent::builder(client)
        .name("weather")
        .instructions("Answer briefly.")
        .tool(lookup)
        .build();
    let r = agent
        .run("What is the weather?")
        .function_invocation_kwargs(Kwargs::from([("user_token", KWARG)]))
        .await
        .unwrap();
    assert_eq!(r.text(), "It is sunny.");
    // The key did go to the model server, and the kwarg did reach the tool.
    assert!(
        model.requests()[0]
            .header("authorization")
            .is_some_and(|h| h.contains(API_KEY))
    );
    guard.shutdown();

    let exported: String = receiver.requests().iter().map(|r| r.text()).collect();
    assert!(!exported.is_empty());
    let spans = spans(&receiver);
    // Content is there (the opt-in works) ...
    let chat = spans.iter().find(|s| s.name == "chat gpt-test").unwrap();
    let input = attr(chat, "gen_ai.input.messages").unwrap();
    assert!(input.contains("What is the weather?"), "{input}");
    assert!(
        attr(chat, "gen_ai.system_instructions")
            .unwrap()
            .contains("Answer briefly.")
    );
    assert_eq!(
        attr(chat, "gen_ai.provider.name").as_deref(),
        Some("openai")
    );
    let tool = spans
        .iter()
        .find(|s| s.name == "execute_tool lookup")
        .unwrap();
    assert_eq!(
        attr(tool, "gen_ai.tool.call.arguments").as_deref(),
        Some(r#"{"query":"weather"}"#)
    );
    assert_eq!(
        attr(tool, "gen_ai.tool.call.result").as_deref(),
        Some("sunny, authorized")
    );
    // ... but neither the kwarg nor the key, anywhere in what was exported.
    assert!(!exported.contains(KWARG), "a kwarg was exported");
    assert!(!exported.contains(API_KEY), "the API key was exported");
    assert!(!format!("{spans:?}").contains(KWARG));
}
