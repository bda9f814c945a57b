use cairn_macros::tool;

#[tool(approval_mode = "sometimes")]
fn a() {}

#[tool(approval = "always_require")]
fn b() {}

fn main() {}
