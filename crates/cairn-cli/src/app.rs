//! Building the deep agent and driving `run` and `chat`.

use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context as _, Result, anyhow, bail};
use cairn_core::{Agent, AgentSession, ChatClient, LoopConfig};
use cairn_deep::backend::ShellConfig;
use cairn_deep::{
    ApprovalHandler, CompositeBackend, DeepAgent, HarnessProfile, InterruptOn, LocalShellBackend,
    SharedBackend, StateBackend,
};
use futures::StreamExt;

use crate::approval::{GUARDED_TOOLS, TerminalApprover};
use crate::args::{Cli, Command};
use crate::cap::{FileResultCap, ModelTokenCounter, TokenCounterFn, estimate_tokens};
use crate::model::{ModelSpec, load};
use crate::render::{HumanRenderer, JsonRenderer, Style, Summary, Tally, sanitize};
use crate::secrets::{ScrubReport, Secrets};

/// The exit status for a run stopped with Ctrl-C.
pub const EXIT_INTERRUPTED: u8 = 130;

/// The exit status when the agent asked to write, edit or run something and every such call
/// was rejected (by the user, or because there was no terminal to ask on): the run finished,
/// but did nothing it wanted to.
pub const EXIT_ALL_REJECTED: u8 = 3;

/// Environment variables passed to the agent's shell commands (the rest of the host environment,
/// API keys included, is not).
pub const SHELL_ENV: &[&str] = &[
    "PATH", "HOME", "USER", "LANG", "LC_ALL", "TERM", "TMPDIR", "SHELL",
];

/// Everything that shapes the deep agent besides its model.
#[derive(Clone)]
pub struct AgentSetup {
    /// The directory the agent works in.
    pub root: PathBuf,
    /// The most model calls with tools per run.
    pub max_steps: u32,
    /// Harness adjustments for the model.
    pub profile: HarnessProfile,
    /// Counts tokens as the model does (else ~4 characters per token).
    pub counter: Option<TokenCounterFn>,
    /// Who approves writes, edits and commands; `None` allows them all (`--yes`).
    pub approver: Option<Arc<dyn ApprovalHandler>>,
}

impl std::fmt::Debug for AgentSetup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentSetup")
            .field("root", &self.root)
            .field("max_steps", &self.max_steps)
            .field("profile", &self.profile)
            .field("approver", &self.approver.is_some())
            .finish_non_exhaustive()
    }
}

/// Prefixes kept in the session's state instead of the user's directory: offloaded tool results
/// and the conversation history written when the context is summarized.
pub const STATE_PREFIXES: &[&str] = &["/large_tool_results/", "/conversation_history/"];

/// The backend: the files under `root` plus `execute` there; [`STATE_PREFIXES`] are kept in the
/// session's state.
pub fn backend(root: &Path) -> Result<SharedBackend> {
    let mut shell = LocalShellBackend::new(root)
        .map_err(|e| anyhow!("{e}"))
        .with_context(|| format!("cannot work in {}", root.display()))?
        .with_config(ShellConfig {
            // Each command runs under this binary as its supervisor, so its processes die
            // with it and with cairn (see `command_supervisor`).
            supervisor: crate::command_supervisor(),
            ..ShellConfig::default()
        });
    for k in SHELL_ENV {
        if let Ok(v) = std::env::var(k) {
            shell = shell.env(*k, v);
        }
    }
    let mut composite = CompositeBackend::new(shell);
    for prefix in STATE_PREFIXES {
        composite = composite.route(prefix, StateBackend::new());
    }
    Ok(Arc::new(composite))
}

/// Builds the deep agent over `client`.
pub fn build_agent(client: Arc<dyn ChatClient>, setup: &AgentSetup) -> Result<Agent> {
    let backend = backend(&setup.root)?;
    let loop_config = LoopConfig {
        max_iterations: setup.max_steps as usize,
        ..LoopConfig::default()
    };
    let mut b = DeepAgent::builder()
        .name("cairn")
        .model(client)
        .backend(backend)
        .profile(setup.profile.clone())
        .loop_config(loop_config);
    if setup.profile.excluded_tools.contains("task") {
        b = b.general_purpose_subagent(false);
    }
    match agents_md(&setup.root) {
        Ok(true) => b = b.memory("/AGENTS.md"),
        Ok(false) => {}
        Err(why) => eprintln!(
            "{}",
            Style::for_stderr().warn(&format!("cairn: not loading AGENTS.md: {}", sanitize(&why)))
        ),
    }
    if let Some(counter) = &setup.counter {
        b = b.token_counter(Arc::new(ModelTokenCounter(Arc::clone(counter))));
    }
    if let Some(max) = setup.profile.max_tool_result_tokens {
        let counter = setup
            .counter
            .clone()
            .unwrap_or_else(|| Arc::new(estimate_tokens));
        b = b.middleware(FileResultCap::new(max, counter));
    }
    if let Some(handler) = &setup.approver {
        for tool in GUARDED_TOOLS {
            b = b.interrupt_on(*tool, InterruptOn::default());
        }
        b = b.approval_handler(Arc::clone(handler));
    }
    b.build().map_err(|e| anyhow!("{e}"))
}

