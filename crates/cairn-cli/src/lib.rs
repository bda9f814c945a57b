//! # cairn-cli
//!
//! The `cairn` command: one deep agent (cairn-deep) on the files of a directory, streaming what
//! it does, on the embedded local model (cairn-local) or any OpenAI-compatible / Ollama endpoint
//! (cairn-providers). The binary is thin: flags ([`args`]), model choice ([`model`]), the local
//! model's harness profile ([`profile`]), terminal approvals ([`approval`]), output ([`render`]),
//! and the run and chat loops ([`app`]).

pub mod app;
pub mod approval;
pub mod args;
pub mod cap;
pub mod model;
pub mod profile;
pub mod render;

use std::process::ExitCode;

use clap::Parser;

/// Parses the command line, runs it, and returns the exit status: 0 done, 1 the run failed,
/// 2 bad usage (from clap), 130 interrupted.
pub fn main() -> ExitCode {
    let cli = args::Cli::parse();
    let json = cli.global.json;
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cairn: error: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let code = match rt.block_on(app::run(cli)) {
        Ok(code) => code,
        Err(e) => {
            app::report_error(&e, json);
            1
        }
    };
    // Do not wait for a blocked stdin reader (a question nobody answered, a chat prompt).
    rt.shutdown_background();
    ExitCode::from(code)
}
