//! Building the deep agent and driving `run` and `chat`.

use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context as _, Result, anyhow, bail};
use cairn_core::{
    Agent, AgentSession, ChatClient, LoopConfig, RunStatus, SharedStore, ThreadCursor,
};
use cairn_deep::backend::ShellConfig;
use cairn_deep::{
    ApprovalHandler, CompositeBackend, DeepAgent, HarnessProfile, InterruptOn, LocalShellBackend,
    SharedBackend, StateBackend, StoreBackend,
};
use futures::StreamExt;

use crate::approval::{GUARDED_TOOLS, TerminalApprover};
use crate::args::{Cli, Command, McpAction, ThreadsAction};
use crate::cap::{FileResultCap, ModelTokenCounter, TokenCounterFn, estimate_tokens};
use crate::model::{ModelSpec, load};
use crate::render::{HumanRenderer, JsonRenderer, Style, Summary, Tally, sanitize};
use crate::sandbox::{CommandSafety, SafetyConfig};
use crate::secrets::{ScrubReport, Secrets};
use crate::threads::Db;

/// The exit status for a run stopped with Ctrl-C.
pub const EXIT_INTERRUPTED: u8 = 130;

/// The exit status of a run that paused: a write, edit or command waits for a decision
/// (no terminal to ask on and no `--yes`); `cairn resume ID --approve|--reject|--edit` goes on.
pub const EXIT_PAUSED: u8 = 4;

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
    /// Whether writes, edits and commands need a decision (false with `--yes`).
    pub guarded: bool,
    /// Who decides on them in process (the terminal); without one a guarded call pauses the
    /// run, to be resumed with `cairn resume --approve/--reject/--edit`.
    pub approver: Option<Arc<dyn ApprovalHandler>>,
    /// The durable store `/memories/` lives in (one per user, shared across projects); `None`
    /// leaves `/memories/` an ordinary directory of the root.
    pub memories: Option<SharedStore>,
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

/// Where the CLI keeps long-term memories: files under this prefix live in the user's store.
pub const MEMORIES_PREFIX: &str = "/memories/";

/// What the prompt says about `/memories/` when it is the durable store.
pub const MEMORIES_PROMPT: &str = "Long-term memory: files under /memories/ are kept in the user's own store and \
persist across conversations and projects. Look there (ls /memories/) when earlier preferences or facts may \
help, and save what the user asks you to remember (or durable facts about how they work) as files there.";

