//! Seed 000, "pass runtime values only to tools": `send_email` reads `user_id` and `tenant`
//! from `ctx.kwargs`; the values are given per run through `function_invocation_kwargs` and never
//! reach the model or the tool's schema.
//!
//! `cargo run -p cairn-examples --example runtime_kwargs`

use cairn::{Agent, FunctionInvocationContext, Kwargs, ToolError, tool};
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
    Ok(format!(
        "Queued email for {address} from {user_id} ({tenant})"
    ))
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
        .build();

    let response = agent
        .run("Email the launch update to finance@example.com")
        .function_invocation_kwargs(Kwargs::from([
            ("user_id", "user-123"),
            ("tenant", "contoso"),
        ]))
        .await?;

    println!("{}", response.text());
    Ok(())
}
