//! Fault injection (issue #16 items 11–14): a raw TCP server on 127.0.0.1 misbehaves on purpose
//! and the clients must fail clearly, quickly and without exhausting memory, or finish promptly.
//!
//! (a) accepts and never answers → first-byte timeout, no retries waiting again;
//! (b) `Content-Length: 1000000000000` with a trickle of body → a clear error, no abort;
//! (c) an endless SSE line → a capped error, quickly;
//! (d) `data: [DONE]` (or `message_stop`, or a whole `Content-Length` body) then the connection
//!     kept open → the call completes promptly;
//! (e) a reply with duplicate tool-call ids through an `Agent` → both calls run and are
//!     answered under distinct ids.
//!
//! Each runs over both transports (the lean hyper one and reqwest). Waits are bounded; the
//! time assertions only check "well before the timeouts that would apply otherwise".
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use cairn_core::{Agent, ChatErrorKind};
use cairn_providers::{OpenAIClient, OpenAIClientBuilder, RetryPolicy};
use serde_json::Value;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use cairn_test_support::client::{ask, ask_streamed};
use cairn_test_support::raw::{RawServer, SSE_HEAD, chunk, hold, read_request};

fn openai(url: String, hyper: bool) -> OpenAIClientBuilder {
    OpenAIClient::builder()
        .base_url(url)
        .model("m")
        .hyper_http1(hyper)
        .retry_policy(RetryPolicy {
            initial_backoff: Duration::from_millis(1),
            max_backoff: Duration::from_millis(5),
            ..Default::default()
        })
}

/// Runs `body(hyper)` for both transports.
async fn both<F, Fut>(body: F)
where
    F: Fn(bool) -> Fut,
    Fut: Future<Output = ()>,
{
    body(true).await;
    body(false).await;
}

// ---------------------------------------------------------------------------------------------
// (a) a hung server

#[tokio::test]
async fn a_hung_server_times_out_at_the_first_byte_without_retrying_the_wait() {
    both(|hyper| async move {
        let server = RawServer::start(|sock, _| hold(sock)).await;
        let c = openai(server.url(), hyper)
            .first_byte_timeout(Duration::from_secs(1))
            .build()
            .unwrap();
        let started = Instant::now();
        let e = ask(&c, "go").await.unwrap_err();
        let took = started.elapsed();
        assert_eq!(e.kind(), ChatErrorKind::Timeout, "{e}");
        assert!(e.message().contains("first-byte timeout"), "{e}");
        assert!(took >= Duration::from_millis(900), "{took:?}");
        // The default policy (2 retries) does not wait the timeout again.
        assert!(took < Duration::from_secs(5), "{took:?}");
        assert_eq!(server.connections(), 1, "retried a first-byte timeout");

        // Streaming: the same.
        let c = openai(server.url(), hyper)
            .first_byte_timeout(Duration::from_millis(300))
            .build()
            .unwrap();
        let e = ask_streamed(&c).await.unwrap_err();
        assert_eq!(e.kind(), ChatErrorKind::Timeout, "{e}");
        assert_eq!(server.connections(), 2, "retried a first-byte timeout");

        // Retrying it is an explicit choice, and bounded.
        let c = openai(server.url(), hyper)
            .first_byte_timeout(Duration::from_millis(300))
            .retry_policy(RetryPolicy {
                max_retries: 2,
                initial_backoff: Duration::from_millis(1),
                retry_first_byte_timeouts: true,
                ..Default::default()
            })
            .build()
            .unwrap();
        let before = server.connections();
        let e = ask(&c, "go").await.unwrap_err();
        assert_eq!(e.kind(), ChatErrorKind::Timeout, "{e}");
        assert_eq!(server.connections() - before, 3);
    })
    .await;
}

