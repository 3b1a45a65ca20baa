//! The command line: argument parsing and the commands it runs. This is the
//! only module that writes to stdout outside the MCP transport, and in stdio
//! mode it writes nothing there.

// The commands' own output (the URL served, pins changed) is for the operator.
#![allow(clippy::print_stdout)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, bail};
use clap::{Args, Parser, Subcommand};

use crate::catalog;
use crate::dispatch::Toolhost;
use crate::manifest::{Manifest, Sha256Digest};
use crate::mcp::http::{HttpOptions, HttpServer};
use crate::mcp::{McpCatalog, stdio};
use crate::policy::Grants;
use crate::sandbox::{ComponentCache, Sandbox};

/// toolhost: serves MCP tools that run as sandboxed WebAssembly components.
#[derive(Debug, Parser)]
#[command(name = "toolhost", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the manifest's tools over MCP (stdio or Streamable HTTP).
    Serve(ServeArgs),
    /// Set each plugin's sha256 pin in the manifest to its component file's digest.
    Pin(PinArgs),
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("transport").required(true).args(["stdio", "http"])))]
pub struct ServeArgs {
    /// The manifest; component paths in it are relative to its folder.
    #[arg(long, default_value = "tools-manifest.toml")]
    pub manifest: PathBuf,
    /// Speak MCP on stdin/stdout (stdout carries JSON-RPC only; logs go to stderr).
    #[arg(long)]
    pub stdio: bool,
    /// Serve Streamable HTTP at http://ADDR/mcp [default: 127.0.0.1:8787].
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = "127.0.0.1:8787")]
    pub http: Option<SocketAddr>,
    /// Refuse to start if any plugin is refused (default: serve the others).
    #[arg(long)]
    pub strict: bool,
    /// The task this process serves; needed for --grant.
    #[arg(long, value_name = "TASK_ID")]
    pub task: Option<String>,
    /// Grant a write tool to the task (repeatable).
    #[arg(long = "grant", value_name = "TOOL")]
    pub grants: Vec<String>,
    /// Also accept this Host header (repeatable), e.g. when binding a public address.
    #[arg(long = "allow-host", value_name = "HOST")]
    pub allow_hosts: Vec<String>,
    /// Also accept this browser Origin (repeatable), e.g. https://app.example.com:443.
    #[arg(long = "allow-origin", value_name = "ORIGIN")]
    pub allow_origins: Vec<String>,
    /// Largest JSON-RPC message (stdio line or HTTP body) accepted, in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = 4 << 20)]
    pub max_message_bytes: usize,
}

#[derive(Debug, Args)]
pub struct PinArgs {
    /// The manifest to update in place.
    #[arg(long, default_value = "tools-manifest.toml")]
    pub manifest: PathBuf,
    /// Only report pins that differ; exit 1 if any does.
    #[arg(long)]
    pub check: bool,
}

/// Runs the parsed command.
pub async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Serve(args) => serve(args).await,
        Command::Pin(args) => pin(&args),
    }
}

async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let manifest = Manifest::load(&args.manifest)?;
    let grants = Grants::new(&manifest, args.task.clone(), &args.grants)?;
    // Without a usable cache the host still serves; it compiles at every start.
    let cache = ComponentCache::open(&manifest.state_dir)
        .inspect_err(|e| tracing::warn!("{e}; compiling without a cache"))
        .ok();
    let sandbox = Sandbox::new(cache)?;
    let catalog = catalog::load(&manifest, &sandbox).await;
    if args.strict && !catalog.refusals.is_empty() {
        bail!(
            "--strict: {} plugin(s) refused (see above); not serving",
            catalog.refusals.len()
        );
    }
    tracing::info!(
        manifest = %manifest.path.display(),
        manifest_sha256 = %manifest.digest,
        plugins = catalog.plugins.len(),
        refused = catalog.refusals.len(),
        tools = catalog.tools.len(),
        task = grants.task().unwrap_or("-"),
        "catalog ready"
    );
    let host = Arc::new(Toolhost::new(catalog, grants));
    let mcp_catalog = Arc::new(McpCatalog::new(&host));

    if args.stdio {
        stdio::serve(host, mcp_catalog, args.max_message_bytes).await?;
        return Ok(());
    }
    let addr = args.http.expect("clap requires --stdio or --http");
    let mut options = HttpOptions::loopback(args.max_message_bytes);
    options.allowed_hosts.extend(args.allow_hosts);
    options.allowed_origins.extend(args.allow_origins);
    let tools = host.catalog.tools.len();
    let server = HttpServer::bind(addr, host, mcp_catalog, options)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    let bound = server.local_addr()?;
    println!("toolhost serving {tools} tools at http://{bound}/mcp");
    tracing::info!(%bound, "listening");
    server.run(shutdown_signal()).await?;
    tracing::info!("stopped");
    Ok(())
}

/// Resolves on Ctrl-C or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("installing a SIGTERM handler");
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}

/// Rewrites `sha256` of every plugin to its component's digest, keeping the
/// rest of the file as written.
fn pin(args: &PinArgs) -> anyhow::Result<()> {
    let manifest = Manifest::load(&args.manifest)?;
    let text = std::fs::read_to_string(&args.manifest)?;
    let mut doc: toml_edit::DocumentMut = text
        .parse()
        .with_context(|| format!("parsing {}", args.manifest.display()))?;
    let plugins = doc
        .get_mut("plugin")
        .and_then(|p| p.as_array_of_tables_mut())
        .context("the manifest has no [[plugin]] tables")?;
    let mut differing = 0;
    for (table, decl) in plugins.iter_mut().zip(&manifest.plugins) {
        let bytes = std::fs::read(&decl.component)
            .with_context(|| format!("reading component {}", decl.component.display()))?;
        let actual = Sha256Digest::of(&bytes);
        if actual == decl.sha256 {
            continue;
        }
        differing += 1;
        println!("{}: {} -> {actual}", decl.name, decl.sha256);
        table["sha256"] = toml_edit::value(actual.to_string());
    }
    if args.check {
        if differing > 0 {
            bail!("{differing} pin(s) differ from the components on disk");
        }
        println!("all pins match");
        return Ok(());
    }
    if differing > 0 {
        std::fs::write(&args.manifest, doc.to_string())?;
        println!("updated {differing} pin(s) in {}", args.manifest.display());
    } else {
        println!("all pins match");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_without_an_address_binds_loopback() {
        let cli = Cli::try_parse_from(["toolhost", "serve", "--http"]).unwrap();
        let Command::Serve(args) = cli.command else {
            panic!("serve expected")
        };
        assert_eq!(args.http, Some("127.0.0.1:8787".parse().unwrap()));
        assert_eq!(args.manifest, std::path::Path::new("tools-manifest.toml"));
    }

    #[test]
    fn serve_needs_exactly_one_transport() {
        assert!(Cli::try_parse_from(["toolhost", "serve"]).is_err());
        assert!(Cli::try_parse_from(["toolhost", "serve", "--stdio", "--http"]).is_err());
    }
}
