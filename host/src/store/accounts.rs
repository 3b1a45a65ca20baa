//! Operator accounts and their console sign-ins, as the store keeps them.
//! Both live in the store so that every replica knows every person and a
//! sign-in on one replica's console holds on the others. Hashing passwords
//! is not the store's business: it keeps what `operator::accounts` made.

use serde::Serialize;

use super::UnixSecs;

/// What a person may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Decides approvals.
    Approver,
    /// Decides approvals, opens, revokes and extends tasks, manages operators.
    Admin,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Approver => "approver",
            Role::Admin => "admin",
        }
    }

    pub fn parse(text: &str) -> Option<Role> {
        match text {
            "approver" => Some(Role::Approver),
            "admin" => Some(Role::Admin),
            _ => None,
        }
    }
}

/// A named operator.
#[derive(Debug, Clone)]
pub struct Account {
    pub name: String,
    pub role: Role,
    /// The password's argon2id hash in PHC string form.
    pub password_hash: String,
    pub created_at: UnixSecs,
    pub created_by: String,
}

/// A live console sign-in, found by the SHA-256 of its cookie.
#[derive(Debug, Clone)]
pub struct SignIn {
    pub operator: String,
    pub role: Role,
    /// The token every state-changing request of this sign-in carries.
    pub csrf: String,
    pub created_at: UnixSecs,
}

/// A sign-in's last use is written at most this often: every console
/// request reads it, and a write per page would contend with call charges.
/// Its idle expiry is so this much less exact.
pub const SEEN_EVERY_SECS: i64 = 60;
/// Sign-ins older than this are deleted when the next one opens: longer
/// than any sign-in may last, so only abandoned ones go.
pub const STALE_SIGN_IN_SECS: i64 = 2 * 24 * 3600;

/// How long sign-ins last.
#[derive(Debug, Clone, Copy)]
pub struct SignInLimits {
    /// Without a request for this long, the sign-in ends.
    pub idle_secs: i64,
    /// Whatever the activity, it ends this long after it began.
    pub max_secs: i64,
}

impl SignInLimits {
    /// Whether a sign-in begun at `created_at` and last used at `seen_at`
    /// still holds at `at`.
    pub fn alive(&self, created_at: UnixSecs, seen_at: UnixSecs, at: UnixSecs) -> bool {
        at < seen_at.saturating_add(self.idle_secs) && at < created_at.saturating_add(self.max_secs)
    }
}
