//! Streaming plumbing: the run-level [`AgentEvent`]s a streaming run yields, the sink they are
//! written to, and the stream a caller reads.
//!
//! Two levels, kept apart: a [`ChatClient`] streams [`ChatResponseUpdate`]s (text and reasoning
//! pieces, tool-call pieces, usage, the end of the call) and knows nothing of agents. The agent
//! loop wraps each in an [`AgentEvent`] stamped with [`UpdateMetadata`] (which agent, which
//! nested run, which middleware) and adds the run's own events: tool results, messages made
//! outside a model stream, and the completed run.

use std::pin::Pin;
use std::task::{Context, Poll};

use futures::Stream;
use tokio::sync::mpsc;

use futures::StreamExt;
use serde::{Deserialize, Serialize};

use crate::agent::AgentResponse;
use crate::client::{
    ChatClient, ChatOptions, ChatRequest, ChatResponse, ChatResponseUpdate, ResponseAssembler,
    UpdateEvent,
};
use crate::error::ChatError;
use crate::kwargs::Kwargs;
use crate::message::{FunctionResult, Message};

/// Where an event came from and which agent produced it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpdateMetadata {
    /// The agent that produced the event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_name: Option<String>,
    /// What produced it inside the agent: `None` for the main model calls, or a tag such as
    /// `"summarization"` for calls made by middleware, so consumers can filter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The path of nested agents (outermost first); empty for the top-level agent.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub namespace: Vec<String>,
}

/// One event of a streaming run, with where it came from: what an [`AgentStream`] yields.
///
/// Serialized flat, as one JSON object: the kind's `type` and fields, then `metadata`
/// (`{"type":"text_delta","text":"Hi","metadata":{"agent_name":"Helper"}}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentEvent {
    /// What happened.
    #[serde(flatten)]
    pub kind: AgentEventKind,
    /// Where it came from.
    #[serde(default)]
    pub metadata: UpdateMetadata,
}

impl AgentEvent {
    /// An event of `kind` from `metadata`'s agent.
    pub fn new(kind: impl Into<AgentEventKind>, metadata: UpdateMetadata) -> Self {
        AgentEvent {
            kind: kind.into(),
            metadata,
        }
    }

    /// The model update inside, when this event is one.
    pub fn model_event(&self) -> Option<&UpdateEvent> {
        match &self.kind {
            AgentEventKind::Model(u) => Some(&u.event),
            _ => None,
        }
    }
}

/// What a run-level event is. `#[non_exhaustive]`: match with a `_` arm.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum AgentEventKind {
    /// A tool call finished: the result the model reads next.
    ToolResult(FunctionResult),
    /// A complete message produced outside a model stream (for example by middleware).
    Message(Message),
    /// The run ended; its final response (the same the non-streaming run returns).
    RunCompleted(Box<AgentResponse>),
    /// The run paused: these guarded calls wait for decisions (see [`crate::interrupt`]).
    Interrupted(Vec<crate::interrupt::Interrupt>),
    /// A piece of a model call's stream, as the client produced it.
    #[serde(untagged)]
    Model(ChatResponseUpdate),
}

impl From<ChatResponseUpdate> for AgentEventKind {
    fn from(u: ChatResponseUpdate) -> Self {
        AgentEventKind::Model(u)
    }
}

impl From<UpdateEvent> for AgentEventKind {
    fn from(e: UpdateEvent) -> Self {
        AgentEventKind::Model(ChatResponseUpdate::new(e))
    }
}

/// Where a streaming run writes its events. Cheap to clone.
///
/// Middleware and tools that produce events of their own (a summarization call, a nested agent)
/// derive a sink with [`with_source`](Self::with_source) or [`nested`](Self::nested) so the
/// events carry where they came from.
#[derive(Clone, Debug)]
pub struct UpdateSink {
    tx: mpsc::UnboundedSender<AgentEvent>,
    metadata: UpdateMetadata,
}

impl UpdateSink {
    /// A sink and the receiving end.
    pub fn channel(metadata: UpdateMetadata) -> (Self, mpsc::UnboundedReceiver<AgentEvent>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (UpdateSink { tx, metadata }, rx)
    }

    /// Sends an event with this sink's metadata: a run-level [`AgentEventKind`], or a model
    /// update ([`ChatResponseUpdate`] or [`UpdateEvent`]). A closed receiver is ignored: the
    /// consumer stopped reading, the run goes on.
    pub fn emit(&self, kind: impl Into<AgentEventKind>) {
        let _ = self.tx.send(AgentEvent {
            kind: kind.into(),
            metadata: self.metadata.clone(),
        });
    }

