//! The deep-agent builder: prompt assembly, subagents, runtime context, memory, skills,
//! profiles and approvals.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use cairn_core::testing::{RecordedRequest, ScriptedClient};
use cairn_core::{
    AgentSession, ChatContext, ChatNext, ChatResponse, FnTool, FunctionResult, InMemoryStore,
    Message, Role, SharedStore, ToolError, ToolOutput,
};
use cairn_deep::approval::{Decision, InterruptOn};
use cairn_deep::runtime::{PromptRequest, SubagentContext, SubagentName, dynamic_system_prompt};
use cairn_deep::{
    CompositeBackend, DeepAgent, FilesystemBackend, HarnessProfile, ProfileRegistry, StateBackend,
    StoreBackend, SubAgent, ToolRuntimeExt,
};
use cairn_test_support::agent::first_result;
use serde_json::json;

fn tool_names(req: &RecordedRequest) -> Vec<String> {
    req.options.tools.iter().map(|t| t.name.clone()).collect()
}

/// A list of tool names, written space-separated.
fn names(list: &str) -> Vec<String> {
    list.split_whitespace().map(str::to_owned).collect()
}

/// The tool results in `messages`, in order.
fn results(messages: &[Message]) -> Vec<&FunctionResult> {
    messages
        .iter()
        .flat_map(Message::function_results)
        .collect()
}

fn instructions(req: &RecordedRequest) -> String {
    req.options.instructions.clone().unwrap_or_default()
}

fn is_subagent(req: &RecordedRequest) -> bool {
    instructions(req).contains("You are a subagent")
}

#[tokio::test]
async fn default_prompt_and_tools_snapshot() {
    let client = ScriptedClient::from_responses([ChatResponse::text("hi")]);
    let agent = DeepAgent::builder()
        .client(client.clone())
        .system_prompt("You are a research assistant. Always cite sources.")
        .build()
        .unwrap();
    agent.run("hello").await.unwrap();
    let req = &client.requests()[0];
    assert_eq!(
        tool_names(req),
        names("write_todos ls read_file write_file edit_file delete glob grep task")
    );
    insta::assert_snapshot!("default_system_prompt", instructions(req));
    let task = req.options.tools.iter().find(|t| t.name == "task").unwrap();
    insta::assert_json_snapshot!("task_tool_spec", task);
}

#[tokio::test]
async fn full_prompt_follows_the_spec_order() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("AGENTS.md"), "Project uses tabs.\n").unwrap();
    std::fs::create_dir_all(dir.path().join("skills/release-notes")).unwrap();
    std::fs::write(
        dir.path().join("skills/release-notes/SKILL.md"),
        "---\nname: release-notes\ndescription: Write release notes from the git log.\nlicense: MIT\n---\nSteps…",
    )
    .unwrap();
    let client = ScriptedClient::from_responses([ChatResponse::text("hi")]);
    let agent = DeepAgent::builder()
        .client(client.clone())
        .backend(Arc::new(FilesystemBackend::new(dir.path()).unwrap()))
        .system_prompt("CUSTOM PROMPT")
        .memory("/AGENTS.md")
        .skills("/skills")
        .middleware(|mut ctx: ChatContext, next: ChatNext| async move {
            let base = ctx.options.instructions.take().unwrap_or_default();
            ctx.options.instructions = Some(format!("{base}\n\nUSER MIDDLEWARE PROMPT"));
            next.run(ctx).await
        })
        .interrupt_on("write_file", InterruptOn::default())
        .build()
        .unwrap();
    agent.run("hello").await.unwrap();
    let prompt = instructions(&client.requests()[0]);
    let order = [
        "CUSTOM PROMPT",
        "You are a capable agent",
        "## Planning",
        "## Memory",
        "Project uses tabs.",
        "## Skills",
        "- release-notes: Write release notes from the git log. (`/skills/release-notes/SKILL.md`) [license: MIT]",
        "## Files",
        "## Subagents",
        "USER MIDDLEWARE PROMPT",
        "## Approvals",
    ];
    let mut at = 0;
    for part in order {
        let found = prompt[at..]
            .find(part)
            .unwrap_or_else(|| panic!("`{part}` missing or out of order in:\n{prompt}"));
        at += found + part.len();
    }
    insta::assert_snapshot!("full_system_prompt", prompt);
}

