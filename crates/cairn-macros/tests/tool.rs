//! `#[tool]` on free functions: schemas, context injection, invocation.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use cairn_core::{
    AgentSession, ApprovalMode, FunctionInvocationContext, Kwargs, SharedTool, Tool, ToolError,
    ToolOutput,
};
use cairn_macros::tool;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

mod common;
use common::send_email;

/// Invokes `tool` the way the agent loop does: a context carrying the arguments and kwargs.
async fn invoke(
    tool: impl Tool,
    arguments: Value,
    kwargs: Kwargs,
    session: Option<AgentSession>,
) -> Result<ToolOutput, ToolError> {
    let tool: SharedTool = Arc::new(tool);
    let mut ctx = FunctionInvocationContext::new(Arc::clone(&tool), "call-1", arguments);
    ctx.kwargs = kwargs;
    ctx.session = session;
    tool.invoke(&ctx).await
}

async fn invoke_text(tool: impl Tool, arguments: Value) -> String {
    invoke(tool, arguments, Kwargs::new(), None)
        .await
        .unwrap()
        .text_content()
}

fn required(spec_params: &Value) -> Vec<String> {
    spec_params["required"]
        .as_array()
        .map(|a| a.iter().map(|v| v.as_str().unwrap().to_owned()).collect())
        .unwrap_or_default()
}

fn property_names(spec_params: &Value) -> Vec<String> {
    spec_params["properties"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect()
}

// ---- the seed's tools -------------------------------------------------------------------

// `send_email` (the seed's email tool) is in `common`, shared with `agent.rs`.

#[test]
fn seed_send_email_schema_hides_the_context() {
    let spec = send_email.spec();
    assert_eq!(spec.name, "send_email");
    assert_eq!(
        spec.description,
        "Queue an email to a recipient.\n\nThe sender comes from the runtime context."
    );
    assert_eq!(spec.approval_mode, ApprovalMode::NeverRequire);
    let p = &spec.parameters;
    assert_eq!(p["type"], "object");
    assert_eq!(p["additionalProperties"], false);
    assert_eq!(property_names(p), ["address"]);
    assert_eq!(required(p), ["address"]);
    assert_eq!(
        p["properties"]["address"]["description"],
        "Recipient email address."
    );
    assert!(!p.to_string().contains("ctx"));
}

#[tokio::test]
async fn seed_send_email_reads_kwargs() {
    let out = invoke(
        send_email,
        json!({"address": "finance@example.com"}),
        Kwargs::from([("user_id", "user-123"), ("tenant", "contoso")]),
        None,
    )
    .await
    .unwrap();
    assert_eq!(
        out.text_content(),
        "Queued email for finance@example.com from user-123 (contoso)"
    );
    assert!(!out.is_error);

    // `tenant` falls back to its default when the kwargs do not carry it.
    let out = invoke(
        send_email,
        json!({"address": "a@example.com"}),
        Kwargs::from([("user_id", "user-9")]),
        None,
    )
    .await
    .unwrap();
    assert_eq!(
        out.text_content(),
        "Queued email for a@example.com from user-9 (default)"
    );
}

#[test]
fn the_original_function_stays_callable() {
    let tool: SharedTool = Arc::new(send_email);
    let mut ctx = FunctionInvocationContext::new(tool, "c", json!({}));
    ctx.kwargs.insert("user_id", "u1");
    assert_eq!(
        send_email::call("x@example.com".to_owned(), &ctx),
        "Queued email for x@example.com from u1 (default)"
    );
}

/// Remember a topic in the session.
#[tool]
fn remember_topic(
    /// Topic to remember.
    topic: String,
    // Any name, and the context type through a full path.
    invocation: &cairn_core::context::FunctionInvocationContext,
) -> String {
    let Some(session) = &invocation.session else {
        return "No session available.".to_owned();
    };
    session
        .state()
        .insert_value("topic", Value::String(topic.clone()));
    format!("Stored {topic:?} in session state.")
}

#[tokio::test]
async fn session_is_reachable_through_the_context() {
    let spec = remember_topic.spec();
    assert_eq!(property_names(&spec.parameters), ["topic"]);

    let session = AgentSession::new();
    let out = invoke(
        remember_topic,
        json!({"topic": "budget review"}),
        Kwargs::new(),
        Some(session.clone()),
    )
    .await
    .unwrap();
    assert_eq!(
        out.text_content(),
        "Stored \"budget review\" in session state."
    );
    assert_eq!(
        session.state().get::<String>("topic").as_deref(),
        Some("budget review")
    );

    let out = invoke_text(remember_topic, json!({"topic": "t"})).await;
    assert_eq!(out, "No session available.");
}

#[tool(description = "Store findings for later steps.")]
fn store_findings(findings: String, ctx: FunctionInvocationContext) {
    // By value: the macro hands the tool a clone of the context.
    if let Some(session) = &ctx.session {
        session
            .state()
            .insert_value("findings", Value::String(findings));
    }
}

#[tokio::test]
async fn description_override_unit_return_and_context_by_value() {
    let spec = store_findings.spec();
    assert_eq!(spec.description, "Store findings for later steps.");
    assert_eq!(property_names(&spec.parameters), ["findings"]);
    let session = AgentSession::new();
    let out = invoke(
        store_findings,
        json!({"findings": "42"}),
        Kwargs::new(),
        Some(session.clone()),
    )
    .await
    .unwrap();
    assert_eq!(out.text_content(), "");
    assert_eq!(
        session.state().get::<String>("findings").as_deref(),
        Some("42")
    );
}

// ---- schemas ----------------------------------------------------------------------------

/// A temperature unit.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize, serde::Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Unit {
    Celsius,
    Fahrenheit,
}

