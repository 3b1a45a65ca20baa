//! The command line: argument parsing and the commands it runs. This is the
//! only module that writes to stdout outside the MCP transport, and in stdio
//! mode it writes nothing there.
//!
//! This file holds the top-level parser, the dispatch and what several
//! commands share (opening the store, the trail and the sandbox); each
//! command group has a file of its own with its arguments.

// The commands' own output (the URL served, pins changed) is for the operator.
#![allow(clippy::print_stdout)]

mod approval;
mod audit;
mod cache;
mod call;
mod compile;
mod lint;
mod operator;
mod pin;
mod plugin;
mod registry;
mod serve;
mod state;
mod task;
mod vet;

use std::sync::Arc;

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};

pub use approval::{ApprovalArgs, ApprovalCommand};
pub use audit::{AuditArgs, AuditCommand};
pub use cache::{CacheArgs, CacheCommand};
pub use call::CallArgs;
pub use compile::CompileArgs;
pub use lint::LintArgs;
pub use operator::{OperatorArgs, OperatorCommand};
pub use pin::PinArgs;
pub use plugin::{PluginArgs, PluginCommand};
pub use serve::ServeArgs;
pub use state::{StateArgs, StateCommand};
pub use task::{TaskArgs, TaskCommand};
pub use vet::VetArgs;

use crate::audit::store::AuditedStore;
use crate::audit::{Audit, Trail, TrailOptions};
use crate::manifest::{Manifest, StoreKind};
use crate::redact::LogRedaction;
use crate::sandbox::{CompilerProcess, ComponentCache, EngineSettings, Sandbox};
use crate::store::postgres::{PoolSettings, PostgresStore};
use crate::store::{SqliteStore, Store, TaskState, now, rfc3339};

/// toolhost: serves MCP tools that run as sandboxed WebAssembly components.
// No `Debug` on the parsed arguments: they may hold a task token.
#[derive(Parser)]
#[command(name = "toolhost", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// Each command's own arguments are defined only when that command runs
/// (or its help is asked for): a `serve` start builds none of the others',
/// whose code would otherwise be paged in by every host an MCP client spawns.
#[derive(Subcommand)]
#[command(defer = true)]
pub enum Command {
    /// Serve the manifest's tools over MCP (stdio or Streamable HTTP).
    Serve(Box<ServeArgs>),
    /// Set each plugin's sha256 pin in the manifest to its component file's digest.
    Pin(PinArgs),
    /// Open, list, show, revoke and extend tasks (grants of write and destructive tools).
    Task(TaskArgs),
    /// List and decide approvals of destructive calls.
    Approval(ApprovalArgs),
    /// Add, list, remove operators (the people who sign in to the console) and set their passwords.
    Operator(OperatorArgs),
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
    /// Start a new plugin, inspect a component before declaring it, or
    /// show what a new version changes.
    Plugin(PluginArgs),
    /// Record what the platform team approved of each plugin (interfaces,
    /// tools and their texts, grants) in tools-manifest.lock, which every
    /// load is held against.
    Vet(VetArgs),
    /// Remove compiled components, kept records and pulled registry
    /// artifacts no host has used for a while (`cache prune`).
    Cache(CacheArgs),
    /// The compiler process a host runs (`sandbox/compiler.rs`): a
    /// component on stdin, its native code on stdout.
    #[command(name = crate::sandbox::COMPILE_COMMAND, hide = true)]
    CompileComponent(CompileArgs),
}

/// How `lint` and `plugin inspect` print what they found.
#[derive(Clone, Copy, clap::ValueEnum)]
pub enum LintFormat {
    Text,
    Json,
}

impl Cli {
    /// Whether this is `serve`: a process that runs until stopped, whose
    /// log lines go through the log thread (`crate::logs`).
    pub fn serves(&self) -> bool {
        matches!(self.command, Command::Serve(_))
    }

