//! The HTTP plumbing every provider client shares: the transport (hyper for plain `http://`,
//! `reqwest` otherwise), the headers sent with every request, and the retry loop.

use std::time::Duration;

use bytes::Bytes;
use cairn_core::{ChatError, ChatErrorKind};
use http_body_util::Full;
use reqwest::Url;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HOST, HeaderMap, HeaderName, HeaderValue};

use super::retry::RetryPolicy;
use super::wire::ApiError;
use super::{Resp, Transport, http_client, http1, path_of, proxy_in_env, transport_error};

/// How a non-success HTTP answer (status, body, `Retry-After`) becomes an error.
pub(crate) type StatusMapper = fn(u16, &[u8], Option<Duration>) -> ApiError;

/// What an [`Endpoint`] is built from.
pub(crate) struct EndpointConfig<'a> {
    /// The API root (a trailing `/` is optional).
    pub(crate) base_url: &'a str,
    /// The authentication header (name, value); marked sensitive.
    pub(crate) auth: Option<(HeaderName, String)>,
    /// Configured headers; they replace the endpoint's own of the same name.
    pub(crate) headers: &'a [(String, String)],
    pub(crate) http: Option<reqwest::Client>,
    pub(crate) hyper_http1: bool,
    pub(crate) timeout: Duration,
    pub(crate) connect_timeout: Duration,
    pub(crate) retry: RetryPolicy,
}

/// A request target below the API root.
#[derive(Clone, Debug)]
pub(crate) struct Target {
    url: Url,
    /// The origin-form target for the hyper transport.
    uri: hyper::Uri,
}

/// One API root reached over one transport, with its fixed headers and retry policy.
#[derive(Clone)]
pub(crate) struct Endpoint {
    transport: Transport,
    /// Every request's headers with `Accept: application/json` (and `Host` for hyper).
    head_json: HeaderMap,
    /// The same with `Accept: text/event-stream`.
    head_sse: HeaderMap,
    /// The root with a trailing `/`, for joining paths.
    root: Url,
    /// The root as configured, without a trailing `/` (for messages).
    pub(crate) base_url: String,
    pub(crate) timeout: Duration,
    pub(crate) retry: RetryPolicy,
}

fn config(m: String) -> ChatError {
    ChatError::new(ChatErrorKind::Config, m)
}

impl Endpoint {
    /// Checks the URL and headers and picks the transport.
    pub(crate) fn new(c: EndpointConfig<'_>) -> Result<Self, ChatError> {
        let mut base = c.base_url.trim().trim_end_matches('/').to_owned();
        if base.is_empty() {
            return Err(config("the base URL is empty".into()));
        }
        base.push('/');
        let root = Url::parse(&base)
            .map_err(|e| config(format!("invalid base URL {:?}: {e}", c.base_url)))?;
        if !matches!(root.scheme(), "http" | "https") {
            return Err(config(format!(
                "the base URL {:?} is not http(s)",
                c.base_url
            )));
        }
        let mut common = HeaderMap::with_capacity(8 + c.headers.len());
        common.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        if let Some((name, value)) = c.auth {
            let mut v = HeaderValue::try_from(value)
                .map_err(|_| config("the API key is not a valid header value".into()))?;
            v.set_sensitive(true);
            common.insert(name, v);
        }
        let mut configured = HeaderMap::with_capacity(c.headers.len());
        for (n, v) in c.headers {
            let name = HeaderName::try_from(n.as_str())
                .map_err(|_| config(format!("invalid header name {n:?}")))?;
            let value = HeaderValue::try_from(v.as_str())
                .map_err(|_| config(format!("invalid value for header {n:?}")))?;
            configured.append(name, value);
        }

        let lean = c.http.is_none() && c.hyper_http1 && root.scheme() == "http" && !proxy_in_env();
        let transport = match (c.http, lean) {
            (Some(client), _) => Transport::Reqwest(client),
            (None, true) => {
                let (host, port) = match (root.host(), root.port_or_known_default()) {
                    (Some(url::Host::Domain(d)), Some(p)) => (d.to_owned(), p),
                    (Some(url::Host::Ipv4(a)), Some(p)) => (a.to_string(), p),
                    (Some(url::Host::Ipv6(a)), Some(p)) => (a.to_string(), p),
                    _ => return Err(config(format!("the base URL {:?} has no host", c.base_url))),
                };
                let host_header = match root.port() {
                    Some(p) => format!("{}:{p}", root.host_str().unwrap_or("")),
                    None => root.host_str().unwrap_or("").to_owned(),
                };
                common.insert(
                    HOST,
                    HeaderValue::try_from(host_header)
                        .map_err(|_| config(format!("invalid host in {:?}", c.base_url)))?,
                );
                Transport::Hyper(std::sync::Arc::new(http1::Http1::new(
                    host,
                    port,
                    c.connect_timeout,
                    c.timeout,
                )))
            }
            (None, false) => Transport::Reqwest(http_client(c.timeout, c.connect_timeout)?),
        };
        let mut head_json = common.clone();
        let mut head_sse = common;
        head_json.insert(ACCEPT, HeaderValue::from_static("application/json"));
        head_sse.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
        // Configured headers replace the endpoint's own of the same name.
        head_json.extend(configured.clone());
        head_sse.extend(configured);
        Ok(Endpoint {
            transport,
            head_json,
            head_sse,
            root,
            base_url: base.trim_end_matches('/').to_owned(),
            timeout: c.timeout,
            retry: c.retry,
        })
    }

