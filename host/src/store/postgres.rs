//! The shared backend: one PostgreSQL database for every replica of a host.
//!
//! Concurrency: row locks, not serializable isolation. Every operation that
//! checks and then changes a task first takes the task's row with
//! `SELECT … FOR UPDATE`, so charges, approval requests and revocations of
//! one task are serialised across all replicas while different tasks run in
//! parallel; plugin state is serialised per plugin on its `plugin_usage`
//! row, which also carries the quota. Under READ COMMITTED, what a
//! transaction reads after taking the lock is the latest committed state,
//! so budgets and compare-and-set are exact without retries. Locks are
//! always taken task before approval, so two transactions cannot wait on
//! each other. (Serializable isolation with retry was the alternative: it
//! turns every contended charge into an abort and a second round trip.)
//!
//! A committed transaction is durable when `COMMIT` returns (the server's
//! `synchronous_commit`, on by default); a connection cut before that rolls
//! back, so nothing acknowledged is lost and nothing is counted twice.
//!
//! Connections come from a bounded pool (deadpool-postgres over
//! tokio-postgres). When the server is unreachable every operation fails at
//! once with [`StoreError::Unavailable`]; the pool opens new connections as
//! soon as it is back. When every connection stays busy for the pool's wait
//! time, the operation fails with [`StoreError::Busy`].

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{
    GenericClient, Manager, ManagerConfig, Object, Pool, PoolError, RecyclingMethod, Runtime,
    TimeoutType, Transaction,
};
use tokio_postgres::config::SslMode;
use tokio_postgres::{NoTls, Row};

use super::token::{self, TaskToken};
use super::{
    APPROVED_FOR_SECS, Approval, ApprovalRequest, ApprovalState, Charge, ChargeRefusal, Charged,
    Decision, MAX_PENDING_PER_TASK, NewTask, StateError, Store, StoreError, Task, TaskState,
    json_list, now, operator, random_id, ttl_secs, valid_state_key,
};

/// The newest schema this host knows; see [`MIGRATIONS`].
pub const SCHEMA_VERSION: i64 = 1;

/// Each entry brings the schema from the version before it to its own.
/// Entries are never edited once released; a change is a new entry.
const MIGRATIONS: &[(i64, &str)] = &[(
    1,
    "
CREATE TABLE task (
    id                TEXT PRIMARY KEY,
    purpose           TEXT NOT NULL,
    opened_by         TEXT NOT NULL,
    opened_at         BIGINT NOT NULL,
    expires_at        BIGINT NOT NULL,
    grants            TEXT NOT NULL,          -- JSON array of tool names
    pre_approved      TEXT NOT NULL,          -- JSON array of tool names
    max_calls         BIGINT,
    writes_per_hour   BIGINT,
    calls_used        BIGINT NOT NULL DEFAULT 0,
    revoked_at        BIGINT,
    revoked_by        TEXT,
    ad_hoc            BOOLEAN NOT NULL DEFAULT false,
    operator_approval BOOLEAN NOT NULL DEFAULT false,
    token_id          TEXT UNIQUE,
    token_sha256      BYTEA
);
CREATE TABLE task_write (
    task_id TEXT NOT NULL REFERENCES task(id),
    at      BIGINT NOT NULL
);
CREATE INDEX task_write_by_task ON task_write(task_id, at);
CREATE TABLE approval (
    id            TEXT PRIMARY KEY,
    task_id       TEXT NOT NULL REFERENCES task(id),
    tool          TEXT NOT NULL,
    binding       TEXT NOT NULL,
    arguments     TEXT NOT NULL,
    summary       TEXT NOT NULL,
    state         TEXT NOT NULL,
    requested_at  BIGINT NOT NULL,
    expires_at    BIGINT NOT NULL,
    decided_at    BIGINT,
    decided_by    TEXT,
    channel       TEXT,
    operator_only BOOLEAN NOT NULL DEFAULT false,
    settled       BOOLEAN NOT NULL DEFAULT false   -- used, or its denial reported
);
CREATE INDEX approval_by_binding ON approval(task_id, binding);
CREATE INDEX approval_by_state ON approval(state, expires_at);
CREATE TABLE plugin_state (
    plugin TEXT NOT NULL,
    key    TEXT COLLATE \"C\" NOT NULL,   -- byte order, as in SQLite
    value  BYTEA NOT NULL,            -- UTF-8; TEXT cannot hold a NUL
    PRIMARY KEY (plugin, key)
);
-- Bytes of keys and values per plugin, kept with every write; its row is
-- also the lock that orders one plugin's writes.
CREATE TABLE plugin_usage (
    plugin TEXT PRIMARY KEY,
    bytes  BIGINT NOT NULL
);
-- Each replica's signed audit checkpoints: what a trail rolled back on its
-- own disk cannot show (see `toolhost audit verify --against-db`).
CREATE TABLE audit_checkpoint (
    replica     TEXT NOT NULL,
    seq         BIGINT NOT NULL,
    head        TEXT NOT NULL,
    line        TEXT NOT NULL,      -- the signed checkpoint, canonical JSON
    key_id      TEXT NOT NULL,
    recorded_at BIGINT NOT NULL,
    PRIMARY KEY (replica, seq)
);
",
)];

/// Any 64-bit number that other users of the database are unlikely to
/// lock: it orders hosts migrating the same database at once.
const MIGRATION_LOCK: i64 = 0x746f_6f6c_686f_7374;

/// Longest a transaction waits for a row lock before the call is `busy`.
const LOCK_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest a connection may sit inside a transaction doing nothing.
const IDLE_IN_TRANSACTION: Duration = Duration::from_secs(60);

/// Connection settings beyond the URL.
#[derive(Debug, Clone, Copy)]
pub struct PoolSettings {
    /// Connections this process keeps at most.
    pub max_connections: usize,
    /// How long an operation waits for a free connection before `busy`.
    pub wait: Duration,
    /// How long opening a connection may take before the database counts
    /// as unreachable.
    pub connect: Duration,
    /// Whether to bring an older schema up to date. Only a serving host
    /// does: an operator's command from a newer toolhost must not migrate
    /// the database under running replicas. Any host creates the schema in
    /// an empty database.
    pub upgrade_schema: bool,
    /// Whether to start although the database cannot be reached (a
    /// serving host: reads of sessions without a task need none). The
    /// schema is then checked on the first operation that reaches it.
    pub start_unreachable: bool,
}

