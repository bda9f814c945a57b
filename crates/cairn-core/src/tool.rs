//! Tools: what the model can call.
//!
//! A [`Tool`] has a [`ToolSpec`] (name, description, parameter schema, approval mode) and an
//! `invoke` that receives the [`FunctionInvocationContext`] of the call. Write tools with the
//! `#[tool]` macro (re-exported by the `cairn` crate), or without it through [`FnTool`].

use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize, de::DeserializeOwned};
use serde_json::Value;
use serde_json::value::RawValue;

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

/// A tool's parameter schema: an immutable JSON value, shared between clones and serialized
/// once when it is made.
///
/// Every model call sends the schemas of all the agent's tools, so they are made once per tool
/// (at agent build) instead of once per request: cloning a `ToolParameters` is a reference-count
/// increment, providers write [`json`](Self::json) into the request as it is (serde's
/// `Serialize` writes the value, for serializers other than serde_json's), and
/// [`fingerprint`](Self::fingerprint) lets caches key on the schema without reading it. It reads
/// like a [`Value`] (it derefs to one, compares equal to one, and displays as its JSON); to
/// change it, build a new one ([`edit`](Self::edit) does that).
#[derive(Clone)]
pub struct ToolParameters(Arc<ParametersInner>);

struct ParametersInner {
    value: Value,
    json: Box<RawValue>,
    fingerprint: u64,
}

impl ToolParameters {
    /// Takes `value` and serializes it once.
    pub fn new(value: Value) -> Self {
        // A `Value` always serializes (its map keys are strings); the fallback is unreachable.
        let json = serde_json::value::to_raw_value(&value).unwrap_or_default();
        let mut h = std::hash::DefaultHasher::new();
        std::hash::Hasher::write(&mut h, json.get().as_bytes());
        let fingerprint = std::hash::Hasher::finish(&h);
        ToolParameters(Arc::new(ParametersInner {
            value,
            json,
            fingerprint,
        }))
    }

    /// The schema as a JSON value.
    pub fn value(&self) -> &Value {
        &self.0.value
    }

    /// The schema's JSON text, serialized when it was made (compact, keys in schema order).
    pub fn json(&self) -> &RawValue {
        &self.0.json
    }

    /// A 64-bit hash of [`json`](Self::json), computed once, for cache keys (stable within a
    /// process, not across Rust versions).
    pub fn fingerprint(&self) -> u64 {
        self.0.fingerprint
    }

    /// A copy of the schema edited by `f` (serialized anew).
    #[must_use]
    pub fn edit(&self, f: impl FnOnce(&mut Value)) -> Self {
        let mut v = self.0.value.clone();
        f(&mut v);
        ToolParameters::new(v)
    }
}

impl Default for ToolParameters {
    /// `{"type": "object", "properties": {}}`: a tool without arguments.
    fn default() -> Self {
        ToolParameters::new(serde_json::json!({"type": "object", "properties": {}}))
    }
}

impl std::ops::Deref for ToolParameters {
    type Target = Value;
    fn deref(&self) -> &Value {
        &self.0.value
    }
}

impl AsRef<Value> for ToolParameters {
    fn as_ref(&self) -> &Value {
        &self.0.value
    }
}

impl From<Value> for ToolParameters {
    fn from(value: Value) -> Self {
        ToolParameters::new(value)
    }
}

impl From<ToolParameters> for Value {
    fn from(p: ToolParameters) -> Value {
        p.0.value.clone()
    }
}

impl PartialEq for ToolParameters {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0.json.get() == other.0.json.get()
    }
}

impl PartialEq<Value> for ToolParameters {
    fn eq(&self, other: &Value) -> bool {
        self.0.value == *other
    }
}

impl std::fmt::Debug for ToolParameters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&self.0.value, f)
    }
}

impl std::fmt::Display for ToolParameters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0.json.get())
    }
}

/// Serializes the value (any serializer understands it); writers of JSON that want the
/// pre-serialized text use [`ToolParameters::json`].
impl Serialize for ToolParameters {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.value.serialize(s)
    }
}

impl<'de> Deserialize<'de> for ToolParameters {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Value::deserialize(d).map(ToolParameters::new)
    }
}

/// How a tool's calls may overlap the other calls of the same model turn.
///
/// The agent runs the calls of one turn concurrently (unless
/// [`LoopConfig::concurrent_tool_calls`](crate::LoopConfig::concurrent_tool_calls) is off).
/// A tool that mutates shared state declares [`Exclusive`](Self::Exclusive): its calls wait
/// for the calls the model listed before them and hold back the ones listed after (a
/// read/write gate). [`Limited`](Self::Limited) bounds how many calls of the tool run at once
/// within one turn.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Concurrency {
    /// Runs alongside any other call (the default).
    #[default]
    Parallel,
    /// Runs alongside other tools' calls, but at most this many calls of this tool at a time.
    Limited(std::num::NonZeroUsize),
    /// Runs alone: no other call of the turn overlaps it.
    Exclusive,
}

