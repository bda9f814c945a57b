//! # cairn-providers
//!
//! Model providers for cairn. [`OpenAIClient`] speaks OpenAI's Chat Completions and Responses
//! APIs, plain and streaming (server-sent events), to OpenAI and to compatible servers (vLLM,
//! Ollama, llama.cpp, LM Studio, …): text, reasoning, several tool calls per turn (streamed
//! argument pieces reassembled), usage and finish reasons. Errors are typed
//! ([`ChatErrorKind`](cairn_core::ChatErrorKind)): HTTP status, the server's message, whether a
//! retry may help, and a distinct context-overflow kind. Requests are retried with backoff and
//! jitter on connection failures, 429 and 5xx, honouring `Retry-After`. Connecting, the first
//! byte and each gap in a body have their own timeouts, every buffered body and SSE event is
//! capped, and errors never show the API key or URL credentials: see [`HttpOptions`] and
//! [`redact`].
//!
//! [`AnthropicClient`] speaks Anthropic's Messages API and [`GeminiClient`] Google's Gemini
//! `generateContent` API, both plain and streaming, over the same transport, retries and error
//! types: the HTTP plumbing is one module, [`transport`], and each provider module only maps its
//! wire format. The three builders share one set of settings methods (key, base URL, model,
//! timeouts, caps, retries, headers).
//!
//! [`client_for_model`] resolves `provider:model` strings: `openai:…`, `ollama:…`,
//! `anthropic:…` (`ANTHROPIC_API_KEY`, `ANTHROPIC_BASE_URL`) and `gemini:…` (`GEMINI_API_KEY` or
//! `GOOGLE_API_KEY`, `GEMINI_BASE_URL`).
//!
//! ```no_run
//! use cairn_core::{Agent, ChatClient};
//! use cairn_providers::{Api, OpenAIClient, client_for_model};
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! // From OPENAI_API_KEY / OPENAI_BASE_URL:
//! let client = client_for_model("openai:gpt-4.1")?;
//! let agent = Agent::builder_shared(client).instructions("Be brief.").build();
//! println!("{}", agent.run("Hello").await?.text());
//!
//! // Or explicitly, e.g. for a local server without a key:
//! let local = OpenAIClient::builder()
//!     .base_url("http://127.0.0.1:8000/v1")
//!     .model("fake-model")
//!     .api(Api::Responses)
//!     .build()?;
//! println!("{}", local.describe());
//! # Ok(()) }
//! ```

pub mod anthropic;
mod common;
pub mod gemini;
pub mod openai;
pub mod resolve;
pub mod transport;

pub use transport::{http_options, redact};

pub use anthropic::{AnthropicClient, AnthropicClientBuilder};
pub use gemini::{GeminiClient, GeminiClientBuilder};
pub use http_options::HttpOptions;
pub use openai::{Api, OpenAIClient, OpenAIClientBuilder};
pub use redact::redact_url;
pub use resolve::{
    PROVIDER_ALIASES, ResolveOptions, client_for_model, client_for_model_with, known_providers,
    parse_model_spec,
};
pub use transport::{ApiKey, RetryPolicy};
