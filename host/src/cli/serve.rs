//! `toolhost serve`: the host itself, over stdio or Streamable HTTP, with
//! the admin API beside it; and the loading of the host that `call` shares.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use tokio_util::sync::CancellationToken;

use super::{cached_sandbox, open_backend, open_trail, task_of_token};
use crate::audit::store::AuditedStore;
use crate::audit::trail::SignedCheckpoint;
use crate::audit::{Audit, Event, ToolTextSha256};
use crate::catalog;
use crate::console::{Console, ConsoleSettings};
use crate::dispatch::Toolhost;
use crate::gate::Network;
use crate::gate::SecretStore;
use crate::lint;
use crate::manifest::{ComponentSource, InstanceMode, Manifest};
use crate::mcp::http::{HttpOptions, HttpServer};
use crate::mcp::{McpCatalog, stdio};
use crate::operator;
use crate::operator::admin::{AdminServer, AdminToken};
use crate::redact::LogRedaction;
use crate::registry::OciCache;
use crate::sandbox::{ComponentCache, MAX_INSTANCES, OPEN_FILES};
use crate::store::postgres::{CheckpointRow, PostgresStore};
use crate::store::{self, Store, StoreError};
use crate::webhook::{Webhook, WebhookError};

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
    /// A token (file of mode 0600) that may read /metrics and nothing else;
    /// else TOOLHOST_METRICS_TOKEN; the admin token may always read them.
    #[arg(long, value_name = "PATH", requires = "admin")]
    pub metrics_token_file: Option<PathBuf>,
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
    /// HTTP: a session with no message for this long, and no request still being answered, is
    /// closed, and its plugin instances dropped.
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

/// Descriptors kept for what is neither a client connection nor a
/// plugin's: the trail, the stores, the cache, the listeners and the log.
const DESCRIPTORS_BESIDE_CONNECTIONS: u64 = 512;

/// Raises the soft limit on open files to the hard one, and returns the
/// limit the process then has (`None`: none). Service managers commonly
/// start a process at a soft limit of 1 024 (low for the sake of programs
/// that use `select`, which this one does not) under a far higher hard one,
/// and every connection, database socket, trail segment, granted directory
/// and file a plugin opens takes a descriptor: `--max-connections` (4 096
/// by default) could not be reached.
fn raise_open_files_limit() -> Option<u64> {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut limit = getrlimit(Resource::Nofile);
    if let (Some(soft), Some(hard)) = (limit.current, limit.maximum)
        && soft < hard
    {
        limit.current = Some(hard);
        match setrlimit(Resource::Nofile, limit) {
            Ok(()) => tracing::debug!(from = soft, to = hard, "open files limit raised"),
            Err(e) => {
                tracing::warn!("the open files limit stays at {soft}: raising it failed: {e}");
                limit.current = Some(soft);
            }
        }
    }
    limit.current
}

/// How many files each plugin with `files` grants may hold open at once,
/// once the limit on open files is raised. The host's own needs come first:
/// its connections, the directories every instance of a plugin with grants
/// opens, the sockets of plugins' outbound requests in flight, and its
/// trail and stores. The plugins, whose authors are not trusted, share what
/// the limit leaves, each up to `sandbox::OPEN_FILES`, so that their opens
/// cannot take what the host needs. Says so when the limit is too low for
/// either.
fn open_files_per_plugin(manifest: &Manifest, max_connections: Option<usize>) -> u32 {
    let Some(allowed) = raise_open_files_limit() else {
        return OPEN_FILES;
    };
    let plugins = manifest
        .plugins
        .iter()
        .filter(|p| !p.files.is_empty())
        .count();
    let connections = max_connections.unwrap_or(0) as u64;
    let directories = granted_directory_descriptors(manifest, max_connections.is_some());
    // Each request a plugin has in flight holds a socket to its upstream.
    let outbound: u64 = manifest
        .plugins
        .iter()
        .filter(|p| !p.network.allow.is_empty())
        .map(|p| u64::from(p.network.limits.concurrent))
        .sum();
    let host_needs = connections + directories + outbound + DESCRIPTORS_BESIDE_CONNECTIONS;
    if connections + directories + outbound > 0 && allowed < host_needs {
        let beyond = if connections > 0 {
            ": beyond it, new connections wait until others close"
        } else {
            ""
        };
        tracing::warn!(
            "about {host_needs} open files may be needed ({connections} for --max-connections, {directories} for the directories of the instances of plugins with `files` grants, {outbound} for plugins' outbound requests in flight, {DESCRIPTORS_BESIDE_CONNECTIONS} for the rest), but the limit is {allowed}{beyond}"
        );
    }
    let share = files_share(allowed, host_needs, plugins);
    if plugins > 0 && share < OPEN_FILES {
        let or_fewer = if connections > 0 {
            " or lower --max-connections"
        } else {
            ""
        };
        tracing::warn!(
            "the open files limit ({allowed}) leaves {} beside what the host may need ({host_needs}): the plugins with `files` grants ({plugins}) may each hold {share} files open at once instead of {OPEN_FILES}; raise the hard limit (such as systemd's LimitNOFILE){or_fewer}",
            allowed.saturating_sub(host_needs)
        );
    }
    share
}

