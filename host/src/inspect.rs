//! `toolhost plugin inspect`: what a component is and offers, before any
//! manifest declares it — its digest, the interfaces it imports and exports,
//! whether it fits the `plugin` world, the tools it describes with their
//! schemas, and what the lint finds in them.
//!
//! The component runs only to answer `describe()`, with the default limits
//! and nothing granted: no network, no directories, no secrets, and a
//! throwaway store.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use crate::catalog::{self, ToolSchema};
use crate::lint::{self, Described, Report};
use crate::manifest::{PluginName, Sha256Digest, ToolName};
use crate::sandbox::{EngineSettings, Sandbox};
use crate::store::{SqliteStore, Store};

/// More tools than any reviewed plugin needs; inspection stops there.
pub const MAX_TOOLS: usize = 1_000;

/// The interface every plugin must export.
pub const TOOLS_EXPORT: &str = "toolhost:plugin/tools@0.2.0";

/// Why a component could not be inspected at all.
#[derive(Debug, thiserror::Error)]
pub enum InspectError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0}")]
    Host(String),
}

/// Everything `inspect` found.
#[derive(Debug, Serialize)]
pub struct Inspection {
    pub file: PathBuf,
    pub bytes: usize,
    pub sha256: String,
    pub imports: Vec<String>,
    pub exports: Vec<String>,
    /// `None` when the component fits the world; otherwise why not.
    pub misfit: Option<String>,
    pub tools: Vec<InspectedTool>,
    pub lint: Report,
}

/// One tool as the component describes it.
#[derive(Debug, Serialize)]
pub struct InspectedTool {
    pub name: String,
    pub title: String,
    pub description: String,
    /// The risk class its verb says; the manifest decides the real one.
    pub risk: &'static str,
    pub input_schema: Value,
    pub output_schema: Option<Value>,
}

pub async fn inspect(path: &Path) -> Result<Inspection, InspectError> {
    let bytes = std::fs::read(path).map_err(|source| InspectError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    inspect_bytes(path, bytes).await
}

/// As [`inspect`], for a component already in memory (pulled from a
/// registry); `path` is what reports call it.
pub async fn inspect_bytes(path: &Path, bytes: Vec<u8>) -> Result<Inspection, InspectError> {
    let digest = Sha256Digest::of(&bytes);
    let sha256 = digest.to_string();
    let sandbox = Sandbox::new(None, EngineSettings::default())
        .map_err(|e| InspectError::Host(e.to_string()))?;
    let mut inspection = Inspection {
        file: path.to_path_buf(),
        bytes: bytes.len(),
        sha256,
        imports: Vec::new(),
        exports: Vec::new(),
        misfit: None,
        tools: Vec::new(),
        lint: Report::default(),
    };
    // Compiling is CPU-heavy; the component compiled here is the one
    // describing it below reuses.
    let interfaces = tokio::task::spawn_blocking({
        let (sandbox, bytes) = (sandbox.clone(), bytes.clone());
        move || sandbox.interfaces(&bytes, &digest)
    })
    .await
    .map_err(|e| InspectError::Host(e.to_string()))?;
    match interfaces {
        Ok(interfaces) => {
            inspection.imports = interfaces.imports;
            inspection.exports = interfaces.exports;
        }
        Err(e) => {
            inspection.misfit = Some(format!("not a component wasmtime can load: {e}"));
            return Ok(inspection);
        }
    }
    if !inspection.exports.iter().any(|e| e == TOOLS_EXPORT) {
        inspection.misfit = Some(format!(
            "it does not export {TOOLS_EXPORT}; build it against wit/ (world `plugin`)"
        ));
        return Ok(inspection);
    }

    let scratch = Scratch::new().map_err(InspectError::Host)?;
    let store: Arc<dyn Store> =
        Arc::new(SqliteStore::open(&scratch.0).map_err(|e| InspectError::Host(e.to_string()))?);
    let name = stem_name(path);
    let specs = match catalog::describe_component(&sandbox, &store, bytes, name).await {
        Ok(specs) => specs,
        Err(reason) => {
            inspection.misfit = Some(reason);
            return Ok(inspection);
        }
    };
    // An unvetted component may describe anything; a catalog this large is
    // refused at load anyway, and the lint compares tools in pairs.
    if specs.len() > MAX_TOOLS {
        inspection.misfit = Some(format!(
            "it describes {} tools; a plugin may offer at most {MAX_TOOLS}",
            specs.len()
        ));
        return Ok(inspection);
    }
    if let Some(bad) = specs
        .iter()
        .find(|s| ToolName::try_from(s.name.clone()).is_err())
    {
        inspection.misfit = Some(format!(
            "it describes a tool named {:?}, which is not a valid tool name (snake_case, at most 64 characters)",
            bad.name.chars().take(80).collect::<String>()
        ));
        return Ok(inspection);
    }
    // Checked as loading checks them, so what fits here is what `serve`
    // accepts.
    let mut schemas = Vec::with_capacity(specs.len());
    for spec in &specs {
        let parse = |kind: &str, text: &str| {
            ToolSchema::parse(text)
                .map(|schema| schema.document().clone())
                .map_err(|e| format!("the {kind} schema of `{}` is refused: {e}", spec.name))
        };
        let checked = parse("input", &spec.input_schema).and_then(|input| {
            let output = spec
                .output_schema
                .as_deref()
                .map(|text| parse("output", text))
                .transpose()?;
            Ok((input, output))
        });
        let (input, output) = match checked {
            Ok(schemas) => schemas,
            Err(reason) => {
                inspection.misfit = Some(reason);
                inspection.tools.clear();
                return Ok(inspection);
            }
        };
        inspection.tools.push(InspectedTool {
            name: spec.name.clone(),
            title: spec.title.clone(),
            description: spec.description.clone(),
            risk: lint::risk_of_verb(&spec.name).as_str(),
            input_schema: Value::Object((*input).clone()),
            output_schema: output.as_ref().map(|o| Value::Object((**o).clone())),
        });
        schemas.push((input, output));
    }
    let described: Vec<Described<'_>> = specs
        .iter()
        .zip(&schemas)
        .map(|(spec, (input, output))| Described {
            name: &spec.name,
            title: &spec.title,
            description: &spec.description,
            input: input.as_ref(),
            output: output.as_deref(),
        })
        .collect();
    inspection.lint = lint::lint_described(&described);
    Ok(inspection)
}

/// A plugin name for the component's log lines and scratch state: its file
/// name, if that is a valid plugin name.
fn stem_name(path: &Path) -> PluginName {
    let stem = path
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or_default()
        .to_ascii_lowercase()
        .replace(['-', '_'], "");
    PluginName::try_from(stem)
        .or_else(|_| PluginName::try_from("inspected".to_string()))
        .expect("a valid plugin name")
}

/// A private directory removed when inspection ends.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Result<Scratch, String> {
        let dir = std::env::temp_dir().join(format!(
            "toolhost-inspect-{}-{}",
            std::process::id(),
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        Ok(Scratch(dir))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
