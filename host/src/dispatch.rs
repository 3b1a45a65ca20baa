//! The path of one `tools/call`, after the transport and before the reply:
//! catalog lookup → argument validation → policy → sandbox → result checks.
//!
//! It returns a typed [`CallError`] for every way a call can fail; turning
//! that into what the client sees is the MCP layer's one mapping.

use std::sync::Arc;

use serde_json::{Map, Value};

use crate::catalog::{Catalog, CatalogTool};
use crate::manifest::{InstanceMode, RiskClass, ToolName};
use crate::policy::{Denial, Grants};
use crate::sandbox::{CallContext, SandboxError, ToolError};
use crate::session::Session;

/// Guest-controlled: a plugin's error message is cut to this many bytes.
const PLUGIN_MESSAGE_BYTES: usize = 2_048;

/// Everything a call needs that does not change while the host serves.
pub struct Toolhost {
    pub catalog: Catalog,
    pub grants: Grants,
    /// Where stateless (2026-07-28) requests keep per-session plugin state
    /// when the process serves a task: they have no session of their own, so
    /// the task is what ties their calls together. `None` without a task:
    /// anonymous stateless requests get fresh instances.
    pub task_session: Option<Session>,
}

impl Toolhost {
    pub fn new(catalog: Catalog, grants: Grants) -> Toolhost {
        let task_session = grants.task().map(|_| Session::new());
        Toolhost {
            catalog,
            grants,
            task_session,
        }
    }
}

/// Why a call produced no result.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error("unknown tool `{0}`")]
    UnknownTool(String),
    #[error("arguments of `{tool}` do not match its schema: {detail}")]
    InvalidArguments { tool: ToolName, detail: String },
    #[error("`{tool}` ({}) refused: {denial:?}", risk.as_str())]
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
}

impl Toolhost {
    /// Runs `name` with `arguments` for `session`, or says why not.
    pub async fn call(
        &self,
        session: &Session,
        name: &str,
        arguments: Option<Map<String, Value>>,
    ) -> Result<Map<String, Value>, CallError> {
        let tool = self
            .catalog
            .tool(name)
            .ok_or_else(|| CallError::UnknownTool(name.to_string()))?;
        // MCP lets a client omit `arguments`; the schema decides if that is fine.
        let arguments = Value::Object(arguments.unwrap_or_default());
        tool.input
            .check(&arguments)
            .map_err(|detail| CallError::InvalidArguments {
                tool: tool.name.clone(),
                detail,
            })?;
        self.grants
            .admit(&tool.name, tool.risk)
            .map_err(|denial| CallError::Denied {
                tool: tool.name.clone(),
                risk: tool.risk,
                denial,
                task: self.grants.task().map(str::to_string),
            })?;

        let context = CallContext {
            session_id: session.id().to_string(),
            task_id: self.grants.task().map(str::to_string),
            call_id: uuid::Uuid::new_v4().to_string(),
        };
        let raw = self
            .run(session, tool, &arguments.to_string(), &context)
            .await?;
        self.check_output(tool, raw)
    }

    async fn run(
        &self,
        session: &Session,
        tool: &Arc<CatalogTool>,
        arguments: &str,
        context: &CallContext,
    ) -> Result<String, CallError> {
        let plugin = &self.catalog.plugins[tool.plugin];
        let sandbox_error = |error, session_reset| CallError::Sandbox {
            tool: tool.name.clone(),
            error,
            session_reset,
        };
        let outcome = match plugin.instance {
            InstanceMode::Call => {
                let mut instance = plugin
                    .prepared
                    .instantiate()
                    .await
                    .map_err(|e| sandbox_error(e, false))?;
                instance
                    .call(tool.name.as_str(), arguments, context)
                    .await
                    .map_err(|e| sandbox_error(e, false))?
            }
            InstanceMode::Session => {
                let slot = session.slot(tool.plugin);
                let mut guard = slot.lock().await;
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
                    Ok(outcome) => outcome,
                    Err(e) => {
                        // A trapped instance cannot be entered again; the
                        // session's next call starts from a fresh one.
                        *guard = None;
                        return Err(sandbox_error(e, true));
                    }
                }
            }
        };
        outcome.map_err(|error| CallError::Plugin {
            tool: tool.name.clone(),
            error: sanitise(error),
        })
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
            schema
                .check(&value)
                .map_err(|d| invalid(format!("does not match the output schema: {d}")))?;
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
    let code_ok = !error.code.is_empty()
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
