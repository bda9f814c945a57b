//! Issue #16, items 6 and 7: a command's processes die with it, and a run's subagents are
//! bounded.
//!
//! This test binary has its own `main` (`harness = false`) because it doubles as the command
//! supervisor for the supervised cases: run as `hardening_proc __supervise /bin/sh -c CMD` it
//! calls `supervise_main`, exactly as the `cairn` binary does. Run one case with
//! `--only NAME`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cairn_core::{
    AgentResponse, BoxFuture, ChatClient, ChatError, ChatOptions, ChatRequest, ChatResponse,
    LoopConfig, Message, Role,
};
use cairn_deep::backend::{Executor, LocalShellBackend, SUPERVISE_ARG, Supervisor, supervise_main};
use cairn_deep::{BackendError, DeepAgent, DeepAgentBuilder};
use cairn_test_support::process::{holders, marker, wait_gone_async};
use serde_json::json;

type Case = fn() -> Pin<Box<dyn Future<Output = ()>>>;

macro_rules! cases {
    ($($name:ident),* $(,)?) => {
        &[$((stringify!($name), || Box::pin($name()) as Pin<Box<dyn Future<Output = ()>>>)),*]
    };
}

const CASES: &[(&str, Case)] = cases![
    background_child_returns_at_once,
    background_child_returns_at_once_supervised,
    timeout_kills_a_setsid_grandchild,
    timeout_kills_a_setsid_grandchild_supervised,
    sandboxed_supervisor_returns_at_once_and_kills_the_tree,
    setsid_child_of_an_exited_shell_dies_supervised,
    cancelled_call_kills_the_tree,
    cancelled_call_kills_the_tree_supervised,
    timeout_kills_without_a_kill_program,
    exit_codes_pass_through_the_supervisor,
    fan_out_is_bounded_in_concurrency_and_model_calls,
    a_long_subagent_stops_when_the_budget_is_spent,
    default_budget_follows_max_iterations,
    nested_subagents_share_the_limits_without_deadlock,
];

fn main() -> std::process::ExitCode {
    let mut args = std::env::args_os().skip(1);
    let first = args.next();
    if first.as_deref() == Some(std::ffi::OsStr::new(SUPERVISE_ARG)) {
        return supervise_main(args);
    }
    // `--only NAME` runs one case (used to run a case in a changed environment); any other
    // free argument filters by substring, as libtest does.
    let mut only = None;
    let mut filter = None;
    let mut rest = first.into_iter().chain(args);
    while let Some(a) = rest.next() {
        let a = a.to_string_lossy().into_owned();
        if a == "--only" {
            only = rest.next().map(|s| s.to_string_lossy().into_owned());
        } else if !a.starts_with('-') {
            filter = Some(a);
        }
    }
    let selected: Vec<&(&str, Case)> = CASES
        .iter()
        .filter(|(n, _)| only.as_deref().is_none_or(|o| o == *n))
        .filter(|(n, _)| filter.as_deref().is_none_or(|f| n.contains(f)))
        .collect();
    println!("\nrunning {} tests", selected.len());
    let mut failed = Vec::new();
    for (name, case) in selected {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let started = Instant::now();
        let outcome =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| rt.block_on(case())));
        rt.shutdown_timeout(Duration::from_secs(5));
        match outcome {
            Ok(()) => println!("test {name} ... ok ({:.2?})", started.elapsed()),
            Err(_) => {
                println!("test {name} ... FAILED");
                failed.push(*name);
            }
        }
    }
    if failed.is_empty() {
        println!("\ntest result: ok");
        std::process::ExitCode::SUCCESS
    } else {
        println!("\nfailures: {failed:?}\ntest result: FAILED");
        std::process::ExitCode::FAILURE
    }
}

// ---- item 6: processes ----

/// Waits (at most 20 s: a loaded 2-core CI machine) until no process holds `mark`; fails naming the survivors otherwise
/// (and kills them, so a failing run does not leave them behind).
async fn assert_all_gone(mark: &str) {
    if let Err(left) = wait_gone_async(&[mark], Duration::from_secs(20)).await {
        panic!("processes of the command survived: {left:?} ({mark})");
    }
}

