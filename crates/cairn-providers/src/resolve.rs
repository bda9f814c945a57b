//! Resolving `provider:model` strings (e.g. `openai:gpt-4.1`) to clients.
//!
//! Each provider is one row of [`PROVIDERS`]: a name and a factory taking the model name. Adding
//! a provider means adding a row.

use std::sync::Arc;

use cairn_core::{ChatClient, ChatError, ChatErrorKind};

use crate::http_options::HttpOptions;
use crate::openai::{OpenAIClient, OpenAIClientBuilder};

/// Builds a client for a model of one provider.
pub type ProviderFactory =
    fn(model: &str, options: &ResolveOptions<'_>) -> Result<Arc<dyn ChatClient>, ChatError>;

/// The known providers, by the prefix of a model string.
pub const PROVIDERS: &[(&str, ProviderFactory)] = &[
    ("openai", openai),
    ("ollama", ollama),
    ("anthropic", anthropic),
    ("gemini", gemini),
];

/// Other names of known providers, as other frameworks spell them: `(alias, provider)`.
/// `google_genai` is LangChain's name for the Gemini API (`init_chat_model("google_genai:…")`,
/// used by Deep Agents' samples).
pub const PROVIDER_ALIASES: &[(&str, &str)] = &[("google_genai", "gemini")];

static PROCESS_ENV: fn(&str) -> Option<String> = crate::transport::process_env;

/// Where [`client_for_model_with`] reads its settings: the variables (keys, base URLs, models,
/// `CAIRN_*` timeouts) through a lookup, the process environment by default; and, optionally,
/// the HTTP timeouts and caps to use instead of the defaults and the `CAIRN_*` variables.
#[derive(Clone, Copy)]
pub struct ResolveOptions<'a> {
    lookup: &'a (dyn Fn(&str) -> Option<String> + Sync + 'a),
    http: Option<HttpOptions>,
}

impl std::fmt::Debug for ResolveOptions<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResolveOptions")
            .field("http", &self.http)
            .finish_non_exhaustive()
    }
}

impl Default for ResolveOptions<'_> {
    fn default() -> Self {
        ResolveOptions {
            lookup: &PROCESS_ENV,
            http: None,
        }
    }
}

impl<'a> ResolveOptions<'a> {
    /// The process environment, the default HTTP options.
    pub fn new() -> Self {
        Self::default()
    }

    /// Reads variables through `lookup` instead of the process environment (e.g. credentials
    /// taken out of the environment at start-up).
    pub fn lookup(mut self, lookup: &'a (dyn Fn(&str) -> Option<String> + Sync + 'a)) -> Self {
        self.lookup = lookup;
        self
    }

    /// Uses these timeouts and caps (the `CAIRN_*` timeout variables are then not read).
    pub fn http(mut self, options: HttpOptions) -> Self {
        self.http = Some(options);
        self
    }

    fn var(&self, name: &str) -> Option<String> {
        (self.lookup)(name).filter(|v| !v.trim().is_empty())
    }
}

/// The names of the known providers.
pub fn known_providers() -> impl Iterator<Item = &'static str> {
    PROVIDERS.iter().map(|(name, _)| *name)
}

