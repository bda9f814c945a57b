//! Seed 000, "custom chat clients": a client's response method receives the runtime buckets
//! explicitly, as separate fields of one `ChatRequest` — messages, options, function-invocation
//! kwargs and client kwargs.
//!
//! This one answers locally (no model): it reports which client kwargs it was handed, and shows
//! that the agent hands it an empty function-invocation bucket (those values are for tools).
//!
//! `cargo run -p cairn-examples --example custom_chat_client`

use cairn::{
    Agent, BoxFuture, ChatClient, ChatError, ChatRequest, ChatResponse, Kwargs, Message, Role,
};

/// A chat client that echoes the last user message, tagged by a client-specific value.
struct EchoClient;

impl ChatClient for EchoClient {
    fn get_response<'a>(
        &'a self,
        request: ChatRequest<'a>,
    ) -> BoxFuture<'a, Result<ChatResponse, ChatError>> {
        let ChatRequest {
            messages,
            options,
            function_invocation_kwargs,
            client_kwargs,
            ..
        } = request;
        Box::pin(async move {
            let last_user = messages
                .iter()
                .rev()
                .find(|m| m.role == Role::User)
                .map(Message::text)
                .unwrap_or_default();
            let tag = client_kwargs.get_str("tag").unwrap_or("untagged");
            Ok(ChatResponse::text(format!(
                "[{tag}] {last_user} (instructions: {:?}; tool kwargs handed to the client: {})",
                options.instructions.as_deref().unwrap_or(""),
                function_invocation_kwargs.len()
            )))
        })
    }

    fn describe(&self) -> String {
        "echo".into()
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let agent = Agent::builder(EchoClient)
        .name("Echo")
        .instructions("Repeat the user.")
        .build();
    let response = agent
        .run("hello buckets")
        .client_kwargs(Kwargs::from([("tag", "client-only")]))
        .function_invocation_kwargs(Kwargs::from([("user_id", "tools-only")]))
        .await?;
    println!("{}", response.text());
    Ok(())
}
