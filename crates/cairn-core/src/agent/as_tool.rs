//! An agent used as a tool (SPEC R4).

#[allow(clippy::wildcard_imports)]
use super::*;

/// Builds the tool form of an agent (SPEC R4). See [`Agent::as_tool`].
#[must_use]
pub struct AgentToolBuilder {
    agent: Agent,
    name: Option<String>,
    description: Option<String>,
    arg_name: String,
    arg_description: Option<String>,
    propagate_session: bool,
    approval_mode: crate::tool::ApprovalMode,
}

impl AgentToolBuilder {
    /// The tool name (default: the agent's name, sanitized).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }
    /// The tool description (default: the agent's description).
    pub fn description(mut self, d: impl Into<String>) -> Self {
        self.description = Some(d.into());
        self
    }
    /// The name of the one string argument (default `task`).
    pub fn arg_name(mut self, n: impl Into<String>) -> Self {
        self.arg_name = n.into();
        self
    }
    /// The argument's description (default `Task for <tool name>`).
    pub fn arg_description(mut self, d: impl Into<String>) -> Self {
        self.arg_description = Some(d.into());
        self
    }
    /// `true`: the sub-agent shares the caller's session state; `false` (default): it gets a
    /// session of its own.
    pub fn propagate_session(mut self, yes: bool) -> Self {
        self.propagate_session = yes;
        self
    }
    /// Whether calls need approval.
    pub fn approval_mode(mut self, mode: crate::tool::ApprovalMode) -> Self {
        self.approval_mode = mode;
        self
    }
    /// The tool.
    pub fn build(self) -> AgentTool {
        let name = crate::tool::sanitize_tool_name(
            self.name
                .as_deref()
                .or(self.agent.name())
                .unwrap_or("agent"),
        );
        let arg_description = self
            .arg_description
            .unwrap_or_else(|| format!("Task for {name}"));
        let parameters = serde_json::json!({
            "type": "object",
            "properties": { &self.arg_name: { "type": "string", "description": arg_description } },
            "required": [&self.arg_name],
            "additionalProperties": false,
        });
        let mut spec = ToolSpec::new(
            name,
            self.description
                .or_else(|| self.agent.description().map(str::to_owned))
                .unwrap_or_default(),
            parameters,
        );
        spec.approval_mode = self.approval_mode;
        AgentTool {
            spec,
            agent: self.agent,
            arg_name: self.arg_name,
            propagate_session: self.propagate_session,
        }
    }
}

impl IntoTool for AgentToolBuilder {
    fn into_tool(self) -> SharedTool {
        Arc::new(self.build())
    }
}

/// An agent exposed as a tool.
pub struct AgentTool {
    spec: ToolSpec,
    agent: Agent,
    arg_name: String,
    propagate_session: bool,
}

impl crate::tool::Tool for AgentTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn invoke<'a>(
        &'a self,
        ctx: &'a FunctionInvocationContext,
    ) -> crate::client::BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            let task = ctx
                .arguments
                .get(&self.arg_name)
                .and_then(Value::as_str)
                .ok_or_else(|| {
                    ToolError::InvalidArguments(format!(
                        "missing string argument `{}`",
                        self.arg_name
                    ))
                })?;
            let session = if self.propagate_session {
                ctx.session
                    .as_ref()
                    .map(AgentSession::sharing_state)
                    .unwrap_or_default()
            } else {
                AgentSession::new()
            };
            let sub = self
                .agent
                .sub_run(ctx, task)
                .await
                .map_err(|e| ToolError::failed(format!("the agent's thread: {e}")))?;
            let req = match sub {
                super::SubRun::Finished { done, .. } => {
                    return Ok(ToolOutput::text(done.response().text()));
                }
                super::SubRun::Resume { request, .. } | super::SubRun::Run(request) => request,
            };
            let mut req = req
                .session(&session)
                .function_invocation_kwargs(ctx.kwargs.clone())
                .extensions(&ctx.extensions);
            if let Some(sink) = &ctx.updates {
                req = req.updates(
                    sink.nested(self.spec.name.clone(), self.agent.name().map(str::to_owned)),
                );
            }
            let response = req.await.map_err(|e| ToolError::failed(e.to_string()))?;
            if !response.interrupts.is_empty() {
                return Err(ToolError::Interrupted(response.interrupts));
            }
            Ok(ToolOutput::text(response.text()))
        })
    }
}

impl Agent {
    /// The tool form of this agent (SPEC R4): one required string argument (`task` unless
    /// renamed); the caller's function-invocation kwargs and extensions flow into the
    /// sub-agent's run, at any depth of delegation.
    pub fn as_tool(&self) -> AgentToolBuilder {
        AgentToolBuilder {
            agent: self.clone(),
            name: None,
            description: None,
            arg_name: "task".into(),
            arg_description: None,
            propagate_session: false,
            approval_mode: Default::default(),
        }
    }
}

impl From<AnyMiddleware> for MiddlewareSet {
    fn from(m: AnyMiddleware) -> Self {
        let mut s = MiddlewareSet::default();
        s.push(m);
        s
    }
}

impl From<Error> for ToolError {
    fn from(e: Error) -> Self {
        ToolError::failed(e)
    }
}
