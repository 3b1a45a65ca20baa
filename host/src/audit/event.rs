//! What the trail records: one variant per kind of decision.
//!
//! Field names are the trail's public format (export, tail and any tool an
//! operator points at the files read them), so they change only with care.
//! `seq`, `time` and `prev` are added by the trail and never appear here.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::redact::{self, Redactor};

/// A decision worth recording.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    HostStarted {
        version: String,
        pid: u32,
        transport: String,
        manifest: String,
        manifest_sha256: String,
    },
    HostStopped {
        pid: u32,
        reason: String,
    },
    /// The shared database stopped answering: calls that need it are
    /// refused until it is back.
    DatabaseUnreachable {
        detail: String,
    },
    /// The shared database answers again.
    DatabaseReachable {},
    PluginLoaded {
        plugin: String,
        sha256: String,
        tools: Vec<String>,
        /// What each tool hands the model, hashed: a change of text under
        /// the same pin (a plugin may describe itself from its `config`)
        /// shows as a different hash from one start to the next.
        text_sha256: BTreeMap<String, ToolTextSha256>,
    },
    PluginRefused {
        plugin: String,
        sha256: String,
        reason: String,
    },
    SessionOpened {
        session: String,
        transport: String,
        client: Option<String>,
        client_version: Option<String>,
        protocol: Option<String>,
        task: Option<String>,
    },
    SessionClosed {
        session: String,
        transport: String,
        calls: u64,
    },
    /// A plugin's outbound HTTP request and what became of it. The query
    /// string is left out; `credential` names the secrets the host added,
    /// never their values.
    OutboundRequest {
        plugin: String,
        tool: String,
        call: String,
        method: String,
        url: String,
        credential: Option<String>,
        /// `ok`, `network_denied`, `busy`, `response_too_large`, `timeout`
        /// or `failed`.
        outcome: String,
        status: Option<u16>,
        bytes: Option<u64>,
        /// The address the host connected to.
        address: Option<String>,
        detail: Option<String>,
        duration_us: u64,
        /// The host of the allow-list entry the destination falls under
        /// (`*.example.com` for a wildcard), `None` if none does. For the
        /// metrics, whose labels must come from the manifest, not from the
        /// plugin; the record has the URL.
        #[serde(skip)]
        allowed_by: Option<String>,
    },
    /// A write or destructive call is about to run: on disk before the
    /// plugin is entered, so a crash mid-call still leaves its trace.
    ToolCallStarted(CallRecord),
    /// A call's outcome: `ok` or the error code the client was given.
    ToolCall(CallRecord),
    ApprovalRequested {
        approval: String,
        task: String,
        tool: String,
        summary: String,
        expires: String,
    },
    ApprovalDecided {
        approval: String,
        task: String,
        tool: String,
        decision: String,
        by: String,
        channel: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        note: Option<String>,
    },
    TaskOpened {
        task: String,
        purpose: String,
        by: String,
        grants: Vec<String>,
        pre_approved: Vec<String>,
        expires: String,
        max_calls: Option<u64>,
        writes_per_hour: Option<u32>,
        operator_approval: bool,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        approve_in_client: bool,
        ad_hoc: bool,
    },
    TaskRevoked {
        task: String,
        by: String,
    },
    TaskExtended {
        task: String,
        by: String,
        expires: String,
    },
    TaskExpired {
        task: String,
        expired: String,
    },
    PluginStateMoved {
        plugin: String,
        from: String,
        to: String,
        by: String,
    },
    OperatorAdded {
        operator: String,
        role: String,
        by: String,
    },
    OperatorRemoved {
        operator: String,
        by: String,
    },
    OperatorPasswordChanged {
        operator: String,
        by: String,
    },
    /// A person signed in to the console.
    ConsoleSignIn {
        operator: String,
        address: String,
    },
    /// A sign-in was refused: a wrong name or password, or too many tries.
    ConsoleSignInRefused {
        operator: String,
        address: String,
        reason: String,
    },
    ConsoleSignOut {
        operator: String,
    },
    /// The approval webhook was sent (or given up on) for a pending approval.
    ApprovalNotified {
        approval: String,
        outcome: String,
        attempts: u32,
    },
    /// `toolhost vet` wrote the lock: what was accepted, by whom.
    PluginsVetted {
        lock: String,
        lock_sha256: String,
        plugins: Vec<String>,
        /// The plugins that differed from the lock it replaced.
        changed: Vec<String>,
        by: String,
    },
}

/// One `tools/call`, as the trail keeps it.
#[derive(Debug, Clone, Serialize)]
pub struct CallRecord {
    /// Ties a call's `tool_call_started` to its `tool_call`.
    pub call: String,
    pub session: String,
    pub transport: String,
    pub tool: String,
    /// `None` for a tool the catalog does not have.
    pub risk: Option<String>,
    pub task: Option<String>,
    /// The arguments, cut where long (see `record::bounded`).
    pub arguments: Value,
    /// SHA-256 of the canonical arguments before any cut.
    pub arguments_sha256: String,
    pub plugin: Option<String>,
    pub plugin_sha256: Option<String>,
    /// Absent on `tool_call_started`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retryable: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_us: Option<u64>,
    /// What allowed a write or destructive call: `task` (its grant),
    /// `pre_approved`, or `approval:<id>` (the human decision it used, or
    /// the one it asked for or was refused by).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grant: Option<String>,
    /// The outcome is an error code the plugin chose, not one of the
    /// host's: the metrics bound how many of those they label.
    #[serde(skip)]
    pub outcome_by_plugin: bool,
}

/// SHA-256 (hex) of each text a tool hands the model: its title and
/// description as UTF-8, its schemas in the trail's canonical JSON (keys
/// sorted, compact), so the hash does not depend on how the plugin spaced
/// or ordered them.
#[derive(Debug, Clone, Serialize)]
pub struct ToolTextSha256 {
    pub title: String,
    pub description: String,
    pub input_schema: String,
    pub output_schema: Option<String>,
}

impl Event {
    /// The event as the JSON object the trail writes, with every secret
    /// value `redactor` knows redacted.
    pub fn into_map(self, redactor: &Redactor) -> Map<String, Value> {
        match serde_json::to_value(self) {
            Ok(mut value @ Value::Object(_)) => {
                if !redactor.is_empty() {
                    redact::json(redactor, &mut value);
                }
                match value {
                    Value::Object(map) => map,
                    _ => unreachable!("matched an object above"),
                }
            }
            // Every variant serialises to an object; keep a trace if not.
            _ => {
                let mut map = Map::new();
                map.insert("event".into(), "unserialisable".into());
                map
            }
        }
    }
}