/// What each of `plugins` may hold open when `allowed` descriptors are
/// open at most and the host may need `host_needs` of them.
fn files_share(allowed: u64, host_needs: u64, plugins: usize) -> u32 {
    let left = allowed.saturating_sub(host_needs);
    match left.checked_div(plugins as u64) {
        Some(share) => u32::try_from(share).unwrap_or(u32::MAX).min(OPEN_FILES),
        None => OPEN_FILES,
    }
}

/// Descriptors the granted directories may take: every instance of a
/// plugin with `files` grants opens each of its directories again. Over
/// HTTP the sessions share the pool's instances; over stdio the one
/// session has one instance of a plugin, or one per running call.
fn granted_directory_descriptors(manifest: &Manifest, over_http: bool) -> u64 {
    let granted = manifest.plugins.iter().filter(|p| !p.files.is_empty());
    if over_http {
        let most = granted.map(|p| p.files.len()).max().unwrap_or(0);
        return most as u64 * u64::from(MAX_INSTANCES);
    }
    granted
        .map(|p| {
            let instances = match p.instance {
                InstanceMode::Session => 1,
                InstanceMode::Call => u64::from(p.limits.concurrent),
            };
            p.files.len() as u64 * instances
        })
        .sum()
}

pub(super) async fn serve(args: ServeArgs, logs: LogRedaction) -> anyhow::Result<()> {
    let manifest = Manifest::load(&args.manifest)?;
    let open_files = open_files_per_plugin(&manifest, args.http.map(|_| args.max_connections));
    let backend = open_backend(&manifest, true).await?;
    // The host does not serve unrecorded: no trail, no start.
    let mut trail = open_trail(&manifest)?;
    // With a shared database, every checkpoint also goes there: a trail cut
    // back on this replica's disk cannot take that copy with it.
    let checkpoints = backend.postgres().map(|postgres| {
        let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
        // The newest checkpoint first: one a crash kept from the database
        // last time gets there now.
        if let Some(newest) = trail.newest_checkpoint() {
            let _ = sender.send(newest);
        }
        trail.on_checkpoint(Box::new(move |checkpoint| {
            let _ = sender.send(checkpoint.clone());
        }));
        tokio::spawn(mirror_checkpoints(
            postgres.clone(),
            manifest.replica.clone(),
            receiver,
        ))
    });
    let audit = Audit::start(trail, manifest.audit.checkpoint_every);
    if let Some(postgres) = backend.postgres() {
        tokio::spawn(record_reachability(postgres.clone(), audit.clone()));
    }
    // From here on a stop by signal is recorded. A signal while the catalog
    // loads (a compile, a registry that does not answer) stops the load, so
    // the trail and the log still end as they should.
    let stop = CancellationToken::new();
    let signalled = shutdown_signal().context("installing the Ctrl-C and SIGTERM handlers")?;
    tokio::spawn({
        let stop = stop.clone();
        async move {
            signalled.await;
            stop.cancel();
        }
    });
    audit.record(Event::HostStarted {
        version: env!("CARGO_PKG_VERSION").to_string(),
        pid: std::process::id(),
        transport: if args.stdio { "stdio" } else { "http" }.to_string(),
        manifest: manifest.path.display().to_string(),
        manifest_sha256: manifest.digest.to_string(),
    });
    let store: Arc<dyn Store> = Arc::new(AuditedStore::new(backend.store(), audit.clone()));
    let served = serve_recorded(args, manifest, open_files, audit.clone(), store, logs, stop).await;
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
    // The writer is gone, and with it the hook's sender: the mirror ends
    // once it has copied the final checkpoint, or gives up.
    if let Some(mirror) = checkpoints
        && tokio::time::timeout(Duration::from_secs(5), mirror)
            .await
            .is_err()
    {
        tracing::warn!("the final audit checkpoint was not copied to the database in time");
    }
    served
}

