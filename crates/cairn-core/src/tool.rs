//! Tools: what the model can call.
//!
//! A [`Tool`] has a [`ToolSpec`] (name, description, parameter schema, approval mode) and an
//! `invoke` that receives the [`FunctionInvocationContext`] of the call. Write tools with the
//! `#[tool]` macro (re-exported by the `cairn` crate), or without it through [`FnTool`].

use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize, de::DeserializeOwned};
use serde_json::Value;

use crate::client::BoxFuture;
use crate::context::FunctionInvocationContext;
use crate::error::ToolError;
use crate::message::{Content, join_text};

/// Whether a call of the tool needs a human's approval before it runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalMode {
    /// Runs without asking (the default).
    #[default]
    NeverRequire,
    /// Every call waits for approval.
    AlwaysRequire,
}

/// What the model sees of a tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// The name the model calls it by (`[A-Za-z0-9_-]{1,64}`).
    pub name: String,
    /// What it does and when to use it.
    pub description: String,
    /// JSON schema of the arguments object.
    pub parameters: Value,
    /// Whether calls need approval.
    #[serde(default)]
    pub approval_mode: ApprovalMode,
}

impl ToolSpec {
    /// A spec with the default approval mode.
    pub fn new(name: impl Into<String>, description: impl Into<String>, parameters: Value) -> Self {
        ToolSpec {
            name: name.into(),
            description: description.into(),
            parameters,
            approval_mode: ApprovalMode::NeverRequire,
        }
    }
}

/// What a tool call produced: the parts the model will read.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolOutput {
    /// Text and image parts.
    pub parts: Vec<Content>,
    /// Whether this reports a failure.
    #[serde(default)]
    pub is_error: bool,
}

impl ToolOutput {
    /// A text output.
    pub fn text(text: impl Into<String>) -> Self {
        ToolOutput {
            parts: vec![Content::text(text)],
            is_error: false,
        }
    }

    /// An error output; the text should start with `Error:` and tell the model what to do next.
    pub fn error(text: impl Into<String>) -> Self {
        ToolOutput {
            parts: vec![Content::text(text)],
            is_error: true,
        }
    }

    /// The text parts joined.
    pub fn text_content(&self) -> String {
        join_text(&self.parts)
    }
}

/// Converts what a tool function returns into a [`ToolOutput`].
pub trait IntoToolOutput {
    /// The conversion.
    fn into_tool_output(self) -> ToolOutput;
}

impl IntoToolOutput for ToolOutput {
    fn into_tool_output(self) -> ToolOutput {
        self
    }
}
impl IntoToolOutput for String {
    fn into_tool_output(self) -> ToolOutput {
        ToolOutput::text(self)
    }
}
impl IntoToolOutput for &str {
    fn into_tool_output(self) -> ToolOutput {
        ToolOutput::text(self)
    }
}
impl IntoToolOutput for () {
    fn into_tool_output(self) -> ToolOutput {
        ToolOutput::text("")
    }
}
impl IntoToolOutput for Value {
    fn into_tool_output(self) -> ToolOutput {
        match self {
            Value::String(s) => ToolOutput::text(s),
            Value::Null => ToolOutput::text(""),
            other => ToolOutput::text(other.to_string()),
        }
    }
}
impl IntoToolOutput for Vec<Content> {
    fn into_tool_output(self) -> ToolOutput {
        ToolOutput {
            parts: self,
            is_error: false,
        }
    }
}
impl<T: IntoToolOutput> IntoToolOutput for Option<T> {
    fn into_tool_output(self) -> ToolOutput {
        match self {
            Some(v) => v.into_tool_output(),
            None => ToolOutput::text(""),
        }
    }
}
macro_rules! display_output {
    ($($t:ty),*) => {$(
        impl IntoToolOutput for $t {
            fn into_tool_output(self) -> ToolOutput { ToolOutput::text(self.to_string()) }
        }
    )*};
}
display_output!(
    bool, i8, i16, i32, i64, u8, u16, u32, u64, usize, isize, f32, f64
);

/// Wraps any serializable value so a tool can return it as JSON text.
#[derive(Debug, Clone)]
pub struct Json<T>(pub T);

impl<T: Serialize> IntoToolOutput for Json<T> {
    fn into_tool_output(self) -> ToolOutput {
        match serde_json::to_string(&self.0) {
            Ok(s) => ToolOutput::text(s),
            Err(e) => ToolOutput::error(format!(
                "Error: the tool's result could not be serialized: {e}"
            )),
        }
    }
}

/// Converts the return value of a fallible tool function.
pub fn result_into_output<T: IntoToolOutput, E: std::fmt::Display>(
    r: Result<T, E>,
) -> Result<ToolOutput, ToolError> {
    r.map(IntoToolOutput::into_tool_output)
        .map_err(ToolError::failed)
}

/// Parses tool arguments into `T`, with an error the model can act on.
pub fn parse_arguments<T: DeserializeOwned>(arguments: &Value) -> Result<T, ToolError> {
    T::deserialize(arguments).map_err(|e| ToolError::InvalidArguments(e.to_string()))
}

/// Something the model can call.
pub trait Tool: Send + Sync + 'static {
    /// Name, description, schema and approval mode.
    fn spec(&self) -> &ToolSpec;

    /// Runs one call. Arguments are in `ctx.arguments`; runtime values in `ctx.kwargs`,
    /// `ctx.session` and `ctx.extensions`.
    fn invoke<'a>(
        &'a self,
        ctx: &'a FunctionInvocationContext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>>;
}

