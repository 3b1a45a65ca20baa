//! Catalog lint: each rule has a fixture catalog that triggers exactly it,
//! the example catalog is clean, allowed findings stay visible, and `serve`
//! will not serve a catalog with errors.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::support::*;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/lint")
}

/// The fixture catalog `name`, pointed at the built fixture component.
fn catalog(name: &str) -> TestManifest {
    let component = wasm("fixture");
    let text = std::fs::read_to_string(fixtures().join(format!("{name}.toml")))
        .unwrap()
        .replace("{fixture}", &component.display().to_string())
        .replace("{sha256}", &sha256(&component));
    manifest_text(&text)
}

/// `toolhost lint --format json`: whether it passed, and the report.
fn lint(manifest: &Path) -> (bool, Value) {
    // The suite's one compiled-component cache: the example catalog holds
    // the large Python and JavaScript components.
    let cache = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/test-cache/components");
    let out = toolhost()
        .env("TOOLHOST_CACHE_DIR", cache)
        .args(["lint", "--format", "json"])
        .arg(manifest)
        .output()
        .unwrap();
    let report = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "no JSON report ({e}): {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.success(), report)
}

fn rules(report: &Value) -> BTreeSet<String> {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["rule"].as_str().unwrap().to_string())
        .collect()
}

/// The rule ids docs/lint.md documents, one `### \`id\`` heading each.
fn documented_rules() -> BTreeSet<String> {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/lint.md"))
            .unwrap();
    doc.lines()
        .filter_map(|l| l.strip_prefix("### `"))
        .filter_map(|l| l.split('`').next())
        .map(str::to_string)
        .collect()
}

#[test]
fn each_rule_has_a_fixture_catalog_that_triggers_exactly_that_rule() {
    let mut covered = BTreeSet::new();
    for entry in std::fs::read_dir(fixtures()).unwrap() {
        let path = entry.unwrap().path();
        let rule = path.file_stem().unwrap().to_str().unwrap().to_string();
        if rule == "clean" || rule == "allowed" {
            continue;
        }
        let (passed, report) = lint(&catalog(&rule).path);
        assert_eq!(
            rules(&report),
            BTreeSet::from([rule.clone()]),
            "{rule}.toml: {report:#}"
        );
        let findings = report["findings"].as_array().unwrap();
        let severity = findings[0]["severity"].as_str().unwrap();
        assert_eq!(passed, severity == "warning", "{rule}: {report:#}");
        for finding in findings {
            assert!(
                !finding["message"].as_str().unwrap().is_empty()
                    && !finding["fix"].as_str().unwrap().is_empty(),
                "{rule}: {finding}"
            );
        }
        covered.insert(rule);
    }
    // Every rule is documented, and every documented rule has its fixture.
    assert_eq!(covered, documented_rules());
}

#[test]
fn a_clean_catalog_passes_and_an_allowed_finding_stays_visible() {
    let (passed, report) = lint(&catalog("clean").path);
    assert!(passed, "{report:#}");
    assert_eq!(report["findings"], serde_json::json!([]));

    let (passed, report) = lint(&catalog("allowed").path);
    assert!(passed, "{report:#}");
    let finding = &report["findings"][0];
    assert_eq!(finding["rule"], "name-vague-verb");
    assert_eq!(finding["allowed"], "runs a named report, which only reads");
    let text = toolhost()
        .arg("lint")
        .arg(&catalog("allowed").path)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("allowed[name-vague-verb] fixture_report_run")
            && text.contains("0 error(s), 0 warning(s), 1 allowed"),
        "{text}"
    );
}

#[test]
fn the_text_report_names_the_rule_the_tool_the_place_and_the_fix() {
    let m = catalog("schema-string-bounds");
    let out = toolhost().arg("lint").arg(&m.path).output().unwrap();
    assert!(!out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(
            "error[schema-string-bounds] fixture_ticket_search at /properties/query: this string has no `maxLength`"
        ) && text.contains("    fix: add \"maxLength\""),
        "{text}"
    );
}

