//! The agent loop: runtime buckets, middleware, errors, concurrency, sessions, agents as tools.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use cairn_core::testing::{RecordedRequest, ScriptedClient};
use cairn_core::{Agent, ChatError, ChatErrorKind};
use cairn_core::{
    AgentContext, AgentEventKind, AgentNext, AgentResponse, AgentSession, ChatContext, ChatNext,
    ChatResponse, Content, FnTool, FunctionInvocationContext, FunctionNext, Kwargs, LoopConfig,
    Message, Result, Role, SharedTool, ToolChoice, ToolError, ToolOutput, UpdateEvent,
};
use cairn_test_support::agent::first_result;
use futures::StreamExt;
use serde_json::{Value, json};

fn text_schema() -> Value {
    json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"], "additionalProperties": false})
}

/// `echo(text)`: returns its argument and records what it saw in `kwargs`.
fn echo_tool(seen: Arc<Mutex<Vec<Kwargs>>>) -> FnTool {
    FnTool::new("echo", "Echo the text back.", text_schema(), move |ctx| {
        let seen = Arc::clone(&seen);
        async move {
            seen.lock().unwrap().push(ctx.kwargs.clone());
            Ok(ToolOutput::text(
                ctx.arguments["text"].as_str().unwrap_or_default(),
            ))
        }
    })
}

/// A scripted model that calls `tool` with `args` on its first `steps` turns, then says "done".
fn loop_client(steps: usize, tool: &'static str, args: Value) -> ScriptedClient {
    ScriptedClient::new(move |req: &RecordedRequest| {
        let done = req
            .messages
            .iter()
            .filter(|m| m.role == Role::Assistant)
            .count();
        Ok(if done < steps {
            let mut r = ChatResponse::tool_calls([(tool, args.clone())]);
            if let Content::FunctionCall(fc) = &mut r.messages[0].contents[0] {
                fc.call_id = format!("call_{done}");
            }
            r
        } else {
            ChatResponse::text("done")
        })
    })
}

#[tokio::test]
async fn kwargs_reach_tools_and_never_the_model() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let client = loop_client(2, "echo", json!({"text": "hi"}));
    let agent = Agent::builder(client.clone())
        .tool(echo_tool(Arc::clone(&seen)))
        .build();
    let response = agent
        .run("go")
        .function_invocation_kwargs(Kwargs::from([("user_id", "user-123-secret")]))
        .client_kwargs(Kwargs::from([("trace_header", "abc")]))
        .await
        .unwrap();
    assert_eq!(response.text(), "done");
    assert_eq!(response.model_calls, 3);
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    assert!(
        seen.iter()
            .all(|k| k.get_str("user_id") == Some("user-123-secret"))
    );
    assert!(
        seen.iter().all(|k| !k.contains_key("trace_header")),
        "client kwargs leaked to a tool"
    );
    for r in client.requests() {
        assert!(
            !r.to_json().contains("user-123-secret"),
            "kwargs leaked into a model request"
        );
        assert!(r.function_invocation_kwargs.is_empty());
        assert_eq!(r.client_kwargs.get_str("trace_header"), Some("abc"));
        assert_eq!(r.options.tools.len(), 1);
    }
}

async fn enrich(
    mut ctx: FunctionInvocationContext,
    next: FunctionNext,
) -> Result<FunctionInvocationContext> {
    ctx.kwargs.set_default("tenant", "contoso");
    ctx.kwargs.insert("request_source", "middleware");
    next.run(ctx).await
}

#[tokio::test]
async fn function_middleware_sets_kwargs_the_tool_sees() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let agent = Agent::builder(loop_client(1, "echo", json!({"text": "x"})))
        .tool(echo_tool(Arc::clone(&seen)))
        .middleware(enrich)
        .build();
    agent
        .run("go")
        .function_invocation_kwargs(Kwargs::from([("tenant", "fabrikam")]))
        .await
        .unwrap();
    let seen = seen.lock().unwrap();
    assert_eq!(
        seen[0].get_str("tenant"),
        Some("fabrikam"),
        "set_default must keep the caller's value"
    );
    assert_eq!(seen[0].get_str("request_source"), Some("middleware"));
}

