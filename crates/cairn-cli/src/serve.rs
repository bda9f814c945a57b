//! `cairn serve`: the deep agent the CLI builds, behind the Agent Protocol server of
//! `cairn-server`, on the threads database (SQLite by default; a `postgres://` URL lets many
//! `cairn serve` processes share the work).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, Result, bail};

use crate::app::{AgentSetup, build_agent_with, command_safety};
use crate::args::{GlobalArgs, ServeArgs};
use crate::model::{ModelSpec, load};
use crate::render::{Style, sanitize};
use crate::secrets::Secrets;

/// Runs the server until Ctrl-C or SIGTERM; returns the exit status.
pub async fn run(
    g: &GlobalArgs,
    args: &ServeArgs,
    root: PathBuf,
    db_location: Option<String>,
    secrets: &Secrets,
) -> Result<u8> {
    let style = Style::for_stderr();
    let Some(location) = db_location else {
        bail!(
            "cairn serve keeps its threads and runs in a database: give --db PATH_OR_URL (no home directory to default to)"
        );
    };
    if !(args.lease.is_finite() && args.lease >= 0.5) {
        bail!("--lease must be at least 0.5 seconds");
    }
    let db = cairn_store::open(&location).await.with_context(|| {
        format!(
            "cannot open the database {}",
            crate::threads::shown(&location)
        )
    })?;
    let spec_text = g
        .model
        .clone()
        .filter(|m| !m.trim().is_empty())
        .unwrap_or_else(|| ModelSpec::default_from_env(|k| secrets.var(k)));
    let spec = ModelSpec::parse(&spec_text)?;
    // The sandbox and exec policy of the agent's commands, as for `cairn run`.
    let safety = command_safety(g, &style)?;
    let model = load(&spec, g, secrets).await?;
    let setup = AgentSetup {
        root: root.clone(),
        max_steps: g.max_steps,
        profile: model.profile.clone(),
        counter: model.counter.clone(),
        // No terminal to ask on: a guarded call pauses its run for a decision
        // (a run created with command.resume answers it).
        // Where commands cannot be sandboxed, they pause for a decision even with --yes.
        guarded: !g.yes || safety.asks_for_every_command(),
        approver: None,
        memories: Some(db.store()),
    };
    let agent = build_agent_with(Arc::clone(&model.client), &setup, &safety)?;
    let mut cfg = cairn_server::ServerConfig::default()
        .max_runs(args.max_runs as usize)
        .lease(Duration::from_secs_f64(args.lease))
        .max_body_bytes(args.max_body_bytes)
        .redact(secrets.values());
    if let Some(t) = args.auth_token.as_deref().filter(|t| !t.trim().is_empty()) {
        cfg = cfg.auth_token(t.trim());
    }
    let auth = cfg.auth_token.is_some();
    let server = cairn_server::Server::new(agent, db.clone(), cfg)
        .context("cannot serve on this database")?;
    let addr = format!("{}:{}", args.host, args.port);
    let listener = tokio::net::TcpListener::bind(&addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    let local = listener
        .local_addr()
        .map_or(addr.clone(), |a| a.to_string());
    eprintln!(
        "{}",
        style.dim(&format!(
            "cairn serve · {} · {} · {} · {} · http://{local}{}{}",
            sanitize(&model.label),
            sanitize(&root.display().to_string()),
            safety.banner(),
            crate::threads::shown(&location),
            if auth { " · token required" } else { "" },
            if g.yes { " · --yes: no approvals" } else { "" },
        ))
    );
    // Tests and scripts read the address from this line.
    println!("listening on http://{local}");
    let shutdown = async {
        let term = async {
            #[cfg(unix)]
            {
                if let Ok(mut s) =
                    tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                {
                    s.recv().await;
                    return;
                }
            }
            std::future::pending::<()>().await
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term => {}
        }
    };
    server.serve(listener, shutdown).await?;
    db.close().await;
    Ok(0)
}
