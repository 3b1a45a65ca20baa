//! Removing what the cache holds for nobody: code and records no host has
//! used for a while, and files a write left behind when it was cut short.
//!
//! Entries are named by digests, so a file's name cannot say whether a
//! manifest still needs it, and one cache may serve several manifests
//! (`TOOLHOST_CACHE_DIR`). Use is read from the files' modification times
//! instead (`crate::pruning`): a host marks each entry it reads or writes
//! as used, once a day, and a serving host marks its entries again while
//! it runs, so an entry's newest file says when a host last needed it.
//! Removing an entry a host still needs costs that host one compile (or
//! one `describe()`), never a wrong answer: a missing entry is made again.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use cap_std::fs::MetadataExt;

use super::{CacheError, ComponentCache};
use crate::pruning::{PruneReport, UNFINISHED_AFTER, cutoff, lowercase_hex, unused_before};

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
    if let Some((base, id)) = name.rsplit_once(".tmp-") {
        return (lowercase_hex(id) && matches!(kind_of(base), Some(Kind::Entry(_))))
            .then_some(Kind::Unfinished);
    }
    let (digest, rest) = name.split_once('.')?;
    if digest.len() != 64 || !lowercase_hex(digest) {
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
    /// removed: the report says what would be. A file that cannot be
    /// removed is counted and the prune goes on; only a folder that cannot
    /// be listed is an error.
    pub fn prune(&self, unused_for: Duration, dry_run: bool) -> Result<PruneReport, CacheError> {
        let failed = |source| CacheError::Prune {
            path: self.path.clone(),
            source,
        };
        let now = SystemTime::now();
        let (cutoff, stale_write) = (
            unused_before(now, unused_for),
            cutoff(now, UNFINISHED_AFTER),
        );
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
            let removed = match dry_run {
                true => Ok(true),
                false => self.remove(&name),
            };
            match removed {
                Ok(true) => {
                    report.unfinished += 1;
                    report.unfinished_bytes += bytes;
                }
                Ok(false) => {}
                Err(e) => report.failed(&name, &e),
            }
        }
        for found in entries.into_values() {
            // Looked at again just before: a host may have used the entry
            // since the listing.
            let used_since = |name: &String| {
                self.dir
                    .symlink_metadata(name)
                    .and_then(|m| m.modified())
                    .is_ok_and(|t| t.into_std() >= cutoff)
            };
            if found.last_used >= cutoff || found.files.iter().any(used_since) {
                report.kept += 1;
                report.kept_bytes += found.bytes;
                continue;
            }
            // The seal before the code: a reader that finds code without
            // its seal compiles afresh, as it does for a missing entry.
            let mut files = found.files;
            files.sort_by_key(|name| !name.ends_with(".sha256"));
            // Counted if this prune removed it whole, not if another prune
            // was first.
            let (mut whole, mut mine) = (true, dry_run);
            for name in files.iter().filter(|_| !dry_run) {
                match self.remove(name) {
                    Ok(removed) => mine |= removed,
                    Err(e) => {
                        report.failed(name, &e);
                        whole = false;
                    }
                }
            }
            if whole && mine {
                report.removed += 1;
                report.removed_bytes += found.bytes;
            }
        }
        Ok(report)
    }

    /// Removes `name`; `false` if another prune removed it first. Only
    /// the name is removed: a link is never followed.
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

    const DAY: Duration = Duration::from_secs(24 * 60 * 60);

    /// Sets the modification time of `name` in `cache` to `age` ago.
    fn age(cache: &ComponentCache, name: &str, age: Duration) {
        let file = std::fs::File::open(cache.path().join(name)).unwrap();
        file.set_modified(SystemTime::now() - age).unwrap();
    }

    fn modified(cache: &ComponentCache, name: &str) -> SystemTime {
        std::fs::metadata(cache.path().join(name))
            .unwrap()
            .modified()
            .unwrap()
    }

    /// A record's file name, as the cache writes it.
    fn record(cache: &ComponentCache, key: &str) -> String {
        cache.record_name("lint", key)
    }

    #[test]
    fn an_entry_goes_once_its_mark_is_older_than_the_period_and_a_day() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ComponentCache::open_at(dir.path()).unwrap();
        for key in ["old", "marked-late", "fresh"] {
            cache.keep("lint", key, b"{}");
        }
        const HOUR: Duration = Duration::from_secs(60 * 60);
        age(&cache, &record(&cache, "old"), 31 * DAY + HOUR);
        // Marked 31 days less an hour ago, it may have been read up to a day
        // later, within the 30.
        age(&cache, &record(&cache, "marked-late"), 31 * DAY - HOUR);
        // A period below the shortest is taken as the shortest (a day,
        // and the day a mark may lag): only "fresh" is within it.
        assert_eq!(cache.prune(Duration::ZERO, true).unwrap().kept, 1);
        let dry = cache.prune(30 * DAY, true).unwrap();
        assert_eq!((dry.removed, dry.kept, dry.failed), (1, 2, 0));
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 3);
        let done = cache.prune(30 * DAY, false).unwrap();
        assert_eq!((done.removed, done.kept, done.failed), (1, 2, 0));
        assert!(cache.kept("lint", "old").is_none());
        assert!(cache.kept("lint", "fresh").is_some());
        // Nothing is counted twice, nor removed again.
        let again = cache.prune(30 * DAY, false).unwrap();
        assert_eq!((again.removed, again.kept), (0, 2));
    }

    #[test]
    fn a_running_host_marks_again_what_it_read_or_wrote() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ComponentCache::open_at(dir.path()).unwrap();
        cache.keep("lint", "written", b"{}");
        let other = ComponentCache::open_at(dir.path()).unwrap();
        other.keep("lint", "read", b"{}");
        other.keep("lint", "not-mine", b"{}");
        assert!(cache.kept("lint", "read").is_some());
        for key in ["written", "read", "not-mine"] {
            age(&cache, &record(&cache, key), 2 * DAY);
        }
        cache.mark_in_use();
        let recent = |key| {
            let at = modified(&cache, &record(&cache, key));
            SystemTime::now().duration_since(at).unwrap() < DAY
        };
        assert!(recent("written") && recent("read"));
        assert!(!recent("not-mine"));
        // A mark younger than a day is left as it is: no write.
        age(&cache, &record(&cache, "read"), DAY / 2);
        let before = modified(&cache, &record(&cache, "read"));
        cache.mark_in_use();
        assert_eq!(modified(&cache, &record(&cache, "read")), before);
    }

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
            &DIGEST.to_uppercase(),
            &format!("{}.cwasm", DIGEST.to_uppercase()),
            &format!("{DIGEST}..json"),
            &format!("{DIGEST}.cwasm.tmp-"),
            &format!("{DIGEST}.cwasm.tmp-xyz"),
            "notes.tmp-00",
        ] {
            assert_eq!(kind_of(name), None, "{name}");
        }
    }
}
