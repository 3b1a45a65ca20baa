//! The one mapping from a call's outcome to what the MCP client sees.
//!
//! Protocol faults (a tool that does not exist) are JSON-RPC errors. Every
//! failure after the tool was found is a tool result with `isError: true`
//! and `{"ok": false, "code", "message", "retryable"}`, both as structured
//! content and as JSON text, with a message that tells the model what to do.

use rmcp::ErrorData;
use rmcp::model::CallToolResult;
use serde_json::{Map, Value, json};

use crate::dispatch::CallError;
use crate::policy::Denial;
use crate::sandbox::SandboxError;
use crate::store::{self, TaskState};

/// Turns a call's outcome into a `tools/call` result or a JSON-RPC error.
pub fn tool_result(
    outcome: Result<Map<String, Value>, CallError>,
) -> Result<CallToolResult, ErrorData> {
    tool_result_linked(outcome, None)
}

/// [`tool_result`], with approvals linked to their page on the console at
/// `console` (its base URL) when one is served.
pub fn tool_result_linked(
    outcome: Result<Map<String, Value>, CallError>,
    console: Option<&str>,
) -> Result<CallToolResult, ErrorData> {
    let error = match outcome {
        Ok(result) => return Ok(CallToolResult::structured(Value::Object(result))),
        Err(error) => error,
    };
    tracing::info!("call refused or failed: {error}");
    let code = error.code();
    let (message, retryable): (String, bool) = match error {
        CallError::UnknownTool(name) => {
            return Err(ErrorData::invalid_params(
                format!("Unknown tool: {name}"),
                Some(json!({ "tool": name })),
            ));
        }
        CallError::InvalidArguments { tool, detail } => (
            format!(
                "The arguments do not match the input schema of {tool}: {detail}. Fix them and call again."
            ),
            false,
        ),
        CallError::Denied {
            tool,
            risk,
            denial,
            task,
        } => {
            let task = task.unwrap_or_default();
            match denial {
                Denial::NotGranted if task.is_empty() => (
                    format!(
                        "{tool} is a {} tool and this session is not bound to a task. Do not retry; ask the operator for a task token that grants {tool}.",
                        risk.as_str()
                    ),
                    false,
                ),
                Denial::NotGranted => (
                    format!(
                        "{tool} is a {} tool and task {task} has no grant for it. Do not retry; ask the operator to open a task that grants {tool}.",
                        risk.as_str()
                    ),
                    false,
                ),
                Denial::TaskClosed(state) => (
                    format!(
                        "Task {task} is {}: its grants no longer apply. Do not retry; report to the user that the task ended and what remains undone.",
                        match state {
                            TaskState::Revoked => "revoked",
                            _ => "expired",
                        }
                    ),
                    false,
                ),
                Denial::CallsExhausted { max_calls } => (
                    format!(
                        "Task {task} has used all {max_calls} calls of its budget. Stop now and report to the user what you did and what remains; do not retry and do not switch to other tools."
                    ),
                    false,
                ),
                Denial::WriteRateExhausted { per_hour } => (
                    format!(
                        "Task {task} may make {per_hour} write calls per hour and has made them. Stop now and report to the user what you did and what remains; do not retry and do not switch to other tools."
                    ),
                    false,
                ),
                Denial::ApprovalRequired(approval) => {
                    let page = console.map(|base| format!("{base}/approvals/{}", approval.id));
                    let where_ = match &page {
                        Some(page) => {
                            format!("a person must approve it on the toolhost console at {page}")
                        }
                        None => format!("an operator must approve {}", approval.id),
                    };
                    let mut error = json!({
                        "ok": false,
                        "code": "approval_required",
                        "message": format!(
                            "{tool} needs a human's approval for this exact call; approval {} is pending until {}. Tell the user what you asked for ({}) and that {where_}. Once it is approved, make the same call again with the same arguments; it runs once.",
                            approval.id,
                            store::rfc3339(approval.expires_at),
                            approval.summary,
                        ),
                        "retryable": false,
                        "approval_id": approval.id,
                    });
                    if let Some(page) = page {
                        error["approval_url"] = Value::String(page);
                    }
                    return Ok(CallToolResult::structured_error(error));
                }
                Denial::ApprovalDenied(approval) => (
                    format!(
                        "A human did not approve this call of {tool} (approval {}: declined or dismissed). Do not retry it; report that the action was not approved.",
                        approval.id
                    ),
                    false,
                ),
                Denial::TooManyPending(waiting) => (
                    format!(
                        "{waiting} destructive calls of task {task} already wait for a human's decision. Do not ask for more; tell the user which ones are waiting and stop until they are decided."
                    ),
                    false,
                ),
                Denial::StoreUnavailable(_) => (
                    format!(
                        "The host could not record this call of {tool} against the task, so it did not run. You may retry once; if it fails again, stop and report it."
                    ),
                    true,
                ),
                Denial::StoreBusy(_) => (
                    format!(
                        "The host is too busy to count this call of {tool} against the task, so it did not run. Retry in a few seconds."
                    ),
                    true,
                ),
            }
        }
        CallError::Sandbox {
            tool,
            error,
            session_reset,
        } => {
            let reset = if session_reset {
                " The plugin's state for this session was reset; earlier changes made through it in this session are gone."
            } else {
                ""
            };
            match error {
                SandboxError::Timeout(limit) => (
                    format!(
                        "{tool} did not finish within {} ms. You may retry once; if it happens again, stop and report it.{reset}",
                        limit.as_millis()
                    ),
                    true,
                ),
                SandboxError::OutOfMemory(limit) => (
                    format!(
                        "{tool} needed more than its memory limit of {} MiB. Try a smaller request (fewer items, a narrower filter).{reset}",
                        limit >> 20
                    ),
                    false,
                ),
                SandboxError::Busy(_) => (
                    format!(
                        "The host is running as many plugin instances as it allows, so {tool} could not start. Retry in a few seconds.{reset}"
                    ),
                    true,
                ),
                SandboxError::OutOfFuel(fuel) => (
                    format!(
                        "{tool} used up its compute budget of {fuel} fuel units for one call. Try a smaller request (fewer items, a narrower filter); the same call will fail the same way.{reset}"
                    ),
                    false,
                ),
                SandboxError::Trap(_) | SandboxError::Load(_) => (
                    format!(
                        "{tool} crashed. Do not retry the same call; report the failure.{reset}"
                    ),
                    false,
                ),
            }
        }
        CallError::Busy { tool, full } => (format!("{tool} is busy: {full}."), true),
        CallError::OutputTooLarge { tool, size, limit } => (
            format!(
                "{tool} produced {size} bytes, more than its limit of {limit}. Ask for less (a smaller limit, a narrower filter)."
            ),
            false,
        ),
        CallError::InvalidOutput { tool, .. } => (
            format!(
                "{tool} returned a result that breaks its own contract. Do not retry; report the failure."
            ),
            false,
        ),
        CallError::Plugin { error, .. } => (error.message, error.retryable),
        CallError::Network { tool, refusal } => {
            let next = match refusal.code {
                "busy" => "Retry shortly.",
                "response_too_large" => "Ask for less (a smaller limit, a narrower filter).",
                _ => {
                    "Do not retry; if the tool needs this destination, ask the operator to allow it in the manifest."
                }
            };
            (
                format!(
                    "The host refused an outbound request of {tool}: {}. {next}",
                    refusal.detail
                ),
                refusal.retryable,
            )
        }
        CallError::AuditUnavailable {
            tool, ran: false, ..
        } => (
            format!(
                "The host could not record this call of {tool} in its audit trail, so it did not run. You may retry once later; if it fails again, stop and report that the audit trail is unavailable."
            ),
            true,
        ),
        CallError::AuditUnavailable {
            tool, ran: true, ..
        } => (
            format!(
                "{tool} ran, but the host could not record its outcome in the audit trail, so the result is withheld. Do not retry (the change may have been made); report that the audit trail is unavailable."
            ),
            false,
        ),
    };
    Ok(CallToolResult::structured_error(json!({
        "ok": false,
        "code": code,
        "message": message,
        "retryable": retryable,
    })))
}
