//! Tools shared by the macro test binaries.

use cairn_core::FunctionInvocationContext;
use cairn_macros::tool;

/// Queue an email to a recipient.
///
/// The sender comes from the runtime context.
#[tool(approval_mode = "never_require")]
pub fn send_email(
    /// Recipient email address.
    address: String,
    ctx: &FunctionInvocationContext,
) -> String {
    let user_id = ctx.kwargs["user_id"].as_str().unwrap_or("?").to_owned();
    let tenant = ctx.kwargs.get_str("tenant").unwrap_or("default");
    format!("Queued email for {address} from {user_id} ({tenant})")
}
