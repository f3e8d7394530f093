//! Opening a connection: the URL's target, TCP through smol (DNS on smol's blocking
//! pool), and TLS through futures-rustls for https.

use std::fmt;
use std::sync::Arc;

use futures_lite::io::{AsyncRead, AsyncWrite};
use futures_rustls::TlsConnector;
use omni_core::generate::{TransportError, TransportErrorKind};
use rustls::pki_types::ServerName;
use smol::net::TcpStream;
use ureq_proto::http::Uri;

/// A byte stream to the server, plain or TLS.
pub(crate) trait Connection: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Connection for T {}

/// Where a request goes (and which idle connections may carry it).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Target {
    host: String,
    port: u16,
    tls: bool,
}

impl Target {
    /// The target of an absolute `http` or `https` URL.
    pub(crate) fn of(uri: &Uri) -> Result<Target, TransportError> {
        let tls = match uri.scheme_str() {
            Some(s) if s.eq_ignore_ascii_case("https") => true,
            Some(s) if s.eq_ignore_ascii_case("http") => false,
            _ => return Err(failure(TransportErrorKind::Other, format_args!("unsupported URL scheme in {uri}"))),
        };
        let Some(host) = uri.host() else {
            return Err(failure(TransportErrorKind::Other, format_args!("no host in {uri}")));
        };
        // An IPv6 literal comes bracketed in the URL; sockets and TLS want it bare.
        // Host names are case-insensitive: one server, one pool entry.
        let host = host.trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase();
        let port = uri.port_u16().unwrap_or(if tls { 443 } else { 80 });
        Ok(Target { host, port, tls })
    }
}

/// Connects to `target`: DNS and TCP failures are `Connect`, handshake failures `Tls`.
pub(crate) async fn open(
    tls: &Arc<rustls::ClientConfig>,
    target: &Target,
) -> Result<Box<dyn Connection>, TransportError> {
    let tcp = TcpStream::connect((target.host.as_str(), target.port))
        .await
        .map_err(|e| failure(TransportErrorKind::Connect, format_args!("{}:{}: {e}", target.host, target.port)))?;
    // Streamed requests are small writes; do not let Nagle hold them back.
    let _ = tcp.set_nodelay(true);
    if !target.tls {
        return Ok(Box::new(tcp));
    }
    let name = ServerName::try_from(target.host.clone())
        .map_err(|e| failure(TransportErrorKind::Tls, format_args!("invalid server name {}: {e}", target.host)))?;
    let stream = TlsConnector::from(tls.clone()).connect(name, tcp).await.map_err(|e| {
        // futures-rustls reports rustls errors as InvalidData; anything else broke the socket.
        let from_tls = e.kind() == std::io::ErrorKind::InvalidData
            || e.get_ref().is_some_and(|inner| inner.downcast_ref::<rustls::Error>().is_some());
        let kind = if from_tls { TransportErrorKind::Tls } else { TransportErrorKind::Connect };
        failure(kind, format_args!("TLS handshake with {}: {e}", target.host))
    })?;
    Ok(Box::new(stream))
}

/// The rustls configuration: the ring provider, Mozilla's roots plus any extra PEM
/// certificates, HTTP/1.1 announced through ALPN (the only protocol spoken here).
pub(crate) fn tls_config(extra_roots: &[Vec<u8>]) -> Result<Arc<rustls::ClientConfig>, String> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::CertificateDer;

    let mut roots = rustls::RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() };
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
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// A transport error of `kind`.
pub(crate) fn failure(kind: TransportErrorKind, message: impl fmt::Display) -> TransportError {
    TransportError { kind, message: message.to_string() }
}