/// Copies each signed checkpoint of this replica's trail to the database,
/// in order, retrying while the database is away.
async fn mirror_checkpoints(
    postgres: Arc<PostgresStore>,
    replica: String,
    mut receiver: tokio::sync::mpsc::UnboundedReceiver<SignedCheckpoint>,
) {
    while let Some(checkpoint) = receiver.recv().await {
        let row = CheckpointRow {
            replica: replica.clone(),
            seq: checkpoint.seq,
            head: checkpoint.head,
            line: checkpoint.line,
            key_id: checkpoint.key_id,
            recorded_at: store::now(),
        };
        let mut wait = Duration::from_millis(200);
        let mut warned = false;
        loop {
            match postgres.record_checkpoint(&row).await {
                Ok(()) => break,
                Err(clash @ StoreError::CheckpointClash { .. }) => {
                    // Retrying cannot help, and the database's copy is the
                    // one `verify --against-db` will hold the trail to.
                    tracing::error!("audit checkpoint not copied: {clash}");
                    break;
                }
                Err(e) => {
                    if !warned {
                        tracing::warn!(
                            seq = row.seq,
                            "audit checkpoint not yet copied to the database (retrying): {e}"
                        );
                        warned = true;
                    }
                    // At stop, a closed channel with this one still unsent:
                    // the caller's timeout bounds the wait.
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(Duration::from_secs(5));
                }
            }
        }
    }
}

/// Records in the trail each time the database is lost and found again.
async fn record_reachability(postgres: Arc<PostgresStore>, audit: Audit) {
    use tokio::sync::broadcast::error::RecvError;
    let mut changes = postgres.reachability();
    // A loss before this listened (the database away at start) is recorded
    // too, so the trail never shows a return without a loss.
    if !postgres.reachable() {
        audit.record(Event::DatabaseUnreachable {
            detail: "unreachable when the host started".into(),
        });
    }
    loop {
        let event = match changes.recv().await {
            Ok(Ok(())) => Event::DatabaseReachable {},
            Ok(Err(detail)) => Event::DatabaseUnreachable { detail },
            // More changes than the channel holds: the log has them all.
            Err(RecvError::Lagged(_)) => continue,
            Err(RecvError::Closed) => break,
        };
        audit.record(event);
    }
}

