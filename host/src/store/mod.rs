//! The host's durable state: tasks and their tokens, call budgets, approvals
//! of destructive calls, and the plugins' key-value state.
//!
//! Everything goes through the [`Store`] trait, with two backends:
//! [`sqlite`], embedded, one file for the processes of one machine, and
//! [`postgres`], one database for a fleet of replicas. Every method that
//! writes is one transaction: a counter is checked and charged in the same
//! step, so concurrent calls from any number of sessions, processes or
//! replicas sharing the database never overspend a budget.
//!
//! The trait is async because a PostgreSQL round trip must not hold a worker
//! thread. The SQLite backend does its work inline: its statements are
//! indexed and local, far cheaper than a hop to the blocking pool. A writer
//! in another process holding the database's lock makes an operation wait
//! for it asleep on the runtime, not on the thread (see [`sqlite`]).

pub mod accounts;
pub mod postgres;
pub mod sqlite;
mod token;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;

pub use accounts::{Account, Role, SignIn, SignInLimits};
pub use sqlite::SqliteStore;
pub use token::TaskToken;

/// Seconds since the Unix epoch; the store's one time unit.
pub type UnixSecs = i64;

/// Now, in the store's time unit.
pub fn now() -> UnixSecs {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// A time for people: RFC 3339, UTC, whole seconds.
pub fn rfc3339(at: UnixSecs) -> String {
    let t = UNIX_EPOCH + Duration::from_secs(at.max(0) as u64);
    humantime::format_rfc3339_seconds(t).to_string()
}

/// Where a task stands. Only an open task grants anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskState {
    Open,
    Revoked,
    Expired,
}

/// A task: the unit an operator grants write and destructive tools to.
#[derive(Debug, Clone, Serialize)]
pub struct Task {
    pub id: String,
    pub purpose: String,
    pub opened_by: String,
    pub opened_at: UnixSecs,
    pub expires_at: UnixSecs,
    /// Write and destructive tools the task may call.
    pub grants: Vec<String>,
    /// Destructive tools whose calls need no per-call approval.
    pub pre_approved: Vec<String>,
    /// Total calls the task may make, read calls included.
    pub max_calls: Option<u64>,
    /// Write and destructive calls the task may make in any hour.
    pub writes_per_hour: Option<u32>,
    pub calls_used: u64,
    pub revoked_at: Option<UnixSecs>,
    pub revoked_by: Option<String>,
    /// Opened by `serve --task`, without a token.
    pub ad_hoc: bool,
    /// Destructive calls are approved by an operator only, never through
    /// the agent's client.
    pub operator_approval: bool,
    /// Destructive calls may be approved by the agent's own client through
    /// form-mode elicitation (`--approve-in-client`): for attended use,
    /// where the client is the person.
    pub approve_in_client: bool,
}

impl TaskState {
    pub fn as_str(self) -> &'static str {
        match self {
            TaskState::Open => "open",
            TaskState::Revoked => "revoked",
            TaskState::Expired => "expired",
        }
    }
}

impl Task {
    /// The state at time `at`.
    pub fn state(&self, at: UnixSecs) -> TaskState {
        if self.revoked_at.is_some() {
            TaskState::Revoked
        } else if at >= self.expires_at {
            TaskState::Expired
        } else {
            TaskState::Open
        }
    }

    pub fn grants(&self, tool: &str) -> bool {
        self.grants.iter().any(|g| g == tool)
    }

    pub fn pre_approves(&self, tool: &str) -> bool {
        self.pre_approved.iter().any(|g| g == tool)
    }

    /// Why the task cannot pay for a call of `tool` at time `at` (`writes`:
    /// a write or destructive call), before the write rate and approvals
    /// are looked at; `None` if it can so far. Both backends ask this under
    /// their lock. For a read, each backend's one-statement charge states
    /// the same conditions in SQL (`store/sqlite/mod.rs`,
    /// `store/postgres/operations.rs`): a change here must be made there.
    pub(crate) fn refusal(&self, at: UnixSecs, tool: &str, writes: bool) -> Option<ChargeRefusal> {
        match self.state(at) {
            TaskState::Open => {}
            closed => return Some(ChargeRefusal::Closed(closed)),
        }
        if writes && !self.grants(tool) {
            return Some(ChargeRefusal::NotGranted);
        }
        self.max_calls
            .filter(|&max| self.calls_used >= max)
            .map(|max_calls| ChargeRefusal::CallsExhausted { max_calls })
    }
}

