//! The one mapping from a call's outcome to what the MCP client sees.
//!
//! Protocol faults (a tool that does not exist) are JSON-RPC errors. Every
//! failure after the tool was found is a tool result with `isError: true`
//! and `{"ok": false, "code", "message", "retryable"}`, both as structured
//! content and as JSON text, with a message that tells the model what to do.

use std::borrow::Cow;

use rmcp::ErrorData;
use rmcp::model::CallToolResult;
use serde_json::{Map, Value, json};

use crate::dispatch::CallError;
use crate::policy::Denial;
use crate::sandbox::SandboxError;

/// Turns a call's outcome into a `tools/call` result or a JSON-RPC error.
pub fn tool_result(
    outcome: Result<Map<String, Value>, CallError>,
) -> Result<CallToolResult, ErrorData> {
    let error = match outcome {
        Ok(result) => return Ok(CallToolResult::structured(Value::Object(result))),
        Err(error) => error,
    };
    tracing::info!("call refused or failed: {error}");
    let (code, message, retryable): (Cow<'static, str>, String, bool) = match error {
        CallError::UnknownTool(name) => {
            return Err(ErrorData::invalid_params(
                format!("Unknown tool: {name}"),
                Some(json!({ "tool": name })),
            ));
        }
        CallError::InvalidArguments { tool, detail } => (
            "invalid_arguments".into(),
            format!(
                "The arguments do not match the input schema of {tool}: {detail}. Fix them and call again."
            ),
            false,
        ),
        CallError::Denied {
            tool,
            risk,
            denial: Denial::NotGranted,
            task,
        } => (
            "not_granted".into(),
            match task {
                Some(task) => format!(
                    "{tool} is a {} tool and task {task} has no grant for it. Do not retry; ask the operator to grant {tool} to the task (toolhost serve --task {task} --grant {tool}).",
                    risk.as_str()
                ),
                None => format!(
                    "{tool} is a {} tool and this session has no task grant. Do not retry; ask the operator to start the host for a task with --grant {tool}.",
                    risk.as_str()
                ),
            },
            false,
        ),
        CallError::Denied {
            tool,
            denial: Denial::ApprovalRequired,
            ..
        } => (
            "approval_required".into(),
            format!(
                "{tool} is destructive and needs a human's approval for each call, which this host cannot ask for. Do not retry; report that the action needs an operator."
            ),
            false,
        ),
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
                    "timeout".into(),
                    format!(
                        "{tool} did not finish within {} ms. You may retry once; if it happens again, stop and report it.{reset}",
                        limit.as_millis()
                    ),
                    true,
                ),
                SandboxError::OutOfMemory(limit) => (
                    "out_of_memory".into(),
                    format!(
                        "{tool} needed more than its memory limit of {} MiB. Try a smaller request (fewer items, a narrower filter).{reset}",
                        limit >> 20
                    ),
                    false,
                ),
                SandboxError::Trap(_) | SandboxError::Load(_) => (
                    "plugin_trap".into(),
                    format!(
                        "{tool} crashed. Do not retry the same call; report the failure.{reset}"
                    ),
                    false,
                ),
            }
        }
        CallError::OutputTooLarge { tool, size, limit } => (
            "output_too_large".into(),
            format!(
                "{tool} produced {size} bytes, more than its limit of {limit}. Ask for less (a smaller limit, a narrower filter)."
            ),
            false,
        ),
        CallError::InvalidOutput { tool, .. } => (
            "invalid_output".into(),
            format!(
                "{tool} returned a result that breaks its own contract. Do not retry; report the failure."
            ),
            false,
        ),
        CallError::Plugin { error, .. } => (error.code.into(), error.message, error.retryable),
    };
    Ok(CallToolResult::structured_error(json!({
        "ok": false,
        "code": code,
        "message": message,
        "retryable": retryable,
    })))
}
