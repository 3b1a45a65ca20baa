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
use tokio_util::sync::CancellationToken;

use crate::audit::store::AuditedStore;
use crate::audit::{self, Audit, Event, Trail, TrailOptions};
use crate::catalog;
use crate::dispatch::Toolhost;
use crate::gate::{self, Network};
use crate::lint;
use crate::manifest::{Manifest, PluginName, Sha256Digest};
use crate::mcp::http::{HttpOptions, HttpServer};
use crate::mcp::{McpCatalog, stdio};
use crate::operator::admin::{AdminServer, AdminToken};
use crate::operator::{self, OpenTask, approval_json, task_json};
use crate::sandbox::{ComponentCache, EngineSettings, Sandbox};
use crate::session::{Session, Transport};
use crate::store::sqlite::operator as cli_operator;
use crate::store::{ApprovalState, Decision, SqliteStore, Store, TaskState, now, rfc3339};
use crate::{inspect, scaffold};

/// toolhost: serves MCP tools that run as sandboxed WebAssembly components.
// No `Debug` on the parsed arguments: they may hold a task token.
#[derive(Parser)]
#[command(name = "toolhost", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Serve the manifest's tools over MCP (stdio or Streamable HTTP).
    Serve(ServeArgs),
    /// Set each plugin's sha256 pin in the manifest to its component file's digest.
    Pin(PinArgs),
    /// Open, list, show, revoke and extend tasks (grants of write and destructive tools).
    Task(TaskArgs),
    /// List and decide approvals of destructive calls.
    Approval(ApprovalArgs),
    /// Inspect plugins' durable state and move keys (e.g. restore a note from the trash).
    State(StateArgs),
    /// Verify, export and follow the audit trail; print its public key.
    Audit(AuditArgs),
    /// Run one tool call against the manifest, without an MCP client; print
    /// the result, or the structured error and exit 1.
    Call(CallArgs),
    /// Check the catalog an agent will see: names, risk classes, collisions,
    /// descriptions and schemas (rules in docs/lint.md); exit 1 on errors.
    Lint(LintArgs),
    /// Start a new plugin, or inspect a component before declaring it.
    Plugin(PluginArgs),
}

#[derive(Args)]
pub struct PluginArgs {
    #[command(subcommand)]
    pub command: PluginCommand,
}

#[derive(Subcommand)]
pub enum PluginCommand {
    /// Scaffold a plugin crate (one read tool, one write tool, a test) on
    /// the guest SDK, build it, and print the manifest block to paste.
    New {
        /// The plugin's name: the prefix of its tools (a-z, 0-9).
        name: String,
        /// Where to create it [default: ./NAME]; must be new or empty.
        #[arg(long)]
        dir: Option<PathBuf>,
        /// The guest SDK (plugins/sdk of a toolhost checkout) [default: the one this binary was built from].
        #[arg(long)]
        sdk: Option<PathBuf>,
        /// Only write the crate; do not build it.
        #[arg(long)]
        no_build: bool,
    },
    /// Show a component's digest, imports and exports, whether it fits the
    /// plugin world, the tools it describes with their schemas, and lint findings.
    Inspect {
        /// The component (.wasm).
        file: PathBuf,
        /// `text` for people, `json` for scripts.
        #[arg(long, value_enum, default_value_t = LintFormat::Text)]
        format: LintFormat,
    },
}

#[derive(Args)]
pub struct LintArgs {
    /// The manifest; component paths in it are relative to its folder.
    #[arg(default_value = "tools-manifest.toml")]
    pub manifest: PathBuf,
    /// `text` for people, `json` (one object with every finding) for scripts.
    #[arg(long, value_enum, default_value_t = LintFormat::Text)]
    pub format: LintFormat,
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum LintFormat {
    Text,
    Json,
}

#[derive(Args)]
pub struct CallArgs {
    /// The tool to call, as the manifest declares it.
    pub tool: String,
    /// Its arguments: a JSON object.
    #[arg(long, value_name = "JSON", default_value = "{}")]
    pub args: String,
    /// The manifest; component paths in it are relative to its folder.
    #[arg(long, default_value = "tools-manifest.toml")]
    pub manifest: PathBuf,
    /// Call as the task this token belongs to (needed for write and destructive tools).
    #[arg(
        long,
        value_name = "TOKEN",
        env = "TOOLHOST_TASK_TOKEN",
        hide_env_values = true
    )]
    pub task_token: Option<String>,
}

