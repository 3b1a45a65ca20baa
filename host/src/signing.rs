//! Signatures on components: the public keys a platform team trusts, the
//! keys authors sign with, and the signature format.
//!
//! A signature is a Sigstore bundle (media type
//! `application/vnd.dev.sigstore.bundle.v0.3+json`) holding a
//! `messageSignature` over the component's bytes: the SHA-256 of the
//! component and the signature, with the signing key's fingerprint as the
//! public-key hint. It is key-based: no certificate and no transparency-log
//! entry, since a host may have no network. Ed25519 signs the bytes
//! themselves, ECDSA P-256 their SHA-256 (ASN.1 DER signature), as Sigstore
//! does for both.
//!
//! Beside a component file, signatures live in `FILE.sig`, one bundle per
//! line; in a registry, each is an OCI referrer of the component (see
//! `registry`). Keys are PEM: PKCS#8 for private keys, SubjectPublicKeyInfo
//! for public ones, so `openssl genpkey` keys work too.
//!
//! A leaf: nothing here knows the manifest or the catalog.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use zeroize::Zeroizing;

/// The media type of a signature bundle, and the OCI artifact type of a
/// signature referrer.
pub const BUNDLE_MEDIA_TYPE: &str = "application/vnd.dev.sigstore.bundle.v0.3+json";

/// The most bundles read from one `.sig` file or one registry: enough for
/// any real set of signers, bounded whatever an author ships.
pub const MAX_BUNDLES: usize = 32;

/// What can go wrong with keys and signature files.
#[derive(Debug, thiserror::Error)]
pub enum SigningError {
    #[error("{path}: {reason}")]
    Key { path: PathBuf, reason: String },
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: line {line} is not a signature bundle: {reason}")]
    Bundle {
        path: PathBuf,
        line: usize,
        reason: String,
    },
}

/// The signature algorithms a key may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Algorithm {
    Ed25519,
    /// ECDSA on NIST P-256 with SHA-256.
    P256,
}

/// A public key, as `[[trust]]` names it.
#[derive(Clone, PartialEq, Eq)]
pub enum PublicKey {
    Ed25519(ed25519_dalek::VerifyingKey),
    P256(p256::ecdsa::VerifyingKey),
}

impl std::fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PublicKey({} {})", self.algorithm(), self.fingerprint())
    }
}

impl PublicKey {
    /// Reads a SubjectPublicKeyInfo PEM (`-----BEGIN PUBLIC KEY-----`).
    pub fn from_pem(pem: &str) -> Result<PublicKey, String> {
        use ed25519_dalek::pkcs8::DecodePublicKey as _;
        if let Ok(key) = ed25519_dalek::VerifyingKey::from_public_key_pem(pem) {
            return Ok(PublicKey::Ed25519(key));
        }
        p256::ecdsa::VerifyingKey::from_public_key_pem(pem)
            .map(PublicKey::P256)
            .map_err(|_| {
                "not an Ed25519 or ECDSA P-256 public key in PEM (-----BEGIN PUBLIC KEY-----)"
                    .to_string()
            })
    }

    /// Reads a public key file.
    pub fn read(path: &Path) -> Result<PublicKey, SigningError> {
        let text = std::fs::read_to_string(path).map_err(|source| SigningError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        PublicKey::from_pem(&text).map_err(|reason| SigningError::Key {
            path: path.to_path_buf(),
            reason,
        })
    }

    pub fn algorithm(&self) -> &'static str {
        match self {
            PublicKey::Ed25519(_) => "ed25519",
            PublicKey::P256(_) => "ecdsa-p256",
        }
    }

    /// `sha256:` and the hex SHA-256 of the key's DER SubjectPublicKeyInfo:
    /// the name a signature gives its key.
    pub fn fingerprint(&self) -> String {
        format!("sha256:{}", hex::encode(Sha256::digest(self.der())))
    }