impl Default for PoolSettings {
    fn default() -> PoolSettings {
        PoolSettings {
            max_connections: 16,
            wait: Duration::from_secs(2),
            connect: Duration::from_secs(3),
            upgrade_schema: false,
            start_unreachable: false,
        }
    }
}

/// A checkpoint of one replica's audit trail, as the database keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointRow {
    pub replica: String,
    pub seq: u64,
    pub head: String,
    /// The signed checkpoint line as the trail wrote it: `verify` checks
    /// its signature like the file's.
    pub line: String,
    /// `ed25519:<hex>` of the key that signed it.
    pub key_id: String,
    pub recorded_at: i64,
}

/// The PostgreSQL [`Store`].
pub struct PostgresStore {
    pool: Pool,
    /// Whether the last operation reached the database, so that losing and
    /// regaining it are each logged once.
    reachable: std::sync::Mutex<bool>,
    /// Each loss (with why) and each return, for whoever records them.
    changes: tokio::sync::broadcast::Sender<Result<(), String>>,
    /// Set once the schema is known to be this host's: no operation runs
    /// on tables that may not be there yet.
    schema: tokio::sync::OnceCell<()>,
    /// Held while the schema is checked.
    checking_schema: tokio::sync::Mutex<()>,
    upgrade_schema: bool,
}

