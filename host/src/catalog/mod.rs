//! The catalog: the tools the host serves, each joined from what the manifest
//! declares (risk class, idempotence) and what the plugin describes (title,
//! description, schemas), with its argument validator compiled once.
//!
//! Loading it (see `load`) is where a plugin is vetted against its pin and
//! its declaration; a plugin that fails is refused, and the rest served.

mod load;
mod schema;
pub mod source;
mod texts;
mod vetted;

pub use load::{
    MAX_HIDDEN_REPORTED, Refusal, RefusalCause, describe_component, grant_holding, load,
    load_described, load_for_vetting,
};
pub use schema::{CheckError, SchemaError, ToolSchema};
pub use texts::{HiddenText, hidden_in_tool};
pub use vetted::{Difference, differences, vetted_tool};

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::manifest::{InstanceMode, RiskClass, ToolName, Vetted};
use crate::queue::CallQueue;
use crate::sandbox::PreparedPlugin;

/// A tool the host serves.
pub struct CatalogTool {
    pub name: ToolName,
    pub title: String,
    pub description: String,
    pub risk: RiskClass,
    pub idempotent: bool,
    /// The manifest's approval text (destructive tools only).
    pub approval: Option<String>,
    pub input: ToolSchema,
    pub output: Option<ToolSchema>,
    /// Its plugin may send requests outside the host (`openWorldHint`).
    pub open_world: bool,
    /// Index into [`Catalog::plugins`].
    pub plugin: usize,
}

/// A plugin that passed every check at load.
pub struct CatalogPlugin {
    pub prepared: PreparedPlugin,
    /// What it is in the lock's terms: interfaces, tool texts, grants.
    pub vetted: Vetted,
    /// The pinned digest of its component, for the audit trail.
    pub sha256: String,
    pub instance: InstanceMode,
    /// Its call slots (`limits.concurrent`, `limits.queue`).
    pub queue: CallQueue,
}

/// Everything that is served, and what was refused.
#[derive(Default)]
pub struct Catalog {
    pub plugins: Vec<CatalogPlugin>,
    /// In manifest order, which is the order `tools/list` shows.
    pub tools: Vec<Arc<CatalogTool>>,
    by_name: HashMap<String, usize>,
    pub refusals: Vec<Refusal>,
}

impl Catalog {
    /// Looks a tool up by the name a client sent.
    pub fn tool(&self, name: &str) -> Option<&Arc<CatalogTool>> {
        self.by_name.get(name).map(|&i| &self.tools[i])
    }

    fn add_tool(&mut self, tool: CatalogTool) {
        self.by_name
            .insert(tool.name.as_str().to_string(), self.tools.len());
        self.tools.push(Arc::new(tool));
    }
}

impl CatalogTool {
    /// The input schema as the JSON object MCP sends in `tools/list`.
    pub fn input_schema(&self) -> &Arc<Map<String, Value>> {
        self.input.document()
    }
}
