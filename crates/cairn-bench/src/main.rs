//! `cairn-bench`: the cairn twin of `../shared/bench/peer_*.py`.
//!
//! Runs S fresh sessions, C at a time, each a tool loop against the fake OpenAI server at
//! `FAKE_LLM_URL`: the first user message is `[scenario:loop steps=N tool=echo] go`, the agent
//! has one `echo(text)` tool, and a session counts as ok when it made exactly N tool calls and
//! ended with the text `done`. Prints one JSON line with the same keys as the Python drivers
//! (`framework` = "cairn"), measured the same way: CPU from `getrusage(RUSAGE_SELF)` over the
//! run phase, peak RSS from `ru_maxrss`.
//!
//! ```text
//! FAKE_LLM_URL=http://127.0.0.1:8000/v1 cairn-bench --sessions 200 --steps 10 --concurrency 50
//! ```
#![allow(clippy::print_stdout)]

use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use cairn_core::{
    Agent, BoxFuture, FunctionInvocationContext, Tool, ToolError, ToolOutput, ToolSpec,
};
use cairn_providers::{Api, OpenAIClient};
use clap::{Parser, ValueEnum};
use futures::StreamExt;
use serde_json::json;

/// Driver options; the same flags as the Python peer drivers.
#[derive(Parser, Debug)]
#[command(about = "cairn driver against fakellm (same flags and JSON as the Python peers)")]
struct Args {
    /// Number of sessions.
    #[arg(long, short = 'S', default_value_t = 1)]
    sessions: usize,
    /// Tool steps per session.
    #[arg(long, short = 'N', default_value_t = 10)]
    steps: usize,
    /// Sessions run at the same time.
    #[arg(long, short = 'C', default_value_t = 1)]
    concurrency: usize,
    /// Use streaming model calls.
    #[arg(long)]
    stream: bool,
    /// Which OpenAI API to use.
    #[arg(long, value_enum, default_value_t = ApiArg::Chat)]
    api: ApiArg,
    /// Register `echo` as a plain (non-async) function.
    #[arg(long)]
    sync_tool: bool,
    /// Override the scenario marker (default: `loop steps=N tool=echo`).
    #[arg(long)]
    scenario: Option<String>,
    /// Run a default deep agent (todo, file tools over a state backend, task) with `echo` as
    /// its one user tool, instead of a plain agent with only `echo`.
    #[arg(long)]
    deep: bool,
    /// Send every request through reqwest, even to plain `http://` servers (turns off the lean
    /// hyper HTTP/1.1 path; for the transport A/B in BENCHMARKS.md).
    #[arg(long)]
    reqwest: bool,
    /// Base URL, e.g. http://127.0.0.1:8000/v1 (default: $FAKE_LLM_URL).
    #[arg(long, env = "FAKE_LLM_URL")]
    url: String,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum ApiArg {
    Chat,
    Responses,
}

static ECHO_CALLS: AtomicUsize = AtomicUsize::new(0);

/// `echo(text)`: returns its argument.
struct Echo {
    spec: ToolSpec,
    sync: bool,
}

impl Echo {
    fn new(sync: bool) -> Self {
        Echo {
            spec: ToolSpec::new(
                "echo",
                "Echo the given text back.",
                json!({
                    "type": "object",
                    "properties": {"text": {"type": "string"}},
                    "required": ["text"],
                    "additionalProperties": false
                }),
            ),
            sync,
        }
    }
}

impl Tool for Echo {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    fn invoke<'a>(
        &'a self,
        ctx: &'a FunctionInvocationContext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        let run = move || {
            ECHO_CALLS.fetch_add(1, Ordering::Relaxed);
            match ctx.arguments.get("text").and_then(|v| v.as_str()) {
                Some(t) => Ok(ToolOutput::text(t)),
                None => Err(ToolError::InvalidArguments("missing `text`".into())),
            }
        };
        if self.sync {
            let out = run();
            Box::pin(std::future::ready(out))
        } else {
            Box::pin(async move { run() })
        }
    }
}

struct Usage {
    user_s: f64,
    sys_s: f64,
    maxrss_mb: f64,
}

fn rusage() -> Usage {
    use nix::sys::resource::{UsageWho, getrusage};
    match getrusage(UsageWho::RUSAGE_SELF) {
        Ok(u) => {
            let secs = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
            Usage {
                user_s: secs(u.user_time()),
                sys_s: secs(u.system_time()),
                // Linux reports ru_maxrss in KiB.
                maxrss_mb: u.max_rss() as f64 / 1024.0,
            }
        }
        Err(_) => Usage {
            user_s: 0.0,
            sys_s: 0.0,
            maxrss_mb: 0.0,
        },
    }
}

fn round(x: f64, digits: i32) -> f64 {
    let f = 10f64.powi(digits);
    (x * f).round() / f
}

fn percentile(xs: &mut [f64], q: f64) -> f64 {
    if xs.is_empty() {
        return 0.0;
    }
    xs.sort_by(f64::total_cmp);
    let i = ((q * (xs.len() - 1) as f64).round() as usize).min(xs.len() - 1);
    xs[i]
}

