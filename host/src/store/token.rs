//! Task tokens: `tht_<id>_<secret>`.
//!
//! The id (8 random bytes, hex) finds the row; the secret (32 random bytes,
//! base64url) proves possession. Only the SHA-256 of the secret is stored,
//! and it is compared in constant time, so neither the database nor the
//! timing of a failed attempt tells anything about a valid token.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

const PREFIX: &str = "tht_";

/// A freshly issued token. Shown to the operator once; never stored.
pub struct TaskToken(String);

impl TaskToken {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for TaskToken {
    // A token must not end up in a log through `{:?}`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TaskToken(…)")
    }
}

/// What the store keeps of a token.
pub(super) struct TokenRecord {
    pub id: String,
    pub secret_sha256: Vec<u8>,
}

/// Makes a new token and the record to store.
pub(super) fn issue() -> Result<(TaskToken, TokenRecord), getrandom::Error> {
    let mut id = [0u8; 8];
    let mut secret = [0u8; 32];
    getrandom::fill(&mut id)?;
    getrandom::fill(&mut secret)?;
    let id = hex::encode(id);
    let secret = URL_SAFE_NO_PAD.encode(secret);
    let record = TokenRecord {
        secret_sha256: Sha256::digest(secret.as_bytes()).to_vec(),
        id: id.clone(),
    };
    Ok((TaskToken(format!("{PREFIX}{id}_{secret}")), record))
}

/// Splits a presented token into its id and secret; `None` if it cannot be
/// one of ours.
pub(super) fn parse(token: &str) -> Option<(&str, &str)> {
    let rest = token.strip_prefix(PREFIX)?;
    let (id, secret) = rest.split_once('_')?;
    let id_ok = id.len() == 16 && id.bytes().all(|b| b.is_ascii_hexdigit());
    let secret_ok = (40..=64).contains(&secret.len())
        && secret
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    (id_ok && secret_ok).then_some((id, secret))
}

/// Whether `secret` hashes to `stored`, in time independent of where they
/// differ.
pub(super) fn matches(secret: &str, stored: &[u8]) -> bool {
    let presented = Sha256::digest(secret.as_bytes());
    presented.as_slice().ct_eq(stored).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issued_tokens_verify_and_others_do_not() {
        let (token, record) = issue().unwrap();
        let (id, secret) = parse(token.as_str()).unwrap();
        assert_eq!(id, record.id);
        assert!(matches(secret, &record.secret_sha256));
        let (other, _) = issue().unwrap();
        let (_, other_secret) = parse(other.as_str()).unwrap();
        assert!(!matches(other_secret, &record.secret_sha256));
        assert!(parse("Bearer x").is_none());
        assert!(parse("tht_zz_abc").is_none());
        assert_eq!(format!("{token:?}"), "TaskToken(…)");
    }
}
