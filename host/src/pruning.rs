//! What both caches (compiled components in `sandbox`, registry artifacts in
//! `registry`) share to be pruned by `toolhost cache prune`: how a read
//! marks an entry as used, and what a prune reports.
//!
//! Use is kept in the entry's modification time, not in a file of its own:
//! a cache may be shared by several hosts and manifests, and the time needs
//! no lock, no index that could fall out of step with the entries, and no
//! write at all while the mark is fresh.

use std::time::{Duration, SystemTime};

/// A read marks an entry used when it was last marked longer ago than
/// this: often enough for a prune, which counts in days, and rarely enough
/// that a start does not write to every entry it reads.
pub const MARK_USE_AFTER: Duration = Duration::from_secs(24 * 60 * 60);

/// A write in progress keeps touching its temporary file or folder; one
/// left untouched this long belongs to a writer that is gone.
pub const UNFINISHED_AFTER: Duration = Duration::from_secs(60 * 60);

/// Moves the modification time of `file` (an entry, or an entry's folder)
/// to now if its mark is older than [`MARK_USE_AFTER`]. Setting the time
/// through a read-only handle takes owning the file, which the host does;
/// a failure only makes the entry look older than it is.
pub fn mark_used(file: &std::fs::File, modified: Option<SystemTime>) {
    let now = SystemTime::now();
    let stale =
        modified.is_some_and(|at| now.duration_since(at).is_ok_and(|age| age > MARK_USE_AFTER));
    if stale {
        let _ = file.set_modified(now);
    }
}

/// Whether `s` is lowercase hexadecimal, as both caches write digests and
/// ids into names; a name in another case is not theirs.
pub fn lowercase_hex(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// `age` before `now`.
pub fn cutoff(now: SystemTime, age: Duration) -> SystemTime {
    now.checked_sub(age).unwrap_or(SystemTime::UNIX_EPOCH)
}

/// The shortest period a prune takes: a serving host's marks may be a day
/// and an hour old (a read marks only a mark a day old, and the host marks
/// again every hour), which a day beyond a day's period covers.
pub const MIN_UNUSED_FOR: Duration = MARK_USE_AFTER;

/// The modification time before which an entry was surely not read for
/// `unused_for` (at least [`MIN_UNUSED_FOR`]). A read marks an entry only
/// once its mark is a day old, so the last read may have come up to a day
/// after the mark: an entry counts as unused only when its mark is older
/// than `unused_for` and that day.
pub fn unused_before(now: SystemTime, unused_for: Duration) -> SystemTime {
    let unused_for = unused_for.max(MIN_UNUSED_FOR);
    cutoff(now, unused_for.saturating_add(MARK_USE_AFTER))
}

/// What a prune of one cache found and did, for the operator.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PruneReport {
    /// Entries unused for longer than asked, removed whole (or, in a dry
    /// run, that would be).
    pub removed: usize,
    /// The bytes of the files of those entries.
    pub removed_bytes: u64,
    /// Temporary files or folders of writes that never finished, removed.
    pub unfinished: usize,
    /// The bytes of those.
    pub unfinished_bytes: u64,
    /// Entries used more recently (or since the prune began), kept.
    pub kept: usize,
    /// The bytes of their files.
    pub kept_bytes: u64,
    /// What the cache did not write (another name, another owner, a
    /// symbolic link, a folder among files or a file among folders):
    /// never removed, only counted.
    pub foreign: usize,
    /// Entries, files or folders that could not be removed, or not whole
    /// (counted in none of the above).
    pub failed: usize,
    /// Why the first of those could not be.
    pub first_failure: Option<String>,
}

impl PruneReport {
    /// Counts a removal that failed; the prune goes on with the others.
    pub fn failed(&mut self, name: &str, error: &std::io::Error) {
        self.failed += 1;
        self.first_failure
            .get_or_insert_with(|| format!("{name}: {error}"));
    }
}
