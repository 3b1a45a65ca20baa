//! The registry and signing commands of `toolhost plugin`: `push` and
//! `pull` (components in OCI registries), `sign` (a signature beside a file
//! or attached in a registry) and `keygen` (a key pair to sign with); and
//! what `pin`, `diff` and `inspect` share to read a component named by a
//! file or an `oci://` reference.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

use crate::manifest::{Manifest, OCI_SCHEME, OciReference, Sha256Digest};
use crate::registry::{self, Access, Registry};
use crate::signing::{self, Algorithm, Bundle, SecretKey};

/// A connection to `reference`'s registry: credentials from the manifest's
/// `[[registry]]` (and its secret store) when one is given, otherwise from
/// the docker config file; plain HTTP on loopback, or with `plain_http`.
pub(super) fn connect(
    reference: &OciReference,
    manifest: Option<&Manifest>,
    plain_http: bool,
) -> anyhow::Result<(Registry, Access)> {
    let decl = match manifest {
        Some(manifest) => manifest.registry(&reference.registry),
        None => crate::manifest::RegistryDecl {
            host: reference.registry.clone(),
            credential: None,
            plain_http: false,
        },
    };
    let secrets = match (&decl.credential, manifest) {
        (Some(_), Some(manifest)) => Some(crate::gate::SecretStore::open(
            manifest.secrets_file.as_deref(),
        )?),
        _ => None,
    };
    let auth = registry::credentials(&decl, secrets.as_ref()).map_err(anyhow::Error::msg)?;
    let access = Access::new(reference, plain_http || decl.plain_http, auth);
    Ok((Registry::new(reference, access.clone()), access))
}

fn reference(text: &str) -> anyhow::Result<OciReference> {
    OciReference::parse(text).map_err(anyhow::Error::msg)
}

/// A component named on the command line, read and checked.
pub(super) struct Named {
    /// How reports name it: the path, or the reference pinned by digest.
    pub label: String,
    pub bytes: Vec<u8>,
    pub signatures: Vec<Bundle>,
}

/// Reads a component file (with its `.sig`) or pulls an `oci://` reference
/// (a tag is resolved to its digest, which the label shows).
pub(super) async fn read_named(
    text: &str,
    manifest: Option<&Manifest>,
    plain_http: bool,
) -> anyhow::Result<Named> {
    if !text.starts_with(OCI_SCHEME) {
        let path = Path::new(text);
        let bytes =
            std::fs::read(path).with_context(|| format!("reading component {}", path.display()))?;
        return Ok(Named {
            label: path.display().to_string(),
            bytes,
            signatures: signing::read_beside(path)?,
        });
    }
    let named = reference(text)?;
    let (registry, _) = connect(&named, manifest, plain_http)?;
    let digest = registry.resolve(&named).await?;
    let pinned = named.pinned(digest);
    let artifact = registry.pull(&pinned).await?;
    let signatures = registry.signatures(&pinned).await?;
    Ok(Named {
        label: pinned.to_string(),
        bytes: artifact.component,
        signatures,
    })
}

/// `toolhost plugin push FILE oci://REGISTRY/REPOSITORY:TAG`: pushes the
/// component, and the signatures in `FILE.sig` as its referrers; prints the
/// digest reference to pin.
pub(super) async fn push(file: &Path, target: &str, plain_http: bool) -> anyhow::Result<()> {
    let target = reference(target)?;
    if target.digest.is_some() {
        bail!("push to a tag (oci://REGISTRY/REPOSITORY:TAG); the registry gives the digest");
    }
    let bytes =
        std::fs::read(file).with_context(|| format!("reading component {}", file.display()))?;
    // A component's preamble: the wasm magic, then version 0x0d, layer 1.
    if !bytes.starts_with(b"\0asm\x0d\0\x01\0") {
        bail!("{} is not a WebAssembly component", file.display());
    }
    let signatures = signing::read_beside(file)?;
    let (registry, _) = connect(&target, None, plain_http)?;
    let digest = registry.push(&target, &bytes).await?;
    let pinned = target.pinned(digest);
    for bundle in &signatures {
        registry.attach(&pinned, bundle).await?;
    }
    eprintln!(
        "pushed {} ({} bytes, component sha256 {}) with {} signature(s)",
        file.display(),
        bytes.len(),
        Sha256Digest::of(&bytes),
        signatures.len()
    );
    println!("{pinned}");
    Ok(())
}

