//! HTTP/1.1 framing as servers really send it, through both transports: split heads and
//! bodies, chunk extensions and trailers, close-delimited bodies, connections the server closes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use cairn_core::{ChatClient, ChatErrorKind, ChatOptions, ChatRequest, Message};
use cairn_providers::{Api, OpenAIClient};
use cairn_test_support::openai::chat_json;
use cairn_test_support::{Reply, TestServer, Turn, split};

fn client(server: &TestServer, builtin: bool) -> OpenAIClient {
    OpenAIClient::builder()
        .base_url(server.url())
        .model("m")
        .api(Api::ChatCompletions)
        .hyper_http1(builtin)
        .timeout(Duration::from_secs(5))
        .retry_policy(cairn_providers::RetryPolicy {
            max_retries: 1,
            initial_backoff: Duration::from_millis(1),
            ..Default::default()
        })
        .build()
        .unwrap()
}

async fn ask(c: &OpenAIClient) -> Result<String, cairn_core::ChatError> {
    c.get_response(ChatRequest::new(
        &[Message::user("go")],
        &ChatOptions::default(),
    ))
    .await
    .map(|r| r.text_content())
}

fn raw(head: &str, body: &[u8], sizes: &[usize], close: bool) -> Reply {
    let mut bytes = head.as_bytes().to_vec();
    bytes.extend_from_slice(body);
    Reply::Raw {
        pieces: split(&bytes, sizes),
        close,
    }
}

fn chunked(body: &str, sizes: &[usize]) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, piece) in split(body.as_bytes(), sizes).into_iter().enumerate() {
        if i % 2 == 0 {
            out.extend_from_slice(format!("{:X};ext=1\r\n", piece.len()).as_bytes());
        } else {
            out.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
        }
        out.extend_from_slice(&piece);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"0\r\nX-Trailer: yes\r\n\r\n");
    out
}

#[tokio::test]
async fn framing_variants() {
    for builtin in [true, false] {
        let body = chat_json(&Turn::text("framed ✓"));
        let server = TestServer::scripted(vec![
            // Content-Length, head and body split at awkward places.
            raw(
                &format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nContent-Length: {}\r\n\r\n", body.len()),
                body.as_bytes(),
                &[1, 5, 17, 3],
                false,
            ),
            // Chunked with extensions and trailers.
            raw(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n",
                &chunked(&body, &[7, 100, 1]),
                &[11, 2, 40],
                false,
            ),
            // A 100 Continue before the answer.
            raw(
                &format!("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len()),
                body.as_bytes(),
                &[1000],
                false,
            ),
            // No length: the body ends when the server closes the connection.
            raw("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n", body.as_bytes(), &[9, 30], true),
            // HTTP/1.0 with a length, then close.
            raw(
                &format!("HTTP/1.0 200 OK\r\nContent-Length: {}\r\n\r\n", body.len()),
                body.as_bytes(),
                &[64],
                true,
            ),
        ])
        .await;
        let c = client(&server, builtin);
        for i in 0..5 {
            assert_eq!(
                ask(&c).await.unwrap(),
                "framed ✓",
                "builtin={builtin} reply {i}"
            );
        }
        assert_eq!(server.requests().len(), 5, "no request was sent twice");
    }
}

#[tokio::test]
async fn connections_closed_by_the_server_are_replaced() {
    for builtin in [true, false] {
        let body = chat_json(&Turn::text("ok"));
        // The server answers with a keep-alive response, then closes the connection anyway
        // (as servers do on their idle timeout); the next request must not fail.
        let server = TestServer::start(move |_, _| {
            raw(
                &format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len()),
                body.as_bytes(),
                &[10_000],
                true,
            )
        })
        .await;
        let c = client(&server, builtin);
        for _ in 0..4 {
            assert_eq!(ask(&c).await.unwrap(), "ok");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(server.requests().len(), 4, "builtin={builtin}");
        assert_eq!(server.connections(), 4);
    }
}

#[tokio::test]
async fn truncated_bodies_are_interrupted() {
    for builtin in [true, false] {
        let body = chat_json(&Turn::text("ok"));
        let server = TestServer::scripted(vec![
            raw(
                &format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n",
                    body.len() + 50
                ),
                body.as_bytes(),
                &[10_000],
                true,
            ),
            raw(
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
                &chunked(&body, &[20])[..30],
                &[10_000],
                true,
            ),
            raw(
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nZZ\r\n",
                b"",
                &[100],
                true,
            ),
        ])
        .await;
        let c = client(&server, builtin);
        let e = ask(&c).await.unwrap_err();
        assert_eq!(
            e.kind(),
            ChatErrorKind::StreamInterrupted,
            "builtin={builtin}: {e}"
        );
        let e = ask(&c).await.unwrap_err();
        assert_eq!(
            e.kind(),
            ChatErrorKind::StreamInterrupted,
            "builtin={builtin}: {e}"
        );
        let e = ask(&c).await.unwrap_err();
        assert!(
            matches!(
                e.kind(),
                ChatErrorKind::Decode | ChatErrorKind::StreamInterrupted
            ),
            "builtin={builtin}: {e}"
        );
        assert_eq!(server.requests().len(), 3);
    }
}
