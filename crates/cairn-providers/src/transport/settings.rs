//! Builder settings every provider holds (key, base URL, model, [`HttpOptions`], retries,
//! headers, the HTTP client), the builder methods over them (one builder style for all
//! providers), and the client kwargs every client understands (`extra_headers`, `extra_body`).

use std::fmt;

use cairn_core::{ChatError, ChatErrorKind, ChatOptions, Kwargs};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{Map, Value};

use super::endpoint::{Endpoint, EndpointConfig};
use super::http_options::HttpOptions;
use super::redact::redact_url;
use super::{ApiKey, RetryPolicy};

/// A variable lookup (the process environment, or a caller's own map).
pub(crate) type Lookup<'a> = &'a dyn Fn(&str) -> Option<String>;

/// The process environment as a [`Lookup`].
pub(crate) fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// What a provider's `from_env` reads and requires.
pub(crate) struct ProviderEnv {
    /// The base URL when none is configured.
    pub(crate) default_base_url: &'static str,
    /// The key: the first of these variables that is set.
    pub(crate) keys: &'static [&'static str],
    /// The default model's variable.
    pub(crate) model: &'static str,
    /// The base URL's variable.
    pub(crate) base_url: &'static str,
    /// Variables sent as headers when set: (variable, header name).
    pub(crate) headers: &'static [(&'static str, &'static str)],
    /// The error of `from_env` when the key is missing.
    pub(crate) missing_key: &'static str,
    /// When set, the key is required only with this base URL (other servers may need none).
    pub(crate) key_required_for: Option<&'static str>,
}

/// What every provider client holds: the endpoint, the key and the default model.
#[derive(Clone)]
pub(crate) struct ClientCore {
    pub(crate) endpoint: Endpoint,
    pub(crate) api_key: Option<ApiKey>,
    pub(crate) model: Option<String>,
    pub(crate) env: &'static ProviderEnv,
}

impl ClientCore {
    /// The model of a call: `ChatOptions::model`, else the builder's.
    pub(crate) fn model<'a>(&'a self, options: &'a ChatOptions) -> Result<&'a str, ChatError> {
        options
            .model
            .as_deref()
            .or(self.model.as_deref())
            .ok_or_else(|| {
                config_error(format!(
                    "no model: set ChatOptions::model, the builder's model or {}",
                    self.env.model
                ))
            })
    }

    /// `provider:model`, or `provider` without a default model ([`ChatClient::describe`]).
    ///
    /// [`ChatClient::describe`]: cairn_core::ChatClient::describe
    pub(crate) fn describe(&self, provider: &str) -> String {
        match &self.model {
            Some(m) => format!("{provider}:{m}"),
            None => provider.to_owned(),
        }
    }

    /// The `Debug` form every provider client shares: `name` with the redacted base URL, the
    /// model, the key (`***`), timeouts and retries.
    pub(crate) fn debug(&self, f: &mut fmt::Formatter<'_>, name: &str) -> fmt::Result {
        f.debug_struct(name)
            .field("base_url", &self.endpoint.display_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key)
            .field("http", &self.endpoint.options)
            .field("retry", &self.endpoint.retry)
            .finish()
    }
}

/// The settings every HTTP provider builder holds.
#[derive(Clone)]
pub(crate) struct Settings {
    pub(crate) api_key: Option<ApiKey>,
    pub(crate) base_url: String,
    pub(crate) model: Option<String>,
    pub(crate) http: HttpOptions,
    pub(crate) retry: RetryPolicy,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) client: Option<reqwest::Client>,
    pub(crate) hyper_http1: bool,
    /// An invalid `CAIRN_*` timeout variable seen by `from_env`; `build` fails with it.
    pub(crate) env_error: Option<String>,
}