impl Concurrency {
    /// Whether this is the default, [`Parallel`](Self::Parallel).
    pub fn is_parallel(&self) -> bool {
        matches!(self, Concurrency::Parallel)
    }
}

/// What the model sees of a tool, and how the agent runs it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// The name the model calls it by (`[A-Za-z0-9_-]{1,64}`).
    pub name: String,
    /// What it does and when to use it.
    pub description: String,
    /// JSON schema of the arguments object (shared, serialized once; see [`ToolParameters`]).
    pub parameters: ToolParameters,
    /// Whether calls need approval.
    #[serde(default)]
    pub approval_mode: ApprovalMode,
    /// Whether calls may overlap other calls of the same turn (never sent to the model).
    #[serde(default, skip_serializing_if = "Concurrency::is_parallel")]
    pub concurrency: Concurrency,
    /// Other names the tool accepts for its arguments, as `(alias, argument)`: what its
    /// deserializer takes besides the schema's names (`#[serde(alias)]`), so that an edited
    /// call ([`check_arguments`](Self::check_arguments)) may use them too. Never sent to the
    /// model, and not serialized.
    #[serde(skip)]
    pub argument_aliases: Vec<(String, String)>,
}

impl ToolSpec {
    /// A spec with the default approval mode and concurrency.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        parameters: impl Into<ToolParameters>,
    ) -> Self {
        ToolSpec {
            name: name.into(),
            description: description.into(),
            parameters: parameters.into(),
            approval_mode: ApprovalMode::NeverRequire,
            concurrency: Concurrency::Parallel,
            argument_aliases: Vec::new(),
        }
    }

    /// Accepts `alias` for argument `argument` (see [`argument_aliases`](Self::argument_aliases)).
    #[must_use]
    pub fn with_argument_alias(
        mut self,
        alias: impl Into<String>,
        argument: impl Into<String>,
    ) -> Self {
        self.argument_aliases.push((alias.into(), argument.into()));
        self
    }

    /// Checks arguments (an edited call's) against the schema with
    /// [`crate::interrupt::check_arguments`], an alias standing for its argument.
    ///
    /// ```
    /// use cairn_core::ToolSpec;
    /// use serde_json::json;
    /// let schema = json!({"type": "object", "properties": {"file_path": {"type": "string"}},
    ///     "required": ["file_path"], "additionalProperties": false});
    /// let spec = ToolSpec::new("read_file", "Read a file.", schema)
    ///     .with_argument_alias("path", "file_path");
    /// assert!(spec.check_arguments(&json!({"path": "/a"})).is_ok());
    /// assert!(spec.check_arguments(&json!({"file_path": "/a"})).is_ok());
    /// assert!(spec.check_arguments(&json!({"path": 1})).is_err());
    /// assert!(spec.check_arguments(&json!({"other": "/a"})).is_err());
    /// ```
    pub fn check_arguments(&self, arguments: &serde_json::Value) -> Result<(), String> {
        let schema = self.parameters.value();
        match arguments {
            serde_json::Value::Object(obj)
                if self
                    .argument_aliases
                    .iter()
                    .any(|(alias, _)| obj.contains_key(alias)) =>
            {
                let mut obj = obj.clone();
                for (alias, name) in &self.argument_aliases {
                    if !obj.contains_key(name)
                        && let Some(v) = obj.remove(alias)
                    {
                        obj.insert(name.clone(), v);
                    }
                }
                crate::interrupt::check_arguments(schema, &serde_json::Value::Object(obj))
            }
            _ => crate::interrupt::check_arguments(schema, arguments),
        }
    }

    /// Sets how calls may overlap others (see [`Concurrency`]).
    #[must_use]
    pub fn with_concurrency(mut self, concurrency: Concurrency) -> Self {
        self.concurrency = concurrency;
        self
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

    /// Reviews one call before it runs (see [`CallReview`](crate::interrupt::CallReview)):
    /// the agent loop asks this for every call, before approvals. The default leaves the
    /// call to the agent's configuration. Must be quick: no I/O.
    fn review_call(&self, arguments: &Value) -> crate::interrupt::CallReview {
        let _ = arguments;
        crate::interrupt::CallReview::AsConfigured
    }
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

    /// Sets how calls may overlap other calls of the same turn (see [`Concurrency`]).
    pub fn concurrency(mut self, concurrency: Concurrency) -> Self {
        self.spec.concurrency = concurrency;
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
    fn review_call(&self, arguments: &Value) -> crate::interrupt::CallReview {
        self.inner.review_call(arguments)
    }
}

/// The tools of an agent by name, with their specs shared: the agent's tool router.
///
/// Built once when the agent is built (and once more for a run that adds tools), so a model
/// call costs no spec copying or schema serialization and a tool call is a map lookup. The
/// order of [`tools`](Self::tools) and [`specs`](Self::specs) is the order the tools were
/// given; a tool added under a name already present replaces the first tool of that name in
/// place. Cheap to clone.
///
/// ```
/// use cairn_core::{FnTool, IntoTool, ToolOutput, tool::ToolRouter};
/// let ping = FnTool::new("ping", "Answers pong.", serde_json::json!({"type": "object"}),
///     |_ctx| async { Ok(ToolOutput::text("pong")) });
/// let router = ToolRouter::new([ping.into_tool()]);
/// assert!(router.get("ping").is_some());
/// assert!(router.get("pong").is_none());
/// assert_eq!(router.specs()[0].name, "ping");
/// ```
#[derive(Clone, Default)]
pub struct ToolRouter(Arc<RouterInner>);

#[derive(Default)]
struct RouterInner {
    tools: Vec<SharedTool>,
    specs: Arc<[ToolSpec]>,
    index: std::collections::HashMap<String, usize>,
}

impl ToolRouter {
    /// A router over `tools`, in order.
    pub fn new(tools: impl IntoIterator<Item = SharedTool>) -> Self {
        Self::from_vec(tools.into_iter().collect())
    }

    fn from_vec(tools: Vec<SharedTool>) -> Self {
        let mut index = std::collections::HashMap::with_capacity(tools.len());
        for (i, t) in tools.iter().enumerate() {
            index.entry(t.spec().name.clone()).or_insert(i);
        }
        let specs = tools.iter().map(|t| t.spec().clone()).collect();
        ToolRouter(Arc::new(RouterInner {
            tools,
            specs,
            index,
        }))
    }

    /// This router with `extra` added: a tool whose name is already present replaces the
    /// first tool of that name in place, others are appended. Without `extra`, a clone.
    pub fn merged(&self, extra: &[SharedTool]) -> Self {
        if extra.is_empty() {
            return self.clone();
        }
        let mut tools = self.0.tools.clone();
        for t in extra {
            match tools.iter().position(|o| o.spec().name == t.spec().name) {
                Some(i) => tools[i] = Arc::clone(t),
                None => tools.push(Arc::clone(t)),
            }
        }
        Self::from_vec(tools)
    }

    /// The tool the model calls `name` (the first one, if several share it).
    pub fn get(&self, name: &str) -> Option<&SharedTool> {
        self.0.index.get(name).map(|&i| &self.0.tools[i])
    }

    /// The tools, in order.
    pub fn tools(&self) -> &[SharedTool] {
        &self.0.tools
    }

    /// Their specs, in the same order (made once, shared).
    pub fn specs(&self) -> &Arc<[ToolSpec]> {
        &self.0.specs
    }

    /// Whether there are no tools.
    pub fn is_empty(&self) -> bool {
        self.0.tools.is_empty()
    }
}

impl std::fmt::Debug for ToolRouter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.0.specs.iter().map(|s| &s.name))
            .finish()
    }
}

