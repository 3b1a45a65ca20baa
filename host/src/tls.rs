//! The crypto provider behind every TLS client of the host: plugins'
//! outbound requests and the approval webhook (`gate`), OCI registries
//! (`registry`) and PostgreSQL (`store`). One provider, so the host carries
//! one TLS implementation and offers every server the same key exchange.
//!
//! It is ring's. rustls 0.23.48 marks ring's provider deprecated because
//! ring has no post-quantum key exchange; the provider that has one
//! (aws-lc-rs) is a large C library to build, which the host does not carry
//! (docs/architecture.md, "The host sends plugin requests itself").

use std::sync::{Arc, OnceLock};

use tokio_rustls::rustls::crypto::{CryptoProvider, SupportedKxGroup, ring};

/// The key exchange groups a client offers, first to last; the first is
/// the one whose key share goes in the client's hello.
///
/// X25519 first, as rustls itself ordered ring's groups until 0.23.48,
/// which put P-384 first. ring's P-384 costs about 13 times the CPU of
/// X25519 per handshake (750 against 59 µs for a key pair and its
/// agreement, measured on the development machine), paid on each of a
/// plugin's requests, since the gate opens a connection per request. Both
/// are classical groups and neither resists a quantum attacker, which is
/// what the change was about; X25519 keeps the 128-bit classical level that
/// P-256 has.
pub const KX_GROUPS: [&dyn SupportedKxGroup; 3] = [
    ring::kx_group::X25519,
    ring::kx_group::SECP256R1,
    ring::kx_group::SECP384R1,
];

/// The provider every TLS client config of the host is built with: ring's
/// cipher suites and signature algorithms, with [`KX_GROUPS`].
pub fn provider() -> Arc<CryptoProvider> {
    static PROVIDER: OnceLock<Arc<CryptoProvider>> = OnceLock::new();
    PROVIDER
        .get_or_init(|| {
            // Deprecated for want of post-quantum key exchange, not for a
            // flaw; see the module's comment for why the host keeps it.
            #[allow(deprecated)]
            let mut provider = ring::default_provider();
            provider.kx_groups = KX_GROUPS.to_vec();
            Arc::new(provider)
        })
        .clone()
}

/// Makes [`provider`] the process's default, if none is yet: for clients
/// that take no provider of their own (reqwest, under the registry client).
pub fn install_process_default() {
    let _ = CryptoProvider::clone(&provider()).install_default();
}

#[cfg(test)]
mod tests {
    use tokio_rustls::rustls::NamedGroup;

    use super::*;

    #[test]
    fn x25519_is_offered_first_and_no_group_is_lost() {
        let groups: Vec<NamedGroup> = provider().kx_groups.iter().map(|g| g.name()).collect();
        assert_eq!(
            groups,
            [
                NamedGroup::X25519,
                NamedGroup::secp256r1,
                NamedGroup::secp384r1
            ]
        );
        // Everything ring offers by default is still offered.
        #[allow(deprecated)]
        let defaults = ring::default_provider().kx_groups;
        for group in defaults {
            assert!(groups.contains(&group.name()), "{:?}", group.name());
        }
    }

    #[test]
    fn the_process_default_is_the_hosts_provider() {
        install_process_default();
        let installed = CryptoProvider::get_default().expect("installed");
        let names = |p: &CryptoProvider| p.kx_groups.iter().map(|g| g.name()).collect::<Vec<_>>();
        assert_eq!(names(installed), names(&provider()));
    }
}