impl PostgresStore {
    /// Connects, creates the schema or brings it up to date, and refuses a
    /// database whose schema is newer than this host knows.
    pub async fn connect(url: &str, settings: PoolSettings) -> Result<PostgresStore, StoreError> {
        let (url, root_cert) = take_tls_options(url);
        let mut config = tokio_postgres::Config::from_str(&url)
            .map_err(|e| StoreError::Database(format!("the database URL is invalid: {e}")))?;
        let manager_config = ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        };
        config.connect_timeout(settings.connect);
        // A replica that froze holding a task's row lock must not stall
        // every other replica's charges of that task: a lock waited for
        // longer than this is `busy`, a transaction left open this long is
        // ended by the server, and a vanished peer is noticed in a minute.
        let limits = format!(
            "-c lock_timeout={}ms -c idle_in_transaction_session_timeout={}ms",
            LOCK_TIMEOUT.as_millis(),
            IDLE_IN_TRANSACTION.as_millis()
        );
        let options = match config.get_options() {
            Some(given) => format!("{given} {limits}"),
            None => limits,
        };
        config.options(options);
        config.keepalives_idle(Duration::from_secs(30));
        if config.get_application_name().is_none() {
            config.application_name("toolhost");
        }
        // TLS when the URL asks for it (`sslmode=require`, `verify-ca` or
        // `verify-full`), always verifying the server's chain and name, against
        // `sslrootcert` if given, else the web's roots; otherwise plain, so
        // that a server's self-signed certificate cannot fail a connection
        // nobody asked to encrypt.
        let manager = if config.get_ssl_mode() == SslMode::Require {
            let tls = tokio_postgres_rustls::MakeRustlsConnect::new(tls_config(root_cert)?);
            Manager::from_config(config, tls, manager_config)
        } else {
            config.ssl_mode(SslMode::Disable);
            Manager::from_config(config, NoTls, manager_config)
        };
        let pool = Pool::builder(manager)
            .max_size(settings.max_connections)
            .wait_timeout(Some(settings.wait))
            .create_timeout(Some(settings.connect))
            .recycle_timeout(Some(settings.connect))
            .runtime(Runtime::Tokio1)
            .build()
            .map_err(|e| StoreError::Database(e.to_string()))?;
        let store = PostgresStore {
            pool,
            reachable: std::sync::Mutex::new(true),
            changes: tokio::sync::broadcast::Sender::new(16),
            schema: tokio::sync::OnceCell::new(),
            checking_schema: tokio::sync::Mutex::new(()),
            upgrade_schema: settings.upgrade_schema,
        };
        match store.ensure_schema().await {
            Ok(()) => {}
            Err(StoreError::Unavailable(why)) if settings.start_unreachable => {
                tracing::warn!(
                    "starting without the database ({why}): calls that need it are refused until it answers"
                );
            }
            Err(e) => return Err(e),
        }
        Ok(store)
    }

    /// The schema version the database is at.
    pub async fn schema_version(&self) -> Result<i64, StoreError> {
        let client = self.connection().await?;
        let row = client
            .query_opt("SELECT version FROM toolhost_schema", &[])
            .await
            .map_err(|e| self.failed(e))?;
        Ok(row.map_or(0, |r| r.get(0)))
    }

    async fn migrate(&self, upgrade: bool) -> Result<(), StoreError> {
        let mut client = self.connection().await?;
        let tx = client.transaction().await.map_err(|e| self.failed(e))?;
        let fail = |e: tokio_postgres::Error| self.failed(e);
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
            .await
            .map_err(fail)?;
        // Asked first rather than `IF NOT EXISTS`, whose notice the server
        // would send on every start.
        let exists: bool = tx
            .query_one("SELECT to_regclass('toolhost_schema') IS NOT NULL", &[])
            .await
            .map_err(fail)?
            .get(0);
        if !exists {
            tx.batch_execute(
                "CREATE TABLE toolhost_schema (
                     one     BOOLEAN PRIMARY KEY DEFAULT true CHECK (one),
                     version BIGINT NOT NULL
                 )",
            )
            .await
            .map_err(fail)?;
        }
        let found: i64 = tx
            .query_opt("SELECT version FROM toolhost_schema", &[])
            .await
            .map_err(fail)?
            .map_or(0, |r| r.get(0));
        if found > SCHEMA_VERSION {
            return Err(StoreError::SchemaTooNew {
                found,
                known: SCHEMA_VERSION,
            });
        }
        if found > 0 && found < SCHEMA_VERSION && !upgrade {
            return Err(StoreError::SchemaTooOld {
                found,
                known: SCHEMA_VERSION,
            });
        }
        for (version, sql) in MIGRATIONS.iter().filter(|(v, _)| *v > found) {
            tx.batch_execute(sql).await.map_err(fail)?;
            tx.execute(
                "INSERT INTO toolhost_schema (one, version) VALUES (true, $1)
                 ON CONFLICT (one) DO UPDATE SET version = excluded.version",
                &[version],
            )
            .await
            .map_err(fail)?;
            tracing::info!(version, "database schema migrated");
        }
        tx.commit().await.map_err(fail)
    }

    /// Creates or checks the schema, once per process.
    ///
    /// While one check runs, other operations fail at once rather than
    /// queue behind it: with the database away, each attempt may take the
    /// whole connect timeout.
    async fn ensure_schema(&self) -> Result<(), StoreError> {
        if self.schema.initialized() {
            return Ok(());
        }
        let Ok(_checking) = self.checking_schema.try_lock() else {
            return Err(StoreError::Unavailable(
                "the database's schema is being checked".into(),
            ));
        };
        if !self.schema.initialized() {
            self.migrate(self.upgrade_schema).await?;
            let _ = self.schema.set(());
        }
        Ok(())
    }

    /// A pooled connection on a schema this host knows, or why there is
    /// none.
    async fn client(&self) -> Result<Object, StoreError> {
        self.ensure_schema().await?;
        self.connection().await
    }

    /// A pooled connection, or why there is none.
    async fn connection(&self) -> Result<Object, StoreError> {
        match self.pool.get().await {
            Ok(client) => {
                self.set_reachable(Ok(()));
                Ok(client)
            }
            Err(PoolError::Timeout(TimeoutType::Wait)) => Err(StoreError::Busy(
                self.pool.timeouts().wait.unwrap_or_default(),
            )),
            Err(PoolError::Backend(e)) => Err(self.failed(e)),
            Err(e) => Err(self.unreachable(e.to_string())),
        }
    }

    /// Classifies a driver error. A server that shuts the connection down
    /// (SQLSTATE class 57: an administrator, a restart, a crash), reports a
    /// connection failure (08) or lacks resources (53, e.g. too many
    /// connections), or no answer at all, means the database is not there
    /// for now: retryable. Any other answer (a constraint, a bad statement)
    /// is a database error.
    ///
    /// A lock held longer than `lock_timeout` (55P03: another replica's
    /// transaction on the same task is stuck) is `busy`.
    fn failed(&self, e: tokio_postgres::Error) -> StoreError {
        if let Some(db) = e.as_db_error() {
            let code = db.code().code();
            let detail = format!("{code}: {}", db.message());
            return match &code[..2] {
                _ if code == "55P03" => StoreError::Busy(LOCK_TIMEOUT),
                "57" | "08" | "53" => self.unreachable(detail),
                _ => StoreError::Database(detail),
            };
        }
        // The driver's own errors: those about the connection mean the
        // database is not there; the rest (a row count, a conversion, a
        // failed TLS handshake, which is a certificate or a setting to
        // fix, not an outage to wait out) are errors.
        let text = e.to_string();
        let connection = e.is_closed()
            || [
                "error communicating",
                "error connecting",
                "timeout",
                "connection closed",
            ]
            .iter()
            .any(|start| text.starts_with(start));
        if connection {
            self.unreachable(text)
        } else {
            StoreError::Database(text)
        }
    }

    fn unreachable(&self, detail: String) -> StoreError {
        self.set_reachable(Err(detail.clone()));
        StoreError::Unavailable(detail)
    }

    /// Logs and announces a change of reachability, once per change.
    fn set_reachable(&self, now: Result<(), String>) {
        let mut reachable = self.reachable.lock().unwrap_or_else(|p| p.into_inner());
        if *reachable == now.is_ok() {
            return;
        }
        *reachable = now.is_ok();
        match &now {
            Ok(()) => tracing::warn!("the database is reachable again"),
            Err(detail) => tracing::error!("the database cannot be reached: {detail}"),
        }
        // Nobody listening (a CLI command) is fine.
        let _ = self.changes.send(now);
    }

    fn state_failed(&self, e: tokio_postgres::Error) -> StateError {
        StateError::Unavailable(self.failed(e).to_string())
    }

    /// Records a signed checkpoint of `replica`'s audit trail; the same
    /// checkpoint recorded twice is kept once.
    pub async fn record_checkpoint(&self, row: &CheckpointRow) -> Result<(), StoreError> {
        let client = self.client().await?;
        let seq = i64::try_from(row.seq).unwrap_or(i64::MAX);
        let inserted = client
            .execute(
                "INSERT INTO audit_checkpoint (replica, seq, head, line, key_id, recorded_at)
                 VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (replica, seq) DO NOTHING",
                &[
                    &row.replica,
                    &seq,
                    &row.head,
                    &row.line,
                    &row.key_id,
                    &row.recorded_at,
                ],
            )
            .await
            .map_err(|e| self.failed(e))?;
        if inserted == 1 {
            return Ok(());
        }
        // Already there: the same checkpoint copied twice is fine; another
        // one under the same name and seq is not.
        let kept: String = client
            .query_one(
                "SELECT head FROM audit_checkpoint WHERE replica = $1 AND seq = $2",
                &[&row.replica, &seq],
            )
            .await
            .map_err(|e| self.failed(e))?
            .get(0);
        if kept == row.head {
            Ok(())
        } else {
            Err(StoreError::CheckpointClash {
                replica: row.replica.clone(),
                seq: row.seq,
            })
        }
    }

    /// Every checkpoint the database holds, by replica and seq.
    pub async fn checkpoints(&self) -> Result<Vec<CheckpointRow>, StoreError> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT replica, seq, head, line, key_id, recorded_at
                 FROM audit_checkpoint ORDER BY replica, seq",
                &[],
            )
            .await
            .map_err(|e| self.failed(e))?;
        Ok(rows
            .iter()
            .map(|r| CheckpointRow {
                replica: r.get(0),
                seq: r.get::<_, i64>(1).max(0) as u64,
                head: r.get(2),
                line: r.get(3),
                key_id: r.get(4),
                recorded_at: r.get(5),
            })
            .collect())
    }

    /// Whether the last operation reached the database.
    pub fn reachable(&self) -> bool {
        *self.reachable.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Every change from here on: `Err` with why when the database is lost,
    /// `Ok` when it answers again.
    pub fn reachability(&self) -> tokio::sync::broadcast::Receiver<Result<(), String>> {
        self.changes.subscribe()
    }
}