/// What an operator asks for when opening a task. The caller has checked
/// the tools against the manifest.
#[derive(Debug, Clone)]
pub struct NewTask {
    pub purpose: String,
    pub opened_by: String,
    pub grants: Vec<String>,
    pub pre_approved: Vec<String>,
    pub ttl: Duration,
    pub max_calls: Option<u64>,
    pub writes_per_hour: Option<u32>,
    pub operator_approval: bool,
    pub approve_in_client: bool,
}

/// What one call costs a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Charge<'a> {
    /// A read call: counts against the total budget only.
    Read,
    /// A write call: needs a grant; also counts against the write rate.
    Write,
    /// A destructive call: a write that also uses up the human's approval
    /// of this exact call (`binding`), unless the task pre-approved the tool.
    Destructive { binding: &'a str },
}

/// A call the task paid for.
#[derive(Debug, Clone)]
pub struct Charged {
    /// The task's calls after the charge, this one included.
    pub calls_used: u64,
    /// The approval a destructive call used up; `None` when the task
    /// pre-approved the tool, and for other calls.
    pub approval: Option<String>,
}

/// Why a task cannot pay for a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChargeRefusal {
    /// The task is revoked or expired.
    Closed(TaskState),
    /// The task grants no such tool.
    NotGranted,
    /// All `max_calls` are used.
    CallsExhausted { max_calls: u64 },
    /// `writes_per_hour` writes happened in the last hour.
    WriteRateExhausted { per_hour: u32 },
    /// A destructive call with no approved, unused approval of its binding.
    ApprovalMissing,
}

/// Where an approval of one destructive call stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalState {
    /// Waiting for a human.
    Pending,
    /// A human said yes; the next identical call runs, once.
    Approved,
    /// A human said no.
    Denied,
    /// The approved call ran.
    Used,
    /// Nobody decided (or nobody used the yes) in time.
    Expired,
}

impl ApprovalState {
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalState::Pending => "pending",
            ApprovalState::Approved => "approved",
            ApprovalState::Denied => "denied",
            ApprovalState::Used => "used",
            ApprovalState::Expired => "expired",
        }
    }

    /// The state at time `at`. Expiry is a matter of time, not of a write:
    /// a pending or approved row past `expires_at` reads as expired.
    pub(crate) fn at(self, expires_at: UnixSecs, at: UnixSecs) -> ApprovalState {
        let live = matches!(self, ApprovalState::Pending | ApprovalState::Approved);
        if live && at >= expires_at {
            ApprovalState::Expired
        } else {
            self
        }
    }

    /// An unknown state reads as expired: nothing may approve or use it.
    fn parse(s: &str) -> ApprovalState {
        match s {
            "pending" => ApprovalState::Pending,
            "approved" => ApprovalState::Approved,
            "denied" => ApprovalState::Denied,
            "used" => ApprovalState::Used,
            _ => ApprovalState::Expired,
        }
    }
}

/// A human's decision on one destructive call, bound to the exact task, tool
/// and arguments it was asked for.
#[derive(Debug, Clone, Serialize)]
pub struct Approval {
    pub id: String,
    pub task_id: String,
    pub tool: String,
    /// SHA-256 of the tool name and the canonical JSON of the arguments.
    #[serde(skip)]
    pub binding: String,
    /// The arguments as the call gave them, for the human to read.
    pub arguments: serde_json::Value,
    /// The action restated in plain words.
    pub summary: String,
    pub state: ApprovalState,
    pub requested_at: UnixSecs,
    pub expires_at: UnixSecs,
    pub decided_at: Option<UnixSecs>,
    pub decided_by: Option<String>,
    /// How the decision was made: `cli`, `admin_api`, `console`,
    /// `elicitation`, `mrtr`.
    pub channel: Option<String>,
    /// Copied from the task: only an operator may decide.
    pub operator_only: bool,
    /// Copied from the task: the agent's client may decide (form mode).
    pub in_client: bool,
    /// Who asked: the session and the client as it names itself.
    pub asked_by: Option<String>,
    /// What the person who decided wrote beside the decision.
    pub note: Option<String>,
}