    /// The SubjectPublicKeyInfo PEM.
    pub fn to_pem(&self) -> String {
        use ed25519_dalek::pkcs8::EncodePublicKey as _;
        use p256::pkcs8::LineEnding;
        let pem = match self {
            PublicKey::Ed25519(key) => key.to_public_key_pem(LineEnding::LF),
            PublicKey::P256(key) => key.to_public_key_pem(LineEnding::LF),
        };
        pem.expect("a valid key encodes")
    }

    fn der(&self) -> Vec<u8> {
        use ed25519_dalek::pkcs8::EncodePublicKey as _;
        let der = match self {
            PublicKey::Ed25519(key) => key.to_public_key_der(),
            PublicKey::P256(key) => key.to_public_key_der(),
        };
        der.expect("a valid key encodes").into_vec()
    }

    fn verifies(&self, message: &[u8], signature: &[u8]) -> bool {
        match self {
            PublicKey::Ed25519(key) => ed25519_dalek::Signature::from_slice(signature)
                .is_ok_and(|s| key.verify_strict(message, &s).is_ok()),
            PublicKey::P256(key) => {
                use p256::ecdsa::signature::Verifier as _;
                p256::ecdsa::Signature::from_der(signature)
                    .is_ok_and(|s| key.verify(message, &s).is_ok())
            }
        }
    }
}

/// A private key an author or a platform team signs with.
pub enum SecretKey {
    Ed25519(ed25519_dalek::SigningKey),
    P256(p256::ecdsa::SigningKey),
}

impl SecretKey {
    /// A new random key.
    pub fn generate(algorithm: Algorithm) -> SecretKey {
        loop {
            let mut seed = Zeroizing::new([0u8; 32]);
            getrandom::fill(seed.as_mut()).expect("the OS supplies random bytes");
            match algorithm {
                Algorithm::Ed25519 => {
                    return SecretKey::Ed25519(ed25519_dalek::SigningKey::from_bytes(&seed));
                }
                // A scalar out of range (about 2^-32 of draws) is drawn again.
                Algorithm::P256 => {
                    if let Ok(key) = p256::ecdsa::SigningKey::from_slice(seed.as_ref()) {
                        return SecretKey::P256(key);
                    }
                }
            }
        }
    }

    /// Reads a PKCS#8 PEM private key file (`-----BEGIN PRIVATE KEY-----`).
    pub fn read(path: &Path) -> Result<SecretKey, SigningError> {
        use ed25519_dalek::pkcs8::DecodePrivateKey as _;
        let text =
            Zeroizing::new(
                std::fs::read_to_string(path).map_err(|source| SigningError::Read {
                    path: path.to_path_buf(),
                    source,
                })?,
            );
        if let Ok(key) = ed25519_dalek::SigningKey::from_pkcs8_pem(&text) {
            return Ok(SecretKey::Ed25519(key));
        }
        p256::ecdsa::SigningKey::from_pkcs8_pem(&text)
            .map(SecretKey::P256)
            .map_err(|_| SigningError::Key {
                path: path.to_path_buf(),
                reason: "not an unencrypted Ed25519 or ECDSA P-256 private key in PKCS#8 PEM (-----BEGIN PRIVATE KEY-----)".into(),
            })
    }

    /// The PKCS#8 PEM, to be written readable by its owner only.
    pub fn to_pem(&self) -> Zeroizing<String> {
        use ed25519_dalek::pkcs8::EncodePrivateKey as _;
        use p256::pkcs8::LineEnding;
        let pem = match self {
            SecretKey::Ed25519(key) => key.to_pkcs8_pem(LineEnding::LF),
            SecretKey::P256(key) => key.to_pkcs8_pem(LineEnding::LF),
        };
        pem.expect("a valid key encodes")
    }

    pub fn public(&self) -> PublicKey {
        match self {
            SecretKey::Ed25519(key) => PublicKey::Ed25519(key.verifying_key()),
            SecretKey::P256(key) => PublicKey::P256(*key.verifying_key()),
        }
    }