#[tokio::test]
async fn a_silent_stream_hits_the_idle_timeout() {
    both(|hyper| async move {
        // Headers and one event, then silence with the connection open.
        let server = RawServer::start(|mut sock, _| async move {
            read_request(&mut sock).await;
            let _ = sock.write_all(SSE_HEAD).await;
            let ev = b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\n";
            let _ = sock.write_all(&chunk(ev)).await;
            hold(sock).await;
        })
        .await;
        let c = openai(server.url(), hyper)
            .idle_timeout(Duration::from_millis(500))
            .build()
            .unwrap();
        let started = Instant::now();
        let e = ask_streamed(&c).await.unwrap_err();
        assert_eq!(e.kind(), ChatErrorKind::Timeout, "{e}");
        assert!(e.message().contains("idle timeout"), "{e}");
        assert!(started.elapsed() < Duration::from_secs(5));
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// (b) a huge Content-Length

/// Answers with `status` and `Content-Length: 10^12`, then trickles `x` until the client goes.
async fn huge_body(mut sock: TcpStream, status: u16) {
    read_request(&mut sock).await;
    let head = format!(
        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: 1000000000000\r\n\r\n{{\"error\": \"x"
    );
    if sock.write_all(head.as_bytes()).await.is_err() {
        return;
    }
    loop {
        if sock.write_all(&[b'x'; 64]).await.is_err() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_huge_content_length_is_a_clear_error_not_an_abort() {
    both(|hyper| async move {
        // A success answer announcing 10^12 bytes: refused before reading.
        let server = RawServer::start(|sock, _| huge_body(sock, 200)).await;
        let c = openai(server.url(), hyper).build().unwrap();
        let started = Instant::now();
        let e = ask(&c, "go").await.unwrap_err();
        assert_eq!(e.kind(), ChatErrorKind::Decode, "{e}");
        assert!(e.message().contains("exceeds the limit of 32 MiB"), "{e}");
        assert!(e.message().contains("max_body_bytes"), "{e}");
        assert!(started.elapsed() < Duration::from_secs(5));

        // An error answer announcing 10^12 bytes: the message comes from a bounded prefix,
        // read for at most the idle timeout.
        let server = RawServer::start(|sock, _| huge_body(sock, 500)).await;
        let c = openai(server.url(), hyper)
            .idle_timeout(Duration::from_millis(500))
            .max_retries(0)
            .build()
            .unwrap();
        let started = Instant::now();
        let e = ask(&c, "go").await.unwrap_err();
        assert_eq!(e.status(), Some(500), "{e}");
        assert!(e.message().contains("xxxx"), "{e}");
        assert!(e.message().len() < 70_000, "{}", e.message().len());
        assert!(started.elapsed() < Duration::from_secs(5));
        // The same through a stream's opening.
        let e = ask_streamed(&c).await.unwrap_err();
        assert_eq!(e.status(), Some(500), "{e}");
    })
    .await;
}

#[tokio::test]
async fn a_body_without_length_is_capped_as_it_grows() {
    both(|hyper| async move {
        // Chunked, endless: fails once past the (here lowered) cap.
        let server = RawServer::start(|mut sock, _| async move {
            read_request(&mut sock).await;
            let _ = sock
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
                .await;
            let piece = chunk(&[b' '; 16 << 10]);
            while sock.write_all(&piece).await.is_ok() {}
        })
        .await;
        let c = openai(server.url(), hyper)
            .max_body_bytes(1 << 20)
            .build()
            .unwrap();
        let e = ask(&c, "go").await.unwrap_err();
        assert_eq!(e.kind(), ChatErrorKind::Decode, "{e}");
        assert!(e.message().contains("exceeds the limit of 1 MiB"), "{e}");
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// (c) an endless SSE line

#[tokio::test]
async fn an_endless_sse_line_is_capped_quickly() {
    both(|hyper| async move {
        let server = RawServer::start(|mut sock, _| async move {
            read_request(&mut sock).await;
            let _ = sock.write_all(SSE_HEAD).await;
            let _ = sock.write_all(&chunk(b"data: ")).await;
            let piece = chunk(&[b'x'; 64 << 10]);
            while sock.write_all(&piece).await.is_ok() {}
        })
        .await;
        // The default cap (8 MiB).
        let c = openai(server.url(), hyper).build().unwrap();
        let started = Instant::now();
        let e = ask_streamed(&c).await.unwrap_err();
        assert_eq!(e.kind(), ChatErrorKind::Decode, "{e}");
        assert!(e.message().contains("exceeds the limit of 8 MiB"), "{e}");
        assert!(e.message().contains("max_sse_event_bytes"), "{e}");
        assert!(started.elapsed() < Duration::from_secs(20));
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// (d) the end of the answer, then a connection kept open: the same scenario for every provider
// is `end_then_an_open_connection_completes_promptly` in `suite/main.rs`; here, a whole body.

#[tokio::test]
async fn a_body_with_content_length_does_not_wait_for_the_close() {
    both(|hyper| async move {
        let server = RawServer::start(|mut sock, _| async move {
            read_request(&mut sock).await;
            let body =
                cairn_test_support::openai::chat_json(&cairn_test_support::Turn::text("whole"));
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                body.len()
            );
            let _ = sock.write_all(head.as_bytes()).await;
            let _ = sock.write_all(body.as_bytes()).await;
            hold(sock).await;
        })
        .await;
        let c = openai(server.url(), hyper)
            .idle_timeout(Duration::from_secs(60))
            .build()
            .unwrap();
        let started = Instant::now();
        let r = ask(&c, "go").await.unwrap();
        assert_eq!(r.text_content(), "whole");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// (e) duplicate tool-call ids

#[tokio::test]
async fn duplicate_tool_call_ids_are_each_answered() {
    both(|hyper| async move {
        let requests = Arc::new(std::sync::Mutex::new(Vec::<Value>::new()));
        let seen = Arc::clone(&requests);
        let server = RawServer::start(move |mut sock, _| {
            let seen = Arc::clone(&seen);
            async move {
                loop {
                    let body = read_request(&mut sock).await;
                    if body.is_empty() {
                        return;
                    }
                    let n = {
                        let mut r = seen.lock().unwrap();
                        r.push(serde_json::from_slice(&body).unwrap());
                        r.len()
                    };
                    let turn = if n == 1 {
                        cairn_test_support::Turn {
                            calls: vec![
                                ("call_1".into(), "echo".into(), r#"{"text":"first"}"#.into()),
                                ("call_1".into(), "echo".into(), r#"{"text":"second"}"#.into()),
                            ],
                            ..Default::default()
                        }
                    } else {
                        cairn_test_support::Turn::text("done")
                    };
                    let reply = cairn_test_support::openai::chat_json(&turn);
                    let head = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                        reply.len()
                    );
                    if sock.write_all(head.as_bytes()).await.is_err()
                        || sock.write_all(reply.as_bytes()).await.is_err()
                    {
                        return;
                    }
                }
            }
        })
        .await;
        let calls = Arc::new(AtomicUsize::new(0));
        let c = openai(server.url(), hyper).build().unwrap();
        let agent = Agent::builder(c)
            .tool(cairn_test_support::agent::echo_tool(Arc::clone(&calls)))
            .build();
        let r = agent.run("go").await.unwrap();
        assert_eq!(r.text(), "done");
        assert_eq!(calls.load(Ordering::SeqCst), 2, "both calls run");

        let second = requests.lock().unwrap()[1].clone();
        let msgs = second["messages"].as_array().unwrap();
        let ids: Vec<&str> = msgs
            .iter()
            .flat_map(|m| m["tool_calls"].as_array().into_iter().flatten())
            .map(|c| c["id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, ["call_1", "call_1_2"]);
        let answers: Vec<(&str, &str)> = msgs
            .iter()
            .filter(|m| m["role"] == "tool")
            .map(|m| {
                (
                    m["tool_call_id"].as_str().unwrap(),
                    m["content"].as_str().unwrap(),
                )
            })
            .collect();
        assert_eq!(answers, [("call_1", "echo:first"), ("call_1_2", "echo:second")]);
        requests.lock().unwrap().clear();
    })
    .await;
}
