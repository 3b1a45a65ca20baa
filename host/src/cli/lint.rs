//! `toolhost lint`: the catalog an agent will see, checked by the rules
//! of docs/lint.md.

use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;

use super::{LintFormat, cached_sandbox, open_store};
use crate::catalog;
use crate::lint;
use crate::manifest::Manifest;
use crate::store::Store;
use crate::text;

#[derive(Args)]
pub struct LintArgs {
    /// The manifest; component paths in it are relative to its folder.
    #[arg(default_value = "tools-manifest.toml")]
    pub manifest: PathBuf,
    /// `text` for people, `json` (one object with every finding) for scripts.
    #[arg(long, value_enum, default_value_t = LintFormat::Text)]
    pub format: LintFormat,
}

/// `toolhost lint`: loads the catalog as `serve` would, without secrets or
/// directories (they do not change what plugins describe), and reports.
pub(super) async fn lint_command(args: LintArgs) -> anyhow::Result<()> {
    let manifest = Manifest::load(&args.manifest)?;
    let store: Arc<dyn Store> = open_store(&manifest).await?;
    let sandbox = cached_sandbox(&manifest)?;
    let catalog = catalog::load_described(&manifest, &sandbox, &store).await;
    let report = lint::lint(&manifest, &catalog);
    match args.format {
        // Findings quote plugin text: printed with hidden characters escaped.
        LintFormat::Json => println!("{}", text::json(&serde_json::to_value(&report)?, true)),
        LintFormat::Text => {
            for finding in &report.findings {
                println!("{finding}");
            }
            println!(
                "{}: {} tool(s) of {} plugin(s); {} error(s), {} warning(s), {} allowed",
                manifest.path.display(),
                catalog.tools.len(),
                manifest.plugins.len(),
                report.errors().count(),
                report.warnings().count(),
                report
                    .findings
                    .iter()
                    .filter(|f| f.allowed.is_some())
                    .count(),
            );
        }
    }
    if report.has_errors() {
        std::process::exit(1);
    }
    Ok(())
}