#[derive(Args)]
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
    /// stdio: serve the task this token belongs to (from `toolhost task open`).
    #[arg(
        long,
        value_name = "TOKEN",
        env = "TOOLHOST_TASK_TOKEN",
        hide_env_values = true
    )]
    pub task_token: Option<String>,
    /// stdio: serve an ad-hoc task with this id, recorded in the store; needed for --grant.
    #[arg(long, value_name = "TASK_ID", requires = "stdio")]
    pub task: Option<String>,
    /// Grant a write or destructive tool to the ad-hoc task (repeatable).
    #[arg(long = "grant", value_name = "TOOL", requires = "task")]
    pub grants: Vec<String>,
    /// How long the ad-hoc task's grants last.
    #[arg(long, value_name = "DURATION", default_value = "8h", requires = "task")]
    pub ttl: String,
    /// Serve the admin API (tasks, approvals) on this address; off by default.
    #[arg(long, value_name = "ADDR")]
    pub admin: Option<SocketAddr>,
    /// Read the admin token from this file (mode 0600) instead of TOOLHOST_ADMIN_TOKEN.
    #[arg(long, value_name = "PATH", requires = "admin")]
    pub admin_token_file: Option<PathBuf>,
    /// Also accept this Host header (repeatable), e.g. when binding a public address.
    #[arg(long = "allow-host", value_name = "HOST")]
    pub allow_hosts: Vec<String>,
    /// Also accept this browser Origin (repeatable), e.g. https://app.example.com:443.
    #[arg(long = "allow-origin", value_name = "ORIGIN")]
    pub allow_origins: Vec<String>,
    /// Largest JSON-RPC message (stdio line or HTTP body) accepted, in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = 4 << 20)]
    pub max_message_bytes: usize,
    /// HTTP: live MCP sessions at most; a client that would open one more gets 503.
    #[arg(long, value_name = "N", default_value_t = HttpOptions::DEFAULT_MAX_SESSIONS, value_parser = at_least_one)]
    pub max_sessions: usize,
    /// HTTP: a session with no request for this long is closed, and its plugin instances dropped.
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = positive_duration)]
    pub session_idle: std::time::Duration,
    /// HTTP: a request's headers, and then its body, must arrive within this time.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = positive_duration)]
    pub read_timeout: std::time::Duration,
    /// HTTP: open connections at most; beyond it new connections wait to be accepted.
    #[arg(long, value_name = "N", default_value_t = HttpOptions::DEFAULT_MAX_CONNECTIONS, value_parser = at_least_one)]
    pub max_connections: usize,
    /// Runtime worker threads [default: one per core]; 1 spends less CPU per call on one stdio session.
    #[arg(long, value_name = "N", value_parser = at_least_one)]
    pub workers: Option<usize>,
}

impl Cli {
    /// How many worker threads the async runtime gets when serving: one per
    /// core unless `--workers` says otherwise. One worker serves a stdio
    /// session with about a quarter less CPU per call (no futex wake and
    /// context switch for each hand-off between the request, handler and
    /// writer tasks), but a plugin call that computes for long then shares
    /// that thread with the session's other calls, each of which waits for
    /// the running guest's next epoch tick (about 20 ms measured). With one
    /// worker per core a spinning plugin leaves the other workers free.
    /// Other commands make a handful of calls and take tokio's default.
    pub fn runtime_workers(&self) -> Option<usize> {
        match &self.command {
            Command::Serve(args) => Some(args.workers.unwrap_or_else(|| {
                std::thread::available_parallelism().map_or(2, std::num::NonZero::get)
            })),
            _ => None,
        }
    }
}

