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

use tokio_rustls::rustls::NamedGroup;
use tokio_rustls::rustls::crypto::{CryptoProvider, SupportedKxGroup, ring};

/// The key exchange groups a client offers, first to last; the first is
/// the one whose key share goes in the client's hello.
///
/// X25519 first, as rustls itself ordered ring's groups until 0.23.48,
/// which put P-384 first without saying why. ring's P-384 costs about 13
/// times the CPU of X25519 per key exchange (750 against 59 µs for a key
/// pair and its agreement, measured on the development machine), paid on
/// each of a plugin's requests, since the gate opens a connection per
/// request. What P-384 would add is classical strength (about 192 bits
/// against X25519's 128, the level of P-256 and of the AES-128 suites);
/// neither resists a quantum attacker. A server that takes only P-384
/// still gets it, at the cost of one more round trip.
pub static KX_GROUPS: [&dyn SupportedKxGroup; 3] = [
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
///
/// Called when such a client is made, not at start, so that a host that
/// never reaches a registry never touches this code. Nothing in the host
/// builds a TLS config without a provider, which would make rustls install
/// its own first; should a dependency start doing so, this says it.
pub fn install_process_default() {
    if CryptoProvider::clone(&provider())
        .install_default()
        .is_err()
        && let Some(installed) = CryptoProvider::get_default()
        && group_names(installed) != group_names(&provider())
    {
        tracing::warn!(
            installed = ?group_names(installed),
            "another TLS provider became the process's before the host's: \
             reqwest offers its key exchange groups"
        );
    }
}

fn group_names(provider: &CryptoProvider) -> Vec<NamedGroup> {
    provider.kx_groups.iter().map(|g| g.name()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn x25519_is_offered_first_and_no_group_is_lost() {
        let groups = group_names(&provider());
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
        assert_eq!(group_names(installed), group_names(&provider()));
    }
}
