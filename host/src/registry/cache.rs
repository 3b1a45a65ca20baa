//! Pulled artifacts by digest, in `state_dir/oci/sha256/<digest>/`: the
//! manifest, the component and the signature bundles last seen for it.
//!
//! Nothing here is trusted for being here: every read checks the manifest
//! against the digest that names its folder and the component against the
//! manifest, so a damaged or altered entry is pulled again, never loaded.
//! (Signatures need no such check: they are verified against trusted keys.)

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::Artifact;
use crate::manifest::Sha256Digest;
use crate::pruning::{self, PruneReport, UNFINISHED_AFTER, cutoff, unused_before};
use crate::signing::{Bundle, MAX_BUNDLES};

const MANIFEST: &str = "manifest.json";
const COMPONENT: &str = "component.wasm";
const SIGNATURES: &str = "signatures.jsonl";

/// The artifact cache of one host.
#[derive(Debug, Clone)]
pub struct OciCache {
    dir: PathBuf,
}

impl OciCache {
    /// The cache under `state_dir` (created when first written).
    pub fn in_state_dir(state_dir: &Path) -> OciCache {
        OciCache {
            dir: state_dir.join("oci").join("sha256"),
        }
    }

    fn entry(&self, digest: Sha256Digest) -> PathBuf {
        self.dir.join(digest.to_string())
    }

    /// The artifact with `digest`, if the cache holds it intact.
    pub fn get(&self, reference: &str, digest: Sha256Digest) -> Option<Artifact> {
        let entry = self.entry(digest);
        let manifest = std::fs::read(entry.join(MANIFEST)).ok()?;
        let component = std::fs::read(entry.join(COMPONENT)).ok()?;
        match Artifact::verified(reference, digest, manifest, component) {
            Ok(artifact) => {
                self.mark_in_use(digest);
                Some(artifact)
            }
            Err(e) => {
                tracing::warn!(entry = %entry.display(), "a cached artifact does not verify and is pulled again: {e}");
                None
            }
        }
    }

    /// Keeps `artifact` (already verified). The entry is written under a
    /// name of its own, then put in place with renames, so a reader finds
    /// the old entry, the new one or none, never a half-written one (and a
    /// reader finding none pulls it again).
    pub fn put(&self, artifact: &Artifact) -> std::io::Result<()> {
        create_private_dir(&self.dir)?;
        let entry = self.entry(artifact.digest);
        let staging = self.dir.join(format!(".new-{}", uuid::Uuid::new_v4()));
        create_private_dir(&staging)?;
        let written = (|| {
            std::fs::write(staging.join(MANIFEST), &artifact.manifest)?;
            std::fs::write(staging.join(COMPONENT), &artifact.component)?;
            if let Ok(signatures) = std::fs::read(entry.join(SIGNATURES)) {
                std::fs::write(staging.join(SIGNATURES), signatures)?;
            }
            let aside = self.dir.join(format!(".old-{}", uuid::Uuid::new_v4()));
            let moved = std::fs::rename(&entry, &aside).is_ok();
            std::fs::rename(&staging, &entry)?;
            if moved {
                let _ = std::fs::remove_dir_all(&aside);
            }
            Ok(())
        })();
        if written.is_err() {
            let _ = std::fs::remove_dir_all(&staging);
        }
        written
    }

    /// The bundles last seen in the registry for `digest`.
    pub fn signatures(&self, digest: Sha256Digest) -> Vec<Bundle> {
        let Ok(text) = std::fs::read_to_string(self.entry(digest).join(SIGNATURES)) else {
            return Vec::new();
        };
        text.lines()
            .take(MAX_BUNDLES)
            .filter_map(|line| Bundle::parse(line.as_bytes()).ok())
            .collect()
    }

    /// Records the bundles the registry holds for `digest` now.
    pub fn put_signatures(&self, digest: Sha256Digest, bundles: &[Bundle]) -> std::io::Result<()> {
        let entry = self.entry(digest);
        if !entry.is_dir() {
            return Ok(());
        }
        let staging = entry.join(format!(".{SIGNATURES}.{}", uuid::Uuid::new_v4()));
        let mut file = std::fs::File::create(&staging)?;
        for bundle in bundles {
            writeln!(file, "{}", bundle.to_json())?;
        }
        file.sync_all()?;
        std::fs::rename(staging, entry.join(SIGNATURES))
    }

    /// Where the cache is.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Marks the entry of `digest`, if there is one, as used (what `prune`
    /// reads as its last use; see `crate::pruning`). Every load that reads
    /// it does, and a serving host does again while it runs, so that the
    /// artifacts it would load offline at a restart are kept.
    pub fn mark_in_use(&self, digest: Sha256Digest) {
        if let Ok(folder) = std::fs::File::open(self.entry(digest)) {
            let modified = folder.metadata().and_then(|m| m.modified()).ok();
            pruning::mark_used(&folder, modified);
        }
    }

