//! Test support for cairn's crates (not published): fake model servers on 127.0.0.1 that speak
//! the real wire protocols, SSE builders and scripted chat clients, so no crate's tests carry
//! their own copies.
//!
//! - [`TestServer`]: a scripted HTTP/1.1 server that records every request (method, path,
//!   headers, body) and answers with [`Reply`]s: JSON, error statuses with headers, SSE streams
//!   split at awkward places, cut-off streams, delays, raw bytes.
//! - [`Turn`] and [`Wire`]: what a model turn says (text, reasoning, tool calls) and its shape
//!   on each wire: OpenAI Chat Completions and Responses ([`openai`]), Anthropic Messages
//!   ([`anthropic`]) and Gemini `generateContent` / `streamGenerateContent` ([`gemini`]).
//!   [`Wire::serve_turns`] starts a fake provider that plays a tool loop.
//! - [`sse`]: frame builders and splits.
//! - [`blocking::FakeOpenAI`]: a fake OpenAI-compatible server for tests of the `cairn` binary
//!   that have no async runtime of their own.
//! - [`ScriptedClient`]: the scripted [`cairn_core::ChatClient`] (re-exported from
//!   `cairn_core::testing`, where cairn-core's own tests and doc examples use it).
//! - [`raw::RawServer`]: a raw TCP server for fault injection (hung servers, huge bodies,
//!   connections kept open).
//! - [`client`]: one-line plain and streamed calls of a chat client.
//! - [`agent`]: an `echo` tool, plain-and-streamed runs, child-process tests.
//! - [`process`]: finding a test's processes in `/proc` and waiting for them to die.
//!
//! ```
//! use cairn_test_support::{Turn, Wire};
//! use serde_json::json;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! // An Anthropic endpoint that calls `echo` once, then answers "done".
//! let server = Wire::Anthropic
//!     .serve_turns(vec![
//!         Turn::call("toolu_a", "echo", json!({"text": "hi"})),
//!         Turn::text("done"),
//!     ])
//!     .await;
//! assert!(server.root().starts_with("http://127.0.0.1:"));
//! assert!(server.requests().is_empty());
//! # }
//! ```
//!
//! Panics are this crate's way of failing a test (a port that cannot be bound, a body that is
//! not JSON); nothing here is meant for production code.

pub mod agent;
pub mod anthropic;
pub mod blocking;
pub mod client;
pub mod gemini;
pub mod http;
pub mod openai;
pub mod process;
pub mod raw;
mod server;
pub mod sse;

pub use cairn_core::testing::{RecordedRequest, ScriptedClient};
pub use server::{Recorded, Reply, TestServer};
pub use sse::{SPLITS, split};

use serde_json::Value;

/// What a scripted model turn says.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Turn {
    /// The answer text.
    pub text: Option<String>,
    /// Reasoning (thinking) text.
    pub reasoning: Option<String>,
    /// Tool calls: (call id, name, arguments JSON text).
    pub calls: Vec<(String, String, String)>,
}

impl Turn {
    /// A turn that answers `t`.
    pub fn text(t: &str) -> Turn {
        Turn {
            text: Some(t.into()),
            ..Default::default()
        }
    }

    /// A turn that calls one tool.
    pub fn call(id: &str, name: &str, args: Value) -> Turn {
        Turn {
            calls: vec![(id.into(), name.into(), args.to_string())],
            ..Default::default()
        }
    }

    /// This turn with `text` as well.
    pub fn with_text(mut self, text: &str) -> Turn {
        self.text = Some(text.into());
        self
    }

    /// This turn with reasoning as well.
    pub fn with_reasoning(mut self, reasoning: &str) -> Turn {
        self.reasoning = Some(reasoning.into());
        self
    }
}

/// A provider wire protocol the fake servers speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    /// OpenAI Chat Completions (`POST /v1/chat/completions`, `"stream": true` for SSE).
    OpenAIChat,
    /// OpenAI Responses (`POST /v1/responses`, `"stream": true` for SSE).
    OpenAIResponses,
    /// Anthropic Messages (`POST /v1/messages`, `"stream": true` for SSE).
    Anthropic,
    /// Gemini (`:generateContent`, or `:streamGenerateContent?alt=sse` for SSE).
    Gemini,
}

impl Wire {
    /// Whether `r` asks for a stream on this wire.
    pub fn is_stream(self, r: &Recorded) -> bool {
        match self {
            Wire::Gemini => gemini::is_stream(r),
            _ => r.is_stream(),
        }
    }

    /// `t` as this wire's reply: a JSON body, or an SSE stream (with keep-alive comments where the
    /// provider sends them) split into pieces of `sizes`.
    pub fn reply(self, t: &Turn, stream: bool, sizes: &[usize]) -> Reply {
        match (self, stream) {
            (Wire::OpenAIChat, false) => Reply::ok(openai::chat_json(t)),
            (Wire::OpenAIChat, true) => Reply::sse(&openai::chat_sse(t, true), sizes),
            (Wire::OpenAIResponses, false) => Reply::ok(openai::responses_json(t)),
            (Wire::OpenAIResponses, true) => Reply::sse(&openai::responses_sse(t, true), sizes),
            (Wire::Anthropic, false) => Reply::ok(anthropic::message_json(t)),
            (Wire::Anthropic, true) => Reply::sse(&anthropic::message_sse(t), sizes),
            (Wire::Gemini, false) => Reply::ok(gemini::generate_json(t)),
            (Wire::Gemini, true) => Reply::sse(&gemini::stream_sse(t), sizes),
        }
    }

    /// How many tool results the request body carries on this wire: the step of a tool loop.
    pub fn tool_results(self, body: &Value) -> usize {
        let count = |items: &Value, pred: &dyn Fn(&Value) -> bool| {
            items
                .as_array()
                .map(|a| a.iter().filter(|m| pred(m)).count())
                .unwrap_or(0)
        };
        match self {
            Wire::OpenAIChat => count(&body["messages"], &|m| m["role"] == "tool"),
            Wire::OpenAIResponses => {
                count(&body["input"], &|m| m["type"] == "function_call_output")
            }
            Wire::Anthropic => anthropic::tool_results(body),
            Wire::Gemini => gemini::tool_results(body),
        }
    }

    /// A server that plays a tool loop on this wire: it answers `turns[k]`, where `k` is the
    /// number of tool results in the request (the last turn once they run out), plainly or
    /// streamed as the request asks (streams split in pieces of 3, 11 and 1 bytes).
    pub async fn serve_turns(self, turns: Vec<Turn>) -> TestServer {
        TestServer::start(move |r, _| {
            let step = self.tool_results(&r.json());
            let turn = turns
                .get(step)
                .or(turns.last())
                .cloned()
                .unwrap_or_default();
            self.reply(&turn, self.is_stream(r), &[3, 11, 1])
        })
        .await
    }
}