fn at_least_one(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

fn positive_duration(text: &str) -> Result<std::time::Duration, String> {
    match humantime::parse_duration(text) {
        Ok(d) if d.is_zero() => Err("must be longer than zero".into()),
        Ok(d) => Ok(d),
        Err(e) => Err(e.to_string()),
    }
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

#[derive(Debug, Args)]
pub struct TaskArgs {
    /// The manifest, for its state_dir and to check granted tools.
    #[arg(long, default_value = "tools-manifest.toml", global = true)]
    pub manifest: PathBuf,
    #[command(subcommand)]
    pub command: TaskCommand,
}

#[derive(Debug, Subcommand)]
pub enum TaskCommand {
    /// Open a task and print its id and token (shown only this once).
    Open {
        /// What the task is for, in words an auditor understands.
        #[arg(long)]
        purpose: String,
        /// A write or destructive tool the task may call (repeatable).
        #[arg(long = "grant", value_name = "TOOL", required = true)]
        grants: Vec<String>,
        /// How long the task lasts, e.g. 30m, 2h, 1d (at most 30 days).
        #[arg(long, value_name = "DURATION")]
        ttl: String,
        /// Total calls the task may make, reads included.
        #[arg(long, value_name = "N")]
        max_calls: Option<u64>,
        /// Write and destructive calls the task may make in any hour.
        #[arg(long, value_name = "N")]
        writes_per_hour: Option<u32>,
        /// A granted destructive tool whose calls need no per-call approval (repeatable).
        #[arg(long = "pre-approve", value_name = "TOOL")]
        pre_approve: Vec<String>,
        /// Approvals come from an operator only (CLI or admin API), never through the agent's client.
        #[arg(long)]
        operator_approval: bool,
        /// Print JSON: {"task": {...}, "token": "..."}.
        #[arg(long)]
        json: bool,
    },
    /// List tasks, newest first.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Show one task as JSON.
    Show { id: String },
    /// Revoke a task: its sessions' next write or destructive call is refused.
    Revoke { id: String },
    /// Set a task's expiry to DURATION from now.
    Extend {
        id: String,
        #[arg(long, value_name = "DURATION")]
        ttl: String,
    },
}

#[derive(Debug, Args)]
pub struct ApprovalArgs {
    /// The manifest, for its state_dir.
    #[arg(long, default_value = "tools-manifest.toml", global = true)]
    pub manifest: PathBuf,
    #[command(subcommand)]
    pub command: ApprovalCommand,
}

#[derive(Debug, Subcommand)]
pub enum ApprovalCommand {
    /// List pending approvals (all with --all), newest first.
    List {
        #[arg(long)]
        all: bool,
        #[arg(long)]
        json: bool,
    },
    /// Show one approval as JSON.
    Show { id: String },
    /// Approve a pending call: the same call, repeated, runs once.
    Approve { id: String },
    /// Deny a pending call.
    Deny { id: String },
}

#[derive(Debug, Args)]
pub struct StateArgs {
    /// The manifest, for its state_dir.
    #[arg(long, default_value = "tools-manifest.toml", global = true)]
    pub manifest: PathBuf,
    #[command(subcommand)]
    pub command: StateCommand,
}

#[derive(Debug, Subcommand)]
pub enum StateCommand {
    /// List a plugin's keys.
    List {
        plugin: String,
        #[arg(long, default_value = "")]
        prefix: String,
    },
    /// Print the value of one key.
    Get { plugin: String, key: String },
    /// Move a value to another key of the same plugin.
    Move {
        plugin: String,
        from: String,
        to: String,
    },
}

#[derive(Debug, Args)]
pub struct AuditArgs {
    /// The manifest, for its state_dir.
    #[arg(long, default_value = "tools-manifest.toml", global = true)]
    pub manifest: PathBuf,
    #[command(subcommand)]
    pub command: AuditCommand,
}

#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Check every record's chain and every signed checkpoint. Exit 0: the
    /// trail verifies; 1: it was changed, cut or forged (the first break is
    /// printed); 2: it could not be read.
    Verify {
        /// The public key to check signatures with (`ed25519:<hex>`, from
        /// `toolhost audit key`), kept where the host cannot write.
        /// Default: the key in state_dir, which proves less.
        #[arg(long, value_name = "KEY")]
        key: Option<String>,
    },
    /// Print the records that match every filter given.
    Export {
        /// From this time on: RFC 3339, a date (2026-11-30) or an age (2h, 7d).
        #[arg(long, value_name = "TIME")]
        since: Option<String>,
        /// Before this time (same forms as --since).
        #[arg(long, value_name = "TIME")]
        until: Option<String>,
        /// Only records of this task.
        #[arg(long, value_name = "TASK_ID")]
        task: Option<String>,
        /// Only records of this tool.
        #[arg(long, value_name = "TOOL")]
        tool: Option<String>,
        /// Only records of tools of this risk class.
        #[arg(long, value_enum)]
        risk: Option<crate::manifest::RiskClass>,
        #[arg(long, value_enum, default_value = "jsonl")]
        format: audit::export::Format,
    },
    /// Print the newest records; with -f, keep printing new ones.
    Tail {
        /// How many records to print first.
        #[arg(short = 'n', long, default_value_t = 20)]
        lines: usize,
        #[arg(short = 'f', long)]
        follow: bool,
    },
    /// Print the public key that verifies the trail's checkpoints.
    Key,
}

/// Runs the parsed command.
pub async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Serve(args) => serve(args).await,
        Command::Pin(args) => pin(&args),
        Command::Task(args) => task(args),
        Command::Approval(args) => approval(args),
        Command::State(args) => state(args),
        Command::Audit(args) => audit_command(args),
        Command::Call(args) => call(args).await,
        Command::Lint(args) => lint_command(args).await,
        Command::Plugin(args) => plugin(args).await,
    }
}

fn open_store(manifest: &Manifest) -> anyhow::Result<Arc<SqliteStore>> {
    Ok(Arc::new(SqliteStore::open(&manifest.state_dir)?))
}

fn open_trail(manifest: &Manifest) -> anyhow::Result<Trail> {
    Trail::open(
        &manifest.state_dir,
        TrailOptions {
            segment_bytes: manifest.audit.segment_bytes,
        },
    )
    .context("the audit trail cannot be written, so nothing is done; check state_dir/audit and run `toolhost audit verify`")
}

/// The store for an operator command. One that changes something records
/// it in the audit trail, and refuses to start if the trail is unusable.
fn operator_store(manifest: &Manifest, changes: bool) -> anyhow::Result<Arc<dyn Store>> {
    let store = open_store(manifest)?;
    if !changes {
        return Ok(store);
    }
    let audit = Audit::direct(open_trail(manifest)?);
    Ok(Arc::new(AuditedStore::new(store, audit)))
}

/// The task a stdio session serves: the token's, or the ad-hoc one.
fn stdio_task(
    args: &ServeArgs,
    manifest: &Manifest,
    store: &dyn Store,
) -> anyhow::Result<Option<String>> {
    if args.http.is_some() {
        if args.task_token.is_some() {
            tracing::warn!(
                "--task-token / TOOLHOST_TASK_TOKEN is ignored with --http: each HTTP request binds its task with `Authorization: Bearer <token>`"
            );
        }
        return Ok(None);
    }
    // An explicit ad-hoc task wins over a token inherited from the
    // environment; both on one command line is a mistake worth a warning.
    let token = match (&args.task, &args.task_token) {
        (Some(_), Some(_)) => {
            tracing::warn!(
                "--task is given, so the task token (--task-token or TOOLHOST_TASK_TOKEN) is ignored"
            );
            None
        }
        (_, token) => token.as_ref(),
    };
    if let Some(token) = token {
        return Ok(Some(task_of_token(token, manifest, store)?));
    }
    let Some(id) = &args.task else {
        return Ok(None);
    };
    operator::check_task_id(id)?;
    operator::check_grants(manifest, &args.grants, &[])?;
    let ttl = operator::parse_ttl(&args.ttl)?;
    let task = store.ad_hoc_task(id, &args.grants, ttl)?;
    Ok(Some(task.id))
}

