//! `toolhost vet` (record what the platform team approved in
//! `tools-manifest.lock`) and `toolhost plugin diff` (what a reviewer must
//! see before approving a change: against the lock, or between two
//! component files).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::bail;
use clap::Args;
use serde::Serialize;

use super::{LintFormat, cached_sandbox, open_store, open_trail};
use crate::audit::{Audit, Event};
use crate::catalog::{self, Catalog, Difference, differences, vetted_tool};
use crate::lint::{self, Finding};
use crate::manifest::{
    Grants, LOCK_VERSION, Lock, Manifest, OCI_SCHEME, PluginName, Sha256Digest, Vetted,
};
use crate::store::Store;
use crate::store::operator as cli_operator;
use crate::{inspect, text};

#[derive(Args)]
pub struct VetArgs {
    /// The manifest; the lock is written beside it (`tools-manifest.lock`).
    #[arg(default_value = "tools-manifest.toml")]
    pub manifest: PathBuf,
    /// Write nothing: exit 1 if the lock is missing or any plugin differs
    /// from it in anything (component, interfaces, tools, texts, grants).
    #[arg(long)]
    pub check: bool,
}

/// Loads every plugin without holding it against the lock, so what changed
/// can be seen and accepted; a plugin refused for any other reason is not
/// vetted.
async fn load_unlocked(manifest: &Manifest) -> anyhow::Result<Catalog> {
    let store: Arc<dyn Store> = open_store(manifest).await?;
    let sandbox = cached_sandbox(manifest)?;
    Ok(catalog::load_for_vetting(manifest, &sandbox, &store).await)
}

fn lock_of(catalog: &Catalog) -> Lock {
    Lock {
        version: LOCK_VERSION,
        plugin: catalog
            .plugins
            .iter()
            .map(|p| (p.prepared.shared().name.to_string(), p.vetted.clone()))
            .collect(),
    }
}

/// Every difference between the lock and what loads now, by plugin;
/// plugins new to the lock or gone from it are named as such.
fn compare(old: &Lock, new: &Lock) -> BTreeMap<String, Vec<String>> {
    let mut report = BTreeMap::new();
    for (name, vetted) in &new.plugin {
        let lines = match old.plugin.get(name) {
            None => vec!["+ plugin (not in the lock)".to_string()],
            Some(locked) => differences(locked, vetted)
                .iter()
                .map(ToString::to_string)
                .collect(),
        };
        if !lines.is_empty() {
            report.insert(name.clone(), lines);
        }
    }
    for name in old.plugin.keys().filter(|n| !new.plugin.contains_key(*n)) {
        report.insert(name.clone(), vec!["- plugin (no longer declared)".into()]);
    }
    report
}

pub(super) async fn vet(args: VetArgs) -> anyhow::Result<()> {
    let manifest = Manifest::load(&args.manifest)?;
    let catalog = load_unlocked(&manifest).await?;
    if !catalog.refusals.is_empty() {
        for refusal in &catalog.refusals {
            eprintln!("{}", text::escape_hidden(&refusal.to_string()));
        }
        bail!(
            "{} plugin(s) are refused for reasons a lock cannot accept (see above); fix them, then vet again",
            catalog.refusals.len()
        );
    }
    let found = lock_of(&catalog);
    let path = manifest.lock_path();
    let old = manifest.lock.clone().unwrap_or_default();
    let report = compare(&old, &found);
    for (plugin, lines) in &report {
        println!("plugin `{plugin}`");
        for line in lines {
            for part in line.lines() {
                println!("  {part}");
            }
        }
    }
    if args.check {
        if manifest.lock.is_none() {
            bail!(
                "{} does not exist; run `toolhost vet` to write it",
                path.display()
            );
        }
        if !report.is_empty() {
            bail!(
                "{} plugin(s) differ from {} (see above); review them and run `toolhost vet`",
                report.len(),
                path.display()
            );
        }
        println!("{}: every plugin is as vetted", path.display());
        return Ok(());
    }
    if manifest.lock.is_some() && report.is_empty() {
        println!("{}: every plugin is as vetted; unchanged", path.display());
        return Ok(());
    }
    // Vetting is a decision like opening a task: the trail must be open
    // before anything changes, and the record on disk before it is
    // reported done.
    let audit = Audit::direct(open_trail(&manifest)?);
    found.write(&path)?;
    let written = std::fs::read(&path)?;
    audit
        .record_durable(Event::PluginsVetted {
            lock: path.display().to_string(),
            lock_sha256: Sha256Digest::of(&written).to_string(),
            plugins: found.plugin.keys().cloned().collect(),
            changed: report.keys().cloned().collect(),
            by: cli_operator(),
        })
        .await
        .map_err(|e| {
            anyhow::anyhow!("the lock was written but not recorded in the audit trail: {e}")
        })?;
    println!(
        "{}: {} plugin(s) vetted",
        path.display(),
        found.plugin.len()
    );
    Ok(())
}

