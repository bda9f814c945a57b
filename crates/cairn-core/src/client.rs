//! The [`ChatClient`] trait, its options, responses and streamed updates.

use std::pin::Pin;
use std::sync::Arc;

use futures::{Stream, StreamExt};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::ChatError;
use crate::kwargs::Kwargs;
use crate::message::{Content, FinishReason, FunctionCall, Message, Role, Usage};
use crate::tool::ToolSpec;

/// A boxed, sendable future.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A boxed, sendable stream.
pub type BoxStream<'a, T> = Pin<Box<dyn Stream<Item = T> + Send + 'a>>;

/// A stream of updates from one model call.
pub type ChatStream<'a> = BoxStream<'a, Result<ChatResponseUpdate, ChatError>>;

/// How the model may use tools on a call.
///
/// `#[non_exhaustive]`: a choice added later (say, a subset of the tools) must not break
/// clients; a client that does not know a choice treats it as [`Auto`](Self::Auto).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ToolChoice {
    /// The model decides (the default).
    #[default]
    Auto,
    /// No tool calls.
    None,
    /// At least one tool call.
    Required,
    /// A call of this tool.
    Tool(String),
}

/// Options of a model call. Run-time options override an agent's defaults field by field.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatOptions {
    /// The model id (e.g. `gpt-4.1`); clients fall back to their own default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Instructions sent as the system prompt ahead of the messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// Sampling temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// Nucleus sampling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f32>,
    /// Upper bound on generated tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// Stop sequences.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stop: Vec<String>,
    /// Seed for deterministic sampling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<i64>,
    /// The tools the model may call (filled by the agent from its tools).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolSpec>,
    /// How the model may use the tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ToolChoice>,
    /// Whether the model may request several tool calls in one turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_tool_calls: Option<bool>,
    /// A JSON schema the answer must follow (structured output).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_format: Option<Value>,
    /// Provider-specific request fields, merged into the request body as they are.
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub additional_properties: serde_json::Map<String, Value>,
}

impl ChatOptions {
    /// Options with only `model` set.
    pub fn with_model(model: impl Into<String>) -> Self {
        ChatOptions {
            model: Some(model.into()),
            ..Default::default()
        }
    }

    /// Fields set in `overrides` replace those of `self`.
    pub fn merged(&self, overrides: &ChatOptions) -> ChatOptions {
        let mut out = self.clone();
        macro_rules! take {
            ($($f:ident),*) => { $( if overrides.$f.is_some() { out.$f = overrides.$f.clone(); } )* };
        }
        take!(
            model,
            instructions,
            temperature,
            top_p,
            max_tokens,
            seed,
            tool_choice,
            parallel_tool_calls,
            response_format
        );
        if !overrides.stop.is_empty() {
            out.stop = overrides.stop.clone();
        }
        if !overrides.tools.is_empty() {
            out.tools = overrides.tools.clone();
        }
        for (k, v) in &overrides.additional_properties {
            out.additional_properties.insert(k.clone(), v.clone());
        }
        out
    }
}

/// The answer of one model call.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatResponse {
    /// The messages the model produced (usually one assistant message).
    pub messages: Vec<Message>,
    /// Why the model stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<FinishReason>,
    /// Token usage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// The model that answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The server's response id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_id: Option<String>,
}

impl ChatResponse {
    /// A response with one assistant text message.
    pub fn text(text: impl Into<String>) -> Self {
        ChatResponse {
            messages: vec![Message::assistant(text)],
            finish_reason: Some(FinishReason::Stop),
            ..Default::default()
        }
    }

    /// A response with one assistant message calling tools; ids are `call_0`, `call_1`, ….
    pub fn tool_calls<'a>(calls: impl IntoIterator<Item = (&'a str, Value)>) -> Self {
        let contents = calls
            .into_iter()
            .enumerate()
            .map(|(i, (name, args))| {
                Content::FunctionCall(FunctionCall::new(format!("call_{i}"), name, &args))
            })
            .collect();
        ChatResponse {
            messages: vec![Message::new(Role::Assistant, contents)],
            finish_reason: Some(FinishReason::ToolCalls),
            ..Default::default()
        }
    }

    /// The text of all messages joined.
    pub fn text_content(&self) -> String {
        self.messages.iter().map(Message::text).collect()
    }

    /// All function calls in the response.
    pub fn function_calls(&self) -> impl Iterator<Item = &FunctionCall> {
        self.messages.iter().flat_map(Message::function_calls)
    }
}

