//! Reports kept between starts. `serve` lints the whole catalog before it
//! answers anything, and on a catalog that has not changed since the last
//! start the rules would only reach the same findings again: a fifth of a
//! warm start's CPU. So `serve` keeps each report under a digest of
//! everything the rules read, and takes it back when that digest recurs.
//! `toolhost lint` and `toolhost vet` always run the rules.

use std::collections::BTreeSet;
use std::hash::{Hash, Hasher};

use sha2::{Digest, Sha256};

use super::Subject;
use crate::catalog::Refusal;
use crate::manifest::Manifest;

/// Where reports are kept: somewhere only the host's own user can write,
/// since a report decides whether a catalog is served. The shelf also
/// names the build of the host (see `cli::serve`), so that changed rules
/// never meet a report of the old ones.
pub trait ReportShelf {
    /// The report kept under `key`, as [`ReportShelf::put`] was given it.
    fn get(&self, key: &str) -> Option<Vec<u8>>;
    /// Keeps `report` under `key`; failing to is not an error, only a
    /// slower next start.
    fn put(&self, key: &str, report: &[u8]);
}

/// A digest of everything the rules read: each served tool as the rules
/// see it (its plugin, name, risk class, texts, schemas and its plugin's
/// network allow-list), every plugin's name, the `[lint]` settings, each
/// refusal, and every `lint_allow` of the manifest.
pub(super) fn key(
    manifest: &Manifest,
    refusals: &[Refusal],
    subjects: &[Subject<'_>],
    plugins: &BTreeSet<&str>,
) -> String {
    let mut bytes = Bytes(Vec::with_capacity(64 * 1024));
    // Bumped whenever what a report holds, or how it is read back, changes.
    "lint-report-v1".hash(&mut bytes);
    for subject in subjects {
        (subject.plugin, subject.name, subject.risk).hash(&mut bytes);
        (subject.title, subject.description).hash(&mut bytes);
        (subject.input, subject.output, subject.allowed).hash(&mut bytes);
    }
    plugins.hash(&mut bytes);
    manifest.lint.max_tool_text_chars.hash(&mut bytes);
    for refusal in refusals {
        // Each refusal's every field, as it reads: the rules quote them.
        format!("{refusal:?}").hash(&mut bytes);
    }
    for plugin in &manifest.plugins {
        for tool in &plugin.tools {
            (plugin.name.as_str(), tool.name.as_str(), &tool.lint_allow).hash(&mut bytes);
        }
    }
    hex::encode(Sha256::digest(&bytes.0))
}

/// Collects what `Hash` feeds it, so SHA-256 runs once over the whole,
/// not once per string.
struct Bytes(Vec<u8>);

impl Hasher for Bytes {
    fn finish(&self) -> u64 {
        unreachable!("only the collected bytes are used")
    }

    fn write(&mut self, bytes: &[u8]) {
        self.0.extend_from_slice(bytes);
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use serde_json::{Map, Value, json};

    use super::*;
    use crate::lint::{Report, Rule, Severity};
    use crate::manifest::RiskClass;

    const MANIFEST: &str = r#"
[[plugin]]
name = "x"
component = "x.wasm"
sha256 = "0000000000000000000000000000000000000000000000000000000000000000"

[[plugin.tool]]
name = "x_thing_get"
risk = "read"
"#;

    fn manifest(text: &str) -> Manifest {
        Manifest::parse(Path::new("m.toml"), Path::new("/catalog"), text).unwrap()
    }

    fn object(value: Value) -> Map<String, Value> {
        let Value::Object(map) = value else {
            panic!("an object")
        };
        map
    }

    fn key_of(manifest: &Manifest, description: &str, input: &Map<String, Value>) -> String {
        let subject = Subject {
            plugin: "x",
            name: "x_thing_get",
            risk: RiskClass::Read,
            title: "",
            description,
            input,
            output: None,
            allowed: &[],
        };
        key(manifest, &[], &[subject], &BTreeSet::from(["x"]))
    }

    #[test]
    fn the_key_changes_with_each_input_the_rules_read() {
        let m = manifest(MANIFEST);
        let input = object(json!({"type": "object", "additionalProperties": false}));
        let base = key_of(&m, "Returns one thing.", &input);
        assert_eq!(base, key_of(&m, "Returns one thing.", &input));
        assert_ne!(base, key_of(&m, "Returns one thing. ", &input));
        let open = object(json!({"type": "object"}));
        assert_ne!(base, key_of(&m, "Returns one thing.", &open));
        let allowed = manifest(&format!(
            "{MANIFEST}lint_allow = {{ name-vague-verb = \"a reason\" }}\n"
        ));
        assert_ne!(base, key_of(&allowed, "Returns one thing.", &input));
        let capped = manifest(&format!("[lint]\nmax_tool_text_chars = 200\n{MANIFEST}"));
        assert_ne!(base, key_of(&capped, "Returns one thing.", &input));
    }

    #[test]
    fn a_kept_report_reads_back_as_it_was_written() {
        let report = Report {
            findings: vec![crate::lint::Finding {
                rule: Rule::SchemaClosed,
                severity: Severity::Error,
                plugin: "x".into(),
                tool: Some("x_thing_get".into()),
                at: Some("/properties/key".into()),
                message: "the schema is open".into(),
                fix: "close it".into(),
                allowed: Some("a reason".into()),
            }],
        };
        let bytes = serde_json::to_vec(&report).unwrap();
        let back: Report = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(serde_json::to_vec(&back).unwrap(), bytes);
        assert_eq!(back.findings[0].rule, Rule::SchemaClosed);
        // A rule this build does not know makes the report unreadable, so
        // the catalog is linted afresh.
        let unknown = String::from_utf8(bytes)
            .unwrap()
            .replace("schema-closed", "schema-gone");
        assert!(serde_json::from_str::<Report>(&unknown).is_err());
    }
}
