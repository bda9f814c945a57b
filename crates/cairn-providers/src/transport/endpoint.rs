//! The HTTP plumbing every provider client shares: the transport (hyper for plain `http://`,
//! `reqwest` otherwise), the headers sent with every request, the retry loop, the first-byte
//! timeout, the read of error bodies (capped), and the redaction of every error it returns.

use std::time::Duration;

use bytes::Bytes;
use cairn_core::{BoxFuture, ChatError, ChatErrorKind, ChatResponse, ChatStream};
use http_body_util::Full;
use reqwest::Url;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HOST, HeaderMap, HeaderName, HeaderValue};

use super::error::ApiError;
use super::retry::RetryPolicy;
use super::{
    Resp, StreamDecoder, Transport, http_client, http1, path_of, proxy_in_env, transport_error,
};
use crate::http_options::{ERROR_BODY_BYTES, HttpOptions};
use crate::redact::{Redactor, redact_url};

/// How a non-success HTTP answer (status, body, `Retry-After`) becomes an error.
pub(crate) type StatusMapper = fn(u16, &[u8], Option<Duration>) -> ApiError;

/// What an [`Endpoint`] is built from.
pub(crate) struct EndpointConfig<'a> {
    /// The API root (a trailing `/` is optional).
    pub(crate) base_url: &'a str,
    /// The API key (redacted from errors).
    pub(crate) key: Option<&'a str>,
    /// The authentication header (name, value); marked sensitive.
    pub(crate) auth: Option<(HeaderName, String)>,
    /// Configured headers; they replace the endpoint's own of the same name.
    pub(crate) headers: &'a [(String, String)],
    pub(crate) http: Option<reqwest::Client>,
    pub(crate) hyper_http1: bool,
    pub(crate) options: HttpOptions,
    pub(crate) retry: RetryPolicy,
}

/// A request body and the call's own headers (the client kwarg `extra_headers`).
pub(crate) struct Payload {
    pub(crate) body: Bytes,
    pub(crate) extra_headers: Option<HeaderMap>,
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
    /// The root as configured, without a trailing `/` (for the clients' `base_url()`).
    pub(crate) base_url: String,
    /// The same without `user:password@` (for messages and `Debug`).
    pub(crate) display_url: String,
    pub(crate) options: HttpOptions,
    pub(crate) retry: RetryPolicy,
    /// Removes this client's credentials from every error it returns.
    pub(crate) redactor: std::sync::Arc<Redactor>,
}

fn config(m: String) -> ChatError {
    ChatError::new(ChatErrorKind::Config, m)
}

impl Endpoint {
    /// Checks the URL and headers and picks the transport.
    pub(crate) fn new(c: EndpointConfig<'_>) -> Result<Self, ChatError> {
        let redactor = Redactor::new(c.key, c.headers, c.base_url);
        Self::build(c, &redactor).map_err(|e| redactor.error(e))
    }

