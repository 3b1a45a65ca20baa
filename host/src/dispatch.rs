//! The path of one `tools/call`, after the transport and before the reply:
//! catalog lookup → argument validation → policy → sandbox → result checks.
//!
//! It returns a typed [`CallError`] for every way a call can fail; turning
//! that into what the client sees is the MCP layer's one mapping.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use crate::audit::{Audit, CallRecord, Event, record};
use crate::catalog::{Catalog, CatalogTool, CheckError, ToolSchema};
use crate::gate::Refusal;
use crate::manifest::{InstanceMode, RiskClass, ToolName};
use crate::metrics::Metrics;
use crate::policy::{self, Denial};
use crate::queue::{Full, Place};
use crate::sandbox::{CallContext, SandboxError, ToolError};
use crate::session::{LiveSessions, Session, Transport};
use crate::store::{ApprovalRequest, Charge, ChargeRefusal, Store, StoreError, TaskState, rfc3339};

/// Guest-controlled: a plugin's error message is cut to this many bytes.
const PLUGIN_MESSAGE_BYTES: usize = 2_048;

/// How long a human has to decide on a pending approval.
pub const APPROVAL_TTL: Duration = Duration::from_secs(15 * 60);

/// Everything a call needs: the catalog, the store that holds tasks,
/// budgets, approvals and plugin state, and the audit trail.
pub struct Toolhost {
    pub catalog: Catalog,
    pub store: Arc<dyn Store>,
    pub audit: Audit,
    /// Where stateless (2026-07-28) requests of a task keep per-session
    /// plugin state: they have no session of their own, so the task is what
    /// ties their calls together. Anonymous stateless requests get fresh
    /// instances.
    task_sessions: Mutex<HashMap<String, TaskSession>>,
    /// How long a task's stateless session is kept with no request (the
    /// HTTP server's `--session-idle`).
    task_session_idle: std::sync::OnceLock<Duration>,
    /// Tasks whose expiry this process has recorded.
    expired: Mutex<HashSet<String>>,
    /// Calls between their start and their outcome record.
    in_flight: AtomicUsize,
    /// The MCP sessions open on this process, for the console.
    pub sessions: LiveSessions,
    /// The console's base URL, when one is served: approval links start
    /// with it.
    pub console_url: std::sync::OnceLock<String>,
    pub metrics: Arc<Metrics>,
}

impl Toolhost {
    /// Calls between their start and their outcome record.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Acquire)
    }

    /// The console page of an approval, if a console is served.
    pub fn approval_page(&self, id: &str) -> Option<String> {
        self.console_url
            .get()
            .map(|base| format!("{base}/approvals/{id}"))
    }

    pub fn new(catalog: Catalog, store: Arc<dyn Store>, audit: Audit) -> Toolhost {
        Toolhost {
            catalog,
            store,
            audit,
            task_sessions: Mutex::new(HashMap::new()),
            task_session_idle: std::sync::OnceLock::new(),
            expired: Mutex::new(HashSet::new()),
            in_flight: AtomicUsize::new(0),
            sessions: LiveSessions::default(),
            console_url: std::sync::OnceLock::new(),
            metrics: Arc::new(Metrics::new()),
        }
    }

    /// Waits (up to `limit`) for running calls to finish, so a stopping
    /// host records their outcomes.
    pub async fn drain(&self, limit: Duration) {
        let deadline = Instant::now() + limit;
        while self.in_flight.load(Ordering::Acquire) > 0 {
            if Instant::now() >= deadline {
                tracing::warn!(
                    calls = self.in_flight.load(Ordering::Acquire),
                    "stopping with calls still running; their outcomes are not recorded"
                );
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Keeps a task's stateless session this long after its last request
    /// (set once, by the HTTP server; [`TASK_SESSION_IDLE`] otherwise).
    pub fn keep_task_sessions_for(&self, idle: Duration) {
        let _ = self.task_session_idle.set(idle);
    }

    /// The shared session of `task`'s stateless requests, for one request:
    /// the lease marks the session used again when the request ends.
    ///
    /// One whose last request ended the idle time ago is dropped with its
    /// instances, like an idle HTTP session, and its task starts afresh; so
    /// are those of every other task that nobody used for as long, whenever
    /// a task's session is made. A task that expired or was revoked is not
    /// used again, and nothing else would free them.
    pub fn task_session<'a>(&'a self, task: &'a str) -> TaskSessionLease<'a> {
        let now = Instant::now();
        let idle = *self.task_session_idle.get().unwrap_or(&TASK_SESSION_IDLE);
        // A session a request still holds is in use, however long ago that
        // request began.
        let live = |kept: &TaskSession| {
            now.duration_since(kept.used) < idle || Arc::strong_count(&kept.session) > 1
        };
        let mut sessions = self.task_sessions.lock().unwrap_or_else(|p| p.into_inner());
        let mut gone = Vec::new();
        if !sessions.get(task).is_some_and(live) {
            gone.extend(sessions.extract_if(|_, kept| !live(kept)));
        }
        let kept = sessions
            .entry(task.to_string())
            .or_insert_with(|| TaskSession {
                session: Arc::new(Session::new(Transport::HttpStateless)),
                used: now,
            });
        kept.used = now;
        let session = kept.session.clone();
        drop(sessions);
        // Their instances are dropped here, not under the lock every
        // stateless request of a task takes.
        drop(gone);
        TaskSessionLease {
            host: self,
            task,
            session,
        }
    }
}

/// How long a task's stateless session is kept with no request, unless the
/// HTTP server says otherwise (the default of `--session-idle`).
pub const TASK_SESSION_IDLE: Duration = Duration::from_secs(5 * 60);

/// A task's stateless session and when a request last used it.
struct TaskSession {
    session: Arc<Session>,
    used: Instant,
}

/// A task's stateless session, held by one request.
pub struct TaskSessionLease<'a> {
    host: &'a Toolhost,
    task: &'a str,
    session: Arc<Session>,
}

impl TaskSessionLease<'_> {
    pub fn session(&self) -> Arc<Session> {
        self.session.clone()
    }
}

