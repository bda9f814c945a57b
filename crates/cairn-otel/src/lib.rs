//! # cairn-otel
//!
//! Exports the spans cairn's library emits through `tracing` (named and attributed after the
//! OpenTelemetry GenAI semantic conventions: `invoke_agent {agent}`, `chat {model}`,
//! `execute_tool {tool}`; see `cairn_core::agent::telemetry`) over OTLP/HTTP, configured by the
//! standard variables:
//!
//! | variable | meaning |
//! | --- | --- |
//! | `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` | the traces URL, used as it is |
//! | `OTEL_EXPORTER_OTLP_ENDPOINT` | the collector's base URL; `/v1/traces` is appended |
//! | `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`, `OTEL_EXPORTER_OTLP_PROTOCOL` | `http/protobuf` (default) or `http/json` |
//! | `OTEL_EXPORTER_OTLP_TRACES_HEADERS`, `OTEL_EXPORTER_OTLP_HEADERS` | `key=value,key2=value2` (percent-decoded) |
//! | `OTEL_EXPORTER_OTLP_TRACES_TIMEOUT`, `OTEL_EXPORTER_OTLP_TIMEOUT` | milliseconds (default 10000) |
//! | `OTEL_SERVICE_NAME`, else `service.name` in `OTEL_RESOURCE_ATTRIBUTES` | the service name (default `cairn`) |
//! | `OTEL_TRACES_EXPORTER` | `otlp` (the default when an endpoint is set) or `none` |
//! | `OTEL_SDK_DISABLED` | `true` turns everything off |
//! | `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT` | `true` records messages, instructions, tool arguments and results (off by default) |
//!
//! With none of the endpoint variables set (and `OTEL_TRACES_EXPORTER` not `otlp`) tracing is
//! off: [`OtelConfig::from_env`] gives `None` and nothing is installed, so spans cost a
//! check of a static flag each.
//!
//! The library crates never install anything: this crate is for programs (the `cairn` CLI
//! calls [`init_from_env`]); a program with its own subscriber adds [`layer`] to it.

use std::collections::HashMap;
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::layer::SubscriberExt;

/// The wire format of the exporter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OtlpProtocol {
    /// `http/protobuf`.
    HttpProtobuf,
    /// `http/json`.
    HttpJson,
}

/// Where and how spans are exported.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct OtelConfig {
    /// The traces URL (`…/v1/traces`).
    pub endpoint: String,
    /// The wire format.
    pub protocol: OtlpProtocol,
    /// Headers sent with each export (authentication).
    pub headers: HashMap<String, String>,
    /// How long one export may take.
    pub timeout: Duration,
    /// `service.name`.
    pub service_name: String,
    /// Whether message contents, tool arguments and results are recorded.
    pub capture_content: bool,
}

/// The configuration or the exporter could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OtelError {
    /// A variable has a value that cannot be used.
    #[error("{name}: {message}")]
    Variable {
        /// The variable.
        name: &'static str,
        /// What is wrong.
        message: String,
    },
    /// The exporter could not be built.
    #[error("OTLP exporter: {0}")]
    Exporter(String),
    /// A global subscriber was already installed.
    #[error("a tracing subscriber is already installed: {0}")]
    Subscriber(String),
}

/// The default collector address for OTLP/HTTP.
pub const DEFAULT_ENDPOINT: &str = "http://localhost:4318";

fn truthy(v: &str) -> bool {
    matches!(
        v.trim().to_ascii_lowercase().as_str(),
        "true" | "1" | "yes" | "on"
    )
}

impl OtelConfig {
    /// A configuration exporting to `endpoint` (a traces URL) as protobuf, service `cairn`.
    pub fn new(endpoint: impl Into<String>) -> Self {
        OtelConfig {
            endpoint: endpoint.into(),
            protocol: OtlpProtocol::HttpProtobuf,
            headers: HashMap::new(),
            timeout: Duration::from_secs(10),
            service_name: "cairn".into(),
            capture_content: false,
        }
    }