    /// How many worker threads the async runtime gets when serving: one per
    /// core unless `--workers` says otherwise. One worker serves a stdio
    /// session with about a fifth less CPU per call (no futex wake and
    /// context switch for each hand-off between rmcp's loop, the request's
    /// handler task and the task that sends its answer), but a plugin call
    /// that computes for long then shares that thread with the session's
    /// other calls, each of which waits for the running guest's next epoch
    /// tick (about 20 ms measured). With one worker per core a spinning
    /// plugin leaves the other workers free.
    /// Other commands make a handful of calls and take tokio's default.
    pub fn runtime_workers(&self) -> Option<usize> {
        match &self.command {
            Command::Serve(args) => Some(args.workers.unwrap_or_else(|| {
                std::thread::available_parallelism().map_or(2, std::num::NonZero::get)
            })),
            // The compiler process waits for nothing: one worker, beside
            // Cranelift's own threads.
            Command::CompileComponent(_) => Some(1),
            _ => None,
        }
    }
}

/// Runs the parsed command. A command that reads the host's secrets sets
/// them on `logs`, the redaction of the process's log lines.
pub async fn run(cli: Cli, logs: LogRedaction) -> anyhow::Result<()> {
    match cli.command {
        Command::Serve(args) => serve::serve(*args, logs).await,
        Command::Pin(args) => pin::pin(&args).await,
        Command::Task(args) => task::task(args).await,
        Command::Approval(args) => approval::approval(args).await,
        Command::Operator(args) => operator::operator(args).await,
        Command::State(args) => state::state(args).await,
        Command::Audit(args) => audit::audit_command(args).await,
        Command::Call(args) => call::call(args, logs).await,
        Command::Lint(args) => lint::lint_command(args).await,
        Command::Plugin(args) => plugin::plugin(args).await,
        Command::Vet(args) => vet::vet(args).await,
        Command::Cache(args) => cache::cache(args).await,
        Command::CompileComponent(args) => compile::compile(args),
    }
}

/// The environment variable holding the PostgreSQL URL; it wins over
/// `[host] database_url_file`.
pub const DATABASE_URL_ENV: &str = "TOOLHOST_DATABASE_URL";

/// The store the manifest chooses: SQLite in `state_dir`, or the PostgreSQL
/// database shared by the replicas.
async fn open_store(manifest: &Manifest) -> anyhow::Result<Arc<dyn Store>> {
    Ok(open_backend(manifest, false).await?.store())
}

/// An opened store, by kind: serving needs the PostgreSQL one itself for
/// what only it does (audit checkpoints, reachability).
enum Backend {
    Sqlite(Arc<SqliteStore>),
    Postgres(Arc<PostgresStore>),
}

impl Backend {
    fn store(&self) -> Arc<dyn Store> {
        match self {
            Backend::Sqlite(store) => store.clone(),
            Backend::Postgres(store) => store.clone(),
        }
    }

    fn postgres(&self) -> Option<&Arc<PostgresStore>> {
        match self {
            Backend::Sqlite(_) => None,
            Backend::Postgres(store) => Some(store),
        }
    }
}

/// `serving`: only a serving host migrates an older database schema, and
/// only it starts while the database cannot be reached.
async fn open_backend(manifest: &Manifest, serving: bool) -> anyhow::Result<Backend> {
    match manifest.store.kind {
        StoreKind::Sqlite => Ok(Backend::Sqlite(Arc::new(SqliteStore::open(
            &manifest.state_dir,
        )?))),
        StoreKind::Postgres => {
            let url = database_url(manifest)?;
            let settings = PoolSettings {
                upgrade_schema: serving,
                start_unreachable: serving,
                ..PoolSettings::default()
            };
            let store = PostgresStore::connect(&url, settings)
                .await
                .context("cannot open the PostgreSQL store")?;
            Ok(Backend::Postgres(Arc::new(store)))
        }
    }
}

/// The URL from the environment or from the private file the manifest
/// names; never from the manifest itself.
fn database_url(manifest: &Manifest) -> anyhow::Result<zeroize::Zeroizing<String>> {
    if let Some(url) = std::env::var(DATABASE_URL_ENV)
        .ok()
        .filter(|u| !u.is_empty())
    {
        return Ok(zeroize::Zeroizing::new(url));
    }
    let Some(path) = &manifest.store.database_url_file else {
        bail!(
            "host.store is postgres but no database is named: set {DATABASE_URL_ENV}, or host.database_url_file to a file (mode 0600) holding the URL"
        );
    };
    let meta = std::fs::metadata(path)
        .with_context(|| format!("cannot read host.database_url_file {}", path.display()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            bail!(
                "host.database_url_file {} is readable by others (mode {mode:o}); a database URL may hold a password: chmod 600 it",
                path.display()
            );
        }
    }
    #[cfg(not(unix))]
    drop(meta);
    let text = zeroize::Zeroizing::new(
        std::fs::read_to_string(path)
            .with_context(|| format!("cannot read host.database_url_file {}", path.display()))?,
    );
    let url = text.trim();
    if url.is_empty() {
        bail!("host.database_url_file {} is empty", path.display());
    }
    Ok(zeroize::Zeroizing::new(url.to_string()))
}