impl Drop for TaskSessionLease<'_> {
    /// The idle time counts from the end of the last request, as for an
    /// HTTP session: a call that waited long for an approval leaves a
    /// session as fresh as a quick one.
    fn drop(&mut self) {
        let mut sessions = self
            .host
            .task_sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(kept) = sessions.get_mut(self.task)
            && Arc::ptr_eq(&kept.session, &self.session)
        {
            kept.used = Instant::now();
        }
    }
}

/// Counts a call as running until dropped, however the call ends.
struct InFlight<'a>(&'a AtomicUsize);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Why a call produced no result.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error("unknown tool `{0}`")]
    UnknownTool(String),
    #[error("arguments of `{tool}` do not match its schema: {detail}")]
    InvalidArguments { tool: ToolName, detail: String },
    #[error("`{tool}` ({}) refused: {denial}", risk.as_str())]
    Denied {
        tool: ToolName,
        risk: RiskClass,
        denial: Denial,
        task: Option<String>,
    },
    #[error("`{tool}`: {error}")]
    Sandbox {
        tool: ToolName,
        error: SandboxError,
        /// The call ran in the session's instance, which was discarded.
        session_reset: bool,
    },
    #[error("`{tool}`: {full}")]
    Busy { tool: ToolName, full: Full },
    #[error("`{tool}` returned {size} bytes, more than its limit of {limit}")]
    OutputTooLarge {
        tool: ToolName,
        size: usize,
        limit: usize,
    },
    #[error("`{tool}` returned an invalid result: {detail}")]
    InvalidOutput { tool: ToolName, detail: String },
    #[error("`{tool}` failed: {} ({})", error.code, error.message)]
    Plugin { tool: ToolName, error: ToolError },
    /// The host refused one of the call's outbound requests; this replaces
    /// whatever error the plugin made of it.
    #[error("`{tool}`: {}", refusal.detail)]
    Network { tool: ToolName, refusal: Refusal },
    #[error("`{tool}`: the audit trail cannot be written ({detail})")]
    AuditUnavailable {
        tool: ToolName,
        /// The call ran and only its outcome went unrecorded.
        ran: bool,
        detail: String,
    },
}

