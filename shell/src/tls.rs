//! The rustls set-up the drivers share (features `rustls`, `webpki-roots`,
//! `native-roots`, turned on by the drivers' TLS features): which roots are trusted, the
//! application's extra PEM certificates checked once, the ring provider. omni-tokio hands
//! the configuration to reqwest, omni-smol to its own connections; omni-blocking gives
//! ureq its roots in ureq's types but reads the system's through `native_roots`.

use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;

/// A rustls client configuration with the ring provider, trusting Mozilla's roots and/or
/// the system's (as the features say) plus every certificate of `extra_roots` (PEM). A
/// PEM that is not valid, holds no certificate or one rustls cannot use as a root is
/// refused now, not at the first handshake.
pub fn rustls_config(extra_roots: &[Vec<u8>]) -> Result<rustls::ClientConfig, String> {
    #[cfg(feature = "webpki-roots")]
    let mut roots = rustls::RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() };
    #[cfg(not(feature = "webpki-roots"))]
    let mut roots = rustls::RootCertStore::empty();
    #[cfg(feature = "native-roots")]
    roots.add_parsable_certificates(native_roots().iter().cloned());
    for pem in extra_roots {
        let mut found = false;
        for cert in CertificateDer::pem_slice_iter(pem) {
            let cert = cert.map_err(|e| format!("invalid PEM certificate: {e}"))?;
            roots.add(cert).map_err(|e| format!("unusable root certificate: {e}"))?;
            found = true;
        }
        if !found {
            return Err("no PEM certificate found in a root certificate".into());
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

/// The operating system's roots, read once per process: reading them opens and parses
/// the system's certificate files, which every client would otherwise repeat. Files that
/// cannot be read are skipped (rustls-native-certs reports them; the roots found still
/// serve), and none found leaves only the other roots.
#[cfg(feature = "native-roots")]
pub fn native_roots() -> &'static [CertificateDer<'static>] {
    static ROOTS: std::sync::OnceLock<Vec<CertificateDer<'static>>> = std::sync::OnceLock::new();
    ROOTS.get_or_init(|| rustls_native_certs::load_native_certs().certs)
}