fn open_trail(manifest: &Manifest) -> anyhow::Result<Trail> {
    Trail::open(
        &manifest.state_dir,
        TrailOptions {
            segment_bytes: manifest.audit.segment_bytes,
            replica: Some(manifest.replica.clone()),
        },
    )
    .context("the audit trail cannot be written, so nothing is done; check state_dir/audit and run `toolhost audit verify`")
}

/// The store for an operator command. One that changes something records
/// it in the audit trail, and refuses to start if the trail is unusable.
async fn operator_store(manifest: &Manifest, changes: bool) -> anyhow::Result<Arc<dyn Store>> {
    let store = open_store(manifest).await?;
    if !changes {
        return Ok(store);
    }
    let audit = Audit::direct(open_trail(manifest)?);
    Ok(Arc::new(AuditedStore::new(store, audit)))
}

/// Where compiled components are kept instead of `STATE_DIR/cache/components`.
const CACHE_DIR_VAR: &str = "TOOLHOST_CACHE_DIR";

/// The sandbox for the manifest, with the compiled-component cache of its
/// `state_dir`, or of `TOOLHOST_CACHE_DIR` when set (one cache for several
/// manifests: hosts of one machine, or a test suite compiling a large
/// Python component once). Without a usable cache the host still works; it
/// compiles at every start.
fn cached_sandbox(manifest: &Manifest) -> anyhow::Result<Sandbox> {
    let folder = cache_folder(manifest);
    let cache = ComponentCache::open_at(&folder)
        .inspect_err(|e| tracing::warn!("{e}; compiling without a cache"))
        .ok();
    let settings = EngineSettings::of(manifest);
    let mut sandbox = Sandbox::new(cache, settings)?;
    sandbox.keep_grants_out_of(folder);
    // This is the `toolhost` binary, which can run its own compiler.
    sandbox.compile_in(CompilerProcess::this_binary(settings));
    Ok(sandbox)
}

/// The compiled-component cache's folder: `TOOLHOST_CACHE_DIR` when set,
/// else under the manifest's `state_dir`.
fn cache_folder(manifest: &Manifest) -> std::path::PathBuf {
    match std::env::var_os(CACHE_DIR_VAR) {
        Some(dir) if !dir.is_empty() => std::path::PathBuf::from(dir),
        _ => ComponentCache::folder_in(&manifest.state_dir),
    }
}

/// The open task a token belongs to, or why it cannot be used.
async fn task_of_token(
    token: &str,
    manifest: &Manifest,
    store: &dyn Store,
) -> anyhow::Result<String> {
    let Some(task) = store.authenticate(token).await? else {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Each command's arguments are defined only when it runs (`defer`), so
    /// clap's own checks of them run here, for every command at once.
    #[test]
    fn every_command_is_well_formed() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
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

    /// The host writes the compiler process's command line in
    /// `sandbox/compiler.rs` and clap reads it here: a flag spelled apart
    /// would send every compile back to the host.
    #[test]
    fn the_compiler_process_reads_the_settings_the_host_writes() {
        use crate::sandbox::{COMPILE_COMMAND, EngineSettings, compile_arguments};
        for settings in [
            EngineSettings {
                largest_memory: 64 << 20,
                wasm_stack: 512 << 10,
                fuel: false,
            },
            EngineSettings {
                largest_memory: 4 << 30,
                wasm_stack: 1 << 20,
                fuel: true,
            },
        ] {
            let line = ["toolhost".to_string(), COMPILE_COMMAND.to_string()]
                .into_iter()
                .chain(compile_arguments(&settings));
            match Cli::try_parse_from(line).unwrap().command {
                Command::CompileComponent(args) => assert_eq!(args.settings(), settings),
                _ => panic!("not read as the compile command"),
            }
        }
    }
}
