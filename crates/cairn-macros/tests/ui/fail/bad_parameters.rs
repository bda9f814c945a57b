use cairn_core::FunctionInvocationContext;
use cairn_macros::tool;

#[tool]
fn generic<T>(x: T) -> String {
    let _ = x;
    String::new()
}

#[tool]
fn mutable_context(ctx: &mut FunctionInvocationContext) {
    let _ = ctx;
}

#[tool]
fn pattern((a, b): (u32, u32)) -> u32 {
    a + b
}

#[tool]
fn default_on_context(#[default(1)] ctx: &FunctionInvocationContext) {
    let _ = ctx;
}

fn main() {}
