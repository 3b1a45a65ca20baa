//! The Ed25519 key that signs checkpoints. The host makes it on first use
//! and keeps it in `state_dir/audit.key` (mode 0600); operators copy the
//! public half (`toolhost audit key`) somewhere the host cannot write.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};

use super::AuditError;
use super::files::{sync_dir, write_private};

const KEY_FILE: &str = "audit.key";
/// How a public key is written for people: `ed25519:<64 hex>`.
const PUBLIC_PREFIX: &str = "ed25519:";

pub fn key_path(state_dir: &Path) -> PathBuf {
    state_dir.join(KEY_FILE)
}

/// Loads the signing key, creating it if there is none. Callers hold the
/// trail's lock, so two processes never both create one. `trail_exists` is
/// asked only when the key is missing: a key is not made afresh beside a
/// trail that an earlier one signed.
pub fn load_or_create(
    state_dir: &Path,
    trail_exists: impl FnOnce() -> Result<bool, AuditError>,
) -> Result<SigningKey, AuditError> {
    let path = key_path(state_dir);
    match load(&path) {
        Ok(key) => return Ok(key),
        Err(AuditError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    if trail_exists()? {
        return Err(AuditError::Key {
            path,
            reason: "missing, but the audit trail beside it exists; restore the key from a backup, or move audit/ aside to start a new trail".into(),
        });
    }
    let mut seed = [0u8; 32];
    getrandom::fill(&mut seed).map_err(|e| AuditError::Key {
        path: path.clone(),
        reason: format!("no randomness from the OS: {e}"),
    })?;
    // Written whole under a temporary name, then renamed: a crash leaves
    // either no key or a complete one.
    let temporary = state_dir.join(format!("{KEY_FILE}.tmp"));
    let io = |source| AuditError::Io {
        path: temporary.clone(),
        source,
    };
    write_private(&temporary, format!("{}\n", hex::encode(seed)).as_bytes()).map_err(io)?;
    fs::rename(&temporary, &path).map_err(io)?;
    sync_dir(state_dir)?;
    tracing::info!(path = %path.display(), "created the audit signing key");
    Ok(SigningKey::from_bytes(&seed))
}

/// Loads an existing signing key; refuses one that others may read.
pub fn load(path: &Path) -> Result<SigningKey, AuditError> {
    let io = |source| AuditError::Io {
        path: path.to_path_buf(),
        source,
    };
    let meta = fs::metadata(path).map_err(io)?;
    if meta.permissions().mode() & 0o077 != 0 {
        return Err(AuditError::Key {
            path: path.to_path_buf(),
            reason: format!(
                "mode {:o} lets others read it; run `chmod 600 {}`",
                meta.permissions().mode() & 0o777,
                path.display()
            ),
        });
    }
    let text = fs::read_to_string(path).map_err(io)?;
    let seed: [u8; 32] = hex::decode(text.trim())
        .ok()
        .and_then(|bytes| bytes.try_into().ok())
        .ok_or_else(|| AuditError::Key {
            path: path.to_path_buf(),
            reason: "not 64 hex digits".into(),
        })?;
    Ok(SigningKey::from_bytes(&seed))
}

/// `ed25519:<hex>`.
pub fn public_text(key: &VerifyingKey) -> String {
    format!("{PUBLIC_PREFIX}{}", hex::encode(key.to_bytes()))
}

/// Parses what [`public_text`] prints (the prefix is optional).
pub fn parse_public(text: &str) -> Result<VerifyingKey, String> {
    let hex_part = text
        .trim()
        .strip_prefix(PUBLIC_PREFIX)
        .unwrap_or(text.trim());
    let bytes: [u8; 32] = hex::decode(hex_part)
        .ok()
        .and_then(|bytes| bytes.try_into().ok())
        .ok_or("expected ed25519:<64 hex digits>")?;
    VerifyingKey::from_bytes(&bytes).map_err(|e| format!("not an Ed25519 public key: {e}"))
}

pub fn sign(key: &SigningKey, message: &[u8]) -> String {
    hex::encode(key.sign(message).to_bytes())
}

pub fn verify(key: &VerifyingKey, message: &[u8], signature: &str) -> bool {
    let Some(bytes) = hex::decode(signature)
        .ok()
        .and_then(|b| <[u8; 64]>::try_from(b).ok())
    else {
        return false;
    };
    key.verify_strict(message, &Signature::from_bytes(&bytes))
        .is_ok()
}
