//! The Simhaven helpdesk: support tickets about the "Tidenwächter TW-2"
//! water-level sensor by Nordwerk Simhaven, and the product doc that is the
//! helpdesk's only source of facts.
//!
//! The plugin keeps its tickets in instance memory: with `instance =
//! "session"` each MCP session works on its own copy. It never judges a
//! ticket itself (no guessed category, no drafted answer, no bulk action):
//! that stays with the agent.

mod desk;
mod schemas;

use desk::{Desk, DeskError};
use serde_json::Value;
use std::cell::RefCell;

wit_bindgen::generate!({
    world: "plugin",
    path: "../../wit",
});

use exports::toolhost::plugin::tools::Guest;
use toolhost::plugin::config;
use toolhost::plugin::log::{self, Level};
use toolhost::plugin::types::{CallContext, ToolError, ToolSpec};

thread_local! {
    /// Built on the first call so that `describe` needs no config.
    static DESK: RefCell<Option<Desk>> = const { RefCell::new(None) };
}

struct Helpdesk;

impl Guest for Helpdesk {
    fn describe() -> Vec<ToolSpec> {
        schemas::tools()
            .into_iter()
            .map(|t| ToolSpec {
                name: t.name.to_string(),
                title: t.title.to_string(),
                description: t.description.to_string(),
                input_schema: t.input.to_string(),
                output_schema: t.output.map(|o| o.to_string()),
            })
            .collect()
    }

    fn call(tool: String, arguments: String, _context: CallContext) -> Result<String, ToolError> {
        let args: Value = serde_json::from_str(&arguments).map_err(|e| ToolError {
            code: "invalid_arguments".into(),
            message: format!("arguments are not JSON: {e}"),
            retryable: false,
        })?;
        DESK.with_borrow_mut(|slot| {
            let desk = match slot {
                Some(desk) => desk,
                None => slot.insert(Desk::new(rounds()?)),
            };
            desk.dispatch(&tool, &args)
                .map(|v| v.to_string())
                .map_err(DeskError::into_tool_error)
        })
    }
}

/// Reads `rounds` from the manifest config: how many copies of the eight
/// tickets to serve (so paging can be tried on hundreds).
fn rounds() -> Result<u32, ToolError> {
    let Some(raw) = config::get("rounds") else {
        return Ok(1);
    };
    match raw.trim().parse::<u32>() {
        Ok(n) if (1..=desk::MAX_ROUNDS).contains(&n) => Ok(n),
        _ => {
            log::write(Level::Error, &format!("config rounds = {raw:?} is invalid"));
            Err(ToolError {
                code: "config_invalid".into(),
                message: format!(
                    "The helpdesk is misconfigured (rounds must be 1..={}). Stop and tell the operator.",
                    desk::MAX_ROUNDS
                ),
                retryable: false,
            })
        }
    }
}

impl DeskError {
    fn into_tool_error(self) -> ToolError {
        ToolError {
            code: self.code().into(),
            message: self.to_string(),
            retryable: false,
        }
    }
}

export!(Helpdesk);