impl Approval {
    /// The state and expiry that `decision` at `at` gives this approval, as
    /// both backends write them, or why it cannot be decided (it was).
    fn decided(
        &self,
        decision: Decision,
        at: UnixSecs,
    ) -> Result<(&'static str, UnixSecs), StoreError> {
        if self.state != ApprovalState::Pending {
            return Err(StoreError::AlreadyDecided {
                id: self.id.clone(),
                state: self.state,
            });
        }
        Ok(match decision {
            Decision::Approve => ("approved", at + APPROVED_FOR_SECS),
            Decision::Deny => ("denied", self.expires_at),
        })
    }
}

/// What asking for an approval needs.
#[derive(Debug, Clone)]
pub struct ApprovalRequest {
    pub task_id: String,
    pub tool: String,
    pub binding: String,
    pub arguments: serde_json::Value,
    pub summary: String,
    pub ttl: Duration,
    pub operator_only: bool,
    pub in_client: bool,
    pub asked_by: Option<String>,
}

/// A human's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Approve,
    Deny,
}

/// Why a plugin's state operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("invalid key")]
    InvalidKey,
    #[error("the plugin's state quota is exceeded")]
    QuotaExceeded,
    #[error("state store unavailable: {0}")]
    Unavailable(String),
}

impl From<StoreError> for StateError {
    fn from(e: StoreError) -> StateError {
        StateError::Unavailable(e.to_string())
    }
}

/// A store operation that failed.
///
/// Messages carry their cause in the text, not as a `source`, so that a
/// chain printer does not repeat it.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot open the state database {}: {cause}", path.display())]
    Open {
        path: std::path::PathBuf,
        cause: String,
    },
    #[error("state database: {0}")]
    Database(String),
    /// The database server cannot be reached or dropped the connection; the
    /// operation did not happen (or, for a commit cut short, the database
    /// decides). Retryable.
    #[error("the database cannot be reached: {0}")]
    Unavailable(String),
    /// Every pooled connection stayed in use for the pool's wait time
    /// (PostgreSQL), or another process held the database's write lock for
    /// as long as an operation waits for it (SQLite). Retryable.
    #[error(
        "the database stayed busy for {} ms (its connections all in use, a checkpoint on a slow disk, or another process holding the write lock)",
        .0.as_millis()
    )]
    Busy(Duration),
    #[error(
        "the database's schema is version {found}, newer than this host's {known}; use a newer toolhost"
    )]
    SchemaTooNew { found: i64, known: i64 },
    #[error(
        "the database's schema is version {found}, older than this toolhost's {known}; start a replica of this version (toolhost serve) to migrate it, or use the older toolhost"
    )]
    SchemaTooOld { found: i64, known: i64 },
    /// Another checkpoint already holds this replica's name and seq: two
    /// replicas share a name, or the replica's trail was started over.
    #[error(
        "the database already holds a different audit checkpoint {seq} of replica {replica}: two replicas share that name, or its trail was started over"
    )]
    CheckpointClash { replica: String, seq: u64 },
    #[error("the OS random source failed: {0}")]
    Random(String),
    #[error("no task `{0}`")]
    NoTask(String),
    #[error("no approval `{0}`")]
    NoApproval(String),
    #[error("task `{0}` has {1} approvals waiting for a human; decide those first")]
    TooManyPending(String, usize),
    #[error("task `{id}` is {}: {what}", state.as_str())]
    TaskClosed {
        id: String,
        state: TaskState,
        what: &'static str,
    },
    #[error(
        "task `{0}` already exists and was opened with `toolhost task open`; choose another id"
    )]
    TaskExists(String),
    #[error("approval `{id}` is already {}", state.as_str())]
    AlreadyDecided { id: String, state: ApprovalState },
    #[error("no key `{0}` in the plugin's state")]
    NoKey(String),
    #[error("key `{0}` already exists in the plugin's state; move it away first")]
    KeyExists(String),
    #[error("invalid key `{0}`: 1 to 256 bytes, no control characters")]
    InvalidKey(String),
    #[error("an operator named `{0}` already exists")]
    OperatorExists(String),
    #[error("no operator named `{0}`")]
    NoOperator(String),
}

impl StoreError {
    /// A revoked task asked for again as an ad-hoc one (`serve --task`):
    /// the same refusal from every backend.
    pub(crate) fn revoked_not_served(id: &str) -> StoreError {
        StoreError::TaskClosed {
            id: id.to_string(),
            state: TaskState::Revoked,
            what: "a revoked task cannot be served again",
        }
    }

