//! TLS to the database, as the URL asks for it.

use super::StoreError;

/// Rustls with the web's root certificates (or `sslrootcert`'s) and the
/// provider the rest of the host uses (`tls`).
pub(super) fn tls_config(
    root_cert: Option<String>,
) -> Result<tokio_rustls::rustls::ClientConfig, StoreError> {
    use tokio_rustls::rustls::pki_types::CertificateDer;
    use tokio_rustls::rustls::pki_types::pem::PemObject;
    let roots = match root_cert {
        None => tokio_rustls::rustls::RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
        },
        Some(path) => {
            let bad = |e: String| StoreError::Database(format!("sslrootcert {path}: {e}"));
            let mut roots = tokio_rustls::rustls::RootCertStore::empty();
            let certs = CertificateDer::pem_file_iter(&path).map_err(|e| bad(e.to_string()))?;
            for cert in certs {
                roots
                    .add(cert.map_err(|e| bad(e.to_string()))?)
                    .map_err(|e| bad(e.to_string()))?;
            }
            if roots.is_empty() {
                return Err(bad("holds no PEM certificate".into()));
            }
            roots
        }
    };
    Ok(
        tokio_rustls::rustls::ClientConfig::builder_with_provider(crate::tls::provider())
            .with_safe_default_protocol_versions()
            .expect("ring supports the default protocol versions")
            .with_root_certificates(roots)
            .with_no_client_auth(),
    )
}

/// Takes libpq's TLS options that the driver does not know out of a
/// `postgres://` URL: `sslrootcert=PATH` (returned) and `sslmode=verify-ca`
/// or `verify-full`, which become `require` (the host always verifies). A
/// CA given means TLS, unless `sslmode=disable` says otherwise.
pub(super) fn take_tls_options(url: &str) -> (String, Option<String>) {
    let Some((base, query)) = url.split_once('?') else {
        return (url.to_string(), None);
    };
    let mut root_cert = None;
    let mut kept = Vec::new();
    for pair in query.split('&') {
        match pair.split_once('=') {
            Some(("sslrootcert", value)) => {
                root_cert = Some(
                    percent_encoding::percent_decode_str(value)
                        .decode_utf8_lossy()
                        .into_owned(),
                );
            }
            Some(("sslmode", "verify-ca" | "verify-full")) => kept.push("sslmode=require"),
            _ => kept.push(pair),
        }
    }
    if root_cert.is_some()
        && !kept
            .iter()
            .any(|p| p.starts_with("sslmode=") && *p != "sslmode=prefer")
    {
        kept.retain(|p| !p.starts_with("sslmode="));
        kept.push("sslmode=require");
    }
    if kept.is_empty() {
        (base.to_string(), root_cert)
    } else {
        (format!("{base}?{}", kept.join("&")), root_cert)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn libpq_tls_options_are_taken_out_of_the_url() {
        assert_eq!(
            super::take_tls_options(
                "postgres://u@db/x?sslmode=verify-full&sslrootcert=%2Fetc%2Fca.pem&application_name=a"
            ),
            (
                "postgres://u@db/x?sslmode=require&application_name=a".to_string(),
                Some("/etc/ca.pem".to_string())
            )
        );
        assert_eq!(
            super::take_tls_options("postgres://u@db/x"),
            ("postgres://u@db/x".to_string(), None)
        );
        assert_eq!(
            super::take_tls_options("postgres://u@db/x?sslrootcert=ca.pem"),
            (
                "postgres://u@db/x?sslmode=require".to_string(),
                Some("ca.pem".to_string())
            )
        );
        assert_eq!(
            super::take_tls_options("postgres://u@db/x?sslmode=disable&sslrootcert=ca.pem").0,
            "postgres://u@db/x?sslmode=disable"
        );
    }
}