/// What one session ended with: (final text, tool results seen), or an error; and its latency.
type SessionOutcome = (Result<(String, usize), String>, f64);

/// One session: (final text, tool results seen).
async fn run_session(agent: &Agent, prompt: &str, stream: bool) -> Result<(String, usize), String> {
    let response = if stream {
        let mut s = agent.run(prompt).stream();
        while s.next().await.is_some() {}
        s.final_response().await
    } else {
        agent.run(prompt).await
    }
    .map_err(|e| e.to_string())?;
    let tools = response
        .messages
        .iter()
        .map(|m| m.function_results().count())
        .sum();
    let text = response.last_text().unwrap_or_default();
    Ok((text, tools))
}

fn main() -> ExitCode {
    let args = Args::parse();
    let t_import = Instant::now();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cairn-bench: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let import_s = t_import.elapsed().as_secs_f64();

    let t_build = Instant::now();
    let api = match args.api {
        ApiArg::Chat => Api::ChatCompletions,
        ApiArg::Responses => Api::Responses,
    };
    let client = match OpenAIClient::builder()
        .base_url(args.url.clone())
        .api_key("sk-fake")
        .model("fake-model")
        .api(api)
        .hyper_http1(!args.reqwest)
        .build()
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("cairn-bench: {e}");
            return ExitCode::FAILURE;
        }
    };
    let agent = if args.deep {
        match cairn_deep::DeepAgent::builder()
            .client(client)
            .name("bench")
            .tool(Echo::new(args.sync_tool))
            .build()
        {
            Ok(a) => a,
            Err(e) => {
                eprintln!("cairn-bench: {e}");
                return ExitCode::FAILURE;
            }
        }
    } else {
        Agent::builder(client)
            .name("bench")
            .instructions("You are a helpful assistant.")
            .tool(Echo::new(args.sync_tool))
            .build()
    };
    let build_s = t_build.elapsed().as_secs_f64();
    let prompt = format!(
        "[scenario:{}] go",
        args.scenario
            .clone()
            .unwrap_or_else(|| format!("loop steps={} tool=echo", args.steps))
    );

    let u0 = rusage();
    let w0 = Instant::now();
    let results: Vec<SessionOutcome> = runtime.block_on(async {
        futures::stream::iter(0..args.sessions)
            .map(|_| {
                let agent = &agent;
                let prompt = prompt.as_str();
                async move {
                    let t = Instant::now();
                    let r = run_session(agent, prompt, args.stream).await;
                    (r, t.elapsed().as_secs_f64())
                }
            })
            .buffer_unordered(args.concurrency.max(1))
            .collect()
            .await
    });
    let wall = w0.elapsed().as_secs_f64();
    let u1 = rusage();

    let mut ok = 0usize;
    let mut errors = Vec::new();
    let mut latencies = Vec::with_capacity(results.len());
    for (i, (r, lat)) in results.into_iter().enumerate() {
        latencies.push(lat);
        match r {
            Ok((text, tools))
                if args.scenario.is_some() || (text.trim() == "done" && tools == args.steps) =>
            {
                ok += 1
            }
            Ok((text, tools)) => errors.push(format!(
                "session {i}: final text {text:?}, {tools} tool results (expected 'done', {})",
                args.steps
            )),
            Err(e) => errors.push(format!(
                "session {i}: {}",
                e.chars().take(300).collect::<String>()
            )),
        }
    }
    let llm_calls = (args.sessions * (args.steps + 1)) as f64;
    let cpu = (u1.user_s - u0.user_s) + (u1.sys_s - u0.sys_s);
    let mut out = json!({
        "framework": "cairn",
        "harness": if args.deep { "deep" } else { "plain" },
        "version": env!("CARGO_PKG_VERSION"),
        "api": match args.api { ApiArg::Chat => "chat", ApiArg::Responses => "responses" },
        "stream": args.stream,
        "sessions": args.sessions,
        "steps": args.steps,
        "concurrency": args.concurrency,
        "ok": ok,
        "failed": args.sessions - ok,
        "tool_calls": ECHO_CALLS.load(Ordering::Relaxed),
        "wall_s": round(wall, 3),
        "cpu_user_s": round(u1.user_s - u0.user_s, 3),
        "cpu_sys_s": round(u1.sys_s - u0.sys_s, 3),
        "cpu_total_s": round(u1.user_s + u1.sys_s, 3),
        "maxrss_mb": round(u1.maxrss_mb, 1),
        "import_s": round(import_s, 3),
        "build_s": round(build_s, 3),
        "llm_calls_per_s": if wall > 0.0 { json!(round(llm_calls / wall, 1)) } else { json!(null) },
        "cpu_ms_per_llm_call": round(1000.0 * cpu / llm_calls, 4),
        "session_p50_s": round(percentile(&mut latencies, 0.5), 3),
        "session_p99_s": round(percentile(&mut latencies, 0.99), 3),
    });
    if !errors.is_empty() {
        out["error_sample"] = json!(errors.iter().take(3).collect::<Vec<_>>());
    }
    println!("{out}");
    if errors.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