    /// A revoked task asked to be extended: the same refusal from every
    /// backend.
    pub(crate) fn revoked_not_extended(id: &str) -> StoreError {
        StoreError::TaskClosed {
            id: id.to_string(),
            state: TaskState::Revoked,
            what: "a revoked task cannot be extended; open a new one",
        }
    }
}

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> StoreError {
        // SQLite answers BUSY once the wait for another process's write
        // lock is over.
        if e.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseBusy) {
            return StoreError::Busy(sqlite::BUSY_WAIT);
        }
        StoreError::Database(e.to_string())
    }
}

/// The host's durable state. See the module docs.
#[async_trait::async_trait]
pub trait Store: Send + Sync {
    /// Opens a task and issues its token, which is never stored and cannot
    /// be shown again. The token names this task for the task's whole life:
    /// no backend reissues a token or deletes a task, so a caller may
    /// remember which task a checked token names (the HTTP endpoint does).
    async fn open_task(&self, task: NewTask) -> Result<(Task, TaskToken), StoreError>;
    /// Records the ad-hoc task of `serve --task ID --grant …`: created, or
    /// re-opened with the new grants if an earlier ad-hoc run left it open
    /// or expired. A revoked task stays revoked.
    async fn ad_hoc_task(
        &self,
        id: &str,
        grants: &[String],
        ttl: Duration,
    ) -> Result<Task, StoreError>;
    async fn task(&self, id: &str) -> Result<Option<Task>, StoreError>;
    /// All tasks, newest first.
    async fn tasks(&self) -> Result<Vec<Task>, StoreError>;
    /// Every open task and the newest `ended` of the others (revoked or
    /// expired), newest first: what the console lists, without loading
    /// every task ever opened.
    async fn recent_tasks(&self, ended: u32) -> Result<Vec<Task>, StoreError>;
    async fn revoke_task(&self, id: &str, by: &str) -> Result<Task, StoreError>;
    /// Sets the expiry to `ttl` from now; a revoked task cannot be extended.
    /// `by` names the operator for the audit trail.
    async fn extend_task(&self, id: &str, ttl: Duration, by: &str) -> Result<Task, StoreError>;
    /// The task a token belongs to, whatever its state; `None` for a token
    /// that was never issued.
    async fn authenticate(&self, token: &str) -> Result<Option<Task>, StoreError>;
    /// Checks that the task is open, grants `tool` (read tools need no
    /// grant), has budget left and, for a destructive call, holds an
    /// approval; then charges the call and uses the approval. One
    /// transaction: a refusal changes nothing. A read call, which needs
    /// only an open task with budget left, is checked and charged by one
    /// statement; only when that charges nothing does a second transaction
    /// find out why.
    async fn charge(
        &self,
        task_id: &str,
        tool: &str,
        charge: Charge<'_>,
    ) -> Result<Result<Charged, ChargeRefusal>, StoreError>;

    /// A pending (or approved, unused) approval for the same binding, or a
    /// new pending one.
    async fn request_approval(&self, request: ApprovalRequest) -> Result<Approval, StoreError>;
    /// Records a human's decision on a pending approval: who (`by`),
    /// through what (`channel`), and the note they wrote, if any.
    async fn decide(
        &self,
        id: &str,
        decision: Decision,
        by: &str,
        channel: &str,
        note: Option<&str>,
    ) -> Result<Approval, StoreError>;
    /// A denial of this binding not yet reported to the caller: returned
    /// once, then retired, so a later identical call asks again.
    async fn take_denial(
        &self,
        task_id: &str,
        binding: &str,
    ) -> Result<Option<Approval>, StoreError>;
    async fn approval(&self, id: &str) -> Result<Option<Approval>, StoreError>;
    /// Approvals, newest first; only pending ones when `pending_only`.
    async fn approvals(&self, pending_only: bool) -> Result<Vec<Approval>, StoreError>;
    /// The newest `count` approvals no longer waiting (decided, used or
    /// expired, whether or not their row says so yet), newest first: what
    /// the console lists as recently decided, without loading every
    /// approval ever asked for.
    async fn closed_approvals(&self, count: u32) -> Result<Vec<Approval>, StoreError>;