    /// Forwards an event, filling in metadata it lacks from this sink and prefixing this sink's
    /// namespace.
    pub fn forward(&self, mut update: AgentEvent) {
        if update.metadata.agent_name.is_none() {
            update.metadata.agent_name = self.metadata.agent_name.clone();
        }
        if update.metadata.source.is_none() {
            update.metadata.source = self.metadata.source.clone();
        }
        if !self.metadata.namespace.is_empty() {
            let mut ns = self.metadata.namespace.clone();
            ns.append(&mut update.metadata.namespace);
            update.metadata.namespace = ns;
        }
        let _ = self.tx.send(update);
    }

    /// A sink whose updates carry `source`.
    pub fn with_source(&self, source: impl Into<String>) -> Self {
        let mut s = self.clone();
        s.metadata.source = Some(source.into());
        s
    }

    /// A sink for a nested agent: its namespace gets `segment` appended and the agent name is
    /// replaced.
    pub fn nested(&self, segment: impl Into<String>, agent_name: Option<String>) -> Self {
        let mut s = self.clone();
        s.metadata.namespace.push(segment.into());
        s.metadata.agent_name = agent_name;
        s
    }

    /// The metadata this sink stamps.
    pub fn metadata(&self) -> &UpdateMetadata {
        &self.metadata
    }
}

/// Makes one model call the way the agent loop does: streaming into `updates` (and assembling
/// the response from the stream) when a sink is given, a plain call otherwise. The client gets
/// an empty function-invocation bucket (see [`ChatClient`]). Middleware that calls a model of
/// its own (a summarizer, a judge) uses this so its updates reach the run's stream.
pub async fn call_model(
    client: &dyn ChatClient,
    messages: &[Message],
    options: &ChatOptions,
    client_kwargs: &Kwargs,
    updates: Option<&UpdateSink>,
) -> Result<ChatResponse, ChatError> {
    // The function-invocation bucket stays empty: see `ChatRequest`.
    let request = ChatRequest::new(messages, options).with_client_kwargs(client_kwargs);
    match updates {
        Some(sink) => {
            let mut assembler = ResponseAssembler::new();
            let mut stream = client.get_streaming_response(request);
            while let Some(item) = stream.next().await {
                let update = item?;
                assembler.push(&update.event);
                sink.emit(update);
            }
            Ok(assembler.finish())
        }
        None => client.get_response(request).await,
    }
}

/// The events of a streaming run, then its final response.
///
/// Read it as a [`Stream`] of [`AgentEvent`]s; then (or instead)
/// [`final_response`](Self::final_response) returns the same [`AgentResponse`] the
/// non-streaming run would have returned.
pub struct AgentStream {
    rx: mpsc::UnboundedReceiver<AgentEvent>,
    handle: tokio::task::JoinHandle<crate::Result<AgentResponse>>,
}

impl AgentStream {
    pub(crate) fn new(
        rx: mpsc::UnboundedReceiver<AgentEvent>,
        handle: tokio::task::JoinHandle<crate::Result<AgentResponse>>,
    ) -> Self {
        AgentStream { rx, handle }
    }

    /// Waits for the run to end (dropping unread updates) and returns its response.
    pub async fn final_response(mut self) -> crate::Result<AgentResponse> {
        self.rx.close();
        match (&mut self.handle).await {
            Ok(r) => r,
            Err(e) if e.is_cancelled() => Err(crate::Error::Cancelled),
            Err(e) => Err(crate::Error::Internal(format!("the run task failed: {e}"))),
        }
    }

    /// Stops the run.
    pub fn abort(&self) {
        self.handle.abort();
    }
}

impl Stream for AgentStream {
    type Item = AgentEvent;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.rx.poll_recv(cx)
    }
}

impl Drop for AgentStream {
    fn drop(&mut self) {
        // Dropping the stream before the end stops the run, as dropping a future would.
        if !self.handle.is_finished() {
            self.handle.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn events_serialize_flat_and_round_trip() {
        let metadata = UpdateMetadata {
            agent_name: Some("Helper".into()),
            source: None,
            namespace: vec!["helper".into()],
        };
        let model = AgentEvent::new(
            UpdateEvent::TextDelta { text: "Hi".into() },
            metadata.clone(),
        );
        let v = serde_json::to_value(&model).unwrap_or_default();
        assert_eq!(
            v,
            json!({"type": "text_delta", "text": "Hi",
                   "metadata": {"agent_name": "Helper", "namespace": ["helper"]}})
        );
        let back: AgentEvent = serde_json::from_value(v).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(back, model);
        assert_eq!(
            back.model_event(),
            Some(&UpdateEvent::TextDelta { text: "Hi".into() })
        );

        let result = AgentEvent::new(
            AgentEventKind::ToolResult(FunctionResult {
                call_id: "c1".into(),
                output: vec![],
                is_error: false,
            }),
            metadata,
        );
        let v = serde_json::to_value(&result).unwrap_or_default();
        assert_eq!(v["type"], "tool_result");
        let back: AgentEvent = serde_json::from_value(v).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(back, result);
        assert!(back.model_event().is_none());
    }
}