#[tokio::test]
async fn function_middleware_rewrites_arguments_and_results() {
    let agent = Agent::builder(loop_client(1, "echo", json!({"text": "original"})))
        .tool(echo_tool(Arc::default()))
        .middleware(
            |mut ctx: FunctionInvocationContext, next: FunctionNext| async move {
                ctx.arguments["text"] = json!("rewritten");
                let mut ctx = next.run(ctx).await?;
                let seen = ctx.result.as_ref().unwrap().text_content();
                ctx.result = Some(ToolOutput::text(format!("{seen}!")));
                Ok(ctx)
            },
        )
        .build();
    let r = agent.run("go").await.unwrap();
    let result = first_result(&r.messages);
    assert_eq!(result.text(), "rewritten!");
}

type Log = Arc<Mutex<Vec<String>>>;

/// Middleware of any kind that logs `name>` before `next` and `<name` after it.
fn log_mw<C: Send + 'static>(
    log: Log,
    name: &'static str,
) -> impl Fn(C, cairn_core::Next<C>) -> cairn_core::BoxFuture<'static, Result<C>> + Send + Sync + 'static
{
    move |ctx, next| {
        let log = Arc::clone(&log);
        Box::pin(async move {
            log.lock().unwrap().push(format!("{name}>"));
            let ctx = next.run(ctx).await?;
            log.lock().unwrap().push(format!("<{name}"));
            Ok(ctx)
        })
    }
}

#[tokio::test]
async fn middleware_order_agent_level_outside_run_level() {
    let log: Log = Arc::default();
    let agent = Agent::builder(loop_client(1, "echo", json!({"text": "x"})))
        .tool(echo_tool(Arc::default()))
        .middleware(log_mw::<AgentContext>(Arc::clone(&log), "agent_ag"))
        .middleware(log_mw::<ChatContext>(Arc::clone(&log), "agent_chat"))
        .middleware(log_mw::<FunctionInvocationContext>(
            Arc::clone(&log),
            "agent_fn",
        ))
        .build();
    agent
        .run("go")
        .middleware(log_mw::<AgentContext>(Arc::clone(&log), "run_ag"))
        .middleware(log_mw::<ChatContext>(Arc::clone(&log), "run_chat"))
        .middleware(log_mw::<FunctionInvocationContext>(
            Arc::clone(&log),
            "run_fn",
        ))
        .await
        .unwrap();
    let got = log.lock().unwrap().join(" ");
    assert_eq!(
        got,
        "agent_ag> run_ag> \
         agent_chat> run_chat> <run_chat <agent_chat \
         agent_fn> run_fn> <run_fn <agent_fn \
         agent_chat> run_chat> <run_chat <agent_chat \
         <run_ag <agent_ag"
    );
}

#[tokio::test]
async fn short_circuiting_function_middleware_skips_the_tool() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let client = loop_client(1, "echo", json!({"text": "x"}));
    let agent = Agent::builder(client.clone())
        .tool(echo_tool(Arc::clone(&seen)))
        .middleware(
            |mut ctx: FunctionInvocationContext, _next: FunctionNext| async move {
                ctx.result = Some(ToolOutput::text("overridden"));
                Ok(ctx)
            },
        )
        .build();
    let r = agent.run("go").await.unwrap();
    assert!(seen.lock().unwrap().is_empty(), "the tool ran");
    assert_eq!(
        r.text(),
        "done",
        "the loop goes on after an overridden result"
    );
    let last = client.requests().pop().unwrap();
    let result = first_result(&last.messages);
    assert_eq!(result.text(), "overridden");
}

#[tokio::test]
async fn short_circuiting_agent_middleware_makes_no_model_call() {
    let client = loop_client(0, "echo", json!({}));
    let agent = Agent::builder(client.clone())
        .middleware(|mut ctx: AgentContext, _next: AgentNext| async move {
            ctx.result = Some(AgentResponse {
                messages: vec![Message::assistant("cached")],
                ..Default::default()
            });
            Ok(ctx)
        })
        .build();
    let r = agent.run("go").await.unwrap();
    assert_eq!(r.text(), "cached");
    assert!(client.requests().is_empty());
}