impl CallError {
    /// The `code` the client is given, and the audit trail records.
    pub fn code(&self) -> Cow<'static, str> {
        match self {
            CallError::UnknownTool(_) => "unknown_tool".into(),
            CallError::InvalidArguments { .. } => "invalid_arguments".into(),
            CallError::Denied { denial, .. } => match denial {
                Denial::NotGranted => "not_granted",
                Denial::TaskClosed(_) => "grant_expired",
                Denial::CallsExhausted { .. } | Denial::WriteRateExhausted { .. } => {
                    "budget_exhausted"
                }
                Denial::ApprovalRequired(_) => "approval_required",
                Denial::ApprovalDenied(_) => "approval_denied",
                Denial::TooManyPending(_) => "too_many_pending",
                Denial::StoreUnavailable(_) => "store_unavailable",
                Denial::StoreBusy(_) => "busy",
            }
            .into(),
            CallError::Sandbox { error, .. } => match error {
                SandboxError::Timeout(_) => "timeout",
                SandboxError::OutOfMemory(_) => "out_of_memory",
                SandboxError::OutOfFuel(_) => "out_of_fuel",
                SandboxError::Trap(_) | SandboxError::Load(_) => "plugin_trap",
                SandboxError::Busy(_) => "busy",
            }
            .into(),
            CallError::Busy { .. } => "busy".into(),
            CallError::OutputTooLarge { .. } => "output_too_large".into(),
            CallError::InvalidOutput { .. } => "invalid_output".into(),
            CallError::Plugin { error, .. } => error.code.clone().into(),
            CallError::Network { refusal, .. } => refusal.code.into(),
            CallError::AuditUnavailable { .. } => "audit_unavailable".into(),
        }
    }

    /// The approval a destructive call asked for or was refused by.
    fn approval(&self) -> Option<String> {
        match self {
            CallError::Denied {
                denial: Denial::ApprovalRequired(a) | Denial::ApprovalDenied(a),
                ..
            } => Some(a.id.clone()),
            _ => None,
        }
    }
}

impl Toolhost {
    /// Runs `name` with `arguments` for `session`, bound to `task` (if any),
    /// or says why not; either way the outcome is in the audit trail. A
    /// write or destructive call's start and outcome are on disk before the
    /// plugin runs and before the result is returned.
    pub async fn call(
        &self,
        session: &Session,
        task: Option<&str>,
        name: &str,
        arguments: Option<Map<String, Value>>,
    ) -> Result<Map<String, Value>, CallError> {
        let began = Instant::now();
        session.count_call();
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        let _in_flight = InFlight(&self.in_flight);
        // MCP lets a client omit `arguments`; the schema decides if that is fine.
        let arguments = Value::Object(arguments.unwrap_or_default());
        let tool = self.catalog.tool(name);
        let plugin = tool.map(|t| &self.catalog.plugins[t.plugin]);
        let mut record = CallRecord {
            call: uuid::Uuid::new_v4().to_string(),
            session: session.id().to_string(),
            transport: session.transport().as_str().to_string(),
            // A name no plugin offers is the caller's, as long as it likes.
            tool: record::bounded_text(name),
            risk: tool.map(|t| t.risk.as_str().to_string()),
            task: task.map(str::to_string),
            arguments: record::bounded(&arguments),
            arguments_sha256: record::sha256_hex(record::canonical(&arguments).as_bytes()),
            plugin: plugin.map(|p| p.prepared.shared().name.to_string()),
            plugin_sha256: plugin.map(|p| p.sha256.clone()),
            outcome: None,
            retryable: None,
            duration_us: None,
            grant: None,
            outcome_by_plugin: false,
        };
        let mut started = false;
        let outcome = match tool {
            None => Err(CallError::UnknownTool(name.to_string())),
            Some(tool) => {
                self.run_checked(session, task, tool, &arguments, &mut record, &mut started)
                    .await
            }
        };
        record.outcome = Some(match &outcome {
            Ok(_) => "ok".into(),
            Err(e) => e.code().into_owned(),
        });
        record.outcome_by_plugin = matches!(outcome, Err(CallError::Plugin { .. }));
        if let Some(approval) = outcome.as_ref().err().and_then(CallError::approval) {
            record.grant = Some(format!("approval:{approval}"));
        }
        record.duration_us = Some(began.elapsed().as_micros().try_into().unwrap_or(u64::MAX));
        if !started {
            self.audit.record(Event::ToolCall(record));
            return outcome;
        }
        match self.audit.record_durable(Event::ToolCall(record)).await {
            Ok(_) => outcome,
            Err(detail) => {
                tracing::error!(
                    tool = name,
                    "a call ran but its outcome is not in the audit trail: {detail}"
                );
                Err(CallError::AuditUnavailable {
                    tool: tool
                        .map(|t| t.name.clone())
                        .expect("started calls have a tool"),
                    ran: true,
                    detail,
                })
            }
        }
    }

