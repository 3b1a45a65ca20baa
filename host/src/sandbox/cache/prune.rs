//! Removing what the cache holds for nobody: code and records no host has
//! used for a while, and files a write left behind when it was cut short.
//!
//! Entries are named by digests, so a file's name cannot say whether a
//! manifest still needs it, and one cache may serve several manifests
//! (`TOOLHOST_CACHE_DIR`). Use is read from the files' modification times
//! instead: every read of an entry moves its time to now, at most once a
//! day (`ComponentCache::open_entry`), so an entry's newest file says when
//! a host last took it. Removing an entry a host still needs costs that
//! host one compile (or one `describe()`) at its next start or first call,
//! never a wrong answer: an entry that is missing is made again.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use cap_std::fs::MetadataExt;

use super::{CacheError, ComponentCache};

/// A write in progress rewrites its temporary file continuously; one left
/// untouched this long belongs to a writer that is gone.
const UNFINISHED_AFTER: Duration = Duration::from_secs(60 * 60);

/// What [`ComponentCache::prune`] found and did, for the operator.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PruneReport {
    /// Entries (a component's code and seal, a description, a lint report)
    /// unused for longer than asked, removed.
    pub removed: usize,
    pub removed_bytes: u64,
    /// Temporary files of writes that never finished, removed.
    pub unfinished: usize,
    pub unfinished_bytes: u64,
    /// Entries used more recently, kept.
    pub kept: usize,
    pub kept_bytes: u64,
    /// Files that are not the cache's own (another name, another owner, a
    /// folder): never removed, only counted.
    pub foreign: usize,
}

/// What a cache file is, by its name.
#[derive(Debug, PartialEq, Eq)]
enum Kind<'a> {
    /// Part of the entry named by this digest.
    Entry(&'a str),
    /// A temporary file `write_private` writes before renaming it.
    Unfinished,
}

/// Names the cache writes: `DIGEST.cwasm`, `DIGEST.sha256`,
/// `DIGEST.described.json`, `DIGEST.KIND.json`, and any of them followed by
/// `.tmp-` and a hexadecimal id while being written.
fn kind_of(name: &str) -> Option<Kind<'_>> {
    let is_hex = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_hexdigit());
    if let Some((base, id)) = name.rsplit_once(".tmp-") {
        return (is_hex(id) && matches!(kind_of(base), Some(Kind::Entry(_))))
            .then_some(Kind::Unfinished);
    }
    let (digest, rest) = name.split_once('.')?;
    if digest.len() != 64 || !is_hex(digest) {
        return None;
    }
    let known = match rest {
        "cwasm" | "sha256" => true,
        _ => rest
            .strip_suffix(".json")
            .is_some_and(|kind| !kind.is_empty() && kind.bytes().all(|b| b.is_ascii_lowercase())),
    };
    known.then_some(Kind::Entry(digest))
}

/// One entry's files as found: names, total size and newest use.
struct Found {
    files: Vec<String>,
    bytes: u64,
    last_used: SystemTime,
}

impl ComponentCache {
    /// Removes entries whose files were all last used more than
    /// `unused_for` ago, and temporary files left by writes that never
    /// finished (untouched for an hour). Files the cache did not write
    /// (another name or owner) are left alone. With `dry_run` nothing is
    /// removed: the report says what would be.
    pub fn prune(&self, unused_for: Duration, dry_run: bool) -> Result<PruneReport, CacheError> {
        let failed = |source| CacheError::Prune {
            path: self.path.clone(),
            source,
        };
        let now = SystemTime::now();
        let cutoff = now
            .checked_sub(unused_for)
            .unwrap_or(SystemTime::UNIX_EPOCH);
        let stale_write = now
            .checked_sub(UNFINISHED_AFTER)
            .unwrap_or(SystemTime::UNIX_EPOCH);
        let mut report = PruneReport::default();
        let mut entries: BTreeMap<String, Found> = BTreeMap::new();
        let mut unfinished = Vec::new();
        for item in self.dir.entries().map_err(failed)? {
            let item = item.map_err(failed)?;
            let Ok(name) = item.file_name().into_string() else {
                report.foreign += 1;
                continue;
            };
            // Not following links: a link is not the cache's own file.
            let Ok(meta) = self.dir.symlink_metadata(&name) else {
                continue; // gone since the listing: another prune
            };
            let kind = kind_of(&name).filter(|_| meta.is_file() && meta.uid() == self.owner);
            let Some(kind) = kind else {
                report.foreign += 1;
                continue;
            };
            let used = meta.modified().map_or(now, |t| t.into_std());
            match kind {
                Kind::Unfinished if used < stale_write => unfinished.push((name, meta.len())),
                // A write still going on is some host's business.
                Kind::Unfinished => {}
                Kind::Entry(digest) => {
                    let found = entries.entry(digest.to_string()).or_insert(Found {
                        files: Vec::new(),
                        bytes: 0,
                        last_used: SystemTime::UNIX_EPOCH,
                    });
                    found.bytes += meta.len();
                    found.last_used = found.last_used.max(used);
                    found.files.push(name);
                }
            }
        }
        for (name, bytes) in unfinished {
            if dry_run || self.remove(&name).map_err(failed)? {
                report.unfinished += 1;
                report.unfinished_bytes += bytes;
            }
        }
        for found in entries.into_values() {
            if found.last_used >= cutoff {
                report.kept += 1;
                report.kept_bytes += found.bytes;
                continue;
            }
            // The seal before the code: a reader that finds code without
            // its seal compiles afresh, as it does for a missing entry.
            let mut files = found.files;
            files.sort_by_key(|name| !name.ends_with(".sha256"));
            for name in &files {
                if !dry_run {
                    self.remove(name).map_err(failed)?;
                }
            }
            report.removed += 1;
            report.removed_bytes += found.bytes;
        }
        Ok(report)
    }

    /// Removes `name`; `false` if another prune removed it first.
    fn remove(&self, name: &str) -> std::io::Result<bool> {
        match self.dir.remove_file(name) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIGEST: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn the_cache_knows_its_own_names_and_no_others() {
        for suffix in ["cwasm", "sha256", "described.json", "lint.json"] {
            assert_eq!(
                kind_of(&format!("{DIGEST}.{suffix}")),
                Some(Kind::Entry(DIGEST)),
                "{suffix}"
            );
            assert_eq!(
                kind_of(&format!("{DIGEST}.{suffix}.tmp-0f1e2d3c")),
                Some(Kind::Unfinished),
                "{suffix}"
            );
        }
        for name in [
            "notes.txt",
            "abc.cwasm",
            &format!("{DIGEST}.wasm"),
            &format!("{DIGEST}.cwasm.bak"),
            &format!("{DIGEST}.Lint.json"),
            &format!("{DIGEST}..json"),
            &format!("{DIGEST}.cwasm.tmp-"),
            &format!("{DIGEST}.cwasm.tmp-xyz"),
            "notes.tmp-00",
        ] {
            assert_eq!(kind_of(name), None, "{name}");
        }
    }
}
