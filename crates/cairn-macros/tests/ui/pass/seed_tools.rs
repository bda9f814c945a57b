// The seed's samples, with the tools in a module and given to an agent by name.
mod notify {
    use cairn_core::{FunctionInvocationContext, tool::ToolOutput};
    use cairn_macros::tool;

    /// Queue an email.
    #[tool(approval_mode = "never_require")]
    pub fn send_email(
        /// Recipient email address.
        address: String,
        ctx: &FunctionInvocationContext,
    ) -> String {
        let user_id = ctx.kwargs["user_id"].as_str().unwrap_or_default().to_owned();
        format!("Queued email for {address} from {user_id}")
    }

    #[tool(description = "Store findings for later steps.")]
    pub(crate) async fn store_findings(findings: String, ctx: &FunctionInvocationContext) {
        if let Some(session) = &ctx.session {
            session.state().insert_value("findings", findings.into());
        }
    }

    #[tool]
    pub fn image() -> ToolOutput {
        ToolOutput::text("x")
    }
}

fn main() {
    let client = cairn_core::testing::ScriptedClient::from_responses([]);
    let agent = cairn_core::Agent::builder(client)
        .tool(notify::send_email)
        .tool(notify::store_findings)
        .tool(notify::image)
        .build();
    assert_eq!(agent.tools().len(), 3);
    let _copy: notify::send_email = notify::send_email;

    // A tool declared inside a function body.
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    enum Mode {
        Fast,
        Slow,
    }
    /// Run locally.
    #[cairn_macros::tool]
    fn local(mode: Mode) -> &'static str {
        match mode {
            Mode::Fast => "fast",
            Mode::Slow => "slow",
        }
    }
    assert_eq!(cairn_core::Tool::spec(&local).name, "local");
}
