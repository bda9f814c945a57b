#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(dead_code)]

use std::sync::Arc;

use cairn_core::{AgentSession, FunctionInvocationContext, SharedTool, ToolOutput};
use cairn_deep::backend::SharedBackend;
use cairn_deep::tools::filesystem_tools;
use serde_json::Value;

/// The built-in file tools over `backend`, by name.
pub struct Tools {
    pub tools: Vec<SharedTool>,
    pub session: AgentSession,
}

impl Tools {
    pub fn new(backend: SharedBackend) -> Self {
        Tools {
            tools: filesystem_tools(backend),
            session: AgentSession::new(),
        }
    }

    pub fn tool(&self, name: &str) -> SharedTool {
        Arc::clone(
            self.tools
                .iter()
                .find(|t| t.spec().name == name)
                .unwrap_or_else(|| panic!("no tool {name}")),
        )
    }

    /// Calls `name` with `args`; returns (text, is_error).
    pub async fn call(&self, name: &str, args: Value) -> (String, bool) {
        let out = call_tool(&self.tool(name), args, Some(&self.session)).await;
        (out.text_content(), out.is_error)
    }

    /// Calls and expects success.
    pub async fn ok(&self, name: &str, args: Value) -> String {
        let (text, err) = self.call(name, args.clone()).await;
        assert!(!err, "{name}({args}) failed: {text}");
        text
    }

    /// Calls and expects an error.
    pub async fn err(&self, name: &str, args: Value) -> String {
        let (text, err) = self.call(name, args.clone()).await;
        assert!(err, "{name}({args}) succeeded: {text}");
        assert!(text.starts_with("Error: "), "{text}");
        text
    }
}

pub async fn call_tool(
    tool: &SharedTool,
    args: Value,
    session: Option<&AgentSession>,
) -> ToolOutput {
    let mut ctx = FunctionInvocationContext::new(Arc::clone(tool), "call_1", args);
    ctx.session = session.cloned();
    match tool.invoke(&ctx).await {
        Ok(out) => out,
        Err(e) => ToolOutput::error(format!("Error: {e}")),
    }
}