/// What `plugin diff` prints as JSON.
#[derive(Serialize)]
struct DiffReport {
    old: String,
    new: String,
    differences: Vec<Difference>,
    /// The lint's findings on the new version.
    lint: Vec<Finding>,
}

/// `toolhost plugin diff`: OLD and NEW components (files or `oci://`
/// references), a plugin name (its lock entry) and a NEW candidate, or one
/// plugin name as it loads now against its lock entry.
pub(super) async fn diff(
    old: String,
    new: Option<String>,
    manifest: PathBuf,
    format: LintFormat,
    plain_http: bool,
) -> anyhow::Result<()> {
    let report = match new {
        Some(new) => diff_components(&old, &new, &manifest, plain_http).await?,
        None => diff_against_lock(&old, &manifest).await?,
    };
    match format {
        LintFormat::Json => println!("{}", text::json(&serde_json::to_value(&report)?, true)),
        LintFormat::Text => {
            println!("{} -> {}", report.old, report.new);
            if report.differences.is_empty() {
                println!("  no differences");
            }
            for difference in &report.differences {
                for line in difference.to_string().lines() {
                    println!("  {line}");
                }
            }
            println!("\nlint of the new version");
            for finding in &report.lint {
                for line in finding.to_string().lines() {
                    println!("  {line}");
                }
            }
            println!("  {} finding(s)", report.lint.len());
        }
    }
    Ok(())
}

/// What a component offers, described with nothing granted (as `plugin
/// inspect` does), with the trusted signers of its signatures.
async fn vetted_named(
    named: super::registry::Named,
    manifest: Option<&Manifest>,
) -> anyhow::Result<(Vetted, Vec<Finding>)> {
    let signers = catalog::source::signers_of(&named.bytes, &named.signatures, manifest);
    let inspection = inspect::inspect_bytes(Path::new(&named.label), named.bytes).await?;
    if let Some(misfit) = &inspection.misfit {
        bail!(
            "{} cannot be described: {}",
            named.label,
            text::escape_hidden(misfit)
        );
    }
    let vetted = Vetted {
        sha256: inspection.sha256.clone(),
        imports: inspection.imports.clone(),
        exports: inspection.exports.clone(),
        grants: Grants {
            instance: String::new(),
            config: BTreeMap::new(),
            limits: BTreeMap::new(),
            network: Vec::new(),
            credentials: Vec::new(),
            files: Vec::new(),
        },
        signers: signers.trusted,
        tool: inspection
            .tools
            .iter()
            .map(|t| {
                let object = |v: &serde_json::Value| v.as_object().cloned().unwrap_or_default();
                let input = object(&t.input_schema);
                let output = t.output_schema.as_ref().map(object);
                (
                    t.name.clone(),
                    vetted_tool(&t.title, &t.description, &input, output.as_ref()),
                )
            })
            .collect(),
    };
    Ok((vetted, inspection.lint.findings))
}

