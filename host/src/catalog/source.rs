//! A declared plugin's component bytes and who signed them: read from a
//! file (signatures in `FILE.sig`) or fetched from an OCI registry through
//! the host's artifact cache, checked against the pin, then held against
//! the plugin's `signed_by`.

use crate::gate::SecretStore;
use crate::manifest::{ComponentSource, Manifest, OciReference, PluginDecl, Sha256Digest};
use crate::registry::{self, Access, OciCache, RegistryError};
use crate::signing::{self, Bundle, Signers};

/// A component ready to compile.
pub struct Component {
    pub bytes: Vec<u8>,
    pub digest: Sha256Digest,
    /// The `[[trust]]` names that signed it.
    pub signers: Vec<String>,
}

/// Reads `decl`'s component and checks its pin and signatures; the error is
/// the reason to refuse the plugin.
pub async fn read(manifest: &Manifest, decl: &PluginDecl) -> Result<Component, String> {
    let (bytes, mut bundles, pulled) = match &decl.component {
        ComponentSource::File(path) => {
            let bytes = tokio::fs::read(path).await.map_err(|e| {
                format!(
                    "cannot read component {}: {e}; build the plugin or correct `component`",
                    path.display()
                )
            })?;
            let bundles = signing::read_beside(path).map_err(|e| e.to_string())?;
            (bytes, bundles, false)
        }
        ComponentSource::Oci(reference) => {
            let fetched = fetch(manifest, reference, false).await?;
            (fetched.component, fetched.signatures, fetched.pulled)
        }
    };
    let digest = Sha256Digest::of(&bytes);
    if let Some(pinned) = decl.sha256
        && digest != pinned
    {
        return Err(format!(
            "component {} has sha256 {digest}, but the manifest pins {pinned}; if this is the build you vetted, update the pin (`toolhost pin`), otherwise do not serve it",
            decl.component
        ));
    }
    let mut found = signing::signers(&bytes, &bundles, &manifest.trust);
    // A cached artifact may predate a signature added since: a registry is
    // asked again before a required signer is declared missing.
    if let ComponentSource::Oci(reference) = &decl.component
        && !pulled
        && !decl.signed_by.is_empty()
        && !satisfied(decl, &found)
        && let Ok(fetched) = fetch(manifest, reference, true).await
    {
        bundles = fetched.signatures;
        found = signing::signers(&bytes, &bundles, &manifest.trust);
    }
    if !decl.signed_by.is_empty() && !satisfied(decl, &found) {
        return Err(unsigned(manifest, decl, &found, bundles.len()));
    }
    Ok(Component {
        bytes,
        digest,
        signers: found.trusted,
    })
}

fn satisfied(decl: &PluginDecl, found: &Signers) -> bool {
    decl.signed_by.iter().any(|s| found.trusted.contains(s))
}

/// Why a required signature is missing: the signers expected, and what
/// was found instead.
fn unsigned(manifest: &Manifest, decl: &PluginDecl, found: &Signers, bundles: usize) -> String {
    let expected = decl
        .signed_by
        .iter()
        .map(
            |name| match manifest.trust.iter().any(|t| &t.name == name) {
                true => format!("`{name}`"),
                false => format!("`{name}` (no longer in [[trust]])"),
            },
        )
        .collect::<Vec<_>>()
        .join(" or ");
    let mut what: Vec<String> = found
        .trusted
        .iter()
        .map(|name| {
            format!("a valid signature by trusted `{name}`, which this plugin does not accept")
        })
        .collect();
    what.extend(found.other.iter().cloned());
    let what = match (bundles, what.is_empty()) {
        (0, _) => "no signature at all".to_string(),
        (_, true) => "nothing usable".to_string(),
        (_, false) => what.join("; "),
    };
    let beside = match &decl.component {
        ComponentSource::File(path) => format!("{}", signing::sig_path(path).display()),
        ComponentSource::Oci(_) => "the registry's referrers".into(),
    };
    format!(
        "it requires a signature by {expected}, but {beside} had {what}; sign the vetted component (`toolhost plugin sign`) or correct signed_by / [[trust]]"
    )
}

/// The artifact `reference` pins, from the cache or its registry.
pub async fn fetch(
    manifest: &Manifest,
    reference: &OciReference,
    fresh_signatures: bool,
) -> Result<registry::Fetched, String> {
    let cache = OciCache::in_state_dir(&manifest.state_dir);
    let access = || -> Result<Access, RegistryError> {
        let decl = manifest.registry(&reference.registry);
        // The secret store is opened only for a registry that names a secret.
        let secrets =
            match &decl.credential {
                Some(_) => Some(SecretStore::open(manifest.secrets_file.as_deref()).map_err(
                    |e| RegistryError::Refused {
                        reference: reference.to_string(),
                        why: e.to_string(),
                    },
                )?),
                None => None,
            };
        let auth = registry::credentials(&decl, secrets.as_ref()).map_err(|why| {
            RegistryError::Refused {
                reference: reference.to_string(),
                why,
            }
        })?;
        Ok(Access::new(reference, decl.plain_http, auth))
    };
    let fetched = registry::fetch(reference, &cache, access, fresh_signatures)
        .await
        .map_err(|e| e.to_string())?;
    if fetched.pulled {
        tracing::info!(%reference, "component pulled from its registry");
    }
    Ok(fetched)
}

/// Which trusted keys (the manifest's `[[trust]]`, if there is one) signed
/// a component: for reports such as `plugin diff`, which hold it to no
/// `signed_by`.
pub fn signers_of(bytes: &[u8], bundles: &[Bundle], manifest: Option<&Manifest>) -> Signers {
    let trust = manifest.map(|m| m.trust.as_slice()).unwrap_or_default();
    signing::signers(bytes, bundles, trust)
}