async fn serve_recorded(
    args: ServeArgs,
    mut manifest: Manifest,
    open_files: u32,
    audit: Audit,
    store: Arc<dyn Store>,
    logs: LogRedaction,
    stop: CancellationToken,
) -> anyhow::Result<()> {
    let task = stdio_task(&args, &manifest, &*store).await?;
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
    let metrics_token = match (args.admin, args.metrics_token_file.as_deref()) {
        (None, _) => None,
        (Some(_), file) => match (std::env::var("TOOLHOST_METRICS_TOKEN").ok(), file) {
            (None, None) => None,
            (env, file) => Some(AdminToken::load(env, file).context("the metrics token")?),
        },
    };
    // A plugin that could read the admin token could approve its own calls;
    // one that could read the metrics token could read the metrics. Checked
    // here by path, before any plugin runs, and again as each grant is
    // opened (a plugin whose opened grant holds one is refused).
    let token_files = [
        ("--admin-token-file", args.admin_token_file.as_deref()),
        ("--metrics-token-file", args.metrics_token_file.as_deref()),
    ];
    for (flag, file) in token_files {
        let Some(file) = file else { continue };
        if let Some((plugin, dir)) = catalog::grant_holding(&manifest, file) {
            bail!(
                "{flag} {}: plugin `{plugin}` is granted {}, which holds it; keep the token outside every `files` directory",
                file.display(),
                dir.display()
            );
        }
        manifest.host_files.push(file.to_path_buf());
    }
    // A compile still running on a blocking thread when a signal comes is
    // left to the runtime's bounded shutdown (main.rs), not waited for.
    let loaded = tokio::select! {
        loaded = load_host(&manifest, open_files, store.clone(), &audit, &logs) => Some(loaded?),
        () = stop.cancelled() => None,
    };
    // Also a signal that came as the load finished: stop before announcing
    // anything a supervisor would read as serving.
    let Some((host, cache)) = loaded.filter(|_| !stop.is_cancelled()) else {
        tracing::info!("stopped while loading the catalog");
        return Ok(());
    };
    tokio::spawn(keep_caches_marked(cache.clone(), &manifest));
    let host = Arc::new(host);
    let webhook = match &manifest.approval_webhook {
        None => None,
        Some(hook) => {
            let secret = match &hook.secret {
                None => None,
                Some(name) => Some(
                    SecretStore::open(manifest.secrets_file.as_deref())?
                        .get(name)
                        .map_err(WebhookError::Secret)?,
                ),
            };
            Some(Webhook::new(&hook.url, secret, audit.clone())?)
        }
    };
    // Metrics count what the trail records, as it is recorded; the webhook
    // posts the approvals it records as asked for.
    let metrics = host.metrics.clone();
    let notify = webhook.clone();
    audit.observe_with(Arc::new(move |event| {
        metrics.observe(event);
        if let Some(hook) = &notify {
            hook.observe(event);
        }
    }));
    let catalog = &host.catalog;
    if args.strict && !catalog.refusals.is_empty() {
        bail!(
            "--strict: {} plugin(s) refused (see above); not serving",
            catalog.refusals.len()
        );
    }
    // Refused plugins (a name clash or hidden text refuses one) were logged
    // and are governed by --strict; every other lint error stops the host,
    // since an agent would misread the catalog.
    // The rules run again only on a catalog this build has not linted.
    let report = match cache {
        Some(cache) => lint::lint_kept(&manifest, catalog, &KeptReports(cache)),
        None => lint::lint(&manifest, catalog),
    };
    for warning in report.warnings() {
        tracing::warn!("lint: {warning}");
    }
    let errors: Vec<_> = report
        .errors()
        .filter(|f| {
            !matches!(
                f.rule,
                lint::Rule::PluginRefused | lint::Rule::NameClash | lint::Rule::TextHidden
            )
        })
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

    // With `console_url` set, links point there even from a replica that
    // serves no console itself (another one does, behind the same proxy).
    if let Some(url) = &manifest.console_url {
        let _ = host.console_url.set(url.clone());
        if let Some(hook) = &webhook {
            hook.link_to(url);
        }
    }
    let mut console = None;
    if let (Some(addr), Some(token)) = (args.admin, admin_token) {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("cannot listen on {addr} for the admin API"))?;
        let bound = listener.local_addr()?;
        let public_url = manifest
            .console_url
            .clone()
            .unwrap_or_else(|| format!("http://{bound}"));
        // Approval links in replies to MCP clients point at this console.
        let _ = host.console_url.set(public_url.clone());
        if let Some(hook) = &webhook {
            hook.link_to(&public_url);
        }
        let shown = Console::new(
            host.clone(),
            manifest.clone(),
            ConsoleSettings {
                public_url: public_url.clone(),
                mcp_url: std::sync::OnceLock::new(),
                lint: report.findings.clone(),
            },
        );
        console = Some(shown.clone());
        let mut scrapers = vec![token.clone()];
        if let Some(metrics_token) = metrics_token {
            scrapers.push(metrics_token);
        }
        let beside = crate::console::router(shown)
            .merge(crate::console::scrape::router(host.clone(), scrapers));
        let admin = AdminServer::new(
            listener,
            store.clone(),
            manifest.clone(),
            token,
            beside,
            args.read_timeout,
        );
        // On stdio, stdout is JSON-RPC's alone: the address goes to the log.
        if args.stdio {
            tracing::info!(%bound, console = %public_url, "admin API and console listening");
        } else {
            announce(&format!(
                "toolhost admin API at http://{bound}/v1 and console at {public_url}/"
            ));
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
    announce(&format!(
        "toolhost serving {tools} tools at http://{bound}/mcp"
    ));
    if let Some(console) = &console {
        console.set_mcp_url(format!("http://{bound}/mcp"));
    }
    tracing::info!(%bound, "listening");
    let served = server.run(stop.cancelled_owned()).await;
    host.drain(DRAIN).await;
    served?;
    tracing::info!("stopped");
    Ok(())
}

/// Prints where the host listens, for whoever started it. A stdout nobody
/// reads any more (a supervisor that closed it, `| head -1`) must not stop
/// a host that is already serving, as `println!` would by panicking: the
/// failed line goes to the log instead.
fn announce(line: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    if let Err(e) = writeln!(out, "{line}").and_then(|()| out.flush()) {
        tracing::warn!("cannot print to stdout ({e}): {line}");
    }
}

/// How long a stopping host waits for calls still running, so their
/// outcomes reach the audit trail.
const DRAIN: std::time::Duration = std::time::Duration::from_secs(10);

/// The task a stdio session serves: the token's, or the ad-hoc one.
async fn stdio_task(
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
        return Ok(Some(task_of_token(token, manifest, store).await?));
    }
    let Some(id) = &args.task else {
        return Ok(None);
    };
    operator::check_task_id(id)?;
    operator::check_grants(manifest, &args.grants, &[])?;
    let ttl = operator::parse_ttl(&args.ttl)?;
    let task = store.ad_hoc_task(id, &args.grants, ttl).await?;
    Ok(Some(task.id))
}