/// Whether `root/AGENTS.md` should be loaded as memory: `Ok(true)` for a file inside the root,
/// `Ok(false)` when there is none, `Err(why)` for one to skip with a
/// notice — a symlink that leads outside the root (the file tools could not read it either) or
/// dangles.
pub fn agents_md(root: &Path) -> std::result::Result<bool, String> {
    let root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    let path = root.join("AGENTS.md");
    let Ok(md) = std::fs::symlink_metadata(&path) else {
        return Ok(false);
    };
    if !md.file_type().is_symlink() {
        return Ok(md.is_file());
    }
    match path.canonicalize() {
        Ok(target) if !target.starts_with(&root) => Err(format!(
            "it is a symlink to {}, outside the working directory",
            target.display()
        )),
        Ok(target) => Ok(target.is_file()),
        Err(e) => Err(format!("it is a symlink that cannot be followed ({e})")),
    }
}

/// How a turn ended.
#[derive(Debug)]
pub enum TurnOutcome {
    /// The run finished.
    Done(Summary),
    /// The run failed.
    Failed(anyhow::Error),
    /// Ctrl-C.
    Interrupted,
}

enum Output {
    Human(HumanRenderer),
    Json(JsonRenderer),
}

impl Output {
    fn new(json: bool, verbose: bool) -> Output {
        if json {
            Output::Json(JsonRenderer)
        } else {
            Output::Human(HumanRenderer::new(Style::for_stdout(), verbose))
        }
    }
}

/// Runs one turn, showing its updates; Ctrl-C stops it.
async fn turn(
    agent: &Agent,
    session: &AgentSession,
    input: &str,
    json: bool,
    verbose: bool,
) -> TurnOutcome {
    let started = Instant::now();
    let mut out = Output::new(json, verbose);
    let mut tally = Tally::default();
    let mut stream = agent.run(input).session(session).stream();
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    loop {
        tokio::select! {
            _ = &mut ctrl_c => {
                stream.abort();
                drop(stream);
                if let Output::Human(h) = &mut out {
                    h.end_line();
                }
                return TurnOutcome::Interrupted;
            }
            update = stream.next() => {
                let Some(update) = update else { break };
                tally.observe(&update);
                match &mut out {
                    Output::Human(h) => {
                        h.handle(&update);
                        h.flush();
                    }
                    Output::Json(j) => j.handle(&update),
                }
            }
        }
    }
    let result = tokio::select! {
        _ = &mut ctrl_c => return TurnOutcome::Interrupted,
        r = stream.final_response() => r,
    };
    match result {
        Ok(response) => {
            if tally.response.is_none() {
                tally.response = Some(response);
            }
            let summary = tally.summary(started.elapsed());
            match &mut out {
                Output::Human(h) => h.finish(&summary),
                Output::Json(j) => j.finish(&summary),
            }
            TurnOutcome::Done(summary)
        }
        Err(e) => {
            if let Output::Human(h) = &mut out {
                h.end_line();
            }
            TurnOutcome::Failed(anyhow::Error::new(e).context("the run failed"))
        }
    }
}

/// Prints an error and its causes to stderr (and a JSON error line in `--json` mode),
/// [`sanitize`]d: errors carry text from servers and tools, and URLs with credentials.
pub fn report_error(e: &anyhow::Error, json: bool) {
    let style = Style::for_stderr();
    let mut text = format!("{e}");
    for cause in e.chain().skip(1) {
        let c = cause.to_string();
        if !text.contains(&c) {
            text.push_str(&format!("\n  caused by: {c}"));
        }
    }
    let text = sanitize(&text);
    if json {
        JsonRenderer::print(&serde_json::json!({"type": "error", "message": text}));
    }
    eprintln!("{} {text}", style.error("cairn: error:"));
}

fn interrupted_note(json: bool) {
    if json {
        JsonRenderer::print(&serde_json::json!({"type": "interrupted"}));
    }
    eprintln!(
        "{}",
        Style::for_stderr().warn("cairn: interrupted (Ctrl-C); the run was stopped")
    );
}

