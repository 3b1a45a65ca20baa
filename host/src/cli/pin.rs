//! `toolhost pin`: the manifest's pins set to the components they name. A
//! component file gets its `sha256`; a registry artifact named by tag gets
//! the digest the tag points at now, for the operator to review and commit
//! (a tag alone is refused at load, since it can move).

use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::Args;

use crate::catalog::source;
use crate::manifest::{ComponentSource, Manifest, Sha256Digest};

#[derive(Debug, Args)]
pub struct PinArgs {
    /// The manifest to update in place.
    #[arg(long, default_value = "tools-manifest.toml")]
    pub manifest: PathBuf,
    /// Only report pins that differ; exit 1 if any does.
    #[arg(long)]
    pub check: bool,
}

/// Rewrites each plugin's pin, keeping the rest of the file as written.
pub(super) async fn pin(args: &PinArgs) -> anyhow::Result<()> {
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
        match &decl.component {
            ComponentSource::File(path) => {
                let bytes = std::fs::read(path)
                    .with_context(|| format!("reading component {}", path.display()))?;
                let actual = Sha256Digest::of(&bytes);
                if Some(actual) == decl.sha256 {
                    continue;
                }
                differing += 1;
                let old = decl.sha256.map(|d| d.to_string()).unwrap_or_default();
                println!("{}: {old} -> {actual}", decl.name);
                table["sha256"] = toml_edit::value(actual.to_string());
            }
            ComponentSource::Oci(reference) => {
                // A digest pins it already (a tag beside it is only a label).
                if reference.digest.is_some() {
                    continue;
                }
                let (registry, _) = super::registry::connect(reference, Some(&manifest), false)?;
                let digest = registry.resolve(reference).await?;
                let pinned = reference.pinned(digest);
                differing += 1;
                println!(
                    "{}: {reference} -> {pinned}\n  review this artifact before you serve it (`toolhost plugin diff {} {pinned}`)",
                    decl.name, decl.name
                );
                table["component"] = toml_edit::value(pinned.to_string());
                // The sha256 of another artifact's component would refuse it.
                if decl.sha256.is_some() {
                    let fetched = source::fetch(&manifest, &pinned, false)
                        .await
                        .map_err(anyhow::Error::msg)?;
                    table["sha256"] =
                        toml_edit::value(Sha256Digest::of(&fetched.component).to_string());
                }
            }
        }
    }
    if args.check {
        if differing > 0 {
            bail!("{differing} pin(s) differ from the components they name");
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
