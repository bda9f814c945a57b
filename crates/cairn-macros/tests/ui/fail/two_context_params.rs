use cairn_core::FunctionInvocationContext;
use cairn_macros::tool;

#[tool]
fn send_email(
    address: String,
    ctx: &FunctionInvocationContext,
    other: &cairn_core::FunctionInvocationContext,
) -> String {
    let _ = (ctx, other);
    address
}

fn main() {}