/// Waits (at most 10 s) until a process holds `mark`.
async fn wait_started(mark: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while holders(mark).is_empty() {
        assert!(
            Instant::now() < deadline,
            "the command never started ({mark})"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn shell(dir: &std::path::Path, supervised: bool) -> LocalShellBackend {
    let s = LocalShellBackend::new(dir)
        .unwrap()
        .env("PATH", "/usr/bin:/bin");
    if supervised {
        s.supervisor(Supervisor::current_exe().unwrap())
    } else {
        s
    }
}

/// `sleep 1000 & echo started` answers `started` when the shell exits, not at the timeout,
/// and the background sleep dies.
async fn background_returns(supervised: bool) {
    let dir = tempfile::tempdir().unwrap();
    let mark = marker();
    let out = shell(dir.path(), supervised)
        .execute(
            &format!("sleep {mark} & echo started"),
            Some(Duration::from_secs(60)),
        )
        .await
        .expect("returns when the shell exits, not at the 60 s timeout");
    assert_eq!(out.output, "started\n");
    assert_eq!(out.exit_code, Some(0));
    assert_all_gone(&mark).await;
}

async fn background_child_returns_at_once() {
    background_returns(false).await;
}

async fn background_child_returns_at_once_supervised() {
    background_returns(true).await;
}

/// A `setsid` grandchild (out of the shell's process group) dies when the call times out.
async fn setsid_at_timeout(supervised: bool) {
    let dir = tempfile::tempdir().unwrap();
    let mark = marker();
    let fg = marker();
    let r = shell(dir.path(), supervised)
        .execute(
            &format!("setsid sleep {mark} & sleep {fg}"),
            Some(Duration::from_secs(2)),
        )
        .await;
    assert!(matches!(r, Err(BackendError::Timeout { secs: 2 })), "{r:?}");
    assert_all_gone(&fg).await;
    assert_all_gone(&mark).await;
}

async fn timeout_kills_a_setsid_grandchild() {
    setsid_at_timeout(false).await;
}

async fn timeout_kills_a_setsid_grandchild_supervised() {
    setsid_at_timeout(true).await;
}

/// In the sandbox (issue #13) the supervisor itself runs confined (Landlock lets it execute
/// itself and read `/proc`); background children still come back at once, and a timed-out
/// command's `setsid` grandchild still dies.
async fn sandboxed_supervisor_returns_at_once_and_kills_the_tree() {
    let dir = tempfile::tempdir().unwrap();
    assert!(cairn_sandbox::support().is_available());
    let sandboxed = || {
        shell(dir.path(), true).sandbox(cairn_sandbox::Sandbox::new(
            cairn_sandbox::SandboxMode::WorkspaceWrite,
        ))
    };
    let mark = marker();
    let out = sandboxed()
        .execute(
            &format!("sleep {mark} & grep -c . /proc/self/status > /dev/null && echo started"),
            Some(Duration::from_secs(60)),
        )
        .await
        .unwrap();
    assert_eq!(out.output, "started\n");
    assert_all_gone(&mark).await;
    let (mark, fg) = (marker(), marker());
    let r = sandboxed()
        .execute(
            &format!("setsid sleep {mark} & sleep {fg}"),
            Some(Duration::from_secs(2)),
        )
        .await;
    assert!(matches!(r, Err(BackendError::Timeout { secs: 2 })), "{r:?}");
    assert_all_gone(&fg).await;
    assert_all_gone(&mark).await;
}

/// Under a supervisor, even a `setsid` child whose shell has already exited dies (it was
/// re-parented to the supervisor, a subreaper), and the output comes back at once.
async fn setsid_child_of_an_exited_shell_dies_supervised() {
    let dir = tempfile::tempdir().unwrap();
    let mark = marker();
    let out = shell(dir.path(), true)
        .execute(
            &format!("setsid sleep {mark} & echo started"),
            Some(Duration::from_secs(60)),
        )
        .await
        .unwrap();
    assert_eq!(out.output, "started\n");
    assert_all_gone(&mark).await;
}

/// Dropping the `execute` future (a cancelled run) kills the whole tree.
async fn cancelled(supervised: bool) {
    let dir = tempfile::tempdir().unwrap();
    let backend = shell(dir.path(), supervised);
    let (bg, grand, fg) = (marker(), marker(), marker());
    let cmd = format!("sleep {bg} & setsid sleep {grand} & sleep {fg}");
    let exec = backend.execute(&cmd, Some(Duration::from_secs(600)));
    tokio::select! {
        r = exec => panic!("the command ended early: {r:?}"),
        () = async { wait_started(&fg).await; wait_started(&grand).await; wait_started(&bg).await } => {}
    }
    for m in [&bg, &grand, &fg] {
        assert_all_gone(m).await;
    }
}

async fn cancelled_call_kills_the_tree() {
    cancelled(false).await;
}

async fn cancelled_call_kills_the_tree_supervised() {
    cancelled(true).await;
}

/// The kill is a system call: with no `kill` program on the host's `PATH`, a timed-out
/// command's background child still dies. Runs this binary again with a `PATH` that holds no
/// programs.
async fn timeout_kills_without_a_kill_program() {
    if std::env::var_os("HARDENING_NO_PATH").is_some() {
        assert_eq!(std::env::var("PATH").as_deref(), Ok("/nonexistent"));
        let dir = tempfile::tempdir().unwrap();
        let (bg, fg) = (marker(), marker());
        let r = LocalShellBackend::new(dir.path())
            .unwrap()
            .execute(
                &format!("/bin/sleep {bg} & /bin/sleep {fg}"),
                Some(Duration::from_secs(1)),
            )
            .await;
        assert!(matches!(r, Err(BackendError::Timeout { .. })), "{r:?}");
        assert_all_gone(&fg).await;
        assert_all_gone(&bg).await;
        return;
    }
    let status = tokio::process::Command::new(std::env::current_exe().unwrap())
        .args(["--only", "timeout_kills_without_a_kill_program"])
        .env_clear()
        .env("HARDENING_NO_PATH", "1")
        // Not unset: without PATH, programs are still looked up in /bin and /usr/bin.
        .env("PATH", "/nonexistent")
        .status()
        .await
        .unwrap();
    assert!(
        status.success(),
        "the case failed without programs on PATH: {status}"
    );
}

/// The supervisor passes the shell's exit status through, and a shell killed by a signal has
/// no exit code, as without a supervisor.
async fn exit_codes_pass_through_the_supervisor() {
    let dir = tempfile::tempdir().unwrap();
    for supervised in [false, true] {
        let s = shell(dir.path(), supervised);
        let out = s
            .execute("echo out; echo err >&2; exit 3", None)
            .await
            .unwrap();
        assert_eq!(out.output, "out\n[stderr] err\n");
        assert_eq!(out.exit_code, Some(3));
        let out = s.execute("kill -9 $$", None).await.unwrap();
        assert_eq!(out.exit_code, None, "supervised: {supervised}");
        let out = s.execute("pwd", None).await.unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        assert_eq!(out.output, format!("{}\n", root.display()));
    }
}

// ---- item 7: subagent fan-out ----

/// Counts the subagent model calls in flight and the most there were at once.
#[derive(Default)]
struct InFlight {
    now: AtomicUsize,
    most: AtomicUsize,
}

impl InFlight {
    /// Stays inside the model for `pause`, counted as one call in flight.
    async fn hold(&self, pause: Duration) {
        let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        tokio::time::sleep(pause).await;
        self.now.fetch_sub(1, Ordering::SeqCst);
    }

    /// The most calls in flight at once.
    fn most(&self) -> usize {
        self.most.load(Ordering::SeqCst)
    }
}

/// A deep agent on `model`, to be given its limits.
fn agent_on<M: ChatClient + 'static>(model: &Arc<M>) -> DeepAgentBuilder {
    DeepAgent::builder().model(Arc::clone(model) as Arc<dyn ChatClient>)
}

/// Builds `agent` and runs it on "go"; fails with `what` if the run takes over `secs` seconds.
async fn run_within(agent: DeepAgentBuilder, secs: u64, what: &str) -> AgentResponse {
    let agent = agent.build().unwrap();
    tokio::time::timeout(Duration::from_secs(secs), agent.run("go"))
        .await
        .expect(what)
        .unwrap()
}

/// A model for a parent and its subagents. The parent's first reply is `tasks` `task` calls;
/// subagents answer with `sub(step)` (their step counted in tool results). Each call stays
/// inside the model for a moment, and the client records the most subagent calls in flight
/// at once and the subagent calls made.
struct FanOut {
    tasks: usize,
    sub: fn(usize) -> ChatResponse,
    in_flight: InFlight,
    sub_calls: AtomicUsize,
    top_calls: AtomicUsize,
    last_results: Mutex<Vec<String>>,
}

impl FanOut {
    fn new(tasks: usize, sub: fn(usize) -> ChatResponse) -> Arc<Self> {
        Arc::new(FanOut {
            tasks,
            sub,
            in_flight: InFlight::default(),
            sub_calls: AtomicUsize::new(0),
            top_calls: AtomicUsize::new(0),
            last_results: Mutex::new(Vec::new()),
        })
    }
}

fn is_subagent(options: &ChatOptions) -> bool {
    options
        .instructions
        .as_deref()
        .is_some_and(|i| i.contains("You are a subagent"))
}

fn tool_results(messages: &[Message]) -> Vec<String> {
    messages
        .iter()
        .flat_map(Message::function_results)
        .map(|r| r.text())
        .collect()
}

/// One reply delegating a general-purpose `task` per description.
fn delegate(descriptions: impl Iterator<Item = String>) -> ChatResponse {
    ChatResponse::tool_calls(descriptions.map(|description| {
        (
            "task",
            json!({"description": description, "subagent_type": "general-purpose"}),
        )
    }))
}

impl ChatClient for FanOut {
    fn get_response<'a>(
        &'a self,
        request: ChatRequest<'a>,
    ) -> BoxFuture<'a, Result<ChatResponse, ChatError>> {
        let ChatRequest {
            messages, options, ..
        } = request;
        Box::pin(async move {
            let results = tool_results(messages);
            if !is_subagent(options) {
                self.top_calls.fetch_add(1, Ordering::SeqCst);
                if results.is_empty() {
                    return Ok(delegate((0..self.tasks).map(|i| format!("job {i}"))));
                }
                *self.last_results.lock().unwrap() = results;
                return Ok(ChatResponse::text("all done"));
            }
            self.sub_calls.fetch_add(1, Ordering::SeqCst);
            self.in_flight.hold(Duration::from_millis(10)).await;
            Ok((self.sub)(results.len()))
        })
    }
}

