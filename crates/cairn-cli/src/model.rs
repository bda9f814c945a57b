//! Turning `--model provider:model` into a chat client.
//!
//! `local:…` is the embedded model (cairn-local); everything else goes to the provider clients
//! of cairn-providers.
//!
//! API keys and base URLs do not come from the environment here: [`crate::secrets`] took them
//! out of it at start-up, so [`remote_client`] resolves the model with a variable lookup that
//! answers them from [`Secrets`] (and everything else from the environment).

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context as _, Result, anyhow, bail};
use cairn_core::ChatClient;
use cairn_deep::HarnessProfile;
use cairn_providers::{HttpOptions, ResolveOptions};

use crate::args::GlobalArgs;
use crate::secrets::Secrets;

/// The model of `openai:` when `OPENAI_MODEL` is not set.
pub const DEFAULT_OPENAI_MODEL: &str = "gpt-4.1";

/// Which embedded model file to load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LocalSpec {
    /// A model `scripts/fetch-model.sh` knows, by its fetch-script name
    /// (`default`, `small`, `fixture`).
    Known(&'static str),
    /// Any GGUF file.
    Path(PathBuf),
}

/// A parsed `--model` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelSpec {
    /// The embedded model.
    Local(LocalSpec),
    /// A remote provider, as a `provider:model` string.
    Remote(String),
}

/// The known local model names: what a user may type after `local:`, and the fetch-script name.
pub const LOCAL_NAMES: &[(&str, &str)] = &[
    ("", "default"),
    ("default", "default"),
    ("qwen2.5-coder-1.5b", "default"),
    ("small", "small"),
    ("qwen2.5-coder-0.5b", "small"),
    ("fixture", "fixture"),
    ("smollm2-135m", "fixture"),
];

impl ModelSpec {
    /// Parses a `--model` value.
    pub fn parse(s: &str) -> Result<ModelSpec> {
        let s = s.trim();
        let Some((provider, rest)) = s.split_once(':') else {
            bail!(
                "--model {s:?} is not of the form provider:model; try local:, openai:gpt-4.1 or ollama:qwen2.5-coder"
            );
        };
        if provider.eq_ignore_ascii_case("local") {
            let rest = rest.trim();
            if let Some((_, known)) = LOCAL_NAMES
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(rest))
            {
                return Ok(ModelSpec::Local(LocalSpec::Known(known)));
            }
            if rest.contains('/') || rest.ends_with(".gguf") {
                return Ok(ModelSpec::Local(LocalSpec::Path(PathBuf::from(rest))));
            }
            let names: Vec<&str> = LOCAL_NAMES
                .iter()
                .map(|(n, _)| *n)
                .filter(|n| !n.is_empty())
                .collect();
            bail!(
                "unknown local model {rest:?}: use local: (the default), local:<name> with a name among {}, or local:/path/to/file.gguf",
                names.join(", ")
            );
        }
        if rest.trim().is_empty() {
            bail!("--model {s:?} names no model after the colon, e.g. {provider}:<model>");
        }
        Ok(ModelSpec::Remote(s.to_owned()))
    }

    /// The default when `--model` is not given: `openai:$OPENAI_MODEL` when `OPENAI_API_KEY` or
    /// `OPENAI_BASE_URL` is set, else the embedded model.
    pub fn default_from_env(env: impl Fn(&str) -> Option<String>) -> String {
        let set = |k: &str| env(k).is_some_and(|v| !v.trim().is_empty());
        if set("OPENAI_API_KEY") || set("OPENAI_BASE_URL") {
            let model = env("OPENAI_MODEL")
                .filter(|m| !m.trim().is_empty())
                .unwrap_or_else(|| DEFAULT_OPENAI_MODEL.to_owned());
            format!("openai:{model}")
        } else {
            "local:".to_owned()
        }
    }
}

/// A ready model: the client, a label for humans, and the harness profile it needs.
pub struct LoadedModel {
    /// The client.
    pub client: Arc<dyn ChatClient>,
    /// What to show, e.g. `local:qwen2.5-coder-1.5b-instruct-q4_k_m.gguf`.
    pub label: String,
    /// Harness adjustments for this model (the local profile for the embedded model).
    pub profile: HarnessProfile,
    /// Counts tokens the way the model does, when known.
    pub counter: Option<crate::cap::TokenCounterFn>,
}