#[tokio::test]
async fn memory_loads_once_per_thread_and_skips_missing_files() {
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("AGENTS.md"), "v1").unwrap();
    std::fs::create_dir_all(home.path().join(".cairn")).unwrap();
    std::fs::write(home.path().join(".cairn/prefs.md"), "likes brevity").unwrap();
    let client = ScriptedClient::new(|_| Ok(ChatResponse::text("ok")));
    let agent = DeepAgent::builder()
        .client(client.clone())
        .backend(Arc::new(FilesystemBackend::new(dir.path()).unwrap()))
        .memory("/AGENTS.md")
        .memory("/missing.md")
        .memory("~/.cairn/prefs.md")
        .home_dir(home.path())
        .build()
        .unwrap();
    let thread = AgentSession::new();
    agent.run("a").session(&thread).await.unwrap();
    std::fs::write(dir.path().join("AGENTS.md"), "v2").unwrap();
    agent.run("b").session(&thread).await.unwrap();
    agent.run("c").session(&AgentSession::new()).await.unwrap();
    let reqs = client.requests();
    assert!(instructions(&reqs[0]).contains("From /AGENTS.md:\nv1"));
    assert!(instructions(&reqs[0]).contains("From ~/.cairn/prefs.md:\nlikes brevity"));
    assert!(!instructions(&reqs[0]).contains("missing.md:"));
    assert!(
        instructions(&reqs[1]).contains("v1"),
        "same thread: loaded once"
    );
    assert!(
        instructions(&reqs[2]).contains("v2"),
        "new thread: loaded again"
    );
}

#[tokio::test]
async fn skills_later_sources_win_and_bad_frontmatter_is_reported() {
    let backend = StateBackend::new();
    let thread = AgentSession::new();
    for (path, text) in [
        (
            "/base/notes/SKILL.md",
            "---\nname: notes\ndescription: Old notes skill.\n---\n",
        ),
        (
            "/team/notes/SKILL.md",
            "---\nname: notes\ndescription: Team notes skill.\n---\n",
        ),
        (
            "/team/broken/SKILL.md",
            "---\nname: broken\n---\nno description",
        ),
        ("/team/plain/SKILL.md", "no frontmatter at all"),
    ] {
        StateBackend::insert_file(thread.state(), path, text).unwrap();
    }
    let client = ScriptedClient::new(|_| Ok(ChatResponse::text("ok")));
    let agent = DeepAgent::builder()
        .client(client.clone())
        .backend(Arc::new(backend))
        .skills("/base")
        .skills("/team")
        .build()
        .unwrap();
    agent.run("go").session(&thread).await.unwrap();
    let p = instructions(&client.requests()[0]);
    assert!(
        p.contains("- notes: Team notes skill. (`/team/notes/SKILL.md`)"),
        "{p}"
    );
    assert!(!p.contains("Old notes skill"));
    assert!(
        p.contains("/team/broken/SKILL.md: frontmatter has no description"),
        "{p}"
    );
    assert!(
        p.contains("/team/plain/SKILL.md: no `---` frontmatter"),
        "{p}"
    );
}

