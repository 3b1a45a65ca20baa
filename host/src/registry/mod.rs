//! Components in OCI registries: pulling a pinned artifact (and the
//! signatures that refer to it), pushing one, and resolving a tag to the
//! digest an operator pins. The transport is the `oci-client` crate;
//! everything the registry sends is checked here against the digests that
//! name it, so a registry is never trusted with the bytes.
//!
//! Artifacts follow the CNCF layout for WebAssembly: an OCI image manifest
//! whose config has media type `application/vnd.wasm.config.v0+json` and
//! whose one layer is the component (`application/wasm`). A signature is an
//! OCI referrer of that manifest: an artifact of type
//! [`signing::BUNDLE_MEDIA_TYPE`](crate::signing::BUNDLE_MEDIA_TYPE) whose
//! one layer is the bundle. Registries without the referrers API (such as
//! distribution 2.x) are served through the referrers tag schema
//! (`sha256-<hex>`), which this module keeps up to date when it attaches one.
//!
//! `cache` keeps pulled artifacts by digest in the host's `state_dir`, so a
//! host restarts without the registry.

mod auth;
pub mod cache;

pub use auth::credentials;
pub use cache::OciCache;

use futures::StreamExt as _;
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::manifest::OciDescriptor;
use oci_client::secrets::RegistryAuth;
use serde::Deserialize;
use serde_json::json;

use crate::manifest::{OciReference, Sha256Digest};
use crate::signing::{BUNDLE_MEDIA_TYPE, Bundle, MAX_BUNDLES};

/// The config media type of a WebAssembly artifact.
pub const WASM_CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
/// The layer media type of a WebAssembly component.
pub const WASM_LAYER_MEDIA_TYPE: &str = "application/wasm";
const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
const EMPTY_MEDIA_TYPE: &str = "application/vnd.oci.empty.v1+json";

/// The largest component pulled: far above any real plugin (an interpreted
/// one is under 20 MiB), bounded whatever a registry claims.
pub const MAX_COMPONENT_BYTES: u64 = 256 << 20;
/// The largest manifest or signature bundle read.
const MAX_SMALL_BYTES: u64 = 256 << 10;

/// Why a registry operation failed.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("{reference}: {message}")]
    Transport { reference: String, message: String },
    #[error(
        "{reference}: the registry sent a manifest with sha256 {actual}, not the pinned {expected}; it was not used"
    )]
    ManifestDigest {
        reference: String,
        expected: Sha256Digest,
        actual: Sha256Digest,
    },
    #[error(
        "{reference}: the component blob has digest {actual} ({size} bytes), but the manifest names {expected}; the blob was altered or corrupted in the registry, and was not used"
    )]
    BlobDigest {
        reference: String,
        expected: String,
        actual: String,
        size: usize,
    },
    #[error("{reference}: not a WebAssembly component artifact: {why}")]
    NotComponent { reference: String, why: String },
    #[error("{reference}: {why}")]
    Refused { reference: String, why: String },
}

/// How to reach one registry.
#[derive(Debug, Clone)]
pub struct Access {
    /// Plain HTTP instead of HTTPS.
    pub plain_http: bool,
    pub auth: RegistryAuth,
}

impl Access {
    /// Plain HTTP only for a registry on loopback or when `plain_http_allowed`
    /// (the manifest's `[[registry]] plain_http`, or a command's flag).
    pub fn new(reference: &OciReference, plain_http_allowed: bool, auth: RegistryAuth) -> Access {
        Access {
            plain_http: plain_http_allowed || reference.is_loopback(),
            auth,
        }
    }
}

/// A component artifact, checked against its digests.
#[derive(Debug, Clone)]
pub struct Artifact {
    /// The digest of `manifest`: what a reference pins.
    pub digest: Sha256Digest,
    /// The OCI manifest as the registry stored it.
    pub manifest: Vec<u8>,
    /// The component's bytes.
    pub component: Vec<u8>,
}

/// The parts of an OCI manifest this host reads.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ImageManifest {
    #[serde(default)]
    media_type: Option<String>,
    config: Descriptor,
    #[serde(default)]
    layers: Vec<Descriptor>,
}

