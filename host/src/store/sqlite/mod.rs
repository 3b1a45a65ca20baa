//! The embedded backend: one SQLite database, `state_dir/toolhost.db`.
//!
//! WAL journal with `synchronous = NORMAL`: a committed transaction survives
//! the host being killed at any point (the WAL is in the OS's hands once the
//! commit returns), and the database is never left corrupt. A power cut (not
//! a crash) may lose the last commits: charges, but also a revocation or an
//! approval's use made in the last moments. Several
//! processes (the serving host, `toolhost task …` commands) share the file;
//! SQLite's locks order their writes, and an operation that finds another
//! process's write lock waits for it, for at most [`BUSY_WAIT`].
//!
//! Once open, no operation holds a runtime thread while it waits, for
//! another process's lock, for the connection or for a checkpoint: `conn`
//! is how operations share the one connection, `checkpoint` how the WAL is
//! checkpointed off the calls. Otherwise every call queued on a stalled
//! thread, reads included, would stop with it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

mod checkpoint;
mod conn;
mod rows;
mod schema;

pub(super) use self::conn::BUSY_WAIT;
use self::conn::Shared;
use self::rows::{
    ACCOUNT_COLUMNS, APPROVAL_COLUMNS, TASK_COLUMNS, account_from_row, approval_from_row,
    load_approval, load_task, task_from_row,
};
use self::schema::migrate;
use super::accounts::{SEEN_EVERY_SECS, STALE_SIGN_IN_SECS};
use super::token::{self, TaskToken};
use super::{
    Account, Approval, ApprovalRequest, Charge, ChargeRefusal, Charged, Decision,
    MAX_PENDING_PER_TASK, NewTask, Role, SignIn, SignInLimits, StateError, Store, StoreError, Task,
    UnixSecs, json_list, now, operator, random_id, ttl_secs, usage_after, valid_state_key,
};

/// The file name inside `state_dir`.
pub const DATABASE_FILE: &str = "toolhost.db";

/// The SQLite [`Store`].
pub struct SqliteStore {
    path: PathBuf,
    // One connection: statements are short, and one writer per process is
    // what SQLite wants anyway.
    conn: Shared,
}

impl SqliteStore {
    /// Opens (creating if needed) the database in `state_dir`, which is
    /// created 0700; the database file is made 0600.
    pub fn open(state_dir: &Path) -> Result<SqliteStore, StoreError> {
        let path = state_dir.join(DATABASE_FILE);
        let fail = |cause: String| StoreError::Open {
            path: path.clone(),
            cause,
        };
        create_private_dir(state_dir).map_err(|e| fail(e.to_string()))?;
        let mut conn = Connection::open(&path).map_err(|e| fail(e.to_string()))?;
        restrict_file(&path).map_err(|e| fail(e.to_string()))?;
        // Opening, before anything is served, may wait on its thread.
        let setup = |conn: &mut Connection| -> rusqlite::Result<()> {
            conn.busy_timeout(BUSY_WAIT)?;
            conn.pragma_update(None, "journal_mode", "WAL")?;
            conn.pragma_update(None, "synchronous", "NORMAL")?;
            conn.pragma_update(None, "foreign_keys", "ON")
        };
        setup(&mut conn).map_err(|e| fail(e.to_string()))?;
        migrate(&mut conn).map_err(fail)?;
        // From here on, every operation waits in `Shared::run` instead, and
        // checkpoints are made on a thread of their own (`Shared::new`).
        let conn = Shared::new(conn, &path).map_err(|e| fail(e.to_string()))?;
        Ok(SqliteStore { path, conn })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `PRAGMA integrity_check`: "ok" or the problems found.
    pub async fn integrity_check(&self) -> Result<String, StoreError> {
        self.conn
            .run(|conn| -> Result<_, StoreError> {
                Ok(conn.query_row("PRAGMA integrity_check", [], |r| r.get(0))?)
            })
            .await
    }
}

fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
    }
    #[cfg(not(unix))]
    std::fs::create_dir_all(dir)
}

