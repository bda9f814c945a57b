use cairn_macros::tool;

#[tool(name = "send email!")]
fn send_email(address: String) -> String {
    address
}

fn main() {}
