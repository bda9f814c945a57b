//! The command line: flags, subcommands and help texts (clap derive).

use std::path::PathBuf;
use std::time::Duration;

use cairn_providers::HttpOptions;
use clap::{Args, Parser, Subcommand};

const ABOUT: &str = "Run a deep agent on the files of a directory.";

const LONG_ABOUT: &str = "\
Run a deep agent on the files of a directory.

The agent plans with a todo list, reads, writes and edits files under the working directory \
(--root, default: the current directory) and runs shell commands there. Before it writes, edits or \
deletes a file or runs a command, cairn shows the whole call (control characters escaped) and asks \
you to approve, edit or reject it (--yes skips the questions). Without a terminal to ask on, \
the run pauses before such a call (exit status 4) until `cairn resume` gives the decision. Commands run in \
a sandbox (Linux: Landlock and seccomp): they may write only the working directory and the temp \
directory, cannot use the network and cannot read the rest of your home (--sandbox, --allow-net); \
read-only commands such as ls, grep or git status run without a question, and a few destructive \
ones never run (exec rules in ~/.config/cairn/config.toml).

It runs on the embedded local model (no API key, no server: fetch the weights once with \
scripts/fetch-model.sh) or on any OpenAI-compatible or Ollama endpoint (--model).";

const AFTER_HELP: &str = "\
Examples:
  # do a task here, asking before each file write, edit or command
  cairn run \"add a --verbose flag to main.py and test it\"
  # the same without questions
  cairn run --yes \"create hello.py that prints hello, then run it\"
  # talk to the agent turn by turn
  cairn chat
  # other models: OpenAI (OPENAI_API_KEY), any compatible server, Ollama
  cairn run --model openai:gpt-4.1 \"...\"
  OPENAI_BASE_URL=http://localhost:8000/v1 cairn run --model openai:my-model \"...\"
  cairn run --model ollama:qwen2.5-coder \"...\"
  # for scripts: one JSON event per line
  cairn run --yes --json \"...\" | jq -r .type

Model selection (--model, or CAIRN_MODEL):
  local:                      the embedded default model (Qwen2.5-Coder-1.5B-Instruct, Q4_K_M)
  local:qwen2.5-coder-0.5b    a smaller known model (faster, much worse at using tools)
  local:/path/to/model.gguf   any GGUF file you trust
  openai:<model>              OpenAI, or any compatible server at OPENAI_BASE_URL
  ollama:<model>              Ollama
  Default: openai:$OPENAI_MODEL when OPENAI_API_KEY or OPENAI_BASE_URL is set, else local:.
  The embedded model's weights are fetched and verified once by scripts/fetch-model.sh (1.1 GB).

Exit status: 0 done, 1 the run failed, 2 bad usage, 3 the agent asked to write, edit or run \
something and every such call was rejected (so nothing it wanted to change was changed), \
4 paused: a write, edit or command waits for a decision (no terminal to ask on and no --yes; \
answer with cairn resume ID --approve | --reject[=MESSAGE] | --edit 'ID=JSON'), \
130 interrupted (Ctrl-C), 143 SIGTERM, 129 SIGHUP.";

