//! Policy: the rules that decide whether a call of a known tool may run,
//! and the words a human is shown when a destructive call needs a yes.
//!
//! Read tools always may run. Write and destructive tools need the session
//! to be bound to an open task that grants them, within the task's budgets;
//! a destructive call also needs a human's approval of that exact call
//! unless the task pre-approved the tool. The counting itself happens in the
//! store, in one transaction with the checks (see `store::Store::charge`).

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::store::{Approval, TaskState};

/// Why a call may not run.
#[derive(Debug, Clone)]
pub enum Denial {
    /// The tool changes things and the session's task (if any) has no grant
    /// for it.
    NotGranted,
    /// The session's task was revoked or has expired.
    TaskClosed(TaskState),
    /// The task has used its total call budget.
    CallsExhausted { max_calls: u64 },
    /// The task has made its writes for this hour.
    WriteRateExhausted { per_hour: u32 },
    /// A human must approve this exact call first; it is pending.
    ApprovalRequired(Box<Approval>),
    /// A human declined this exact call.
    ApprovalDenied(Box<Approval>),
    /// Too many of the task's destructive calls already wait for a human.
    TooManyPending(usize),
    /// The store could not be read or written, so nothing can be counted.
    StoreUnavailable(String),
    /// The store stayed busy for its wait time: no free pooled connection,
    /// or the SQLite connection held (by a checkpoint on a slow disk) or the
    /// database locked by another process.
    StoreBusy(String),
}

/// For logs: short, and without the arguments an approval carries.
impl std::fmt::Display for Denial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Denial::NotGranted => f.write_str("not granted"),
            Denial::TaskClosed(state) => write!(f, "task {}", state.as_str()),
            Denial::CallsExhausted { max_calls } => write!(f, "all {max_calls} calls used"),
            Denial::WriteRateExhausted { per_hour } => {
                write!(f, "{per_hour} writes this hour used")
            }
            Denial::ApprovalRequired(a) => write!(f, "approval {} pending", a.id),
            Denial::ApprovalDenied(a) => write!(f, "approval {} denied", a.id),
            Denial::TooManyPending(n) => write!(f, "{n} approvals already pending"),
            Denial::StoreUnavailable(e) => write!(f, "store unavailable: {e}"),
            Denial::StoreBusy(e) => write!(f, "store busy: {e}"),
        }
    }
}

/// What an approval is bound to: the tool and its arguments, canonically
/// serialised (object keys sorted), hashed. The same call with any other
/// argument value has another binding and needs its own approval.
pub fn approval_binding(tool: &str, arguments: &Value) -> String {
    let canonical = crate::audit::record::canonical(arguments);
    let mut hash = Sha256::new();
    hash.update(tool.as_bytes());
    hash.update([0]);
    hash.update(canonical.as_bytes());
    hex::encode(hash.finalize())
}

/// The action restated for the human: the tool's title, what it does (the
/// manifest's approval text with `{argument}` filled in, or a generic
/// sentence) and the key arguments.
pub fn approval_summary(
    title: &str,
    tool: &str,
    template: Option<&str>,
    task: &str,
    purpose: &str,
    arguments: &Map<String, Value>,
) -> String {
    let effect = match template {
        Some(template) => fill(template, arguments),
        None => format!("runs the destructive tool {tool}"),
    };
    let mut args: Vec<String> = arguments
        .iter()
        .map(|(k, v)| format!("{k} = {}", shown(v)))
        .collect();
    args.sort();
    let args = if args.is_empty() {
        "no arguments".to_string()
    } else {
        args.join(", ")
    };
    // The purpose is the operator's words, which a human recognises; the id
    // alone would not say which job is asking.
    let purpose = shown(&Value::String(purpose.to_string()));
    format!(
        "{title} ({tool}) for task {task} ({purpose}): {effect}. Arguments supplied by the agent: {args}."
    )
}

/// Replaces each `{name}` with the argument's value; an absent argument
/// shows as `(none)`.
fn fill(template: &str, arguments: &Map<String, Value>) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match after.find('}') {
            Some(close)
                if after[..close]
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_') =>
            {
                let name = &after[..close];
                out.push_str(&arguments.get(name).map_or("(none)".into(), inline));
                rest = &after[close + 1..];
            }
            _ => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// An argument as a human reads it: JSON, so a string is quoted and its
/// line breaks and control characters are escaped (an agent must not be
/// able to lay out the prompt, or hide part of a value on another line),
/// and whole: the approval covers every byte, so the human sees every byte.
fn shown(value: &Value) -> String {
    value.to_string()
}

/// An argument inside the manifest's sentence: as [`shown`], but a string
/// without its quotes (the sentence quotes it), still escaped.
fn inline(value: &Value) -> String {
    let json = value.to_string();
    match value {
        Value::String(_) => json[1..json.len() - 1].to_string(),
        _ => json,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn binding_ignores_key_order_but_not_values() {
        let a = approval_binding("t", &json!({"a": 1, "b": {"y": 2, "x": [1, "z"]}}));
        let b = approval_binding("t", &json!({"b": {"x": [1, "z"], "y": 2}, "a": 1}));
        let c = approval_binding("t", &json!({"a": 2, "b": {"y": 2, "x": [1, "z"]}}));
        let d = approval_binding("u", &json!({"a": 1, "b": {"y": 2, "x": [1, "z"]}}));
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_ne!(a, d);
    }

    #[test]
    fn summary_restates_the_action() {
        let args = json!({"slug": "deploy-checklist", "note": "line\nbreak"});
        let summary = approval_summary(
            "Delete note",
            "notes_note_delete",
            Some(
                "deletes the note `{slug}`; it stays in the trash for 30 days {missing} {not a var}",
            ),
            "task-1",
            "tidy notes",
            args.as_object().unwrap(),
        );
        assert!(summary.starts_with("Delete note (notes_note_delete) for task task-1 (\"tidy notes\"): deletes the note `deploy-checklist`; it stays in the trash for 30 days (none) {not a var}."), "{summary}");
        assert!(
            summary.ends_with(r#"note = "line\nbreak", slug = "deploy-checklist"."#),
            "{summary}"
        );
        assert!(!summary.contains('\n'));
    }
}