pub use crate::stream::UpdateMetadata;

/// What one streamed piece of a model call carries: model-level only.
///
/// Run-level events (tool results, messages, the end of a run) are [`AgentEventKind`]s of
/// the agent's stream, never produced by a client.
///
/// [`AgentEventKind`]: crate::stream::AgentEventKind
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum UpdateEvent {
    /// A piece of answer text.
    TextDelta {
        /// The text piece.
        text: String,
    },
    /// A piece of reasoning text.
    ReasoningDelta {
        /// The text piece.
        text: String,
    },
    /// The model started a tool call.
    ToolCallStart {
        /// Position of the call in the turn.
        index: usize,
        /// The call id.
        call_id: String,
        /// The tool name.
        name: String,
    },
    /// A piece of a tool call's arguments.
    ToolCallDelta {
        /// Position of the call in the turn.
        index: usize,
        /// The JSON text piece.
        arguments: String,
    },
    /// Token usage of the call.
    Usage(Usage),
    /// The call finished.
    Finished {
        /// Why the model stopped.
        finish_reason: Option<FinishReason>,
        /// The model that answered, when known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
        /// The server's response id, when known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        response_id: Option<String>,
    },
}

/// One streamed update of a model call: what [`ChatClient::get_streaming_response`] yields.
///
/// It says nothing about which agent or nested run it belongs to: the agent wraps it in an
/// [`AgentEvent`](crate::stream::AgentEvent) with that metadata. `#[non_exhaustive]`: build it
/// with [`new`](Self::new) or `UpdateEvent::….into()`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ChatResponseUpdate {
    /// What it carries.
    #[serde(flatten)]
    pub event: UpdateEvent,
}

impl ChatResponseUpdate {
    /// An update carrying `event`.
    pub fn new(event: UpdateEvent) -> Self {
        ChatResponseUpdate { event }
    }
}

impl From<UpdateEvent> for ChatResponseUpdate {
    fn from(e: UpdateEvent) -> Self {
        ChatResponseUpdate::new(e)
    }
}

/// Folds a stream of updates into the [`ChatResponse`] the same call would have returned.
///
/// Tool-call argument pieces are joined by call index; text and reasoning pieces in order.
#[derive(Debug, Default)]
pub struct ResponseAssembler {
    text: String,
    reasoning: String,
    calls: Vec<FunctionCall>,
    usage: Option<Usage>,
    finish_reason: Option<FinishReason>,
    model: Option<String>,
    response_id: Option<String>,
    finished: bool,
}

impl ResponseAssembler {
    /// An empty assembler.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one update.
    pub fn push(&mut self, event: &UpdateEvent) {
        match event {
            UpdateEvent::TextDelta { text } => self.text.push_str(text),
            UpdateEvent::ReasoningDelta { text } => self.reasoning.push_str(text),
            UpdateEvent::ToolCallStart {
                index,
                call_id,
                name,
            } => {
                let slot = self.slot(*index);
                if slot.call_id.is_empty() {
                    slot.call_id = call_id.clone();
                }
                if slot.name.is_empty() {
                    slot.name = name.clone();
                }
            }
            UpdateEvent::ToolCallDelta { index, arguments } => {
                self.slot(*index).arguments.push_str(arguments)
            }
            UpdateEvent::Usage(u) => self.usage = Some(*u),
            UpdateEvent::Finished {
                finish_reason,
                model,
                response_id,
            } => {
                self.finished = true;
                if finish_reason.is_some() {
                    self.finish_reason = finish_reason.clone();
                }
                if model.is_some() {
                    self.model = model.clone();
                }
                if response_id.is_some() {
                    self.response_id = response_id.clone();
                }
            }
        }
    }

    fn slot(&mut self, index: usize) -> &mut FunctionCall {
        while self.calls.len() <= index {
            self.calls.push(FunctionCall {
                call_id: String::new(),
                name: String::new(),
                arguments: String::new(),
            });
        }
        &mut self.calls[index]
    }

