//! What a plugin is, in the terms of `tools-manifest.lock`, and how two
//! such descriptions differ: what loading holds against the lock, and what
//! `toolhost plugin diff` shows a reviewer.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::audit::record::{canonical_map, sha256_hex};
use crate::manifest::{Grants, ToolTexts, Vetted, VettedTool};
use crate::text::visible;

/// A tool's texts, hashed as the lock keeps them and kept for showing.
pub fn vetted_tool(
    title: &str,
    description: &str,
    input: &Map<String, Value>,
    output: Option<&Map<String, Value>>,
) -> VettedTool {
    let texts = ToolTexts {
        title: title.to_string(),
        description: description.to_string(),
        input_schema: canonical_map(input),
        output_schema: output.map(canonical_map),
    };
    VettedTool {
        title: sha256_hex(texts.title.as_bytes()),
        description: sha256_hex(texts.description.as_bytes()),
        input_schema: sha256_hex(texts.input_schema.as_bytes()),
        output_schema: texts
            .output_schema
            .as_deref()
            .map(|s| sha256_hex(s.as_bytes())),
        texts: Some(texts),
    }
}

/// Imports that widen what a plugin can reach: flagged in every diff.
const WIDENING: [(&str, &str); 3] = [
    ("wasi:sockets/", "network sockets"),
    ("wasi:http/", "outbound HTTP"),
    ("wasi:filesystem/", "the file system"),
];

/// One way a plugin differs from what was vetted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Difference {
    /// Another component file (a rebuild, an upgrade or a downgrade).
    Component {
        old: String,
        new: String,
    },
    Import {
        name: String,
        gained: bool,
        /// What a gained import would let the plugin reach, if it widens.
        #[serde(skip_serializing_if = "Option::is_none")]
        widens: Option<&'static str>,
    },
    /// The same interface at another version (a rebuild against newer
    /// WASI): no new reach, but not what was vetted either.
    ImportVersion {
        name: String,
        old: String,
        new: String,
    },
    Export {
        name: String,
        gained: bool,
    },
    ToolAdded {
        tool: String,
    },
    ToolRemoved {
        tool: String,
    },
    /// A text of a tool: `title`, `description`, `input_schema` or
    /// `output_schema`; the texts are there when both sides were read from
    /// components, the new one when the old side is a lock.
    Text {
        tool: String,
        field: &'static str,
        old_sha256: Option<String>,
        new_sha256: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        old: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        new: Option<String>,
    },
    /// Who signed the component, among the trusted keys (a signer lost or
    /// gained); `signed_by` is what refuses, so this only informs.
    Signers {
        old: Vec<String>,
        new: Vec<String>,
    },
    /// A grant of the manifest (`instance`, `config.KEY`, `limits.KEY`,
    /// `network`, `credentials`, `files`).
    Grant {
        what: String,
        old: String,
        new: String,
    },
}

impl Difference {
    /// Whether this difference refuses a plugin at load until it is vetted
    /// again: what the component offers changed. A new digest alone (a
    /// rebuild) and the manifest's own grants do not; `toolhost vet --check`
    /// reports those too.
    pub fn refuses(&self) -> bool {
        !matches!(
            self,
            Difference::Component { .. } | Difference::Grant { .. } | Difference::Signers { .. }
        )
    }
}

impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Difference::Component { old, new } => write!(f, "~ component sha256 {old} -> {new}"),
            Difference::Import {
                name,
                gained,
                widens,
            } => {
                write!(f, "{} import {}", sign(*gained), visible(name))?;
                match widens {
                    Some(what) if *gained => write!(f, "  [WIDENS: {what}]"),
                    _ => Ok(()),
                }
            }
            Difference::ImportVersion { name, old, new } => {
                write!(
                    f,
                    "~ import {}@{} -> @{}",
                    visible(name),
                    visible(old),
                    visible(new)
                )
            }
            Difference::Export { name, gained } => {
                write!(f, "{} export {}", sign(*gained), visible(name))
            }
            Difference::ToolAdded { tool } => write!(f, "+ tool {}", visible(tool)),
            Difference::ToolRemoved { tool } => write!(f, "- tool {}", visible(tool)),
            Difference::Text {
                tool,
                field,
                old,
                new,
                ..
            } => {
                write!(f, "~ {} {field} changed", visible(tool))?;
                match (old, new) {
                    (Some(old), Some(new)) => {
                        write!(f, ":\n    - {}\n    + {}", visible(old), visible(new))
                    }
                    (None, Some(new)) => write!(
                        f,
                        "\n    (the lock keeps only its hash) now:\n    + {}",
                        visible(new)
                    ),
                    _ => Ok(()),
                }
            }
            Difference::Signers { old, new } => {
                let names = |v: &[String]| match v.is_empty() {
                    true => "(none trusted)".to_string(),
                    false => v.iter().map(|n| visible(n)).collect::<Vec<_>>().join(", "),
                };
                write!(f, "~ signed by {} -> {}", names(old), names(new))
            }
            Difference::Grant { what, old, new } => {
                write!(f, "~ grant {what}: {} -> {}", visible(old), visible(new))
            }
        }
    }
}

fn sign(gained: bool) -> char {
    if gained { '+' } else { '-' }
}

