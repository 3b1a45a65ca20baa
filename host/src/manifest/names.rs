//! Newtypes that fail while parsing, so an invalid name or digest never
//! exists as a value.

use std::fmt;

use serde::Deserialize;
use sha2::{Digest, Sha256};

/// A tool name: 1–64 characters of lowercase ASCII letters, digits and `_`,
/// starting with a letter. MCP clients accept this everywhere.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize)]
#[serde(try_from = "String")]
pub struct ToolName(String);

/// A plugin name: the `<system>` prefix of its tools, same alphabet as a
/// tool name but without `_`, so the prefix is unambiguous.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize)]
#[serde(try_from = "String")]
pub struct PluginName(String);

/// A SHA-256 digest, 64 lowercase hex digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(try_from = "String")]
pub struct Sha256Digest([u8; 32]);

fn is_snake(s: &str, allow_underscore: bool) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || (allow_underscore && c == '_'))
        && !s.ends_with('_')
        && !s.contains("__")
}

impl TryFrom<String> for ToolName {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        if s.len() <= 64 && is_snake(&s, true) {
            Ok(ToolName(s))
        } else {
            Err(format!(
                "tool name {s:?} is not snake_case (a-z, 0-9 and single `_`, starting with a letter, at most 64 characters)"
            ))
        }
    }
}

impl TryFrom<String> for PluginName {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        if s.len() <= 32 && is_snake(&s, false) {
            Ok(PluginName(s))
        } else {
            Err(format!(
                "plugin name {s:?} must be a-z and 0-9, starting with a letter, at most 32 characters"
            ))
        }
    }
}

impl TryFrom<String> for Sha256Digest {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        let mut out = [0u8; 32];
        match hex::decode_to_slice(&s, &mut out) {
            Ok(()) if s.len() == 64 => Ok(Sha256Digest(out)),
            _ => Err(format!("sha256 {s:?} is not 64 hex digits")),
        }
    }
}

impl ToolName {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl PluginName {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Sha256Digest {
    /// Digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Sha256Digest {
        Sha256Digest(Sha256::digest(bytes).into())
    }
}

impl fmt::Display for ToolName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Display for PluginName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Display for Sha256Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&hex::encode(self.0))
    }
}

impl fmt::Debug for Sha256Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Sha256Digest({self})")
    }
}