/// The backend: the files under `root` plus `execute` there, confined and reviewed as `safety`
/// says; [`STATE_PREFIXES`] are kept in the session's state and, with a store,
/// [`MEMORIES_PREFIX`] in the store.
pub fn backend(
    root: &Path,
    memories: Option<&SharedStore>,
    safety: &CommandSafety,
) -> Result<SharedBackend> {
    let mut shell = LocalShellBackend::new(root)
        .map_err(|e| anyhow!("{e}"))
        .with_context(|| format!("cannot work in {}", root.display()))?
        .with_config(ShellConfig {
            // Each command runs under this binary as its supervisor, so its processes die
            // with it and with cairn (see `command_supervisor`).
            supervisor: crate::command_supervisor(),
            sandbox: safety.sandbox.clone(),
            exec_policy: Some(safety.exec_policy.clone()),
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
    if let Some(dir) = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(|h| PathBuf::from(h).join(USER_SKILLS_DIR))
        .filter(|d| d.is_dir())
    {
        match cairn_deep::FilesystemBackend::new(&dir) {
            Ok(fs) => composite = composite.route(USER_SKILLS_PREFIX, fs),
            Err(e) => eprintln!(
                "{}",
                Style::for_stderr().warn(&format!(
                    "cairn: not loading skills from {}: {}",
                    sanitize(&dir.display().to_string()),
                    sanitize(&e.to_string())
                ))
            ),
        }
    }
    if let Some(store) = memories {
        composite = composite.route(
            MEMORIES_PREFIX,
            StoreBackend::new()
                .with_store(Arc::clone(store))
                .namespace(["memories"]),
        );
    }
    Ok(Arc::new(composite))
}

/// Builds the deep agent over `client`, its commands in the default sandbox
/// ([`CommandSafety::default`]: workspace-write, no network, the default exec rules).
pub fn build_agent(client: Arc<dyn ChatClient>, setup: &AgentSetup) -> Result<Agent> {
    build_agent_with(client, setup, &CommandSafety::default())
}

/// Builds the deep agent over `client`, its commands confined and reviewed as `safety` says.
pub fn build_agent_with(
    client: Arc<dyn ChatClient>,
    setup: &AgentSetup,
    safety: &CommandSafety,
) -> Result<Agent> {
    let backend = backend(&setup.root, setup.memories.as_ref(), safety)?;
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
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from);
    let mut prompt = vec![environment_section(&setup.root)];
    if let Some(docs) = agents_md_above_root(&setup.root, home.as_deref()) {
        prompt.push(docs);
    }
    if setup.memories.is_some() {
        prompt.push(MEMORIES_PROMPT.to_owned());
    }
    b = b.system_prompt(prompt.join("\n\n"));
    // The configured MCP servers' tools, for the agent and its subagents.
    if let Some(mcp) = crate::mcp::active() {
        b = b.inherited_middleware(mcp);
    }
    // Skills: the user's (`~/.config/cairn/skills/`, routed into the backend) first, then the
    // project's (`.cairn/skills/`), so a project skill of the same name wins.
    if home
        .as_deref()
        .is_some_and(|h| h.join(USER_SKILLS_DIR).is_dir())
    {
        b = b.skills(USER_SKILLS_PREFIX);
    }
    if setup.root.join(".cairn/skills").is_dir() {
        b = b.skills("/.cairn/skills/");
    }
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
    if setup.guarded {
        for tool in GUARDED_TOOLS {
            b = b.interrupt_on(*tool, InterruptOn::default());
        }
    }
    if let Some(handler) = &setup.approver {
        b = b.approval_handler(Arc::clone(handler));
    }
    b.build().map_err(|e| anyhow!("{e}"))
}

/// The user's skills directory, under `$HOME`.
pub const USER_SKILLS_DIR: &str = ".config/cairn/skills";

/// Where the user's skills directory appears in the agent's file system.
pub const USER_SKILLS_PREFIX: &str = "/.cairn/user-skills/";

/// The user-level AGENTS.md, under `$HOME`.
pub const USER_AGENTS_MD: &str = ".config/cairn/AGENTS.md";

/// The most bytes of AGENTS.md text put into the system prompt from outside the root (the
/// user's file and the repository's directories above the root), as codex's
/// `project_doc_max_bytes`; the rest is cut with a note.
pub const AGENTS_MD_MAX_BYTES: usize = 32 * 1024;

/// How long `git status` may take before the prompt says the state is unknown.
const GIT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// A few lines telling the model where it is: the working directory, whether it is in a git
/// repository (branch; clean or with uncommitted changes), the OS and today's date (UTC).
///
/// The directory is named, not given as a host path: the file tools see it as `/`, and the
/// embedded 1.5B model copied a host path shown here into its tool calls (it wrote
/// `/tmp/x/hello.py`, which landed in `tmp/x/` under the root).
pub fn environment_section(root: &Path) -> String {
    let root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    let name = root
        .file_name()
        .map_or_else(|| "/".into(), |n| n.to_string_lossy().into_owned());
    let git = match git_status(&root) {
        GitState::None => "not a git repository".to_owned(),
        GitState::Repo { branch, dirty } => {
            let branch = branch.map_or("a detached HEAD".to_owned(), |b| format!("branch `{b}`"));
            match dirty {
                Some(true) => format!("a git repository, on {branch}, with uncommitted changes"),
                Some(false) => format!("a git repository, on {branch}, clean"),
                None => format!("a git repository, on {branch}"),
            }
        }
    };
    format!(
        "## Environment\n- Working directory: the project `{}`, which the file tools see as `/`; shell commands run in it.\n- It is {git}.\n- OS: {} ({})\n- Date: {} (UTC)",
        name,
        std::env::consts::OS,
        std::env::consts::ARCH,
        utc_date()
    )
}

/// What [`environment_section`] says about git.
#[derive(Debug, Clone, PartialEq, Eq)]
enum GitState {
    None,
    Repo {
        /// `None` on a detached HEAD.
        branch: Option<String>,
        /// `None` when `git` could not tell in time.
        dirty: Option<bool>,
    },
}

/// The repository root above or at `dir`: the nearest directory holding `.git`.
fn repo_root(dir: &Path) -> Option<PathBuf> {
    dir.ancestors()
        .find(|d| d.join(".git").exists())
        .map(Path::to_path_buf)
}

fn git_status(root: &Path) -> GitState {
    let Some(repo) = repo_root(root) else {
        return GitState::None;
    };
    if let Some(out) = run_git(root) {
        let mut lines = out.lines();
        let branch = lines
            .next()
            .and_then(|l| l.strip_prefix("## "))
            .and_then(|l| {
                let name = l.split("...").next().unwrap_or(l).trim();
                let name = name.strip_prefix("No commits yet on ").unwrap_or(name);
                (!name.starts_with("HEAD (no branch)")).then(|| name.to_owned())
            });
        return GitState::Repo {
            branch,
            dirty: Some(lines.any(|l| !l.trim().is_empty())),
        };
    }
    // No git, or it was too slow: the branch from `.git/HEAD`.
    let head = std::fs::read_to_string(repo.join(".git/HEAD")).unwrap_or_default();
    GitState::Repo {
        branch: head
            .trim()
            .strip_prefix("ref: refs/heads/")
            .map(str::to_owned),
        dirty: None,
    }
}

/// `git status --porcelain --branch` in `dir`, or `None` when git is missing, fails or takes
/// longer than [`GIT_TIMEOUT`].
fn run_git(dir: &Path) -> Option<String> {
    use std::io::Read;
    let mut child = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args([
            "status",
            "--porcelain=v1",
            "--branch",
            "--untracked-files=normal",
        ])
        .env("GIT_OPTIONAL_LOCKS", "0")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .ok()?;
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => break,
            Ok(Some(_)) | Err(_) => return None,
            Ok(None) if start.elapsed() > GIT_TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
            Ok(None) => std::thread::sleep(std::time::Duration::from_millis(10)),
        }
    }
    let mut out = String::new();
    child.stdout.take()?.read_to_string(&mut out).ok()?;
    Some(out)
}