/// Every way `new` differs from `old`, in a stable order: component,
/// imports, exports, tools, texts, grants.
pub fn differences(old: &Vetted, new: &Vetted) -> Vec<Difference> {
    let mut found = Vec::new();
    if old.sha256 != new.sha256 {
        found.push(Difference::Component {
            old: old.sha256.clone(),
            new: new.sha256.clone(),
        });
    }
    let (old_imports, new_imports) = (versions(&old.imports), versions(&new.imports));
    for (name, version) in &new_imports {
        match old_imports.get(name) {
            Some(old_version) if old_version == version => {}
            Some(old_version) => found.push(Difference::ImportVersion {
                name: name.to_string(),
                old: old_version.to_string(),
                new: version.to_string(),
            }),
            None => found.push(Difference::Import {
                name: joined(name, version),
                gained: true,
                widens: WIDENING
                    .iter()
                    .find(|(prefix, _)| name.starts_with(prefix))
                    .map(|(_, what)| *what),
            }),
        }
    }
    for (name, version) in &old_imports {
        if !new_imports.contains_key(name) {
            found.push(Difference::Import {
                name: joined(name, version),
                gained: false,
                widens: None,
            });
        }
    }
    let (old_exports, new_exports) = (set(&old.exports), set(&new.exports));
    for name in new_exports.difference(&old_exports) {
        found.push(Difference::Export {
            name: name.to_string(),
            gained: true,
        });
    }
    for name in old_exports.difference(&new_exports) {
        found.push(Difference::Export {
            name: name.to_string(),
            gained: false,
        });
    }
    for tool in new.tool.keys().filter(|t| !old.tool.contains_key(*t)) {
        found.push(Difference::ToolAdded { tool: tool.clone() });
    }
    for tool in old.tool.keys().filter(|t| !new.tool.contains_key(*t)) {
        found.push(Difference::ToolRemoved { tool: tool.clone() });
    }
    for (name, new_tool) in &new.tool {
        if let Some(old_tool) = old.tool.get(name) {
            texts(&mut found, name, old_tool, new_tool);
        }
    }
    if old.signers != new.signers {
        found.push(Difference::Signers {
            old: old.signers.clone(),
            new: new.signers.clone(),
        });
    }
    grants(&mut found, &old.grants, &new.grants);
    found
}

/// Interfaces by name without their version (`wasi:cli/exit` →
/// `0.2.6`); one without a version maps to "".
fn versions(names: &[String]) -> BTreeMap<&str, &str> {
    names
        .iter()
        .map(|n| n.rsplit_once('@').unwrap_or((n.as_str(), "")))
        .collect()
}

fn joined(name: &str, version: &str) -> String {
    if version.is_empty() {
        name.to_string()
    } else {
        format!("{name}@{version}")
    }
}

fn set(names: &[String]) -> BTreeSet<&str> {
    names.iter().map(String::as_str).collect()
}

fn texts(found: &mut Vec<Difference>, tool: &str, old: &VettedTool, new: &VettedTool) {
    let text = |t: &VettedTool, field: &str| -> Option<String> {
        let texts = t.texts.as_ref()?;
        match field {
            "title" => Some(texts.title.clone()),
            "description" => Some(texts.description.clone()),
            "input_schema" => Some(texts.input_schema.clone()),
            _ => texts.output_schema.clone(),
        }
    };
    let fields: [(&'static str, Option<&String>, Option<&String>); 4] = [
        ("title", Some(&old.title), Some(&new.title)),
        (
            "description",
            Some(&old.description),
            Some(&new.description),
        ),
        (
            "input_schema",
            Some(&old.input_schema),
            Some(&new.input_schema),
        ),
        (
            "output_schema",
            old.output_schema.as_ref(),
            new.output_schema.as_ref(),
        ),
    ];
    for (field, old_sha, new_sha) in fields {
        if old_sha != new_sha {
            found.push(Difference::Text {
                tool: tool.to_string(),
                field,
                old_sha256: old_sha.cloned(),
                new_sha256: new_sha.cloned(),
                old: text(old, field),
                new: text(new, field),
            });
        }
    }
}

fn grants(found: &mut Vec<Difference>, old: &Grants, new: &Grants) {
    let mut changed = |what: String, old: String, new: String| {
        if old != new {
            found.push(Difference::Grant { what, old, new });
        }
    };
    changed(
        "instance".into(),
        old.instance.clone(),
        new.instance.clone(),
    );
    for (prefix, old_map, new_map) in [
        ("config", &old.config, &new.config),
        ("limits", &old.limits, &new.limits),
    ] {
        let keys: BTreeSet<&String> = old_map.keys().chain(new_map.keys()).collect();
        for key in keys {
            let value = |map: &BTreeMap<String, String>| {
                map.get(key).cloned().unwrap_or_else(|| "(unset)".into())
            };
            changed(format!("{prefix}.{key}"), value(old_map), value(new_map));
        }
    }
    let list = |items: &[String]| {
        if items.is_empty() {
            "(none)".to_string()
        } else {
            items.join("; ")
        }
    };
    changed("network".into(), list(&old.network), list(&new.network));
    changed(
        "credentials".into(),
        list(&old.credentials),
        list(&new.credentials),
    );
    changed("files".into(), list(&old.files), list(&new.files));
}
