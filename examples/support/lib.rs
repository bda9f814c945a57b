//! Shared by the examples: picks the chat client.
//!
//! With `OPENAI_BASE_URL` or `OPENAI_API_KEY` set, the examples talk to that OpenAI-compatible
//! server (model from `OPENAI_MODEL`; `OPENAI_API=responses` for the Responses API, Chat
//! Completions otherwise). Without them they run on a scripted demo model, so they
//! work on a fresh machine with no network.
#![allow(missing_docs)]

use std::sync::Arc;

use cairn::testing::ScriptedClient;
use cairn::{ChatClient, ChatResponse, Role};
use serde_json::Value;

/// The configured OpenAI-compatible client, or a scripted model that makes `demo_calls` one
/// per turn and then answers with the last tool result.
pub fn chat_client(demo_calls: Vec<(&'static str, Value)>) -> Arc<dyn ChatClient> {
    if let Some(client) = configured_client() {
        return client;
    }
    eprintln!("(OPENAI_BASE_URL / OPENAI_API_KEY not set: using a scripted demo model)");
    Arc::new(demo_model(demo_calls))
}

/// The scripted demo model on its own.
pub fn demo_model(demo_calls: Vec<(&'static str, Value)>) -> ScriptedClient {
    ScriptedClient::new(move |req| {
        // Turns taken since the last user message.
        let since_user = req
            .messages
            .iter()
            .rev()
            .take_while(|m| m.role != Role::User)
            .filter(|m| m.role == Role::Assistant)
            .count();
        Ok(match demo_calls.get(since_user) {
            Some((name, args)) => ChatResponse::tool_calls([(*name, args.clone())]),
            None => {
                let last = req
                    .messages
                    .iter()
                    .rev()
                    .flat_map(|m| m.function_results())
                    .next()
                    .map(|r| r.text())
                    .unwrap_or_else(|| "Nothing to do.".to_owned());
                ChatResponse::text(format!("Done. {last}"))
            }
        })
    })
}

/// The configured OpenAI-compatible client, if the environment names one (for examples that
/// bring a demo model of their own).
pub fn configured_chat_client() -> Option<Arc<dyn ChatClient>> {
    configured_client()
}

fn configured_client() -> Option<Arc<dyn ChatClient>> {
    let set = |k: &str| std::env::var(k).is_ok_and(|v| !v.trim().is_empty());
    if !set("OPENAI_BASE_URL") && !set("OPENAI_API_KEY") {
        return None;
    }
    // The seed's samples use the Responses API; most local servers speak Chat Completions.
    let api = match std::env::var("OPENAI_API").as_deref() {
        Ok("responses") => cairn::Api::Responses,
        _ => cairn::Api::ChatCompletions,
    };
    match cairn::OpenAIClient::from_env() {
        Ok(c) => Some(Arc::new(c.with_api(api))),
        Err(e) => {
            eprintln!("(could not configure the OpenAI client: {e}; using the demo model)");
            None
        }
    }
}

/// Wraps a client and remembers the system prompt of each request, so an example can show what
/// the model was sent.
#[derive(Clone)]
pub struct Recorder {
    inner: Arc<dyn ChatClient>,
    seen: Arc<std::sync::Mutex<Vec<String>>>,
}

impl Recorder {
    /// Wraps `inner`.
    pub fn wrap(inner: Arc<dyn ChatClient>) -> Self {
        Recorder {
            inner,
            seen: Arc::default(),
        }
    }

    /// The wrapping client, to hand to an agent.
    pub fn client(&self) -> Arc<dyn ChatClient> {
        Arc::new(self.clone())
    }

    fn instructions(&self, last: bool) -> String {
        let seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        let pick = if last { seen.last() } else { seen.first() };
        pick.cloned().unwrap_or_default()
    }

    /// The system prompt of the last request.
    pub fn last_instructions(&self) -> String {
        self.instructions(true)
    }

    /// The system prompt of the first request.
    pub fn first_instructions(&self) -> String {
        self.instructions(false)
    }
}

impl ChatClient for Recorder {
    fn get_response<'a>(
        &'a self,
        request: cairn::ChatRequest<'a>,
    ) -> cairn::BoxFuture<'a, Result<ChatResponse, cairn::ChatError>> {
        self.seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(request.options.instructions.clone().unwrap_or_default());
        self.inner.get_response(request)
    }

    fn describe(&self) -> String {
        self.inner.describe()
    }
}
