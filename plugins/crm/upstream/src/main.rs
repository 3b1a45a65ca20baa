//! `crm-upstream`: runs the demo CRM API until SIGINT or SIGTERM.
//!
//! The bearer token comes from `CRM_UPSTREAM_TOKEN` rather than a flag, so
//! it does not show up in process listings or shell history.

use clap::Parser;
use crm_upstream::{Config, Upstream};
use std::net::SocketAddr;
use std::process::ExitCode;
use tokio::net::TcpListener;

/// Environment variable holding the token clients must send.
const TOKEN_VAR: &str = "CRM_UPSTREAM_TOKEN";

/// The demo CRM HTTP API (contacts in memory, behind a bearer token taken
/// from the CRM_UPSTREAM_TOKEN environment variable).
#[derive(Parser)]
#[command(name = "crm-upstream", version)]
struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8788")]
    listen: SocketAddr,
    /// Also serve the routes that exist only for the host's tests (header
    /// echo, redirect, large bodies); they need no token.
    #[arg(long)]
    test_routes: bool,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args = Args::parse();
    let token = match std::env::var(TOKEN_VAR) {
        Ok(token) if !token.is_empty() => token,
        Ok(_) => {
            return fail(&format!(
                "{TOKEN_VAR} is empty; set it to the bearer token clients must send"
            ));
        }
        Err(std::env::VarError::NotPresent) => {
            return fail(&format!(
                "{TOKEN_VAR} is not set; set it to the bearer token clients must send"
            ));
        }
        Err(std::env::VarError::NotUnicode(_)) => {
            return fail(&format!("{TOKEN_VAR} is not valid UTF-8"));
        }
    };
    let listener = match TcpListener::bind(args.listen).await {
        Ok(listener) => listener,
        Err(e) => return fail(&format!("cannot listen on {}: {e}", args.listen)),
    };
    let config = Config {
        token,
        test_routes: args.test_routes,
    };
    let upstream = match Upstream::start(listener, config).await {
        Ok(upstream) => upstream,
        Err(e) => return fail(&format!("cannot start: {e}")),
    };
    eprintln!(
        "crm-upstream: listening on http://{}{}",
        upstream.addr(),
        if args.test_routes {
            " (test routes on)"
        } else {
            ""
        }
    );
    stop_signal().await;
    upstream.shutdown().await;
    ExitCode::SUCCESS
}

fn fail(message: &str) -> ExitCode {
    eprintln!("crm-upstream: {message}");
    ExitCode::FAILURE
}

/// Waits for Ctrl-C, or SIGTERM where there is one (how service managers
/// and `kill` stop the server).
async fn stop_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
