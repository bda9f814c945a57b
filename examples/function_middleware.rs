//! Seed 000, "function middleware receives the same context": `enrich_tool_runtime_context`
//! fills in `tenant` and `request_source` before the tool runs; `next` takes nothing but the
//! context.
//!
//! `cargo run -p cairn-examples --example function_middleware`

use cairn::{Agent, FunctionInvocationContext, FunctionNext, Kwargs, ToolError, tool};
use serde_json::json;

#[tool(approval_mode = "never_require")]
fn send_email(
    /// Recipient email address.
    address: String,
    ctx: &FunctionInvocationContext,
) -> Result<String, ToolError> {
    let user_id = ctx
        .kwargs
        .get_str("user_id")
        .ok_or_else(|| ToolError::failed("no user_id in the runtime kwargs"))?;
    let tenant = ctx.kwargs.get_str("tenant").unwrap_or("default");
    let source = ctx.kwargs.get_str("request_source").unwrap_or("direct");
    Ok(format!(
        "Queued email for {address} from {user_id} ({tenant}, via {source})"
    ))
}

async fn enrich_tool_runtime_context(
    mut ctx: FunctionInvocationContext,
    next: FunctionNext,
) -> cairn::Result<FunctionInvocationContext> {
    ctx.kwargs.set_default("tenant", "contoso");
    ctx.kwargs.set_default("request_source", "middleware");
    next.run(ctx).await
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let client = cairn_examples::chat_client(vec![(
        "send_email",
        json!({"address": "finance@example.com"}),
    )]);
    let agent = Agent::builder(client)
        .name("Notifier")
        .instructions("Send email updates.")
        .tool(send_email)
        .middleware(enrich_tool_runtime_context)
        .build();

    let response = agent
        .run("Email the launch update to finance@example.com")
        .function_invocation_kwargs(Kwargs::from([("user_id", "user-123")]))
        .await?;
    println!("{}", response.text());
    Ok(())
}