/// `cairn`: run a deep agent on the current directory.
#[derive(Debug, Parser)]
#[command(
    name = "cairn",
    version,
    about = ABOUT,
    long_about = LONG_ABOUT,
    after_help = "Run `cairn --help` for examples and how the model is chosen.",
    after_long_help = AFTER_HELP,
    propagate_version = true
)]
pub struct Cli {
    /// Options shared by every subcommand.
    #[command(flatten)]
    pub global: GlobalArgs,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Options shared by `run` and `chat`.
#[derive(Debug, Clone, Args)]
pub struct GlobalArgs {
    /// The model as provider:model, e.g. local:, openai:gpt-4.1, ollama:qwen2.5-coder, anthropic:claude-sonnet-4-5, gemini:gemini-2.5-flash
    /// [default: openai:$OPENAI_MODEL if OPENAI_API_KEY or OPENAI_BASE_URL is set, else local:]
    #[arg(
        long,
        short = 'm',
        global = true,
        env = "CAIRN_MODEL",
        value_name = "PROVIDER:MODEL"
    )]
    pub model: Option<String>,

    /// Allow every file write, edit, delete and command without asking.
    #[arg(long, short = 'y', global = true)]
    pub yes: bool,

    /// How commands are confined: workspace-write (they write only the working directory and
    /// the temp directory, and read nothing else of your home), read-only (they write
    /// nothing), or off (they run with your full rights; shown in the banner). Also
    /// `sandbox = "read-only"` in ~/.config/cairn/config.toml, but off only with this flag
    /// [default: workspace-write]
    #[arg(long, global = true, value_name = "MODE", value_parser = parse_sandbox)]
    pub sandbox: Option<cairn_sandbox::SandboxMode>,

    /// Let sandboxed commands use the network (else they cannot open network sockets).
    #[arg(long, global = true)]
    pub allow_net: bool,

    /// Print one JSON event per line instead of text (for scripts).
    #[arg(long, global = true)]
    pub json: bool,

    /// The directory the agent works in: its file tools (read, write, edit, ls, grep, glob)
    /// cannot reach files outside it through paths or symlinks (a hard link to an outside file
    /// can be read, not written); `execute` runs shell commands there, confined by --sandbox
    /// [default: the current directory]
    #[arg(long, global = true, value_name = "DIR")]
    pub root: Option<PathBuf>,

    /// The most model calls with tools in one run before the agent must answer. Subagents
    /// started by `task` share a budget of 10 × N model calls per run, at most 4 at once.
    #[arg(long, global = true, value_name = "N", default_value_t = 40,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub max_steps: u32,

    /// Show more: the model's reasoning, longer arguments and results, and setup details.
    #[arg(long, short = 'v', global = true)]
    pub verbose: bool,

    /// Seconds to wait for a connection to a remote model server
    /// [default: $CAIRN_CONNECT_TIMEOUT, else 10]
    #[arg(long, global = true, value_name = "SECS", value_parser = parse_timeout)]
    pub connect_timeout: Option<Duration>,

    /// Seconds to wait for a remote model server to start answering a request (not retried)
    /// [default: $CAIRN_TIMEOUT, else 300]
    #[arg(long, global = true, value_name = "SECS", value_parser = parse_timeout)]
    pub timeout: Option<Duration>,

    /// Seconds a remote model server may stay silent in the middle of an answer
    /// [default: $CAIRN_IDLE_TIMEOUT, else 120]
    #[arg(long, global = true, value_name = "SECS", value_parser = parse_timeout)]
    pub idle_timeout: Option<Duration>,

    /// Where threads, checkpoints and long-term memories are kept: a SQLite file, or a
    /// postgres:// URL [default: $XDG_DATA_HOME/cairn/cairn.db, else
    /// ~/.local/share/cairn/cairn.db]
    #[arg(long, global = true, env = "CAIRN_DB", value_name = "PATH_OR_URL")]
    pub db: Option<String>,

    /// An MCP configuration file (an `mcpServers` JSON object) whose servers join those of
    /// ~/.config/cairn/mcp.json and .cairn/mcp.json, its entries winning; may be repeated.
    #[arg(long = "mcp-config", global = true, value_name = "FILE")]
    pub mcp_config: Vec<PathBuf>,
}

/// `--sandbox`'s value: `read-only`, `workspace-write` or `off`.
fn parse_sandbox(text: &str) -> Result<cairn_sandbox::SandboxMode, String> {
    text.parse()
        .map_err(|e: cairn_sandbox::SandboxError| e.to_string())
}

/// A timeout flag's value: a positive number of seconds (`30`, `0.5`).
fn parse_timeout(text: &str) -> Result<Duration, String> {
    cairn_providers::http_options::parse_seconds(text)
}

impl GlobalArgs {
    /// The HTTP options of remote model clients: the `CAIRN_CONNECT_TIMEOUT`, `CAIRN_TIMEOUT`
    /// and `CAIRN_IDLE_TIMEOUT` variables `lookup` finds (else the defaults), overridden by the
    /// `--connect-timeout`, `--timeout` and `--idle-timeout` flags.
    pub fn http_options(
        &self,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<HttpOptions, cairn_core::ChatError> {
        let mut o = HttpOptions::from_lookup(lookup)?;
        if let Some(t) = self.connect_timeout {
            o.connect_timeout = t;
        }
        if let Some(t) = self.timeout {
            o.first_byte_timeout = t;
        }
        if let Some(t) = self.idle_timeout {
            o.idle_timeout = t;
        }
        Ok(o)
    }
}

/// The subcommands.
#[derive(Debug, Clone, Subcommand)]
pub enum Command {
    /// Run one task to the end, showing what the agent does as it happens.
    #[command(
        after_help = "Example:\n  cairn run \"find the TODOs in src/ and list them in TODO.md\""
    )]
    Run {
        /// What the agent should do, in plain words.
        #[arg(value_name = "TASK", required = true, num_args = 1..)]
        task: Vec<String>,
    },
    /// Talk to the agent turn by turn; it remembers the conversation. End with Ctrl-D or /exit.
    Chat {
        /// Continue this thread (finishing its cut-off run first).
        #[arg(long, value_name = "ID")]
        resume: Option<String>,
    },
    /// Continue a thread: finish its cut-off run (a killed process, a failed model call), then
    /// run the new input, if any.
    #[command(
        after_help = "Examples:\n  cairn resume --last\n  cairn resume 0f9c2a \"now add tests for it\""
    )]
    Resume {
        /// The most recent thread of this working directory.
        #[arg(long)]
        last: bool,
        /// The thread id (a unique prefix is enough; not with --last), then the new input.
        #[arg(value_name = "ID | INPUT")]
        args: Vec<String>,
        /// Approve the paused calls: all of them, or those named (interrupt id or call id).
        #[arg(long, num_args = 0.., value_name = "INTERRUPT_ID")]
        approve: Option<Vec<String>>,
        /// Reject the paused calls not approved or edited, with an optional message for the
        /// agent (`--reject="use the other file"`).
        #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "",
              value_name = "MESSAGE")]
        reject: Option<String>,
        /// Run a paused call with other arguments: `--edit 'ID={"path": "/x.md", …}'`.
        #[arg(long, value_name = "ID=JSON")]
        edit: Vec<String>,
    },
    /// Serve the agent over HTTP: the Agent Protocol (LangGraph's API) with threads, runs,
    /// streaming and the store; every `cairn serve` on one PostgreSQL database shares the work.
    #[command(
        after_help = "Examples:\n  cairn serve\n  cairn serve --port 8123 --auth-token \"$TOKEN\" --db postgres://user:pw@db/cairn\n\nClients: langgraph_sdk.get_client(url=\"http://127.0.0.1:2024\"), or any Agent Protocol client.\nWrites, edits and commands pause their run for a decision (resume it with a command.resume) unless --yes."
    )]
    Serve(ServeArgs),
    /// List the threads (`show ID` prints one, `rm ID` deletes one).
    Threads {
        /// What to do.
        #[command(subcommand)]
        action: Option<ThreadsAction>,
    },
    /// MCP: `list` shows the configured MCP servers and their tools; `serve` serves cairn to
    /// MCP clients on stdin/stdout (tools `run` and `reply`).
    #[command(
        after_help = "Servers come from ~/.config/cairn/mcp.json, .cairn/mcp.json (the project wins) and --mcp-config FILE:\n  {\"mcpServers\": {\"fs\": {\"command\": \"npx\", \"args\": [\"-y\", \"@modelcontextprotocol/server-filesystem\", \".\"]}}}\nTheir tools are named mcp__<server>__<tool>; those not marked read-only ask before they run unless --yes or \"trust\": true."
    )]
    Mcp {
        /// What to do.
        #[command(subcommand)]
        action: McpAction,
    },
}

