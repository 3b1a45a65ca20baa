//! The store as every caller sees it: each change an operator or a human
//! approver makes (a task opened, revoked, extended; an approval asked for
//! or decided; plugin state moved) is recorded in the trail, whichever door
//! it came through (CLI, admin API, MCP client).
//!
//! A change is made first and recorded after, and a failed record does not
//! undo it: revoking a task or denying an approval must work even when the
//! trail is down. The failure is logged; the tool calls themselves are what
//! the host refuses to make unrecorded (see `dispatch`).

use std::sync::Arc;
use std::time::Duration;

use super::{Audit, Event};
use crate::store::{
    Account, Approval, ApprovalRequest, Charge, ChargeRefusal, Charged, Decision, NewTask, SignIn,
    SignInLimits, StateError, Store, StoreError, Task, TaskToken, rfc3339,
};

/// A [`Store`] that records operator decisions in the audit trail.
pub struct AuditedStore {
    inner: Arc<dyn Store>,
    audit: Audit,
}

impl AuditedStore {
    pub fn new(inner: Arc<dyn Store>, audit: Audit) -> AuditedStore {
        AuditedStore { inner, audit }
    }

    async fn record(&self, event: Event) {
        if let Err(e) = self.audit.record_durable(event).await {
            tracing::error!(
                "an operator decision was made but not recorded in the audit trail: {e}"
            );
        }
    }
}

fn task_opened(task: &Task) -> Event {
    Event::TaskOpened {
        task: task.id.clone(),
        purpose: task.purpose.clone(),
        by: task.opened_by.clone(),
        grants: task.grants.clone(),
        pre_approved: task.pre_approved.clone(),
        expires: rfc3339(task.expires_at),
        max_calls: task.max_calls,
        writes_per_hour: task.writes_per_hour,
        operator_approval: task.operator_approval,
        approve_in_client: task.approve_in_client,
        ad_hoc: task.ad_hoc,
    }
}

#[async_trait::async_trait]
impl Store for AuditedStore {
    async fn open_task(&self, task: NewTask) -> Result<(Task, TaskToken), StoreError> {
        let (task, token) = self.inner.open_task(task).await?;
        self.record(task_opened(&task)).await;
        Ok((task, token))
    }

    async fn ad_hoc_task(
        &self,
        id: &str,
        grants: &[String],
        ttl: Duration,
    ) -> Result<Task, StoreError> {
        let task = self.inner.ad_hoc_task(id, grants, ttl).await?;
        self.record(task_opened(&task)).await;
        Ok(task)
    }

    async fn task(&self, id: &str) -> Result<Option<Task>, StoreError> {
        self.inner.task(id).await
    }

    async fn tasks(&self) -> Result<Vec<Task>, StoreError> {
        self.inner.tasks().await
    }

    async fn recent_tasks(&self, ended: u32) -> Result<Vec<Task>, StoreError> {
        self.inner.recent_tasks(ended).await
    }

    async fn revoke_task(&self, id: &str, by: &str) -> Result<Task, StoreError> {
        let task = self.inner.revoke_task(id, by).await?;
        self.record(Event::TaskRevoked {
            task: task.id.clone(),
            by: by.to_string(),
        })
        .await;
        Ok(task)
    }

    async fn extend_task(&self, id: &str, ttl: Duration, by: &str) -> Result<Task, StoreError> {
        let task = self.inner.extend_task(id, ttl, by).await?;
        self.record(Event::TaskExtended {
            task: task.id.clone(),
            by: by.to_string(),
            expires: rfc3339(task.expires_at),
        })
        .await;
        Ok(task)
    }

    async fn authenticate(&self, token: &str) -> Result<Option<Task>, StoreError> {
        self.inner.authenticate(token).await
    }

    async fn charge(
        &self,
        task_id: &str,
        tool: &str,
        charge: Charge<'_>,
    ) -> Result<Result<Charged, ChargeRefusal>, StoreError> {
        self.inner.charge(task_id, tool, charge).await
    }

    async fn request_approval(&self, request: ApprovalRequest) -> Result<Approval, StoreError> {
        let approval = self.inner.request_approval(request).await?;
        self.record(Event::ApprovalRequested {
            approval: approval.id.clone(),
            task: approval.task_id.clone(),
            tool: approval.tool.clone(),
            summary: approval.summary.clone(),
            expires: rfc3339(approval.expires_at),
        })
        .await;
        Ok(approval)
    }