    /// The configuration the process environment gives; `None` when tracing is off.
    pub fn from_env() -> Result<Option<Self>, OtelError> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// The configuration the variables `lookup` finds give; `None` when tracing is off (no
    /// endpoint variable and `OTEL_TRACES_EXPORTER` not `otlp`, or `OTEL_SDK_DISABLED=true`,
    /// or `OTEL_TRACES_EXPORTER=none`).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Option<Self>, OtelError> {
        let get = |k: &str| lookup(k).filter(|v| !v.trim().is_empty());
        if get("OTEL_SDK_DISABLED").is_some_and(|v| truthy(&v)) {
            return Ok(None);
        }
        let exporter = get("OTEL_TRACES_EXPORTER").map(|v| v.trim().to_ascii_lowercase());
        match exporter.as_deref() {
            Some("none") => return Ok(None),
            Some("otlp") | None => {}
            Some(other) => {
                return Err(OtelError::Variable {
                    name: "OTEL_TRACES_EXPORTER",
                    message: format!("`{other}` is not supported (otlp or none)"),
                });
            }
        }
        let endpoint = match (
            get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
            get("OTEL_EXPORTER_OTLP_ENDPOINT"),
        ) {
            (Some(e), _) => e.trim().to_owned(),
            (None, Some(base)) => format!("{}/v1/traces", base.trim().trim_end_matches('/')),
            (None, None) if exporter.is_some() => format!("{DEFAULT_ENDPOINT}/v1/traces"),
            (None, None) => return Ok(None),
        };
        let mut c = OtelConfig::new(endpoint);
        let protocol = get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
            .or_else(|| get("OTEL_EXPORTER_OTLP_PROTOCOL"));
        c.protocol = match protocol.as_deref().map(str::trim) {
            None | Some("http/protobuf") => OtlpProtocol::HttpProtobuf,
            Some("http/json") => OtlpProtocol::HttpJson,
            Some(other) => {
                return Err(OtelError::Variable {
                    name: "OTEL_EXPORTER_OTLP_PROTOCOL",
                    message: format!(
                        "`{other}` is not supported (http/protobuf or http/json; gRPC is not built in)"
                    ),
                });
            }
        };
        for var in [
            "OTEL_EXPORTER_OTLP_HEADERS",
            "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
        ] {
            if let Some(h) = get(var) {
                for pair in h.split(',').filter(|p| !p.trim().is_empty()) {
                    let Some((k, v)) = pair.split_once('=') else {
                        return Err(OtelError::Variable {
                            name: "OTEL_EXPORTER_OTLP_HEADERS",
                            message: "expected key=value pairs separated by commas".into(),
                        });
                    };
                    c.headers
                        .insert(percent_decode(k.trim()), percent_decode(v.trim()));
                }
            }
        }
        if let Some(t) =
            get("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT").or_else(|| get("OTEL_EXPORTER_OTLP_TIMEOUT"))
        {
            let ms: u64 = t.trim().parse().map_err(|_| OtelError::Variable {
                name: "OTEL_EXPORTER_OTLP_TIMEOUT",
                message: format!("`{t}` is not a number of milliseconds"),
            })?;
            c.timeout = Duration::from_millis(ms.max(1));
        }
        if let Some(s) = get("OTEL_SERVICE_NAME") {
            c.service_name = s.trim().to_owned();
        } else if let Some(name) = get("OTEL_RESOURCE_ATTRIBUTES").and_then(|attrs| {
            attrs.split(',').find_map(|kv| {
                kv.split_once('=')
                    .filter(|(k, _)| k.trim() == "service.name")
                    .map(|(_, v)| percent_decode(v.trim()))
            })
        }) {
            c.service_name = name;
        }
        c.capture_content =
            get("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT").is_some_and(|v| truthy(&v));
        Ok(Some(c))
    }
}

fn percent_decode(s: &str) -> String {
    let hex = |c: u8| (c as char).to_digit(16);
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2]))
        {
            out.push((h * 16 + l) as u8);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Flushes and stops the exporter when dropped (or by [`shutdown`](Self::shutdown)).
#[derive(Debug)]
pub struct OtelGuard {
    provider: Option<SdkTracerProvider>,
}

impl OtelGuard {
    /// Exports what is buffered now.
    pub fn flush(&self) {
        if let Some(p) = &self.provider {
            let _ = p.force_flush();
        }
    }

    /// Exports what is buffered and stops the exporter.
    pub fn shutdown(mut self) {
        if let Some(p) = self.provider.take() {
            let _ = p.shutdown();
        }
    }
}

impl Drop for OtelGuard {
    fn drop(&mut self) {
        if let Some(p) = self.provider.take() {
            let _ = p.shutdown();
        }
    }
}

fn provider(config: &OtelConfig) -> Result<SdkTracerProvider, OtelError> {
    // rustls needs a process-wide crypto provider for https endpoints.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let timeout = config.timeout;
    // A blocking client must be made (and dropped) outside an async runtime: its own thread.
    let client = std::thread::spawn(move || {
        reqwest::blocking::Client::builder()
            .timeout(timeout)
            .build()
    })
    .join()
    .map_err(|_| OtelError::Exporter("the HTTP client could not be made".into()))?
    .map_err(|e| OtelError::Exporter(e.to_string()))?;
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_http_client(client)
        .with_endpoint(config.endpoint.clone())
        .with_protocol(match config.protocol {
            OtlpProtocol::HttpProtobuf => Protocol::HttpBinary,
            OtlpProtocol::HttpJson => Protocol::HttpJson,
        })
        .with_timeout(config.timeout)
        .with_headers(config.headers.clone())
        .build()
        .map_err(|e| OtelError::Exporter(e.to_string()))?;
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(
            Resource::builder()
                .with_service_name(config.service_name.clone())
                .build(),
        )
        .build())
}