#[test]
fn the_example_catalog_has_no_findings() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(root.join("tools-manifest.toml"))
        .unwrap()
        .replace(
            "component = \"target/",
            &format!("component = \"{}/target/", root.display()),
        );
    let path = dir.path().join("tools-manifest.toml");
    std::fs::write(&path, text).unwrap();
    // The pins are set by `just build`; the copy is pinned to this build.
    let pinned = toolhost()
        .args(["pin", "--manifest"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(pinned.status.success(), "{pinned:?}");
    let (passed, report) = lint(&path);
    assert!(passed, "{report:#}");
    assert_eq!(report["findings"], serde_json::json!([]), "{report:#}");
}

#[test]
fn serve_refuses_a_catalog_with_lint_errors_and_says_which() {
    let m = catalog("schema-closed");
    let out = start_and_exit(&m, &[]);
    assert!(!out.success, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("error[schema-closed] fixture_ticket_get")
            && out.stderr.contains("1 lint error(s)"),
        "{}",
        out.stderr
    );
    // Warnings are logged, and the catalog is served.
    let m = catalog("intent-collision");
    let out = start_and_exit(&m, &[]);
    assert!(out.success, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("warning[intent-collision] fixture_ticket_fetch"),
        "{}",
        out.stderr
    );
}

/// `serve` keeps each report and takes it back only while everything the
/// rules read is the same: a `lint_allow` or a tool's text changed since
/// is linted again, and its findings are the new ones.
#[test]
fn serve_takes_a_kept_report_only_for_an_unchanged_catalog() {
    const KEPT: &str = "the catalog is unchanged since a start that linted it";
    let warned = "warning[intent-collision] fixture_ticket_fetch";
    let m = catalog("intent-collision");
    let first = start_and_exit(&m, &[]);
    assert!(first.success, "{}", first.stderr);
    assert!(first.stderr.contains(warned), "{}", first.stderr);
    assert!(!first.stderr.contains(KEPT), "{}", first.stderr);
    let reports = || {
        std::fs::read_dir(m.path.parent().unwrap().join(".toolhost/cache/components"))
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .path()
                    .to_string_lossy()
                    .ends_with(".lint.json")
            })
            .count()
    };
    assert_eq!(reports(), 1);
    // Unchanged: the same findings, from the kept report.
    let second = start_and_exit(&m, &[]);
    assert!(second.success, "{}", second.stderr);
    assert!(second.stderr.contains(warned), "{}", second.stderr);
    assert!(second.stderr.contains(KEPT), "{}", second.stderr);

    // The platform team accepts the finding: linted again, not warned.
    let text = std::fs::read_to_string(&m.path).unwrap();
    let allowed = text.replace(
        "name = \"fixture_ticket_fetch\"\nrisk = \"read\"",
        "name = \"fixture_ticket_fetch\"\nrisk = \"read\"\nlint_allow = { intent-collision = \"the two answer different teams\" }",
    );
    assert_ne!(allowed, text);
    std::fs::write(&m.path, &allowed).unwrap();
    let third = start_and_exit(&m, &[]);
    assert!(third.success, "{}", third.stderr);
    assert!(!third.stderr.contains(warned), "{}", third.stderr);
    assert!(!third.stderr.contains(KEPT), "{}", third.stderr);

    // The plugin's schema opens up: an error now, whatever was kept.
    let open = allowed.replacen(", \"additionalProperties\": false", "", 1);
    assert_ne!(open, allowed);
    std::fs::write(&m.path, &open).unwrap();
    let fourth = start_and_exit(&m, &[]);
    assert!(!fourth.success, "{}", fourth.stderr);
    assert!(
        fourth
            .stderr
            .contains("error[schema-closed] fixture_ticket_get"),
        "{}",
        fourth.stderr
    );
    // And again from its kept report: still refused.
    let fifth = start_and_exit(&m, &[]);
    assert!(!fifth.success, "{}", fifth.stderr);
    assert!(fifth.stderr.contains(KEPT), "{}", fifth.stderr);
    assert!(
        fifth
            .stderr
            .contains("error[schema-closed] fixture_ticket_get"),
        "{}",
        fifth.stderr
    );
    // One report per catalog the rules saw: first, allowed, opened.
    assert_eq!(reports(), 3);
}

/// `plugin inspect` lints what a component describes, with risk classes
/// assumed from the verbs, and fails on an error: the fixture's catch-all
/// `fixture_fault_run` has a vague verb.
#[test]
fn inspect_fails_a_component_whose_tools_have_lint_errors() {
    let out = toolhost()
        .args(["plugin", "inspect"])
        .arg(wasm("fixture"))
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["misfit"], Value::Null, "{report:#}");
    let vague: Vec<&Value> = report["lint"]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["rule"] == "name-vague-verb")
        .collect();
    assert_eq!(vague.len(), 1, "{report:#}");
    assert_eq!(vague[0]["tool"], "fixture_fault_run");
    assert_eq!(vague[0]["severity"], "error");
}