/// One scripted model for a parent and its subagents: the parent delegates two tasks in one
/// turn; each subagent writes a file and reports.
fn delegating_client() -> ScriptedClient {
    ScriptedClient::new(|req| {
        Ok(if is_subagent(req) {
            let task = req
                .messages
                .iter()
                .find(|m| m.role == Role::User)
                .map(Message::text)
                .unwrap_or_default();
            match req.tool_results() {
                0 => ChatResponse::tool_calls([("rendezvous", json!({}))]),
                1 => ChatResponse::tool_calls([(
                    "write_file",
                    json!({"path": format!("/{task}.md"), "content": task}),
                )]),
                2 => ChatResponse::tool_calls([(
                    "write_todos",
                    json!({"todos": [{"content": "sub", "status": "completed"}]}),
                )]),
                _ => ChatResponse::text(format!("report on {task}")),
            }
        } else {
            match req.tool_results() {
                0 => ChatResponse::tool_calls([
                    (
                        "task",
                        json!({"description": "alpha", "subagent_type": "general-purpose"}),
                    ),
                    (
                        "task",
                        json!({"description": "beta", "subagent_type": "general-purpose"}),
                    ),
                ]),
                _ => ChatResponse::text("all done"),
            }
        })
    })
}

#[tokio::test]
async fn subagents_run_in_parallel_isolated_and_share_files() {
    let b = Arc::new(tokio::sync::Barrier::new(2));
    // Returns only when both subagents are inside it at once.
    let rendezvous = FnTool::new(
        "rendezvous",
        "Wait for the other subagent.",
        json!({"type": "object", "properties": {}}),
        move |_ctx| {
            let b = Arc::clone(&b);
            async move {
                tokio::time::timeout(Duration::from_secs(2), b.wait())
                    .await
                    .map_err(|_| ToolError::failed("the other subagent never arrived"))?;
                Ok(ToolOutput::text("met"))
            }
        },
    );
    let client = delegating_client();
    let agent = DeepAgent::builder()
        .client(client.clone())
        .tool(rendezvous)
        .build()
        .unwrap();
    let thread = AgentSession::new();
    thread
        .state()
        .insert(
            "todos",
            json!([{"content": "parent plan", "status": "in_progress"}]),
        )
        .unwrap();
    let r = agent.run("research").session(&thread).await.unwrap();
    assert_eq!(r.last_text().as_deref(), Some("all done"));

    let reports: Vec<String> = results(&r.messages).iter().map(|x| x.text()).collect();
    assert_eq!(reports, ["report on alpha", "report on beta"]);
    // Both subagents met at the barrier: they ran at the same time.
    let sub_reqs: Vec<_> = client.requests().into_iter().filter(is_subagent).collect();
    assert!(
        sub_reqs
            .iter()
            .any(|q| results(&q.messages).iter().any(|x| x.text() == "met"))
    );
    // Fresh context: a subagent's first request holds only its task.
    let first = sub_reqs.iter().find(|q| q.tool_results() == 0).unwrap();
    assert_eq!(first.messages.len(), 1);
    // Files written by both subagents reached the parent's thread; the parent's todos did not change.
    let files = StateBackend::files(thread.state());
    assert_eq!(files["/alpha.md"].content, "alpha");
    assert_eq!(files["/beta.md"].content, "beta");
    assert_eq!(
        thread.state().get_value("todos").unwrap()[0]["content"],
        "parent plan"
    );
    // The parent's context holds only the reports, not the subagents' tool calls.
    let parent_last = client
        .requests()
        .into_iter()
        .rfind(|q| !is_subagent(q))
        .unwrap();
    assert!(
        parent_last
            .messages
            .iter()
            .all(|m| m.function_calls().all(|c| c.name == "task"))
    );
    assert_eq!(
        parent_last.messages.len(),
        4,
        "user, two task calls, two reports"
    );
}

#[tokio::test]
async fn unknown_subagent_types_list_the_allowed_ones() {
    let client = ScriptedClient::new(|req| {
        Ok(match req.tool_results() {
            0 => ChatResponse::tool_calls([(
                "task",
                json!({"description": "x", "subagent_type": "nope"}),
            )]),
            _ => ChatResponse::text("ok"),
        })
    });
    let agent = DeepAgent::builder()
        .client(client.clone())
        .subagent(SubAgent::new("researcher", "Researches.").system_prompt("You research."))
        .build()
        .unwrap();
    let r = agent.run("go").await.unwrap();
    let result = first_result(&r.messages);
    assert!(result.is_error);
    assert_eq!(
        result.text(),
        "Error: there is no subagent type \"nope\". Use one of: general-purpose, researcher."
    );
}