/// OLD and NEW as components; OLD may instead name a plugin of the
/// manifest, whose lock entry is then the old side (and its grants, which a
/// new component does not change, are carried over).
async fn diff_components(
    old: &str,
    new: &str,
    manifest_path: &Path,
    plain_http: bool,
) -> anyhow::Result<DiffReport> {
    // The manifest, when there is one, names trusted signers and registries.
    let manifest = match manifest_path.exists() {
        true => Some(Manifest::load(manifest_path)?),
        false => None,
    };
    let is_component = |s: &str| s.starts_with(OCI_SCHEME) || Path::new(s).exists();
    let (old_label, before) = if is_component(old) {
        let named = super::registry::read_named(old, manifest.as_ref(), plain_http).await?;
        let label = named.label.clone();
        (label, Some(vetted_named(named, manifest.as_ref()).await?.0))
    } else {
        let Some(manifest) = &manifest else {
            bail!(
                "{old:?} is neither a component file, an oci:// reference nor (without {}) a plugin name",
                manifest_path.display()
            );
        };
        let name = PluginName::try_from(old.to_string()).map_err(|_| {
            anyhow::anyhow!(
                "{old:?} is neither a component file, an oci:// reference nor a plugin name"
            )
        })?;
        if !manifest.plugins.iter().any(|p| p.name == name) {
            bail!("the manifest declares no plugin `{name}`");
        }
        let locked = manifest
            .lock
            .as_ref()
            .and_then(|lock| lock.plugin.get(name.as_str()))
            .cloned();
        (
            format!("{} (`{name}`)", manifest.lock_path().display()),
            locked,
        )
    };
    let named = super::registry::read_named(new, manifest.as_ref(), plain_http).await?;
    let new_label = named.label.clone();
    let (mut after, lint) = vetted_named(named, manifest.as_ref()).await?;
    let differences = match &before {
        Some(before) => {
            if !is_component(old) {
                after.grants = before.grants.clone();
            }
            differences(before, &after)
        }
        None => after
            .tool
            .keys()
            .map(|tool| Difference::ToolAdded { tool: tool.clone() })
            .collect(),
    };
    Ok(DiffReport {
        old: old_label,
        new: new_label,
        differences,
        lint,
    })
}

/// A declared plugin as it loads now, against what its lock entry says.
async fn diff_against_lock(name: &str, manifest: &Path) -> anyhow::Result<DiffReport> {
    let name = PluginName::try_from(name.to_string()).map_err(|_| {
        anyhow::anyhow!(
            "{name:?} is neither a file nor a plugin name; give two component files (OLD NEW) or one plugin of the manifest"
        )
    })?;
    let manifest = Manifest::load(manifest)?;
    let Some(lock) = &manifest.lock else {
        bail!(
            "{} does not exist; compare two files (`toolhost plugin diff OLD NEW`) or run `toolhost vet` first",
            manifest.lock_path().display()
        );
    };
    if !manifest.plugins.iter().any(|p| p.name == name) {
        bail!("the manifest declares no plugin `{name}`");
    }
    let catalog = load_unlocked(&manifest).await?;
    if let Some(refusal) = catalog.refusals.iter().find(|r| r.plugin == name) {
        bail!("{}", text::escape_hidden(&refusal.to_string()));
    }
    let plugin = catalog
        .plugins
        .iter()
        .find(|p| p.prepared.shared().name == name)
        .expect("a declared plugin that was not refused loaded");
    let lint = lint::lint(&manifest, &catalog)
        .findings
        .into_iter()
        .filter(|f| f.plugin == name.as_str())
        .collect();
    let differences = match lock.plugin.get(name.as_str()) {
        Some(locked) => differences(locked, &plugin.vetted),
        None => plugin
            .vetted
            .tool
            .keys()
            .map(|tool| Difference::ToolAdded { tool: tool.clone() })
            .collect(),
    };
    Ok(DiffReport {
        old: format!("{} (`{name}`)", manifest.lock_path().display()),
        new: plugin.vetted.sha256.clone(),
        differences,
        lint,
    })
}