    /// Validation, policy, the durable start record, the sandbox, the
    /// result checks.
    async fn run_checked(
        &self,
        session: &Session,
        task: Option<&str>,
        tool: &Arc<CatalogTool>,
        arguments: &Value,
        record: &mut CallRecord,
        started: &mut bool,
    ) -> Result<Map<String, Value>, CallError> {
        tool.input.check(arguments).map_err(|e| match e {
            CheckError::Mismatch(detail) => CallError::InvalidArguments {
                tool: tool.name.clone(),
                detail,
            },
            CheckError::Unusable(reason) => CallError::Sandbox {
                tool: tool.name.clone(),
                error: SandboxError::Load(format!("the input schema: {reason}")),
                session_reset: false,
            },
        })?;
        // The output is checked after the plugin acted: a schema that no
        // longer compiles must refuse the call before it runs, is charged
        // or uses an approval.
        if let Some(Err(CheckError::Unusable(reason))) = tool.output.as_ref().map(ToolSchema::ready)
        {
            return Err(CallError::Sandbox {
                tool: tool.name.clone(),
                error: SandboxError::Load(format!("the output schema: {reason}")),
                session_reset: false,
            });
        }
        let acts = tool.risk != RiskClass::Read;
        let unavailable = |detail: String| CallError::AuditUnavailable {
            tool: tool.name.clone(),
            ran: false,
            detail,
        };
        // A trail far behind its disk refuses every call, reads included,
        // rather than hold their records in memory for as long as it is slow.
        if let Some(queued) = self.audit.behind() {
            return Err(unavailable(format!(
                "{queued} records wait for a slow disk"
            )));
        }
        // Known trouble refuses before the task is charged.
        if acts && !self.audit.healthy() {
            return Err(unavailable("its last write failed".into()));
        }
        // So does a plugin with no room: a retry after `busy` must not need
        // a second budget unit or a second approval.
        let place = self.catalog.plugins[tool.plugin]
            .queue
            .reserve(session.tenant(task))
            .map_err(|full| CallError::Busy {
                tool: tool.name.clone(),
                full,
            })?;
        let grant = self
            .admit(session, tool, task, arguments)
            .await
            .map_err(|denial| CallError::Denied {
                tool: tool.name.clone(),
                risk: tool.risk,
                denial,
                task: task.map(str::to_string),
            })?;
        record.grant = grant;
        if acts {
            self.audit
                .record_durable(Event::ToolCallStarted(record.clone()))
                .await
                .map_err(unavailable)?;
            *started = true;
        }

        let context = CallContext {
            session_id: session.id().to_string(),
            task_id: task.map(str::to_string),
            call_id: record.call.clone(),
        };
        let raw = self
            .run(session, tool, place, &arguments.to_string(), &context)
            .await?;
        self.check_output(tool, raw)
    }

