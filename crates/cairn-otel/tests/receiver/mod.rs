//! An in-process OTLP/HTTP receiver: a local HTTP server that records what the exporter
//! posts, and decoders for both wire formats.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use cairn_test_support::{Reply, TestServer};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message as _;

/// Starts the receiver (it answers every export with 200).
pub async fn start() -> TestServer {
    TestServer::start(|_, _| Reply::ok("")).await
}

/// Every span the receiver got, decoded from protobuf or JSON by the content type.
pub fn spans(server: &TestServer) -> Vec<Span> {
    let mut out = Vec::new();
    for r in server.requests() {
        assert_eq!(r.path, "/v1/traces", "exports go to the traces path");
        let req = if r.header("content-type").is_some_and(|c| c.contains("json")) {
            serde_json::from_slice::<ExportTraceServiceRequest>(&r.body).expect("OTLP JSON")
        } else {
            ExportTraceServiceRequest::decode(r.body.as_slice()).expect("OTLP protobuf")
        };
        for rs in req.resource_spans {
            for ss in rs.scope_spans {
                out.extend(ss.spans);
            }
        }
    }
    out
}

/// The string (or number, as text) value of attribute `key`.
pub fn attr(span: &Span, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| {
            kv.value.as_ref().and_then(|v| match &v.value {
                Some(AnyValue::StringValue(s)) => Some(s.clone()),
                Some(AnyValue::IntValue(i)) => Some(i.to_string()),
                Some(AnyValue::DoubleValue(d)) => Some(d.to_string()),
                Some(AnyValue::BoolValue(b)) => Some(b.to_string()),
                _ => None,
            })
        })
}
