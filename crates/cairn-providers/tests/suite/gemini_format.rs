//! Gemini-only wire-format tests (the request shape, finish reasons); the scenarios every
//! provider shares are in `main.rs`.

use cairn_core::{ChatOptions, ChatResponse, FinishReason, FunctionCall, ToolChoice, ToolSpec};
use cairn_test_support::client::{ask, ask_with_secret_kwargs, every_content, result};
use cairn_test_support::gemini as gemini_wire;
use cairn_test_support::{Reply, TestServer};
use serde_json::json;

use super::{Gemini, ProviderHarness, WireHarness};

#[tokio::test]
async fn request_shape() {
    let (plain, _) = <Gemini as WireHarness>::answer();
    let server = TestServer::scripted(vec![Reply::ok(plain)]).await;
    let c = Gemini::client(&server);
    let msgs = every_content(
        vec![
            FunctionCall::new("call_0", "echo", &json!({"text": "x"})),
            FunctionCall::new("call_1", "lookup", &json!({"q": 1})),
        ],
        vec![
            result("call_1", "not found", true),
            result("call_0", "echo:x", false),
        ],
    );
    let opts = ChatOptions {
        instructions: Some("Be brief.".into()),
        temperature: Some(0.5),
        top_p: Some(0.9),
        max_tokens: Some(99),
        stop: vec!["END".into()],
        seed: Some(7),
        tools: vec![
            ToolSpec::new(
                "echo",
                "Echo.",
                json!({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
                       "additionalProperties": false,
                       "properties": {"text": {"type": "string", "default": "x"}},
                       "required": ["text"]}),
            ),
            ToolSpec::new("lookup", "", json!({"type": "object", "properties": {}})),
        ],
        tool_choice: Some(ToolChoice::Tool("echo".into())),
        ..ChatOptions::default()
    };
    ask_with_secret_kwargs(&c, &msgs, &opts).await.unwrap();
    let r = &server.requests()[0];
    assert_eq!(r.path, "/v1beta/models/gemini-test:generateContent");
    assert_eq!(r.header("x-goog-api-key"), Some(Gemini::KEY));
    assert_eq!(r.header("authorization"), None);
    assert!(!r.path.contains(Gemini::KEY));
    assert!(!r.text().contains("SECRET-USER") && !r.text().contains("user_id"));
    let b = r.json();
    assert_eq!(
        b["systemInstruction"],
        json!({"parts": [{"text": "Be brief.\n\nSystem note."}]})
    );
    assert_eq!(
        b["generationConfig"],
        json!({"temperature": 0.5, "topP": 0.8999999761581421, "maxOutputTokens": 99,
               "stopSequences": ["END"], "seed": 7})
    );
    assert_eq!(
        b["tools"],
        json!([{"functionDeclarations": [
            {"name": "echo", "description": "Echo.",
             "parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}},
            {"name": "lookup"}
        ]}])
    );
    assert_eq!(
        b["toolConfig"],
        json!({"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["echo"]}})
    );
    let c = b["contents"].as_array().unwrap();
    assert_eq!(c.len(), 3, "{c:?}");
    assert_eq!(c[0]["role"], "user");
    assert_eq!(
        c[0]["parts"],
        json!([{"text": "first"}, {"inlineData": {"mimeType": "image/png", "data": "iVBOR"}}])
    );
    assert_eq!(c[1]["role"], "model");
    assert_eq!(
        c[1]["parts"][1],
        json!({"functionCall": {"name": "echo", "args": {"text": "x"}}})
    );
    assert_eq!(c[2]["role"], "user");
    assert_eq!(
        c[2]["parts"],
        json!([
            {"functionResponse": {"name": "lookup", "response": {"error": "not found"}}},
            {"functionResponse": {"name": "echo", "response": {"result": "echo:x"}}}
        ])
    );
}

#[tokio::test]
async fn finish_reasons_and_blocked_prompts() {
    let server = TestServer::scripted(vec![
        Reply::ok(
            gemini_wire::chunk(json!([{"text": "cut"}]), Some("MAX_TOKENS"), None).to_string(),
        ),
        Reply::ok(gemini_wire::chunk(json!([]), Some("SAFETY"), None).to_string()),
        Reply::ok(json!({"promptFeedback": {"blockReason": "SAFETY"}}).to_string()),
        Reply::ok(
            gemini_wire::chunk(
                json!([{"text": "x"}]),
                Some("MALFORMED_FUNCTION_CALL"),
                None,
            )
            .to_string(),
        ),
    ])
    .await;
    let c = Gemini::client(&server);
    let fr = |r: ChatResponse| r.finish_reason;
    assert_eq!(fr(ask(&c, "go").await.unwrap()), Some(FinishReason::Length));
    assert_eq!(
        fr(ask(&c, "go").await.unwrap()),
        Some(FinishReason::ContentFilter)
    );
    assert_eq!(
        fr(ask(&c, "go").await.unwrap()),
        Some(FinishReason::ContentFilter)
    );
    assert_eq!(
        fr(ask(&c, "go").await.unwrap()),
        Some(FinishReason::Other("MALFORMED_FUNCTION_CALL".into()))
    );
}
