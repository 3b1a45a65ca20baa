//! `backoffice-upstream`: runs the demo billing and docs APIs until SIGINT
//! or SIGTERM.
//!
//! The billing token comes from `BILLING_UPSTREAM_TOKEN` rather than a
//! flag, so it does not show up in process listings or shell history.

use std::net::SocketAddr;
use std::process::ExitCode;

use backoffice_upstream::{Server, billing, docs};
use clap::Parser;
use tokio::net::TcpListener;

const TOKEN_VAR: &str = "BILLING_UPSTREAM_TOKEN";

/// The demo back office: billing (behind the bearer token in
/// BILLING_UPSTREAM_TOKEN) and the TW-2 product docs, each on its own address.
#[derive(Parser)]
#[command(name = "backoffice-upstream", version)]
struct Args {
    /// Address of the billing API.
    #[arg(long, default_value = "127.0.0.1:8789")]
    billing_listen: SocketAddr,
    /// Address of the docs API.
    #[arg(long, default_value = "127.0.0.1:8791")]
    docs_listen: SocketAddr,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args = Args::parse();
    let token = match std::env::var(TOKEN_VAR) {
        Ok(token) => token,
        Err(_) => {
            return fail(&format!(
                "set {TOKEN_VAR} to the bearer token the billing API demands"
            ));
        }
    };
    let (billing, _) = match billing::router(&token) {
        Ok(app) => app,
        Err(e) => return fail(&e),
    };
    let mut servers = Vec::new();
    for (name, addr, app) in [
        ("billing", args.billing_listen, billing),
        ("docs", args.docs_listen, docs::router()),
    ] {
        let listener = match TcpListener::bind(addr).await {
            Ok(listener) => listener,
            Err(e) => return fail(&format!("cannot listen on {addr} for {name}: {e}")),
        };
        match Server::start(listener, app) {
            Ok(server) => {
                eprintln!("backoffice-upstream: {name} on http://{}", server.addr());
                servers.push(server);
            }
            Err(e) => return fail(&format!("cannot start {name}: {e}")),
        }
    }
    stop_signal().await;
    for server in servers {
        server.shutdown().await;
    }
    ExitCode::SUCCESS
}

fn fail(message: &str) -> ExitCode {
    eprintln!("backoffice-upstream: {message}");
    ExitCode::FAILURE
}

/// Waits for Ctrl-C, or SIGTERM (how service managers and `kill` stop it).
async fn stop_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}
