//! Pulled artifacts by digest, in `state_dir/oci/sha256/<digest>/`: the
//! manifest, the component and the signature bundles last seen for it.
//!
//! Nothing here is trusted for being here: every read checks the manifest
//! against the digest that names its folder and the component against the
//! manifest, so a damaged or altered entry is pulled again, never loaded.
//! (Signatures need no such check: they are verified against trusted keys.)

use std::io::Write as _;
use std::path::{Path, PathBuf};

use super::Artifact;
use crate::manifest::Sha256Digest;
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
            Ok(artifact) => Some(artifact),
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
}

fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt as _;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}