    async fn decide(
        &self,
        id: &str,
        decision: Decision,
        by: &str,
        channel: &str,
        note: Option<&str>,
    ) -> Result<Approval, StoreError> {
        let approval = self.inner.decide(id, decision, by, channel, note).await?;
        self.record(Event::ApprovalDecided {
            approval: approval.id.clone(),
            task: approval.task_id.clone(),
            tool: approval.tool.clone(),
            decision: approval.state.as_str().to_string(),
            by: by.to_string(),
            channel: channel.to_string(),
            note: note.map(str::to_string),
        })
        .await;
        Ok(approval)
    }

    async fn take_denial(
        &self,
        task_id: &str,
        binding: &str,
    ) -> Result<Option<Approval>, StoreError> {
        self.inner.take_denial(task_id, binding).await
    }

    async fn approval(&self, id: &str) -> Result<Option<Approval>, StoreError> {
        self.inner.approval(id).await
    }

    async fn approvals(&self, pending_only: bool) -> Result<Vec<Approval>, StoreError> {
        self.inner.approvals(pending_only).await
    }

    async fn closed_approvals(&self, count: u32) -> Result<Vec<Approval>, StoreError> {
        self.inner.closed_approvals(count).await
    }

    async fn state_get(&self, plugin: &str, key: &str) -> Result<Option<String>, StateError> {
        self.inner.state_get(plugin, key).await
    }

    async fn state_set(
        &self,
        plugin: &str,
        key: &str,
        value: &str,
        quota: u64,
    ) -> Result<(), StateError> {
        self.inner.state_set(plugin, key, value, quota).await
    }

    async fn state_compare_and_set(
        &self,
        plugin: &str,
        key: &str,
        expected: Option<&str>,
        value: &str,
        quota: u64,
    ) -> Result<bool, StateError> {
        self.inner
            .state_compare_and_set(plugin, key, expected, value, quota)
            .await
    }

    async fn state_delete(&self, plugin: &str, key: &str) -> Result<bool, StateError> {
        self.inner.state_delete(plugin, key).await
    }

    async fn state_list(&self, plugin: &str, prefix: &str) -> Result<Vec<String>, StateError> {
        self.inner.state_list(plugin, prefix).await
    }

    async fn state_rename(
        &self,
        plugin: &str,
        from: &str,
        to: &str,
        by: &str,
    ) -> Result<(), StoreError> {
        self.inner.state_rename(plugin, from, to, by).await?;
        self.record(Event::PluginStateMoved {
            plugin: plugin.to_string(),
            from: from.to_string(),
            to: to.to_string(),
            by: by.to_string(),
        })
        .await;
        Ok(())
    }

    async fn add_account(&self, account: &Account) -> Result<(), StoreError> {
        self.inner.add_account(account).await?;
        self.record(Event::OperatorAdded {
            operator: account.name.clone(),
            role: account.role.as_str().to_string(),
            by: account.created_by.clone(),
        })
        .await;
        Ok(())
    }

    async fn account(&self, name: &str) -> Result<Option<Account>, StoreError> {
        self.inner.account(name).await
    }

    async fn accounts(&self) -> Result<Vec<Account>, StoreError> {
        self.inner.accounts().await
    }

    async fn remove_account(&self, name: &str, by: &str) -> Result<(), StoreError> {
        self.inner.remove_account(name, by).await?;
        self.record(Event::OperatorRemoved {
            operator: name.to_string(),
            by: by.to_string(),
        })
        .await;
        Ok(())
    }

    async fn set_password(
        &self,
        name: &str,
        password_hash: &str,
        by: &str,
    ) -> Result<(), StoreError> {
        self.inner.set_password(name, password_hash, by).await?;
        self.record(Event::OperatorPasswordChanged {
            operator: name.to_string(),
            by: by.to_string(),
        })
        .await;
        Ok(())
    }

    async fn open_sign_in(
        &self,
        cookie_sha256: &[u8; 32],
        operator: &str,
        csrf: &str,
    ) -> Result<(), StoreError> {
        self.inner.open_sign_in(cookie_sha256, operator, csrf).await
    }

    async fn sign_in(
        &self,
        cookie_sha256: &[u8; 32],
        limits: SignInLimits,
    ) -> Result<Option<SignIn>, StoreError> {
        self.inner.sign_in(cookie_sha256, limits).await
    }

    async fn close_sign_in(&self, cookie_sha256: &[u8; 32]) -> Result<(), StoreError> {
        self.inner.close_sign_in(cookie_sha256).await
    }
}