fn restrict_file(path: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        Ok(())
    }
}

fn unavailable(e: rusqlite::Error) -> StateError {
    StateError::Unavailable(e.to_string())
}

#[async_trait::async_trait]
impl Store for SqliteStore {
    async fn open_task(&self, new: NewTask) -> Result<(Task, TaskToken), StoreError> {
        let (token, record) = token::issue().map_err(|e| StoreError::Random(e.to_string()))?;
        let id = random_id("task")?;
        let at = now();
        let task = self
            .conn
            .run(|conn| -> Result<_, StoreError> {
                // One transaction, so that a try that fails after the
                // insert leaves nothing for the next try to collide with.
                let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
                tx.execute(
            "INSERT INTO task (id, purpose, opened_by, opened_at, expires_at, grants, pre_approved,
                               max_calls, writes_per_hour, token_id, token_sha256,
                               operator_approval, approve_in_client)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
            params![
                id,
                new.purpose,
                new.opened_by,
                at,
                at.saturating_add(ttl_secs(new.ttl)),
                json_list(&new.grants),
                json_list(&new.pre_approved),
                new.max_calls.map(|n| n as i64),
                new.writes_per_hour.map(i64::from),
                record.id,
                record.secret_sha256,
                new.operator_approval,
                new.approve_in_client,
            ],
        )?;
                let task = load_task(&tx, &id)?.ok_or_else(|| StoreError::NoTask(id.clone()))?;
                tx.commit()?;
                Ok(task)
            })
            .await?;
        Ok((task, token))
    }

    async fn ad_hoc_task(
        &self,
        id: &str,
        grants: &[String],
        ttl: Duration,
    ) -> Result<Task, StoreError> {
        self.conn
            .run(|conn| -> Result<_, StoreError> {
                let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
                let at = now();
                match load_task(&tx, id)? {
                    Some(task) if !task.ad_hoc => {
                        return Err(StoreError::TaskExists(id.to_string()));
                    }
                    Some(task) if task.revoked_at.is_some() => {
                        return Err(StoreError::revoked_not_served(id));
                    }
                    Some(_) => {
                        tx.execute(
                            "UPDATE task SET grants = ?2, expires_at = ?3 WHERE id = ?1",
                            params![id, json_list(grants), at.saturating_add(ttl_secs(ttl))],
                        )?;
                    }
                    None => {
                        tx.execute(
                        "INSERT INTO task (id, purpose, opened_by, opened_at, expires_at, grants,
                                       pre_approved, ad_hoc)
                     VALUES (?1, 'ad-hoc task of toolhost serve --task', ?2, ?3, ?4, ?5, '[]', 1)",
                        params![
                            id,
                            operator(),
                            at,
                            at.saturating_add(ttl_secs(ttl)),
                            json_list(grants)
                        ],
                    )?;
                    }
                }
                let task = load_task(&tx, id)?.ok_or_else(|| StoreError::NoTask(id.to_string()))?;
                tx.commit()?;
                Ok(task)
            })
            .await
    }

    async fn task(&self, id: &str) -> Result<Option<Task>, StoreError> {
        self.conn.run(|conn| Ok(load_task(conn, id)?)).await
    }

    async fn tasks(&self) -> Result<Vec<Task>, StoreError> {
        self.conn
            .run(|conn| -> Result<_, StoreError> {
                let mut stmt = conn.prepare(&format!(
                    "SELECT {TASK_COLUMNS} FROM task ORDER BY opened_at DESC, id"
                ))?;
                let rows = stmt.query_map([], task_from_row)?;
                Ok(rows.collect::<Result<_, _>>()?)
            })
            .await
    }

    async fn recent_tasks(&self, ended: u32) -> Result<Vec<Task>, StoreError> {
        self.conn
            .run(move |conn| -> Result<_, StoreError> {
                let mut stmt = conn.prepare(&format!(
                    "SELECT {TASK_COLUMNS} FROM task WHERE revoked_at IS NULL AND expires_at > ?1 \
                     UNION ALL SELECT * FROM (SELECT {TASK_COLUMNS} FROM task \
                       WHERE revoked_at IS NOT NULL OR expires_at <= ?1 \
                       ORDER BY opened_at DESC, id LIMIT ?2) AS ended \
                     ORDER BY opened_at DESC, id"
                ))?;
                let rows = stmt.query_map(params![now(), i64::from(ended)], task_from_row)?;
                Ok(rows.collect::<Result<_, _>>()?)
            })
            .await
    }

    async fn revoke_task(&self, id: &str, by: &str) -> Result<Task, StoreError> {
        self.conn
            .run(|conn| -> Result<_, StoreError> {
                let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
                let changed = tx.execute(
            "UPDATE task SET revoked_at = ?2, revoked_by = ?3 WHERE id = ?1 AND revoked_at IS NULL",
            params![id, now(), by],
        )?;
                // Questions to a human about a task that is over would only mislead.
                tx.execute(
                    "UPDATE approval SET state = 'expired', settled = 1
             WHERE task_id = ?1 AND state IN ('pending', 'approved')",
                    [id],
                )?;
                let task = load_task(&tx, id)?.ok_or_else(|| StoreError::NoTask(id.to_string()))?;
                tx.commit()?;
                if changed == 0 {
                    tracing::info!(task = id, "task was already revoked");
                }
                Ok(task)
            })
            .await
    }

    async fn extend_task(&self, id: &str, ttl: Duration, _by: &str) -> Result<Task, StoreError> {
        self.conn
            .run(|conn| -> Result<_, StoreError> {
                let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
                let task = load_task(&tx, id)?.ok_or_else(|| StoreError::NoTask(id.to_string()))?;
                if task.revoked_at.is_some() {
                    return Err(StoreError::revoked_not_extended(id));
                }
                tx.execute(
                    "UPDATE task SET expires_at = ?2 WHERE id = ?1",
                    params![id, now().saturating_add(ttl_secs(ttl))],
                )?;
                let task = load_task(&tx, id)?.ok_or_else(|| StoreError::NoTask(id.to_string()))?;
                tx.commit()?;
                Ok(task)
            })
            .await
    }

    async fn authenticate(&self, presented: &str) -> Result<Option<Task>, StoreError> {
        let Some((token_id, secret)) = token::parse(presented) else {
            return Ok(None);
        };
        self.conn
            .run(|conn| -> Result<_, StoreError> {
                let row: Option<(String, Vec<u8>)> = conn
                    .query_row(
                        "SELECT id, token_sha256 FROM task WHERE token_id = ?1",
                        [token_id],
                        |r| Ok((r.get(0)?, r.get(1)?)),
                    )
                    .optional()?;
                let Some((task_id, stored)) = row else {
                    return Ok(None);
                };
                if !token::matches(secret, &stored) {
                    return Ok(None);
                }
                Ok(load_task(conn, &task_id)?)
            })
            .await
    }

    async fn charge(
        &self,
        task_id: &str,
        tool: &str,
        charge: Charge<'_>,
    ) -> Result<Result<Charged, ChargeRefusal>, StoreError> {
        self.conn
            .run(|conn| -> Result<_, StoreError> {
                if charge == Charge::Read {
                    // The statement's own transaction holds the write lock from the
                    // check to the charge. This spares a task-bound read the
                    // `BEGIN`, the task's read and the `COMMIT` of the general case;
                    // the lock and the WAL append, most of the cost, remain. The
                    // time is SQLite's (`unixepoch()`, the same clock and whole
                    // seconds as `now()`), read once the lock is held, as the
                    // general case reads it after `BEGIN IMMEDIATE`: a wait for
                    // another process's lock cannot charge a task that expired
                    // meanwhile.
                    let mut spend = conn.prepare_cached(
                        "UPDATE task SET calls_used = calls_used + 1
                 WHERE id = ?1 AND revoked_at IS NULL AND expires_at > unixepoch()
                   AND (max_calls IS NULL OR calls_used < max_calls)
                 RETURNING calls_used",
                    )?;
                    let mut rows = spend.query([task_id])?;
                    let spent: Option<i64> = rows.next()?.map(|r| r.get(0)).transpose()?;
                    // Stepped to its end, where the statement commits: a failed
                    // commit (a full disk) is an error here, not a charge that was
                    // reported and then rolled back.
                    while rows.next()?.is_some() {}
                    if let Some(calls_used) = spent {
                        return Ok(Ok(Charged {
                            calls_used: calls_used as u64,
                            approval: None,
                        }));
                    }
                    // Closed, spent or unknown: the transaction below says which
                    // (or charges, if the task changed in between).
                }
                // IMMEDIATE takes the write lock first, so the check and the charge
                // cannot interleave with another process's charge.
                let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
                let at = now();
                let task =
                    load_task(&tx, task_id)?.ok_or_else(|| StoreError::NoTask(task_id.into()))?;
                let writes = charge != Charge::Read;
                if let Some(refusal) = task.refusal(at, tool, writes) {
                    return Ok(Err(refusal));
                }
                if writes {
                    tx.execute(
                        "DELETE FROM task_write WHERE task_id = ?1 AND at <= ?2",
                        params![task_id, at - 3600],
                    )?;
                    if let Some(per_hour) = task.writes_per_hour {
                        let recent: i64 = tx.query_row(
                            "SELECT count(*) FROM task_write WHERE task_id = ?1",
                            [task_id],
                            |r| r.get(0),
                        )?;
                        if recent >= i64::from(per_hour) {
                            return Ok(Err(ChargeRefusal::WriteRateExhausted { per_hour }));
                        }
                    }
                    tx.execute(
                        "INSERT INTO task_write (task_id, at) VALUES (?1, ?2)",
                        params![task_id, at],
                    )?;
                }
                let mut approval = None;
                if let Charge::Destructive { binding } = charge
                    && !task.pre_approves(tool)
                {
                    let used: Option<String> = tx
                        .query_row(
                            "UPDATE approval SET state = 'used', settled = 1
                     WHERE id = (SELECT id FROM approval
                                 WHERE task_id = ?1 AND binding = ?2 AND state = 'approved'
                                   AND settled = 0 AND expires_at > ?3
                                 ORDER BY requested_at LIMIT 1)
                     RETURNING id",
                            params![task_id, binding, at],
                            |r| r.get(0),
                        )
                        .optional()?;
                    if used.is_none() {
                        return Ok(Err(ChargeRefusal::ApprovalMissing));
                    }
                    approval = used;
                }
                tx.prepare_cached("UPDATE task SET calls_used = calls_used + 1 WHERE id = ?1")?
                    .execute([task_id])?;
                // The write lock is held since the read: nobody else charged.
                tx.commit()?;
                Ok(Ok(Charged {
                    calls_used: task.calls_used + 1,
                    approval,
                }))
            })
            .await
    }

    async fn request_approval(&self, request: ApprovalRequest) -> Result<Approval, StoreError> {
        self.conn
            .run(|conn| -> Result<_, StoreError> {
                let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
                let at = now();
                let existing: Option<String> = tx
                    .query_row(
                        "SELECT id FROM approval
                 WHERE task_id = ?1 AND binding = ?2 AND settled = 0 AND expires_at > ?3
                   AND state IN ('pending', 'approved')
                 ORDER BY requested_at DESC LIMIT 1",
                        params![request.task_id, request.binding, at],
                        |r| r.get(0),
                    )
                    .optional()?;
                let id = match existing {
                    Some(id) => id,
                    None => {
                        let waiting: i64 = tx.query_row(
                            "SELECT count(*) FROM approval
                     WHERE task_id = ?1 AND state = 'pending' AND expires_at > ?2",
                            params![request.task_id, at],
                            |r| r.get(0),
                        )?;
                        if waiting as usize >= MAX_PENDING_PER_TASK {
                            return Err(StoreError::TooManyPending(
                                request.task_id.clone(),
                                waiting as usize,
                            ));
                        }
                        let id = random_id("ap")?;
                        tx.execute(
                    "INSERT INTO approval (id, task_id, tool, binding, arguments, summary, state,
                                           requested_at, expires_at, operator_only,
                                           in_client, asked_by)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'pending', ?7, ?8, ?9, ?10, ?11)",
                    params![
                        id,
                        request.task_id,
                        request.tool,
                        request.binding,
                        request.arguments.to_string(),
                        request.summary,
                        at,
                        at.saturating_add(ttl_secs(request.ttl)),
                        request.operator_only,
                        request.in_client,
                        request.asked_by,
                    ],
                )?;
                        id
                    }
                };
                let approval = load_approval(&tx, &id)?.ok_or(StoreError::NoApproval(id))?;
                tx.commit()?;
                Ok(approval)
            })
            .await
    }

    async fn decide(
        &self,
        id: &str,
        decision: Decision,
        by: &str,
        channel: &str,
        note: Option<&str>,
    ) -> Result<Approval, StoreError> {
        self.conn
            .run(|conn| -> Result<_, StoreError> {
                let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
                let approval =
                    load_approval(&tx, id)?.ok_or_else(|| StoreError::NoApproval(id.into()))?;
                let at = now();
                let (state, expires_at) = approval.decided(decision, at)?;
                tx.execute(
                "UPDATE approval SET state = ?2, expires_at = ?3, decided_at = ?4, decided_by = ?5,
                                 channel = ?6, note = ?7
             WHERE id = ?1",
                params![id, state, expires_at, at, by, channel, note],
            )?;
                let approval =
                    load_approval(&tx, id)?.ok_or_else(|| StoreError::NoApproval(id.into()))?;
                tx.commit()?;
                Ok(approval)
            })
            .await
    }

    async fn take_denial(
        &self,
        task_id: &str,
        binding: &str,
    ) -> Result<Option<Approval>, StoreError> {
        self.conn
            .run(|conn| -> Result<_, StoreError> {
                let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
                let id: Option<String> = tx
                    .query_row(
                        "SELECT id FROM approval
                 WHERE task_id = ?1 AND binding = ?2 AND state = 'denied' AND settled = 0
                 ORDER BY requested_at DESC LIMIT 1",
                        params![task_id, binding],
                        |r| r.get(0),
                    )
                    .optional()?;
                let Some(id) = id else { return Ok(None) };
                tx.execute("UPDATE approval SET settled = 1 WHERE id = ?1", [&id])?;
                let approval = load_approval(&tx, &id)?;
                tx.commit()?;
                Ok(approval)
            })
            .await
    }

    async fn approval(&self, id: &str) -> Result<Option<Approval>, StoreError> {
        self.conn.run(|conn| Ok(load_approval(conn, id)?)).await
    }

    async fn approvals(&self, pending_only: bool) -> Result<Vec<Approval>, StoreError> {
        // The pending list is what operators poll; it is filtered in the
        // query, not by loading every approval ever asked for.
        let filter = if pending_only {
            "WHERE state = 'pending' AND expires_at > ?1"
        } else {
            "WHERE ?1 IS NOT NULL"
        };
        self.conn
            .run(|conn| -> Result<_, StoreError> {
                let mut stmt = conn.prepare(&format!(
                "SELECT {APPROVAL_COLUMNS} FROM approval {filter} ORDER BY requested_at DESC, id"
            ))?;
                let rows = stmt.query_map([now()], approval_from_row)?;
                Ok(rows.collect::<Result<_, _>>()?)
            })
            .await
    }

    async fn closed_approvals(&self, count: u32) -> Result<Vec<Approval>, StoreError> {
        self.conn
            .run(move |conn| -> Result<_, StoreError> {
                let mut stmt = conn.prepare(&format!(
                    "SELECT {APPROVAL_COLUMNS} FROM approval \
                     WHERE NOT (state = 'pending' AND expires_at > ?1) \
                     ORDER BY requested_at DESC, id LIMIT ?2"
                ))?;
                let rows = stmt.query_map(
                    rusqlite::params![now(), i64::from(count)],
                    approval_from_row,
                )?;
                Ok(rows.collect::<Result<_, _>>()?)
            })
            .await
    }

    async fn state_get(&self, plugin: &str, key: &str) -> Result<Option<String>, StateError> {
        if !valid_state_key(key) {
            return Err(StateError::InvalidKey);
        }
        self.conn
            .run(|conn| {
                conn.query_row(
                    "SELECT value FROM plugin_state WHERE plugin = ?1 AND key = ?2",
                    [plugin, key],
                    |r| r.get(0),
                )
                .optional()
                .map_err(unavailable)
            })
            .await
    }

    async fn state_set(
        &self,
        plugin: &str,
        key: &str,
        value: &str,
        quota: u64,
    ) -> Result<(), StateError> {
        self.state_compare_and_set_inner(plugin, key, None, value, quota)
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
        self.state_compare_and_set_inner(plugin, key, Some(expected), value, quota)
            .await
    }

    async fn state_delete(&self, plugin: &str, key: &str) -> Result<bool, StateError> {
        if !valid_state_key(key) {
            return Err(StateError::InvalidKey);
        }
        self.conn
            .run(|conn| -> Result<_, StateError> {
                let tx = conn
                    .transaction_with_behavior(TransactionBehavior::Immediate)
                    .map_err(unavailable)?;
                let freed: Option<i64> = tx
                    .query_row(
                        "DELETE FROM plugin_state WHERE plugin = ?1 AND key = ?2
                 RETURNING length(CAST(key AS BLOB)) + length(CAST(value AS BLOB))",
                        [plugin, key],
                        |r| r.get(0),
                    )
                    .optional()
                    .map_err(unavailable)?;
                if let Some(freed) = freed {
                    tx.execute(
                        "UPDATE plugin_usage SET bytes = max(bytes - ?2, 0) WHERE plugin = ?1",
                        params![plugin, freed],
                    )
                    .map_err(unavailable)?;
                }
                tx.commit().map_err(unavailable)?;
                Ok(freed.is_some())
            })
            .await
    }

    async fn state_list(&self, plugin: &str, prefix: &str) -> Result<Vec<String>, StateError> {
        self.conn
            .run(|conn| -> Result<_, StateError> {
                // A range scan on the primary key rather than LIKE, which would
                // treat `%` and `_` in the prefix as wildcards.
                let mut stmt = conn
                    .prepare(
                        "SELECT key FROM plugin_state WHERE plugin = ?1 AND key >= ?2 ORDER BY key",
                    )
                    .map_err(unavailable)?;
                let rows = stmt
                    .query_map([plugin, prefix], |r| r.get::<_, String>(0))
                    .map_err(unavailable)?;
                let mut keys = Vec::new();
                for key in rows {
                    let key = key.map_err(unavailable)?;
                    if !key.starts_with(prefix) {
                        break;
                    }
                    keys.push(key);
                }
                Ok(keys)
            })
            .await
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
        self.conn
            .run(|conn| -> Result<_, StoreError> {
                let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
                let taken: bool = tx.query_row(
                    "SELECT count(*) > 0 FROM plugin_state WHERE plugin = ?1 AND key = ?2",
                    [plugin, to],
                    |r| r.get(0),
                )?;
                if taken {
                    return Err(StoreError::KeyExists(to.into()));
                }
                let n = tx.execute(
                    "UPDATE plugin_state SET key = ?3 WHERE plugin = ?1 AND key = ?2",
                    [plugin, from, to],
                )?;
                if n == 0 {
                    return Err(StoreError::NoKey(from.into()));
                }
                // An operator's move may take the plugin past its quota; the
                // plugin's next write then fails, which is the operator's call.
                tx.execute(
                    "UPDATE plugin_usage SET bytes = max(bytes + ?2, 0) WHERE plugin = ?1",
                    params![plugin, to.len() as i64 - from.len() as i64],
                )?;
                tx.commit()?;
                Ok(())
            })
            .await
    }

    async fn add_account(&self, account: &Account) -> Result<(), StoreError> {
        let inserted = self
            .conn
            .run(|conn| -> Result<_, StoreError> {
                Ok(conn.execute(
                    "INSERT INTO operator (name, role, password_hash, created_at, created_by)
                     VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (name) DO NOTHING",
                    params![
                        account.name,
                        account.role.as_str(),
                        account.password_hash,
                        account.created_at,
                        account.created_by,
                    ],
                )?)
            })
            .await?;
        if inserted == 0 {
            return Err(StoreError::OperatorExists(account.name.clone()));
        }
        Ok(())
    }

    async fn account(&self, name: &str) -> Result<Option<Account>, StoreError> {
        let query = format!("SELECT {ACCOUNT_COLUMNS} FROM operator WHERE name = ?1");
        self.conn
            .run(|conn| -> Result<_, StoreError> {
                Ok(conn
                    .query_row(&query, [name], account_from_row)
                    .optional()?)
            })
            .await
    }

    async fn accounts(&self) -> Result<Vec<Account>, StoreError> {
        self.conn
            .run(|conn| -> Result<_, StoreError> {
                let mut statement = conn.prepare(&format!(
                    "SELECT {ACCOUNT_COLUMNS} FROM operator ORDER BY name"
                ))?;
                let rows = statement.query_map([], account_from_row)?;
                Ok(rows.collect::<rusqlite::Result<_>>()?)
            })
            .await
    }

    async fn remove_account(&self, name: &str, _by: &str) -> Result<(), StoreError> {
        self.conn
            .run(|conn| -> Result<_, StoreError> {
                let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
                tx.execute("DELETE FROM sign_in WHERE operator = ?1", [name])?;
                if tx.execute("DELETE FROM operator WHERE name = ?1", [name])? == 0 {
                    return Err(StoreError::NoOperator(name.into()));
                }
                tx.commit()?;
                Ok(())
            })
            .await
    }

    async fn set_password(
        &self,
        name: &str,
        password_hash: &str,
        _by: &str,
    ) -> Result<(), StoreError> {
        self.conn
            .run(|conn| -> Result<_, StoreError> {
                let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
                let changed = tx.execute(
                    "UPDATE operator SET password_hash = ?2 WHERE name = ?1",
                    params![name, password_hash],
                )?;
                if changed == 0 {
                    return Err(StoreError::NoOperator(name.into()));
                }
                tx.execute("DELETE FROM sign_in WHERE operator = ?1", [name])?;
                tx.commit()?;
                Ok(())
            })
            .await
    }

    async fn open_sign_in(
        &self,
        cookie_sha256: &[u8; 32],
        operator: &str,
        csrf: &str,
    ) -> Result<(), StoreError> {
        let at = now();
        self.conn
            .run(|conn| -> Result<_, StoreError> {
                // Sign-ins nobody ended: gone a day after the longest one could last.
                conn.execute(
                    "DELETE FROM sign_in WHERE created_at < ?1",
                    [at - STALE_SIGN_IN_SECS],
                )?;
                conn.execute(
                    "INSERT INTO sign_in (cookie_sha256, operator, csrf, created_at, seen_at)
             VALUES (?1, ?2, ?3, ?4, ?4)",
                    params![cookie_sha256.as_slice(), operator, csrf, at],
                )?;
                Ok(())
            })
            .await
    }

    async fn sign_in(
        &self,
        cookie_sha256: &[u8; 32],
        limits: SignInLimits,
    ) -> Result<Option<SignIn>, StoreError> {
        let at = now();
        self.conn
            .run(|conn| -> Result<_, StoreError> {
                let found = conn
                    .query_row(
                        "SELECT s.operator, o.role, s.csrf, s.created_at, s.seen_at
                 FROM sign_in s JOIN operator o ON o.name = s.operator
                 WHERE s.cookie_sha256 = ?1",
                        [cookie_sha256.as_slice()],
                        |row| {
                            Ok((
                                row.get::<_, String>(0)?,
                                row.get::<_, String>(1)?,
                                row.get::<_, String>(2)?,
                                row.get::<_, UnixSecs>(3)?,
                                row.get::<_, UnixSecs>(4)?,
                            ))
                        },
                    )
                    .optional()?;
                let Some((operator, role, csrf, created_at, seen_at)) = found else {
                    return Ok(None);
                };
                if !limits.alive(created_at, seen_at, at) {
                    conn.execute(
                        "DELETE FROM sign_in WHERE cookie_sha256 = ?1",
                        [cookie_sha256.as_slice()],
                    )?;
                    return Ok(None);
                }
                // An unknown role (written by a newer host) grants nothing here.
                let Some(role) = Role::parse(&role) else {
                    return Ok(None);
                };
                if at - seen_at >= SEEN_EVERY_SECS {
                    conn.execute(
                        "UPDATE sign_in SET seen_at = ?2 WHERE cookie_sha256 = ?1",
                        params![cookie_sha256.as_slice(), at],
                    )?;
                }
                Ok(Some(SignIn {
                    operator,
                    role,
                    csrf,
                    created_at,
                }))
            })
            .await
    }

    async fn close_sign_in(&self, cookie_sha256: &[u8; 32]) -> Result<(), StoreError> {
        self.conn
            .run(|conn| -> Result<_, StoreError> {
                conn.execute(
                    "DELETE FROM sign_in WHERE cookie_sha256 = ?1",
                    [cookie_sha256.as_slice()],
                )?;
                Ok(())
            })
            .await
    }
}

