//! Notes: a small, durable memory that a team's agents share. A note is a
//! titled text with tags under a slug; agents search, read, save and delete
//! notes, and what one session saves the next one finds.
//!
//! Why it is shaped this way:
//!
//! - The plugin holds nothing in instance memory. Every call reads and
//!   writes through the host's `state` import, so notes survive host
//!   restarts and every session and instance sees the same notes, whatever
//!   the manifest's `instance` setting.
//! - Instances run concurrently, so saves are optimistic: each note has a
//!   version, an update must name the version it was based on, and every
//!   write is a compare-and-set on the exact text that was read. Two agents
//!   editing one note cannot overwrite each other unnoticed; the later one
//!   gets `conflict` and is told to merge.
//! - Deleting moves a note to a trash kept 30 days, and there is no restore
//!   tool: an agent's mistaken delete can be undone by an operator, but an
//!   agent cannot bring back what someone else chose to delete.
//! - Updating keeps the version it replaces for 30 days too, and again only
//!   an operator restores it. Saving needs only a task grant while deleting
//!   needs a person's approval, so a save must not destroy text more
//!   thoroughly than an approved delete does.
//! - The tools' logic works on a small `Store` trait rather than on the
//!   bindings, so it is tested natively against an in-memory store; this
//!   file only connects that trait to the `state` import.

mod note;
mod notebook;
mod schemas;
mod text;
mod time;

use notebook::{NoteError, Store, StoreError};
use serde_json::Value;

wit_bindgen::generate!({
    world: "plugin",
    path: "../../wit",
});

use exports::toolhost::plugin::tools::Guest;
use toolhost::plugin::log::{self, Level};
use toolhost::plugin::state::{self, StateError};
use toolhost::plugin::types::{CallContext, ToolError, ToolSpec};

struct Notes;

impl Guest for Notes {
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
        notebook::dispatch(&mut HostState, &tool, &args, time::now_secs())
            .map(|v| v.to_string())
            .map_err(NoteError::into_tool_error)
    }
}

/// The host's `state` import as a `Store`.
struct HostState;

impl Store for HostState {
    fn get(&mut self, key: &str) -> Result<Option<String>, StoreError> {
        state::get(key).map_err(StoreError::from)
    }

    fn compare_and_set(
        &mut self,
        key: &str,
        expected: Option<&str>,
        value: &str,
    ) -> Result<bool, StoreError> {
        state::compare_and_set(key, expected, value).map_err(StoreError::from)
    }

    fn delete(&mut self, key: &str) -> Result<bool, StoreError> {
        state::delete(key).map_err(StoreError::from)
    }

    fn list(&mut self, prefix: &str) -> Result<Vec<String>, StoreError> {
        state::list_keys(prefix).map_err(StoreError::from)
    }
}

impl From<StateError> for StoreError {
    fn from(e: StateError) -> StoreError {
        match e {
            StateError::InvalidKey => StoreError::InvalidKey,
            StateError::QuotaExceeded => StoreError::QuotaExceeded,
            StateError::Unavailable(detail) => {
                // The model is told to retry; the operator needs the detail.
                log::write(Level::Warn, &format!("state unavailable: {detail}"));
                StoreError::Unavailable(detail)
            }
        }
    }
}

impl NoteError {
    fn into_tool_error(self) -> ToolError {
        ToolError {
            code: self.code().into(),
            message: self.to_string(),
            retryable: self.retryable(),
        }
    }
}

export!(Notes);