/// Today's date in UTC, `YYYY-MM-DD`.
fn utc_date() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let z = (secs / 86_400) as i64 + 719_468;
    // Howard Hinnant's civil_from_days.
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

/// The AGENTS.md files the file tools cannot reach, as codex discovers them, for the system
/// prompt: the user's `~/.config/cairn/AGENTS.md`, then those of the repository root and every
/// directory below it down to (not including) the root — the root's own `AGENTS.md` is loaded
/// as memory ([`agents_md`]). At most [`AGENTS_MD_MAX_BYTES`] in all; `None` when there are
/// none.
pub fn agents_md_above_root(root: &Path, home: Option<&Path>) -> Option<String> {
    let root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    let mut files: Vec<PathBuf> = home.map(|h| h.join(USER_AGENTS_MD)).into_iter().collect();
    if let Some(repo) = repo_root(&root) {
        let mut dirs: Vec<&Path> = root
            .ancestors()
            .skip(1)
            .take_while(|d| d.starts_with(&repo))
            .collect();
        dirs.reverse();
        files.extend(dirs.iter().map(|d| d.join("AGENTS.md")));
    }
    let mut budget = AGENTS_MD_MAX_BYTES;
    let mut out = String::new();
    for path in files {
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        if budget == 0 {
            out.push_str(&format!(
                "\n(Not included, over the size cap: {})\n",
                path.display()
            ));
            continue;
        }
        let mut cut = text.len().min(budget);
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        budget -= cut;
        out.push_str(&format!("\nFrom {}:\n{}\n", path.display(), &text[..cut]));
        if cut < text.len() {
            out.push_str("(… cut: AGENTS.md text is capped at 32 KiB)\n");
        }
    }
    (!out.is_empty()).then(|| {
        format!(
            "## Instructions from AGENTS.md\nFollow these; files nearer the working directory win when they disagree.\n{}",
            out.trim_end()
        )
    })
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
    /// The run paused: these calls wait for decisions.
    Paused(Vec<cairn_core::Interrupt>),
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
            Output::Human(HumanRenderer::new(Style::for_stderr(), verbose))
        }
    }
}

