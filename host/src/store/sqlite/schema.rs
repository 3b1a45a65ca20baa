//! The SQLite schema: each version's tables, and the migration that brings
//! a database to this host's version.

use rusqlite::{Connection, TransactionBehavior};

/// Bumped with every change to the tables; see [`migrate`].
const SCHEMA_VERSION: i64 = 2;

const SCHEMA_V1: &str = "
CREATE TABLE task (
    id              TEXT PRIMARY KEY,
    purpose         TEXT NOT NULL,
    opened_by       TEXT NOT NULL,
    opened_at       INTEGER NOT NULL,
    expires_at      INTEGER NOT NULL,
    grants          TEXT NOT NULL,          -- JSON array of tool names
    pre_approved    TEXT NOT NULL,          -- JSON array of tool names
    max_calls       INTEGER,
    writes_per_hour INTEGER,
    calls_used      INTEGER NOT NULL DEFAULT 0,
    revoked_at      INTEGER,
    revoked_by      TEXT,
    ad_hoc          INTEGER NOT NULL DEFAULT 0,
    operator_approval INTEGER NOT NULL DEFAULT 0,
    token_id        TEXT UNIQUE,
    token_sha256    BLOB
) STRICT;
CREATE TABLE task_write (
    task_id TEXT NOT NULL REFERENCES task(id),
    at      INTEGER NOT NULL
) STRICT;
CREATE INDEX task_write_by_task ON task_write(task_id, at);
CREATE TABLE approval (
    id           TEXT PRIMARY KEY,
    task_id      TEXT NOT NULL REFERENCES task(id),
    tool         TEXT NOT NULL,
    binding      TEXT NOT NULL,
    arguments    TEXT NOT NULL,
    summary      TEXT NOT NULL,
    state        TEXT NOT NULL,
    requested_at INTEGER NOT NULL,
    expires_at   INTEGER NOT NULL,
    decided_at   INTEGER,
    decided_by   TEXT,
    channel      TEXT,
    operator_only INTEGER NOT NULL DEFAULT 0,
    settled      INTEGER NOT NULL DEFAULT 0   -- used, or its denial reported
) STRICT;
CREATE INDEX approval_by_binding ON approval(task_id, binding);
CREATE TABLE plugin_state (
    plugin TEXT NOT NULL,
    key    TEXT NOT NULL,
    value  TEXT NOT NULL,
    PRIMARY KEY (plugin, key)
) STRICT, WITHOUT ROWID;
-- Bytes of keys and values per plugin, kept with every write so that the
-- quota check does not sum the plugin's rows each time.
CREATE TABLE plugin_usage (
    plugin TEXT PRIMARY KEY,
    bytes  INTEGER NOT NULL
) STRICT;
";

/// Version 2: named operators and their console sign-ins; who asked for an
/// approval; tasks whose approvals the agent's client may give.
const SCHEMA_V2: &str = "
ALTER TABLE task ADD COLUMN approve_in_client INTEGER NOT NULL DEFAULT 0;
ALTER TABLE approval ADD COLUMN in_client INTEGER NOT NULL DEFAULT 0;
ALTER TABLE approval ADD COLUMN asked_by TEXT;
ALTER TABLE approval ADD COLUMN note TEXT;
CREATE TABLE operator (
    name          TEXT PRIMARY KEY,
    role          TEXT NOT NULL,
    password_hash TEXT NOT NULL,
    created_at    INTEGER NOT NULL,
    created_by    TEXT NOT NULL
) STRICT;
CREATE TABLE sign_in (
    cookie_sha256 BLOB PRIMARY KEY,
    operator      TEXT NOT NULL REFERENCES operator(name) ON DELETE CASCADE,
    csrf          TEXT NOT NULL,
    created_at    INTEGER NOT NULL,
    seen_at       INTEGER NOT NULL
) STRICT;
";

/// Brings the tables to [`SCHEMA_VERSION`]. A database from a newer host is
/// refused rather than misread. The version is read inside the write
/// transaction, so two processes starting on a new database at once do not
/// both create the tables.
pub(super) fn migrate(conn: &mut Connection) -> Result<(), String> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(|e| e.to_string())?;
    let version: i64 = tx
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(|e| e.to_string())?;
    if version > SCHEMA_VERSION {
        return Err(format!(
            "schema version {version} is newer than this host's {SCHEMA_VERSION}; use a newer toolhost"
        ));
    }
    if version < 1 {
        tx.execute_batch(&format!("{SCHEMA_V1} PRAGMA user_version = 1;"))
            .map_err(|e| e.to_string())?;
    }
    if version < 2 {
        tx.execute_batch(&format!("{SCHEMA_V2} PRAGMA user_version = 2;"))
            .map_err(|e| e.to_string())?;
    }
    tx.commit().map_err(|e| e.to_string())
}
