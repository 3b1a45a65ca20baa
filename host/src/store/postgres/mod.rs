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
//!
//! The rooms: `schema` (the migrations), `tls` (what the URL asks of TLS),
//! `rows` (columns, row mapping, the locks operations take) and
//! `operations` (the [`Store`] methods themselves).

mod operations;
mod rows;
mod schema;
mod tls;

use std::str::FromStr;
use std::time::Duration;

use deadpool_postgres::{
    Manager, ManagerConfig, Object, Pool, PoolError, RecyclingMethod, Runtime, TimeoutType,
};
use tokio_postgres::NoTls;
use tokio_postgres::config::SslMode;

use super::{StateError, StoreError};
pub use schema::SCHEMA_VERSION;
use schema::{MIGRATION_LOCK, MIGRATIONS};
use tls::{take_tls_options, tls_config};

/// Longest a transaction waits for a row lock before the call is `busy`.
const LOCK_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest the server may leave what it is sent unacknowledged before its
/// connection counts as lost (unless the URL sets `tcp_user_timeout`).
const UNACKNOWLEDGED: Duration = Duration::from_secs(10);
/// Longest a connection may sit inside a transaction doing nothing.
const IDLE_IN_TRANSACTION: Duration = Duration::from_secs(60);
/// Longest one operation may wait for the database. A server that hangs
/// without closing anything (its processes stopped, stuck on a disk, a
/// commit waiting for a standby that is gone) still has its kernel
/// acknowledge every byte, so neither `TCP_USER_TIMEOUT` nor keepalives
/// notice, and a task-bound call would wait for ever. Well above what a
/// working database takes at worst: a free connection (2 s) or a new one
/// (3 s), then a lock (5 s).
const ANSWER_WITHIN: Duration = Duration::from_secs(15);
/// The same bound for what may take long on a working database: listings
/// of tables that only grow (tasks, approvals, accounts, every checkpoint
/// for `audit verify --against-db`) and bringing the schema up to date.
const LISTING_WITHIN: Duration = Duration::from_secs(300);

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
        // A peer that vanished after taking what it was sent (a query it
        // froze on) is noticed by keepalives: after 30 s of silence, three
        // probes 5 s apart.
        config.keepalives_idle(Duration::from_secs(30));
        if config.get_keepalives_interval().is_none() {
            config.keepalives_interval(Duration::from_secs(5));
        }
        if config.get_keepalives_retries().is_none() {
            config.keepalives_retries(3);
        }
        // A server that vanished without closing its connections (a cut
        // network, a frozen machine) would otherwise hold a query for as
        // long as TCP retransmits, about 15 minutes: data it has not
        // acknowledged for this long ends the connection, and the store is
        // unavailable (retryable) instead. A slow query is not cut: the
        // server still acknowledges what it is sent. (A URL's
        // `tcp_user_timeout` is in seconds, and 0 does not switch it off.)
        if config.get_tcp_user_timeout().is_none() {
            config.tcp_user_timeout(UNACKNOWLEDGED);
        }
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
        // Bounded, with a migration's longer bound: a server that hangs must
        // not hang a start (a serving host then starts without it, below).
        match store.listed(store.ensure_schema()).await {
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
        self.answered(async {
            let client = self.connection().await?;
            let row = client
                .query_opt("SELECT version FROM toolhost_schema", &[])
                .await
                .map_err(|e| self.failed(e))?;
            Ok(row.map_or(0, |r| r.get(0)))
        })
        .await
    }

    /// Runs one operation, for at most [`ANSWER_WITHIN`]. One that takes
    /// longer is dropped, as if its connection had been cut at that moment,
    /// and its caller learns that the database is unavailable, which is
    /// retryable. As with a cut connection, the caller cannot tell whether
    /// what it had sent took effect: the server carries out what it
    /// received once it runs again, in order (a transaction without its
    /// `COMMIT` is rolled back, as the driver queues a `ROLLBACK` when one
    /// is dropped; one whose `COMMIT` was sent may have committed). So a
    /// call retried after that may be charged twice, and a decision or a
    /// revocation retried may find itself already made. A call is charged
    /// before its plugin runs, so a charge may stand without a result,
    /// never a result without a charge.
    ///
    /// The connections then idle in the pool are closed: the one the
    /// operation held still waits for its answer, and the others would
    /// most likely wait behind the same server.
    async fn answered<T, E: From<StoreError>>(
        &self,
        operation: impl Future<Output = Result<T, E>>,
    ) -> Result<T, E> {
        self.within(ANSWER_WITHIN, operation).await
    }

    /// [`Self::answered`] for a listing or a migration: [`LISTING_WITHIN`].
    async fn listed<T, E: From<StoreError>>(
        &self,
        operation: impl Future<Output = Result<T, E>>,
    ) -> Result<T, E> {
        self.within(LISTING_WITHIN, operation).await
    }

    async fn within<T, E: From<StoreError>>(
        &self,
        limit: Duration,
        operation: impl Future<Output = Result<T, E>>,
    ) -> Result<T, E> {
        match tokio::time::timeout(limit, operation).await {
            Ok(outcome) => {
                if outcome.is_ok() {
                    self.set_reachable(Ok(()));
                }
                outcome
            }
            Err(_) => {
                let closed = self.pool.retain(|_, _| false).removed.len();
                Err(E::from(self.unreachable(format!(
                    "no answer within {} s; {closed} idle connections closed",
                    limit.as_secs()
                ))))
            }
        }
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

    /// A pooled connection, or why there is none. Having one says little
    /// (a pooled connection is handed out without a round trip), so the
    /// database counts as reachable again only once an operation succeeds
    /// ([`Self::answered`]).
    async fn connection(&self) -> Result<Object, StoreError> {
        match self.pool.get().await {
            Ok(client) => Ok(client),
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
        self.answered(async {
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
        })
        .await
    }

    /// Every checkpoint the database holds, by replica and seq.
    pub async fn checkpoints(&self) -> Result<Vec<CheckpointRow>, StoreError> {
        self.listed(async {
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
        })
        .await
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