    fn build(c: EndpointConfig<'_>, redactor: &Redactor) -> Result<Self, ChatError> {
        let shown = redact_url(c.base_url);
        let mut base = c.base_url.trim().trim_end_matches('/').to_owned();
        if base.is_empty() {
            return Err(config("the base URL is empty".into()));
        }
        base.push('/');
        let root =
            Url::parse(&base).map_err(|e| config(format!("invalid base URL {shown:?}: {e}")))?;
        if !matches!(root.scheme(), "http" | "https") {
            return Err(config(format!("the base URL {shown:?} is not http(s)")));
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
                    _ => return Err(config(format!("the base URL {shown:?} has no host"))),
                };
                let host_header = match root.port() {
                    Some(p) => format!("{}:{p}", root.host_str().unwrap_or("")),
                    None => root.host_str().unwrap_or("").to_owned(),
                };
                common.insert(
                    HOST,
                    HeaderValue::try_from(host_header)
                        .map_err(|_| config(format!("invalid host in {shown:?}")))?,
                );
                Transport::Hyper(std::sync::Arc::new(http1::Http1::new(
                    host, port, &c.options,
                )))
            }
            (None, false) => Transport::Reqwest(http_client(&c.options)?),
        };
        let mut head_json = common.clone();
        let mut head_sse = common;
        head_json.insert(ACCEPT, HeaderValue::from_static("application/json"));
        head_sse.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
        // Configured headers replace the endpoint's own of the same name.
        head_json.extend(configured.clone());
        head_sse.extend(configured);
        let base_url = base.trim_end_matches('/').to_owned();
        Ok(Endpoint {
            transport,
            head_json,
            head_sse,
            root,
            display_url: redact_url(&base_url),
            base_url,
            options: c.options,
            retry: c.retry,
            redactor: std::sync::Arc::new(redactor.clone()),
        })
    }

    /// The target `path` (relative, may carry a query) below the API root.
    pub(crate) fn target(&self, path: &str) -> Result<Target, ChatError> {
        let url = self.root.join(path).map_err(|e| {
            self.redact(config(format!(
                "invalid URL {}/{path}: {e}",
                self.display_url
            )))
        })?;
        let uri = hyper::Uri::try_from(path_of(&url)).map_err(|e| {
            self.redact(config(format!(
                "invalid URL {}/{path}: {e}",
                self.display_url
            )))
        })?;
        Ok(Target { url, uri })
    }

    /// `e` without this endpoint's credentials (see [`crate::redact`]).
    pub(crate) fn redact(&self, e: ChatError) -> ChatError {
        self.redactor.error(e)
    }

    /// A plain call: awaits `call` and redacts this endpoint's credentials from its error.
    pub(crate) fn respond<'a>(
        &'a self,
        call: impl Future<Output = Result<ChatResponse, ChatError>> + Send + 'a,
    ) -> BoxFuture<'a, Result<ChatResponse, ChatError>> {
        Box::pin(async move { call.await.map_err(|e| self.redact(e)) })
    }

    /// A streamed call: `open` sends the request, `decoder` maps the events of its body (see
    /// [`drive`](super::drive)); errors are redacted.
    pub(crate) fn stream<'a, D: StreamDecoder>(
        &self,
        open: impl Future<Output = Result<Resp, ChatError>> + Send + 'a,
        decoder: D,
    ) -> ChatStream<'a> {
        super::drive(
            Box::pin(open),
            decoder,
            std::sync::Arc::clone(&self.redactor),
        )
    }

    /// Sends `body` to `target`, retrying connection failures and the statuses `on_status`
    /// calls retryable (first-byte timeouts only when the policy says so), before the first
    /// byte of a successful response. Every error is redacted.
    pub(crate) async fn send(
        &self,
        target: &Target,
        payload: &Payload,
        stream: bool,
        on_status: StatusMapper,
    ) -> Result<Resp, ChatError> {
        let (body, extra_headers) = (&payload.body, payload.extra_headers.as_ref());
        let head = if stream {
            &self.head_sse
        } else {
            &self.head_json
        };
        let options = self.options;
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
                        .map(|r| Resp::hyper(r, options))
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
                    match tokio::time::timeout(options.first_byte_timeout, req.send()).await {
                        Ok(Ok(r)) => Ok(Resp::reqwest(r, options)),
                        Ok(Err(e)) => {
                            let retry = e.is_connect() || (e.is_request() && !e.is_timeout());
                            Err((transport_error(e, false), retry))
                        }
                        Err(_) => Err(self.first_byte_timeout()),
                    }
                }
            };
            let (error, retry) = match sent {
                Ok(resp) if (200..300).contains(&resp.status()) => return Ok(resp),
                Ok(resp) => {
                    let status = resp.status();
                    let ra = resp.retry_after();
                    let body = resp.prefix(ERROR_BODY_BYTES).await;
                    let e = on_status(status, &body, ra);
                    (e.error, e.retry)
                }
                Err(failure) => failure,
            };
            let error = self.redact(error);
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

    /// The error of a first-byte timeout, and whether the policy retries it.
    fn first_byte_timeout(&self) -> (ChatError, bool) {
        (
            ChatError::new(
                ChatErrorKind::Timeout,
                format!(
                    "no response from {} within {:?} (the first-byte timeout)",
                    self.display_url, self.options.first_byte_timeout
                ),
            ),
            self.retry.retry_first_byte_timeouts,
        )
    }

    /// A hyper transport failure as an error, and whether it may be retried.
    fn hyper_failure(&self, f: http1::Failure) -> (ChatError, bool) {
        let url = &self.display_url;
        match f {
            http1::Failure::Connect(e) => (
                ChatError::new(
                    ChatErrorKind::Connect,
                    format!("could not connect to {url}: {e}"),
                )
                .with_source(e),
                true,
            ),
            http1::Failure::Send(e) => (
                ChatError::new(
                    ChatErrorKind::Connect,
                    format!("the connection to {url} failed before a response: {e}"),
                )
                .with_source(e),
                true,
            ),
            http1::Failure::Protocol(e) => (
                ChatError::new(
                    ChatErrorKind::Decode,
                    format!("invalid HTTP response from {url}: {e}"),
                )
                .with_source(e),
                false,
            ),
            http1::Failure::ConnectTimeout => (
                ChatError::new(
                    ChatErrorKind::Timeout,
                    format!(
                        "could not connect to {url} within {:?} (the connect timeout)",
                        self.options.connect_timeout
                    ),
                ),
                true,
            ),
            http1::Failure::FirstByteTimeout => self.first_byte_timeout(),
        }
    }
}