/// Rustls with the web's root certificates and the ring provider the rest
/// of the host uses.
fn tls_config(root_cert: Option<String>) -> Result<tokio_rustls::rustls::ClientConfig, StoreError> {
    use tokio_rustls::rustls::pki_types::CertificateDer;
    use tokio_rustls::rustls::pki_types::pem::PemObject;
    let roots = match root_cert {
        None => tokio_rustls::rustls::RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
        },
        Some(path) => {
            let bad = |e: String| StoreError::Database(format!("sslrootcert {path}: {e}"));
            let mut roots = tokio_rustls::rustls::RootCertStore::empty();
            let certs = CertificateDer::pem_file_iter(&path).map_err(|e| bad(e.to_string()))?;
            for cert in certs {
                roots
                    .add(cert.map_err(|e| bad(e.to_string()))?)
                    .map_err(|e| bad(e.to_string()))?;
            }
            if roots.is_empty() {
                return Err(bad("holds no PEM certificate".into()));
            }
            roots
        }
    };
    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    Ok(
        tokio_rustls::rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("ring supports the default protocol versions")
            .with_root_certificates(roots)
            .with_no_client_auth(),
    )
}

/// Takes libpq's TLS options that the driver does not know out of a
/// `postgres://` URL: `sslrootcert=PATH` (returned) and `sslmode=verify-ca`
/// or `verify-full`, which become `require` (the host always verifies). A
/// CA given means TLS, unless `sslmode=disable` says otherwise.
fn take_tls_options(url: &str) -> (String, Option<String>) {
    let Some((base, query)) = url.split_once('?') else {
        return (url.to_string(), None);
    };
    let mut root_cert = None;
    let mut kept = Vec::new();
    for pair in query.split('&') {
        match pair.split_once('=') {
            Some(("sslrootcert", value)) => {
                root_cert = Some(
                    percent_encoding::percent_decode_str(value)
                        .decode_utf8_lossy()
                        .into_owned(),
                );
            }
            Some(("sslmode", "verify-ca" | "verify-full")) => kept.push("sslmode=require"),
            _ => kept.push(pair),
        }
    }
    if root_cert.is_some()
        && !kept
            .iter()
            .any(|p| p.starts_with("sslmode=") && *p != "sslmode=prefer")
    {
        kept.retain(|p| !p.starts_with("sslmode="));
        kept.push("sslmode=require");
    }
    if kept.is_empty() {
        (base.to_string(), root_cert)
    } else {
        (format!("{base}?{}", kept.join("&")), root_cert)
    }
}

const TASK_COLUMNS: &str = "id, purpose, opened_by, opened_at, expires_at, grants, pre_approved, \
     max_calls, writes_per_hour, calls_used, revoked_at, revoked_by, ad_hoc, operator_approval";
/// How many columns [`TASK_COLUMNS`] names.
const TASK_COLUMN_COUNT: usize = 14;

fn task_from_row(row: &Row) -> Result<Task, StoreError> {
    let list = |i: usize| -> Result<Vec<String>, StoreError> {
        serde_json::from_str(row.get::<_, &str>(i))
            .map_err(|e| StoreError::Database(format!("a task's tool list is not JSON: {e}")))
    };
    Ok(Task {
        id: row.get(0),
        purpose: row.get(1),
        opened_by: row.get(2),
        opened_at: row.get(3),
        expires_at: row.get(4),
        grants: list(5)?,
        pre_approved: list(6)?,
        max_calls: row.get::<_, Option<i64>>(7).map(|n| n.max(0) as u64),
        writes_per_hour: row
            .get::<_, Option<i64>>(8)
            .map(|n| u32::try_from(n).unwrap_or(u32::MAX)),
        calls_used: row.get::<_, i64>(9).max(0) as u64,
        revoked_at: row.get(10),
        revoked_by: row.get(11),
        ad_hoc: row.get(12),
        operator_approval: row.get(13),
    })
}

const APPROVAL_COLUMNS: &str = "id, task_id, tool, binding, arguments, summary, state, \
     requested_at, expires_at, decided_by, channel, decided_at, operator_only";

fn approval_from_row(row: &Row) -> Approval {
    let expires_at = row.get(8);
    Approval {
        id: row.get(0),
        task_id: row.get(1),
        tool: row.get(2),
        binding: row.get(3),
        arguments: serde_json::from_str(row.get::<_, &str>(4)).unwrap_or(serde_json::Value::Null),
        summary: row.get(5),
        state: ApprovalState::parse(row.get::<_, &str>(6)).at(expires_at, now()),
        requested_at: row.get(7),
        expires_at,
        decided_by: row.get(9),
        channel: row.get(10),
        decided_at: row.get(11),
        operator_only: row.get(12),
    }
}

/// The task, optionally taking its row lock for the rest of the transaction.
async fn load_task(
    store: &PostgresStore,
    client: &impl GenericClient,
    id: &str,
    lock: bool,
) -> Result<Option<Task>, StoreError> {
    let sql = if lock {
        format!("SELECT {TASK_COLUMNS} FROM task WHERE id = $1 FOR UPDATE")
    } else {
        format!("SELECT {TASK_COLUMNS} FROM task WHERE id = $1")
    };
    let statement = client
        .prepare_cached(&sql)
        .await
        .map_err(|e| store.failed(e))?;
    client
        .query_opt(&statement, &[&id])
        .await
        .map_err(|e| store.failed(e))?
        .as_ref()
        .map(task_from_row)
        .transpose()
}

async fn load_approval(
    store: &PostgresStore,
    client: &impl GenericClient,
    id: &str,
    lock: bool,
) -> Result<Option<Approval>, StoreError> {
    let sql = if lock {
        format!("SELECT {APPROVAL_COLUMNS} FROM approval WHERE id = $1 FOR UPDATE")
    } else {
        format!("SELECT {APPROVAL_COLUMNS} FROM approval WHERE id = $1")
    };
    let statement = client
        .prepare_cached(&sql)
        .await
        .map_err(|e| store.failed(e))?;
    Ok(client
        .query_opt(&statement, &[&id])
        .await
        .map_err(|e| store.failed(e))?
        .as_ref()
        .map(approval_from_row))
}

