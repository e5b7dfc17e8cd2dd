//! HTTPS for a team gateway that listens beyond loopback without a proxy in front:
//! rustls with the ring provider (already built for outgoing HTTPS), the certificate
//! chain and key read from the PEM files the config names, HTTP/1.1 only.

use std::path::Path;
use std::sync::Arc;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;

use super::TeamError;
use super::config::Tls;

/// The acceptor for `tls`'s certificate and key; an error names the file.
pub fn acceptor(tls: &Tls) -> Result<TlsAcceptor, TeamError> {
    let fail =
        |path: &Path, e: &dyn std::fmt::Display| TeamError::Tls(format!("{}: {e}", path.display()));
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&tls.cert)
        .map_err(|e| fail(&tls.cert, &e))?
        .collect::<Result<_, _>>()
        .map_err(|e| fail(&tls.cert, &e))?;
    if certs.is_empty() {
        return Err(fail(&tls.cert, &"no certificate in the file"));
    }
    let key = PrivateKeyDer::from_pem_file(&tls.key).map_err(|e| fail(&tls.key, &e))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TeamError::Tls(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| fail(&tls.cert, &e))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}