#[derive(Deserialize, Clone)]
#[serde(rename_all = "camelCase")]
struct Descriptor {
    media_type: String,
    digest: String,
    size: u64,
}

impl Artifact {
    /// The component layer's descriptor in `manifest`, checked for shape.
    fn layer(reference: &str, manifest: &[u8]) -> Result<(String, u64), RegistryError> {
        let not = |why: String| RegistryError::NotComponent {
            reference: reference.to_string(),
            why,
        };
        let parsed: ImageManifest = serde_json::from_slice(manifest)
            .map_err(|e| not(format!("its manifest does not parse: {e}")))?;
        if parsed
            .media_type
            .as_deref()
            .is_some_and(|m| m != OCI_MANIFEST)
        {
            return Err(not(format!(
                "manifest media type {:?}",
                parsed.media_type.unwrap_or_default()
            )));
        }
        if parsed.config.media_type != WASM_CONFIG_MEDIA_TYPE {
            return Err(not(format!(
                "config media type {:?}, expected {WASM_CONFIG_MEDIA_TYPE}",
                parsed.config.media_type
            )));
        }
        let [layer] = parsed.layers.as_slice() else {
            return Err(not(format!(
                "{} layers, expected one {WASM_LAYER_MEDIA_TYPE} layer",
                parsed.layers.len()
            )));
        };
        if layer.media_type != WASM_LAYER_MEDIA_TYPE {
            return Err(not(format!(
                "layer media type {:?}, expected {WASM_LAYER_MEDIA_TYPE}",
                layer.media_type
            )));
        }
        if parse_digest(&layer.digest).is_none() || layer.size > MAX_COMPONENT_BYTES {
            return Err(not(format!(
                "layer {:?} of {} bytes (sha256 digests up to {MAX_COMPONENT_BYTES} bytes are accepted)",
                layer.digest, layer.size
            )));
        }
        Ok((layer.digest.clone(), layer.size))
    }

    /// Checks that `manifest` has `digest` and names `component`.
    pub fn verified(
        reference: &str,
        digest: Sha256Digest,
        manifest: Vec<u8>,
        component: Vec<u8>,
    ) -> Result<Artifact, RegistryError> {
        let actual = Sha256Digest::of(&manifest);
        if actual != digest {
            return Err(RegistryError::ManifestDigest {
                reference: reference.to_string(),
                expected: digest,
                actual,
            });
        }
        let (layer, size) = Artifact::layer(reference, &manifest)?;
        let found = format!("sha256:{}", Sha256Digest::of(&component));
        if found != layer || component.len() as u64 != size {
            return Err(RegistryError::BlobDigest {
                reference: reference.to_string(),
                expected: layer,
                actual: found,
                size: component.len(),
            });
        }
        Ok(Artifact {
            digest,
            manifest,
            component,
        })
    }
}

/// What a registry said, for a log line or a refusal: at most 300
/// characters, hidden characters escaped (a registry's error body is
/// anything it likes).
fn shown(message: &str) -> String {
    let cut: String = message.chars().take(300).collect();
    let more = if cut.len() < message.len() {
        " …"
    } else {
        ""
    };
    format!("{}{more}", crate::text::visible(&cut))
}

/// Whether the registry said the thing asked for does not exist.
fn is_not_found(error: &oci_client::errors::OciDistributionError) -> bool {
    use oci_client::errors::{OciDistributionError as E, OciErrorCode};
    match error {
        E::ImageManifestNotFoundError(_) => true,
        E::ServerError { code, .. } => *code == 404,
        E::RegistryError { envelope, .. } => envelope.errors.iter().any(|e| {
            matches!(
                e.code,
                OciErrorCode::ManifestUnknown | OciErrorCode::NameUnknown
            )
        }),
        _ => false,
    }
}

/// `sha256:<64 hex>` as a digest; anything else is refused before it is
/// put in a URL.
fn parse_digest(text: &str) -> Option<Sha256Digest> {
    text.strip_prefix("sha256:")
        .and_then(|hex| Sha256Digest::try_from(hex.to_string()).ok())
}

