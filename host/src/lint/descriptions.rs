//! Rules on descriptions: the model chooses a tool by reading them, and a
//! human approves a write by reading the same words.

use serde_json::{Map, Value};

use super::words;
use super::{Findings, Rule, Subject};
use crate::manifest::RiskClass;

/// Shorter than this says too little to choose by.
pub const MIN_CHARS: usize = 20;
/// Longer than this costs every agent context on every `tools/list`.
pub const MAX_CHARS: usize = 1000;

pub fn check(findings: &mut Findings, tool: &Subject<'_>) {
    let text = tool.description.trim();
    if text.is_empty() {
        findings.tool(
            Rule::DescriptionEmpty,
            tool,
            "the description is empty".into(),
            "say in a sentence or two what the tool does, what it changes and what it refuses"
                .into(),
        );
        return;
    }
    let chars = text.chars().count();
    if !(MIN_CHARS..=MAX_CHARS).contains(&chars) {
        findings.tool(
            Rule::DescriptionLength,
            tool,
            format!("the description is {chars} characters long; it must be {MIN_CHARS} to {MAX_CHARS}"),
            if chars < MIN_CHARS {
                "say what the tool does and to what, in a full sentence".into()
            } else {
                "keep what an agent needs to choose the tool; move the rest to the argument descriptions".into()
            },
        );
    }
    if tool.risk != RiskClass::Read && !words::words(text).any(|w| words::states_effect(&w)) {
        findings.tool(
            Rule::DescriptionEffect,
            tool,
            format!(
                "a {} tool's description must say what it changes, and this one uses no verb of effect",
                tool.risk.as_str()
            ),
            "state the effect with a verb: writes, sends, deletes, charges, creates, updates, …".into(),
        );
    }
    id_kinds(findings, tool);
}

/// An argument named `id` (or `…_id`, `…Id`, `ids`) must say what it
/// identifies: models mix up ids of different things that look alike.
fn id_kinds(findings: &mut Findings, tool: &Subject<'_>) {
    let Some(Value::Object(properties)) = tool.input.get("properties") else {
        return;
    };
    for (name, schema) in properties {
        if !is_id(name) {
            continue;
        }
        if !says_kind(schema) {
            findings.schema(
                Rule::DescriptionIdKind,
                tool,
                &format!("/properties/{}", super::schemas::pointer_escape(name)),
                format!("argument `{name}` takes an id but does not say of what"),
                format!(
                    "give `{name}` a description naming the kind and where it comes from, e.g. \"the contact's id, as returned by …_search\""
                ),
            );
        }
    }
}

fn is_id(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    lower == "id"
        || lower == "ids"
        || lower.ends_with("_id")
        || lower.ends_with("_ids")
        || name.ends_with("Id")
        || name.ends_with("Ids")
}

/// The schema's description names something besides "id".
fn says_kind(schema: &Value) -> bool {
    let description = schema
        .as_object()
        .and_then(|s: &Map<String, Value>| s.get("description"))
        .and_then(Value::as_str)
        .unwrap_or("");
    words::words(description)
        .any(|w| !words::is_filler(&w) && !matches!(w.as_str(), "ids" | "identifier" | "unique"))
}