impl std::fmt::Debug for LoadedModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedModel")
            .field("label", &self.label)
            .field("profile", &self.profile)
            .finish_non_exhaustive()
    }
}

/// Loads the model of `spec` (for `local:` this reads the GGUF file: seconds); remote clients
/// get their keys and base URLs from `secrets`, and their timeouts from the flags of `g` over
/// the `CAIRN_*` timeout variables (see [`GlobalArgs::http_options`]).
pub async fn load(spec: &ModelSpec, g: &GlobalArgs, secrets: &Secrets) -> Result<LoadedModel> {
    match spec {
        ModelSpec::Remote(s) => {
            let http = g
                .http_options(|k| secrets.var(k))
                .map_err(|e| anyhow!("{e}"))?;
            let client = remote_client_with(s, secrets, http)
                .map_err(|e| anyhow!("{e}"))
                .with_context(|| format!("cannot use the model {s}"))?;
            Ok(LoadedModel {
                client,
                label: s.clone(),
                profile: HarnessProfile::default(),
                counter: None,
            })
        }
        ModelSpec::Local(l) => load_local(l, g.verbose).await,
    }
}

/// The client for a remote `provider:model`, configured as
/// [`cairn_providers::client_for_model`] would be from the environment, except that the
/// credentials (keys, base URLs) come from `secrets`: they are no longer in the environment.
pub fn remote_client(
    spec: &str,
    secrets: &Secrets,
) -> Result<Arc<dyn ChatClient>, cairn_core::ChatError> {
    let lookup = |k: &str| secrets.var(k);
    cairn_providers::client_for_model_with(spec, &ResolveOptions::new().lookup(&lookup))
}

/// [`remote_client`] with these timeouts and caps.
pub fn remote_client_with(
    spec: &str,
    secrets: &Secrets,
    http: HttpOptions,
) -> Result<Arc<dyn ChatClient>, cairn_core::ChatError> {
    let lookup = |k: &str| secrets.var(k);
    cairn_providers::client_for_model_with(spec, &ResolveOptions::new().lookup(&lookup).http(http))
}

/// The GGUF file of a local spec, or an error that says how to get it.
#[cfg(feature = "local")]
pub fn local_path(spec: &LocalSpec) -> Result<PathBuf> {
    use cairn_local::KnownModel;
    let path = match spec {
        LocalSpec::Known(name) => KnownModel::from_name(name)
            .ok_or_else(|| anyhow!("unknown local model {name}"))?
            .require(),
        LocalSpec::Path(p) => cairn_local::resolve_model(&p.to_string_lossy()),
    };
    path.map_err(|e| match spec {
        LocalSpec::Known(name) => anyhow!(
            "{e}\n\nThe embedded model is not downloaded yet. Fetch and verify it once with\n    scripts/fetch-model.sh {name}\n(or run scripts/demo.sh, which also builds cairn and tries it), or use a remote model, e.g. --model openai:gpt-4.1 with OPENAI_API_KEY set."
        ),
        LocalSpec::Path(_) => anyhow!("{e}"),
    })
}

#[cfg(feature = "local")]
async fn load_local(spec: &LocalSpec, verbose: bool) -> Result<LoadedModel> {
    use cairn_local::{LocalClient, LocalConfig, LocalModel};
    let path = local_path(spec)?;
    let mut config = LocalConfig::default();
    if let Some(n) = std::env::var("CAIRN_CTX")
        .ok()
        .and_then(|v| v.trim().parse::<u32>().ok())
    {
        config.n_ctx = n;
    }
    config.max_tokens = crate::profile::LOCAL_MAX_REPLY_TOKENS;
    crate::profile::configure_local(&mut config, &path);
    if verbose {
        eprintln!("cairn: loading {} …", path.display());
    }
    let p = path.clone();
    let model = tokio::task::spawn_blocking(move || LocalModel::load(p, config))
        .await
        .context("the model loader stopped")?
        .with_context(|| format!("cannot load the local model {}", path.display()))?;
    let n_ctx = model.context_size();
    let file = path
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    let counter_model = model.clone();
    let counter: crate::cap::TokenCounterFn =
        Arc::new(move |text: &str| counter_model.count_tokens(text));
    Ok(LoadedModel {
        client: Arc::new(LocalClient::new(model)),
        label: format!("local:{file} (context {n_ctx} tokens)"),
        profile: crate::profile::local_profile(n_ctx),
        counter: Some(counter),
    })
}