    /// Whether a `Finished` update was seen.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// The assembled response.
    pub fn finish(self) -> ChatResponse {
        let mut contents = Vec::new();
        if !self.reasoning.is_empty() {
            contents.push(Content::Reasoning {
                text: self.reasoning,
            });
        }
        if !self.text.is_empty() {
            contents.push(Content::Text { text: self.text });
        }
        for (i, mut c) in self.calls.into_iter().enumerate() {
            if c.name.is_empty() && c.arguments.is_empty() {
                continue;
            }
            if c.call_id.is_empty() {
                c.call_id = format!("call_{i}");
            }
            contents.push(Content::FunctionCall(c));
        }
        ChatResponse {
            messages: vec![Message::new(Role::Assistant, contents)],
            finish_reason: self.finish_reason,
            usage: self.usage,
            model: self.model,
            response_id: self.response_id,
        }
    }
}

/// Splits a complete response into the updates a streaming call would have produced.
pub fn response_to_updates(response: &ChatResponse) -> Vec<ChatResponseUpdate> {
    let mut out = Vec::new();
    let mut index = 0;
    for m in &response.messages {
        for c in &m.contents {
            match c {
                Content::Text { text } => {
                    out.push(UpdateEvent::TextDelta { text: text.clone() }.into())
                }
                Content::Reasoning { text } => {
                    out.push(UpdateEvent::ReasoningDelta { text: text.clone() }.into())
                }
                Content::FunctionCall(fc) => {
                    out.push(
                        UpdateEvent::ToolCallStart {
                            index,
                            call_id: fc.call_id.clone(),
                            name: fc.name.clone(),
                        }
                        .into(),
                    );
                    out.push(
                        UpdateEvent::ToolCallDelta {
                            index,
                            arguments: fc.arguments.clone(),
                        }
                        .into(),
                    );
                    index += 1;
                }
                _ => {}
            }
        }
    }
    if let Some(u) = response.usage {
        out.push(UpdateEvent::Usage(u).into());
    }
    out.push(
        UpdateEvent::Finished {
            finish_reason: response.finish_reason.clone(),
            model: response.model.clone(),
            response_id: response.response_id.clone(),
        }
        .into(),
    );
    out
}

/// The empty bucket [`ChatRequest::new`] points the kwargs at.
static EMPTY_KWARGS: std::sync::LazyLock<Kwargs> = std::sync::LazyLock::new(Kwargs::new);

/// One model call's input: what [`ChatClient::get_response`] and its streaming twin receive.
///
/// The parts are borrowed (a request costs nothing to build and is `Copy`), and the three
/// runtime buckets stay separate *fields* (SPEC R1.4, seed 000):
/// - `messages` and `options`: what the model is asked;
/// - `function_invocation_kwargs`: values for tools. A client that runs its own tool loop hands
///   them to its tools; no client ever sends them to the model. cairn's
///   [`Agent`](crate::Agent) runs tools itself, so it always passes an empty bucket here;
/// - `client_kwargs`: values for this client only (extra headers, a per-call `user` id).
///
/// The struct is `#[non_exhaustive]`: build it with [`new`](Self::new) and the `with_*`
/// setters, so a later field (a cancellation token, a trace context) breaks no client.
///
/// ```
/// use cairn_core::{ChatOptions, ChatRequest, Kwargs, Message};
///
/// let messages = [Message::user("Hi")];
/// let options = ChatOptions::with_model("gpt-4.1");
/// let headers = Kwargs::from([("user", "u-1")]);
/// let request = ChatRequest::new(&messages, &options).with_client_kwargs(&headers);
/// assert_eq!(request.client_kwargs.get_str("user"), Some("u-1"));
/// assert!(request.function_invocation_kwargs.is_empty());
/// ```
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct ChatRequest<'a> {
    /// The conversation to send.
    pub messages: &'a [Message],
    /// The options of the call (model, instructions, tools…).
    pub options: &'a ChatOptions,
    /// Values for tools of a client that runs its own tool loop; never sent to the model.
    pub function_invocation_kwargs: &'a Kwargs,
    /// Values for this client only.
    pub client_kwargs: &'a Kwargs,
}

impl<'a> ChatRequest<'a> {
    /// A request for `messages` with `options` and both kwargs buckets empty.
    pub fn new(messages: &'a [Message], options: &'a ChatOptions) -> Self {
        ChatRequest {
            messages,
            options,
            function_invocation_kwargs: &EMPTY_KWARGS,
            client_kwargs: &EMPTY_KWARGS,
        }
    }

    /// Sets the client bucket.
    pub fn with_client_kwargs(mut self, client_kwargs: &'a Kwargs) -> Self {
        self.client_kwargs = client_kwargs;
        self
    }