/// A `tracing` layer exporting spans as `config` says, and the guard that flushes it; for a
/// program that builds its own subscriber. It also applies `config.capture_content`.
pub fn layer<S>(
    config: &OtelConfig,
) -> Result<(impl tracing_subscriber::Layer<S>, OtelGuard), OtelError>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    let provider = provider(config)?;
    let tracer = provider.tracer("cairn");
    cairn_core::agent::telemetry::set_capture_content(config.capture_content);
    let layer = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_filter(tracing_subscriber::filter::Targets::new().with_default(tracing::Level::INFO));
    Ok((
        layer,
        OtelGuard {
            provider: Some(provider),
        },
    ))
}

use tracing_subscriber::Layer as _;

/// Installs a global subscriber exporting cairn's spans as `config` says.
pub fn init(config: &OtelConfig) -> Result<OtelGuard, OtelError> {
    let (layer, guard) = layer(config)?;
    let subscriber = tracing_subscriber::registry().with(layer);
    tracing::subscriber::set_global_default(subscriber)
        .map_err(|e| OtelError::Subscriber(e.to_string()))?;
    Ok(guard)
}

/// Installs the exporter when the environment asks for one ([`OtelConfig::from_env`]);
/// `Ok(None)` when tracing is off.
pub fn init_from_env() -> Result<Option<OtelGuard>, OtelError> {
    match OtelConfig::from_env()? {
        Some(c) => init(&c).map(Some),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    #[test]
    fn off_without_an_endpoint_and_on_with_one() {
        assert_eq!(OtelConfig::from_lookup(env(&[])).unwrap(), None);
        assert_eq!(
            OtelConfig::from_lookup(env(&[("OTEL_SERVICE_NAME", "x")])).unwrap(),
            None
        );
        let c = OtelConfig::from_lookup(env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318/")]))
            .unwrap()
            .unwrap();
        assert_eq!(c.endpoint, "http://c:4318/v1/traces");
        assert_eq!(c.protocol, OtlpProtocol::HttpProtobuf);
        assert_eq!(c.service_name, "cairn");
        assert!(!c.capture_content);
        let c = OtelConfig::from_lookup(env(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://t/x"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
            (
                "OTEL_EXPORTER_OTLP_HEADERS",
                "authorization=Bearer%20abc, x-team = t1",
            ),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "2500"),
            (
                "OTEL_RESOURCE_ATTRIBUTES",
                "deployment=dev,service.name=my-agent",
            ),
            ("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(c.endpoint, "http://t/x");
        assert_eq!(c.protocol, OtlpProtocol::HttpJson);
        assert_eq!(c.headers["authorization"], "Bearer abc");
        assert_eq!(c.headers["x-team"], "t1");
        assert_eq!(c.timeout, Duration::from_millis(2500));
        assert_eq!(c.service_name, "my-agent");
        assert!(c.capture_content);
        let c = OtelConfig::from_lookup(env(&[("OTEL_TRACES_EXPORTER", "otlp")]))
            .unwrap()
            .unwrap();
        assert_eq!(c.endpoint, "http://localhost:4318/v1/traces");
        for off in [
            vec![
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c"),
                ("OTEL_SDK_DISABLED", "true"),
            ],
            vec![
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c"),
                ("OTEL_TRACES_EXPORTER", "none"),
            ],
        ] {
            assert_eq!(OtelConfig::from_lookup(env(&off)).unwrap(), None);
        }
        assert!(
            OtelConfig::from_lookup(env(&[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c"),
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            ]))
            .is_err()
        );
    }
}