/// Takes `plugin`'s usage row (creating it), which orders the plugin's
/// state writes across replicas; returns the bytes it records.
async fn lock_usage(
    store: &PostgresStore,
    tx: &Transaction<'_>,
    plugin: &str,
) -> Result<i64, StateError> {
    let fail = |e| store.state_failed(e);
    tx.execute(
        "INSERT INTO plugin_usage (plugin, bytes) VALUES ($1, 0) ON CONFLICT (plugin) DO NOTHING",
        &[&plugin],
    )
    .await
    .map_err(fail)?;
    let row = tx
        .query_one(
            "SELECT bytes FROM plugin_usage WHERE plugin = $1 FOR UPDATE",
            &[&plugin],
        )
        .await
        .map_err(fail)?;
    Ok(row.get(0))
}

#[async_trait::async_trait]
impl Store for PostgresStore {
    async fn open_task(&self, new: NewTask) -> Result<(Task, TaskToken), StoreError> {
        let (token, record) = token::issue().map_err(|e| StoreError::Random(e.to_string()))?;
        let id = random_id("task")?;
        let at = now();
        let client = self.client().await?;
        client
            .execute(
                "INSERT INTO task (id, purpose, opened_by, opened_at, expires_at, grants,
                                   pre_approved, max_calls, writes_per_hour, token_id,
                                   token_sha256, operator_approval)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
                &[
                    &id,
                    &text(&new.purpose),
                    &text(&new.opened_by),
                    &at,
                    &at.saturating_add(ttl_secs(new.ttl)),
                    &json_list(&new.grants),
                    &json_list(&new.pre_approved),
                    &new.max_calls.map(|n| i64::try_from(n).unwrap_or(i64::MAX)),
                    &new.writes_per_hour.map(i64::from),
                    &record.id,
                    &record.secret_sha256,
                    &new.operator_approval,
                ],
            )
            .await
            .map_err(|e| self.failed(e))?;
        let task = load_task(self, &client, &id, false)
            .await?
            .ok_or_else(|| StoreError::NoTask(id.clone()))?;
        Ok((task, token))
    }

    async fn ad_hoc_task(
        &self,
        id: &str,
        grants: &[String],
        ttl: Duration,
    ) -> Result<Task, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(|e| self.failed(e))?;
        let at = now();
        let expires = at.saturating_add(ttl_secs(ttl));
        // A racing second `serve --task` with the same id waits here.
        tx.execute(
            "INSERT INTO task (id, purpose, opened_by, opened_at, expires_at, grants,
                               pre_approved, ad_hoc)
             VALUES ($1, 'ad-hoc task of toolhost serve --task', $2, $3, $4, $5, '[]', true)
             ON CONFLICT (id) DO NOTHING",
            &[&id, &operator(), &at, &expires, &json_list(grants)],
        )
        .await
        .map_err(|e| self.failed(e))?;
        let task = load_task(self, &tx, id, true)
            .await?
            .ok_or_else(|| StoreError::NoTask(id.to_string()))?;
        if !task.ad_hoc {
            return Err(StoreError::TaskExists(id.to_string()));
        }
        if task.revoked_at.is_some() {
            return Err(StoreError::TaskClosed {
                id: id.to_string(),
                state: TaskState::Revoked,
                what: "a revoked task cannot be served again",
            });
        }
        tx.execute(
            "UPDATE task SET grants = $2, expires_at = $3 WHERE id = $1",
            &[&id, &json_list(grants), &expires],
        )
        .await
        .map_err(|e| self.failed(e))?;
        let task = load_task(self, &tx, id, false)
            .await?
            .ok_or_else(|| StoreError::NoTask(id.to_string()))?;
        tx.commit().await.map_err(|e| self.failed(e))?;
        Ok(task)
    }

    async fn task(&self, id: &str) -> Result<Option<Task>, StoreError> {
        let client = self.client().await?;
        load_task(self, &client, id, false).await
    }

    async fn tasks(&self) -> Result<Vec<Task>, StoreError> {
        let client = self.client().await?;
        let rows = client
            .query(
                &format!("SELECT {TASK_COLUMNS} FROM task ORDER BY opened_at DESC, id"),
                &[],
            )
            .await
            .map_err(|e| self.failed(e))?;
        rows.iter().map(task_from_row).collect()
    }

    async fn revoke_task(&self, id: &str, by: &str) -> Result<Task, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(|e| self.failed(e))?;
        let changed = tx
            .execute(
                "UPDATE task SET revoked_at = $2, revoked_by = $3
                 WHERE id = $1 AND revoked_at IS NULL",
                &[&id, &now(), &text(by)],
            )
            .await
            .map_err(|e| self.failed(e))?;
        // Questions to a human about a task that is over would only mislead.
        tx.execute(
            "UPDATE approval SET state = 'expired', settled = true
             WHERE task_id = $1 AND state IN ('pending', 'approved')",
            &[&id],
        )
        .await
        .map_err(|e| self.failed(e))?;
        let task = load_task(self, &tx, id, false)
            .await?
            .ok_or_else(|| StoreError::NoTask(id.to_string()))?;
        tx.commit().await.map_err(|e| self.failed(e))?;
        if changed == 0 {
            tracing::info!(task = id, "task was already revoked");
        }
        Ok(task)
    }

    async fn extend_task(&self, id: &str, ttl: Duration, _by: &str) -> Result<Task, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(|e| self.failed(e))?;
        let task = load_task(self, &tx, id, true)
            .await?
            .ok_or_else(|| StoreError::NoTask(id.to_string()))?;
        if task.revoked_at.is_some() {
            return Err(StoreError::TaskClosed {
                id: id.to_string(),
                state: TaskState::Revoked,
                what: "a revoked task cannot be extended; open a new one",
            });
        }
        tx.execute(
            "UPDATE task SET expires_at = $2 WHERE id = $1",
            &[&id, &now().saturating_add(ttl_secs(ttl))],
        )
        .await
        .map_err(|e| self.failed(e))?;
        let task = load_task(self, &tx, id, false)
            .await?
            .ok_or_else(|| StoreError::NoTask(id.to_string()))?;
        tx.commit().await.map_err(|e| self.failed(e))?;
        Ok(task)
    }

    async fn authenticate(&self, presented: &str) -> Result<Option<Task>, StoreError> {
        let Some((token_id, secret)) = token::parse(presented) else {
            return Ok(None);
        };
        let client = self.client().await?;
        // One round trip: every HTTP request with a token asks this.
        let statement = client
            .prepare_cached(&format!(
                "SELECT {TASK_COLUMNS}, token_sha256 FROM task WHERE token_id = $1"
            ))
            .await
            .map_err(|e| self.failed(e))?;
        let Some(row) = client
            .query_opt(&statement, &[&token_id])
            .await
            .map_err(|e| self.failed(e))?
        else {
            return Ok(None);
        };
        let stored: Vec<u8> = row.get(TASK_COLUMN_COUNT);
        if !token::matches(secret, &stored) {
            return Ok(None);
        }
        task_from_row(&row).map(Some)
    }

    async fn charge(
        &self,
        task_id: &str,
        tool: &str,
        charge: Charge<'_>,
    ) -> Result<Result<Charged, ChargeRefusal>, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(|e| self.failed(e))?;
        let fail = |e| self.failed(e);
        // The task's row lock orders this charge after every other one of
        // the same task, on any replica; what follows reads their results.
        // The time is the database's, so that replicas whose clocks differ
        // still share one write window.
        let lock = tx
            .prepare_cached(&format!(
                "SELECT {TASK_COLUMNS}, extract(epoch FROM statement_timestamp())::BIGINT
                 FROM task WHERE id = $1 FOR UPDATE"
            ))
            .await
            .map_err(fail)?;
        let row = tx
            .query_opt(&lock, &[&task_id])
            .await
            .map_err(fail)?
            .ok_or_else(|| StoreError::NoTask(task_id.into()))?;
        let task = task_from_row(&row)?;
        let at: i64 = row.get(TASK_COLUMN_COUNT);
        let refusal = match task.state(at) {
            TaskState::Open => None,
            closed => Some(ChargeRefusal::Closed(closed)),
        };
        let writes = charge != Charge::Read;
        let refusal =
            refusal.or_else(|| (writes && !task.grants(tool)).then_some(ChargeRefusal::NotGranted));
        let refusal = refusal.or_else(|| {
            task.max_calls
                .filter(|&max| task.calls_used >= max)
                .map(|max_calls| ChargeRefusal::CallsExhausted { max_calls })
        });
        if let Some(refusal) = refusal {
            return Ok(Err(refusal));
        }
        if writes {
            let forget = tx
                .prepare_cached("DELETE FROM task_write WHERE task_id = $1 AND at <= $2")
                .await
                .map_err(fail)?;
            tx.execute(&forget, &[&task_id, &(at - 3600)])
                .await
                .map_err(fail)?;
            if let Some(per_hour) = task.writes_per_hour {
                let count = tx
                    .prepare_cached("SELECT count(*) FROM task_write WHERE task_id = $1")
                    .await
                    .map_err(fail)?;
                let recent: i64 = tx
                    .query_one(&count, &[&task_id])
                    .await
                    .map_err(fail)?
                    .get(0);
                if recent >= i64::from(per_hour) {
                    return Ok(Err(ChargeRefusal::WriteRateExhausted { per_hour }));
                }
            }
            let insert = tx
                .prepare_cached("INSERT INTO task_write (task_id, at) VALUES ($1, $2)")
                .await
                .map_err(fail)?;
            tx.execute(&insert, &[&task_id, &at]).await.map_err(fail)?;
        }
        let mut approval = None;
        if let Charge::Destructive { binding } = charge
            && !task.pre_approves(tool)
        {
            let used = tx
                .query_opt(
                    "UPDATE approval SET state = 'used', settled = true
                     WHERE id = (SELECT id FROM approval
                                 WHERE task_id = $1 AND binding = $2 AND state = 'approved'
                                   AND NOT settled AND expires_at > $3
                                 ORDER BY requested_at LIMIT 1)
                       AND state = 'approved' AND NOT settled
                     RETURNING id",
                    &[&task_id, &binding, &at],
                )
                .await
                .map_err(fail)?;
            let Some(used) = used else {
                return Ok(Err(ChargeRefusal::ApprovalMissing));
            };
            approval = Some(used.get(0));
        }
        let spend = tx
            .prepare_cached(&format!(
                "UPDATE task SET calls_used = calls_used + 1 WHERE id = $1 RETURNING {TASK_COLUMNS}"
            ))
            .await
            .map_err(fail)?;
        let task = task_from_row(&tx.query_one(&spend, &[&task_id]).await.map_err(fail)?)?;
        tx.commit().await.map_err(fail)?;
        Ok(Ok(Charged { task, approval }))
    }

    async fn request_approval(&self, request: ApprovalRequest) -> Result<Approval, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(|e| self.failed(e))?;
        let fail = |e| self.failed(e);
        let at = now();
        // The same call asked on two replicas at once must make one
        // question, and the pending cap must hold: both under the task's lock.
        load_task(self, &tx, &request.task_id, true)
            .await?
            .ok_or_else(|| StoreError::NoTask(request.task_id.clone()))?;
        let existing = tx
            .query_opt(
                "SELECT id FROM approval
                 WHERE task_id = $1 AND binding = $2 AND NOT settled AND expires_at > $3
                   AND state IN ('pending', 'approved')
                 ORDER BY requested_at DESC LIMIT 1",
                &[&request.task_id, &request.binding, &at],
            )
            .await
            .map_err(fail)?;
        let id: String = match existing {
            Some(row) => row.get(0),
            None => {
                let waiting: i64 = tx
                    .query_one(
                        "SELECT count(*) FROM approval
                         WHERE task_id = $1 AND state = 'pending' AND expires_at > $2",
                        &[&request.task_id, &at],
                    )
                    .await
                    .map_err(fail)?
                    .get(0);
                let waiting = usize::try_from(waiting).unwrap_or(usize::MAX);
                if waiting >= MAX_PENDING_PER_TASK {
                    return Err(StoreError::TooManyPending(request.task_id, waiting));
                }
                let id = random_id("ap")?;
                tx.execute(
                    "INSERT INTO approval (id, task_id, tool, binding, arguments, summary, state,
                                           requested_at, expires_at, operator_only)
                     VALUES ($1, $2, $3, $4, $5, $6, 'pending', $7, $8, $9)",
                    &[
                        &id,
                        &request.task_id,
                        &request.tool,
                        &request.binding,
                        &request.arguments.to_string(),
                        &text(&request.summary),
                        &at,
                        &at.saturating_add(ttl_secs(request.ttl)),
                        &request.operator_only,
                    ],
                )
                .await
                .map_err(fail)?;
                id
            }
        };
        let approval = load_approval(self, &tx, &id, false)
            .await?
            .ok_or(StoreError::NoApproval(id))?;
        tx.commit().await.map_err(fail)?;
        Ok(approval)
    }

    async fn decide(
        &self,
        id: &str,
        decision: Decision,
        by: &str,
        channel: &str,
    ) -> Result<Approval, StoreError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(|e| self.failed(e))?;
        // Two people deciding at once on two replicas: the second waits for
        // the first's row and then finds it decided.
        let approval = load_approval(self, &tx, id, true)
            .await?
            .ok_or_else(|| StoreError::NoApproval(id.into()))?;
        if approval.state != ApprovalState::Pending {
            return Err(StoreError::AlreadyDecided {
                id: id.into(),
                state: approval.state,
            });
        }
        let at = now();
        let (state, expires_at) = match decision {
            Decision::Approve => ("approved", at + APPROVED_FOR_SECS),
            Decision::Deny => ("denied", approval.expires_at),
        };
        tx.execute(
            "UPDATE approval SET state = $2, expires_at = $3, decided_at = $4, decided_by = $5,
                                 channel = $6
             WHERE id = $1",
            &[&id, &state, &expires_at, &at, &text(by), &text(channel)],
        )
        .await
        .map_err(|e| self.failed(e))?;
        let approval = load_approval(self, &tx, id, false)
            .await?
            .ok_or_else(|| StoreError::NoApproval(id.into()))?;
        tx.commit().await.map_err(|e| self.failed(e))?;
        Ok(approval)
    }

    async fn take_denial(
        &self,
        task_id: &str,
        binding: &str,
    ) -> Result<Option<Approval>, StoreError> {
        let client = self.client().await?;
        // One statement: of two replicas taking the same denial, the second
        // re-checks `settled` after the first commits and takes nothing.
        let taken = client
            .query_opt(
                "UPDATE approval SET settled = true
                 WHERE id = (SELECT id FROM approval
                             WHERE task_id = $1 AND binding = $2 AND state = 'denied'
                               AND NOT settled
                             ORDER BY requested_at DESC LIMIT 1)
                   AND NOT settled
                 RETURNING id",
                &[&task_id, &binding],
            )
            .await
            .map_err(|e| self.failed(e))?;
        match taken {
            Some(row) => load_approval(self, &client, row.get(0), false).await,
            None => Ok(None),
        }
    }

    async fn approval(&self, id: &str) -> Result<Option<Approval>, StoreError> {
        let client = self.client().await?;
        load_approval(self, &client, id, false).await
    }

    async fn approvals(&self, pending_only: bool) -> Result<Vec<Approval>, StoreError> {
        let filter = if pending_only {
            "WHERE state = 'pending' AND expires_at > $1"
        } else {
            "WHERE $1::BIGINT IS NOT NULL"
        };
        let client = self.client().await?;
        let rows = client
            .query(
                &format!(
                    "SELECT {APPROVAL_COLUMNS} FROM approval {filter} ORDER BY requested_at DESC, id"
                ),
                &[&now()],
            )
            .await
            .map_err(|e| self.failed(e))?;
        Ok(rows.iter().map(approval_from_row).collect())
    }

    async fn state_get(&self, plugin: &str, key: &str) -> Result<Option<String>, StateError> {
        if !valid_state_key(key) {
            return Err(StateError::InvalidKey);
        }
        let client = self.client().await.map_err(state_unavailable)?;
        let statement = client
            .prepare_cached("SELECT value FROM plugin_state WHERE plugin = $1 AND key = $2")
            .await
            .map_err(|e| self.state_failed(e))?;
        client
            .query_opt(&statement, &[&plugin, &key])
            .await
            .map_err(|e| self.state_failed(e))?
            .map(|r| utf8(r.get(0)))
            .transpose()
    }

    async fn state_set(
        &self,
        plugin: &str,
        key: &str,
        value: &str,
        quota: u64,
    ) -> Result<(), StateError> {
        self.write_state(plugin, key, None, value, quota)
            .await
            .map(|_| ())
    }

    async fn state_compare_and_set(
        &self,
        plugin: &str,
        key: &str,
        expected: Option<&str>,
        value: &str,
        quota: u64,
    ) -> Result<bool, StateError> {
        self.write_state(plugin, key, Some(expected), value, quota)
            .await
    }

    async fn state_delete(&self, plugin: &str, key: &str) -> Result<bool, StateError> {
        if !valid_state_key(key) {
            return Err(StateError::InvalidKey);
        }
        let mut client = self.client().await.map_err(state_unavailable)?;
        let tx = client
            .transaction()
            .await
            .map_err(|e| self.state_failed(e))?;
        let fail = |e| self.state_failed(e);
        lock_usage(self, &tx, plugin).await?;
        let freed = tx
            .query_opt(
                "DELETE FROM plugin_state WHERE plugin = $1 AND key = $2
                 RETURNING (octet_length(key) + octet_length(value))::BIGINT",
                &[&plugin, &key],
            )
            .await
            .map_err(fail)?
            .map(|r| r.get::<_, i64>(0));
        if let Some(freed) = freed {
            tx.execute(
                "UPDATE plugin_usage SET bytes = greatest(bytes - $2, 0) WHERE plugin = $1",
                &[&plugin, &freed],
            )
            .await
            .map_err(fail)?;
        }
        tx.commit().await.map_err(fail)?;
        Ok(freed.is_some())
    }

    async fn state_list(&self, plugin: &str, prefix: &str) -> Result<Vec<String>, StateError> {
        let client = self.client().await.map_err(state_unavailable)?;
        // A range scan in byte order (the column's collation) rather than
        // LIKE, which would treat `%` and `_` in the prefix as wildcards.
        let rows = client
            .query(
                "SELECT key FROM plugin_state
                 WHERE plugin = $1 AND key >= $2 AND starts_with(key, $2)
                 ORDER BY key",
                &[&plugin, &prefix],
            )
            .await
            .map_err(|e| self.state_failed(e))?;
        Ok(rows
            .iter()
            .map(|r| r.get::<_, String>(0))
            .take_while(|key| key.starts_with(prefix))
            .collect())
    }

    async fn state_rename(
        &self,
        plugin: &str,
        from: &str,
        to: &str,
        _by: &str,
    ) -> Result<(), StoreError> {
        if !valid_state_key(to) {
            return Err(StoreError::InvalidKey(to.into()));
        }
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(|e| self.failed(e))?;
        let fail = |e| self.failed(e);
        tx.execute(
            "INSERT INTO plugin_usage (plugin, bytes) VALUES ($1, 0) ON CONFLICT (plugin) DO NOTHING",
            &[&plugin],
        )
        .await
        .map_err(fail)?;
        tx.execute(
            "SELECT 1 FROM plugin_usage WHERE plugin = $1 FOR UPDATE",
            &[&plugin],
        )
        .await
        .map_err(fail)?;
        let taken = tx
            .query_opt(
                "SELECT 1 FROM plugin_state WHERE plugin = $1 AND key = $2",
                &[&plugin, &to],
            )
            .await
            .map_err(fail)?;
        if taken.is_some() {
            return Err(StoreError::KeyExists(to.into()));
        }
        let moved = tx
            .execute(
                "UPDATE plugin_state SET key = $3 WHERE plugin = $1 AND key = $2",
                &[&plugin, &from, &to],
            )
            .await
            .map_err(fail)?;
        if moved == 0 {
            return Err(StoreError::NoKey(from.into()));
        }
        // An operator's move may take the plugin past its quota; the
        // plugin's next write then fails, which is the operator's call.
        let grown = to.len() as i64 - from.len() as i64;
        tx.execute(
            "UPDATE plugin_usage SET bytes = greatest(bytes + $2, 0) WHERE plugin = $1",
            &[&plugin, &grown],
        )
        .await
        .map_err(fail)?;
        tx.commit().await.map_err(fail)
    }
}

