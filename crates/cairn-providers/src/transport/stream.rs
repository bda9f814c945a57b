//! The driver of a streamed call: reads the response body, feeds it to the SSE parser and a
//! provider's [`StreamDecoder`], and yields the decoder's updates.

use std::collections::VecDeque;
use std::sync::Arc;

use cairn_core::{BoxFuture, ChatError, ChatResponseUpdate, ChatStream};

use super::redact::Redactor;
use super::sse::{Flow, SseParser};
use super::{Resp, StreamDecoder};

/// The state of a streamed call between two items.
struct Driver<D> {
    resp: Resp,
    sse: SseParser,
    decoder: D,
    queue: VecDeque<ChatResponseUpdate>,
    error: Option<ChatError>,
    phase: Phase,
}

#[derive(PartialEq, Eq)]
enum Phase {
    Reading,
    /// The terminal event was seen: read what is left of the body, briefly, so the connection
    /// may be reused (never wait for the server to close it).
    Draining,
    Done,
}

enum StreamState<'a, D> {
    Opening(BoxFuture<'a, Result<Resp, ChatError>>, D),
    Running(Box<Driver<D>>),
    Finished,
}

/// The stream of one call: opens it, feeds the body to the SSE parser and `decoder`, and
/// yields the updates. It ends right after the decoder's end event (see [`Resp::drain`]);
/// every error is passed through `redactor`.
pub(crate) fn drive<'a, D: StreamDecoder>(
    open: BoxFuture<'a, Result<Resp, ChatError>>,
    decoder: D,
    redactor: Arc<Redactor>,
) -> ChatStream<'a> {
    Box::pin(futures::stream::unfold(
        StreamState::Opening(open, decoder),
        move |state| {
            let redactor = Arc::clone(&redactor);
            async move {
                match next_item(state).await {
                    Some((Err(e), s)) => Some((Err(redactor.error(e)), s)),
                    other => other,
                }
            }
        },
    ))
}

async fn next_item<D: StreamDecoder>(
    state: StreamState<'_, D>,
) -> Option<(Result<ChatResponseUpdate, ChatError>, StreamState<'_, D>)> {
    let mut d = match state {
        StreamState::Finished => return None,
        StreamState::Opening(open, decoder) => match open.await {
            Ok(resp) => Box::new(Driver {
                sse: SseParser::new(resp.options.max_sse_event_bytes),
                resp,
                decoder,
                queue: VecDeque::new(),
                error: None,
                phase: Phase::Reading,
            }),
            Err(e) => return Some((Err(e), StreamState::Finished)),
        },
        StreamState::Running(d) => d,
    };
    loop {
        if let Some(u) = d.queue.pop_front() {
            return Some((Ok(u), StreamState::Running(d)));
        }
        if let Some(e) = d.error.take() {
            return Some((Err(e), StreamState::Finished));
        }
        match d.phase {
            Phase::Done => return None,
            Phase::Draining => {
                d.resp.drain().await;
                return None;
            }
            Phase::Reading => match d.resp.chunk().await {
                Ok(Some(bytes)) => {
                    let Driver {
                        sse,
                        decoder,
                        queue,
                        ..
                    } = &mut *d;
                    let fed = sse.feed(&bytes, |_event, data| {
                        decoder.on_event(data, queue)?;
                        Ok(if decoder.is_done() {
                            Flow::Stop
                        } else {
                            Flow::Continue
                        })
                    });
                    if let Err(e) = fed {
                        d.error = Some(e);
                        d.phase = Phase::Done;
                    } else if d.decoder.is_done() {
                        d.phase = Phase::Draining;
                    }
                }
                Ok(None) => {
                    let pending = d.sse.pending_data();
                    if let Err(e) = d.decoder.on_eof(pending, &mut d.queue) {
                        d.error = Some(e);
                    }
                    d.phase = Phase::Done;
                }
                Err(e) => {
                    d.error = Some(e);
                    d.phase = Phase::Done;
                }
            },
        }
    }
}