    /// Removes the artifacts no host has used for `unused_for` (see
    /// [`OciCache::mark_in_use`]), and what writes that never finished
    /// left (untouched for an hour): `put`'s staging folders and
    /// `put_signatures`' temporary files. Anything else in the folder, or
    /// not the host's user's, is left alone. An artifact removed that a
    /// host still needs is pulled again, by digest, at its next load. With
    /// `dry_run` nothing is removed. A folder that cannot be removed is
    /// counted and the prune goes on; only a cache that cannot be listed is
    /// an error.
    pub fn prune(&self, unused_for: Duration, dry_run: bool) -> std::io::Result<PruneReport> {
        use std::os::unix::fs::MetadataExt as _;
        let now = SystemTime::now();
        let (cutoff, stale_write) = (
            unused_before(now, unused_for),
            cutoff(now, UNFINISHED_AFTER),
        );
        // The host's effective user, whom `/proc/self` belongs to.
        let owner = std::fs::metadata("/proc/self")?.uid();
        // Listed whole first: an error here has removed nothing yet.
        let items: Vec<(String, PathBuf)> = std::fs::read_dir(&self.dir)?
            .map(|item| item.map(|i| (i.file_name().to_string_lossy().into_owned(), i.path())))
            .collect::<std::io::Result<_>>()?;
        let mut report = PruneReport::default();
        for (name, path) in items {
            // Not following links: a link is not the cache's own folder.
            let Ok(meta) = path.symlink_metadata() else {
                continue; // gone since the listing: another prune
            };
            let is_entry = is_digest(&name);
            let ours = meta.is_dir() && meta.uid() == owner;
            if !ours || !(is_entry || is_staging(&name)) {
                report.foreign += 1;
                continue;
            }
            let since = |at: SystemTime| meta.modified().map_or(true, |t| t >= at);
            if is_entry && since(cutoff) {
                sweep_signature_writes(&path, &meta, stale_write, dry_run, &mut report);
                report.kept += 1;
                report.kept_bytes += folder_bytes(&path);
                continue;
            }
            if !is_entry && since(stale_write) {
                continue; // a write still going on is some host's business
            }
            let bytes = folder_bytes(&path);
            let removed = match dry_run {
                true => Ok(()),
                false => std::fs::remove_dir_all(&path),
            };
            match removed {
                Ok(()) if is_entry => {
                    report.removed += 1;
                    report.removed_bytes += bytes;
                }
                Ok(()) => {
                    report.unfinished += 1;
                    report.unfinished_bytes += bytes;
                }
                // Another prune was first.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => report.failed(&name, &e),
            }
        }
        Ok(report)
    }
}

/// An entry's name: its digest, in lowercase hexadecimal.
fn is_digest(name: &str) -> bool {
    name.len() == 64 && pruning::lowercase_hex(name)
}

/// A UUID as this cache writes it into names: hyphenated, lowercase.
fn is_written_uuid(id: &str) -> bool {
    uuid::Uuid::try_parse(id).is_ok_and(|u| u.hyphenated().to_string() == id)
}

/// A staging folder of `put`: `.new-` or `.old-` and a UUID.
fn is_staging(name: &str) -> bool {
    let id = name
        .strip_prefix(".new-")
        .or_else(|| name.strip_prefix(".old-"));
    id.is_some_and(is_written_uuid)
}

/// Removes from a kept entry (whose metadata is `entry_meta`) the
/// temporary files of `put_signatures` calls that never finished
/// (untouched since `stale_write`). Removing a file changes its folder's
/// modification time, which records the entry's use, so that is put back:
/// a prune does not count as a use.
fn sweep_signature_writes(
    entry: &Path,
    entry_meta: &std::fs::Metadata,
    stale_write: SystemTime,
    dry_run: bool,
    report: &mut PruneReport,
) {
    let Ok(items) = std::fs::read_dir(entry) else {
        return;
    };
    let prefix = format!(".{SIGNATURES}.");
    let mut swept = false;
    for item in items.flatten() {
        let name = item.file_name().to_string_lossy().into_owned();
        let is_write = name.strip_prefix(&prefix).is_some_and(is_written_uuid);
        let Ok(meta) = item.path().symlink_metadata() else {
            continue;
        };
        let stale = meta.modified().is_ok_and(|t| t < stale_write);
        if !is_write || !meta.is_file() || !stale {
            continue;
        }
        let removed = match dry_run {
            true => Ok(()),
            false => std::fs::remove_file(item.path()),
        };
        match removed {
            Ok(()) => {
                swept = !dry_run;
                report.unfinished += 1;
                report.unfinished_bytes += meta.len();
            }
            // Another prune was first.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => report.failed(&name, &e),
        }
    }
    if swept && let (Ok(folder), Ok(used)) = (std::fs::File::open(entry), entry_meta.modified()) {
        let _ = folder.set_modified(used);
    }
}

/// The bytes of the files directly in `folder` (an entry holds no
/// folders).
fn folder_bytes(folder: &Path) -> u64 {
    std::fs::read_dir(folder).map_or(0, |items| {
        items
            .filter_map(|item| item.ok()?.metadata().ok())
            .filter(std::fs::Metadata::is_file)
            .map(|m| m.len())
            .sum()
    })
}

fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt as _;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}
