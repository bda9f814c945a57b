//! One-line calls of a [`ChatClient`] for tests: ask plainly, ask streamed, fold a stream, ask
//! with kwargs that must never be sent; and a conversation with every kind of content.

use cairn_core::{
    ChatClient, ChatError, ChatOptions, ChatRequest, ChatResponse, Content, FunctionCall,
    FunctionResult, Kwargs, Message, ResponseAssembler, Role,
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

/// The function-invocation kwarg every "kwargs never reach the model" test sends:
/// `user_id = "SECRET-USER"` (assert the request holds neither string).
pub fn secret_invocation_kwargs() -> Kwargs {
    Kwargs::from([("user_id", "SECRET-USER")])
}

/// Sends `messages` with `options` plainly, with [`secret_invocation_kwargs`] (which a client
/// must never send).
pub async fn ask_with_secret_kwargs<C: ChatClient + ?Sized>(
    c: &C,
    messages: &[Message],
    options: &ChatOptions,
) -> Result<ChatResponse, ChatError> {
    let fkw = secret_invocation_kwargs();
    c.get_response(ChatRequest::new(messages, options).with_function_invocation_kwargs(&fkw))
        .await
}

/// A conversation with every kind of content: a system message (`"System note."`), a user text
/// (`"first"`) and a user image (`data:image/png;base64,iVBOR`), an assistant turn with the
/// text `"I'll call."` and `calls`, then one tool message per result of `results`.
pub fn every_content(calls: Vec<FunctionCall>, results: Vec<FunctionResult>) -> Vec<Message> {
    let mut assistant = vec![Content::text("I'll call.")];
    assistant.extend(calls.into_iter().map(Content::FunctionCall));
    let mut msgs = vec![
        Message::system("System note."),
        Message::user("first"),
        Message::new(
            Role::User,
            vec![Content::Image {
                url: "data:image/png;base64,iVBOR".into(),
                media_type: None,
            }],
        ),
        Message::new(Role::Assistant, assistant),
    ];
    msgs.extend(results.into_iter().map(Message::tool_result));
    msgs
}

/// A tool result for `call_id` with the text `output`.
pub fn result(call_id: &str, output: &str, is_error: bool) -> FunctionResult {
    FunctionResult {
        call_id: call_id.into(),
        output: vec![Content::text(output)],
        is_error,
    }
}
