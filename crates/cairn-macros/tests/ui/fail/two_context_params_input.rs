use cairn_core::FunctionInvocationContext;
use cairn_macros::tool;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Args {
    q: String,
}

type Ctx = FunctionInvocationContext;

#[tool(input = Args)]
fn search(args: Args, typed: &FunctionInvocationContext, ctx: &Ctx) -> String {
    let _ = (typed, ctx);
    args.q
}

fn main() {}