impl PostgresStore {
    /// `set` is a compare-and-set that does not compare (`expected` = None).
    async fn write_state(
        &self,
        plugin: &str,
        key: &str,
        expected: Option<Option<&str>>,
        value: &str,
        quota: u64,
    ) -> Result<bool, StateError> {
        if !valid_state_key(key) {
            return Err(StateError::InvalidKey);
        }
        let mut client = self.client().await.map_err(state_unavailable)?;
        let tx = client
            .transaction()
            .await
            .map_err(|e| self.state_failed(e))?;
        let fail = |e| self.state_failed(e);
        let used = lock_usage(self, &tx, plugin).await?;
        let current: Option<String> = tx
            .query_opt(
                "SELECT value FROM plugin_state WHERE plugin = $1 AND key = $2",
                &[&plugin, &key],
            )
            .await
            .map_err(fail)?
            .map(|r| utf8(r.get(0)))
            .transpose()?;
        if let Some(expected) = expected
            && expected != current.as_deref()
        {
            return Ok(false);
        }
        let freed = current.as_ref().map_or(0, |v| key.len() + v.len()) as u64;
        let after = (used.max(0) as u64).saturating_sub(freed) + (key.len() + value.len()) as u64;
        if after > quota {
            return Err(StateError::QuotaExceeded);
        }
        tx.execute(
            "INSERT INTO plugin_state (plugin, key, value) VALUES ($1, $2, $3)
             ON CONFLICT (plugin, key) DO UPDATE SET value = excluded.value",
            &[&plugin, &key, &value.as_bytes()],
        )
        .await
        .map_err(fail)?;
        tx.execute(
            "UPDATE plugin_usage SET bytes = $2 WHERE plugin = $1",
            &[&plugin, &i64::try_from(after).unwrap_or(i64::MAX)],
        )
        .await
        .map_err(fail)?;
        tx.commit().await.map_err(fail)?;
        Ok(true)
    }
}

