//! Pieces the Anthropic and Gemini clients share: builder settings, client-kwargs parsing and
//! request-body helpers. (The transport, retries and SSE parsing live in [`crate::openai`] and
//! are shared with it.)

use std::time::Duration;

use bytes::Bytes;
use cairn_core::{ChatError, ChatErrorKind, Content, Kwargs};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{Map, Value};

use crate::openai::endpoint::{Endpoint, EndpointConfig};
use crate::openai::{ApiKey, RetryPolicy};

pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);
pub(crate) const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The settings every HTTP provider builder holds.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub(crate) api_key: Option<ApiKey>,
    pub(crate) base_url: String,
    pub(crate) model: Option<String>,
    pub(crate) timeout: Duration,
    pub(crate) connect_timeout: Duration,
    pub(crate) retry: RetryPolicy,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) http: Option<reqwest::Client>,
    pub(crate) hyper_http1: bool,
}

impl Settings {
    pub(crate) fn new(base_url: &str) -> Self {
        Settings {
            api_key: None,
            base_url: base_url.to_owned(),
            model: None,
            timeout: DEFAULT_TIMEOUT,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            retry: RetryPolicy::default(),
            headers: Vec::new(),
            http: None,
            hyper_http1: true,
        }
    }

    /// The endpoint, authenticating with the key in header `auth_header` (when there is a key).
    pub(crate) fn endpoint(
        &mut self,
        auth_header: &'static str,
        extra: &[(String, String)],
    ) -> Result<Endpoint, ChatError> {
        let auth = self
            .api_key
            .as_ref()
            .filter(|k| !k.expose().is_empty())
            .map(|k| (HeaderName::from_static(auth_header), k.expose().to_owned()));
        let mut headers = extra.to_vec();
        headers.extend(self.headers.iter().cloned());
        Endpoint::new(EndpointConfig {
            base_url: &self.base_url,
            auth,
            headers: &headers,
            http: self.http.take(),
            hyper_http1: self.hyper_http1,
            timeout: self.timeout,
            connect_timeout: self.connect_timeout,
            retry: self.retry,
        })
    }
}

/// Generates the builder methods backed by a `settings: Settings` field.
macro_rules! settings_methods {
    ($key_header:literal) => {
        #[doc = concat!("The API key (sent as `", $key_header, "`).")]
        pub fn api_key(mut self, key: impl Into<$crate::openai::ApiKey>) -> Self {
            self.settings.api_key = Some(key.into());
            self
        }

        /// The API root (the part before `/v1…`).
        pub fn base_url(mut self, url: impl Into<String>) -> Self {
            self.settings.base_url = url.into();
            self
        }

        /// The default model (`ChatOptions::model` overrides it per call).
        pub fn model(mut self, model: impl Into<String>) -> Self {
            self.settings.model = Some(model.into());
            self
        }

        /// The longest silence tolerated from the server (over `reqwest` also the total time
        /// of a non-streaming call). Default 600 s.
        pub fn timeout(mut self, timeout: std::time::Duration) -> Self {
            self.settings.timeout = timeout;
            self
        }

        /// The connect timeout. Default 10 s.
        pub fn connect_timeout(mut self, timeout: std::time::Duration) -> Self {
            self.settings.connect_timeout = timeout;
            self
        }

        /// How many times a failed request is retried. Default 2.
        pub fn max_retries(mut self, n: u32) -> Self {
            self.settings.retry.max_retries = n;
            self
        }

        /// The whole retry policy.
        pub fn retry_policy(mut self, policy: $crate::openai::RetryPolicy) -> Self {
            self.settings.retry = policy;
            self
        }

        /// A header sent with every request (replaces cairn's own of the same name).
        pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
            self.settings.headers.push((name.into(), value.into()));
            self
        }

        /// Uses this `reqwest::Client` (to share a connection pool).
        pub fn http_client(mut self, client: reqwest::Client) -> Self {
            self.settings.http = Some(client);
            self
        }

        /// Whether plain `http://` servers are reached through the lean hyper transport
        /// (default true; see [`crate::openai`]).
        pub fn hyper_http1(mut self, yes: bool) -> Self {
            self.settings.hyper_http1 = yes;
            self
        }
    };
}
pub(crate) use settings_methods;

pub(crate) fn env_nonempty(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

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

/// Merges `additional_properties`, then `extra_body`, into `body` (replacing fields) and
/// serializes it.
pub(crate) fn finish_body(
    mut body: Map<String, Value>,
    props: &Map<String, Value>,
    extra: Option<&Map<String, Value>>,
) -> Result<Bytes, ChatError> {
    for (k, v) in props.iter().chain(extra.into_iter().flatten()) {
        body.insert(k.clone(), v.clone());
    }
    serde_json::to_vec(&body).map(Bytes::from).map_err(|e| {
        config_error(format!("the request could not be serialized: {e}")).with_source(e)
    })
}

/// A `data:<media type>;base64,<data>` URI split into media type and data.
pub(crate) fn parse_data_uri<'a>(
    url: &'a str,
    media_type: Option<&'a str>,
) -> Option<(&'a str, &'a str)> {
    let rest = url.strip_prefix("data:")?;
    let (meta, data) = rest.split_once(',')?;
    let mt = meta.strip_suffix(";base64")?;
    let mt = if mt.is_empty() {
        media_type.unwrap_or("application/octet-stream")
    } else {
        mt
    };
    Some((mt, data))
}

/// Tool-call arguments (raw JSON text) as the object providers want: empty text is `{}`;
/// invalid JSON or a non-object is also `{}` (the agent loop answers such a call with an
/// invalid-arguments error result, which the model reads next to it).
pub(crate) fn arguments_object(arguments: &str) -> Value {
    if arguments.trim().is_empty() {
        return Value::Object(Map::new());
    }
    match serde_json::from_str::<Value>(arguments) {
        Ok(v @ Value::Object(_)) => v,
        _ => Value::Object(Map::new()),
    }
}

/// The text of a tool result's outputs, and its images (as `(url, media type)`).
pub(crate) fn result_parts(output: &[Content]) -> (String, Vec<(&str, Option<&str>)>) {
    let mut text = String::new();
    let mut images = Vec::new();
    for c in output {
        match c {
            Content::Text { text: t } => text.push_str(t),
            Content::Image { url, media_type } => {
                images.push((url.as_str(), media_type.as_deref()))
            }
            _ => {}
        }
    }
    (text, images)
}