/// The known providers and their aliases, for error messages:
/// `openai, ollama, anthropic, gemini (alias google_genai)`.
fn known_list() -> String {
    known_providers()
        .map(|name| {
            let aliases: Vec<&str> = PROVIDER_ALIASES
                .iter()
                .filter(|(_, to)| *to == name)
                .map(|(alias, _)| *alias)
                .collect();
            if aliases.is_empty() {
                name.to_owned()
            } else {
                format!("{name} (alias {})", aliases.join(", "))
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Splits `provider:model` into its two parts (both non-empty, trimmed).
pub fn parse_model_spec(spec: &str) -> Result<(&str, &str), ChatError> {
    match spec.split_once(':') {
        Some((p, m)) if !p.trim().is_empty() && !m.trim().is_empty() => Ok((p.trim(), m.trim())),
        _ => Err(ChatError::new(
            ChatErrorKind::Config,
            format!(
                "model {spec:?} is not of the form provider:model (e.g. openai:gpt-4.1); known providers: {}",
                known_list()
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
///   `google_genai:<model>` is the same ([`PROVIDER_ALIASES`]).
///
/// Every provider also reads the timeouts `CAIRN_CONNECT_TIMEOUT`, `CAIRN_TIMEOUT` and
/// `CAIRN_IDLE_TIMEOUT` (see [`HttpOptions`]). Anything else fails with
/// [`ChatErrorKind::Config`], listing the known providers.
///
/// ```
/// let err = cairn_providers::client_for_model("nosuch:model").err().unwrap();
/// assert_eq!(err.kind(), cairn_core::ChatErrorKind::Config);
/// assert!(err.to_string().contains("openai"));
/// ```
pub fn client_for_model(spec: &str) -> Result<Arc<dyn ChatClient>, ChatError> {
    client_for_model_with(spec, &ResolveOptions::default())
}

/// [`client_for_model`] with the variables read through `options`' lookup and, when given,
/// its HTTP options.
///
/// ```
/// use cairn_providers::{HttpOptions, ResolveOptions, client_for_model_with};
/// use std::time::Duration;
///
/// let vars = |k: &str| (k == "OLLAMA_BASE_URL").then(|| "http://127.0.0.1:9/v1".to_owned());
/// let http = HttpOptions { first_byte_timeout: Duration::from_secs(30), ..Default::default() };
/// let client = client_for_model_with(
///     "ollama:llama3.2",
///     &ResolveOptions::new().lookup(&vars).http(http),
/// )
/// .unwrap();
/// assert_eq!(client.describe(), "ollama:llama3.2");
/// ```
pub fn client_for_model_with(
    spec: &str,
    options: &ResolveOptions<'_>,
) -> Result<Arc<dyn ChatClient>, ChatError> {
    let (provider, model) = parse_model_spec(spec)?;
    let provider_lc = provider.to_ascii_lowercase();
    let name = PROVIDER_ALIASES
        .iter()
        .find(|(alias, _)| *alias == provider_lc)
        .map_or(provider_lc.as_str(), |(_, to)| *to);
    match PROVIDERS.iter().find(|(n, _)| *n == name) {
        Some((_, factory)) => factory(model, options),
        None => Err(ChatError::new(
            ChatErrorKind::Config,
            format!(
                "unknown model provider {provider:?} in {spec:?}; known providers: {}",
                known_list()
            ),
        )),
    }
}

fn openai(model: &str, o: &ResolveOptions<'_>) -> Result<Arc<dyn ChatClient>, ChatError> {
    if o.var("OPENAI_API_KEY").is_none() && o.var("OPENAI_BASE_URL").is_none() {
        return Err(ChatError::new(
            ChatErrorKind::Config,
            "OPENAI_API_KEY is not set (set it, or OPENAI_BASE_URL for a local server)",
        ));
    }
    let mut b = OpenAIClientBuilder::from_lookup(o.lookup).model(model);
    if let Some(h) = o.http {
        b = b.http_options(h);
    }
    Ok(Arc::new(b.build()?))
}

fn ollama(model: &str, o: &ResolveOptions<'_>) -> Result<Arc<dyn ChatClient>, ChatError> {
    let mut b = OpenAIClient::builder()
        .base_url(ollama_base_url(o.var("OLLAMA_BASE_URL").as_deref()))
        .model(model)
        .provider_name("ollama")
        .legacy_max_tokens(true);
    b = match o.http {
        Some(h) => b.http_options(h),
        None => b.http_options(HttpOptions::from_lookup(o.lookup)?),
    };
    if let Some(k) = o.var("OLLAMA_API_KEY") {
        b = b.api_key(k);
    }
    Ok(Arc::new(b.build()?))
}

fn anthropic(model: &str, o: &ResolveOptions<'_>) -> Result<Arc<dyn ChatClient>, ChatError> {
    if o.var("ANTHROPIC_API_KEY").is_none() {
        return Err(ChatError::new(
            ChatErrorKind::Config,
            "ANTHROPIC_API_KEY is not set (needed for anthropic:<model>)",
        ));
    }
    let mut b = crate::anthropic::AnthropicClientBuilder::from_lookup(o.lookup).model(model);
    if let Some(h) = o.http {
        b = b.http_options(h);
    }
    Ok(Arc::new(b.build()?))
}

fn gemini(model: &str, o: &ResolveOptions<'_>) -> Result<Arc<dyn ChatClient>, ChatError> {
    if o.var("GEMINI_API_KEY").is_none() && o.var("GOOGLE_API_KEY").is_none() {
        return Err(ChatError::new(
            ChatErrorKind::Config,
            "GEMINI_API_KEY (or GOOGLE_API_KEY) is not set (needed for gemini:<model>)",
        ));
    }
    let mut b = crate::gemini::GeminiClientBuilder::from_lookup(o.lookup).model(model);
    if let Some(h) = o.http {
        b = b.http_options(h);
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
    fn google_genai_is_gemini() {
        let vars = |k: &str| (k == "GOOGLE_API_KEY").then(|| "k".to_owned());
        let o = ResolveOptions::new().lookup(&vars);
        let c = client_for_model_with("google_genai:gemini-2.5-flash", &o).unwrap();
        assert_eq!(c.describe(), "gemini:gemini-2.5-flash");
        let c = client_for_model_with("Google_GenAI:gemini-2.5-flash", &o).unwrap();
        assert_eq!(c.describe(), "gemini:gemini-2.5-flash");
        // Without a key the alias fails as gemini: does, naming the variables.
        let none = |_: &str| None;
        let e = client_for_model_with("google_genai:m", &ResolveOptions::new().lookup(&none))
            .err()
            .unwrap();
        assert!(e.message().contains("GEMINI_API_KEY"), "{}", e.message());
    }

    #[test]
    fn unknown_provider_lists_the_aliases_too() {
        let e = client_for_model("googl:m").err().unwrap();
        assert!(
            e.message().contains(
                "known providers: openai, ollama, anthropic, gemini (alias google_genai)"
            ),
            "{}",
            e.message()
        );
        let e = parse_model_spec("gemini-2.5").err().unwrap();
        assert!(e.message().contains("google_genai"), "{}", e.message());
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
