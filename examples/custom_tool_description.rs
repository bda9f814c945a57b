//! Seed 001, "tool prompts": a user tool with a clear name, a description that says when to use
//! it, and described parameters (the seed's `search_orders`). Prints the schema the model sees.
//!
//! `cargo run -p cairn-examples --example custom_tool_description`

use cairn::{DeepAgent, Json, Tool, tool};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

/// An order's status.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Status {
    Pending,
    Shipped,
    Delivered,
}

#[derive(Serialize)]
struct Order {
    id: u32,
    status: Status,
}

/// Search for user orders by status.
///
/// Use this when the user asks about order history or wants to check
/// order status. Always filter by the provided status.
#[tool]
fn search_orders(
    /// Unique identifier for the user
    user_id: String,
    /// Order status to filter by
    status: Status,
    /// Maximum number of results to return
    #[default(10)]
    limit: u32,
) -> Json<Vec<Order>> {
    let _ = user_id;
    Json((1..=limit.min(3)).map(|id| Order { id, status }).collect())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    println!(
        "{}",
        serde_json::to_string_pretty(&json!({
            "name": search_orders.spec().name,
            "description": search_orders.spec().description,
            "parameters": search_orders.spec().parameters,
        }))?
    );
    let client = cairn_examples::chat_client(vec![(
        "search_orders",
        json!({"user_id": "user-123", "status": "shipped"}),
    )]);
    let agent = DeepAgent::builder()
        .model(client)
        .tool(search_orders)
        .build()?;
    let response = agent.run("Which of my orders have shipped?").await?;
    println!("--- answer ---\n{}", response.text());
    Ok(())
}