impl SqliteStore {
    /// `set` is a compare-and-set that does not compare (`expected` = None).
    async fn state_compare_and_set_inner(
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
        self.conn
            .run(|conn| -> Result<_, StateError> {
                let tx = conn
                    .transaction_with_behavior(TransactionBehavior::Immediate)
                    .map_err(unavailable)?;
                let current: Option<String> = tx
                    .query_row(
                        "SELECT value FROM plugin_state WHERE plugin = ?1 AND key = ?2",
                        [plugin, key],
                        |r| r.get(0),
                    )
                    .optional()
                    .map_err(unavailable)?;
                if let Some(expected) = expected
                    && expected != current.as_deref()
                {
                    return Ok(false);
                }
                let used: i64 = tx
                    .query_row(
                        "SELECT bytes FROM plugin_usage WHERE plugin = ?1",
                        [plugin],
                        |r| r.get(0),
                    )
                    .optional()
                    .map_err(unavailable)?
                    .unwrap_or(0);
                let after = usage_after(used, key, current.as_deref(), value, quota)?;
                tx.execute(
                    "INSERT INTO plugin_state (plugin, key, value) VALUES (?1, ?2, ?3)
             ON CONFLICT (plugin, key) DO UPDATE SET value = excluded.value",
                    [plugin, key, value],
                )
                .map_err(unavailable)?;
                tx.execute(
                    "INSERT INTO plugin_usage (plugin, bytes) VALUES (?1, ?2)
             ON CONFLICT (plugin) DO UPDATE SET bytes = excluded.bytes",
                    params![plugin, after as i64],
                )
                .map_err(unavailable)?;
                tx.commit().map_err(unavailable)?;
                Ok(true)
            })
            .await
    }
}