/// Get the weather forecast.
#[tool]
async fn forecast(
    /// The city to look up.
    city: String,
    /// How many days ahead.
    days: Option<u32>,
    /// The unit of temperatures.
    #[default(Unit::Celsius)]
    unit: Unit,
    /// Which tenant's weather service to use.
    #[default("contoso")]
    tenant: String,
    #[default(3)] samples: u64,
    #[serde(rename = "detail-level")] detail: Option<String>,
    _ctx: &FunctionInvocationContext,
) -> String {
    tokio::task::yield_now().await;
    format!(
        "{city} {} {unit:?} {tenant} {samples} {}",
        days.unwrap_or(1),
        detail.unwrap_or_default()
    )
}

#[test]
fn schema_from_signature_and_doc_comments() {
    let spec = forecast.spec();
    let p = &spec.parameters;
    assert_eq!(spec.description, "Get the weather forecast.");
    assert_eq!(
        property_names(p),
        ["city", "days", "unit", "tenant", "samples", "detail-level"]
    );
    // Option and defaulted parameters are optional; the context is nowhere.
    assert_eq!(required(p), ["city"]);
    assert!(!p.to_string().contains("_ctx"));
    assert_eq!(p["additionalProperties"], false);
    assert_eq!(p["properties"]["city"]["type"], "string");
    assert_eq!(
        p["properties"]["city"]["description"],
        "The city to look up."
    );
    assert_eq!(
        p["properties"]["days"]["description"],
        "How many days ahead."
    );
    assert_eq!(p["properties"]["days"]["type"], json!(["integer", "null"]));
    assert_eq!(
        p["properties"]["unit"]["enum"],
        json!(["celsius", "fahrenheit"])
    );
    assert_eq!(p["properties"]["unit"]["default"], "celsius");
    assert_eq!(
        p["properties"]["unit"]["description"],
        "The unit of temperatures."
    );
    assert_eq!(p["properties"]["tenant"]["default"], "contoso");
    assert_eq!(p["properties"]["samples"]["default"], 3);
    assert!(p.get("$defs").is_none());
}

#[tokio::test]
async fn defaults_apply_when_arguments_are_left_out() {
    let out = invoke_text(forecast, json!({"city": "Oslo"})).await;
    assert_eq!(out, "Oslo 1 Celsius contoso 3 ");
    let out = invoke_text(
        forecast,
        json!({"city": "Rome", "days": 4, "unit": "fahrenheit", "tenant": "fabrikam",
               "samples": 7, "detail-level": "high"}),
    )
    .await;
    assert_eq!(out, "Rome 4 Fahrenheit fabrikam 7 high");
}

#[test]
fn the_schema_is_computed_once() {
    assert!(std::ptr::eq(forecast.spec(), forecast.spec()));
}

// ---- errors -----------------------------------------------------------------------------

#[tokio::test]
async fn bad_arguments_are_invalid_arguments() {
    let err = invoke(forecast, json!({"days": 2}), Kwargs::new(), None)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ToolError::InvalidArguments(m) if m.contains("city")),
        "{err:?}"
    );
    let err = invoke(
        forecast,
        json!({"city": "Oslo", "unit": "kelvin"}),
        Kwargs::new(),
        None,
    )
    .await
    .unwrap_err();
    assert!(
        matches!(&err, ToolError::InvalidArguments(m) if m.contains("kelvin")),
        "{err:?}"
    );
    let err = invoke(forecast, json!({"city": 5}), Kwargs::new(), None)
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::InvalidArguments(_)), "{err:?}");
}

/// Divide two numbers.
#[tool]
fn divide(a: f64, b: f64) -> Result<f64, String> {
    if b == 0.0 {
        Err("cannot divide by zero".to_owned())
    } else {
        Ok(a / b)
    }
}

#[tool]
async fn fetch_page(url: String) -> std::io::Result<String> {
    tokio::task::yield_now().await;
    Err(std::io::Error::other(format!("unreachable: {url}")))
}

#[tokio::test]
async fn fallible_functions_map_errors_to_tool_errors() {
    assert_eq!(
        invoke_text(divide, json!({"a": 6.0, "b": 4.0})).await,
        "1.5"
    );
    let err = invoke(divide, json!({"a": 1, "b": 0}), Kwargs::new(), None)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ToolError::Failed(m) if m == "cannot divide by zero"),
        "{err:?}"
    );
    let err = invoke(fetch_page, json!({"url": "x"}), Kwargs::new(), None)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ToolError::Failed(m) if m == "unreachable: x"),
        "{err:?}"
    );
}