/// The longest a whole fetch (manifest, component, signatures) may take: a
/// registry that sends slowly cannot hold the host's start-up forever.
pub const FETCH_DEADLINE: std::time::Duration = std::time::Duration::from_secs(120);

/// A connection to one registry.
pub struct Registry {
    client: oci_client::Client,
    auth: RegistryAuth,
}

impl Registry {
    pub fn new(reference: &OciReference, access: Access) -> Registry {
        // reqwest is built without a provider of its own, so that the host
        // carries one TLS implementation; it takes the process's.
        crate::tls::install_process_default();
        let protocol = if access.plain_http {
            ClientProtocol::HttpsExcept(vec![reference.registry.clone()])
        } else {
            ClientProtocol::Https
        };
        let client = oci_client::Client::new(ClientConfig {
            protocol,
            platform_resolver: None,
            connect_timeout: Some(std::time::Duration::from_secs(10)),
            read_timeout: Some(std::time::Duration::from_secs(60)),
            ..ClientConfig::default()
        });
        Registry {
            client,
            auth: access.auth,
        }
    }

    fn failed(
        reference: &OciReference,
    ) -> impl Fn(oci_client::errors::OciDistributionError) -> RegistryError + '_ {
        move |e| RegistryError::Transport {
            reference: reference.to_string(),
            message: shown(&e.to_string()),
        }
    }

    fn oci(reference: &OciReference) -> oci_client::Reference {
        match (&reference.digest, &reference.tag) {
            (Some(digest), _) => oci_client::Reference::with_digest(
                reference.registry.clone(),
                reference.repository.clone(),
                format!("sha256:{digest}"),
            ),
            (None, Some(tag)) => oci_client::Reference::with_tag(
                reference.registry.clone(),
                reference.repository.clone(),
                tag.clone(),
            ),
            (None, None) => unreachable!("a parsed reference names a tag or a digest"),
        }
    }

    /// The digest a reference pins: its own, or what its tag points at now.
    pub async fn resolve(&self, reference: &OciReference) -> Result<Sha256Digest, RegistryError> {
        if let Some(digest) = reference.digest {
            return Ok(digest);
        }
        let digest = self
            .client
            .fetch_manifest_digest(&Registry::oci(reference), &self.auth)
            .await
            .map_err(Registry::failed(reference))?;
        parse_digest(&digest).ok_or_else(|| RegistryError::Refused {
            reference: reference.to_string(),
            why: format!(
                "the registry answered digest {:?}, not a sha256 digest",
                shown(&digest)
            ),
        })
    }

    /// Pulls the artifact `reference` pins by digest, checking every byte.
    pub async fn pull(&self, reference: &OciReference) -> Result<Artifact, RegistryError> {
        let Some(digest) = reference.digest else {
            return Err(RegistryError::Refused {
                reference: reference.to_string(),
                why: "a tag alone is not pinned; run `toolhost pin` to resolve it to a digest"
                    .into(),
            });
        };
        let shown = reference.to_string();
        let manifest = self.manifest(reference, OCI_MANIFEST).await?;
        // Checked before the layer is asked for: its digest comes from here.
        let actual = Sha256Digest::of(&manifest);
        if actual != digest {
            return Err(RegistryError::ManifestDigest {
                reference: shown,
                expected: digest,
                actual,
            });
        }
        let (layer, size) = Artifact::layer(&shown, &manifest)?;
        let component = self
            .blob(
                reference,
                WASM_LAYER_MEDIA_TYPE,
                &layer,
                size,
                MAX_COMPONENT_BYTES,
            )
            .await?;
        Artifact::verified(&shown, digest, manifest, component)
    }

    async fn manifest(
        &self,
        reference: &OciReference,
        media_type: &str,
    ) -> Result<Vec<u8>, RegistryError> {
        let (bytes, _) = self
            .client
            .pull_manifest_raw(&Registry::oci(reference), &self.auth, &[media_type])
            .await
            .map_err(Registry::failed(reference))?;
        if bytes.len() as u64 > MAX_SMALL_BYTES {
            return Err(RegistryError::Refused {
                reference: reference.to_string(),
                why: format!(
                    "a manifest of {} bytes is more than this host reads",
                    bytes.len()
                ),
            });
        }
        Ok(bytes.to_vec())
    }

    /// A blob, read up to `limit` bytes (what the registry sends beyond the
    /// size it declared is never kept).
    async fn blob(
        &self,
        reference: &OciReference,
        media_type: &str,
        digest: &str,
        size: u64,
        limit: u64,
    ) -> Result<Vec<u8>, RegistryError> {
        let descriptor = OciDescriptor {
            media_type: media_type.to_string(),
            digest: digest.to_string(),
            size: size as i64,
            ..OciDescriptor::default()
        };
        let mut stream = self
            .client
            .pull_blob_stream(&Registry::oci(reference), &descriptor)
            .await
            .map_err(Registry::failed(reference))?;
        let mut bytes = Vec::with_capacity(size.min(limit) as usize);
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| {
                // The client checks the digest at the end of the stream.
                let mismatch = e
                    .get_ref()
                    .and_then(|inner| inner.downcast_ref::<oci_client::errors::DigestError>());
                match mismatch {
                    Some(oci_client::errors::DigestError::VerificationError { actual, .. }) => {
                        RegistryError::BlobDigest {
                            reference: reference.to_string(),
                            expected: digest.to_string(),
                            actual: actual.clone(),
                            size: bytes.len(),
                        }
                    }
                    _ => RegistryError::Transport {
                        reference: reference.to_string(),
                        message: format!("reading blob {digest}: {e}"),
                    },
                }
            })?;
            if (bytes.len() + chunk.len()) as u64 > size.min(limit) {
                // More than declared: the digest cannot match; say so.
                bytes.extend_from_slice(&chunk);
                return Err(RegistryError::BlobDigest {
                    reference: reference.to_string(),
                    expected: digest.to_string(),
                    actual: format!("sha256:{}", Sha256Digest::of(&bytes)),
                    size: bytes.len(),
                });
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok(bytes)
    }

    /// The signature bundles that refer to the artifact `reference` pins.
    /// A referrer that cannot be read is skipped (with a warning): it is
    /// not a signature, and the check that counts is on the bundles found.
    pub async fn signatures(&self, reference: &OciReference) -> Result<Vec<Bundle>, RegistryError> {
        let index = self
            .client
            .pull_referrers(&Registry::oci(reference), Some(BUNDLE_MEDIA_TYPE))
            .await
            .map_err(Registry::failed(reference))?;
        let mut bundles = Vec::new();
        for entry in index.manifests.iter().take(MAX_BUNDLES) {
            if entry
                .artifact_type
                .as_deref()
                .is_some_and(|t| t != BUNDLE_MEDIA_TYPE)
            {
                continue;
            }
            match self.bundle(reference, &entry.digest).await {
                Ok(bundle) => bundles.push(bundle),
                Err(e) => {
                    tracing::warn!(%reference, referrer = %entry.digest, "a signature referrer was skipped: {e}")
                }
            }
        }
        Ok(bundles)
    }

    async fn bundle(
        &self,
        reference: &OciReference,
        digest: &str,
    ) -> Result<Bundle, RegistryError> {
        let at = parse_digest(digest)
            .map(|d| reference.pinned(d))
            .ok_or_else(|| RegistryError::Refused {
                reference: reference.to_string(),
                why: format!("referrer digest {digest:?} is not sha256"),
            })?;
        let manifest = self.manifest(&at, OCI_MANIFEST).await?;
        if Some(Sha256Digest::of(&manifest)) != at.digest {
            return Err(RegistryError::Refused {
                reference: at.to_string(),
                why: "the referrer's manifest does not match its digest".into(),
            });
        }
        let parsed: ImageManifest =
            serde_json::from_slice(&manifest).map_err(|e| RegistryError::Refused {
                reference: at.to_string(),
                why: format!("the referrer's manifest does not parse: {e}"),
            })?;
        let layer = parsed
            .layers
            .iter()
            .find(|l| l.media_type == BUNDLE_MEDIA_TYPE && parse_digest(&l.digest).is_some())
            .ok_or_else(|| RegistryError::Refused {
                reference: at.to_string(),
                why: "the referrer has no signature bundle layer".into(),
            })?;
        let bytes = self
            .blob(
                &at,
                BUNDLE_MEDIA_TYPE,
                &layer.digest,
                layer.size,
                MAX_SMALL_BYTES,
            )
            .await?;
        if format!("sha256:{}", Sha256Digest::of(&bytes)) != layer.digest {
            return Err(RegistryError::Refused {
                reference: at.to_string(),
                why: "the signature blob does not match its digest".into(),
            });
        }
        Bundle::parse(&bytes).map_err(|why| RegistryError::Refused {
            reference: at.to_string(),
            why,
        })
    }

    /// Pushes `component` as a WebAssembly artifact to `reference` (its tag,
    /// if it has one) and returns the artifact's digest.
    pub async fn push(
        &self,
        reference: &OciReference,
        component: &[u8],
    ) -> Result<Sha256Digest, RegistryError> {
        let layer = format!("sha256:{}", Sha256Digest::of(component));
        let config = serde_json::to_vec(&json!({
            "architecture": "wasm",
            "os": "wasip2",
            "layerDigests": [layer],
        }))
        .expect("json serialises");
        let config_digest = format!("sha256:{}", Sha256Digest::of(&config));
        let manifest = serde_json::to_vec(&json!({
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "artifactType": WASM_CONFIG_MEDIA_TYPE,
            "config": {"mediaType": WASM_CONFIG_MEDIA_TYPE, "digest": config_digest, "size": config.len()},
            "layers": [{"mediaType": WASM_LAYER_MEDIA_TYPE, "digest": layer, "size": component.len()}],
        }))
        .expect("json serialises");
        let digest = Sha256Digest::of(&manifest);
        self.put_blob(reference, config, &config_digest).await?;
        self.put_blob(reference, component.to_vec(), &layer).await?;
        let target = match reference.tag {
            Some(_) => OciReference {
                digest: None,
                ..reference.clone()
            },
            None => reference.pinned(digest),
        };
        self.put_manifest(&target, manifest, OCI_MANIFEST).await?;
        Ok(digest)
    }

    async fn put_blob(
        &self,
        reference: &OciReference,
        bytes: Vec<u8>,
        digest: &str,
    ) -> Result<(), RegistryError> {
        let oci = Registry::oci(reference);
        self.client
            .auth(&oci, &self.auth, oci_client::RegistryOperation::Push)
            .await
            .map_err(Registry::failed(reference))?;
        self.client
            .push_blob(&oci, bytes, digest)
            .await
            .map_err(Registry::failed(reference))?;
        Ok(())
    }

    async fn put_manifest(
        &self,
        reference: &OciReference,
        body: Vec<u8>,
        media_type: &'static str,
    ) -> Result<(), RegistryError> {
        self.client
            .push_manifest_raw(
                &Registry::oci(reference),
                body,
                http::HeaderValue::from_static(media_type),
            )
            .await
            .map_err(Registry::failed(reference))?;
        Ok(())
    }

    /// Attaches `bundle` to the artifact `subject` pins, as a referrer, and
    /// lists it under the referrers tag for registries without the API.
    pub async fn attach(
        &self,
        subject: &OciReference,
        bundle: &Bundle,
    ) -> Result<(), RegistryError> {
        let subject_manifest = self.manifest(subject, OCI_MANIFEST).await?;
        let subject_digest = Sha256Digest::of(&subject_manifest);
        if Some(subject_digest) != subject.digest {
            return Err(RegistryError::ManifestDigest {
                reference: subject.to_string(),
                expected: subject.digest.unwrap_or(subject_digest),
                actual: subject_digest,
            });
        }
        let body = bundle.to_json().into_bytes();
        let body_digest = format!("sha256:{}", Sha256Digest::of(&body));
        let empty = b"{}".to_vec();
        let empty_digest = format!("sha256:{}", Sha256Digest::of(&empty));
        let body_size = body.len();
        self.put_blob(subject, empty, &empty_digest).await?;
        self.put_blob(subject, body, &body_digest).await?;
        let manifest = serde_json::to_vec(&json!({
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "artifactType": BUNDLE_MEDIA_TYPE,
            "config": {"mediaType": EMPTY_MEDIA_TYPE, "digest": empty_digest, "size": 2},
            "layers": [{"mediaType": BUNDLE_MEDIA_TYPE, "digest": body_digest, "size": body_size}],
            "subject": {"mediaType": OCI_MANIFEST, "digest": format!("sha256:{subject_digest}"), "size": subject_manifest.len()},
        }))
        .expect("json serialises");
        let referrer = Sha256Digest::of(&manifest);
        let size = manifest.len();
        self.put_manifest(&subject.pinned(referrer), manifest, OCI_MANIFEST)
            .await?;

        // The referrers tag schema: an index at tag `sha256-<hex>` listing
        // every referrer, read by clients when the API is missing.
        let tag = OciReference {
            tag: Some(format!("sha256-{subject_digest}")),
            digest: None,
            ..subject.clone()
        };
        // Only a missing index starts a new one: rewriting an index that
        // could not be read would drop other signers' referrers.
        let listed_now = self
            .client
            .pull_manifest_raw(&Registry::oci(&tag), &self.auth, &[OCI_INDEX])
            .await;
        let mut entries: Vec<serde_json::Value> = match listed_now {
            Ok((bytes, _)) => serde_json::from_slice::<serde_json::Value>(&bytes)
                .ok()
                .and_then(|v| v.get("manifests").and_then(|m| m.as_array()).cloned())
                .ok_or_else(|| RegistryError::Refused {
                    reference: tag.to_string(),
                    why: "the referrers index is not an OCI image index; it was left as it is"
                        .into(),
                })?,
            Err(e) if is_not_found(&e) => Vec::new(),
            Err(e) => return Err(Registry::failed(&tag)(e)),
        };
        let listed = format!("sha256:{referrer}");
        entries.retain(|e| e.get("digest").and_then(|d| d.as_str()) != Some(listed.as_str()));
        entries.push(json!({
            "mediaType": OCI_MANIFEST,
            "digest": listed,
            "size": size,
            "artifactType": BUNDLE_MEDIA_TYPE,
        }));
        let index = serde_json::to_vec(&json!({
            "schemaVersion": 2,
            "mediaType": OCI_INDEX,
            "manifests": entries,
        }))
        .expect("json serialises");
        self.put_manifest(&tag, index, OCI_INDEX).await
    }
}

