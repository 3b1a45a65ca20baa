//! Contacts in the demo CRM (`crm-upstream`), reached over HTTP.
//!
//! The plugin keeps no contact data: every call asks the CRM at the
//! manifest's `base_url`. It never holds the CRM's credential either: the
//! host adds the `Authorization` header to requests it lets through, so a
//! 401 from the CRM is the operator's problem, not something the model can
//! fix.

mod client;
mod schemas;

use client::Client;
use serde::Deserialize;
use serde_json::Value;

wit_bindgen::generate!({
    world: "plugin",
    path: "../../wit",
});

use exports::toolhost::plugin::tools::Guest;
use toolhost::plugin::config;
use toolhost::plugin::types::{CallContext, ToolError, ToolSpec};

struct Crm;

impl Guest for Crm {
    fn describe() -> Vec<ToolSpec> {
        schemas::tools()
            .into_iter()
            .map(|t| ToolSpec {
                name: t.name.to_string(),
                title: t.title.to_string(),
                description: t.description.to_string(),
                input_schema: t.input.to_string(),
                output_schema: Some(t.output.to_string()),
            })
            .collect()
    }

    fn call(tool: String, arguments: String, _context: CallContext) -> Result<String, ToolError> {
        let args: Value = serde_json::from_str(&arguments)
            .map_err(|e| invalid_arguments(format!("the arguments are not JSON: {e}")))?;
        let client = Client::new(base_url()?);
        let result = match tool.as_str() {
            "crm_contact_search" => {
                let args: SearchArgs = parse(args)?;
                client.search(&args.query, args.limit)
            }
            "crm_contact_get" => client.get(&parse::<IdArgs>(args)?.id),
            "crm_contact_update" => {
                let args: UpdateArgs = parse(args)?;
                client.update(&args.id, args.address, args.phone, args.email)
            }
            "crm_contact_delete" => client.delete(&parse::<IdArgs>(args)?.id),
            other => Err(ToolError {
                code: "unknown_tool".into(),
                message: format!("The crm plugin has no tool {other}."),
                retryable: false,
            }),
        };
        result.map(|v| v.to_string())
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchArgs {
    query: String,
    #[serde(default = "default_limit")]
    limit: u32,
}

fn default_limit() -> u32 {
    10
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct IdArgs {
    id: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UpdateArgs {
    id: String,
    address: Option<String>,
    phone: Option<String>,
    email: Option<String>,
}

/// The host has already checked the arguments against the schema; this
/// only fails if the two disagree.
fn parse<T: serde::de::DeserializeOwned>(args: Value) -> Result<T, ToolError> {
    T::deserialize(args).map_err(|e| invalid_arguments(e.to_string()))
}

fn invalid_arguments(detail: String) -> ToolError {
    ToolError {
        code: "invalid_arguments".into(),
        message: format!("The arguments do not fit the tool: {detail}"),
        retryable: false,
    }
}

/// Read per call rather than at load: a missing `base_url` should fail the
/// calls with a message the model can pass on, not the plugin's load.
fn base_url() -> Result<String, ToolError> {
    match config::get("base_url") {
        Some(url) if !url.trim().is_empty() => Ok(url.trim().trim_end_matches('/').to_string()),
        _ => Err(ToolError {
            code: "not_configured".into(),
            message: "The crm plugin has no base_url in its manifest config, so it cannot reach \
                the CRM. Stop and tell the operator."
                .into(),
            retryable: false,
        }),
    }
}

export!(Crm);