    /// A signature bundle over `component`.
    pub fn sign(&self, component: &[u8]) -> Bundle {
        let signature = match self {
            SecretKey::Ed25519(key) => {
                use ed25519_dalek::Signer as _;
                key.sign(component).to_bytes().to_vec()
            }
            SecretKey::P256(key) => {
                use p256::ecdsa::signature::Signer as _;
                let signature: p256::ecdsa::Signature = key.sign(component);
                signature.to_der().as_bytes().to_vec()
            }
        };
        Bundle {
            media_type: BUNDLE_MEDIA_TYPE.into(),
            verification_material: Material {
                public_key: KeyHint {
                    hint: self.public().fingerprint(),
                },
                tlog_entries: Vec::new(),
            },
            message_signature: MessageSignature {
                message_digest: MessageDigest {
                    algorithm: "SHA2_256".into(),
                    digest: BASE64.encode(Sha256::digest(component)),
                },
                signature: BASE64.encode(signature),
            },
        }
    }
}

/// One signature: a Sigstore bundle with a message signature.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Bundle {
    pub media_type: String,
    pub verification_material: Material,
    pub message_signature: MessageSignature,
}

/// What identifies the signer: here a public-key hint only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Material {
    pub public_key: KeyHint,
    /// Always empty: there is no transparency log to consult.
    #[serde(default)]
    pub tlog_entries: Vec<serde_json::Value>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyHint {
    /// The key's fingerprint (see [`PublicKey::fingerprint`]).
    pub hint: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageSignature {
    pub message_digest: MessageDigest,
    /// Base64.
    pub signature: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageDigest {
    /// `SHA2_256`.
    pub algorithm: String,
    /// Base64 of the digest.
    pub digest: String,
}

impl Bundle {
    /// One bundle from its JSON.
    pub fn parse(json: &[u8]) -> Result<Bundle, String> {
        let bundle: Bundle = serde_json::from_slice(json).map_err(|e| e.to_string())?;
        if bundle.media_type != BUNDLE_MEDIA_TYPE {
            return Err(format!(
                "media type {:?}, expected {BUNDLE_MEDIA_TYPE}",
                bundle.media_type
            ));
        }
        Ok(bundle)
    }

    /// The compact JSON form (one line).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a bundle serialises")
    }

    /// The key fingerprint the bundle names.
    pub fn signer(&self) -> &str {
        &self.verification_material.public_key.hint
    }

    /// Whether this bundle is a valid signature of `component` by `key`.
    pub fn verifies(&self, component: &[u8], key: &PublicKey) -> bool {
        let signed = &self.message_signature;
        if signed.message_digest.algorithm != "SHA2_256"
            || BASE64.decode(&signed.message_digest.digest).ok().as_deref()
                != Some(Sha256::digest(component).as_slice())
        {
            return false;
        }
        BASE64
            .decode(&signed.signature)
            .is_ok_and(|s| key.verifies(component, &s))
    }
}

/// `FILE.sig`: where the signatures of a component file are kept.
pub fn sig_path(component: &Path) -> PathBuf {
    let mut name = component.as_os_str().to_os_string();
    name.push(".sig");
    PathBuf::from(name)
}

/// The bundles beside a component file; none when there is no `.sig`. A
/// line that is not a bundle (another tool's signature format, say) is
/// skipped with a warning: it signs nothing this host can check, and a
/// plugin that requires a signer is refused for want of one.
pub fn read_beside(component: &Path) -> Result<Vec<Bundle>, SigningError> {
    let path = sig_path(component);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(SigningError::Read { path, source }),
    };
    let mut bundles = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() || bundles.len() == MAX_BUNDLES {
            continue;
        }
        match Bundle::parse(line.as_bytes()) {
            Ok(bundle) => bundles.push(bundle),
            Err(reason) => tracing::warn!(
                "{}",
                SigningError::Bundle {
                    path: path.clone(),
                    line: i + 1,
                    reason: crate::text::visible(&reason),
                }
            ),
        }
    }
    Ok(bundles)
}