    /// Decides whether the call may run and, if it may, charges the task.
    /// A store failure refuses the call: the host never acts uncounted.
    /// Returns what allowed a write or destructive call, for the audit
    /// trail: `task`, `pre_approved` or `approval:<id>`.
    async fn admit(
        &self,
        session: &Session,
        tool: &CatalogTool,
        task: Option<&str>,
        arguments: &Value,
    ) -> Result<Option<String>, Denial> {
        let Some(task) = task else {
            return match tool.risk {
                RiskClass::Read => Ok(None),
                RiskClass::Write | RiskClass::Destructive => Err(Denial::NotGranted),
            };
        };
        let binding = (tool.risk == RiskClass::Destructive)
            .then(|| policy::approval_binding(tool.name.as_str(), arguments));
        let charge = match (tool.risk, &binding) {
            (RiskClass::Destructive, Some(binding)) => Charge::Destructive { binding },
            (RiskClass::Read, _) => Charge::Read,
            _ => Charge::Write,
        };
        let started = std::time::Instant::now();
        let charged = self.store.charge(task, tool.name.as_str(), charge).await;
        self.metrics.observe_charge(started);
        let refusal = match charged {
            Ok(Ok(charged)) => {
                return Ok(match (tool.risk, charged.approval) {
                    (RiskClass::Read, _) => None,
                    (RiskClass::Write, _) => Some("task".into()),
                    (RiskClass::Destructive, Some(id)) => Some(format!("approval:{id}")),
                    (RiskClass::Destructive, None) => Some("pre_approved".into()),
                });
            }
            Ok(Err(refusal)) => refusal,
            Err(e) => return Err(store_denial(e)),
        };
        if let ChargeRefusal::Closed(state) = refusal {
            if state == TaskState::Expired {
                self.record_expiry(task).await;
            }
            // The task's plugin instances serve nobody any more.
            self.task_sessions
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(task);
        }
        match (refusal, binding) {
            // Reading needs no task: a closed task leaves its sessions the
            // read access every session has.
            (ChargeRefusal::Closed(_), _) if tool.risk == RiskClass::Read => Ok(None),
            (ChargeRefusal::Closed(state), _) => Err(Denial::TaskClosed(state)),
            (ChargeRefusal::NotGranted, _) => Err(Denial::NotGranted),
            (ChargeRefusal::CallsExhausted { max_calls }, _) => {
                Err(Denial::CallsExhausted { max_calls })
            }
            (ChargeRefusal::WriteRateExhausted { per_hour }, _) => {
                Err(Denial::WriteRateExhausted { per_hour })
            }
            (ChargeRefusal::ApprovalMissing, Some(binding)) => Err(self
                .approval_needed(session, tool, task, &binding, arguments)
                .await),
            (ChargeRefusal::ApprovalMissing, None) => Err(Denial::StoreUnavailable(
                "the store asked for an approval of a call that needs none".into(),
            )),
        }
    }

    /// Records, once per process, that a task was found expired.
    async fn record_expiry(&self, task: &str) {
        let first = self
            .expired
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(task.to_string());
        if !first {
            return;
        }
        if let Ok(Some(record)) = self.store.task(task).await {
            self.audit.record(Event::TaskExpired {
                task: task.to_string(),
                expired: rfc3339(record.expires_at),
            });
        }
    }

    /// A destructive call without an approval: report a decline not yet
    /// reported, or hold the call as a pending approval (the same one for
    /// every repetition of the same call).
    async fn approval_needed(
        &self,
        session: &Session,
        tool: &CatalogTool,
        task: &str,
        binding: &str,
        arguments: &Value,
    ) -> Denial {
        match self.store.take_denial(task, binding).await {
            Ok(Some(denied)) => return Denial::ApprovalDenied(Box::new(denied)),
            Ok(None) => {}
            Err(e) => return store_denial(e),
        }
        let task_record = match self.store.task(task).await {
            Ok(Some(record)) => record,
            Ok(None) => return store_denial(StoreError::NoTask(task.into())),
            Err(e) => return store_denial(e),
        };
        let empty = Map::new();
        let summary = policy::approval_summary(
            &tool.title,
            tool.name.as_str(),
            tool.approval.as_deref(),
            task,
            &task_record.purpose,
            arguments.as_object().unwrap_or(&empty),
        );
        let request = ApprovalRequest {
            task_id: task.to_string(),
            tool: tool.name.as_str().to_string(),
            binding: binding.to_string(),
            arguments: arguments.clone(),
            summary,
            ttl: APPROVAL_TTL,
            operator_only: task_record.operator_approval,
            in_client: task_record.approve_in_client,
            asked_by: Some(session.asker()),
        };
        match self.store.request_approval(request).await {
            Ok(approval) => Denial::ApprovalRequired(Box::new(approval)),
            Err(StoreError::TooManyPending(_, waiting)) => Denial::TooManyPending(waiting),
            Err(e) => store_denial(e),
        }
    }

