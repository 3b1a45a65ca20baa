//! Columns, row mapping, and the row locks operations take.

use deadpool_postgres::{GenericClient, Transaction};
use tokio_postgres::Row;

use super::PostgresStore;
use crate::store::{Approval, ApprovalState, StateError, StoreError, Task, now};

pub(super) const TASK_COLUMNS: &str = "id, purpose, opened_by, opened_at, expires_at, grants, pre_approved, \
     max_calls, writes_per_hour, calls_used, revoked_at, revoked_by, ad_hoc, operator_approval, \
     approve_in_client";
/// How many columns [`TASK_COLUMNS`] names.
pub(super) const TASK_COLUMN_COUNT: usize = 15;

pub(super) fn task_from_row(row: &Row) -> Result<Task, StoreError> {
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
        approve_in_client: row.get(14),
    })
}

pub(super) const APPROVAL_COLUMNS: &str = "id, task_id, tool, binding, arguments, summary, state, \
     requested_at, expires_at, decided_by, channel, decided_at, operator_only, in_client, asked_by, note";

pub(super) fn approval_from_row(row: &Row) -> Approval {
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
        in_client: row.get(13),
        asked_by: row.get(14),
        note: row.get(15),
    }
}

/// The task, optionally taking its row lock for the rest of the transaction.
pub(super) async fn load_task(
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

pub(super) async fn load_approval(
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
pub(super) async fn lock_usage(
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

/// Text for a TEXT column, which cannot hold a NUL (SQLite's can): a
/// purpose, summary or name carrying one keeps a visible stand-in.
pub(super) fn text(s: &str) -> std::borrow::Cow<'_, str> {
    if s.contains('\0') {
        s.replace('\0', "\u{fffd}").into()
    } else {
        s.into()
    }
}

/// A stored value: the host wrote it from a string, so it is UTF-8 unless
/// the database was edited by hand.
pub(super) fn utf8(bytes: Vec<u8>) -> Result<String, StateError> {
    String::from_utf8(bytes)
        .map_err(|_| StateError::Unavailable("a stored value is not UTF-8".into()))
}

pub(super) fn state_unavailable(e: StoreError) -> StateError {
    StateError::Unavailable(e.to_string())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_column_count_matches_the_columns() {
        assert_eq!(
            super::TASK_COLUMNS.split(',').count(),
            super::TASK_COLUMN_COUNT
        );
    }
}