/// The open task a token belongs to, or why it cannot be used.
fn task_of_token(token: &str, manifest: &Manifest, store: &dyn Store) -> anyhow::Result<String> {
    let Some(task) = store.authenticate(token)? else {
        bail!(
            "the task token (--task-token or TOOLHOST_TASK_TOKEN) is unknown to this host's store ({})",
            manifest.state_dir.display()
        );
    };
    match task.state(now()) {
        TaskState::Open => {}
        TaskState::Revoked => bail!(
            "task {} was revoked; ask the operator for a new task",
            task.id
        ),
        TaskState::Expired => bail!(
            "task {} expired at {}; ask the operator to extend it (toolhost task extend {} --ttl …)",
            task.id,
            rfc3339(task.expires_at),
            task.id
        ),
    }
    Ok(task.id)
}

async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let manifest = Manifest::load(&args.manifest)?;
    // The host does not serve unrecorded: no trail, no start.
    let audit = Audit::start(open_trail(&manifest)?, manifest.audit.checkpoint_every);
    audit.record(Event::HostStarted {
        version: env!("CARGO_PKG_VERSION").to_string(),
        pid: std::process::id(),
        transport: if args.stdio { "stdio" } else { "http" }.to_string(),
        manifest: manifest.path.display().to_string(),
        manifest_sha256: manifest.digest.to_string(),
    });
    let served = serve_recorded(args, manifest, audit.clone()).await;
    let reason = match &served {
        Ok(()) => "stopped".to_string(),
        Err(e) => format!("{e:#}"),
    };
    let stopped = audit.stop(Event::HostStopped {
        pid: std::process::id(),
        reason,
    });
    if let Err(e) = stopped {
        tracing::error!("the audit trail was not closed cleanly: {e}");
    }
    served
}

/// The sandbox for the manifest, with the compiled-component cache of its
/// `state_dir`. Without a usable cache the host still works; it compiles
/// at every start.
fn cached_sandbox(manifest: &Manifest) -> anyhow::Result<Sandbox> {
    let cache = ComponentCache::open(&manifest.state_dir)
        .inspect_err(|e| tracing::warn!("{e}; compiling without a cache"))
        .ok();
    Ok(Sandbox::new(cache, EngineSettings::of(manifest))?)
}

/// The store (every operator decision recorded), the sandbox and the
/// vetted catalog: everything a call needs.
async fn load_host(manifest: &Manifest, audit: &Audit) -> anyhow::Result<Toolhost> {
    let store: Arc<dyn Store> = Arc::new(AuditedStore::new(open_store(manifest)?, audit.clone()));
    let sandbox = cached_sandbox(manifest)?;
    let network = Network::new(manifest, Some(audit.clone()))?;
    gate::redact::install(network.redactor().clone());
    let catalog = catalog::load(manifest, &sandbox, &store, &network).await;
    record_catalog(audit, manifest, &catalog);
    Ok(Toolhost::new(catalog, store, audit.clone()))
}

/// `toolhost lint`: loads the catalog as `serve` would, without secrets or
/// directories (they do not change what plugins describe), and reports.
async fn lint_command(args: LintArgs) -> anyhow::Result<()> {
    let manifest = Manifest::load(&args.manifest)?;
    let store: Arc<dyn Store> = open_store(&manifest)?;
    let sandbox = cached_sandbox(&manifest)?;
    let catalog = catalog::load_described(&manifest, &sandbox, &store).await;
    let report = lint::lint(&manifest, &catalog);
    match args.format {
        LintFormat::Json => println!("{}", serde_json::to_string_pretty(&report)?),
        LintFormat::Text => {
            for finding in &report.findings {
                println!("{finding}");
            }
            println!(
                "{}: {} tool(s) of {} plugin(s); {} error(s), {} warning(s), {} allowed",
                manifest.path.display(),
                catalog.tools.len(),
                manifest.plugins.len(),
                report.errors().count(),
                report.warnings().count(),
                report
                    .findings
                    .iter()
                    .filter(|f| f.allowed.is_some())
                    .count(),
            );
        }
    }
    if report.has_errors() {
        std::process::exit(1);
    }
    Ok(())
}

async fn plugin(args: PluginArgs) -> anyhow::Result<()> {
    match args.command {
        PluginCommand::New {
            name,
            dir,
            sdk,
            no_build,
        } => {
            let name = PluginName::try_from(name).map_err(|e| anyhow::anyhow!("{e}"))?;
            let dir = dir.unwrap_or_else(|| PathBuf::from(name.as_str()));
            let sdk = sdk.unwrap_or_else(scaffold::default_sdk);
            scaffold::write(&dir, &name, &sdk)?;
            eprintln!("created plugin `{name}` in {}", dir.display());
            let (component, digest) = if no_build {
                let wasm = dir.join(scaffold::component_path(&name));
                (std::path::absolute(&wasm).unwrap_or(wasm), None)
            } else {
                eprintln!("building it for wasm32-wasip2 …");
                let wasm = scaffold::build(&dir, &name)?;
                let digest = Sha256Digest::of(&std::fs::read(&wasm)?);
                (wasm, Some(digest))
            };
            eprintln!("add this to your manifest, then run `toolhost lint`:\n");
            print!(
                "{}",
                scaffold::manifest_block(&name, &component, digest.as_ref())
            );
            Ok(())
        }
        PluginCommand::Inspect { file, format } => {
            let inspection = inspect::inspect(&file).await?;
            match format {
                LintFormat::Json => println!("{}", serde_json::to_string_pretty(&inspection)?),
                LintFormat::Text => print_inspection(&inspection),
            }
            if inspection.misfit.is_some() || inspection.lint.has_errors() {
                std::process::exit(1);
            }
            Ok(())
        }
    }
}