    async fn run(
        &self,
        session: &Session,
        tool: &Arc<CatalogTool>,
        place: Place<'_>,
        arguments: &str,
        context: &CallContext,
    ) -> Result<String, CallError> {
        let plugin = &self.catalog.plugins[tool.plugin];
        let sandbox_error = |error, session_reset| CallError::Sandbox {
            tool: tool.name.clone(),
            error,
            session_reset,
        };
        let (outcome, refusal) = match plugin.instance {
            InstanceMode::Call => {
                let _slot = place.run().await;
                let mut instance = plugin
                    .prepared
                    .instantiate()
                    .await
                    .map_err(|e| sandbox_error(e, false))?;
                let outcome = instance
                    .call(tool.name.as_str(), arguments, context)
                    .await
                    .map_err(|e| sandbox_error(e, false))?;
                (outcome, instance.network_refusal())
            }
            InstanceMode::Session => {
                let slot = session.slot(tool.plugin);
                // The session's own calls wait for its instance before
                // they take one of the plugin's running slots, so one busy
                // session cannot hold slots it does not use.
                let mut guard = slot.lock().await;
                let _slot = place.run().await;
                let instance = match guard.as_mut() {
                    Some(instance) => instance,
                    None => guard.insert(
                        plugin
                            .prepared
                            .instantiate()
                            .await
                            .map_err(|e| sandbox_error(e, false))?,
                    ),
                };
                match instance.call(tool.name.as_str(), arguments, context).await {
                    Ok(outcome) => (outcome, instance.network_refusal()),
                    Err(e) => {
                        // A trapped instance cannot be entered again; the
                        // session's next call starts from a fresh one.
                        *guard = None;
                        return Err(sandbox_error(e, true));
                    }
                }
            }
        };
        let redactor = plugin.prepared.shared().gate.redactor();
        match (outcome, refusal) {
            (Ok(raw), _) => {
                // Refused before anything else reads it: a result can be
                // as large as the plugin's memory.
                let limit = plugin.prepared.shared().limits.output_bytes;
                if raw.len() > limit {
                    return Err(CallError::OutputTooLarge {
                        tool: tool.name.clone(),
                        size: raw.len(),
                        limit,
                    });
                }
                let clean = match redactor.text(&raw) {
                    Cow::Owned(clean) => Some(clean),
                    Cow::Borrowed(_) => None,
                };
                Ok(clean.unwrap_or(raw))
            }
            (Err(_), Some(refusal)) => Err(CallError::Network {
                tool: tool.name.clone(),
                refusal,
            }),
            (Err(mut error), None) => {
                // Only as much is redacted as `sanitise` can keep (and one
                // byte more, so it still sees that it cuts).
                error.message = redactor
                    .text_head(&error.message, PLUGIN_MESSAGE_BYTES + 1)
                    .into_owned();
                Err(CallError::Plugin {
                    tool: tool.name.clone(),
                    error: sanitise(error),
                })
            }
        }
    }

    /// A result must be a JSON object within the size limit and, where the
    /// tool promised one, match its output schema.
    fn check_output(
        &self,
        tool: &CatalogTool,
        raw: String,
    ) -> Result<Map<String, Value>, CallError> {
        let limit = self.catalog.plugins[tool.plugin]
            .prepared
            .shared()
            .limits
            .output_bytes;
        if raw.len() > limit {
            return Err(CallError::OutputTooLarge {
                tool: tool.name.clone(),
                size: raw.len(),
                limit,
            });
        }
        let invalid = |detail: String| CallError::InvalidOutput {
            tool: tool.name.clone(),
            detail,
        };
        let value: Value =
            serde_json::from_str(&raw).map_err(|e| invalid(format!("not JSON: {e}")))?;
        if let Some(schema) = &tool.output {
            schema.check(&value).map_err(|e| match e {
                CheckError::Mismatch(d) => {
                    invalid(format!("does not match the output schema: {d}"))
                }
                CheckError::Unusable(reason) => invalid(format!("the output schema: {reason}")),
            })?;
        }
        match value {
            Value::Object(map) => Ok(map),
            _ => Err(invalid("not a JSON object".into())),
        }
    }
}

/// A plugin's error reaches the model, so its code must look like a code and
/// its message must be bounded.
fn sanitise(mut error: ToolError) -> ToolError {
    // `ok` would read as success in the trail and the metrics.
    let code_ok = error.code != "ok"
        && !error.code.is_empty()
        && error.code.len() <= 64
        && error
            .code
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if !code_ok {
        error.code = "plugin_error".into();
    }
    if error.message.len() > PLUGIN_MESSAGE_BYTES {
        let mut end = PLUGIN_MESSAGE_BYTES;
        while !error.message.is_char_boundary(end) {
            end -= 1;
        }
        error.message.truncate(end);
        error.message.push('…');
    }
    error
}

/// A store failure as the caller sees it: `busy` when the store only lacked
/// a free connection, `store_unavailable` otherwise. Either way the call
/// did not run.
fn store_denial(error: StoreError) -> Denial {
    match error {
        StoreError::Busy(_) => Denial::StoreBusy(error.to_string()),
        other => Denial::StoreUnavailable(other.to_string()),
    }
}
