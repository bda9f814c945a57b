//! Finding the real MCP servers the tests run (installed by `.ci/run` with npm) and the
//! misbehaving fixture server.
#![allow(dead_code)]

use std::path::PathBuf;

/// Where `.ci/run` installs the npm servers, unless `CAIRN_MCP_NPM_DIR` says otherwise.
pub const DEFAULT_NPM_DIR: &str = "/var/cache/cairn-ci/npm";

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// `node`, or `None` (with a `SKIPPED:` notice) outside CI; under CI a missing `node` fails.
pub fn node() -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join("node"))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        missing("node is not installed");
    }
    found
}

fn missing(what: &str) {
    if in_ci() {
        panic!("{what} (CI=true: tests that need Node.js MCP servers must run; see .ci/run)");
    }
    eprintln!("SKIPPED: {what}; run .ci/run's npm step, or set CAIRN_MCP_NPM_DIR");
}

/// The entry script of an installed npm server (`server-everything`, `server-filesystem`).
pub fn npm_server(package: &str) -> Option<(PathBuf, PathBuf)> {
    let node = node()?;
    let dir = std::env::var_os("CAIRN_MCP_NPM_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_NPM_DIR));
    let script = dir
        .join("node_modules/@modelcontextprotocol")
        .join(package)
        .join("dist/index.js");
    if !script.is_file() {
        missing(&format!("{} is not installed", script.display()));
        return None;
    }
    Some((node, script))
}

/// The misbehaving fixture server's script.
pub fn misbehaving() -> Option<(PathBuf, PathBuf)> {
    let node = node()?;
    Some((
        node,
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/misbehaving-server.mjs"),
    ))
}
