//! A scripted [`ChatClient`] for tests: replies are a function of the request, and every
//! request is recorded.
//!
//! ```
//! use cairn_core::{ChatResponse, testing::ScriptedClient};
//! use serde_json::json;
//!
//! // Call `echo` once, then answer "done".
//! let client = ScriptedClient::new(|req| {
//!     let tool_results = req.messages.iter().filter(|m| m.function_results().count() > 0).count();
//!     Ok(if tool_results == 0 {
//!         ChatResponse::tool_calls([("echo", json!({"text": "hi"}))])
//!     } else {
//!         ChatResponse::text("done")
//!     })
//! });
//! assert!(client.requests().is_empty());
//! ```

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use futures::StreamExt;

use crate::client::{
    BoxFuture, ChatClient, ChatOptions, ChatRequest, ChatResponse, ChatStream, UpdateEvent,
    response_to_updates,
};
use crate::error::{ChatError, ChatErrorKind};
use crate::kwargs::Kwargs;
use crate::message::Message;

/// One request as the scripted client received it.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    /// The messages.
    pub messages: Vec<Message>,
    /// The options (tools included).
    pub options: ChatOptions,
    /// The function-invocation bucket the client was handed.
    pub function_invocation_kwargs: Kwargs,
    /// The client bucket.
    pub client_kwargs: Kwargs,
    /// Whether the call was a streaming one.
    pub streaming: bool,
}

impl RecordedRequest {
    /// Number of tool results in the request: the step of a tool loop.
    pub fn tool_results(&self) -> usize {
        self.messages
            .iter()
            .map(|m| m.function_results().count())
            .sum()
    }

    /// The request as JSON text (messages, options and client kwargs), for "never appears in
    /// the request" checks.
    pub fn to_json(&self) -> String {
        serde_json::json!({
            "messages": self.messages,
            "options": self.options,
            "client_kwargs": self.client_kwargs,
        })
        .to_string()
    }
}

type Script = dyn Fn(&RecordedRequest) -> Result<ChatResponse, ChatError> + Send + Sync;

/// A chat client whose answers come from a script. Clones share the script and the log.
#[derive(Clone)]
pub struct ScriptedClient {
    script: Arc<Script>,
    log: Arc<Mutex<Vec<RecordedRequest>>>,
    chunk_chars: usize,
}

impl std::fmt::Debug for ScriptedClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptedClient")
            .field("requests", &self.requests().len())
            .finish()
    }
}

impl ScriptedClient {
    /// A client answering with `script(request)`.
    pub fn new(
        script: impl Fn(&RecordedRequest) -> Result<ChatResponse, ChatError> + Send + Sync + 'static,
    ) -> Self {
        ScriptedClient {
            script: Arc::new(script),
            log: Arc::default(),
            chunk_chars: 4,
        }
    }

    /// A client answering with these responses in order, then failing.
    pub fn from_responses(responses: impl IntoIterator<Item = ChatResponse>) -> Self {
        let queue: Mutex<VecDeque<ChatResponse>> = Mutex::new(responses.into_iter().collect());
        Self::new(move |_| {
            queue
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .pop_front()
                .ok_or_else(|| {
                    ChatError::new(ChatErrorKind::Other, "the script has no more responses")
                })
        })
    }

    /// How many characters each streamed text piece has (default 4).
    pub fn stream_chunk_chars(mut self, n: usize) -> Self {
        self.chunk_chars = n.max(1);
        self
    }

    /// Every request received so far.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.log.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn answer(&self, request: ChatRequest<'_>, streaming: bool) -> Result<ChatResponse, ChatError> {
        let req = RecordedRequest {
            messages: request.messages.to_vec(),
            options: request.options.clone(),
            function_invocation_kwargs: request.function_invocation_kwargs.clone(),
            client_kwargs: request.client_kwargs.clone(),
            streaming,
        };
        let out = (self.script)(&req);
        self.log.lock().unwrap_or_else(|p| p.into_inner()).push(req);
        out
    }
}

impl ChatClient for ScriptedClient {
    fn get_response<'a>(
        &'a self,
        request: ChatRequest<'a>,
    ) -> BoxFuture<'a, Result<ChatResponse, ChatError>> {
        let out = self.answer(request, false);
        Box::pin(async move { out })
    }

    fn get_streaming_response<'a>(&'a self, request: ChatRequest<'a>) -> ChatStream<'a> {
        let updates = match self.answer(request, true) {
            Ok(resp) => {
                let mut out = Vec::new();
                for u in response_to_updates(&resp) {
                    match &u.event {
                        UpdateEvent::TextDelta { text } => {
                            let chars: Vec<char> = text.chars().collect();
                            for piece in chars.chunks(self.chunk_chars) {
                                out.push(Ok(UpdateEvent::TextDelta {
                                    text: piece.iter().collect(),
                                }
                                .into()));
                            }
                        }
                        _ => out.push(Ok(u)),
                    }
                }
                out
            }
            Err(e) => vec![Err(e)],
        };
        futures::stream::iter(updates).boxed()
    }

    fn describe(&self) -> String {
        "scripted".into()
    }
}