#[tokio::test]
async fn terminating_function_middleware_ends_the_loop() {
    let client = loop_client(3, "echo", json!({"text": "x"}));
    let agent = Agent::builder(client.clone())
        .tool(echo_tool(Arc::default()))
        .middleware(
            |mut ctx: FunctionInvocationContext, next: FunctionNext| async move {
                ctx.terminate = true;
                next.run(ctx).await
            },
        )
        .build();
    let r = agent.run("go").await.unwrap();
    assert!(r.terminated);
    assert_eq!(
        client.requests().len(),
        1,
        "no model call after termination"
    );
    assert_eq!(r.messages.last().unwrap().role, Role::Tool);
}

#[tokio::test]
async fn chat_middleware_builds_a_dynamic_system_prompt() {
    #[derive(Debug)]
    struct Rights(&'static str);
    let client = loop_client(0, "echo", json!({}));
    let agent = Agent::builder(client.clone())
        .instructions("You are a helper.")
        .middleware(|mut ctx: ChatContext, next: ChatNext| async move {
            let rights = ctx
                .extensions
                .get::<Rights>()
                .map(|r| r.0)
                .unwrap_or("read-only");
            let base = ctx.options.instructions.take().unwrap_or_default();
            ctx.options.instructions = Some(format!("{base}\nThe user has {rights} rights."));
            next.run(ctx).await
        })
        .build();
    agent.run("hi").extension(Rights("admin")).await.unwrap();
    agent.run("hi").await.unwrap();
    let reqs = client.requests();
    assert_eq!(
        reqs[0].options.instructions.as_deref(),
        Some("You are a helper.\nThe user has admin rights.")
    );
    assert_eq!(
        reqs[1].options.instructions.as_deref(),
        Some("You are a helper.\nThe user has read-only rights.")
    );
}

#[tokio::test]
async fn middleware_errors_abort_the_run() {
    let agent = Agent::builder(loop_client(1, "echo", json!({"text": "x"})))
        .tool(echo_tool(Arc::default()))
        .middleware(
            |_ctx: FunctionInvocationContext, _next: FunctionNext| async move {
                Err(cairn_core::Error::middleware("policy denied"))
            },
        )
        .build();
    let err = agent.run("go").await.unwrap_err();
    assert!(err.to_string().contains("policy denied"), "{err}");
}

fn last_tool_text(req: &RecordedRequest) -> String {
    req.messages
        .iter()
        .flat_map(Message::function_results)
        .last()
        .map(|r| r.text())
        .unwrap_or_default()
}

#[tokio::test]
async fn tool_failures_become_messages_and_the_run_finishes() {
    let failing = FnTool::new(
        "flaky",
        "Always fails.",
        json!({"type": "object", "properties": {}}),
        |_ctx| async move { Err::<ToolOutput, _>(ToolError::failed("disk quota exceeded")) },
    );
    let panicking = FnTool::new(
        "boom",
        "Panics.",
        json!({"type": "object", "properties": {}}),
        |_ctx| async move {
            if true {
                panic!("kaboom");
            }
            Ok(ToolOutput::text("unreachable"))
        },
    );
    let typed = FnTool::typed("typed", "Needs a number.", |a: NumArgs, _ctx| async move {
        a.n * 2
    });
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct NumArgs {
        n: i64,
    }
    let script = [
        ("flaky", "{}".to_owned()),
        ("boom", "{}".to_owned()),
        ("nope", "{}".to_owned()),
        ("typed", "{not json".to_owned()),
        ("typed", "{\"n\": \"seven\"}".to_owned()),
        ("typed", "[1]".to_owned()),
        ("typed", "{\"n\": 21}".to_owned()),
    ];
    let client = ScriptedClient::new(move |req| {
        let step = req.tool_results();
        Ok(match script.get(step) {
            Some((name, args)) => ChatResponse {
                messages: vec![Message::new(
                    Role::Assistant,
                    vec![Content::FunctionCall(cairn_core::FunctionCall {
                        call_id: format!("c{step}"),
                        name: (*name).to_owned(),
                        arguments: args.clone(),
                    })],
                )],
                ..Default::default()
            },
            None => ChatResponse::text("recovered"),
        })
    });
    let agent = Agent::builder(client.clone())
        .tool(failing)
        .tool(panicking)
        .tool(typed)
        .loop_config(LoopConfig {
            max_consecutive_errors: 100,
            ..Default::default()
        })
        .build();
    let r = agent.run("go").await.unwrap();
    assert_eq!(r.last_text().as_deref(), Some("recovered"));
    let reqs = client.requests();
    let texts: Vec<String> = reqs[1..].iter().map(last_tool_text).collect();
    assert_eq!(texts[0], "Error: flaky failed: disk quota exceeded");
    assert_eq!(texts[1], "Error: boom crashed: kaboom");
    assert_eq!(
        texts[2],
        "Error: Requested function \"nope\" not found. Available tools: flaky, boom, typed."
    );
    assert!(
        texts[3].starts_with(
            "Error: Argument parsing failed for typed: the arguments are not valid JSON"
        ),
        "{}",
        texts[3]
    );
    assert!(
        texts[4].starts_with(
            "Error: Argument parsing failed for typed: invalid type: string \"seven\""
        ),
        "{}",
        texts[4]
    );
    assert!(
        texts[5].contains("expected a JSON object, got an array"),
        "{}",
        texts[5]
    );
    assert_eq!(texts[6], "42");
    let errors: Vec<bool> = r
        .messages
        .iter()
        .flat_map(Message::function_results)
        .map(|r| r.is_error)
        .collect();
    assert_eq!(errors, [true, true, true, true, true, true, false]);
}

#[tokio::test]
async fn undetailed_errors_hide_the_message() {
    let failing = FnTool::new(
        "flaky",
        "Always fails.",
        json!({"type": "object", "properties": {}}),
        |_ctx| async move { Err::<ToolOutput, _>(ToolError::failed("secret path /etc/x")) },
    );
    let client = loop_client(1, "flaky", json!({}));
    let agent = Agent::builder(client.clone())
        .tool(failing)
        .loop_config(LoopConfig {
            include_detailed_errors: false,
            ..Default::default()
        })
        .build();
    agent.run("go").await.unwrap();
    assert_eq!(
        last_tool_text(&client.requests()[1]),
        "Error: Function failed."
    );
}

#[tokio::test]
async fn iteration_bound_then_one_tool_less_call() {
    let client = loop_client(usize::MAX, "echo", json!({"text": "x"}));
    let agent = Agent::builder(client.clone())
        .tool(echo_tool(Arc::default()))
        .loop_config(LoopConfig {
            max_iterations: 3,
            ..Default::default()
        })
        .build();
    let r = agent.run("go").await.unwrap();
    let reqs = client.requests();
    assert_eq!(reqs.len(), 4);
    let choices: Vec<Option<ToolChoice>> =
        reqs.iter().map(|r| r.options.tool_choice.clone()).collect();
    assert_eq!(choices, [None, None, None, Some(ToolChoice::None)]);
    // The last call ignored tool_choice=none: its calls are dropped and the fallback text added.
    assert_eq!(
        r.last_text().as_deref(),
        Some(cairn_core::agent::LIMIT_REACHED_TEXT)
    );
    let calls = r.function_calls().count();
    let results = r
        .messages
        .iter()
        .flat_map(Message::function_results)
        .count();
    assert_eq!(calls, results, "every call in the history has a result");
}

#[tokio::test]
async fn consecutive_failing_batches_force_a_final_call() {
    let failing = FnTool::new(
        "flaky",
        "Always fails.",
        json!({"type": "object", "properties": {}}),
        |_ctx| async move { Err::<ToolOutput, _>(ToolError::failed("no")) },
    );
    let client = loop_client(usize::MAX, "flaky", json!({}));
    let agent = Agent::builder(client.clone()).tool(failing).build();
    agent.run("go").await.unwrap();
    let reqs = client.requests();
    assert_eq!(reqs.len(), 4, "3 failing batches, then the final call");
    assert_eq!(reqs[3].options.tool_choice, Some(ToolChoice::None));
}

#[tokio::test]
async fn max_function_calls_is_checked_after_each_batch() {
    let client = ScriptedClient::new(|_| {
        Ok(ChatResponse::tool_calls([
            ("echo", json!({"text": "a"})),
            ("echo", json!({"text": "b"})),
        ]))
    });
    let agent = Agent::builder(client.clone())
        .tool(echo_tool(Arc::default()))
        .loop_config(LoopConfig {
            max_function_calls: Some(3),
            ..Default::default()
        })
        .build();
    agent.run("go").await.unwrap();
    let choices: Vec<Option<ToolChoice>> = client
        .requests()
        .iter()
        .map(|r| r.options.tool_choice.clone())
        .collect();
    assert_eq!(choices, [None, None, Some(ToolChoice::None)]);
}

fn barrier_tool(barrier: Arc<tokio::sync::Barrier>, order: Log) -> SharedTool {
    Arc::new(FnTool::new(
        "wait",
        "Waits for a peer.",
        text_schema(),
        move |ctx| {
            let barrier = Arc::clone(&barrier);
            let order = Arc::clone(&order);
            async move {
                let id = ctx.arguments["text"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                order.lock().unwrap().push(format!("start {id}"));
                // Only returns when both calls are inside the tool at the same time.
                tokio::time::timeout(Duration::from_millis(500), barrier.wait())
                    .await
                    .map_err(|_| ToolError::failed("the other call never started"))?;
                order.lock().unwrap().push(format!("end {id}"));
                Ok(ToolOutput::text(id))
            }
        },
    ))
}

fn two_calls_client() -> ScriptedClient {
    ScriptedClient::new(|req| {
        Ok(if req.tool_results() == 0 {
            ChatResponse::tool_calls([
                ("wait", json!({"text": "a"})),
                ("wait", json!({"text": "b"})),
            ])
        } else {
            ChatResponse::text("done")
        })
    })
}

#[tokio::test]
async fn calls_of_one_turn_really_overlap() {
    let order: Log = Arc::default();
    let agent = Agent::builder(two_calls_client())
        .tools([barrier_tool(
            Arc::new(tokio::sync::Barrier::new(2)),
            Arc::clone(&order),
        )])
        .build();
    let r = agent.run("go").await.unwrap();
    let results: Vec<bool> = r
        .messages
        .iter()
        .flat_map(Message::function_results)
        .map(|r| r.is_error)
        .collect();
    assert_eq!(results, [false, false], "both calls met at the barrier");
    let order = order.lock().unwrap();
    assert_eq!(&order[..2], ["start a", "start b"]);
}

#[tokio::test]
async fn serialized_calls_run_in_model_order() {
    let order: Log = Arc::default();
    let agent = Agent::builder(two_calls_client())
        .tools([barrier_tool(
            Arc::new(tokio::sync::Barrier::new(1)),
            Arc::clone(&order),
        )])
        .loop_config(LoopConfig {
            concurrent_tool_calls: false,
            ..Default::default()
        })
        .build();
    agent.run("go").await.unwrap();
    assert_eq!(
        *order.lock().unwrap(),
        ["start a", "end a", "start b", "end b"]
    );
}

#[tokio::test]
async fn sessions_keep_state_and_history_and_survive_serde() {
    let remember = FnTool::new(
        "remember_topic",
        "Remember a topic.",
        json!({"type": "object", "properties": {"topic": {"type": "string"}}}),
        |ctx| async move {
            let Some(session) = &ctx.session else {
                return Ok(ToolOutput::text("No session available."));
            };
            let topic = ctx.arguments["topic"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            session
                .state()
                .insert("topic", &topic)
                .map_err(ToolError::failed)?;
            Ok(ToolOutput::text(format!(
                "Stored {topic:?} in session state."
            )))
        },
    );
    let client = ScriptedClient::new(|req| {
        let users = req.messages.iter().filter(|m| m.role == Role::User).count();
        Ok(match (users, req.tool_results()) {
            (1, 0) => {
                ChatResponse::tool_calls([("remember_topic", json!({"topic": "budget review"}))])
            }
            (1, _) => ChatResponse::text("Noted."),
            _ => ChatResponse::text(format!("This is turn {users}.")),
        })
    });
    let agent = Agent::builder(client.clone()).tool(remember).build();
    let session = agent.create_session();
    agent
        .run("Remember that the budget review is on Friday.")
        .session(&session)
        .await
        .unwrap();
    assert_eq!(
        session.state().get::<String>("topic").as_deref(),
        Some("budget review")
    );
    assert_eq!(session.message_count(), 4, "user, call, result, answer");

    let restored = AgentSession::from_json(&session.to_json().unwrap()).unwrap();
    let r = agent.run("And now?").session(&restored).await.unwrap();
    assert_eq!(r.text(), "This is turn 2.");
    let last = client.requests().pop().unwrap();
    let roles: Vec<&str> = last.messages.iter().map(|m| m.role.as_str()).collect();
    assert_eq!(roles, ["user", "assistant", "tool", "assistant", "user"]);
}

#[tokio::test]
async fn agents_as_tools_share_or_isolate_the_session() {
    let store_findings = FnTool::new(
        "store_findings",
        "Store findings.",
        json!({"type": "object", "properties": {"findings": {"type": "string"}}}),
        |ctx| async move {
            if let Some(s) = &ctx.session {
                s.state()
                    .insert("findings", ctx.arguments["findings"].clone())
                    .map_err(ToolError::failed)?;
                s.state()
                    .insert("child_session_id", s.id())
                    .map_err(ToolError::failed)?;
            }
            Ok(ToolOutput::text(""))
        },
    );
    let research_client = ScriptedClient::new(|req| {
        Ok(if req.tool_results() == 0 {
            ChatResponse::tool_calls([("store_findings", json!({"findings": "rust is fast"}))])
        } else {
            ChatResponse::text("research complete")
        })
    });
    let research = Agent::builder(research_client)
        .name("ResearchAgent")
        .tool(store_findings)
        .build();

    for propagate in [true, false] {
        let parent_client = loop_client(1, "research", json!({"query": "rust"}));
        let parent = Agent::builder(parent_client.clone())
            .tool(
                research
                    .as_tool()
                    .name("research")
                    .description("Research a topic and store findings.")
                    .arg_name("query")
                    .propagate_session(propagate),
            )
            .build();
        let session = parent.create_session();
        let r = parent.run("research rust").session(&session).await.unwrap();
        assert_eq!(r.text(), "done");
        let tool_result = last_tool_text(&parent_client.requests()[1]);
        assert_eq!(tool_result, "research complete");
        if propagate {
            assert_eq!(
                session.state().get::<String>("findings").as_deref(),
                Some("rust is fast")
            );
            assert_eq!(
                session.state().get::<String>("child_session_id").as_deref(),
                Some(session.id())
            );
            assert_eq!(
                session.message_count(),
                4,
                "the child's history is not mixed into the parent's"
            );
        } else {
            assert!(session.state().get_value("findings").is_none());
        }
    }
}

#[tokio::test]
async fn as_tool_schema_has_one_required_string() {
    let agent = Agent::builder(loop_client(0, "x", json!({})))
        .name("Invoice & Billing Agent")
        .description("Bills.")
        .build();
    let tool = agent.as_tool().build();
    let spec = cairn_core::Tool::spec(&tool);
    assert_eq!(spec.name, "Invoice_Billing_Agent");
    assert_eq!(spec.description, "Bills.");
    assert_eq!(
        spec.parameters,
        json!({"type": "object", "properties": {"task": {"type": "string", "description": "Task for Invoice_Billing_Agent"}}, "required": ["task"], "additionalProperties": false})
    );
}

#[tokio::test]
async fn kwargs_flow_through_nested_delegation() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let c = Agent::builder(loop_client(1, "echo", json!({"text": "deep"})))
        .name("C")
        .tool(echo_tool(Arc::clone(&seen)))
        .build();
    let b = Agent::builder(loop_client(1, "C", json!({"task": "go deeper"})))
        .name("B")
        .tool(c.as_tool())
        .build();
    let a = Agent::builder(loop_client(1, "B", json!({"task": "delegate"})))
        .name("A")
        .tool(b.as_tool())
        .build();
    a.run("start")
        .function_invocation_kwargs(Kwargs::from([("user_id", "u-9"), ("tenant", "contoso")]))
        .await
        .unwrap();
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].get_str("user_id"), Some("u-9"));
    assert_eq!(seen[0].get_str("tenant"), Some("contoso"));
}

