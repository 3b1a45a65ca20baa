//! The descriptions of the shipped plugins as the model reads them in
//! `tools/list`. A description that several tools of a plugin carry (from
//! an argument or result type they share, or a field copied from one type
//! to another) must be true for each of them: every such description is
//! listed here with the tools it was reviewed for, so that sharing a type
//! between tools, or a new tool taking a shared one, is a reviewed decision.

use std::collections::{BTreeMap, BTreeSet};

use rmcp::model::Tool;
use serde_json::{Map, Value, json};

use crate::support::*;

const CRM_TOOLS: [(&str, &str); 4] = [
    ("crm_contact_search", "read"),
    ("crm_contact_get", "read"),
    ("crm_contact_update", "write"),
    ("crm_contact_delete", "destructive"),
];

const TICKET_KEY_TOOLS: &[&str] = &[
    "helpdesk_ticket_answer",
    "helpdesk_ticket_categorize",
    "helpdesk_ticket_close",
    "helpdesk_ticket_escalate",
    "helpdesk_ticket_get",
];

const TICKET_CHANGING_TOOLS: &[&str] = &[
    "helpdesk_ticket_answer",
    "helpdesk_ticket_categorize",
    "helpdesk_ticket_close",
    "helpdesk_ticket_escalate",
];

/// Every description in an input or output schema that more than one tool
/// of a plugin carries, with exactly the tools that carry it. Each was read
/// as true for every one of those tools.
const REVIEWED: &[(&str, &[&str])] = &[
    // helpdesk: the ticket key is looked up the same way by every tool.
    ("Ticket key, e.g. T-1041.", TICKET_KEY_TOOLS),
    (
        "No arguments.",
        &["helpdesk_doc_read", "helpdesk_stats_get"],
    ),
    // Every change returns the ticket's row, and its escalation if it has
    // one (not only when the call escalated it).
    (
        "A ticket after a change: its row, and its escalation if it has one.",
        TICKET_CHANGING_TOOLS,
    ),
    (
        "Who an escalated ticket went to, and why.",
        &[
            "helpdesk_ticket_answer",
            "helpdesk_ticket_categorize",
            "helpdesk_ticket_close",
            "helpdesk_ticket_escalate",
            "helpdesk_ticket_get",
        ],
    ),
    (
        "The team an escalated ticket went to.",
        &[
            "helpdesk_ticket_answer",
            "helpdesk_ticket_categorize",
            "helpdesk_ticket_close",
            "helpdesk_ticket_escalate",
            "helpdesk_ticket_get",
        ],
    ),
    (
        "Where a ticket stands.",
        &[
            "helpdesk_ticket_answer",
            "helpdesk_ticket_categorize",
            "helpdesk_ticket_close",
            "helpdesk_ticket_escalate",
            "helpdesk_ticket_get",
            "helpdesk_ticket_list",
            "helpdesk_ticket_search",
        ],
    ),
    (
        "What a ticket is about, as the agent judged it.",
        &[
            "helpdesk_ticket_answer",
            "helpdesk_ticket_categorize",
            "helpdesk_ticket_close",
            "helpdesk_ticket_escalate",
            "helpdesk_ticket_get",
            "helpdesk_ticket_list",
            "helpdesk_ticket_search",
        ],
    ),
    (
        "A ticket as list and search show it: everything but the full text.",
        &["helpdesk_ticket_list", "helpdesk_ticket_search"],
    ),
    // notes: a slug names the note to read, save or delete alike. What
    // expected_version means differs between save and delete, so each
    // tool describes it itself (see below).
    (
        "The note's slug: its unique name, e.g. deploy-checklist.",
        &["notes_note_delete", "notes_note_get", "notes_note_save"],
    ),
    (
        "RFC 3339, UTC.",
        &["notes_note_get", "notes_note_list", "notes_note_search"],
    ),
    // crm: every tool that takes an id takes the same stable contact id.
    (
        "The contact's stable id, e.g. c_1001 (not its name).",
        &[
            "crm_contact_delete",
            "crm_contact_get",
            "crm_contact_update",
        ],
    ),
    (
        "A contact as the CRM returns it.",
        &[
            "crm_contact_get",
            "crm_contact_search",
            "crm_contact_update",
        ],
    ),
];

/// The three shipped plugins, served together as `tools/list` shows them.
async fn shipped_tools() -> Vec<Tool> {
    let m = manifest(vec![
        PluginEntry::helpdesk(),
        PluginEntry::notes(),
        // Describing needs no network: the CRM is never called here.
        PluginEntry::pinned("crm", &CRM_TOOLS)
            .with("config = { base_url = \"http://127.0.0.1:9\" }"),
    ]);
    let client = stdio(&m, &[]).await;
    let listed = tools(&client).await;
    client.cancel().await.unwrap();
    assert_eq!(
        listed.len(),
        HELPDESK_TOOLS.len() + NOTES_TOOLS.len() + CRM_TOOLS.len()
    );
    listed
}