/// What a turn does on its thread.
#[derive(Debug, Clone)]
enum Job<'a> {
    /// Run new input.
    Input(&'a str),
    /// Finish the thread's cut-off run.
    Resume,
    /// Continue the thread's paused run with these decisions.
    Decide(cairn_core::Decisions),
}

/// Runs one turn on `thread`, showing its updates; Ctrl-C stops it (the steps committed so
/// far stay, and `cairn resume` continues).
async fn turn(
    agent: &Agent,
    session: &AgentSession,
    job: Job<'_>,
    thread: &ThreadCursor,
    json: bool,
    verbose: bool,
) -> TurnOutcome {
    let started = Instant::now();
    let mut out = Output::new(json, verbose);
    let mut tally = Tally::default();
    let request = match job {
        Job::Input(input) => agent.run(input).thread(thread.clone()),
        Job::Resume => agent.resume(thread.clone()),
        Job::Decide(d) => agent.resume(thread.clone()).decisions(d),
    };
    let mut stream = request.session(session).stream();
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
        Ok(response) if !response.interrupts.is_empty() => {
            if let Output::Human(h) = &mut out {
                h.end_line();
            }
            TurnOutcome::Paused(response.interrupts)
        }
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
    if let Command::Mcp {
        action: McpAction::List,
    } = &cli.command
    {
        return crate::mcp::list(&root, g).await;
    }
    let db_location = crate::threads::location(g.db.as_deref(), |k| std::env::var(k).ok());
    if let Command::Serve(args) = &cli.command {
        return crate::serve::run(g, args, root, db_location, &secrets).await;
    }
    if db_location.is_none() && g.verbose {
        eprintln!("cairn: no home directory and no --db: threads are kept in memory only");
    }
    let db = Db::open(db_location.as_deref()).await?;
    if let Command::Threads { action } = &cli.command {
        return match action {
            None => crate::threads::list(&db, g.json).await,
            Some(ThreadsAction::Show { id }) => crate::threads::show(&db, id, g.json).await,
            Some(ThreadsAction::Rm { id }) => crate::threads::remove(&db, id, g.json).await,
        };
    }
    // The thread to continue, if any: its working directory is the root unless --root says.
    let resumed = match &cli.command {
        Command::Resume { last: true, .. } => Some(db.last_in(&root).await?),
        Command::Resume {
            last: false, args, ..
        } => match args.first() {
            Some(id) => Some(db.find(id).await?),
            None => bail!("say which thread to resume: cairn resume ID, or cairn resume --last"),
        },
        Command::Chat { resume: Some(id) } => Some(db.find(id).await?),
        _ => None,
    };
    let root = match (&resumed, &g.root) {
        (Some(t), None) => match t.metadata.get("cwd").and_then(|v| v.as_str()) {
            Some(cwd) if Path::new(cwd).is_dir() => PathBuf::from(cwd),
            _ => root,
        },
        _ => root,
    };
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
    let safety = command_safety(g, &err_style)?;
    let model = load(&spec, g, &secrets).await?;
    if !g.json {
        eprintln!(
            "{}",
            err_style.dim(&format!(
                "cairn · {} · {} · {}{}",
                sanitize(&model.label),
                sanitize(&root.display().to_string()),
                safety.banner(),
                if g.yes { " · --yes: no approvals" } else { "" }
            ))
        );
    }
    // With a terminal the user is asked at once; without one a guarded call pauses the run.
    // Where commands cannot be sandboxed, each one is asked about even with --yes.
    let terminal = ((!g.yes || safety.asks_for_every_command()) && std::io::stdin().is_terminal())
        .then(|| Arc::new(TerminalApprover::new(err_style)));
    let approver: Option<Arc<dyn ApprovalHandler>> = terminal
        .as_ref()
        .map(|t| Arc::clone(t) as Arc<dyn ApprovalHandler>);
    crate::mcp::activate(&root, g)?;
    let setup = AgentSetup {
        root,
        max_steps: g.max_steps,
        profile: model.profile.clone(),
        counter: model.counter.clone(),
        guarded: !g.yes,
        approver,
        memories: Some(db.store.clone()),
    };
    let agent = build_agent_with(Arc::clone(&model.client), &setup, &safety)?;
    let session = AgentSession::new();
    let one = |job, cursor| one_turn(&agent, &session, job, cursor, g.json, g.verbose);

    let code = match &cli.command {
        Command::Run { .. } => {
            let task = cli.command.task().unwrap_or_default();
            if task.trim().is_empty() {
                bail!(
                    "the task is empty: say what the agent should do, e.g. cairn run \"list the files\""
                );
            }
            let info = db.create(&setup.root, &task, &model.label).await?;
            thread_started(&info.id, g.json);
            one(Job::Input(&task), db.cursor(&info.id)).await
        }
        Command::Resume {
            last,
            args,
            approve,
            reject,
            edit,
        } => {
            let Some(info) = resumed else {
                bail!("no thread to resume");
            };
            let input = if *last { &args[..] } else { &args[1..] }.join(" ");
            let cursor = db.cursor(&info.id);
            thread_started(&info.id, g.json);
            let mut code = 0;
            let mut did = false;
            let flags = Flags {
                approve: approve.as_deref(),
                reject: reject.as_deref(),
                edit,
            };
            if unfinished(&cursor).await? {
                code = continue_run(&cursor, &flags, terminal.as_deref(), g.json, &one).await?;
                did = true;
            }
            if code == 0 && !input.trim().is_empty() {
                code = one(Job::Input(&input), cursor.clone()).await;
                did = true;
            }
            if !did {
                let note = format!(
                    "cairn: thread {} has nothing to resume (its last run {}); give it more to do: cairn resume {} \"…\"",
                    info.id,
                    info.status.as_str(),
                    info.id
                );
                eprintln!("{}", err_style.dim(&note));
            }
            code
        }
        Command::Chat { .. } => {
            let cursor = match resumed {
                Some(info) => {
                    let cursor = db.cursor(&info.id);
                    thread_started(&info.id, g.json);
                    if unfinished(&cursor).await? {
                        let code = continue_run(
                            &cursor,
                            &Flags::default(),
                            terminal.as_deref(),
                            g.json,
                            &one,
                        )
                        .await?;
                        if code == EXIT_INTERRUPTED || code == EXIT_PAUSED {
                            return Ok(code);
                        }
                    }
                    Some(cursor)
                }
                None => None,
            };
            chat(
                &agent,
                &session,
                &db,
                &setup.root,
                &model.label,
                cursor,
                g.json,
                g.verbose,
            )
            .await?
        }
        Command::Mcp { .. } => {
            crate::mcp::serve(Arc::clone(&model.client), &setup, &db, &model.label).await?
        }
        Command::Threads { .. } | Command::Serve(_) => 0,
    };
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

/// The sandbox and exec policy of the agent's commands: the flags over the user's config;
/// where commands cannot be sandboxed, says so once on stderr.
pub fn command_safety(g: &crate::args::GlobalArgs, err_style: &Style) -> Result<CommandSafety> {
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from);
    let safety = CommandSafety::resolve(
        g.sandbox,
        g.allow_net,
        SafetyConfig::load(|k| std::env::var(k).ok())?,
        home.as_deref(),
    )?;
    if let Some(warning) = safety.fallback_warning() {
        eprintln!("{}", err_style.warn(&warning));
    }
    Ok(safety)
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

/// Runs one turn on `cursor`'s thread and reports how it ended; returns the exit status.
async fn one_turn(
    agent: &Agent,
    session: &AgentSession,
    job: Job<'_>,
    cursor: ThreadCursor,
    json: bool,
    verbose: bool,
) -> u8 {
    let code = match turn(agent, session, job, &cursor, json, verbose).await {
        TurnOutcome::Done(_) => 0,
        TurnOutcome::Failed(e) => {
            report_error(&e, json);
            1
        }
        TurnOutcome::Interrupted => {
            interrupted_note(json);
            EXIT_INTERRUPTED
        }
        TurnOutcome::Paused(interrupts) => {
            paused_note(&cursor.thread_id, &interrupts, json);
            return EXIT_PAUSED;
        }
    };
    thread_note(&cursor.thread_id, code, json);
    code
}

/// Shows the calls a paused run waits on, and how to answer them.
fn paused_note(thread: &str, interrupts: &[cairn_core::Interrupt], json: bool) {
    let style = Style::for_stderr();
    for i in interrupts {
        if json {
            JsonRenderer::print(&serde_json::json!({
                "type": "interrupt",
                "thread": thread,
                "id": i.id,
                "namespace": i.namespace,
                "tool": i.tool,
                "arguments": i.arguments,
                "allowed_decisions": i.allowed_decisions,
            }));
        }
        let who = if i.namespace.is_empty() {
            String::new()
        } else {
            format!(" (asked by a subagent, {})", sanitize(&i.namespace))
        };
        eprintln!(
            "{}",
            style.warn(&format!(
                "cairn: waiting for a decision on {} {}{} [{}]",
                sanitize(&i.tool),
                sanitize(&i.arguments.to_string()),
                who,
                sanitize(&i.id)
            ))
        );
    }
    eprintln!(
        "{}",
        style.dim(&format!(
            "cairn: the run is paused (exit status {EXIT_PAUSED}); answer with: cairn resume {thread} --approve | --reject[=MESSAGE] | --edit 'ID={{…}}'"
        ))
    );
}

/// The decisions `cairn resume` flags give for a paused run's interrupts. Names are matched
/// against interrupt ids and call ids.
fn decisions_from_flags(
    interrupts: &[cairn_core::Interrupt],
    approve: Option<&[String]>,
    reject: Option<&str>,
    edits: &[String],
) -> Result<cairn_core::Decisions> {
    use cairn_core::Decision;
    let find = |name: &str| {
        interrupts
            .iter()
            .find(|i| i.id == name || i.call_id == name)
            .map(|i| i.id.clone())
            .ok_or_else(|| {
                anyhow!(
                    "no paused call is named {name:?}; waiting: {}",
                    interrupts
                        .iter()
                        .map(|i| format!("{} ({})", i.id, i.tool))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            })
    };
    let mut out = cairn_core::Decisions::new();
    for e in edits {
        let (name, json) = e
            .split_once('=')
            .ok_or_else(|| anyhow!("--edit takes ID=JSON, got {e:?}"))?;
        let arguments: serde_json::Value = serde_json::from_str(json)
            .with_context(|| format!("--edit {name}: the arguments are not JSON"))?;
        out.insert(find(name)?, Decision::Edit { arguments });
    }
    match approve {
        Some([]) => {
            for i in interrupts {
                out.entry(i.id.clone()).or_insert(Decision::Approve);
            }
        }
        Some(names) => {
            for n in names {
                out.insert(find(n)?, Decision::Approve);
            }
        }
        None => {}
    }
    if let Some(message) = reject {
        let message = Some(message.to_owned()).filter(|m| !m.trim().is_empty());
        for i in interrupts {
            out.entry(i.id.clone()).or_insert(Decision::Reject {
                message: message.clone(),
            });
        }
    }
    Ok(out)
}

/// The decision flags of `cairn resume`.
#[derive(Default)]
struct Flags<'a> {
    approve: Option<&'a [String]>,
    reject: Option<&'a str>,
    edit: &'a [String],
}

/// Continues a thread's unfinished run: a paused one with the decisions the flags give (or,
/// without flags, asked at the terminal), a cut-off or failed one from its last step.
async fn continue_run<'a, F, Fut>(
    cursor: &ThreadCursor,
    flags: &Flags<'_>,
    terminal: Option<&TerminalApprover>,
    json: bool,
    one: &'a F,
) -> Result<u8>
where
    F: Fn(Job<'a>, ThreadCursor) -> Fut,
    Fut: std::future::Future<Output = u8>,
{
    let t = cursor.load().await?;
    if t.status != RunStatus::Interrupted {
        return Ok(one(Job::Resume, cursor.clone()).await);
    }
    let mut decisions =
        decisions_from_flags(&t.interrupts, flags.approve, flags.reject, flags.edit)?;
    if decisions.is_empty() {
        let Some(terminal) = terminal else {
            paused_note(&cursor.thread_id, &t.interrupts, json);
            return Ok(EXIT_PAUSED);
        };
        for i in &t.interrupts {
            decisions.insert(i.id.clone(), terminal.review(i).await);
        }
    }
    Ok(one(Job::Decide(decisions), cursor.clone()).await)
}

/// Whether the thread's last run was cut off or failed (so `resume` has work to do).
async fn unfinished(cursor: &ThreadCursor) -> Result<bool> {
    let t = cursor.load().await?;
    Ok(t.steps > 0
        && matches!(
            t.status,
            RunStatus::Running | RunStatus::Failed | RunStatus::Interrupted
        ))
}

/// Tells a `--json` reader the thread id before anything else happens.
fn thread_started(id: &str, json: bool) {
    if json {
        JsonRenderer::print(&serde_json::json!({"type": "thread", "id": id}));
    }
}

/// After a turn: the thread id, and how to continue it when the turn did not finish.
fn thread_note(id: &str, code: u8, json: bool) {
    if json {
        return;
    }
    let style = Style::for_stderr();
    if code == 0 {
        eprintln!("{}", style.dim(&format!("cairn: thread {id}")));
    } else {
        eprintln!(
            "{}",
            style.dim(&format!(
                "cairn: thread {id} keeps every finished step; continue it with: cairn resume {id}"
            ))
        );
    }
}

#[allow(clippy::too_many_arguments)]
async fn chat(
    agent: &Agent,
    session: &AgentSession,
    db: &Db,
    root: &Path,
    model: &str,
    mut thread: Option<ThreadCursor>,
    json: bool,
    verbose: bool,
) -> Result<u8> {
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
        let cursor = match &thread {
            Some(c) => c.clone(),
            None => {
                let info = db.create(root, input, model).await?;
                thread_started(&info.id, json);
                let c = db.cursor(&info.id);
                thread = Some(c.clone());
                c
            }
        };
        match turn(agent, session, Job::Input(input), &cursor, json, verbose).await {
            TurnOutcome::Done(_) => {}
            TurnOutcome::Failed(e) => {
                report_error(&e, json);
                failed = true;
            }
            TurnOutcome::Interrupted => {
                interrupted_note(json);
                thread_note(&cursor.thread_id, EXIT_INTERRUPTED, json);
                return Ok(EXIT_INTERRUPTED);
            }
            TurnOutcome::Paused(interrupts) => {
                paused_note(&cursor.thread_id, &interrupts, json);
                return Ok(EXIT_PAUSED);
            }
        }
    }
    if let Some(c) = &thread {
        thread_note(&c.thread_id, 0, json);
    }
    // Piped input: a failed turn makes the whole chat fail, so scripts notice.
    Ok(if failed && !interactive { 1 } else { 0 })
}
