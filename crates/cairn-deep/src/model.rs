//! Choosing the model: a client, or a `provider:model` string resolved by a resolver.
//!
//! `cairn-deep` does not depend on the providers crate (the harness and the providers only meet
//! through core's `ChatClient`). A string like `openai:gpt-4.1` is turned into a client by the
//! builder's [`ModelResolver`]; the `cairn` facade installs one that knows every provider.

use std::sync::Arc;

use cairn_core::{ChatClient, ChatError};

/// Turns a `provider:model` string into a client.
pub type ModelResolver = Arc<dyn Fn(&str) -> Result<Arc<dyn ChatClient>, ChatError> + Send + Sync>;

/// A model: a client, or a string to resolve.
#[derive(Clone)]
pub enum ModelChoice {
    /// A ready client.
    Client(Arc<dyn ChatClient>),
    /// A `provider:model` string.
    Spec(String),
}

impl ModelChoice {
    /// A ready client.
    pub fn client(c: impl ChatClient) -> Self {
        ModelChoice::Client(Arc::new(c))
    }

    /// The client, resolving a string with `resolver`.
    pub fn resolve(
        &self,
        resolver: Option<&ModelResolver>,
    ) -> Result<Arc<dyn ChatClient>, ChatError> {
        match self {
            ModelChoice::Client(c) => Ok(Arc::clone(c)),
            ModelChoice::Spec(s) => match resolver {
                Some(r) => r(s),
                None => Err(ChatError::new(
                    cairn_core::ChatErrorKind::Config,
                    format!(
                        "no resolver for the model string `{s}`: pass a client, or build the agent through the `cairn` crate, which resolves provider:model strings"
                    ),
                )),
            },
        }
    }
}

impl std::fmt::Debug for ModelChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ModelChoice::Client(c) => write!(f, "Client({})", c.describe()),
            ModelChoice::Spec(s) => write!(f, "Spec({s})"),
        }
    }
}

impl From<&str> for ModelChoice {
    fn from(s: &str) -> Self {
        ModelChoice::Spec(s.to_owned())
    }
}

impl From<String> for ModelChoice {
    fn from(s: String) -> Self {
        ModelChoice::Spec(s)
    }
}

impl From<Arc<dyn ChatClient>> for ModelChoice {
    fn from(c: Arc<dyn ChatClient>) -> Self {
        ModelChoice::Client(c)
    }
}
