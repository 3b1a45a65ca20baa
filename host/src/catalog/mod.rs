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
    MAX_HIDDEN_REPORTED, Refusal, RefusalCause, describe_component, load, load_described,
    load_for_vetting,
};
pub use schema::{CheckError, SchemaError, ToolSchema};
pub use texts::{HiddenText, hidden_in_tool};
pub use vetted::{Difference, differences, vetted_tool};

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::manifest::{InstanceMode, PluginName, RiskClass, ToolName, Vetted};
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
    /// The plugin and directory of a `files` grant that lets a served
    /// plugin see `file` (a file the host reads that the manifest does not
    /// know of, such as the admin token file), if any. Compared with where
    /// each granted directory really is, as opened for the plugin.
    pub fn grant_holding(&self, file: &Path) -> Option<(PluginName, PathBuf)> {
        let file = std::fs::canonicalize(file).unwrap_or_else(|_| file.to_path_buf());
        self.plugins.iter().find_map(|plugin| {
            let shared = plugin.prepared.shared();
            shared
                .files
                .iter()
                .find(|grant| file.starts_with(&grant.real))
                .map(|grant| (shared.name.clone(), grant.real.clone()))
        })
    }

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
