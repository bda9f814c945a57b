//! Issue #16 item 10 (provider half): errors and `Debug` output never show the API key, a
//! `Bearer` token or the `user:password@` of a base URL, even when the server echoes them back.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use cairn_core::{ChatClient, ChatError, ChatErrorKind, ChatOptions, ChatRequest, Kwargs, Message};
use cairn_providers::{AnthropicClient, GeminiClient, OpenAIClient, RetryPolicy};
use cairn_test_support::{Reply, TestServer};
use futures::StreamExt;

const KEY: &str = "sk-live-ECHOED-9f8e7d6c5b4a";
const PASSWORD: &str = "hunter2-PASSWORD";

fn no_retry() -> RetryPolicy {
    RetryPolicy {
        max_retries: 0,
        ..Default::default()
    }
}

async fn plain(c: &dyn ChatClient) -> ChatError {
    c.get_response(ChatRequest::new(
        &[Message::user("go")],
        &ChatOptions::default(),
    ))
    .await
    .unwrap_err()
}

async fn streamed(c: &dyn ChatClient) -> ChatError {
    let messages = [Message::user("go")];
    let options = ChatOptions::default();
    let (fk, ck) = (Kwargs::new(), Kwargs::new());
    let mut s = c.get_streaming_response(
        ChatRequest::new(&messages, &options)
            .with_function_invocation_kwargs(&fk)
            .with_client_kwargs(&ck),
    );
    while let Some(u) = s.next().await {
        if let Err(e) = u {
            return e;
        }
    }
    panic!("the stream did not fail");
}

/// Every way an error can be shown, with its source chain.
fn shown(e: &ChatError) -> String {
    let mut out = format!("{e}\n{e:?}\n{}", e.message());
    let mut src = std::error::Error::source(e);
    while let Some(s) = src {
        out.push_str(&format!("\n{s}\n{s:?}"));
        src = s.source();
    }
    out
}

fn assert_clean(text: &str) {
    for secret in [KEY, PASSWORD, "abc.def.ghi-token"] {
        assert!(!text.contains(secret), "{secret} leaked in: {text}");
    }
}

/// A server answering every request with `status` and a body echoing the key and a token.
async fn echoing_server(status: u16) -> TestServer {
    let body = format!(
        r#"{{"error":{{"message":"Incorrect API key provided: {KEY}. You sent Authorization: Bearer abc.def.ghi-token","type":"invalid_request_error"}}}}"#
    );
    TestServer::start(move |_, _| Reply::status(status, body.clone())).await
}

#[tokio::test]
async fn an_echoed_key_never_reaches_errors() {
    for status in [401, 400, 500] {
        let server = echoing_server(status).await;
        for hyper in [true, false] {
            let c = OpenAIClient::builder()
                .base_url(server.url())
                .api_key(KEY)
                .model("m")
                .hyper_http1(hyper)
                .retry_policy(no_retry())
                .build()
                .unwrap();
            let e = plain(&c).await;
            assert_eq!(e.status(), Some(status));
            let text = shown(&e);
            assert_clean(&text);
            assert!(text.contains("Incorrect API key provided: ***"), "{text}");
            assert!(text.contains("Bearer ***"), "{text}");
            assert_clean(&shown(&streamed(&c).await));
            assert_clean(&format!("{c:?}"));
        }
        let a = AnthropicClient::builder()
            .base_url(format!("http://127.0.0.1:{}", server.port))
            .api_key(KEY)
            .model("claude")
            .retry_policy(no_retry())
            .build()
            .unwrap();
        assert_clean(&shown(&plain(&a).await));
        assert_clean(&shown(&streamed(&a).await));
        assert_clean(&format!("{a:?}"));
        let g = GeminiClient::builder()
            .base_url(format!("http://127.0.0.1:{}", server.port))
            .api_key(KEY)
            .model("gemini")
            .retry_policy(no_retry())
            .build()
            .unwrap();
        assert_clean(&shown(&plain(&g).await));
        assert_clean(&shown(&streamed(&g).await));
        assert_clean(&format!("{g:?}"));
    }
}

#[tokio::test]
async fn an_echoed_key_in_a_stream_or_a_bad_body_is_redacted() {
    // In-stream error events and decode errors quote what the server sent.
    let event = format!(
        "data: {{\"error\":{{\"message\":\"bad key {KEY}\",\"type\":\"server_error\"}}}}\n\n"
    );
    let server = TestServer::scripted(vec![
        Reply::sse(&[event], &[7]),
        Reply::ok(format!("not json, but the key: {KEY}")),
    ])
    .await;
    let c = OpenAIClient::builder()
        .base_url(server.url())
        .api_key(KEY)
        .model("m")
        .retry_policy(no_retry())
        .build()
        .unwrap();
    let e = streamed(&c).await;
    assert!(e.message().contains("bad key ***"), "{e}");
    assert_clean(&shown(&e));
    let e = plain(&c).await;
    assert_eq!(e.kind(), ChatErrorKind::Decode, "{e}");
    assert_clean(&shown(&e));
}

#[tokio::test]
async fn url_credentials_never_reach_errors_or_debug() {
    // Nothing listens on this port.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let url = format!("http://alice:{PASSWORD}@127.0.0.1:{port}/v1");
    for hyper in [true, false] {
        let b = OpenAIClient::builder()
            .base_url(url.clone())
            .api_key(KEY)
            .header("X-Extra-Token", "abc.def.ghi-token")
            .model("m")
            .hyper_http1(hyper)
            .connect_timeout(Duration::from_secs(2))
            .retry_policy(no_retry());
        assert_clean(&format!("{b:?}"));
        let c = b.build().unwrap();
        assert_clean(&format!("{c:?}"));
        assert!(format!("{c:?}").contains("http://***@127.0.0.1"), "{c:?}");
        let e = plain(&c).await;
        assert_eq!(e.kind(), ChatErrorKind::Connect, "{e}");
        assert_clean(&shown(&e));
        assert_clean(&shown(&streamed(&c).await));
    }
    // Configuration errors quoting the URL.
    let e = OpenAIClient::builder()
        .base_url(format!("ftp://alice:{PASSWORD}@h/v1"))
        .build()
        .unwrap_err();
    assert_eq!(e.kind(), ChatErrorKind::Config);
    assert_clean(&shown(&e));
    let e = AnthropicClient::builder()
        .base_url(format!("http://alice:{PASSWORD}@/x"))
        .build()
        .unwrap_err();
    assert_clean(&shown(&e));
}

#[test]
fn redact_url_is_public() {
    assert_eq!(
        cairn_providers::redact_url(&format!("http://alice:{PASSWORD}@h:1/v1")),
        "http://***@h:1/v1"
    );
}