/// Remembers the JSON a provider rendered for a list of tool specs, so a request that sends
/// the same tools as a recent one copies that JSON instead of serializing the tools again.
///
/// An agent sends the same specs on every model call, so a provider keeps one cache (a
/// `static` is fine) and renders its wire form of the tools through
/// [`get_or_render`](Self::get_or_render). A lookup compares the specs (names and
/// descriptions byte for byte, schemas by pointer first), which costs far less than escaping
/// them again. It holds the last [`ToolsJsonCache::CAPACITY`] distinct lists.
///
/// ```
/// use cairn_core::{ToolSpec, tool::ToolsJsonCache};
/// static CACHE: ToolsJsonCache = ToolsJsonCache::new();
/// let tools = [ToolSpec::new("ls", "List files.", serde_json::json!({"type": "object"}))];
/// let render = |t: &[ToolSpec]| serde_json::to_string(&t.iter().map(|s| &s.name).collect::<Vec<_>>());
/// let first = CACHE.get_or_render(&tools, render).unwrap();
/// let again = CACHE.get_or_render(&tools, |_| unreachable!()).unwrap();
/// assert_eq!(first.get(), r#"["ls"]"#);
/// assert!(std::sync::Arc::ptr_eq(&first, &again));
/// ```
#[derive(Debug, Default)]
pub struct ToolsJsonCache {
    entries: std::sync::Mutex<Vec<(Vec<ToolSpec>, Arc<RawValue>)>>,
}

impl ToolsJsonCache {
    /// How many distinct tool lists a cache remembers.
    pub const CAPACITY: usize = 8;

    /// An empty cache.
    pub const fn new() -> Self {
        ToolsJsonCache {
            entries: std::sync::Mutex::new(Vec::new()),
        }
    }

    /// The JSON `render` makes of `tools`, from the cache when the same list was rendered
    /// recently. `render` must depend on nothing but `tools`.
    pub fn get_or_render(
        &self,
        tools: &[ToolSpec],
        render: impl FnOnce(&[ToolSpec]) -> Result<String, serde_json::Error>,
    ) -> Result<Arc<RawValue>, serde_json::Error> {
        let lock = || self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, json)) = lock().iter().find(|(specs, _)| specs.as_slice() == tools) {
            return Ok(Arc::clone(json));
        }
        let json: Arc<RawValue> = RawValue::from_string(render(tools)?)?.into();
        let mut entries = lock();
        if entries.len() >= Self::CAPACITY {
            entries.remove(0);
        }
        entries.push((tools.to_vec(), Arc::clone(&json)));
        Ok(json)
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
