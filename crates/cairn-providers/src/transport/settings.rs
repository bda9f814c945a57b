//! Builder settings every provider holds (key, base URL, model, [`HttpOptions`], retries,
//! headers, the HTTP client), the builder methods over them (one builder style for all
//! providers), and the client kwargs every client understands (`extra_headers`, `extra_body`).

use std::fmt;

use cairn_core::{ChatError, ChatErrorKind, Kwargs};
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
    pub(crate) fn new(base_url: &str) -> Self {
        Settings {
            api_key: None,
            base_url: base_url.to_owned(),
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

    /// Reads a provider's variables through `lookup`: the key from the first of `key_vars`
    /// that is set, the model from `model_var`, the base URL from `base_url_var` (kept when
    /// unset), and the `CAIRN_*` timeouts. Every builder's `from_lookup` starts here.
    pub(crate) fn read_env(
        &mut self,
        lookup: Lookup<'_>,
        key_vars: &[&str],
        model_var: &str,
        base_url_var: &str,
    ) {
        self.api_key = key_vars
            .iter()
            .find_map(|v| Self::var(lookup, v))
            .map(ApiKey::new);
        self.model = Self::var(lookup, model_var);
        if let Some(u) = Self::var(lookup, base_url_var) {
            self.base_url = u;
        }
        self.apply_env(lookup);
    }

    /// The endpoint, authenticating with `auth` (header name, value) when there is a key.
    pub(crate) fn endpoint(
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

/// Generates the builder methods backed by a `settings: Settings` field.
macro_rules! settings_methods {
    ($key_header:literal) => {
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
