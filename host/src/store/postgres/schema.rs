//! The tables, as numbered migrations.

/// The newest schema this host knows; see [`MIGRATIONS`].
pub const SCHEMA_VERSION: i64 = 2;

/// Each entry brings the schema from the version before it to its own.
/// Entries are never edited once released; a change is a new entry.
pub(super) const MIGRATIONS: &[(i64, &str)] = &[
    (
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
    ),
    // Named operators and their console sign-ins; who asked for an approval;
    // tasks whose approvals the agent's client may give.
    (
        2,
        "
ALTER TABLE task ADD COLUMN approve_in_client BOOLEAN NOT NULL DEFAULT false;
ALTER TABLE approval ADD COLUMN in_client BOOLEAN NOT NULL DEFAULT false;
ALTER TABLE approval ADD COLUMN asked_by TEXT;
ALTER TABLE approval ADD COLUMN note TEXT;
CREATE TABLE operator (
    name          TEXT PRIMARY KEY,
    role          TEXT NOT NULL,
    password_hash TEXT NOT NULL,
    created_at    BIGINT NOT NULL,
    created_by    TEXT NOT NULL
);
CREATE TABLE sign_in (
    cookie_sha256 BYTEA PRIMARY KEY,
    operator      TEXT NOT NULL REFERENCES operator(name) ON DELETE CASCADE,
    csrf          TEXT NOT NULL,
    created_at    BIGINT NOT NULL,
    seen_at       BIGINT NOT NULL
);
",
    ),
];

/// Any 64-bit number that other users of the database are unlikely to
/// lock: it orders hosts migrating the same database at once.
pub(super) const MIGRATION_LOCK: i64 = 0x746f_6f6c_686f_7374;