/// The store (every operator decision recorded), the sandbox and the
/// vetted catalog: everything a call needs; and the compiled-component
/// cache it loaded from, if usable, where `serve` keeps its lint report.
/// Each plugin may hold `open_files` files open at once.
pub(super) async fn load_host(
    manifest: &Manifest,
    open_files: u32,
    store: Arc<dyn Store>,
    audit: &Audit,
    logs: &LogRedaction,
) -> anyhow::Result<(Toolhost, Option<ComponentCache>)> {
    let mut sandbox = cached_sandbox(manifest)?;
    sandbox.hold_open_files_to(open_files);
    let network = Network::new(manifest, Some(audit.clone()))?;
    // Log lines and records are redacted from here on, before any plugin
    // runs; the plugins' gates carry the same redactor.
    logs.set(network.redactor().clone());
    audit.redact_with(network.redactor().clone());
    let catalog = catalog::load(manifest, &sandbox, &store, &network).await;
    record_catalog(audit, manifest, &catalog);
    let cache = sandbox.cache().cloned();
    Ok((Toolhost::new(catalog, store, audit.clone()), cache))
}

/// One record per plugin: loaded (with its tools and the hashes of what
/// they hand the model) or refused (with why).
fn record_catalog(audit: &Audit, manifest: &Manifest, catalog: &catalog::Catalog) {
    for (index, plugin) in catalog.plugins.iter().enumerate() {
        let tools: Vec<_> = catalog.tools.iter().filter(|t| t.plugin == index).collect();
        audit.record(Event::PluginLoaded {
            plugin: plugin.prepared.shared().name.to_string(),
            sha256: plugin.sha256.clone(),
            tools: tools.iter().map(|t| t.name.as_str().to_string()).collect(),
            // The same hashes the lock keeps, computed once at load.
            text_sha256: plugin
                .vetted
                .tool
                .iter()
                .map(|(name, t)| {
                    let digests = ToolTextSha256 {
                        title: t.title.clone(),
                        description: t.description.clone(),
                        input_schema: t.input_schema.clone(),
                        output_schema: t.output_schema.clone(),
                    };
                    (name.clone(), digests)
                })
                .collect(),
        });
    }
    for refusal in &catalog.refusals {
        let sha256 = manifest
            .plugins
            .iter()
            .find(|p| p.name == refusal.plugin)
            .map(|p| match p.sha256 {
                Some(pin) => pin.to_string(),
                None => p.component.to_string(),
            })
            .unwrap_or_default();
        audit.record(Event::PluginRefused {
            plugin: refusal.plugin.to_string(),
            sha256,
            reason: refusal.reason.clone(),
        });
    }
}