#[derive(Debug)]
struct UserContext {
    user_id: String,
    api_key: String,
}

#[tokio::test]
async fn runtime_context_reaches_subagent_tools_and_never_a_model_request() {
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let s = Arc::clone(&seen);
    let fetch_user_data = FnTool::new(
        "fetch_user_data",
        "Fetch data for the current user",
        json!({"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}),
        move |ctx| {
            let s = Arc::clone(&s);
            async move {
                let user = ctx.runtime_context::<UserContext>()?;
                s.lock()
                    .unwrap()
                    .push(format!("{}:{}", user.user_id, user.api_key.len()));
                Ok(ToolOutput::text(format!(
                    "Data for user {}: {}",
                    user.user_id, ctx.arguments["query"]
                )))
            }
        },
    );
    let client = ScriptedClient::new(|req| {
        Ok(if is_subagent(req) {
            match req.tool_results() {
                0 => ChatResponse::tool_calls([(
                    "fetch_user_data",
                    json!({"query": "recent activity"}),
                )]),
                _ => ChatResponse::text("fetched"),
            }
        } else {
            match req.tool_results() {
                0 => ChatResponse::tool_calls([
                    ("fetch_user_data", json!({"query": "profile"})),
                    (
                        "task",
                        json!({"description": "get activity", "subagent_type": "general-purpose"}),
                    ),
                ]),
                _ => ChatResponse::text("done"),
            }
        })
    });
    let agent = DeepAgent::builder()
        .client(client.clone())
        .tool(fetch_user_data)
        .context_type::<UserContext>()
        .build()
        .unwrap();
    agent
        .run("Get my recent activity")
        .extension(UserContext {
            user_id: "user-123".into(),
            api_key: "sk-very-secret".into(),
        })
        .await
        .unwrap();
    let seen: Vec<String> = seen.lock().unwrap().clone();
    assert_eq!(
        seen.len(),
        2,
        "the parent's and the subagent's tool both read it"
    );
    assert!(seen.iter().all(|s| s == "user-123:14"));
    for r in client.requests() {
        assert!(
            !r.to_json().contains("sk-very-secret"),
            "the API key reached a model request"
        );
    }
    // Without the declared context the run fails before any model call.
    let before = client.requests().len();
    let err = agent.run("again").await.unwrap_err();
    assert!(
        err.to_string().contains("needs a runtime context of type"),
        "{err}"
    );
    assert_eq!(client.requests().len(), before);
}

/// A setting of the `lookup` tool, given per subagent (SPEC R8.2).
#[derive(Debug)]
struct SearchDepth(u32);

/// Another one, given to the fact-checker only.
#[derive(Debug)]
struct Strict(bool);

#[tokio::test]
async fn each_subagent_sees_its_own_runtime_context_and_not_another_subagents() {
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let s = Arc::clone(&seen);
    let lookup = FnTool::new(
        "lookup",
        "Look something up",
        json!({"type": "object", "properties": {}}),
        move |ctx| {
            let s = Arc::clone(&s);
            async move {
                let who = ctx
                    .runtime_context::<SubagentName>()
                    .map_or("main".to_owned(), |n| n.0.clone());
                let depth = ctx.runtime_context::<SearchDepth>()?.0;
                let strict = ctx.runtime_context::<Strict>().ok().map(|s| s.0);
                let others = ctx.extensions.get::<SubagentContext>().is_some();
                s.lock().unwrap().push(format!(
                    "{who} depth={depth} strict={strict:?} map={others}"
                ));
                Ok(ToolOutput::text("ok"))
            }
        },
    );
    let client = ScriptedClient::new(|req| {
        let ins = instructions(req);
        Ok(
            if ins.contains("You research") || ins.contains("You check facts") {
                match req.tool_results() {
                    0 => ChatResponse::tool_calls([("lookup", json!({}))]),
                    _ => ChatResponse::text("report"),
                }
            } else {
                match req.tool_results() {
                    0 => ChatResponse::tool_calls([
                        ("lookup", json!({})),
                        (
                            "task",
                            json!({"description": "dig", "subagent_type": "researcher"}),
                        ),
                        (
                            "task",
                            json!({"description": "check", "subagent_type": "fact-checker"}),
                        ),
                    ]),
                    _ => ChatResponse::text("done"),
                }
            },
        )
    });
    let agent = DeepAgent::builder()
        .client(client.clone())
        .tool(lookup)
        .subagent(SubAgent::new("researcher", "researches").system_prompt("You research."))
        .subagent(SubAgent::new("fact-checker", "checks").system_prompt("You check facts."))
        .build()
        .unwrap();
    agent
        .run("go")
        .extension(SearchDepth(5))
        .extension(
            SubagentContext::new()
                .with("researcher", SearchDepth(3))
                .with("fact-checker", Strict(true)),
        )
        .await
        .unwrap();
    let mut seen = seen.lock().unwrap().clone();
    seen.sort();
    assert_eq!(
        seen,
        [
            // The fact-checker gets its own `Strict` and the caller's depth, not the researcher's.
            "fact-checker depth=5 strict=Some(true) map=false",
            // The top agent keeps its own values; the map is only for subagents.
            "main depth=5 strict=None map=true",
            // The researcher gets its depth and never the fact-checker's `Strict`.
            "researcher depth=3 strict=None map=false",
        ]
    );
}

#[tokio::test]
async fn dynamic_prompt_reads_runtime_context_and_store() {
    struct Role2 {
        admin: bool,
    }
    let store: SharedStore = Arc::new(InMemoryStore::new());
    store
        .put(&["prefs".to_owned()], "style", json!("brief"))
        .await
        .unwrap();
    let client = ScriptedClient::new(|_| Ok(ChatResponse::text("ok")));
    let agent = DeepAgent::builder()
        .client(client.clone())
        .store(Arc::clone(&store))
        .middleware(dynamic_system_prompt(|req: PromptRequest| async move {
            let rights = match req.context::<Role2>() {
                Some(r) if r.admin => "You have admin rights.",
                _ => "You have read-only rights.",
            };
            let style = match &req.store {
                Some(s) => s
                    .get(&["prefs".to_owned()], "style")
                    .await
                    .ok()
                    .flatten()
                    .map(|i| i.value.to_string()),
                None => None,
            };
            Some(format!(
                "{rights} User prefers {}.",
                style.unwrap_or_default()
            ))
        }))
        .build()
        .unwrap();
    agent
        .run("a")
        .extension(Role2 { admin: true })
        .await
        .unwrap();
    agent.run("b").await.unwrap();
    let reqs = client.requests();
    assert!(instructions(&reqs[0]).ends_with("You have admin rights. User prefers \"brief\"."));
    assert!(instructions(&reqs[1]).ends_with("You have read-only rights. User prefers \"brief\"."));
}

#[tokio::test]
async fn profiles_replace_prompts_override_descriptions_and_exclude_tools() {
    let client = ScriptedClient::from_responses([ChatResponse::text("hi")]);
    let mut registry = ProfileRegistry::new();
    registry.register(
        "scripted",
        HarnessProfile {
            base_system_prompt: Some("BASE FROM PROFILE".into()),
            system_prompt_suffix: Some("SUFFIX FROM PROFILE".into()),
            tool_description_overrides: [("ls".to_owned(), "List a folder.".to_owned())].into(),
            excluded_tools: ["glob".to_owned(), "task".to_owned()].into(),
            ..Default::default()
        },
    );
    let agent = DeepAgent::builder()
        .client(client.clone())
        .profiles(&registry)
        .build()
        .unwrap();
    agent.run("hello").await.unwrap();
    let req = &client.requests()[0];
    let p = instructions(req);
    assert!(
        p.starts_with("BASE FROM PROFILE\n\nSUFFIX FROM PROFILE\n\n## Planning"),
        "{p}"
    );
    assert!(
        !p.contains("## Subagents"),
        "no task tool, no task guidance"
    );
    assert_eq!(
        tool_names(req),
        names("write_todos ls read_file write_file edit_file delete grep")
    );
    assert_eq!(req.options.tools[1].description, "List a folder.");
}

#[tokio::test]
async fn approvals_approve_edit_and_reject() {
    let client = ScriptedClient::new(|req| {
        Ok(match req.tool_results() {
            0 => ChatResponse::tool_calls([(
                "write_file",
                json!({"path": "/a.md", "content": "model text"}),
            )]),
            1 => {
                ChatResponse::tool_calls([("write_file", json!({"path": "/b.md", "content": "x"}))])
            }
            _ => ChatResponse::text("ok"),
        })
    });
    let handler = |req: &cairn_deep::ApprovalRequest| -> Decision {
        match req.arguments["path"].as_str() {
            Some("/a.md") => Decision::Edit {
                arguments: json!({"path": "/a.md", "content": "edited text"}),
            },
            _ => Decision::Reject {
                message: Some("not that file".into()),
            },
        }
    };
    let agent = DeepAgent::builder()
        .client(client.clone())
        .interrupt_on("write_file", InterruptOn::default())
        .approval_handler(Arc::new(handler))
        .build()
        .unwrap();
    let thread = AgentSession::new();
    let r = agent.run("write").session(&thread).await.unwrap();
    let files = StateBackend::files(thread.state());
    assert_eq!(files["/a.md"].content, "edited text");
    assert!(!files.contains_key("/b.md"));
    let results = results(&r.messages);
    assert!(
        results[0]
            .text()
            .starts_with("(The user changed the arguments of this call to")
    );
    assert!(results[1].is_error);
    assert!(
        results[1]
            .text()
            .contains("the user rejected this write_file call")
            && results[1].text().contains("not that file")
    );
}

#[tokio::test]
async fn delegation_depth_is_configurable() {
    let client2 = ScriptedClient::new(|req| {
        Ok(if is_subagent(req) && req.tool_results() == 0 {
            // Report which tools the subagent was offered.
            ChatResponse::text(tool_names(req).join(","))
        } else if req.tool_results() == 0 {
            ChatResponse::tool_calls([(
                "task",
                json!({"description": "d", "subagent_type": "general-purpose"}),
            )])
        } else {
            ChatResponse::text("done")
        })
    });
    for (depth, expect_task) in [(1usize, false), (2, true)] {
        let agent = DeepAgent::builder()
            .client(client2.clone())
            .max_subagent_depth(depth)
            .build()
            .unwrap();
        let r = agent.run("go").await.unwrap();
        let report = first_result(&r.messages).text();
        assert_eq!(
            report.split(',').any(|t| t == "task"),
            expect_task,
            "depth {depth}: {report}"
        );
    }
}

#[tokio::test]
async fn long_term_memory_routes_to_a_store_across_threads() {
    let store: SharedStore = Arc::new(InMemoryStore::new());
    let client = ScriptedClient::new(|req| {
        let first_thread = req
            .messages
            .iter()
            .any(|m| m.text().contains("I like short answers"));
        Ok(match (first_thread, req.tool_results()) {
            (true, 0) => ChatResponse::tool_calls([(
                "write_file",
                json!({"path": "/memories/user_preferences.txt", "content": "short answers"}),
            )]),
            (false, 0) => ChatResponse::tool_calls([(
                "read_file",
                json!({"path": "/memories/user_preferences.txt"}),
            )]),
            _ => ChatResponse::text("ok"),
        })
    });
    let agent = DeepAgent::builder()
        .client(client.clone())
        .store(Arc::clone(&store))
        .backend(Arc::new(
            CompositeBackend::new(StateBackend::new()).route("/memories/", StoreBackend::new()),
        ))
        .build()
        .unwrap();
    agent
        .run("I like short answers")
        .session(&AgentSession::new())
        .await
        .unwrap();
    let r = agent
        .run("What do I like?")
        .session(&AgentSession::new())
        .await
        .unwrap();
    let read = first_result(&r.messages).text();
    assert!(read.contains("short answers"), "{read}");
}

#[tokio::test]
async fn two_runs_without_a_session_do_not_share_files() {
    // Each run writes /notes.md, then lists `/`: a second run must not see the first's file.
    let client = ScriptedClient::new(|req| {
        Ok(match req.tool_results() {
            0 => ChatResponse::tool_calls([("ls", json!({"path": "/"}))]),
            1 => ChatResponse::tool_calls([(
                "write_file",
                json!({"path": "/notes.md", "content": "run notes"}),
            )]),
            _ => ChatResponse::text("done"),
        })
    });
    let agent = DeepAgent::builder().client(client.clone()).build().unwrap();
    let first = agent.run("write notes").await.unwrap();
    let second = agent.run("write notes").await.unwrap();
    for (run, r) in [("first", &first), ("second", &second)] {
        let listing = results(&r.messages)[0].text();
        assert!(
            !listing.contains("notes.md"),
            "the {run} run saw another run's file: {listing}"
        );
        let wrote = results(&r.messages)[1];
        assert!(!wrote.is_error, "{}", wrote.text());
    }
    // A run with a session still keeps its files in the session.
    let session = AgentSession::new();
    agent.run("write notes").session(&session).await.unwrap();
    assert_eq!(
        StateBackend::files(session.state())["/notes.md"].content,
        "run notes"
    );
}

#[tokio::test]
async fn with_the_profile_the_files_a_request_names_are_read_before_the_first_turn() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("utils.py"),
        "def sub(a, b):\n    return a + b\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("big.txt"), "x\n".repeat(5_000)).unwrap();
    std::fs::create_dir(dir.path().join("src")).unwrap();
    let request = "utils.py is wrong (see also big.txt, missing.py and src/): fix it.";
    let run = |read_mentioned_files: bool| {
        let client = ScriptedClient::from_responses([ChatResponse::text("fixed")]);
        let agent = DeepAgent::builder()
            .client(client.clone())
            .backend(Arc::new(FilesystemBackend::new(dir.path()).unwrap()))
            .profile(HarnessProfile {
                read_mentioned_files,
                ..Default::default()
            })
            .build()
            .unwrap();
        async move {
            let session = AgentSession::new();
            agent.run(request).session(&session).await.unwrap();
            (client.requests()[0].messages.clone(), session)
        }
    };

    let (sent, _) = run(false).await;
    assert_eq!(sent.len(), 1, "off by default: only the request");

    let (sent, session) = run(true).await;
    // The request, one assistant turn that reads the small existing file, and its result; the
    // large file, the missing one and the directory are left to the model.
    assert_eq!(sent.len(), 3, "{sent:#?}");
    assert_eq!(sent[0].text(), request);
    let calls: Vec<_> = sent[1].function_calls().collect();
    assert_eq!(sent[1].role, Role::Assistant);
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].name, "read_file");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&calls[0].arguments).unwrap(),
        json!({"file_path": "/utils.py"})
    );
    let read = results(&sent)[0];
    assert_eq!(read.call_id, calls[0].call_id);
    assert_eq!(read.text(), "1\tdef sub(a, b):\n2\t    return a + b");
    assert!(!read.is_error);
    assert_eq!(
        sent[1].source.as_deref(),
        Some(cairn_deep::mentions::MENTIONS_SOURCE)
    );
    // The thread keeps them, like any call the model made.
    let history = session.messages();
    assert!(
        history
            .iter()
            .any(|m| m.function_calls().any(|c| c.name == "read_file")),
        "{history:#?}"
    );
}
