//! `toolhost cache prune`: the compiled-component cache and the registry
//! artifact cache rid of what no host has used for a while.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};

use super::cache_folder;
use crate::manifest::Manifest;
use crate::pruning::{MIN_UNUSED_FOR, PruneReport};
use crate::registry::OciCache;
use crate::sandbox::ComponentCache;

#[derive(Debug, Args)]
pub struct CacheArgs {
    /// The manifest, for its state_dir (`TOOLHOST_CACHE_DIR` wins, as it
    /// does for `serve`).
    #[arg(long, default_value = "tools-manifest.toml", global = true)]
    pub manifest: PathBuf,
    #[command(subcommand)]
    pub command: CacheCommand,
}

#[derive(Debug, Subcommand)]
pub enum CacheCommand {
    /// Remove compiled code, kept records and pulled registry artifacts
    /// that no host has read for `--unused-for`, and files of writes that
    /// never finished.
    Prune {
        /// How long an entry may go unused before it is removed (`30d`,
        /// `6w`, …; at least `1d`). Use is recorded to the day.
        #[arg(long, default_value = "30d", value_parser = unused_for)]
        unused_for: Duration,
        /// Say what would be removed; remove nothing.
        #[arg(long)]
        dry_run: bool,
    },
}

/// A humantime duration of at least a day: use is only marked once a day,
/// so anything shorter would take entries in use for unused ones.
fn unused_for(text: &str) -> Result<Duration, String> {
    let duration = humantime::parse_duration(text).map_err(|e| format!("{e} (e.g. 30d)"))?;
    if duration < MIN_UNUSED_FOR {
        return Err("at least 1d: a host marks what it reads as used once a day".into());
    }
    Ok(duration)
}

pub(super) async fn cache(args: CacheArgs) -> anyhow::Result<()> {
    let manifest = Manifest::load(&args.manifest)?;
    let folder = cache_folder(&manifest);
    let CacheCommand::Prune {
        unused_for,
        dry_run,
    } = args.command;
    // Each cache on its own: one that cannot be pruned (another user's,
    // say) does not keep the other from being pruned.
    let mut found = false;
    let mut failures: Vec<String> = Vec::new();
    let mut tell = |what: &str, path: &Path, pruned: anyhow::Result<PruneReport>| match pruned {
        Ok(report) => {
            println!("{}", summary(what, &report, path, unused_for, dry_run));
            failures.extend((report.failed > 0).then(|| format!("{what}: see above")));
        }
        Err(e) => failures.push(format!("{e:#}; nothing was removed from it")),
    };
    if folder.is_dir() {
        found = true;
        let what = "compiled components";
        match ComponentCache::open_at(&folder) {
            // Named as opened: the folder a link in its path leads to.
            Ok(cache) => {
                let pruned = cache.prune(unused_for, dry_run).map_err(Into::into);
                tell(what, cache.path(), pruned);
            }
            Err(e) => tell(what, &folder, Err(e.into())),
        }
    }
    let artifacts = OciCache::in_state_dir(&manifest.state_dir);
    if artifacts.path().is_dir() {
        found = true;
        let pruned = artifacts.prune(unused_for, dry_run).with_context(|| {
            format!(
                "cannot prune the registry artifact cache {}",
                artifacts.path().display()
            )
        });
        tell("registry artifacts", artifacts.path(), pruned);
    }
    if !found {
        println!(
            "nothing to prune: neither {} nor {} exists",
            folder.display(),
            artifacts.path().display()
        );
    }
    if !failures.is_empty() {
        bail!("not everything could be pruned: {}", failures.join("; "));
    }
    Ok(())
}

/// One line per cache: `WHAT in PATH: removed …; kept …`.
fn summary(
    what: &str,
    r: &PruneReport,
    path: &Path,
    unused_for: Duration,
    dry_run: bool,
) -> String {
    let mib = |bytes: u64| bytes as f64 / (1024.0 * 1024.0);
    let count =
        |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    let verb = if dry_run { "would remove" } else { "removed" };
    let mut text = format!(
        "{what} in {}: {verb} {} unused for {} ({:.1} MiB)",
        path.display(),
        count(r.removed, "entry", "entries"),
        humantime::format_duration(unused_for),
        mib(r.removed_bytes),
    );
    if r.unfinished > 0 {
        text += &format!(
            " and {} ({:.1} MiB)",
            count(r.unfinished, "unfinished write", "unfinished writes"),
            mib(r.unfinished_bytes)
        );
    }
    text += &format!(
        "; kept {} ({:.1} MiB)",
        count(r.kept, "entry", "entries"),
        mib(r.kept_bytes)
    );
    if r.foreign > 0 {
        text += &format!(
            "; left alone {} the cache did not write",
            count(r.foreign, "file or folder", "files or folders")
        );
    }
    if let Some(first) = &r.first_failure {
        text += &format!(
            "; could not remove {} (the first: {first})",
            count(r.failed, "file or folder", "files or folders")
        );
    }
    text
}