/// Without the `local` feature there is no embedded model.
#[cfg(not(feature = "local"))]
pub fn local_path(_spec: &LocalSpec) -> Result<PathBuf> {
    bail!(
        "this cairn was built without the embedded model (the `local` feature); rebuild with default features or choose a remote model with --model"
    )
}

#[cfg(not(feature = "local"))]
async fn load_local(spec: &LocalSpec, _verbose: bool) -> Result<LoadedModel> {
    local_path(spec)?;
    bail!("this cairn was built without the embedded model")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_local_and_remote() {
        assert_eq!(
            ModelSpec::parse("local:").unwrap(),
            ModelSpec::Local(LocalSpec::Known("default"))
        );
        assert_eq!(
            ModelSpec::parse("local:qwen2.5-coder-0.5b").unwrap(),
            ModelSpec::Local(LocalSpec::Known("small"))
        );
        assert_eq!(
            ModelSpec::parse("local:/m/x.gguf").unwrap(),
            ModelSpec::Local(LocalSpec::Path("/m/x.gguf".into()))
        );
        assert_eq!(
            ModelSpec::parse("openai:gpt-4.1").unwrap(),
            ModelSpec::Remote("openai:gpt-4.1".into())
        );
        assert!(ModelSpec::parse("gpt-4.1").is_err());
        assert!(ModelSpec::parse("local:huge").is_err());
        assert!(ModelSpec::parse("openai:").is_err());
    }

    #[test]
    fn default_depends_on_the_environment() {
        assert_eq!(ModelSpec::default_from_env(|_| None), "local:");
        let env = |k: &str| match k {
            "OPENAI_BASE_URL" => Some("http://x/v1".to_owned()),
            "OPENAI_MODEL" => Some("m".to_owned()),
            _ => None,
        };
        assert_eq!(ModelSpec::default_from_env(env), "openai:m");
        let env = |k: &str| (k == "OPENAI_API_KEY").then(|| "k".to_owned());
        assert_eq!(ModelSpec::default_from_env(env), "openai:gpt-4.1");
    }

    #[test]
    fn remote_clients_take_keys_from_the_secrets() {
        let none = Secrets::default();
        let e = remote_client("anthropic:m", &none).err().unwrap();
        assert!(e.to_string().contains("ANTHROPIC_API_KEY"), "{e}");
        let e = remote_client("openai:m", &none).err().unwrap();
        assert!(e.to_string().contains("OPENAI_API_KEY"), "{e}");
        let s = Secrets::from_pairs([
            ("ANTHROPIC_API_KEY", "k"),
            ("GOOGLE_API_KEY", "k"),
            ("OPENAI_BASE_URL", "http://127.0.0.1:9/v1"),
        ]);
        assert!(remote_client("anthropic:m", &s).is_ok());
        assert!(remote_client("gemini:m", &s).is_ok());
        // The seed's spelling of Gemini (LangChain's provider name) is an alias.
        let c = remote_client("google_genai:gemini-2.5-flash", &s).unwrap();
        assert_eq!(c.describe(), "gemini:gemini-2.5-flash");
        assert!(remote_client("ollama:m", &none).is_ok());
        let c = remote_client("openai:m", &s).unwrap();
        assert_eq!(c.describe(), "openai:m");
        let e = remote_client("nosuch:m", &s).err().unwrap().to_string();
        assert!(
            e.contains("openai, ollama, anthropic, gemini (alias google_genai)"),
            "{e}"
        );
    }

    #[test]
    fn remote_clients_use_the_timeouts_given() {
        // A server that accepts and never answers.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            let mut held = Vec::new();
            while let Ok((sock, _)) = listener.accept() {
                held.push(sock);
            }
        });
        let s = Secrets::from_pairs([("OPENAI_BASE_URL", format!("http://127.0.0.1:{port}/v1"))]);
        let http = HttpOptions {
            first_byte_timeout: std::time::Duration::from_millis(300),
            ..Default::default()
        };
        let c = remote_client_with("openai:m", &s, http).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let started = std::time::Instant::now();
        let e = rt
            .block_on(c.get_response(cairn_core::ChatRequest::new(
                &[cairn_core::Message::user("go")],
                &cairn_core::ChatOptions::default(),
            )))
            .unwrap_err();
        assert_eq!(e.kind(), cairn_core::ChatErrorKind::Timeout, "{e}");
        assert!(started.elapsed() < std::time::Duration::from_secs(10));
    }
}