fn report(_: usize) -> ChatResponse {
    ChatResponse::text("report")
}

fn forever(_: usize) -> ChatResponse {
    ChatResponse::tool_calls([(
        "write_todos",
        json!({"todos": [{"content": "more", "status": "in_progress"}]}),
    )])
}

/// One reply with 50 `task` calls: at most 3 subagents in flight at once, at most 20 subagent
/// model calls in all; the rest are refused with an error saying the budget is spent.
async fn fan_out_is_bounded_in_concurrency_and_model_calls() {
    let model = FanOut::new(50, report);
    let agent = agent_on(&model)
        .max_concurrent_subagents(3)
        .max_subagent_model_calls(20);
    let r = run_within(agent, 60, "the run finishes").await;
    assert_eq!(r.last_text().as_deref(), Some("all done"));
    let most = model.in_flight.most();
    assert!(most <= 3, "{most} subagents at once");
    assert!(most >= 2, "subagents still run in parallel ({most})");
    assert_eq!(model.sub_calls.load(Ordering::SeqCst), 20);
    let results = model.last_results.lock().unwrap().clone();
    assert_eq!(results.len(), 50);
    assert_eq!(results.iter().filter(|r| *r == "report").count(), 20);
    let refused: Vec<_> = results.iter().filter(|r| *r != "report").collect();
    assert_eq!(refused.len(), 30);
    for r in refused {
        assert!(
            r.starts_with(
                "Error: the subagents of this run have used up their budget of 20 model calls"
            ),
            "{r}"
        );
    }
}

