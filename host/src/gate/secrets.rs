//! The host's secret store: where credential values come from.
//!
//! Values are read from environment variables `TOOLHOST_SECRET_<NAME>` or
//! from the secrets file the manifest names (`[host] secrets_file`, a TOML
//! table of `name = "value"`, refused unless only its owner can read it).
//! The environment wins over the file. Values never come from the manifest,
//! never reach a plugin, and are wiped from memory when dropped.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use zeroize::Zeroizing;

use crate::manifest::SecretName;

/// Secrets shorter than this cannot be redacted without mangling ordinary
/// text, so they are refused.
pub const MIN_SECRET_BYTES: usize = 8;

/// Why the secret store cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error("cannot read secrets file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("secrets file {path} can be read by others (mode {mode:o}); run `chmod 600 {path}`")]
    Permissions { path: PathBuf, mode: u32 },
    #[error("secrets file {path} is not a TOML table of name = \"value\" strings: {detail}")]
    Format { path: PathBuf, detail: String },
}

/// Secret values by name.
#[derive(Default)]
pub struct SecretStore {
    file: BTreeMap<String, Zeroizing<String>>,
    file_path: Option<PathBuf>,
}

impl fmt::Debug for SecretStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SecretStore")
            .field("file", &self.file_path)
            .field("names", &self.file.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl SecretStore {
    /// Opens the store; with a secrets file, reads and checks it now.
    pub fn open(file: Option<&Path>) -> Result<SecretStore, SecretError> {
        let Some(path) = file else {
            return Ok(SecretStore::default());
        };
        let read_error = |source| SecretError::Read {
            path: path.to_path_buf(),
            source,
        };
        let metadata = std::fs::metadata(path).map_err(read_error)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = metadata.permissions().mode() & 0o777;
            if mode & 0o077 != 0 {
                return Err(SecretError::Permissions {
                    path: path.to_path_buf(),
                    mode,
                });
            }
        }
        #[cfg(not(unix))]
        drop(metadata);
        let text = Zeroizing::new(std::fs::read_to_string(path).map_err(read_error)?);
        let table: BTreeMap<String, String> =
            toml::from_str(&text).map_err(|e| SecretError::Format {
                path: path.to_path_buf(),
                detail: e.message().to_string(),
            })?;
        Ok(SecretStore {
            file: table
                .into_iter()
                .map(|(k, v)| (k, Zeroizing::new(v)))
                .collect(),
            file_path: Some(path.to_path_buf()),
        })
    }

    /// The value of `name`, or a message saying where to put it.
    pub fn get(&self, name: &SecretName) -> Result<Zeroizing<String>, String> {
        let value = match std::env::var(name.env_var()) {
            Ok(v) => Zeroizing::new(v),
            Err(_) => match self.file.get(name.as_str()) {
                Some(v) => v.clone(),
                None => {
                    let file = match &self.file_path {
                        Some(p) => format!(" or add `{name} = \"…\"` to {}", p.display()),
                        None => {
                            " or set [host] secrets_file to a 0600 TOML file that has it".into()
                        }
                    };
                    return Err(format!(
                        "secret `{name}` is not in the secret store; set {}{file}",
                        name.env_var()
                    ));
                }
            },
        };
        if value.len() < MIN_SECRET_BYTES {
            return Err(format!(
                "secret `{name}` is shorter than {MIN_SECRET_BYTES} bytes, too short to be redacted reliably"
            ));
        }
        if value.chars().any(char::is_control) {
            return Err(format!(
                "secret `{name}` contains a control character and cannot go in a header"
            ));
        }
        Ok(value)
    }
}
