use std::sync::Arc;

use cairn_core::{FunctionInvocationContext as Fic, ToolSet};
use cairn_macros::{tool, tools};

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Query {
    text: String,
}

type Context = Fic;

// Explicit input type; `ctx` injected whatever its type is spelled.
#[tool(input = Query)]
fn lookup(q: Query, ctx: &Context) -> String {
    format!("{}{}", q.text, ctx.call_id)
}

pub struct Pool;

#[tools]
impl Pool {
    /// Run a query.
    #[tool]
    pub async fn query(&self, sql: String, #[context] _c: &Fic) -> Result<String, std::io::Error> {
        Ok(sql)
    }

    /// Ping, with the context type spelled out.
    #[tool]
    pub fn ping(&self, _c: &cairn_core::context::FunctionInvocationContext) -> &'static str {
        "pong"
    }

    pub fn helper(&self) -> u8 {
        1
    }
}

fn main() {
    let tools = Arc::new(Pool).tools();
    assert_eq!(tools.len(), 2);
    assert_eq!(Pool.helper(), 1);
    let _ = lookup;
}