#[tokio::test]
async fn streaming_yields_updates_and_the_same_final_response() {
    let make = || {
        Agent::builder(loop_client(2, "echo", json!({"text": "hello there"})))
            .name("Streamer")
            .tool(echo_tool(Arc::default()))
            .build()
    };
    let plain = make().run("go").await.unwrap();
    let mut stream = make().run("go").stream();
    let mut kinds = Vec::new();
    let mut text = String::new();
    let mut completed = None;
    while let Some(u) = stream.next().await {
        assert_eq!(u.metadata.agent_name.as_deref(), Some("Streamer"));
        match u.kind {
            AgentEventKind::Model(m) => match m.event {
                UpdateEvent::TextDelta { text: t } => {
                    text.push_str(&t);
                    kinds.push("text");
                }
                UpdateEvent::ToolCallStart { .. } => kinds.push("call"),
                _ => {}
            },
            AgentEventKind::ToolResult(_) => kinds.push("result"),
            AgentEventKind::RunCompleted(r) => completed = Some(*r),
            _ => {}
        }
    }
    let streamed = stream.final_response().await.unwrap();
    assert_eq!(streamed, plain);
    assert_eq!(completed.as_ref(), Some(&plain));
    assert_eq!(text, "done");
    kinds.dedup();
    assert_eq!(kinds, ["call", "result", "call", "result", "text"]);
}

