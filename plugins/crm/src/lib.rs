//! Contacts in the demo CRM (`crm-upstream`), reached over HTTP.
//!
//! The plugin keeps no contact data: every call asks the CRM at the
//! manifest's `base_url`. It never holds the CRM's credential either: the
//! host adds the `Authorization` header to requests it lets through, so a
//! 401 from the CRM is the operator's problem, not something the model can
//! fix.

mod client;

use client::Client;
use schemars::JsonSchema;
use serde::Deserialize;
use toolhost_sdk::{CallContext, ToolError, Toolbox, config};

/// Longest value the CRM stores in a contact field.
pub const MAX_FIELD: u64 = 200;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SearchArgs {
    /// Text to find in contact names and e-mail addresses.
    #[schemars(length(min = 1, max = 100))]
    query: String,
    /// Contacts at most.
    #[serde(default = "default_limit")]
    #[schemars(range(min = 1, max = 50))]
    limit: u32,
}

fn default_limit() -> u32 {
    10
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct IdArgs {
    /// The contact's stable id, e.g. c_1001 (not its name).
    #[schemars(regex(pattern = r"^c_[0-9]{1,12}$"), length(max = 14))]
    id: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
// The id plus at least one field to change.
#[schemars(extend("minProperties" = 2))]
struct UpdateArgs {
    /// The contact's stable id, e.g. c_1001 (not its name).
    #[schemars(regex(pattern = r"^c_[0-9]{1,12}$"), length(max = 14))]
    id: String,
    /// New postal address, on one line.
    #[schemars(length(min = 1, max = MAX_FIELD))]
    address: Option<String>,
    /// New phone number.
    #[schemars(length(min = 1, max = MAX_FIELD))]
    phone: Option<String>,
    /// New e-mail address.
    #[schemars(length(min = 3, max = MAX_FIELD), regex(pattern = r"^[^@\s]+@[^@\s]+$"))]
    email: Option<String>,
}

fn toolbox() -> Toolbox {
    Toolbox::new()
        .tool(
            "crm_contact_search",
            "Search CRM contacts",
            "Searches the CRM's contacts by name or e-mail address (case-insensitive substring, \
             e.g. a surname or a mail domain). Returns at most `limit` contacts (default 10, at \
             most 50) with their ids, and `truncated: true` when more matched: then search with \
             more specific text. The id is what the other crm tools take. Changes nothing.",
            |_: &CallContext, a: SearchArgs| client()?.search(&a.query, a.limit),
        )
        .tool(
            "crm_contact_get",
            "Get a CRM contact",
            "Returns one contact (name, e-mail, phone, address) from the CRM. Takes the \
             contact's stable id, like c_1001; a display name is not an id, so use \
             crm_contact_search to find it. Changes nothing.",
            |_: &CallContext, a: IdArgs| client()?.get(&a.id),
        )
        .tool(
            "crm_contact_update",
            "Update a CRM contact",
            "Writes new values for a contact's address, phone or e-mail to the CRM immediately; \
             there is no draft and no undo. Changes only the fields given (at least one) and \
             leaves the others as they are; the name cannot be changed. Takes the contact's id \
             (from crm_contact_search). Returns the updated contact.",
            |_: &CallContext, a: UpdateArgs| client()?.update(&a.id, a.address, a.phone, a.email),
        )
        .tool(
            "crm_contact_delete",
            "Delete a CRM contact",
            "Permanently deletes the contact from the CRM, with everything stored about it; this \
             cannot be undone and the id is not reused. Takes the contact's id (from \
             crm_contact_search). Returns {\"deleted\": id}.",
            |_: &CallContext, a: IdArgs| client()?.delete(&a.id),
        )
}

toolhost_sdk::export_plugin!(toolbox);

/// Read per call rather than at load: a missing `base_url` should fail the
/// calls with a message the model can pass on, not the plugin's load.
fn client() -> Result<Client, ToolError> {
    match config::get("base_url") {
        Some(url) if !url.trim().is_empty() => {
            Ok(Client::new(url.trim().trim_end_matches('/').to_string()))
        }
        _ => Err(ToolError::new(
            "not_configured",
            "The crm plugin has no base_url in its manifest config, so it cannot reach the CRM. \
             Stop and tell the operator.",
        )),
    }
}