// ---- options, sync/async, borrowed parameters ----------------------------------------------

/// Delete a file.
#[tool(name = "delete-file", approval_mode = "always_require")]
pub async fn delete_file(path: &str) -> String {
    tokio::task::yield_now().await;
    format!("deleted {path}")
}

#[tokio::test]
async fn name_and_approval_mode_options() {
    let spec = delete_file.spec();
    assert_eq!(spec.name, "delete-file");
    assert_eq!(spec.approval_mode, ApprovalMode::AlwaysRequire);
    assert_eq!(spec.parameters["properties"]["path"]["type"], "string");
    assert_eq!(
        invoke_text(delete_file, json!({"path": "/tmp/a"})).await,
        "deleted /tmp/a"
    );
    // The async body stays callable, and async.
    assert_eq!(delete_file::call("b").await, "deleted b");
}

#[tool]
fn total(values: &[i64], label: &str, unit: &Unit) -> String {
    format!("{label}={} {unit:?}", values.iter().sum::<i64>())
}

#[tool]
fn ping() -> &'static str {
    "pong"
}

#[tokio::test]
async fn sync_functions_borrowed_parameters_and_no_arguments() {
    let spec = total.spec();
    assert_eq!(spec.parameters["properties"]["values"]["type"], "array");
    assert_eq!(
        invoke_text(
            total,
            json!({"values": [1, 2, 3], "label": "sum", "unit": "celsius"})
        )
        .await,
        "sum=6 Celsius"
    );
    assert_eq!(
        total::call(&[4, 5], "s", &Unit::Fahrenheit),
        "s=9 Fahrenheit"
    );

    assert_eq!(
        property_names(&ping.spec().parameters),
        Vec::<String>::new()
    );
    assert_eq!(ping.spec().description, "");
    assert_eq!(invoke_text(ping, json!({})).await, "pong");
    // A model may send `null` arguments for a call without parameters.
    assert_eq!(invoke_text(ping, Value::Null).await, "pong");
}

// ---- explicit input type ------------------------------------------------------------------

/// Search query.
#[derive(Debug, Deserialize, JsonSchema)]
struct SearchArgs {
    /// What to look for.
    query: String,
    /// How many hits.
    limit: Option<u32>,
}

type Ctx = FunctionInvocationContext;

/// Search the knowledge base.
#[tool(input = SearchArgs)]
async fn search(args: SearchArgs, ctx: &Ctx) -> String {
    let user = ctx.kwargs.get_str("user_id").unwrap_or("?");
    format!("{user}:{}:{}", args.query, args.limit.unwrap_or(10))
}

#[tool(input = SearchArgs, name = "search_plain")]
fn search_no_context(args: &SearchArgs) -> String {
    args.query.to_uppercase()
}

#[tokio::test]
async fn explicit_input_type_injects_ctx_by_name() {
    let spec = search.spec();
    assert_eq!(spec.name, "search");
    assert_eq!(spec.description, "Search the knowledge base.");
    let p = &spec.parameters;
    assert_eq!(property_names(p), ["query", "limit"]);
    assert_eq!(required(p), ["query"]);
    assert_eq!(p["properties"]["query"]["description"], "What to look for.");
    assert!(!p.to_string().contains("ctx"));

    let out = invoke(
        search,
        json!({"query": "rust", "limit": 3}),
        Kwargs::from([("user_id", "u7")]),
        None,
    )
    .await
    .unwrap();
    assert_eq!(out.text_content(), "u7:rust:3");
    let err = invoke(search, json!({"limit": 3}), Kwargs::new(), None)
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::InvalidArguments(_)), "{err:?}");

    assert_eq!(
        invoke_text(search_no_context, json!({"query": "abc"})).await,
        "ABC"
    );
}

// ---- a tool named like a keyword, and rich outputs ---------------------------------------

#[tool]
fn r#match(r#type: String) -> cairn_core::Json<Vec<String>> {
    cairn_core::Json(vec![r#type.clone(), r#type])
}

#[tokio::test]
async fn raw_identifiers_and_json_output() {
    assert_eq!(r#match.spec().name, "match");
    assert_eq!(property_names(&r#match.spec().parameters), ["type"]);
    assert_eq!(
        invoke_text(r#match, json!({"type": "a"})).await,
        r#"["a","a"]"#
    );
}

// ---- an explicitly marked context ----------------------------------------------------------

/// Who is calling.
#[tool]
fn whoami(#[context] c: &Ctx) -> String {
    c.kwargs.get_str("user_id").unwrap_or("?").to_owned()
}

#[tokio::test]
async fn a_context_marked_explicitly_is_injected_through_an_alias() {
    assert_eq!(
        property_names(&whoami.spec().parameters),
        Vec::<String>::new()
    );
    let out = invoke(whoami, json!({}), Kwargs::from([("user_id", "u3")]), None)
        .await
        .unwrap();
    assert_eq!(out.text_content(), "u3");
}
