//! Resolving `provider:model` strings (e.g. `openai:gpt-4.1`) to clients.
//!
//! Each provider is one row of [`PROVIDERS`]: a name and a factory taking the model name. Adding
//! a provider means adding a row.

use std::sync::Arc;

use cairn_core::{ChatClient, ChatError, ChatErrorKind};

use crate::openai::{OpenAIClient, OpenAIClientBuilder};

/// Builds a client for a model of one provider.
pub type ProviderFactory = fn(model: &str) -> Result<Arc<dyn ChatClient>, ChatError>;

/// The known providers, by the prefix of a model string.
pub const PROVIDERS: &[(&str, ProviderFactory)] = &[
    ("openai", openai),
    ("ollama", ollama),
    ("anthropic", anthropic),
    ("gemini", gemini),
];

/// The names of the known providers.
pub fn known_providers() -> impl Iterator<Item = &'static str> {
    PROVIDERS.iter().map(|(name, _)| *name)
}

/// Splits `provider:model` into its two parts (both non-empty, trimmed).
pub fn parse_model_spec(spec: &str) -> Result<(&str, &str), ChatError> {
    match spec.split_once(':') {
        Some((p, m)) if !p.trim().is_empty() && !m.trim().is_empty() => Ok((p.trim(), m.trim())),
        _ => Err(ChatError::new(
            ChatErrorKind::Config,
            format!(
                "model {spec:?} is not of the form provider:model (e.g. openai:gpt-4.1); known providers: {}",
                known_providers().collect::<Vec<_>>().join(", ")
            ),
        )),
    }
}

/// The client for a model string such as `openai:gpt-4.1` or `ollama:llama3.2`.
///
/// - `openai:<model>`: configured from `OPENAI_API_KEY`, `OPENAI_BASE_URL`, … (see
///   [`OpenAIClient::from_env`]).
/// - `ollama:<model>`: the OpenAI-compatible endpoint at `OLLAMA_BASE_URL` (`/v1` is appended
///   when missing) or `http://localhost:11434/v1`; `OLLAMA_API_KEY` if set.
/// - `anthropic:<model>`: the Messages API, configured from `ANTHROPIC_API_KEY` (required) and
///   `ANTHROPIC_BASE_URL` (see [`AnthropicClient::from_env`](crate::AnthropicClient::from_env)).
/// - `gemini:<model>`: the Gemini API, configured from `GEMINI_API_KEY` or `GOOGLE_API_KEY`
///   (one is required) and `GEMINI_BASE_URL` (see [`GeminiClient::from_env`](crate::GeminiClient::from_env)).
///
/// Anything else fails with [`ChatErrorKind::Config`], listing the known providers.
///
/// ```
/// let err = cairn_providers::client_for_model("nosuch:model").err().unwrap();
/// assert_eq!(err.kind(), cairn_core::ChatErrorKind::Config);
/// assert!(err.to_string().contains("openai"));
/// ```
pub fn client_for_model(spec: &str) -> Result<Arc<dyn ChatClient>, ChatError> {
    let (provider, model) = parse_model_spec(spec)?;
    let provider_lc = provider.to_ascii_lowercase();
    match PROVIDERS.iter().find(|(name, _)| *name == provider_lc) {
        Some((_, factory)) => factory(model),
        None => Err(ChatError::new(
            ChatErrorKind::Config,
            format!(
                "unknown model provider {provider:?} in {spec:?}; known providers: {}",
                known_providers().collect::<Vec<_>>().join(", ")
            ),
        )),
    }
}

fn openai(model: &str) -> Result<Arc<dyn ChatClient>, ChatError> {
    let b = OpenAIClientBuilder::from_env().model(model);
    if std::env::var("OPENAI_API_KEY").map_or(true, |k| k.trim().is_empty())
        && std::env::var("OPENAI_BASE_URL").map_or(true, |u| u.trim().is_empty())
    {
        return Err(ChatError::new(
            ChatErrorKind::Config,
            "OPENAI_API_KEY is not set (set it, or OPENAI_BASE_URL for a local server)",
        ));
    }
    Ok(Arc::new(b.build()?))
}

fn ollama(model: &str) -> Result<Arc<dyn ChatClient>, ChatError> {
    let mut b = OpenAIClient::builder()
        .base_url(ollama_base_url(
            std::env::var("OLLAMA_BASE_URL").ok().as_deref(),
        ))
        .model(model)
        .provider_name("ollama")
        .legacy_max_tokens(true);
    if let Ok(k) = std::env::var("OLLAMA_API_KEY")
        && !k.trim().is_empty()
    {
        b = b.api_key(k);
    }
    Ok(Arc::new(b.build()?))
}

fn anthropic(model: &str) -> Result<Arc<dyn ChatClient>, ChatError> {
    let b = crate::anthropic::AnthropicClientBuilder::from_env().model(model);
    if std::env::var("ANTHROPIC_API_KEY").map_or(true, |k| k.trim().is_empty()) {
        return Err(ChatError::new(
            ChatErrorKind::Config,
            "ANTHROPIC_API_KEY is not set (needed for anthropic:<model>)",
        ));
    }
    Ok(Arc::new(b.build()?))
}

fn gemini(model: &str) -> Result<Arc<dyn ChatClient>, ChatError> {
    let b = crate::gemini::GeminiClientBuilder::from_env().model(model);
    let key_set = ["GEMINI_API_KEY", "GOOGLE_API_KEY"]
        .iter()
        .any(|v| std::env::var(v).is_ok_and(|k| !k.trim().is_empty()));
    if !key_set {
        return Err(ChatError::new(
            ChatErrorKind::Config,
            "GEMINI_API_KEY (or GOOGLE_API_KEY) is not set (needed for gemini:<model>)",
        ));
    }
    Ok(Arc::new(b.build()?))
}

fn ollama_base_url(env: Option<&str>) -> String {
    match env.map(str::trim).filter(|s| !s.is_empty()) {
        None => "http://localhost:11434/v1".to_owned(),
        Some(u) => {
            let u = u.trim_end_matches('/');
            if u.ends_with("/v1") {
                u.to_owned()
            } else {
                format!("{u}/v1")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_specs() {
        assert_eq!(
            parse_model_spec("openai:gpt-4.1").unwrap(),
            ("openai", "gpt-4.1")
        );
        assert_eq!(
            parse_model_spec("ollama:qwen3:8b").unwrap(),
            ("ollama", "qwen3:8b")
        );
        assert!(parse_model_spec("gpt-4.1").is_err());
        assert!(parse_model_spec("openai:").is_err());
    }

    #[test]
    fn unknown_provider_lists_known_ones() {
        let e = client_for_model("mistral:large").err().unwrap();
        assert_eq!(e.kind(), ChatErrorKind::Config);
        assert!(e.message().contains("openai") && e.message().contains("ollama"));
        assert!(e.message().contains("anthropic") && e.message().contains("gemini"));
    }

    #[test]
    fn ollama_urls() {
        assert_eq!(ollama_base_url(None), "http://localhost:11434/v1");
        assert_eq!(ollama_base_url(Some("http://h:1")), "http://h:1/v1");
        assert_eq!(ollama_base_url(Some("http://h:1/v1/")), "http://h:1/v1");
    }

    #[test]
    fn ollama_resolves_without_network() {
        let c = client_for_model("ollama:llama3.2").unwrap();
        assert_eq!(c.describe(), "ollama:llama3.2");
    }
}