/// The options of `cairn serve`.
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// The address to listen on (loopback unless you mean to expose it).
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// The port.
    #[arg(long, default_value_t = 2024)]
    pub port: u16,
    /// Require `Authorization: Bearer TOKEN` on every route but /ok.
    #[arg(
        long,
        env = "CAIRN_AUTH_TOKEN",
        value_name = "TOKEN",
        hide_env_values = true
    )]
    pub auth_token: Option<String>,
    /// The most runs this process executes at once.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_runs: u32,
    /// Seconds a worker's claim on a run lasts without renewal; a dead worker's runs are
    /// taken over after it.
    #[arg(long, default_value_t = 30.0, value_name = "SECS")]
    pub lease: f64,
    /// The largest request body accepted, in bytes.
    #[arg(long, default_value_t = 10 * 1024 * 1024, value_name = "BYTES")]
    pub max_body_bytes: usize,
}

/// What `cairn threads` does besides listing.
#[derive(Debug, Clone, Subcommand)]
pub enum ThreadsAction {
    /// Print a thread's conversation.
    Show {
        /// The thread id (a unique prefix is enough).
        id: String,
    },
    /// Delete a thread.
    Rm {
        /// The thread id (a unique prefix is enough).
        id: String,
    },
}

/// What `cairn mcp` does.
#[derive(Debug, Clone, Subcommand)]
pub enum McpAction {
    /// Start each configured server and show its status and tools.
    List,
    /// Serve cairn as an MCP server on stdin/stdout: `run` (a task; returns the answer and the
    /// thread id) and `reply` (continue a thread, or decide on a paused run).
    Serve,
}

impl Command {
    /// The task text of `run` (its words joined with spaces).
    pub fn task(&self) -> Option<String> {
        match self {
            Command::Run { task } => Some(task.join(" ")),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeout_flags_override_the_environment() {
        let cli = Cli::try_parse_from([
            "cairn",
            "--timeout",
            "1.5",
            "run",
            "--idle-timeout",
            "7",
            "task",
        ])
        .unwrap();
        let env = |k: &str| match k {
            "CAIRN_TIMEOUT" => Some("99".to_owned()),
            "CAIRN_CONNECT_TIMEOUT" => Some("3".to_owned()),
            _ => None,
        };
        let o = cli.global.http_options(env).unwrap();
        assert_eq!(o.first_byte_timeout, Duration::from_millis(1500));
        assert_eq!(o.idle_timeout, Duration::from_secs(7));
        assert_eq!(o.connect_timeout, Duration::from_secs(3));
        let o = cli.global.http_options(|_| None).unwrap();
        assert_eq!(o.connect_timeout, HttpOptions::default().connect_timeout);
        assert!(
            cli.global
                .http_options(|k| (k == "CAIRN_IDLE_TIMEOUT").then(|| "x".into()))
                .is_err()
        );
        for bad in ["0", "-2", "soon"] {
            assert!(
                Cli::try_parse_from(["cairn", "--connect-timeout", bad, "chat"]).is_err(),
                "{bad}"
            );
        }
    }
}