/// Text for a TEXT column, which cannot hold a NUL (SQLite's can): a
/// purpose, summary or name carrying one keeps a visible stand-in.
fn text(s: &str) -> std::borrow::Cow<'_, str> {
    if s.contains('\0') {
        s.replace('\0', "\u{fffd}").into()
    } else {
        s.into()
    }
}

/// A stored value: the host wrote it from a string, so it is UTF-8 unless
/// the database was edited by hand.
fn utf8(bytes: Vec<u8>) -> Result<String, StateError> {
    String::from_utf8(bytes)
        .map_err(|_| StateError::Unavailable("a stored value is not UTF-8".into()))
}

fn state_unavailable(e: StoreError) -> StateError {
    StateError::Unavailable(e.to_string())
}

#[cfg(test)]
mod tests {
    #[test]
    fn libpq_tls_options_are_taken_out_of_the_url() {
        assert_eq!(
            super::take_tls_options(
                "postgres://u@db/x?sslmode=verify-full&sslrootcert=%2Fetc%2Fca.pem&application_name=a"
            ),
            (
                "postgres://u@db/x?sslmode=require&application_name=a".to_string(),
                Some("/etc/ca.pem".to_string())
            )
        );
        assert_eq!(
            super::take_tls_options("postgres://u@db/x"),
            ("postgres://u@db/x".to_string(), None)
        );
        assert_eq!(
            super::take_tls_options("postgres://u@db/x?sslrootcert=ca.pem"),
            (
                "postgres://u@db/x?sslmode=require".to_string(),
                Some("ca.pem".to_string())
            )
        );
        assert_eq!(
            super::take_tls_options("postgres://u@db/x?sslmode=disable&sslrootcert=ca.pem").0,
            "postgres://u@db/x?sslmode=disable"
        );
    }

    #[test]
    fn the_column_count_matches_the_columns() {
        assert_eq!(
            super::TASK_COLUMNS.split(',').count(),
            super::TASK_COLUMN_COUNT
        );
    }
}