/// Runs the command line with the credentials taken from the environment at start-up (see
/// [`crate::secrets`]); returns the exit status.
pub async fn run(cli: Cli, secrets: Secrets, scrub: ScrubReport) -> Result<u8> {
    let g = &cli.global;
    let root = match &g.root {
        Some(r) => r.clone(),
        None => std::env::current_dir().context("cannot read the current directory")?,
    };
    if !root.is_dir() {
        bail!("--root {} is not a directory", root.display());
    }
    let root = root
        .canonicalize()
        .with_context(|| format!("cannot resolve {}", root.display()))?;
    let spec_text = g
        .model
        .clone()
        .filter(|m| !m.trim().is_empty())
        .unwrap_or_else(|| ModelSpec::default_from_env(|k| secrets.var(k)));
    let spec = ModelSpec::parse(&spec_text)?;
    let err_style = Style::for_stderr();
    if !g.json && matches!(spec, ModelSpec::Local(_)) {
        eprintln!(
            "{}",
            err_style.dim("cairn: loading the embedded model (a few seconds) …")
        );
    }
    if g.verbose && !g.json {
        let note = match (&scrub.scrub_error, &scrub.dumpable_error) {
            (None, None) => format!(
                "cairn: credentials taken out of the environment: {}; process not dumpable",
                if scrub.scrubbed.is_empty() {
                    "none set".to_owned()
                } else {
                    scrub.scrubbed.join(", ")
                }
            ),
            (a, b) => format!(
                "cairn: could not fully protect the credentials: {}",
                [a.as_deref(), b.as_deref()]
                    .into_iter()
                    .flatten()
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        };
        eprintln!("{}", err_style.dim(&note));
    }
    let model = load(&spec, g, &secrets).await?;
    if !g.json {
        eprintln!(
            "{}",
            err_style.dim(&format!(
                "cairn · {} · {}{}",
                sanitize(&model.label),
                sanitize(&root.display().to_string()),
                if g.yes { " · --yes: no approvals" } else { "" }
            ))
        );
    }
    let terminal = (!g.yes).then(|| Arc::new(TerminalApprover::new(err_style)));
    let approver: Option<Arc<dyn ApprovalHandler>> = terminal
        .as_ref()
        .map(|t| Arc::clone(t) as Arc<dyn ApprovalHandler>);
    let setup = AgentSetup {
        root,
        max_steps: g.max_steps,
        profile: model.profile.clone(),
        counter: model.counter.clone(),
        approver,
    };
    let agent = build_agent(Arc::clone(&model.client), &setup)?;
    let session = AgentSession::new();

    let code = match &cli.command {
        Command::Run { .. } => {
            let task = cli.command.task().unwrap_or_default();
            if task.trim().is_empty() {
                bail!(
                    "the task is empty: say what the agent should do, e.g. cairn run \"list the files\""
                );
            }
            match turn(&agent, &session, &task, g.json, g.verbose).await {
                TurnOutcome::Done(_) => Ok(0),
                TurnOutcome::Failed(e) => {
                    report_error(&e, g.json);
                    Ok(1)
                }
                TurnOutcome::Interrupted => {
                    interrupted_note(g.json);
                    Ok(EXIT_INTERRUPTED)
                }
            }
        }
        Command::Chat => chat(&agent, &session, g.json, g.verbose).await,
    }?;
    if code == 0
        && let Some(t) = &terminal
        && t.all_rejected()
    {
        let note = format!(
            "cairn: every file write, edit and command the agent asked for was rejected ({}), so none ran (exit status {EXIT_ALL_REJECTED})",
            t.rejected()
        );
        if g.json {
            JsonRenderer::print(
                &serde_json::json!({"type": "all_rejected", "rejected": t.rejected()}),
            );
        }
        eprintln!("{}", err_style.warn(&note));
        return Ok(EXIT_ALL_REJECTED);
    }
    Ok(code)
}

/// Reads one line from stdin; `None` at end of input.
async fn read_line() -> Result<Option<String>> {
    tokio::task::spawn_blocking(|| {
        let mut line = String::new();
        match std::io::stdin().lock().read_line(&mut line) {
            Ok(0) => Ok(None),
            Ok(_) => Ok(Some(line)),
            Err(e) => Err(anyhow!("cannot read stdin: {e}")),
        }
    })
    .await
    .context("the stdin reader stopped")?
}

async fn chat(agent: &Agent, session: &AgentSession, json: bool, verbose: bool) -> Result<u8> {
    let interactive = std::io::stdin().is_terminal();
    let style = Style::for_stderr();
    if interactive && !json {
        eprintln!(
            "{}",
            style.dim(
                "Type a request and press Enter. /exit or Ctrl-D ends the chat; Ctrl-C stops."
            )
        );
    }
    let mut failed = false;
    loop {
        if interactive {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "{} ", style.bold("you ›"));
            let _ = err.flush();
        }
        let line = tokio::select! {
            _ = tokio::signal::ctrl_c() => {
                interrupted_note(json);
                return Ok(EXIT_INTERRUPTED);
            }
            l = read_line() => l?,
        };
        let Some(line) = line else {
            if interactive {
                eprintln!();
            }
            break;
        };
        let input = line.trim();
        if input.is_empty() {
            continue;
        }
        if matches!(input, "/exit" | "/quit" | "exit" | "quit") {
            break;
        }
        match turn(agent, session, input, json, verbose).await {
            TurnOutcome::Done(_) => {}
            TurnOutcome::Failed(e) => {
                report_error(&e, json);
                failed = true;
            }
            TurnOutcome::Interrupted => {
                interrupted_note(json);
                return Ok(EXIT_INTERRUPTED);
            }
        }
    }
    // Piped input: a failed turn makes the whole chat fail, so scripts notice.
    Ok(if failed && !interactive { 1 } else { 0 })
}