/// Adds `bundle` to the `.sig` beside `component`, replacing an earlier
/// signature by the same key.
pub fn write_beside(component: &Path, bundle: &Bundle) -> Result<PathBuf, SigningError> {
    let path = sig_path(component);
    let mut bundles = read_beside(component)?;
    bundles.retain(|b| b.signer() != bundle.signer());
    bundles.push(bundle.clone());
    let text: String = bundles.iter().map(|b| b.to_json() + "\n").collect();
    std::fs::write(&path, text).map_err(|source| SigningError::Write {
        path: path.clone(),
        source,
    })?;
    Ok(path)
}

/// A key the platform team trusts, by the name plugins require it by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrustedKey {
    pub name: String,
    pub key: PublicKey,
}

/// Who signed a component, as far as its bundles show.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Signers {
    /// Names of trusted keys with a valid signature, sorted.
    pub trusted: Vec<String>,
    /// What else was found: a valid signature by a key not trusted, or a
    /// bundle that does not verify, in words.
    pub other: Vec<String>,
}

/// Checks every bundle of `component` against the trusted keys.
pub fn signers(component: &[u8], bundles: &[Bundle], trust: &[TrustedKey]) -> Signers {
    let mut found = Signers::default();
    for bundle in bundles.iter().take(MAX_BUNDLES) {
        let named: Vec<&TrustedKey> = trust
            .iter()
            .filter(|t| t.key.fingerprint() == bundle.signer())
            .collect();
        let shown = crate::text::visible(bundle.signer());
        if named.is_empty() {
            found
                .other
                .push(format!("a signature by untrusted key {shown}"));
        } else if named.iter().any(|t| bundle.verifies(component, &t.key)) {
            found.trusted.extend(named.iter().map(|t| t.name.clone()));
        } else {
            found.other.push(format!(
                "an invalid signature naming key {shown} (another component's, or altered)"
            ));
        }
    }
    found.trusted.sort();
    found.trusted.dedup();
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_algorithms_sign_and_verify_and_refuse_other_bytes_and_keys() {
        for algorithm in [Algorithm::Ed25519, Algorithm::P256] {
            let key = SecretKey::generate(algorithm);
            let other = SecretKey::generate(algorithm);
            let bundle = key.sign(b"component");
            let parsed = Bundle::parse(bundle.to_json().as_bytes()).unwrap();
            assert!(parsed.verifies(b"component", &key.public()));
            assert!(!parsed.verifies(b"componenT", &key.public()));
            assert!(!parsed.verifies(b"component", &other.public()));
            // Keys survive their PEM forms.
            let public = PublicKey::from_pem(&key.public().to_pem()).unwrap();
            assert_eq!(public, key.public());
            assert_eq!(parsed.signer(), public.fingerprint());
        }
    }

    #[test]
    fn signers_names_trusted_keys_and_describes_the_rest() {
        let vendor = SecretKey::generate(Algorithm::Ed25519);
        let stranger = SecretKey::generate(Algorithm::P256);
        let trust = [TrustedKey {
            name: "vendor".into(),
            key: vendor.public(),
        }];
        let mut forged = vendor.sign(b"other component");
        forged.message_signature.message_digest =
            vendor.sign(b"wasm").message_signature.message_digest;
        let found = signers(
            b"wasm",
            &[vendor.sign(b"wasm"), stranger.sign(b"wasm"), forged],
            &trust,
        );
        assert_eq!(found.trusted, ["vendor"]);
        assert_eq!(found.other.len(), 2);
        assert!(found.other[0].contains("untrusted key sha256:"));
        assert!(found.other[1].contains("invalid signature"));
    }
}
