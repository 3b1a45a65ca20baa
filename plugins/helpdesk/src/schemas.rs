//! The nine tools as the helpdesk describes them: names, descriptions and
//! JSON Schemas. Bounds live here, so the host refuses bad arguments before
//! the plugin runs.

use serde_json::{Value, json};

pub struct Tool {
    pub name: &'static str,
    pub title: &'static str,
    pub description: &'static str,
    pub input: Value,
    pub output: Option<Value>,
}

const KEY_PATTERN: &str = "^T-\\d{4}$";

fn key() -> Value {
    json!({
        "type": "string",
        "pattern": KEY_PATTERN,
        "maxLength": 6,
        "description": "Ticket key, e.g. T-1041."
    })
}

fn object(properties: Value, required: &[&str]) -> Value {
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false
    })
}

fn row_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "key": { "type": "string" },
            "subject": { "type": "string" },
            "from": { "type": "string" },
            "received": { "type": "string" },
            "status": { "enum": ["open", "answered", "escalated", "closed"] },
            "category": { "enum": ["question", "malfunction", "billing", "legal", "spam", null] }
        },
        "required": ["key", "subject", "from", "received", "status", "category"]
    })
}

pub fn tools() -> Vec<Tool> {
    vec![
        Tool {
            name: "helpdesk_ticket_list",
            title: "List helpdesk tickets",
            description: "Lists helpdesk tickets, newest key last, without their full text (use \
                helpdesk_ticket_get for that). Filters by status and category (\"none\" = not yet \
                categorised). Pages with limit (default 25, at most 100) and offset; `rest` says \
                how many matching tickets come after this page. Changes nothing.",
            input: object(
                json!({
                    "status": { "enum": ["open", "answered", "escalated", "closed"] },
                    "category": { "enum": ["question", "malfunction", "billing", "legal", "spam", "none"] },
                    "limit": { "type": "integer", "minimum": 1, "maximum": 100, "default": 25 },
                    "offset": { "type": "integer", "minimum": 0, "maximum": 100000, "default": 0 }
                }),
                &[],
            ),
            output: Some(json!({
                "type": "object",
                "properties": {
                    "total": { "type": "integer" },
                    "matches": { "type": "integer" },
                    "offset": { "type": "integer" },
                    "rest": { "type": "integer" },
                    "tickets": { "type": "array", "items": row_schema() }
                },
                "required": ["total", "matches", "offset", "rest", "tickets"]
            })),
        },
        Tool {
            name: "helpdesk_ticket_get",
            title: "Read one helpdesk ticket",
            description: "Returns one ticket by its key (T-1041 style) with its full text, the \
                answers given so far and any escalation. Unknown keys give not_found. Changes \
                nothing.",
            input: object(json!({ "key": key() }), &["key"]),
            output: None,
        },
        Tool {
            name: "helpdesk_ticket_search",
            title: "Search helpdesk tickets",
            description: "Finds tickets whose subject or text contains every word of the query \
                (case-insensitive). Returns at most limit rows (default 10, at most 50) without \
                full text. Changes nothing.",
            input: object(
                json!({
                    "query": { "type": "string", "minLength": 1, "maxLength": 200 },
                    "limit": { "type": "integer", "minimum": 1, "maximum": 50, "default": 10 }
                }),
                &["query"],
            ),
            output: None,
        },
        Tool {
            name: "helpdesk_doc_read",
            title: "Read the product doc",
            description: "Returns the product doc of the Tidenwächter TW-2: warranty, return \
                window, battery, rated depth, delivery and which team handles what. It is the \
                helpdesk's only source of facts; answer customers from it alone. Changes nothing.",
            input: object(json!({}), &[]),
            output: Some(json!({
                "type": "object",
                "properties": { "title": { "type": "string" }, "text": { "type": "string" } },
                "required": ["title", "text"]
            })),
        },
        Tool {
            name: "helpdesk_stats_get",
            title: "Count tickets",
            description: "Counts tickets by status and by category (uncategorised tickets count \
                as \"none\"). Changes nothing.",
            input: object(json!({}), &[]),
            output: Some(json!({
                "type": "object",
                "properties": {
                    "total": { "type": "integer" },
                    "by_status": { "type": "object" },
                    "by_category": { "type": "object" }
                },
                "required": ["total", "by_status", "by_category"]
            })),
        },
        Tool {
            name: "helpdesk_ticket_categorize",
            title: "Set a ticket's category",
            description: "Writes the category of one ticket (question, malfunction, billing, \
                legal or spam), replacing any earlier one. You judge the category; the tool \
                does not guess it. Changes nothing else.",
            input: object(
                json!({
                    "key": key(),
                    "category": { "enum": ["question", "malfunction", "billing", "legal", "spam"] }
                }),
                &["key", "category"],
            ),
            output: None,
        },
        Tool {
            name: "helpdesk_ticket_answer",
            title: "Send an answer to a customer",
            description: "Sends your answer (10 to 4000 characters) to the customer of one \
                ticket and sets its status to answered. Refuses closed tickets (ticket_closed) \
                and escalated ones (ticket_escalated). Answer only from the product doc.",
            input: object(
                json!({
                    "key": key(),
                    "answer": { "type": "string", "minLength": 10, "maxLength": 4000 }
                }),
                &["key", "answer"],
            ),
            output: None,
        },
        Tool {
            name: "helpdesk_ticket_escalate",
            title: "Escalate a ticket to a team",
            description: "Hands one ticket to the legal, engineering or billing team with your \
                reason (10 to 500 characters) and sets its status to escalated; the helpdesk \
                sends no further answers on it. Refuses closed or already escalated tickets.",
            input: object(
                json!({
                    "key": key(),
                    "team": { "enum": ["legal", "engineering", "billing"] },
                    "reason": { "type": "string", "minLength": 10, "maxLength": 500 }
                }),
                &["key", "team", "reason"],
            ),
            output: None,
        },
        Tool {
            name: "helpdesk_ticket_close",
            title: "Close a ticket",
            description: "Closes one ticket without sending anything to the customer (spam is \
                closed, not answered); a closed ticket cannot be answered or escalated again. \
                Refuses a ticket that is already closed.",
            input: object(
                json!({
                    "key": key(),
                    "reason": { "type": "string", "minLength": 1, "maxLength": 500 }
                }),
                &["key"],
            ),
            output: None,
        },
    ]
}