/// A shared, type-erased tool.
pub type SharedTool = Arc<dyn Tool>;

/// Turns a value into a [`SharedTool`]: any `Tool`, or an already shared one.
pub trait IntoTool {
    /// The conversion.
    fn into_tool(self) -> SharedTool;
}

impl<T: Tool> IntoTool for T {
    fn into_tool(self) -> SharedTool {
        Arc::new(self)
    }
}

impl IntoTool for SharedTool {
    fn into_tool(self) -> SharedTool {
        self
    }
}

type DynHandler = dyn Fn(FunctionInvocationContext) -> BoxFuture<'static, Result<ToolOutput, ToolError>>
    + Send
    + Sync;

/// A tool built without the macro: a name, a description, a schema and an async closure.
///
/// ```
/// use cairn_core::{FnTool, ToolOutput};
/// let upper = FnTool::new(
///     "upper",
///     "Upper-cases a text.",
///     serde_json::json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
///     |ctx| async move {
///         let text = ctx.arguments["text"].as_str().unwrap_or_default().to_uppercase();
///         Ok(ToolOutput::text(text))
///     },
/// );
/// assert_eq!(cairn_core::Tool::spec(&upper).name, "upper");
/// ```
pub struct FnTool {
    spec: ToolSpec,
    handler: Box<DynHandler>,
}

impl FnTool {
    /// A tool whose closure receives (a copy of) the invocation context.
    pub fn new<F, Fut>(
        name: impl Into<String>,
        description: impl Into<String>,
        parameters: Value,
        f: F,
    ) -> Self
    where
        F: Fn(FunctionInvocationContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<ToolOutput, ToolError>> + Send + 'static,
    {
        FnTool {
            spec: ToolSpec::new(name, description, parameters),
            handler: Box::new(move |ctx| Box::pin(f(ctx))),
        }
    }

    /// A tool with an explicit input type: the schema comes from `A`, and the closure gets the
    /// parsed input and the context.
    pub fn typed<A, F, Fut, R>(
        name: impl Into<String>,
        description: impl Into<String>,
        f: F,
    ) -> Self
    where
        A: DeserializeOwned + JsonSchema + Send + 'static,
        F: Fn(A, FunctionInvocationContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = R> + Send + 'static,
        R: IntoToolOutput,
    {
        let f = Arc::new(f);
        FnTool {
            spec: ToolSpec::new(name, description, crate::schema::schema_for::<A>()),
            handler: Box::new(move |ctx| {
                let f = Arc::clone(&f);
                Box::pin(async move {
                    let args: A = parse_arguments(&ctx.arguments)?;
                    Ok(f(args, ctx).await.into_tool_output())
                })
            }),
        }
    }

    /// Sets the approval mode.
    pub fn approval_mode(mut self, mode: ApprovalMode) -> Self {
        self.spec.approval_mode = mode;
        self
    }
}

impl Tool for FnTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    fn invoke<'a>(
        &'a self,
        ctx: &'a FunctionInvocationContext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        (self.handler)(ctx.clone())
    }
}

/// A tool with another spec (renamed, redescribed, or with a different approval mode) that
/// delegates calls to the tool it wraps. Harness profiles use it to override descriptions.
pub struct RespecTool {
    spec: ToolSpec,
    inner: SharedTool,
}

impl RespecTool {
    /// Wraps `inner`, letting `f` edit a copy of its spec.
    pub fn new(inner: SharedTool, f: impl FnOnce(&mut ToolSpec)) -> Self {
        let mut spec = inner.spec().clone();
        f(&mut spec);
        RespecTool { spec, inner }
    }
}

impl Tool for RespecTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    fn invoke<'a>(
        &'a self,
        ctx: &'a FunctionInvocationContext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        self.inner.invoke(ctx)
    }
}

/// A value whose methods are tools (SPEC R1.5): long-lived dependencies live on the value.
/// `#[tools]` on an `impl` block implements it.
pub trait ToolSet: Send + Sync + 'static {
    /// One tool per `#[tool]` method, all sharing `self`.
    fn tools(self: Arc<Self>) -> Vec<SharedTool>;
}

/// Checks a tool name against the rule providers enforce: 1–64 of `[A-Za-z0-9_-]`.
pub fn is_valid_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Turns any name into a valid tool name: other characters become `_`, runs of `_` collapse,
/// a leading digit gets a `_` prefix, and an empty result becomes `agent`.
pub fn sanitize_tool_name(name: &str) -> String {
    let mut out = String::new();
    for ch in name.chars() {
        let c = if ch.is_ascii_alphanumeric() || ch == '_' || ch == '-' {
            ch
        } else {
            '_'
        };
        if c == '_' && out.ends_with('_') {
            continue;
        }
        out.push(c);
    }
    let trimmed = out.trim_matches('_').to_owned();
    let mut out = if trimmed.is_empty() {
        "agent".to_owned()
    } else {
        trimmed
    };
    if out.as_bytes()[0].is_ascii_digit() {
        out.insert(0, '_');
    }
    out.truncate(64);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitizes_like_the_reference() {
        assert_eq!(
            sanitize_tool_name("Invoice & Billing Agent"),
            "Invoice_Billing_Agent"
        );
        assert_eq!(sanitize_tool_name("123Agent"), "_123Agent");
        assert_eq!(sanitize_tool_name("!!!"), "agent");
        assert!(is_valid_tool_name("read_file"));
        assert!(!is_valid_tool_name("read file"));
    }
}