/// Every `description` in a schema, with its JSON pointer.
fn descriptions(schema: &Value, at: &str, out: &mut Vec<(String, String)>) {
    match schema {
        Value::Object(map) => {
            for (key, value) in map {
                let here = format!("{at}/{key}");
                match (key.as_str(), value) {
                    ("description", Value::String(text)) => out.push((here, text.clone())),
                    // Data, not schemas.
                    ("enum" | "const" | "default" | "examples", _) => {}
                    _ => descriptions(value, &here, out),
                }
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                descriptions(item, &format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

/// Every schema description of a tool: (where, text).
fn schema_descriptions(tool: &Tool) -> Vec<(String, String)> {
    let mut out = Vec::new();
    descriptions(
        &Value::Object(tool.input_schema.as_ref().clone()),
        "input",
        &mut out,
    );
    if let Some(output) = &tool.output_schema {
        descriptions(&Value::Object(output.as_ref().clone()), "output", &mut out);
    }
    out
}

fn plugin_of(tool: &str) -> &str {
    tool.split('_').next().unwrap()
}

#[tokio::test]
async fn every_description_shared_between_tools_is_reviewed_for_each() {
    let listed = shipped_tools().await;
    // (plugin, description) -> the tools carrying it, and where.
    let mut carried: BTreeMap<(String, String), BTreeMap<String, Vec<String>>> = BTreeMap::new();
    for tool in &listed {
        for (at, text) in schema_descriptions(tool) {
            carried
                .entry((plugin_of(&tool.name).to_string(), text))
                .or_default()
                .entry(tool.name.to_string())
                .or_default()
                .push(at);
        }
    }
    let reviewed: BTreeMap<&str, BTreeSet<&str>> = REVIEWED
        .iter()
        .map(|(text, tools)| (*text, tools.iter().copied().collect()))
        .collect();
    assert_eq!(
        reviewed.len(),
        REVIEWED.len(),
        "REVIEWED lists a text twice"
    );

    let mut problems = Vec::new();
    let mut seen = BTreeSet::new();
    for ((plugin, text), tools) in &carried {
        if tools.len() < 2 {
            continue;
        }
        seen.insert(text.as_str());
        let names: BTreeSet<&str> = tools.keys().map(String::as_str).collect();
        match reviewed.get(text.as_str()) {
            Some(expected) if *expected == names => {}
            Some(expected) => problems.push(format!(
                "{plugin}: {text:?} was reviewed for {expected:?} but is carried by {tools:?}: \
                 check it is true for each tool, then update REVIEWED"
            )),
            None => problems.push(format!(
                "{plugin}: {text:?} is carried by {tools:?} but not reviewed: check it is true \
                 for each tool (or give each its own), then add it to REVIEWED"
            )),
        }
    }
    for text in reviewed.keys() {
        if !seen.contains(text) {
            problems.push(format!(
                "REVIEWED lists {text:?}, which no two tools carry any more: remove it"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[tokio::test]
async fn descriptions_state_each_tool_s_own_rules() {
    let listed = shipped_tools().await;
    let tool = |name: &str| listed.iter().find(|t| t.name == name).unwrap();
    let property = |name: &str, field: &str| -> Map<String, Value> {
        tool(name).input_schema["properties"][field]
            .as_object()
            .unwrap_or_else(|| panic!("{name} has no argument {field}"))
            .clone()
    };
    let text = |p: &Map<String, Value>| p["description"].as_str().unwrap().to_string();

    // Save creates when expected_version is 0 or absent; delete never
    // creates, and without it deletes whatever version the note is at.
    let save = property("notes_note_save", "expected_version");
    assert!(text(&save).contains("0 or absent means the note must not exist yet"));
    assert_eq!(save["minimum"], json!(0));
    let delete = property("notes_note_delete", "expected_version");
    let delete_text = text(&delete);
    assert!(!delete_text.contains("must not exist"), "{delete_text}");
    assert!(
        delete_text.contains("deleted only if it is still at this version"),
        "{delete_text}"
    );
    assert!(
        delete_text.contains("Absent: the note is deleted whatever its version"),
        "{delete_text}"
    );
    assert_eq!(delete["minimum"], json!(1), "no note is at version 0");

    // The reason of an escalation and of a closing are told apart.
    assert_eq!(
        text(&property("helpdesk_ticket_escalate", "reason")),
        "Why it needs that team."
    );
    assert!(text(&property("helpdesk_ticket_close", "reason")).contains("closed"));
}

/// Whether `c` is plain text: printable ASCII, a space, or a letter.
/// Control and formatting characters (line breaks, zero-width and
/// direction marks) are not.
fn plain(c: char) -> bool {
    c == ' ' || c.is_ascii_graphic() || (!c.is_ascii() && c.is_alphabetic())
}

#[tokio::test]
async fn descriptions_are_plain_text_without_addresses() {
    let listed = shipped_tools().await;
    for tool in &listed {
        let mut texts = vec![
            ("title".to_string(), tool.title.clone().unwrap_or_default()),
            (
                "description".to_string(),
                tool.description.as_deref().unwrap_or_default().to_string(),
            ),
        ];
        texts.extend(schema_descriptions(tool));
        for (at, text) in texts {
            let name = &tool.name;
            assert!(
                text.chars().all(plain),
                "{name} {at}: {text:?} has a character that is not plain text"
            );
            assert!(
                !text.contains("://") && !text.split_whitespace().any(|w| w.contains('@')),
                "{name} {at}: {text:?} has a URL or an e-mail address"
            );
        }
    }
}