/// `toolhost plugin pull oci://… --out FILE`: the component, checked
/// against its digest, and its signatures as `FILE.sig`, for review.
pub(super) async fn pull(source: &str, out: &Path, plain_http: bool) -> anyhow::Result<()> {
    let named = read_named(source, None, plain_http).await?;
    std::fs::write(out, &named.bytes).with_context(|| format!("writing {}", out.display()))?;
    let sig = signing::sig_path(out);
    let _ = std::fs::remove_file(&sig);
    for bundle in &named.signatures {
        signing::write_beside(out, bundle)?;
    }
    eprintln!(
        "{} -> {} (sha256 {}), {} signature(s)",
        named.label,
        out.display(),
        Sha256Digest::of(&named.bytes),
        named.signatures.len()
    );
    println!("{}", named.label);
    Ok(())
}

/// `toolhost plugin sign FILE|oci://… --key KEY`.
pub(super) async fn sign(target: &str, key: &Path, plain_http: bool) -> anyhow::Result<()> {
    let key = SecretKey::read(key)?;
    let fingerprint = key.public().fingerprint();
    if !target.starts_with(OCI_SCHEME) {
        let path = PathBuf::from(target);
        let bytes = std::fs::read(&path)
            .with_context(|| format!("reading component {}", path.display()))?;
        let written = signing::write_beside(&path, &key.sign(&bytes))?;
        println!(
            "signed sha256 {} with {} key {fingerprint}; signature in {}",
            Sha256Digest::of(&bytes),
            key.public().algorithm(),
            written.display()
        );
        return Ok(());
    }
    let named = reference(target)?;
    let (registry, _) = connect(&named, None, plain_http)?;
    let pinned = named.pinned(registry.resolve(&named).await?);
    // What is signed is what the registry holds under that digest, checked.
    let artifact = registry.pull(&pinned).await?;
    registry
        .attach(&pinned, &key.sign(&artifact.component))
        .await?;
    println!(
        "signed {pinned} (component sha256 {}) with {} key {fingerprint}; attached as a referrer",
        Sha256Digest::of(&artifact.component),
        key.public().algorithm(),
    );
    Ok(())
}

/// `toolhost plugin keygen PREFIX`: PREFIX.key (private, mode 0600) and
/// PREFIX.pub (the public key for `[[trust]]`).
pub(super) fn keygen(prefix: &Path, algorithm: Algorithm) -> anyhow::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let key = SecretKey::generate(algorithm);
    let with = |extension: &str| {
        let mut name = prefix.as_os_str().to_os_string();
        name.push(extension);
        PathBuf::from(name)
    };
    let (private, public) = (with(".key"), with(".pub"));
    // Neither file is ever overwritten: a trusted public key replaced in
    // place would quietly change what a manifest trusts.
    let create = |path: &Path, mode: u32| {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(path)
            .with_context(|| {
                format!(
                    "creating {} (an existing key is never overwritten)",
                    path.display()
                )
            })
    };
    if public.exists() {
        bail!(
            "{} exists; an existing key is never overwritten",
            public.display()
        );
    }
    create(&private, 0o600)?.write_all(key.to_pem().as_bytes())?;
    create(&public, 0o644)?.write_all(key.public().to_pem().as_bytes())?;
    println!(
        "{} key {}\n  private: {} (keep it secret)\n  public:  {} (name it in [[trust]])",
        key.public().algorithm(),
        key.public().fingerprint(),
        private.display(),
        public.display()
    );
    Ok(())
}
