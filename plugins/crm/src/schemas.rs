//! The four tools as the plugin describes them: names, descriptions and
//! JSON Schemas. The bounds here are what the host checks before a call
//! reaches the plugin, so they match what the CRM accepts.

use serde_json::{Value, json};

/// One tool's description.
pub struct Tool {
    /// Tool name, `crm_contact_<verb>`.
    pub name: &'static str,
    /// Short title for clients and approval prompts.
    pub title: &'static str,
    /// What the tool does and changes, for the model.
    pub description: &'static str,
    /// JSON Schema of the arguments.
    pub input: Value,
    /// JSON Schema of the result.
    pub output: Value,
}

/// Contact ids as the CRM issues them.
const ID_PATTERN: &str = "^c_[0-9]{1,12}$";
/// Longest value the CRM stores in a contact field.
pub const MAX_FIELD: u64 = 200;

fn id() -> Value {
    json!({
        "type": "string",
        "pattern": ID_PATTERN,
        "maxLength": 14,
        "description": "The contact's stable id, e.g. c_1001 (not its name)."
    })
}

fn field(description: &str) -> Value {
    json!({
        "type": "string",
        "minLength": 1,
        "maxLength": MAX_FIELD,
        "description": description
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

fn contact() -> Value {
    json!({
        "type": "object",
        "properties": {
            "id": { "type": "string" },
            "name": { "type": "string" },
            "email": { "type": "string" },
            "phone": { "type": "string" },
            "address": { "type": "string" }
        },
        "required": ["id", "name", "email", "phone", "address"]
    })
}

/// The tools in the order `describe` lists them.
pub fn tools() -> Vec<Tool> {
    vec![
        Tool {
            name: "crm_contact_search",
            title: "Search CRM contacts",
            description: "Searches the CRM's contacts by name or e-mail address (case-insensitive \
                substring, e.g. a surname or a mail domain). Returns at most `limit` contacts \
                (default 10, at most 50) with their ids, and `truncated: true` when more matched: \
                then search with more specific text. The id is what the other crm tools take. \
                Changes nothing.",
            input: object(
                json!({
                    "query": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": 100,
                        "description": "Text to find in contact names and e-mail addresses."
                    },
                    "limit": { "type": "integer", "minimum": 1, "maximum": 50, "default": 10 }
                }),
                &["query"],
            ),
            output: json!({
                "type": "object",
                "properties": {
                    "contacts": { "type": "array", "items": contact() },
                    "truncated": { "type": "boolean" }
                },
                "required": ["contacts", "truncated"]
            }),
        },
        Tool {
            name: "crm_contact_get",
            title: "Get a CRM contact",
            description: "Returns one contact (name, e-mail, phone, address) from the CRM. Takes \
                the contact's stable id, like c_1001; a display name is not an id, so use \
                crm_contact_search to find it. Changes nothing.",
            input: object(json!({ "id": id() }), &["id"]),
            output: contact(),
        },
        Tool {
            name: "crm_contact_update",
            title: "Update a CRM contact",
            description: "Writes new values for a contact's address, phone or e-mail to the CRM \
                immediately; there is no draft and no undo. Changes only the fields given (at \
                least one) and leaves the others as they are; the name cannot be changed. Takes \
                the contact's id (from crm_contact_search). Returns the updated contact.",
            input: json!({
                "type": "object",
                "properties": {
                    "id": id(),
                    "address": field("New postal address, on one line."),
                    "phone": field("New phone number."),
                    "email": {
                        "type": "string",
                        "minLength": 3,
                        "maxLength": MAX_FIELD,
                        "pattern": "^[^@\\s]+@[^@\\s]+$",
                        "description": "New e-mail address."
                    }
                },
                "required": ["id"],
                // The id plus at least one field to change.
                "minProperties": 2,
                "additionalProperties": false
            }),
            output: contact(),
        },
        Tool {
            name: "crm_contact_delete",
            title: "Delete a CRM contact",
            description: "Permanently deletes the contact from the CRM, with everything stored \
                about it; this cannot be undone and the id is not reused. Takes the contact's id \
                (from crm_contact_search). Returns {\"deleted\": id}.",
            input: object(json!({ "id": id() }), &["id"]),
            output: json!({
                "type": "object",
                "properties": { "deleted": { "type": "string" } },
                "required": ["deleted"]
            }),
        },
    ]
}