    async fn state_get(&self, plugin: &str, key: &str) -> Result<Option<String>, StateError>;
    async fn state_set(
        &self,
        plugin: &str,
        key: &str,
        value: &str,
        quota: u64,
    ) -> Result<(), StateError>;
    async fn state_compare_and_set(
        &self,
        plugin: &str,
        key: &str,
        expected: Option<&str>,
        value: &str,
        quota: u64,
    ) -> Result<bool, StateError>;
    async fn state_delete(&self, plugin: &str, key: &str) -> Result<bool, StateError>;
    async fn state_list(&self, plugin: &str, prefix: &str) -> Result<Vec<String>, StateError>;
    /// Operator only: moves a value to another key of the same plugin (how a
    /// note comes back from the trash). Fails if `to` exists.
    /// `by` names the operator for the audit trail.
    async fn state_rename(
        &self,
        plugin: &str,
        from: &str,
        to: &str,
        by: &str,
    ) -> Result<(), StoreError>;

    /// Adds a named operator; fails if the name is taken.
    async fn add_account(&self, account: &Account) -> Result<(), StoreError>;
    async fn account(&self, name: &str) -> Result<Option<Account>, StoreError>;
    /// Every operator, by name.
    async fn accounts(&self) -> Result<Vec<Account>, StoreError>;
    /// Removes an operator and ends their sign-ins; `by` is who did it,
    /// for the trail.
    async fn remove_account(&self, name: &str, by: &str) -> Result<(), StoreError>;
    /// Replaces an operator's password hash and ends their sign-ins.
    async fn set_password(
        &self,
        name: &str,
        password_hash: &str,
        by: &str,
    ) -> Result<(), StoreError>;
    /// Records a console sign-in under the SHA-256 of its cookie.
    async fn open_sign_in(
        &self,
        cookie_sha256: &[u8; 32],
        operator: &str,
        csrf: &str,
    ) -> Result<(), StoreError>;
    /// The sign-in of a cookie, if it is alive under `limits`; its idle
    /// clock restarts. One that has run out is deleted.
    async fn sign_in(
        &self,
        cookie_sha256: &[u8; 32],
        limits: SignInLimits,
    ) -> Result<Option<SignIn>, StoreError>;
    async fn close_sign_in(&self, cookie_sha256: &[u8; 32]) -> Result<(), StoreError>;
}

/// Keys are bytes the host stores, not paths; these bounds keep them
/// printable and small.
pub fn valid_state_key(key: &str) -> bool {
    !key.is_empty() && key.len() <= 256 && !key.chars().any(char::is_control)
}

/// How long an approved call stays usable after the human said yes.
const APPROVED_FOR_SECS: i64 = 15 * 60;
/// Approvals of one task waiting for a human at once: each is a question to
/// a person, and an agent must not be able to bury them in questions.
pub const MAX_PENDING_PER_TASK: usize = 5;

/// Who runs this process, for `opened_by` and `decided_by` on the CLI.
pub fn operator() -> String {
    let user = std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .unwrap_or_else(|_| "unknown".into());
    format!("cli:{user}")
}

/// A new task or approval id: the prefix and 6 random bytes in hex.
fn random_id(prefix: &str) -> Result<String, StoreError> {
    let mut bytes = [0u8; 6];
    getrandom::fill(&mut bytes).map_err(|e| StoreError::Random(e.to_string()))?;
    Ok(format!("{prefix}-{}", hex::encode(bytes)))
}

/// Tool lists are stored as JSON arrays of names.
fn json_list(items: &[String]) -> String {
    serde_json::to_string(items).expect("a list of strings serialises")
}

fn ttl_secs(ttl: Duration) -> i64 {
    i64::try_from(ttl.as_secs()).unwrap_or(i64::MAX / 2)
}

/// A plugin's bytes of keys and values once `key` holds `value` instead of
/// `current`, given `used` now; refused past `quota`.
fn usage_after(
    used: i64,
    key: &str,
    current: Option<&str>,
    value: &str,
    quota: u64,
) -> Result<u64, StateError> {
    let freed = current.map_or(0, |v| key.len() + v.len()) as u64;
    let after = (used.max(0) as u64).saturating_sub(freed) + (key.len() + value.len()) as u64;
    if after > quota {
        return Err(StateError::QuotaExceeded);
    }
    Ok(after)
}