    /// The target `path` (relative, may carry a query) below the API root.
    pub(crate) fn target(&self, path: &str) -> Result<Target, ChatError> {
        let url = self
            .root
            .join(path)
            .map_err(|e| config(format!("invalid URL {}/{path}: {e}", self.base_url)))?;
        let uri = hyper::Uri::try_from(path_of(&url))
            .map_err(|e| config(format!("invalid URL {url}: {e}")))?;
        Ok(Target { url, uri })
    }

    /// Sends `body` to `target`, retrying connection failures, timeouts and the statuses
    /// `on_status` calls retryable, before the first byte of a successful response.
    pub(crate) async fn send(
        &self,
        target: &Target,
        body: &Bytes,
        extra_headers: Option<&HeaderMap>,
        stream: bool,
        on_status: StatusMapper,
    ) -> Result<Resp, ChatError> {
        let head = if stream {
            &self.head_sse
        } else {
            &self.head_json
        };
        let mut attempt = 0u32;
        loop {
            let sent = match &self.transport {
                Transport::Hyper(http) => {
                    let make = || {
                        let mut req = hyper::Request::new(Full::new(body.clone()));
                        *req.method_mut() = hyper::Method::POST;
                        *req.uri_mut() = target.uri.clone();
                        *req.headers_mut() = head.clone();
                        if let Some(h) = extra_headers {
                            req.headers_mut().extend(h.clone());
                        }
                        req
                    };
                    http.send(make)
                        .await
                        .map(Resp::Hyper)
                        .map_err(|f| self.hyper_failure(f))
                }
                Transport::Reqwest(http) => {
                    let mut req = http
                        .post(target.url.clone())
                        .headers(head.clone())
                        .body(body.clone());
                    if let Some(h) = extra_headers {
                        req = req.headers(h.clone());
                    }
                    if !stream {
                        req = req.timeout(self.timeout);
                    }
                    req.send()
                        .await
                        .map(Resp::Reqwest)
                        .map_err(|e| transport_error(e, false))
                }
            };
            let (error, retry) = match sent {
                Ok(resp) if (200..300).contains(&resp.status()) => return Ok(resp),
                Ok(resp) => {
                    let status = resp.status();
                    let ra = resp.retry_after();
                    let body = resp.bytes().await.unwrap_or_default();
                    let e = on_status(status, &body, ra);
                    (e.error, e.retry)
                }
                Err(e) => {
                    let retry = matches!(e.kind(), ChatErrorKind::Connect | ChatErrorKind::Timeout);
                    (e, retry)
                }
            };
            if !retry || attempt >= self.retry.max_retries {
                return Err(error);
            }
            let delay = self.retry.delay(attempt, error.retry_after());
            tracing::debug!(
                target: "cairn_providers::openai",
                attempt = attempt + 1,
                delay_ms = delay.as_millis() as u64,
                error = %error,
                "retrying model call"
            );
            tokio::time::sleep(delay).await;
            attempt += 1;
        }
    }

    fn hyper_failure(&self, f: http1::Failure) -> ChatError {
        match f {
            http1::Failure::Connect(e) => ChatError::new(
                ChatErrorKind::Connect,
                format!("could not connect to {}: {e}", self.base_url),
            )
            .with_source(e),
            http1::Failure::Send(e) => ChatError::new(
                ChatErrorKind::Connect,
                format!(
                    "the connection to {} failed before a response: {e}",
                    self.base_url
                ),
            )
            .with_source(e),
            http1::Failure::Protocol(e) => ChatError::new(
                ChatErrorKind::Decode,
                format!("invalid HTTP response from {}: {e}", self.base_url),
            )
            .with_source(e),
            http1::Failure::Timeout => ChatError::new(
                ChatErrorKind::Timeout,
                format!(
                    "no response from {} within {:?}",
                    self.base_url, self.timeout
                ),
            ),
        }
    }
}
