//! The [`Store`] methods: each a transaction, locks taken task before
//! approval (see the module docs of `store::postgres`), and each bounded in
//! time by `PostgresStore::answered`.

use std::time::Duration;

use super::PostgresStore;
use super::rows::{
    APPROVAL_COLUMNS, TASK_COLUMN_COUNT, TASK_COLUMNS, approval_from_row, load_approval, load_task,
    lock_usage, state_unavailable, task_from_row, text, utf8,
};
use crate::store::accounts::{SEEN_EVERY_SECS, STALE_SIGN_IN_SECS};
use crate::store::token::{self, TaskToken};
use crate::store::{
    Account, Approval, ApprovalRequest, Charge, ChargeRefusal, Charged, Decision,
    MAX_PENDING_PER_TASK, NewTask, Role, SignIn, SignInLimits, StateError, Store, StoreError, Task,
    json_list, now, operator, random_id, ttl_secs, usage_after, valid_state_key,
};

#[async_trait::async_trait]
impl Store for PostgresStore {
    async fn open_task(&self, new: NewTask) -> Result<(Task, TaskToken), StoreError> {
        self.answered(async {
            let (token, record) = token::issue().map_err(|e| StoreError::Random(e.to_string()))?;
            let id = random_id("task")?;
            let at = now();
            let client = self.client().await?;
            client
                .execute(
                    "INSERT INTO task (id, purpose, opened_by, opened_at, expires_at, grants,
                                       pre_approved, max_calls, writes_per_hour, token_id,
                                       token_sha256, operator_approval, approve_in_client)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)",
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
                        &new.approve_in_client,
                    ],
                )
                .await
                .map_err(|e| self.failed(e))?;
            let task = load_task(self, &client, &id, false)
                .await?
                .ok_or_else(|| StoreError::NoTask(id.clone()))?;
            Ok((task, token))
        })
        .await
    }

    async fn ad_hoc_task(
        &self,
        id: &str,
        grants: &[String],
        ttl: Duration,
    ) -> Result<Task, StoreError> {
        self.answered(async {
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
                return Err(StoreError::revoked_not_served(id));
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
        })
        .await
    }

    async fn task(&self, id: &str) -> Result<Option<Task>, StoreError> {
        self.answered(async {
            let client = self.client().await?;
            load_task(self, &client, id, false).await
        })
        .await
    }

    async fn tasks(&self) -> Result<Vec<Task>, StoreError> {
        self.listed(async {
            let client = self.client().await?;
            let rows = client
                .query(
                    &format!("SELECT {TASK_COLUMNS} FROM task ORDER BY opened_at DESC, id"),
                    &[],
                )
                .await
                .map_err(|e| self.failed(e))?;
            rows.iter().map(task_from_row).collect()
        })
        .await
    }

    async fn recent_tasks(&self, ended: u32) -> Result<Vec<Task>, StoreError> {
        // No index orders tasks by time: the ended ones are all read to
        // keep the newest, so this gets a listing's time.
        self.listed(async {
            let client = self.client().await?;
            let rows = client
                .query(
                    &format!(
                        "SELECT {TASK_COLUMNS} FROM task WHERE revoked_at IS NULL AND expires_at > $1 \
                         UNION ALL SELECT * FROM (SELECT {TASK_COLUMNS} FROM task \
                           WHERE revoked_at IS NOT NULL OR expires_at <= $1 \
                           ORDER BY opened_at DESC, id LIMIT $2) AS ended \
                         ORDER BY opened_at DESC, id"
                    ),
                    &[&now(), &i64::from(ended)],
                )
                .await
                .map_err(|e| self.failed(e))?;
            rows.iter().map(task_from_row).collect()
        })
        .await
    }

    async fn revoke_task(&self, id: &str, by: &str) -> Result<Task, StoreError> {
        self.answered(async {
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
        })
        .await
    }

    async fn extend_task(&self, id: &str, ttl: Duration, _by: &str) -> Result<Task, StoreError> {
        self.answered(async {
            let mut client = self.client().await?;
            let tx = client.transaction().await.map_err(|e| self.failed(e))?;
            let task = load_task(self, &tx, id, true)
                .await?
                .ok_or_else(|| StoreError::NoTask(id.to_string()))?;
            if task.revoked_at.is_some() {
                return Err(StoreError::revoked_not_extended(id));
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
        })
        .await
    }

    async fn authenticate(&self, presented: &str) -> Result<Option<Task>, StoreError> {
        self.answered(async {
            let Some((token_id, secret)) = token::parse(presented) else {
                return Ok(None);
            };
            let client = self.client().await?;
            // One round trip: every HTTP request that opens a session asks this.
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
        })
        .await
    }

    async fn charge(
        &self,
        task_id: &str,
        tool: &str,
        charge: Charge<'_>,
    ) -> Result<Result<Charged, ChargeRefusal>, StoreError> {
        self.answered(async {
            let mut client = self.client().await?;
            let fail = |e| self.failed(e);
            if charge == Charge::Read {
                // One round trip instead of four (`BEGIN`, the locking read, the
                // update, `COMMIT`). The update waits on the task's row lock like
                // the general case, and PostgreSQL checks its condition again on
                // the row as the charge it waited for left it, so a budget is
                // never overspent.
                let spend = client
                    .prepare_cached(
                        "UPDATE task SET calls_used = calls_used + 1
                         WHERE id = $1 AND revoked_at IS NULL
                           AND expires_at > extract(epoch FROM statement_timestamp())::BIGINT
                           AND (max_calls IS NULL OR calls_used < max_calls)
                         RETURNING calls_used",
                    )
                    .await
                    .map_err(fail)?;
                if let Some(row) = client.query_opt(&spend, &[&task_id]).await.map_err(fail)? {
                    return Ok(Ok(Charged {
                        calls_used: row.get::<_, i64>(0).max(0) as u64,
                        approval: None,
                    }));
                }
                // Closed, spent or unknown: the transaction below says which
                // (or charges, if the task changed in between).
            }
            let tx = client.transaction().await.map_err(fail)?;
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
            let writes = charge != Charge::Read;
            if let Some(refusal) = task.refusal(at, tool, writes) {
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
                .prepare_cached(
                    "UPDATE task SET calls_used = calls_used + 1 WHERE id = $1 RETURNING calls_used",
                )
                .await
                .map_err(fail)?;
            let calls_used: i64 = tx
                .query_one(&spend, &[&task_id])
                .await
                .map_err(fail)?
                .get(0);
            tx.commit().await.map_err(fail)?;
            Ok(Ok(Charged {
                calls_used: calls_used.max(0) as u64,
                approval,
            }))
        })
        .await
    }

    async fn request_approval(&self, request: ApprovalRequest) -> Result<Approval, StoreError> {
        self.answered(async {
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
                                               requested_at, expires_at, operator_only,
                                               in_client, asked_by)
                         VALUES ($1, $2, $3, $4, $5, $6, 'pending', $7, $8, $9, $10, $11)",
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
                            &request.in_client,
                            &request.asked_by.as_deref().map(text),
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
        self.answered(async {
            let mut client = self.client().await?;
            let tx = client.transaction().await.map_err(|e| self.failed(e))?;
            // Two people deciding at once on two replicas: the second waits for
            // the first's row and then finds it decided.
            let approval = load_approval(self, &tx, id, true)
                .await?
                .ok_or_else(|| StoreError::NoApproval(id.into()))?;
            let at = now();
            let (state, expires_at) = approval.decided(decision, at)?;
            tx.execute(
                "UPDATE approval SET state = $2, expires_at = $3, decided_at = $4, decided_by = $5,
                                     channel = $6, note = $7
                 WHERE id = $1",
                &[
                    &id,
                    &state,
                    &expires_at,
                    &at,
                    &text(by),
                    &text(channel),
                    &note.map(text),
                ],
            )
            .await
            .map_err(|e| self.failed(e))?;
            let approval = load_approval(self, &tx, id, false)
                .await?
                .ok_or_else(|| StoreError::NoApproval(id.into()))?;
            tx.commit().await.map_err(|e| self.failed(e))?;
            Ok(approval)
        })
        .await
    }

    async fn take_denial(
        &self,
        task_id: &str,
        binding: &str,
    ) -> Result<Option<Approval>, StoreError> {
        self.answered(async {
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
        })
        .await
    }

    async fn approval(&self, id: &str) -> Result<Option<Approval>, StoreError> {
        self.answered(async {
            let client = self.client().await?;
            load_approval(self, &client, id, false).await
        })
        .await
    }

    async fn approvals(&self, pending_only: bool) -> Result<Vec<Approval>, StoreError> {
        self.listed(async {
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
        })
        .await
    }

    async fn closed_approvals(&self, count: u32) -> Result<Vec<Approval>, StoreError> {
        // No index orders approvals by time: the database reads them all
        // to keep the newest, so this gets a listing's time.
        self.listed(async {
            let client = self.client().await?;
            let rows = client
                .query(
                    &format!(
                        "SELECT {APPROVAL_COLUMNS} FROM approval \
                         WHERE NOT (state = 'pending' AND expires_at > $1) \
                         ORDER BY requested_at DESC, id LIMIT $2"
                    ),
                    &[&now(), &i64::from(count)],
                )
                .await
                .map_err(|e| self.failed(e))?;
            Ok(rows.iter().map(approval_from_row).collect())
        })
        .await
    }

    async fn state_get(&self, plugin: &str, key: &str) -> Result<Option<String>, StateError> {
        self.answered(async {
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
        self.answered(async {
            self.write_state(plugin, key, None, value, quota)
                .await
                .map(|_| ())
        })
        .await
    }

    async fn state_compare_and_set(
        &self,
        plugin: &str,
        key: &str,
        expected: Option<&str>,
        value: &str,
        quota: u64,
    ) -> Result<bool, StateError> {
        self.answered(async {
            self.write_state(plugin, key, Some(expected), value, quota)
                .await
        })
        .await
    }

    async fn state_delete(&self, plugin: &str, key: &str) -> Result<bool, StateError> {
        self.answered(async {
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
        })
        .await
    }

    async fn state_list(&self, plugin: &str, prefix: &str) -> Result<Vec<String>, StateError> {
        self.answered(async {
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
        self.answered(async {
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
        })
        .await
    }

    async fn add_account(&self, account: &Account) -> Result<(), StoreError> {
        self.answered(async {
            let client = self.client().await?;
            let inserted = client
                .execute(
                    "INSERT INTO operator (name, role, password_hash, created_at, created_by)
                     VALUES ($1, $2, $3, $4, $5) ON CONFLICT (name) DO NOTHING",
                    &[
                        &text(&account.name),
                        &account.role.as_str(),
                        &account.password_hash,
                        &account.created_at,
                        &text(&account.created_by),
                    ],
                )
                .await
                .map_err(|e| self.failed(e))?;
            if inserted == 0 {
                return Err(StoreError::OperatorExists(account.name.clone()));
            }
            Ok(())
        })
        .await
    }

    async fn account(&self, name: &str) -> Result<Option<Account>, StoreError> {
        self.answered(async {
            let client = self.client().await?;
            let row = client
                .query_opt(
                    &format!("SELECT {ACCOUNT_COLUMNS} FROM operator WHERE name = $1"),
                    &[&text(name)],
                )
                .await
                .map_err(|e| self.failed(e))?;
            Ok(row.as_ref().map(account_from_row))
        })
        .await
    }

    async fn accounts(&self) -> Result<Vec<Account>, StoreError> {
        self.listed(async {
            let client = self.client().await?;
            let rows = client
                .query(
                    &format!("SELECT {ACCOUNT_COLUMNS} FROM operator ORDER BY name COLLATE \"C\""),
                    &[],
                )
                .await
                .map_err(|e| self.failed(e))?;
            Ok(rows.iter().map(account_from_row).collect())
        })
        .await
    }

    async fn remove_account(&self, name: &str, _by: &str) -> Result<(), StoreError> {
        self.answered(async {
            let client = self.client().await?;
            // The sign-ins go with the operator (ON DELETE CASCADE).
            let removed = client
                .execute("DELETE FROM operator WHERE name = $1", &[&text(name)])
                .await
                .map_err(|e| self.failed(e))?;
            if removed == 0 {
                return Err(StoreError::NoOperator(name.into()));
            }
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
        self.answered(async {
            let mut client = self.client().await?;
            let fail = |e| self.failed(e);
            let tx = client.transaction().await.map_err(fail)?;
            let changed = tx
                .execute(
                    "UPDATE operator SET password_hash = $2 WHERE name = $1",
                    &[&text(name), &password_hash],
                )
                .await
                .map_err(fail)?;
            if changed == 0 {
                return Err(StoreError::NoOperator(name.into()));
            }
            tx.execute("DELETE FROM sign_in WHERE operator = $1", &[&text(name)])
                .await
                .map_err(fail)?;
            tx.commit().await.map_err(fail)
        })
        .await
    }

    async fn open_sign_in(
        &self,
        cookie_sha256: &[u8; 32],
        operator: &str,
        csrf: &str,
    ) -> Result<(), StoreError> {
        self.answered(async {
            let client = self.client().await?;
            let at = now();
            // Sign-ins nobody ended: gone a day after the longest one could last.
            client
                .execute(
                    "DELETE FROM sign_in WHERE created_at < $1",
                    &[&(at - STALE_SIGN_IN_SECS)],
                )
                .await
                .map_err(|e| self.failed(e))?;
            client
                .execute(
                    "INSERT INTO sign_in (cookie_sha256, operator, csrf, created_at, seen_at)
                     VALUES ($1, $2, $3, $4, $4)",
                    &[&cookie_sha256.as_slice(), &text(operator), &csrf, &at],
                )
                .await
                .map_err(|e| self.failed(e))?;
            Ok(())
        })
        .await
    }

    async fn sign_in(
        &self,
        cookie_sha256: &[u8; 32],
        limits: SignInLimits,
    ) -> Result<Option<SignIn>, StoreError> {
        self.answered(async {
            let client = self.client().await?;
            let fail = |e| self.failed(e);
            let at = now();
            let Some(row) = client
                .query_opt(
                    "SELECT s.operator, o.role, s.csrf, s.created_at, s.seen_at
                     FROM sign_in s JOIN operator o ON o.name = s.operator
                     WHERE s.cookie_sha256 = $1",
                    &[&cookie_sha256.as_slice()],
                )
                .await
                .map_err(fail)?
            else {
                return Ok(None);
            };
            let created_at: i64 = row.get(3);
            if !limits.alive(created_at, row.get(4), at) {
                client
                    .execute(
                        "DELETE FROM sign_in WHERE cookie_sha256 = $1",
                        &[&cookie_sha256.as_slice()],
                    )
                    .await
                    .map_err(fail)?;
                return Ok(None);
            }
            // An unknown role (written by a newer host) grants nothing here.
            let Some(role) = Role::parse(row.get(1)) else {
                return Ok(None);
            };
            let seen_at: i64 = row.get(4);
            if at - seen_at >= SEEN_EVERY_SECS {
                client
                    .execute(
                        "UPDATE sign_in SET seen_at = $2 WHERE cookie_sha256 = $1",
                        &[&cookie_sha256.as_slice(), &at],
                    )
                    .await
                    .map_err(fail)?;
            }
            Ok(Some(SignIn {
                operator: row.get(0),
                role,
                csrf: row.get(2),
                created_at,
            }))
        })
        .await
    }

    async fn close_sign_in(&self, cookie_sha256: &[u8; 32]) -> Result<(), StoreError> {
        self.answered(async {
            let client = self.client().await?;
            client
                .execute(
                    "DELETE FROM sign_in WHERE cookie_sha256 = $1",
                    &[&cookie_sha256.as_slice()],
                )
                .await
                .map_err(|e| self.failed(e))?;
            Ok(())
        })
        .await
    }
}

const ACCOUNT_COLUMNS: &str = "name, role, password_hash, created_at, created_by";

fn account_from_row(row: &tokio_postgres::Row) -> Account {
    Account {
        name: row.get(0),
        // An unknown role (written by a newer host) grants the least.
        role: Role::parse(row.get(1)).unwrap_or(Role::Approver),
        password_hash: row.get(2),
        created_at: row.get(3),
        created_by: row.get(4),
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
        let after = usage_after(used, key, current.as_deref(), value, quota)?;
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