/// A pinned component and its signatures: from the cache when it holds the
/// digest (no registry needed), otherwise pulled and cached.
pub struct Fetched {
    pub component: Vec<u8>,
    pub signatures: Vec<Bundle>,
    /// Whether the registry was asked.
    pub pulled: bool,
}

/// Fetches what `reference` pins through `cache`, within
/// [`FETCH_DEADLINE`]. `fresh_signatures`: ask the registry for signatures
/// even when the cache holds the artifact (a required signer was not found
/// among the cached ones). Signatures that cannot be listed are a warning,
/// not an error: a plugin that requires none still loads, and one that
/// does is refused for want of them.
pub async fn fetch(
    reference: &OciReference,
    cache: &OciCache,
    access: impl FnOnce() -> Result<Access, RegistryError>,
    fresh_signatures: bool,
) -> Result<Fetched, RegistryError> {
    let Some(digest) = reference.digest else {
        return Err(RegistryError::Refused {
            reference: reference.to_string(),
            why: "pinned by tag only, which can move; run `toolhost pin` to resolve it to a digest, review it, and pin that".into(),
        });
    };
    let cached = {
        let (cache, shown) = (cache.clone(), reference.to_string());
        tokio::task::spawn_blocking(move || cache.get(&shown, digest))
            .await
            .ok()
            .flatten()
    };
    if !fresh_signatures && let Some(artifact) = cached {
        return Ok(Fetched {
            component: artifact.component,
            signatures: cache.signatures(digest),
            pulled: false,
        });
    }
    let registry = Registry::new(reference, access()?);
    let work = async {
        let component = match cached {
            Some(artifact) => artifact.component,
            None => {
                let artifact = registry.pull(reference).await?;
                let (cache, kept) = (cache.clone(), artifact.clone());
                let stored = tokio::task::spawn_blocking(move || cache.put(&kept)).await;
                if let Ok(Err(e)) = stored {
                    tracing::warn!(%reference, "could not cache the component: {e}");
                }
                artifact.component
            }
        };
        let signatures = match registry.signatures(reference).await {
            Ok(signatures) => {
                if let Err(e) = cache.put_signatures(digest, &signatures) {
                    tracing::warn!(%reference, "could not cache its signatures: {e}");
                }
                signatures
            }
            Err(e) => {
                tracing::warn!(%reference, "its signatures could not be listed: {e}");
                cache.signatures(digest)
            }
        };
        Ok(Fetched {
            component,
            signatures,
            pulled: true,
        })
    };
    tokio::time::timeout(FETCH_DEADLINE, work)
        .await
        .unwrap_or_else(|_| {
            Err(RegistryError::Refused {
                reference: reference.to_string(),
                why: format!(
                    "the registry did not deliver within {} s",
                    FETCH_DEADLINE.as_secs()
                ),
            })
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn https_unless_the_registry_is_on_loopback_or_plain_http_is_allowed() {
        let at = |text: &str| OciReference::parse(text).unwrap();
        let remote = at("oci://registry.example.com/tools/crm:1");
        assert!(!Access::new(&remote, false, RegistryAuth::Anonymous).plain_http);
        assert!(Access::new(&remote, true, RegistryAuth::Anonymous).plain_http);
        for local in [
            "oci://127.0.0.1:5000/crm:1",
            "oci://localhost:5000/crm:1",
            "oci://[::1]:5000/crm:1",
        ] {
            assert!(Access::new(&at(local), false, RegistryAuth::Anonymous).plain_http);
        }
    }

    #[test]
    fn an_artifact_is_checked_against_both_digests_and_its_layout() {
        let component = b"\0asm\x0d\0\x01\0".to_vec();
        let layer = format!("sha256:{}", Sha256Digest::of(&component));
        let manifest = |config: &str, layers: serde_json::Value| {
            serde_json::to_vec(&json!({
                "schemaVersion": 2,
                "mediaType": OCI_MANIFEST,
                "config": {"mediaType": config, "digest": layer, "size": 1},
                "layers": layers,
            }))
            .unwrap()
        };
        let good = manifest(
            WASM_CONFIG_MEDIA_TYPE,
            json!([{"mediaType": WASM_LAYER_MEDIA_TYPE, "digest": layer, "size": component.len()}]),
        );
        let digest = Sha256Digest::of(&good);
        assert!(Artifact::verified("r", digest, good.clone(), component.clone()).is_ok());
        let altered = b"\0asm\x0d\0\x01\x01".to_vec();
        assert!(matches!(
            Artifact::verified("r", digest, good.clone(), altered),
            Err(RegistryError::BlobDigest { .. })
        ));
        assert!(matches!(
            Artifact::verified("r", Sha256Digest::of(b"x"), good, component.clone()),
            Err(RegistryError::ManifestDigest { .. })
        ));
        for bad in [
            manifest(
                "application/vnd.oci.image.config.v1+json",
                json!([{"mediaType": WASM_LAYER_MEDIA_TYPE, "digest": layer, "size": 8}]),
            ),
            manifest(WASM_CONFIG_MEDIA_TYPE, json!([])),
            manifest(
                WASM_CONFIG_MEDIA_TYPE,
                json!([{"mediaType": "application/octet-stream", "digest": layer, "size": 8}]),
            ),
        ] {
            let digest = Sha256Digest::of(&bad);
            assert!(matches!(
                Artifact::verified("r", digest, bad, component.clone()),
                Err(RegistryError::NotComponent { .. })
            ));
        }
    }
}
