//! Where a plugin's component comes from: a file beside the manifest, or an
//! OCI registry (`oci://REGISTRY/REPOSITORY@sha256:DIGEST`), and how the
//! host reaches registries (`[[registry]]`). Data only: `registry` pulls.

use std::fmt;
use std::path::PathBuf;

use super::Sha256Digest;
use super::network::SecretName;

/// A plugin's component.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ComponentSource {
    /// An absolute path.
    File(PathBuf),
    Oci(OciReference),
}

impl fmt::Display for ComponentSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ComponentSource::File(path) => write!(f, "{}", path.display()),
            ComponentSource::Oci(reference) => write!(f, "{reference}"),
        }
    }
}

/// `oci://REGISTRY/REPOSITORY[:TAG][@sha256:DIGEST]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OciReference {
    /// `host` or `host:port`.
    pub registry: String,
    /// Slash-separated lowercase path components.
    pub repository: String,
    pub tag: Option<String>,
    /// The digest of the artifact's manifest: what pins it.
    pub digest: Option<Sha256Digest>,
}

/// The prefix of a registry reference.
pub const OCI_SCHEME: &str = "oci://";

impl OciReference {
    /// Parses `oci://…`; the error says what is wrong in words.
    pub fn parse(text: &str) -> Result<OciReference, String> {
        let rest = text
            .strip_prefix(OCI_SCHEME)
            .ok_or_else(|| format!("{text:?} does not start with {OCI_SCHEME}"))?;
        let (registry, path) = rest.split_once('/').ok_or_else(|| {
            format!("{text:?} names no repository (oci://REGISTRY/REPOSITORY@sha256:DIGEST)")
        })?;
        if !valid_registry(registry) {
            return Err(format!(
                "{text:?}: registry {registry:?} is not a host name or address with an optional port"
            ));
        }
        let (path, digest) = match path.split_once('@') {
            Some((path, digest)) => {
                let hex = digest.strip_prefix("sha256:").ok_or_else(|| {
                    format!("{text:?}: the digest must be sha256:<64 hex digits>")
                })?;
                let digest = Sha256Digest::try_from(hex.to_string())
                    .map_err(|e| format!("{text:?}: {e}"))?;
                (path, Some(digest))
            }
            None => (path, None),
        };
        let (repository, tag) = match path.rsplit_once(':') {
            Some((repository, tag)) => (repository, Some(tag.to_string())),
            None => (path, None),
        };
        if !repository.split('/').all(valid_component) {
            return Err(format!(
                "{text:?}: repository {repository:?} must be lowercase path components (a-z, 0-9, separated by '.', '_' or '-')"
            ));
        }
        if let Some(tag) = &tag
            && !valid_tag(tag)
        {
            return Err(format!(
                "{text:?}: tag {tag:?} must be 1 to 128 letters, digits, '_', '.' or '-', not starting with '.' or '-'"
            ));
        }
        if tag.is_none() && digest.is_none() {
            return Err(format!("{text:?} names neither a tag nor a digest"));
        }
        Ok(OciReference {
            registry: registry.to_string(),
            repository: repository.to_string(),
            tag,
            digest,
        })
    }

    /// The same artifact pinned by `digest`, without its tag.
    pub fn pinned(&self, digest: Sha256Digest) -> OciReference {
        OciReference {
            tag: None,
            digest: Some(digest),
            ..self.clone()
        }
    }

    /// Whether the registry is on this machine (so plain HTTP is allowed).
    pub fn is_loopback(&self) -> bool {
        let host = match self.registry.rsplit_once(':') {
            Some((host, port)) if port.chars().all(|c| c.is_ascii_digit()) => host,
            _ => &self.registry,
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        host == "localhost"
            || host
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback())
    }
}

impl fmt::Display for OciReference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{OCI_SCHEME}{}/{}", self.registry, self.repository)?;
        if let Some(tag) = &self.tag {
            write!(f, ":{tag}")?;
        }
        if let Some(digest) = &self.digest {
            write!(f, "@sha256:{digest}")?;
        }
        Ok(())
    }
}

fn valid_registry(registry: &str) -> bool {
    !registry.is_empty()
        && registry.len() <= 255
        && registry
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '[' | ']'))
}

fn valid_component(part: &str) -> bool {
    let bytes = part.as_bytes();
    !part.is_empty()
        && part.len() <= 128
        && bytes[0].is_ascii_alphanumeric()
        && bytes[bytes.len() - 1].is_ascii_alphanumeric()
        && part
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-'))
}

fn valid_tag(tag: &str) -> bool {
    !tag.is_empty()
        && tag.len() <= 128
        && !tag.starts_with(['.', '-'])
        && tag
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

/// `[[registry]]`: how the host reaches one registry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryDecl {
    /// `host` or `host:port`, as references name it.
    pub host: String,
    /// A secret store name whose value is `USER:PASSWORD` (or a token after
    /// `USER:`); without it, a docker-style config file is consulted.
    pub credential: Option<SecretName>,
    /// Plain HTTP to a registry that is not on loopback: allowed only when
    /// the manifest says so here.
    pub plain_http: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_parse_and_print_back() {
        let digest = "a".repeat(64);
        for text in [
            format!("oci://127.0.0.1:5000/tools/crm@sha256:{digest}"),
            "oci://registry.example.com/team/tools/crm:1.2.0".to_string(),
            format!("oci://localhost:5000/crm:v1@sha256:{digest}"),
        ] {
            let parsed = OciReference::parse(&text).unwrap();
            assert_eq!(parsed.to_string(), text);
        }
        let r = OciReference::parse("oci://[::1]:5000/crm:1").unwrap();
        assert!(r.is_loopback());
        assert!(
            !OciReference::parse("oci://ghcr.io/x/crm:1")
                .unwrap()
                .is_loopback()
        );
    }

    #[test]
    fn bad_references_say_why() {
        for (text, why) in [
            ("oci://ghcr.io", "names no repository"),
            ("oci://ghcr.io/Crm:1", "lowercase"),
            ("oci://ghcr.io/crm", "neither a tag nor a digest"),
            ("oci://ghcr.io/crm@sha512:00", "sha256:"),
            ("oci://ghcr.io/crm@sha256:00", "64 hex"),
            ("oci://ghcr.io/crm:-x", "tag"),
            ("oci://gh cr.io/crm:1", "registry"),
            ("https://ghcr.io/crm:1", "does not start"),
        ] {
            let error = OciReference::parse(text).unwrap_err();
            assert!(error.contains(why), "{text}: {error}");
        }
    }
}
