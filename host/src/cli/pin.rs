//! `toolhost pin`: the manifest's sha256 pins set to the components on disk.

use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::Args;

use crate::manifest::{Manifest, Sha256Digest};

#[derive(Debug, Args)]
pub struct PinArgs {
    /// The manifest to update in place.
    #[arg(long, default_value = "tools-manifest.toml")]
    pub manifest: PathBuf,
    /// Only report pins that differ; exit 1 if any does.
    #[arg(long)]
    pub check: bool,
}

/// Rewrites `sha256` of every plugin to its component's digest, keeping the
/// rest of the file as written.
pub(super) fn pin(args: &PinArgs) -> anyhow::Result<()> {
    let manifest = Manifest::load(&args.manifest)?;
    let text = std::fs::read_to_string(&args.manifest)?;
    let mut doc: toml_edit::DocumentMut = text
        .parse()
        .with_context(|| format!("parsing {}", args.manifest.display()))?;
    let plugins = doc
        .get_mut("plugin")
        .and_then(|p| p.as_array_of_tables_mut())
        .context("the manifest has no [[plugin]] tables")?;
    let mut differing = 0;
    for (table, decl) in plugins.iter_mut().zip(&manifest.plugins) {
        let bytes = std::fs::read(&decl.component)
            .with_context(|| format!("reading component {}", decl.component.display()))?;
        let actual = Sha256Digest::of(&bytes);
        if actual == decl.sha256 {
            continue;
        }
        differing += 1;
        println!("{}: {} -> {actual}", decl.name, decl.sha256);
        table["sha256"] = toml_edit::value(actual.to_string());
    }
    if args.check {
        if differing > 0 {
            bail!("{differing} pin(s) differ from the components on disk");
        }
        println!("all pins match");
        return Ok(());
    }
    if differing > 0 {
        std::fs::write(&args.manifest, doc.to_string())?;
        println!("updated {differing} pin(s) in {}", args.manifest.display());
    } else {
        println!("all pins match");
    }
    Ok(())
}