/// A subagent that would loop for its whole `max_iterations` is stopped when the budget runs
/// out, and says so.
async fn a_long_subagent_stops_when_the_budget_is_spent() {
    let model = FanOut::new(1, forever);
    let agent = agent_on(&model)
        .max_subagent_model_calls(7)
        .build()
        .unwrap();
    agent.run("go").await.unwrap();
    assert_eq!(model.sub_calls.load(Ordering::SeqCst), 7);
    let results = model.last_results.lock().unwrap().clone();
    assert_eq!(results.len(), 1);
    assert!(
        results[0].starts_with("Error: the subagent was stopped: the subagents of this run have used up their budget of 7 model calls"),
        "{}",
        results[0]
    );
}

/// Without a budget set, it is 10 × the loop's `max_iterations`, and per run: a second run
/// gets a fresh one.
async fn default_budget_follows_max_iterations() {
    let model = FanOut::new(30, forever);
    let agent = agent_on(&model)
        .loop_config(LoopConfig {
            max_iterations: 2,
            ..LoopConfig::default()
        })
        .build()
        .unwrap();
    agent.run("go").await.unwrap();
    assert_eq!(model.sub_calls.load(Ordering::SeqCst), 20);
    assert!(model.in_flight.most() <= 4);
    agent.run("again").await.unwrap();
    assert_eq!(model.sub_calls.load(Ordering::SeqCst), 40);
}