impl fmt::Debug for Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let header_names: Vec<&str> = self.headers.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("Settings")
            .field("api_key", &self.api_key)
            .field("base_url", &redact_url(&self.base_url))
            .field("model", &self.model)
            .field("http", &self.http)
            .field("retry", &self.retry)
            .field("headers", &header_names)
            .field("http_client", &self.client.is_some())
            .field("hyper_http1", &self.hyper_http1)
            .finish()
    }
}

impl Settings {
    /// The defaults, with `env`'s default base URL.
    pub(crate) fn new(env: &ProviderEnv) -> Self {
        Settings {
            api_key: None,
            base_url: env.default_base_url.to_owned(),
            model: None,
            http: HttpOptions::default(),
            retry: RetryPolicy::default(),
            headers: Vec::new(),
            client: None,
            hyper_http1: true,
            env_error: None,
        }
    }

    /// Applies the `CAIRN_*` timeout variables `lookup` finds (an invalid one makes `build`
    /// fail).
    pub(crate) fn apply_env(&mut self, lookup: Lookup<'_>) {
        if let Err(e) = self.http.apply_lookup(lookup) {
            self.env_error = Some(e.message().to_owned());
        }
    }

    /// `lookup(name)` unless empty or blank.
    pub(crate) fn var(lookup: Lookup<'_>, name: &str) -> Option<String> {
        lookup(name).filter(|v| !v.trim().is_empty())
    }

    /// Reads a provider's variables through `lookup`: the key from the first of `env.keys`
    /// that is set, the model, the base URL (kept when unset), the variables sent as headers,
    /// and the `CAIRN_*` timeouts. Every builder's `from_lookup` is this.
    pub(crate) fn read_env(&mut self, lookup: Lookup<'_>, env: &ProviderEnv) {
        self.api_key = env
            .keys
            .iter()
            .find_map(|v| Self::var(lookup, v))
            .map(ApiKey::new);
        self.model = Self::var(lookup, env.model);
        if let Some(u) = Self::var(lookup, env.base_url) {
            self.base_url = u;
        }
        for (var, header) in env.headers {
            if let Some(v) = Self::var(lookup, var) {
                self.headers.push(((*header).to_owned(), v));
            }
        }
        self.apply_env(lookup);
    }

    /// Fails as `from_env` does when the key `env` requires is missing.
    pub(crate) fn check_key(&self, env: &ProviderEnv) -> Result<(), ChatError> {
        let needed = env
            .key_required_for
            .is_none_or(|u| self.base_url.trim_end_matches('/') == u);
        if needed && self.api_key.is_none() {
            return Err(config_error(env.missing_key));
        }
        Ok(())
    }

    /// The [`ClientCore`] of a client: its endpoint (authenticating with `auth`, header name and
    /// value, when there is a key; `extra` are the provider's own headers), key and model.
    pub(crate) fn into_core(
        mut self,
        env: &'static ProviderEnv,
        auth: impl FnOnce(&str) -> (HeaderName, String),
        extra: &[(String, String)],
    ) -> Result<ClientCore, ChatError> {
        let endpoint = self.endpoint(auth, extra)?;
        Ok(ClientCore {
            endpoint,
            api_key: self.api_key,
            model: self.model,
            env,
        })
    }

    /// The endpoint, authenticating with `auth` (header name, value) when there is a key.
    fn endpoint(
        &mut self,
        auth: impl FnOnce(&str) -> (HeaderName, String),
        extra: &[(String, String)],
    ) -> Result<Endpoint, ChatError> {
        if let Some(e) = &self.env_error {
            return Err(config_error(e.clone()));
        }
        let key = self
            .api_key
            .as_ref()
            .map(ApiKey::expose)
            .filter(|k| !k.is_empty());
        let mut headers = extra.to_vec();
        headers.extend(self.headers.iter().cloned());
        Endpoint::new(EndpointConfig {
            base_url: &self.base_url,
            key,
            auth: key.map(auth),
            headers: &headers,
            http: self.client.take(),
            hyper_http1: self.hyper_http1,
            options: self.http,
            retry: self.retry,
        })
    }
}