/// How often a serving host marks what it uses in its caches as used
/// again: well within the day a mark lasts (`crate::pruning`). A mark
/// younger than a day is left as it is, so most rounds only open a few
/// files. Hourly rather than daily because the timer does not run while
/// the machine sleeps: after a long suspend the first round comes within
/// an hour of waking, not within a day.
const MARK_CACHES_EVERY: Duration = Duration::from_secs(60 * 60);

/// Keeps what this host uses from looking unused to `toolhost cache
/// prune` however long it runs: the compiled-cache entries it read or
/// wrote, and the registry artifacts its manifest pins, which a restart
/// without the registry needs. Runs until the runtime stops.
fn keep_caches_marked(
    cache: Option<ComponentCache>,
    manifest: &Manifest,
) -> impl std::future::Future<Output = ()> + use<> {
    let artifacts = OciCache::in_state_dir(&manifest.state_dir);
    let pinned: Vec<_> = manifest
        .plugins
        .iter()
        .filter_map(|p| match &p.component {
            ComponentSource::Oci(reference) => reference.digest,
            ComponentSource::File(_) => None,
        })
        .collect();
    async move {
        let mut every = tokio::time::interval(MARK_CACHES_EVERY);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // The first tick is now, and loading has just marked them.
        every.tick().await;
        loop {
            every.tick().await;
            let (cache, artifacts, pinned) = (cache.clone(), artifacts.clone(), pinned.clone());
            let marked = tokio::task::spawn_blocking(move || {
                if let Some(cache) = cache {
                    cache.mark_in_use();
                }
                for digest in pinned {
                    artifacts.mark_in_use(digest);
                }
            });
            let _ = marked.await;
        }
    }
}

/// Lint reports kept in the compiled-component cache, beside the code:
/// like it, they are written by this build of the host alone.
struct KeptReports(ComponentCache);

impl lint::ReportShelf for KeptReports {
    fn get(&self, key: &str) -> Option<Vec<u8>> {
        self.0.kept("lint", key)
    }

    fn put(&self, key: &str, report: &[u8]) {
        self.0.keep("lint", key, report);
    }
}

/// Registers for Ctrl-C and SIGTERM now, so that a signal from this call
/// on is caught (tokio's `ctrl_c()` would register only when first
/// polled), and resolves when one arrives.
#[cfg(unix)]
fn shutdown_signal() -> std::io::Result<impl Future<Output = ()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    Ok(async move {
        tokio::select! {
            _ = interrupt.recv() => {}
            _ = terminate.recv() => {}
        }
    })
}

/// Resolves on Ctrl-C.
#[cfg(not(unix))]
fn shutdown_signal() -> std::io::Result<impl Future<Output = ()>> {
    Ok(async {
        let _ = tokio::signal::ctrl_c().await;
    })
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::{OPEN_FILES, files_share};
    use crate::cli::{Cli, Command};

    #[test]
    fn plugins_share_what_the_host_does_not_need() {
        // A high limit: each plugin has all its places.
        assert_eq!(files_share(20_000, 5_608, 2), OPEN_FILES);
        // What is left is shared, never more than OPEN_FILES each.
        assert_eq!(files_share(3_000, 1_612, 1), 1_388);
        assert_eq!(files_share(3_000, 1_612, 4), 347);
        // Nothing left: no plugin may open a file.
        assert_eq!(files_share(1_024, 2_000, 2), 0);
        assert_eq!(files_share(1_024, 512, 0), OPEN_FILES);
    }

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