/// Text from an unvetted component, made safe for a terminal: control
/// characters (escape sequences among them) are shown escaped.
fn shown(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

fn print_inspection(i: &inspect::Inspection) {
    println!("component  {} ({} bytes)", i.file.display(), i.bytes);
    println!("sha256     {}", i.sha256);
    match &i.misfit {
        None => println!("world      fits toolhost:plugin@0.2.0, world `plugin`"),
        Some(why) => println!("world      does not fit: {}", shown(why)),
    }
    let list = |names: &[String]| {
        names
            .iter()
            .map(|n| shown(n))
            .collect::<Vec<_>>()
            .join("\n           ")
    };
    println!("imports    {}", list(&i.imports));
    println!("exports    {}", list(&i.exports));
    println!("\ntools ({})", i.tools.len());
    for t in &i.tools {
        println!(
            "  {}  [{} by its verb; the manifest decides]",
            shown(&t.name),
            t.risk
        );
        println!("    title:       {}", shown(&t.title));
        println!("    description: {}", shown(&t.description));
        println!("    input:       {}", t.input_schema);
        if let Some(output) = &t.output_schema {
            println!("    output:      {output}");
        }
    }
    println!("\nlint");
    for finding in &i.lint.findings {
        for line in finding.to_string().lines() {
            println!("  {}", shown(line));
        }
    }
    println!(
        "  {} error(s), {} warning(s); risk classes assumed from the verbs (`toolhost lint` on a manifest is the check that counts)",
        i.lint.errors().count(),
        i.lint.warnings().count()
    );
}

async fn call(args: CallArgs) -> anyhow::Result<()> {
    let manifest = Manifest::load(&args.manifest)?;
    let arguments = match serde_json::from_str::<serde_json::Value>(&args.args) {
        Ok(serde_json::Value::Object(map)) => map,
        Ok(_) => bail!("--args must be a JSON object, e.g. --args '{{\"key\": \"T-1041\"}}'"),
        Err(e) => bail!("--args is not JSON: {e}"),
    };
    let audit = Audit::start(open_trail(&manifest)?, manifest.audit.checkpoint_every);
    audit.record(Event::HostStarted {
        version: env!("CARGO_PKG_VERSION").to_string(),
        pid: std::process::id(),
        transport: "cli".to_string(),
        manifest: manifest.path.display().to_string(),
        manifest_sha256: manifest.digest.to_string(),
    });
    let outcome = call_recorded(&args, &manifest, &audit, arguments).await;
    let stopped = audit.stop(Event::HostStopped {
        pid: std::process::id(),
        reason: match &outcome {
            Err(e) => format!("{e:#}"),
            Ok(_) => "stopped".to_string(),
        },
    });
    if let Err(e) = stopped {
        tracing::error!("the audit trail was not closed cleanly: {e}");
    }
    let (text, succeeded) = outcome?;
    println!("{text}");
    if !succeeded {
        std::process::exit(1);
    }
    Ok(())
}

/// The call itself; returns what to print and whether the call succeeded.
async fn call_recorded(
    args: &CallArgs,
    manifest: &Manifest,
    audit: &Audit,
    arguments: serde_json::Map<String, serde_json::Value>,
) -> anyhow::Result<(String, bool)> {
    let host = load_host(manifest, audit).await?;
    if host.catalog.tool(&args.tool).is_none() {
        if let Some((plugin, _)) = manifest.tool(&args.tool)
            && let Some(refusal) = host
                .catalog
                .refusals
                .iter()
                .find(|r| r.plugin == plugin.name)
        {
            bail!("{refusal}");
        }
        bail!(
            "no tool `{}` in {}; the manifest declares: {}",
            args.tool,
            manifest.path.display(),
            host.catalog
                .tools
                .iter()
                .map(|t| t.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let task = match &args.task_token {
        Some(token) => Some(task_of_token(token, manifest, &*host.store)?),
        None => None,
    };
    let session = Session::new(Transport::Cli);
    session.record_opened(&host.audit, || Event::SessionOpened {
        session: session.id().to_string(),
        transport: Transport::Cli.as_str().to_string(),
        client: Some("toolhost call".to_string()),
        client_version: Some(env!("CARGO_PKG_VERSION").to_string()),
        protocol: None,
        task: task.clone(),
    });
    let outcome = host
        .call(&session, task.as_deref(), &args.tool, Some(arguments))
        .await;
    drop(session);
    let succeeded = outcome.is_ok();
    let result =
        crate::mcp::reply::tool_result(outcome).map_err(|e| anyhow::anyhow!("{}", e.message))?;
    let value = result.structured_content.unwrap_or(serde_json::Value::Null);
    Ok((serde_json::to_string_pretty(&value)?, succeeded))
}

async fn serve_recorded(args: ServeArgs, manifest: Manifest, audit: Audit) -> anyhow::Result<()> {
    let store: Arc<dyn Store> = Arc::new(AuditedStore::new(open_store(&manifest)?, audit.clone()));
    let task = stdio_task(&args, &manifest, &*store)?;
    let admin_token = match args.admin {
        Some(addr) if !addr.ip().is_loopback() => bail!(
            "--admin {addr}: the admin API serves plain HTTP, so it listens on loopback only; put a TLS proxy on this machine in front of it to reach it from elsewhere"
        ),
        Some(_) => Some(AdminToken::load(
            std::env::var("TOOLHOST_ADMIN_TOKEN").ok(),
            args.admin_token_file.as_deref(),
        )?),
        None => None,
    };
    // A plugin that could read the admin token could approve its own calls.
    if let Some(file) = args.admin_token_file.as_deref()
        && let Some((plugin, dir)) = catalog::grant_holding(&manifest, file)
    {
        bail!(
            "--admin-token-file {}: plugin `{plugin}` is granted {}, which holds it; keep the token outside every `files` directory",
            file.display(),
            dir.display()
        );
    }
    let host = Arc::new(load_host(&manifest, &audit).await?);
    let catalog = &host.catalog;
    if args.strict && !catalog.refusals.is_empty() {
        bail!(
            "--strict: {} plugin(s) refused (see above); not serving",
            catalog.refusals.len()
        );
    }
    // Refused plugins (a name clash refuses the later one) were logged and
    // are governed by --strict; every other lint error stops the host, since
    // an agent would misread the catalog.
    let report = lint::lint(&manifest, catalog);
    for warning in report.warnings() {
        tracing::warn!("lint: {warning}");
    }
    let errors: Vec<_> = report
        .errors()
        .filter(|f| !matches!(f.rule, lint::Rule::PluginRefused | lint::Rule::NameClash))
        .collect();
    if !errors.is_empty() {
        for error in &errors {
            tracing::error!("lint: {error}");
        }
        bail!(
            "the catalog has {} lint error(s) (see above), so it is not served; fix them, or accept each with lint_allow and a reason (`toolhost lint` lists them, docs/lint.md explains each rule)",
            errors.len()
        );
    }
    tracing::info!(
        manifest = %manifest.path.display(),
        manifest_sha256 = %manifest.digest,
        plugins = catalog.plugins.len(),
        refused = catalog.refusals.len(),
        tools = catalog.tools.len(),
        task = task.as_deref().unwrap_or("-"),
        "catalog ready"
    );
    let mcp_catalog = Arc::new(McpCatalog::new(&host));

    let stop = CancellationToken::new();
    tokio::spawn({
        let stop = stop.clone();
        async move {
            shutdown_signal().await;
            stop.cancel();
        }
    });
    if let (Some(addr), Some(token)) = (args.admin, admin_token) {
        let admin = AdminServer::bind(addr, store.clone(), manifest.clone(), token)
            .await
            .with_context(|| format!("cannot listen on {addr} for the admin API"))?;
        let bound = admin.local_addr()?;
        // On stdio, stdout is JSON-RPC's alone: the address goes to the log.
        if args.stdio {
            tracing::info!(%bound, "admin API listening");
        } else {
            println!("toolhost admin API at http://{bound}/v1");
        }
        let stopped = stop.clone().cancelled_owned();
        tokio::spawn(async move {
            if let Err(e) = admin.run(stopped).await {
                tracing::error!("admin API stopped: {e}");
            }
        });
    }

    if args.stdio {
        let served = tokio::select! {
            served = stdio::serve(host.clone(), mcp_catalog, args.max_message_bytes, task) => served,
            () = stop.cancelled() => Ok(()),
        };
        host.drain(DRAIN).await;
        return served.map_err(Into::into);
    }
    let addr = args.http.expect("clap requires --stdio or --http");
    // rmcp's idle timer does not see a call in progress, so a session idle
    // for less than the longest call could be closed under a running call.
    let longest_call = manifest
        .plugins
        .iter()
        .map(|p| p.limits.call_timeout)
        .max()
        .unwrap_or_default();
    if args.session_idle <= longest_call {
        bail!(
            "--session-idle {} must be longer than the longest call_timeout_ms of the manifest ({} ms)",
            humantime::format_duration(args.session_idle),
            longest_call.as_millis()
        );
    }
    let mut options = HttpOptions::loopback(args.max_message_bytes);
    options.allowed_hosts.extend(args.allow_hosts);
    options.allowed_origins.extend(args.allow_origins);
    options.max_sessions = args.max_sessions;
    options.session_idle = args.session_idle;
    options.read_timeout = args.read_timeout;
    options.max_connections = args.max_connections;
    let tools = host.catalog.tools.len();
    let server = HttpServer::bind(addr, host.clone(), mcp_catalog, options)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    let bound = server.local_addr()?;
    println!("toolhost serving {tools} tools at http://{bound}/mcp");
    tracing::info!(%bound, "listening");
    let served = server.run(stop.cancelled_owned()).await;
    host.drain(DRAIN).await;
    served?;
    tracing::info!("stopped");
    Ok(())
}

/// How long a stopping host waits for calls still running, so their
/// outcomes reach the audit trail.
const DRAIN: std::time::Duration = std::time::Duration::from_secs(10);

/// One record per plugin: loaded (with its tools) or refused (with why).
fn record_catalog(audit: &Audit, manifest: &Manifest, catalog: &catalog::Catalog) {
    for (index, plugin) in catalog.plugins.iter().enumerate() {
        audit.record(Event::PluginLoaded {
            plugin: plugin.prepared.shared().name.to_string(),
            sha256: plugin.sha256.clone(),
            tools: catalog
                .tools
                .iter()
                .filter(|t| t.plugin == index)
                .map(|t| t.name.as_str().to_string())
                .collect(),
        });
    }
    for refusal in &catalog.refusals {
        let sha256 = manifest
            .plugins
            .iter()
            .find(|p| p.name == refusal.plugin)
            .map(|p| p.sha256.to_string())
            .unwrap_or_default();
        audit.record(Event::PluginRefused {
            plugin: refusal.plugin.to_string(),
            sha256,
            reason: refusal.reason.clone(),
        });
    }
}

/// `toolhost task …`: works on the store directly, so a serving host sees
/// the change at its very next call.
fn task(args: TaskArgs) -> anyhow::Result<()> {
    let manifest = Manifest::load(&args.manifest)?;
    let changes = matches!(
        args.command,
        TaskCommand::Open { .. } | TaskCommand::Revoke { .. } | TaskCommand::Extend { .. }
    );
    let store = operator_store(&manifest, changes)?;
    match args.command {
        TaskCommand::Open {
            purpose,
            grants,
            ttl,
            max_calls,
            writes_per_hour,
            pre_approve,
            operator_approval,
            json,
        } => {
            let request = OpenTask {
                purpose,
                grants,
                ttl,
                max_calls,
                writes_per_hour,
                pre_approve,
                operator_approval,
            };
            let new = request.vet(&manifest, cli_operator())?;
            let (task, token) = store.open_task(new)?;
            if json {
                let out = serde_json::json!({ "task": task_json(&task), "token": token.as_str() });
                println!("{out}");
            } else {
                println!("task:    {}", task.id);
                println!("expires: {}", rfc3339(task.expires_at));
                println!("token:   {}", token.as_str());
                println!();
                println!("The token is shown only this once. Give it to the agent's MCP client:");
                println!("  Streamable HTTP: header `Authorization: Bearer <token>`");
                println!("  stdio:           TOOLHOST_TASK_TOKEN=<token> toolhost serve --stdio");
            }
        }
        TaskCommand::List { json } => {
            let tasks = store.tasks()?;
            if json {
                let list: Vec<_> = tasks.iter().map(task_json).collect();
                println!("{}", serde_json::Value::Array(list));
            } else if tasks.is_empty() {
                println!("no tasks");
            } else {
                let at = now();
                println!(
                    "{:<20} {:<8} {:<21} {:>9}  GRANTS / PURPOSE",
                    "ID", "STATE", "EXPIRES", "CALLS"
                );
                for t in &tasks {
                    let state = match t.state(at) {
                        TaskState::Open => "open",
                        TaskState::Revoked => "revoked",
                        TaskState::Expired => "expired",
                    };
                    let calls = match t.max_calls {
                        Some(max) => format!("{}/{max}", t.calls_used),
                        None => t.calls_used.to_string(),
                    };
                    println!(
                        "{:<20} {:<8} {:<21} {:>9}  {} / {}",
                        t.id,
                        state,
                        rfc3339(t.expires_at),
                        calls,
                        t.grants.join(","),
                        t.purpose
                    );
                }
            }
        }
        TaskCommand::Show { id } => {
            let task = store
                .task(&id)?
                .with_context(|| format!("no task `{id}`"))?;
            println!("{:#}", task_json(&task));
        }
        TaskCommand::Revoke { id } => {
            let task = store.revoke_task(&id, &cli_operator())?;
            println!(
                "task {} revoked; its sessions' next write or destructive call is refused",
                task.id
            );
        }
        TaskCommand::Extend { id, ttl } => {
            let task = store.extend_task(&id, operator::parse_ttl(&ttl)?, &cli_operator())?;
            println!(
                "task {} now expires at {}",
                task.id,
                rfc3339(task.expires_at)
            );
        }
    }
    Ok(())
}

fn approval(args: ApprovalArgs) -> anyhow::Result<()> {
    let manifest = Manifest::load(&args.manifest)?;
    let changes = matches!(
        args.command,
        ApprovalCommand::Approve { .. } | ApprovalCommand::Deny { .. }
    );
    let store = operator_store(&manifest, changes)?;
    let decide = |id: &str, decision| -> anyhow::Result<()> {
        let approval = store.decide(id, decision, &cli_operator(), "cli")?;
        let verb = match decision {
            Decision::Approve => "approved; the same call, repeated, runs once",
            Decision::Deny => "denied",
        };
        println!("{} {verb}: {}", approval.id, approval.summary);
        Ok(())
    };
    match args.command {
        ApprovalCommand::List { all, json } => {
            let list = store.approvals(!all)?;
            if json {
                let list: Vec<_> = list.iter().map(approval_json).collect();
                println!("{}", serde_json::Value::Array(list));
            } else if list.is_empty() {
                println!("no {}approvals", if all { "" } else { "pending " });
            } else {
                for a in &list {
                    // A decided approval's expiry means nothing any more;
                    // who decided, and when, does.
                    let when = match (a.state, a.decided_at) {
                        (ApprovalState::Pending | ApprovalState::Approved, _) => {
                            format!("until {}", rfc3339(a.expires_at))
                        }
                        (_, Some(at)) => format!(
                            "by {} at {}",
                            a.decided_by.as_deref().unwrap_or("?"),
                            rfc3339(at)
                        ),
                        (_, None) => format!("since {}", rfc3339(a.expires_at)),
                    };
                    println!("{}  {:<8}  {when}  {}", a.id, a.state.as_str(), a.summary);
                }
            }
        }
        ApprovalCommand::Show { id } => {
            let approval = store
                .approval(&id)?
                .with_context(|| format!("no approval `{id}`"))?;
            println!("{:#}", approval_json(&approval));
        }
        ApprovalCommand::Approve { id } => decide(&id, Decision::Approve)?,
        ApprovalCommand::Deny { id } => decide(&id, Decision::Deny)?,
    }
    Ok(())
}

fn state(args: StateArgs) -> anyhow::Result<()> {
    let manifest = Manifest::load(&args.manifest)?;
    let changes = matches!(args.command, StateCommand::Move { .. });
    let store = operator_store(&manifest, changes)?;
    match args.command {
        StateCommand::List { plugin, prefix } => {
            for key in store.state_list(&plugin, &prefix)? {
                println!("{key}");
            }
        }
        StateCommand::Get { plugin, key } => {
            let value = store
                .state_get(&plugin, &key)?
                .with_context(|| format!("plugin `{plugin}` has no key `{key}`"))?;
            println!("{value}");
        }
        StateCommand::Move { plugin, from, to } => {
            store.state_rename(&plugin, &from, &to, &cli_operator())?;
            println!("{plugin}: moved `{from}` to `{to}`");
        }
    }
    Ok(())
}

fn audit_command(args: AuditArgs) -> anyhow::Result<()> {
    let manifest = Manifest::load(&args.manifest)?;
    let state_dir = &manifest.state_dir;
    match args.command {
        AuditCommand::Verify { key } => {
            let public = match key {
                Some(text) => {
                    audit::key::parse_public(&text).map_err(|e| anyhow::anyhow!("--key: {e}"))?
                }
                None => audit::key::load(&audit::key::key_path(state_dir))?.verifying_key(),
            };
            match audit::verify::verify(state_dir, &public) {
                Ok(Ok(verified)) => {
                    println!(
                        "OK: {} records in {} segment(s), {} checkpoint(s); head {} (seq {})",
                        verified.records,
                        verified.segments,
                        verified.checkpoints,
                        verified.head,
                        verified.records
                    );
                    if let Some(at) = &verified.last_signed_at {
                        println!(
                            "newest checkpoint: seq {} signed at {at}",
                            verified.signed_through
                        );
                    }
                    let unsigned = verified.records - verified.signed_through;
                    if unsigned > 0 {
                        println!(
                            "note: the last {unsigned} record(s) are chained but not yet under a signed checkpoint (a serving host signs every {} s and at stop)",
                            manifest.audit.checkpoint_every.as_secs()
                        );
                    }
                    if let Some((segment, bytes)) = verified.torn_tail {
                        println!(
                            "note: {segment} ends in a half-written record ({bytes} bytes, a crash mid-write); the next host start saves and cuts it and records the repair"
                        );
                    }
                    Ok(())
                }
                Ok(Err(broken)) => {
                    println!("BROKEN: {broken}");
                    std::process::exit(1);
                }
                Err(e) => {
                    eprintln!("toolhost: cannot verify: {e}");
                    std::process::exit(2);
                }
            }
        }
        AuditCommand::Export {
            since,
            until,
            task,
            tool,
            risk,
            format,
        } => {
            let time = |text: Option<String>| {
                text.map(|t| audit::export::parse_time(&t))
                    .transpose()
                    .map_err(anyhow::Error::msg)
            };
            let filter = audit::export::Filter {
                since: time(since)?,
                until: time(until)?,
                task,
                tool,
                risk: risk.map(|r| r.as_str().to_string()),
            };
            let stdout = std::io::stdout();
            audit::export::export(state_dir, &filter, format, &mut stdout.lock())?;
            Ok(())
        }
        AuditCommand::Tail { lines, follow } => {
            let stdout = std::io::stdout();
            audit::export::tail(state_dir, lines, follow, &mut stdout.lock())?;
            Ok(())
        }
        AuditCommand::Key => {
            let path = audit::key::key_path(state_dir);
            if !path.exists() {
                // The key is made with the trail; make both now rather than
                // print nothing an operator could pin.
                drop(open_trail(&manifest)?);
            }
            let key = audit::key::load(&path)?;
            println!("{}", audit::key::public_text(&key.verifying_key()));
            Ok(())
        }
    }
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
    fn serving_runs_a_worker_per_core_unless_told() {
        let workers = |args: &[&str]| Cli::try_parse_from(args).unwrap().runtime_workers();
        let cores = std::thread::available_parallelism().map_or(2, std::num::NonZero::get);
        assert_eq!(workers(&["toolhost", "serve", "--stdio"]), Some(cores));
        assert_eq!(workers(&["toolhost", "serve", "--http"]), Some(cores));
        assert_eq!(
            workers(&["toolhost", "serve", "--stdio", "--workers", "1"]),
            Some(1)
        );
        assert!(Cli::try_parse_from(["toolhost", "serve", "--stdio", "--workers", "0"]).is_err());
        assert_eq!(workers(&["toolhost", "pin"]), None);
    }

    #[test]
    fn serve_needs_exactly_one_transport() {
        assert!(Cli::try_parse_from(["toolhost", "serve"]).is_err());
        assert!(Cli::try_parse_from(["toolhost", "serve", "--stdio", "--http"]).is_err());
    }
}
