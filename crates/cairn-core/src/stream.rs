//! Streaming plumbing: the sink updates are written to, and the stream a caller reads.

use std::pin::Pin;
use std::task::{Context, Poll};

use futures::Stream;
use tokio::sync::mpsc;

use futures::StreamExt;

use crate::agent::AgentResponse;
use crate::client::{
    ChatClient, ChatOptions, ChatRequest, ChatResponse, ChatResponseUpdate, ResponseAssembler,
    UpdateEvent, UpdateMetadata,
};
use crate::error::ChatError;
use crate::kwargs::Kwargs;
use crate::message::Message;

/// Where a streaming run writes its updates. Cheap to clone.
///
/// Middleware and tools that produce updates of their own (a summarization call, a nested agent)
/// derive a sink with [`with_source`](Self::with_source) or [`nested`](Self::nested) so the
/// updates carry where they came from.
#[derive(Clone, Debug)]
pub struct UpdateSink {
    tx: mpsc::UnboundedSender<ChatResponseUpdate>,
    metadata: UpdateMetadata,
}

impl UpdateSink {
    /// A sink and the receiving end.
    pub fn channel(
        metadata: UpdateMetadata,
    ) -> (Self, mpsc::UnboundedReceiver<ChatResponseUpdate>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (UpdateSink { tx, metadata }, rx)
    }

    /// Sends an event with this sink's metadata. A closed receiver is ignored: the consumer
    /// stopped reading, the run goes on.
    pub fn emit(&self, event: UpdateEvent) {
        let _ = self.tx.send(ChatResponseUpdate {
            event,
            metadata: self.metadata.clone(),
        });
    }

    /// Forwards an update, filling in metadata it lacks from this sink and prefixing this sink's
    /// namespace.
    pub fn forward(&self, mut update: ChatResponseUpdate) {
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
                sink.forward(update);
            }
            Ok(assembler.finish())
        }
        None => client.get_response(request).await,
    }
}

/// The updates of a streaming run, then its final response.
///
/// Read it as a [`Stream`] of [`ChatResponseUpdate`]s; then (or instead)
/// [`final_response`](Self::final_response) returns the same [`AgentResponse`] the
/// non-streaming run would have returned.
pub struct AgentStream {
    rx: mpsc::UnboundedReceiver<ChatResponseUpdate>,
    handle: tokio::task::JoinHandle<crate::Result<AgentResponse>>,
}

impl AgentStream {
    pub(crate) fn new(
        rx: mpsc::UnboundedReceiver<ChatResponseUpdate>,
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
    type Item = ChatResponseUpdate;
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