#[tokio::test]
async fn nested_agent_updates_carry_their_namespace() {
    let child = Agent::builder(loop_client(0, "x", json!({})))
        .name("Child")
        .build();
    let parent = Agent::builder(loop_client(1, "helper", json!({"task": "t"})))
        .name("Parent")
        .tool(child.as_tool().name("helper"))
        .build();
    let stream = parent.run("go").stream();
    let updates: Vec<_> = stream.collect().await;
    let nested: Vec<_> = updates
        .iter()
        .filter(|u| !u.metadata.namespace.is_empty())
        .collect();
    assert!(!nested.is_empty());
    assert!(
        nested.iter().all(|u| u.metadata.namespace == ["helper"]
            && u.metadata.agent_name.as_deref() == Some("Child"))
    );
}

#[tokio::test]
async fn provider_errors_fail_the_run_with_a_typed_error() {
    let client = ScriptedClient::new(|_| {
        Err(ChatError::from_status(
            400,
            "context_length_exceeded: too long",
        ))
    });
    let agent = Agent::builder(client).build();
    let err = agent.run("hi").await.unwrap_err();
    assert!(err.as_chat().unwrap().is_context_overflow());
    let other = ScriptedClient::new(|_| Err(ChatError::new(ChatErrorKind::Connect, "refused")));
    let err = Agent::builder(other).build().run("hi").await.unwrap_err();
    assert!(err.as_chat().unwrap().is_retryable());
}

#[tokio::test]
async fn chat_middleware_edits_apply_to_one_call_only() {
    let client = ScriptedClient::new(|req| {
        Ok(if req.tool_results() == 0 {
            ChatResponse::tool_calls([("echo", json!({"text": "x"}))])
        } else {
            ChatResponse::text("done")
        })
    });
    let agent = Agent::builder(client.clone())
        .tool(echo_tool(Arc::default()))
        .middleware(|mut ctx: ChatContext, next: ChatNext| async move {
            // Send a trimmed view: drop everything before the last message.
            let last = ctx.messages.last().cloned();
            let view = Arc::make_mut(&mut ctx.messages);
            view.clear();
            view.extend(last);
            next.run(ctx).await
        })
        .build();
    let session = agent.create_session();
    let r = agent.run("go").session(&session).await.unwrap();
    assert!(client.requests().iter().all(|r| r.messages.len() == 1));
    // What the agent keeps is the full conversation.
    assert_eq!(r.messages.len(), 3, "call, result, answer");
    assert_eq!(session.message_count(), 4);
}
