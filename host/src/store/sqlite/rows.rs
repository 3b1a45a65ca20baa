//! The SQLite tables' rows as the store's types: the column lists each
//! query selects, and the functions that read a row into a task, an
//! approval or an operator account.

use rusqlite::{Connection, OptionalExtension, Row};

use crate::store::{Account, Approval, ApprovalState, Role, Task, UnixSecs, now};

pub(super) const TASK_COLUMNS: &str = "id, purpose, opened_by, opened_at, expires_at, grants, pre_approved, \
     max_calls, writes_per_hour, calls_used, revoked_at, revoked_by, ad_hoc, operator_approval, \
     approve_in_client";

pub(super) fn task_from_row(row: &Row<'_>) -> rusqlite::Result<Task> {
    let list = |i: usize| -> rusqlite::Result<Vec<String>> {
        let text: String = row.get(i)?;
        serde_json::from_str(&text).map_err(|e| {
            rusqlite::Error::FromSqlConversionFailure(i, rusqlite::types::Type::Text, e.into())
        })
    };
    Ok(Task {
        id: row.get(0)?,
        purpose: row.get(1)?,
        opened_by: row.get(2)?,
        opened_at: row.get(3)?,
        expires_at: row.get(4)?,
        grants: list(5)?,
        pre_approved: list(6)?,
        max_calls: row.get::<_, Option<i64>>(7)?.map(|n| n as u64),
        writes_per_hour: row.get::<_, Option<i64>>(8)?.map(|n| n as u32),
        calls_used: row.get::<_, i64>(9)? as u64,
        revoked_at: row.get(10)?,
        revoked_by: row.get(11)?,
        ad_hoc: row.get(12)?,
        operator_approval: row.get(13)?,
        approve_in_client: row.get(14)?,
    })
}

pub(super) fn load_task(conn: &Connection, id: &str) -> rusqlite::Result<Option<Task>> {
    // Cached: every task-bound call reads its task.
    conn.prepare_cached(&format!("SELECT {TASK_COLUMNS} FROM task WHERE id = ?1"))?
        .query_row([id], task_from_row)
        .optional()
}

pub(super) const APPROVAL_COLUMNS: &str = "id, task_id, tool, binding, arguments, summary, state, \
     requested_at, expires_at, decided_by, channel, decided_at, operator_only, in_client, asked_by, note";

pub(super) fn approval_from_row(row: &Row<'_>) -> rusqlite::Result<Approval> {
    let arguments: String = row.get(4)?;
    let state = ApprovalState::parse(&row.get::<_, String>(6)?);
    let expires_at: UnixSecs = row.get(8)?;
    let state = state.at(expires_at, now());
    Ok(Approval {
        id: row.get(0)?,
        task_id: row.get(1)?,
        tool: row.get(2)?,
        binding: row.get(3)?,
        arguments: serde_json::from_str(&arguments).unwrap_or(serde_json::Value::Null),
        summary: row.get(5)?,
        state,
        requested_at: row.get(7)?,
        expires_at,
        decided_by: row.get(9)?,
        channel: row.get(10)?,
        decided_at: row.get(11)?,
        operator_only: row.get(12)?,
        in_client: row.get(13)?,
        asked_by: row.get(14)?,
        note: row.get(15)?,
    })
}

pub(super) fn load_approval(conn: &Connection, id: &str) -> rusqlite::Result<Option<Approval>> {
    conn.query_row(
        &format!("SELECT {APPROVAL_COLUMNS} FROM approval WHERE id = ?1"),
        [id],
        approval_from_row,
    )
    .optional()
}

pub(super) const ACCOUNT_COLUMNS: &str = "name, role, password_hash, created_at, created_by";

pub(super) fn account_from_row(row: &Row<'_>) -> rusqlite::Result<Account> {
    let role: String = row.get(1)?;
    Ok(Account {
        name: row.get(0)?,
        // An unknown role (written by a newer host) grants the least.
        role: Role::parse(&role).unwrap_or(Role::Approver),
        password_hash: row.get(2)?,
        created_at: row.get(3)?,
        created_by: row.get(4)?,
    })
}
