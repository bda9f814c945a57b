//! One-line calls of a [`ChatClient`] for tests: ask plainly, ask streamed, fold a stream.

use cairn_core::{
    ChatClient, ChatError, ChatOptions, ChatRequest, ChatResponse, Kwargs, Message,
    ResponseAssembler,
};
use futures::StreamExt;

/// Sends one user message `text` with default options.
pub async fn ask<C: ChatClient + ?Sized>(c: &C, text: &str) -> Result<ChatResponse, ChatError> {
    c.get_response(ChatRequest::new(
        &[Message::user(text)],
        &ChatOptions::default(),
    ))
    .await
}

/// Streams `messages` with `options` (empty kwargs) and folds the updates into the response;
/// the first error ends it.
pub async fn stream_fold<C: ChatClient + ?Sized>(
    c: &C,
    messages: &[Message],
    options: &ChatOptions,
) -> Result<(ChatResponse, bool), ChatError> {
    let (fk, ck) = (Kwargs::new(), Kwargs::new());
    let mut stream = c.get_streaming_response(
        ChatRequest::new(messages, options)
            .with_function_invocation_kwargs(&fk)
            .with_client_kwargs(&ck),
    );
    let mut asm = ResponseAssembler::default();
    while let Some(u) = stream.next().await {
        asm.push(&u?.event);
    }
    let finished = asm.is_finished();
    Ok((asm.finish(), finished))
}

/// Streams one user message `"go"` with default options and folds the updates.
pub async fn ask_streamed<C: ChatClient + ?Sized>(c: &C) -> Result<ChatResponse, ChatError> {
    stream_fold(c, &[Message::user("go")], &ChatOptions::default())
        .await
        .map(|(r, _)| r)
}
