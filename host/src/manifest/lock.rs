//! `tools-manifest.lock`, beside the manifest: what the platform team
//! vetted for each plugin — the component's imports and exports, its tools
//! with the SHA-256 of each text they hand the model, and the grants the
//! manifest gave it. `toolhost vet` writes it; loading holds every plugin
//! against it (see `catalog`), so an upgrade cannot add an import, a tool or
//! a changed description without a reviewer running `vet` again.
//!
//! Data only: what a component offers is read by `catalog`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{Limits, PluginDecl};

/// The lock format this host reads and writes.
pub const LOCK_VERSION: u32 = 1;

/// The whole lock file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lock {
    pub version: u32,
    /// By plugin name.
    #[serde(default)]
    pub plugin: BTreeMap<String, Vetted>,
}

/// What was vetted of one plugin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Vetted {
    /// The component's digest when it was vetted.
    pub sha256: String,
    pub imports: Vec<String>,
    pub exports: Vec<String>,
    pub grants: Grants,
    /// The `[[trust]]` names whose valid signatures the component carried.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub signers: Vec<String>,
    /// By tool name.
    #[serde(default)]
    pub tool: BTreeMap<String, VettedTool>,
}

/// The SHA-256 (hex) of each text a tool hands the model: title and
/// description as UTF-8, schemas in canonical JSON (keys sorted, compact).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VettedTool {
    pub title: String,
    pub description: String,
    pub input_schema: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<String>,
    /// The texts themselves, when they are at hand (read from a component,
    /// never from the lock), so a difference can be shown, not only hashed.
    #[serde(skip)]
    pub texts: Option<ToolTexts>,
}

/// A tool's texts as the model reads them (schemas in canonical JSON).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ToolTexts {
    pub title: String,
    pub description: String,
    pub input_schema: String,
    pub output_schema: Option<String>,
}

/// What the manifest grants the plugin, in words a reviewer reads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Grants {
    pub instance: String,
    #[serde(default)]
    pub config: BTreeMap<String, String>,
    pub limits: BTreeMap<String, String>,
    #[serde(default)]
    pub network: Vec<String>,
    #[serde(default)]
    pub credentials: Vec<String>,
    #[serde(default)]
    pub files: Vec<String>,
}

/// Why the lock cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "{path} is not a lock this host can read: {message}\n  fix: run `toolhost vet` to write it again"
    )]
    Parse { path: PathBuf, message: String },
    #[error(
        "{path} has lock version {found}, newer than this host's {LOCK_VERSION}\n  fix: run a toolhost that knows it, or `toolhost vet` with this one to write it again"
    )]
    Newer { path: PathBuf, found: u32 },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl Lock {
    /// Where the lock of `manifest` lives: the same name with `.lock`.
    pub fn path_for(manifest: &Path) -> PathBuf {
        manifest.with_extension("lock")
    }

    /// The lock at `path`, or `None` when there is none.
    pub fn read(path: &Path) -> Result<Option<Lock>, LockError> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(LockError::Read {
                    path: path.to_path_buf(),
                    source,
                });
            }
        };
        let lock: Lock = toml::from_str(&text).map_err(|e| LockError::Parse {
            path: path.to_path_buf(),
            message: e.message().to_string(),
        })?;
        if lock.version > LOCK_VERSION {
            return Err(LockError::Newer {
                path: path.to_path_buf(),
                found: lock.version,
            });
        }
        Ok(Some(lock))
    }

    /// Writes the lock, replacing the file whole (a temporary file renamed).
    pub fn write(&self, path: &Path) -> Result<(), LockError> {
        let body = toml::to_string_pretty(self).expect("the lock serialises");
        let text = format!(
            "# What the platform team vetted for each plugin of the manifest beside\n\
             # this file: written by `toolhost vet`, checked at every load. Commit it;\n\
             # review changes with `toolhost plugin diff NAME` before vetting again.\n\n{body}"
        );
        let temporary = path.with_extension("lock.tmp");
        let fail = |source| LockError::Write {
            path: path.to_path_buf(),
            source,
        };
        std::fs::write(&temporary, text).map_err(fail)?;
        std::fs::rename(&temporary, path).map_err(fail)
    }
}

impl Grants {
    /// The grants of `decl`, with paths shown relative to `base` (the
    /// manifest's folder) where they lie below it, so the lock reads the
    /// same on every clone.
    pub fn of(decl: &PluginDecl, base: &Path) -> Grants {
        let shown = |path: &Path| {
            path.strip_prefix(base)
                .unwrap_or(path)
                .display()
                .to_string()
        };
        Grants {
            instance: match decl.instance {
                super::InstanceMode::Session => "session".into(),
                super::InstanceMode::Call => "call".into(),
            },
            config: decl.config.clone(),
            limits: limits(&decl.limits, &decl.network.limits),
            network: decl
                .network
                .allow
                .iter()
                .map(|a| {
                    let mut entry = a.destination.to_string();
                    if !a.addresses.is_empty() {
                        let ranges: Vec<String> =
                            a.addresses.iter().map(ToString::to_string).collect();
                        entry.push_str(&format!(" (may reach {})", ranges.join(", ")));
                    }
                    entry
                })
                .collect(),
            credentials: decl
                .network
                .credentials
                .iter()
                .map(|c| {
                    let mut entry = format!(
                        "secret `{}` as header `{}` to {}",
                        c.secret.as_str(),
                        c.header,
                        c.destination
                    );
                    if let Some(tools) = &c.tools {
                        let tools: Vec<&str> = tools.iter().map(|t| t.as_str()).collect();
                        entry.push_str(&format!(" for {}", tools.join(", ")));
                    }
                    entry
                })
                .collect(),
            files: decl
                .files
                .iter()
                .map(|f| {
                    let mode = match f.mode {
                        super::FileMode::Ro => "ro",
                        super::FileMode::Rw => "rw",
                    };
                    format!("{} at {} ({mode})", shown(&f.host), f.guest)
                })
                .collect(),
        }
    }
}

fn limits(limits: &Limits, network: &super::NetworkLimits) -> BTreeMap<String, String> {
    let mut all = BTreeMap::new();
    let mut put = |key: &str, value: String| {
        all.insert(key.to_string(), value);
    };
    put("memory_mib", (limits.memory_bytes >> 20).to_string());
    put(
        "call_timeout_ms",
        limits.call_timeout.as_millis().to_string(),
    );
    put("output_kib", (limits.output_bytes >> 10).to_string());
    put("state_kib", (limits.state_bytes >> 10).to_string());
    put("concurrent", limits.concurrent.to_string());
    put("queue", limits.queue.to_string());
    put("session_share", limits.session_share.to_string());
    put("task_share", limits.task_share.to_string());
    put("log_lines", limits.log_lines.to_string());
    put(
        "fuel",
        limits.fuel.map_or_else(|| "off".into(), |f| f.to_string()),
    );
    put("table_elements", limits.table_elements.to_string());
    put("instances", limits.instances.to_string());
    put(
        "network.timeout_ms",
        network.timeout.as_millis().to_string(),
    );
    put(
        "network.response_kib",
        (network.response_bytes >> 10).to_string(),
    );
    put(
        "network.requests_per_call",
        network.requests_per_call.to_string(),
    );
    put("network.concurrent", network.concurrent.to_string());
    all
}