    /// Sets the function-invocation bucket (for clients that run their own tool loop).
    pub fn with_function_invocation_kwargs(mut self, kwargs: &'a Kwargs) -> Self {
        self.function_invocation_kwargs = kwargs;
        self
    }

    /// Replaces the messages (for wrappers that rewrite the conversation).
    pub fn with_messages(mut self, messages: &'a [Message]) -> Self {
        self.messages = messages;
        self
    }

    /// Replaces the options (for wrappers that adjust them).
    pub fn with_options(mut self, options: &'a ChatOptions) -> Self {
        self.options = options;
        self
    }
}

/// A model behind an API: the boundary every provider implements.
///
/// A call takes one [`ChatRequest`], which carries the three runtime buckets as separate fields
/// (SPEC R1.4): `options` (what the model is asked), `function_invocation_kwargs` (values for
/// tools; a client that runs its own tool loop hands them to its tools, and no client sends them
/// to the model) and `client_kwargs` (values for this client only, such as extra headers).
///
/// cairn's [`Agent`](crate::Agent) runs tools itself, so it hands clients an *empty*
/// function-invocation bucket: those values reach tools and function middleware only.
pub trait ChatClient: Send + Sync + 'static {
    /// Sends the conversation and returns the model's answer.
    fn get_response<'a>(
        &'a self,
        request: ChatRequest<'a>,
    ) -> BoxFuture<'a, Result<ChatResponse, ChatError>>;

    /// The streaming twin of [`get_response`](Self::get_response). Folding the stream with a
    /// [`ResponseAssembler`] gives the same response. The default streams the complete response
    /// in one burst.
    fn get_streaming_response<'a>(&'a self, request: ChatRequest<'a>) -> ChatStream<'a> {
        let fut = self.get_response(request);
        futures::stream::once(fut)
            .flat_map(|r| match r {
                Ok(resp) => {
                    futures::stream::iter(response_to_updates(&resp).into_iter().map(Ok)).boxed()
                }
                Err(e) => futures::stream::iter(vec![Err(e)]).boxed(),
            })
            .boxed()
    }

    /// A short description for logs, e.g. `openai:gpt-4.1`.
    fn describe(&self) -> String {
        std::any::type_name::<Self>().to_owned()
    }
}

impl<T: ChatClient + ?Sized> ChatClient for Arc<T> {
    fn get_response<'a>(
        &'a self,
        request: ChatRequest<'a>,
    ) -> BoxFuture<'a, Result<ChatResponse, ChatError>> {
        (**self).get_response(request)
    }
    fn get_streaming_response<'a>(&'a self, request: ChatRequest<'a>) -> ChatStream<'a> {
        (**self).get_streaming_response(request)
    }
    fn describe(&self) -> String {
        (**self).describe()
    }
}

/// The messages to send with the instructions placed first as a system message.
///
/// Providers whose wire format has no separate instructions field use this. Returns the messages
/// unchanged when there are no instructions.
pub fn messages_with_instructions<'a>(
    messages: &'a [Message],
    options: &ChatOptions,
) -> std::borrow::Cow<'a, [Message]> {
    match options.instructions.as_deref() {
        Some(i) if !i.is_empty() => {
            let mut v = Vec::with_capacity(messages.len() + 1);
            v.push(Message::system(i));
            v.extend_from_slice(messages);
            std::borrow::Cow::Owned(v)
        }
        _ => std::borrow::Cow::Borrowed(messages),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn assembler_reverses_splitting() {
        let mut r = ChatResponse::tool_calls([("echo", json!({"text": "a"})), ("ls", json!({}))]);
        r.messages[0]
            .contents
            .insert(0, Content::text("thinking out loud"));
        r.usage = Some(Usage {
            input_tokens: 3,
            output_tokens: 4,
            cached_input_tokens: 0,
        });
        let mut a = ResponseAssembler::new();
        for u in response_to_updates(&r) {
            a.push(&u.event);
        }
        assert!(a.is_finished());
        assert_eq!(a.finish(), r);
    }

    #[test]
    fn merged_overrides_only_set_fields() {
        let base = ChatOptions {
            model: Some("a".into()),
            temperature: Some(0.1),
            ..Default::default()
        };
        let o = ChatOptions {
            temperature: Some(0.9),
            ..Default::default()
        };
        let m = base.merged(&o);
        assert_eq!(m.model.as_deref(), Some("a"));
        assert_eq!(m.temperature, Some(0.9));
    }
}
