//! What an operator does to tasks and approvals, shared by the CLI
//! (`toolhost task …`, `toolhost approval …`) and the admin HTTP API, so
//! both check the same things and show the same JSON.

pub mod accounts;
pub mod admin;

use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::manifest::{Manifest, RiskClass};
use crate::store::{Approval, NewTask, Task, now, rfc3339};

/// Longest a task may live; a longer grant is a standing permission, which
/// tasks are meant to replace.
pub const MAX_TTL: Duration = Duration::from_secs(30 * 24 * 3600);
const MAX_PURPOSE: usize = 1_000;

/// An operator's request that cannot be granted.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    #[error("cannot grant `{0}`: the manifest declares no such tool")]
    UnknownTool(String),
    #[error("cannot grant `{0}`: it is a read tool, which every session may use without a grant")]
    ReadTool(String),
    #[error("cannot pre-approve `{0}`: only destructive tools need approval")]
    NotDestructive(String),
    #[error("cannot pre-approve `{0}`: it is not granted to the task (add --grant {0})")]
    PreApproveUngranted(String),
    #[error("a task needs at least one granted tool (--grant TOOL)")]
    NoGrants,
    #[error("the purpose must be 1 to {MAX_PURPOSE} characters, saying what the task is for")]
    BadPurpose,
    #[error("invalid ttl {0:?}: use a duration like 30m, 2h or 1d, at most 30 days")]
    BadTtl(String),
    #[error("operator_approval and approve_in_client exclude each other: choose who says yes")]
    ApprovalModes,
    #[error("{0} must be at least 1")]
    Zero(&'static str),
    #[error("the task id must be 1 to 128 visible characters without spaces, got {0:?}")]
    BadTaskId(String),
}

/// `--ttl 30m`: a humantime duration, bounded.
pub fn parse_ttl(text: &str) -> Result<Duration, RequestError> {
    let ttl = humantime::parse_duration(text).map_err(|_| RequestError::BadTtl(text.into()))?;
    if ttl.is_zero() || ttl > MAX_TTL {
        return Err(RequestError::BadTtl(text.into()));
    }
    Ok(ttl)
}

/// Checks every granted and pre-approved tool against the manifest.
pub fn check_grants(
    manifest: &Manifest,
    grants: &[String],
    pre_approve: &[String],
) -> Result<(), RequestError> {
    for name in grants {
        match manifest.tool(name).map(|(_, decl)| decl.risk) {
            None => return Err(RequestError::UnknownTool(name.clone())),
            Some(RiskClass::Read) => return Err(RequestError::ReadTool(name.clone())),
            Some(_) => {}
        }
    }
    for name in pre_approve {
        match manifest.tool(name).map(|(_, decl)| decl.risk) {
            None => return Err(RequestError::UnknownTool(name.clone())),
            Some(RiskClass::Destructive) => {}
            Some(_) => return Err(RequestError::NotDestructive(name.clone())),
        }
        if !grants.contains(name) {
            return Err(RequestError::PreApproveUngranted(name.clone()));
        }
    }
    Ok(())
}

/// The id of an ad-hoc task (`serve --task ID`).
pub fn check_task_id(id: &str) -> Result<(), RequestError> {
    let visible = id.chars().all(|c| c.is_ascii_graphic());
    if id.is_empty() || id.len() > 128 || !visible {
        return Err(RequestError::BadTaskId(id.to_string()));
    }
    Ok(())
}

/// A request to open a task, as the admin API receives it (the CLI builds
/// the same from its flags).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpenTask {
    pub purpose: String,
    pub grants: Vec<String>,
    pub ttl: String,
    #[serde(default)]
    pub max_calls: Option<u64>,
    #[serde(default)]
    pub writes_per_hour: Option<u32>,
    #[serde(default)]
    pub pre_approve: Vec<String>,
    /// Destructive calls are approved by an operator only, never through
    /// the agent's client.
    #[serde(default)]
    pub operator_approval: bool,
    /// Destructive calls may be approved by the agent's own client in a
    /// form (for attended use, where the client is the person).
    #[serde(default)]
    pub approve_in_client: bool,
}

impl OpenTask {
    /// Vets the request into what the store records.
    pub fn vet(self, manifest: &Manifest, opened_by: String) -> Result<NewTask, RequestError> {
        let purpose = self.purpose.trim().to_string();
        if purpose.is_empty() || purpose.chars().count() > MAX_PURPOSE {
            return Err(RequestError::BadPurpose);
        }
        if self.grants.is_empty() {
            return Err(RequestError::NoGrants);
        }
        if self.operator_approval && self.approve_in_client {
            return Err(RequestError::ApprovalModes);
        }
        check_grants(manifest, &self.grants, &self.pre_approve)?;
        if self.max_calls == Some(0) {
            return Err(RequestError::Zero("max_calls"));
        }
        if self.writes_per_hour == Some(0) {
            return Err(RequestError::Zero("writes_per_hour"));
        }
        let mut grants = self.grants;
        grants.sort();
        grants.dedup();
        let mut pre_approved = self.pre_approve;
        pre_approved.sort();
        pre_approved.dedup();
        Ok(NewTask {
            purpose,
            opened_by,
            grants,
            pre_approved,
            ttl: parse_ttl(&self.ttl)?,
            max_calls: self.max_calls,
            writes_per_hour: self.writes_per_hour,
            operator_approval: self.operator_approval,
            approve_in_client: self.approve_in_client,
        })
    }
}

/// A task as operators see it, in the CLI's `--json` and the admin API.
pub fn task_json(task: &Task) -> Value {
    json!({
        "id": task.id,
        "state": task.state(now()),
        "purpose": task.purpose,
        "opened_by": task.opened_by,
        "opened_at": rfc3339(task.opened_at),
        "expires_at": rfc3339(task.expires_at),
        "grants": task.grants,
        "pre_approved": task.pre_approved,
        "max_calls": task.max_calls,
        "calls_used": task.calls_used,
        "writes_per_hour": task.writes_per_hour,
        "revoked_at": task.revoked_at.map(rfc3339),
        "revoked_by": task.revoked_by,
        "ad_hoc": task.ad_hoc,
        "operator_approval": task.operator_approval,
        "approve_in_client": task.approve_in_client,
    })
}

/// An approval as operators see it.
pub fn approval_json(approval: &Approval) -> Value {
    json!({
        "id": approval.id,
        "state": approval.state,
        "task": approval.task_id,
        "tool": approval.tool,
        "summary": approval.summary,
        "arguments": approval.arguments,
        "requested_at": rfc3339(approval.requested_at),
        "expires_at": rfc3339(approval.expires_at),
        "decided_at": approval.decided_at.map(rfc3339),
        "asked_by": approval.asked_by,
        "note": approval.note,
        "decided_by": approval.decided_by,
        "channel": approval.channel,
    })
}