/// Nested subagents take permits from the same run-wide pool; a subagent waiting for its
/// own subagents lends its permit, so one permit is enough and nothing deadlocks.
async fn nested_subagents_share_the_limits_without_deadlock() {
    struct Nested {
        in_flight: InFlight,
        calls: AtomicUsize,
    }
    impl ChatClient for Nested {
        fn get_response<'a>(
            &'a self,
            request: ChatRequest<'a>,
        ) -> BoxFuture<'a, Result<ChatResponse, ChatError>> {
            let ChatRequest {
                messages, options, ..
            } = request;
            Box::pin(async move {
                let task = messages
                    .iter()
                    .find(|m| m.role == Role::User)
                    .map(Message::text)
                    .unwrap_or_default();
                let done = !tool_results(messages).is_empty();
                let fan = |prefix: &str| delegate((0..3).map(|i| format!("{prefix}{i}")));
                if !is_subagent(options) {
                    return Ok(if done {
                        ChatResponse::text("top done")
                    } else {
                        fan("mid")
                    });
                }
                self.calls.fetch_add(1, Ordering::SeqCst);
                self.in_flight.hold(Duration::from_millis(5)).await;
                Ok(if task.starts_with("mid") && !done {
                    fan("leaf")
                } else {
                    ChatResponse::text(format!("{task} done"))
                })
            })
        }
    }
    let model = Arc::new(Nested {
        in_flight: InFlight::default(),
        calls: AtomicUsize::new(0),
    });
    let agent = agent_on(&model)
        .max_subagent_depth(2)
        .max_concurrent_subagents(1);
    let r = run_within(agent, 30, "no deadlock").await;
    assert_eq!(r.last_text().as_deref(), Some("top done"));
    // 3 mid subagents × 2 calls, 9 leaves × 1 call.
    assert_eq!(model.calls.load(Ordering::SeqCst), 15);
    assert_eq!(model.in_flight.most(), 1);
}