/// Generates the builder methods backed by a `settings: Settings` field: `from_env` (documented
/// by the doc comments given), `from_lookup` (both reading `$env`, a [`ProviderEnv`]) and the
/// setters every provider shares.
macro_rules! settings_methods {
    ($key_header:literal, $env:expr, $(#[$from_env_doc:meta])*) => {
        $(#[$from_env_doc])*
        pub fn from_env() -> Self {
            Self::from_lookup($crate::transport::process_env)
        }

        /// Like [`from_env`](Self::from_env), reading the variables through `lookup` (e.g. a
        /// map of credentials taken out of the environment at start-up).
        pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Self {
            let mut b = Self::default();
            b.settings.read_env(&lookup, &$env);
            b
        }

        #[doc = concat!("The API key (sent as `", $key_header, "`). Without one no such header is sent, which suits local servers. It never appears in errors or `Debug` output.")]
        pub fn api_key(mut self, key: impl Into<$crate::transport::ApiKey>) -> Self {
            self.settings.api_key = Some(key.into());
            self
        }

        /// The API root (the part before the API paths). `user:password@` in it never appears
        /// in errors or `Debug` output.
        pub fn base_url(mut self, url: impl Into<String>) -> Self {
            self.settings.base_url = url.into();
            self
        }

        /// The default model (`ChatOptions::model` overrides it per call).
        pub fn model(mut self, model: impl Into<String>) -> Self {
            self.settings.model = Some(model.into());
            self
        }

        /// Sets both the first-byte and the idle timeout: the longest the server may stay
        /// silent (see [`HttpOptions`](crate::HttpOptions)).
        pub fn timeout(mut self, timeout: std::time::Duration) -> Self {
            self.settings.http.first_byte_timeout = timeout;
            self.settings.http.idle_timeout = timeout;
            self
        }

        /// The connect timeout. Default 10 s (`CAIRN_CONNECT_TIMEOUT` in `from_env`).
        pub fn connect_timeout(mut self, timeout: std::time::Duration) -> Self {
            self.settings.http.connect_timeout = timeout;
            self
        }

        /// The longest wait from sending a request to the response head. Default 300 s
        /// (`CAIRN_TIMEOUT` in `from_env`).
        pub fn first_byte_timeout(mut self, timeout: std::time::Duration) -> Self {
            self.settings.http.first_byte_timeout = timeout;
            self
        }

        /// The longest gap between two pieces of a response body. Default 120 s
        /// (`CAIRN_IDLE_TIMEOUT` in `from_env`).
        pub fn idle_timeout(mut self, timeout: std::time::Duration) -> Self {
            self.settings.http.idle_timeout = timeout;
            self
        }

        /// The largest non-streaming response body accepted. Default 32 MiB.
        pub fn max_body_bytes(mut self, n: usize) -> Self {
            self.settings.http.max_body_bytes = n;
            self
        }

        /// The largest server-sent-events line (and event data) accepted. Default 8 MiB.
        pub fn max_sse_event_bytes(mut self, n: usize) -> Self {
            self.settings.http.max_sse_event_bytes = n;
            self
        }

        /// All timeouts and caps at once (replacing any set before).
        pub fn http_options(mut self, options: $crate::HttpOptions) -> Self {
            self.settings.http = options;
            self.settings.env_error = None;
            self
        }

        /// How many times a failed request is retried. Default 2.
        pub fn max_retries(mut self, n: u32) -> Self {
            self.settings.retry.max_retries = n;
            self
        }

        /// The whole retry policy.
        pub fn retry_policy(mut self, policy: $crate::transport::RetryPolicy) -> Self {
            self.settings.retry = policy;
            self
        }

        /// A header sent with every request (replaces cairn's own of the same name). Values of
        /// headers whose names suggest a credential (`auth`, `key`, `token`, …) are redacted
        /// from errors.
        pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
            self.settings.headers.push((name.into(), value.into()));
            self
        }

        /// Uses this `reqwest::Client` (to share a connection pool). Its own timeouts apply as
        /// well as the builder's.
        pub fn http_client(mut self, client: reqwest::Client) -> Self {
            self.settings.client = Some(client);
            self
        }

        /// Whether plain `http://` servers are reached through the lean hyper transport
        /// (default true; see [`crate::transport`]).
        pub fn hyper_http1(mut self, yes: bool) -> Self {
            self.settings.hyper_http1 = yes;
            self
        }
    };
}
pub(crate) use settings_methods;

/// Generates the methods every provider client shares (`builder`, `from_env`, `model`,
/// `base_url`) for `$client`, a client with an `inner.core: ClientCore` built by `$builder`
/// from `$env`; the doc comments given end `from_env`'s. With `debug`, also its `Debug` (see
/// [`ClientCore::debug`]).
macro_rules! client_methods {
    ($client:ident, $builder:ident, $env:expr, debug, $(#[$doc:meta])*) => {
        impl std::fmt::Debug for $client {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                self.inner.core.debug(f, stringify!($client))
            }
        }

        $crate::transport::client_methods!($client, $builder, $env, $(#[$doc])*);
    };
    ($client:ident, $builder:ident, $env:expr, $(#[$doc:meta])*) => {
        impl $client {
            #[doc = concat!("A builder with the defaults (see [`", stringify!($builder), "::new`]).")]
            pub fn builder() -> $builder {
                $builder::new()
            }

            #[doc = concat!("A client configured from the environment (see [`", stringify!($builder), "::from_env`]).")]
            ///
            $(#[$doc])*
            pub fn from_env() -> Result<Self, cairn_core::ChatError> {
                let b = $builder::from_env();
                b.settings.check_key(&$env)?;
                b.build()
            }

            /// The default model, if one was configured.
            pub fn model(&self) -> Option<&str> {
                self.inner.core.model.as_deref()
            }

            /// The API root as configured (with any `user:password@` in it; show it through
            /// [`redact_url`](crate::redact_url)).
            pub fn base_url(&self) -> &str {
                &self.inner.core.endpoint.base_url
            }
        }
    };
}
pub(crate) use client_methods;

pub(crate) fn config_error(m: impl Into<String>) -> ChatError {
    ChatError::new(ChatErrorKind::Config, m)
}

/// The `extra_body` and `extra_headers` of a call's client kwargs.
pub(crate) type ClientExtras<'a> = (Option<&'a Map<String, Value>>, Option<HeaderMap>);

/// The client kwargs every client understands: `extra_body` (an object merged into the body)
/// and `extra_headers` (an object of header names to values).
pub(crate) fn client_extras(client_kwargs: &Kwargs) -> Result<ClientExtras<'_>, ChatError> {
    if client_kwargs.is_empty() {
        return Ok((None, None));
    }
    let body = match client_kwargs.get("extra_body") {
        None | Some(Value::Null) => None,
        Some(Value::Object(m)) => Some(m),
        Some(_) => return Err(config_error("client kwarg extra_body must be an object")),
    };
    let headers = match client_kwargs.get("extra_headers") {
        None | Some(Value::Null) => None,
        Some(Value::Object(m)) => {
            let mut h = HeaderMap::with_capacity(m.len());
            for (k, v) in m {
                let name = HeaderName::try_from(k.as_str())
                    .map_err(|_| config_error(format!("invalid header name {k:?}")))?;
                let text = match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                let value = HeaderValue::try_from(text)
                    .map_err(|_| config_error(format!("invalid value for header {k:?}")))?;
                h.append(name, value);
            }
            Some(h)
        }
        Some(_) => return Err(config_error("client kwarg extra_headers must be an object")),
    };
    Ok((body, headers))
}
