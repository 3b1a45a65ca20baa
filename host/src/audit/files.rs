//! Durable file operations the trail and its key both need. Kept apart so
//! that neither has to reach into the other for them.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use super::AuditError;

/// Writes `bytes` to `path` (mode 0600, replacing it) and syncs them.
pub(super) fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

pub(super) fn sync_dir(dir: &Path) -> Result<(), AuditError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|source| AuditError::Io {
            path: dir.to_path_buf(),
            source,
        })
}
