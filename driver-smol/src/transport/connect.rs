//! Opening a connection: TCP through smol (DNS on smol's blocking
//! pool), through a `CONNECT` tunnel when a proxy applies, and TLS through futures-rustls
//! for https.

#[cfg(feature = "__rustls")]
use std::sync::Arc;

use futures_lite::io::{AsyncRead, AsyncWrite};
#[cfg(feature = "__rustls")]
use futures_rustls::TlsConnector;
use omni_protocol::generate::{TransportError, TransportErrorKind};
use omni_protocol::transport::Proxy;
use omni_shell::http1::{failure, tunnel, Target};
#[cfg(feature = "__rustls")]
use rustls::pki_types::ServerName;
use smol::net::TcpStream;

/// What https connections are made with: the rustls configuration, or nothing in a build
/// without TLS.
#[cfg(feature = "__rustls")]
pub(crate) type TlsConfig = Arc<rustls::ClientConfig>;
/// What https connections are made with: the rustls configuration, or nothing in a build
/// without TLS.
#[cfg(not(feature = "__rustls"))]
pub(crate) type TlsConfig = ();

/// Why an https request cannot be sent by a build without TLS.
#[cfg(not(feature = "__rustls"))]
const NO_TLS: &str = "this build of omni-smol has no TLS (plain http only): enable its feature \
                      `rustls-webpki-roots` (the default) or `rustls-native-roots` for https";

/// A byte stream to the server, plain or TLS.
pub(crate) trait Connection: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Connection for T {}

/// Connects to `target`, through `proxy`'s tunnel when given: DNS, TCP and tunnel
/// failures are `Connect`, handshake failures `Tls`.
pub(crate) async fn open(
    tls: &TlsConfig,
    target: &Target,
    proxy: Option<&Proxy>,
) -> Result<Box<dyn Connection>, TransportError> {
    let (host, port) = proxy.map_or((target.host(), target.port()), |p| (p.host(), p.port()));
    let mut tcp = TcpStream::connect((host, port)).await.map_err(|e| {
        let what = if proxy.is_some() { "proxy " } else { "" };
        failure(TransportErrorKind::Connect, format_args!("{what}{host}:{port}: {e}"))
    })?;
    // Streamed requests are small writes; do not let Nagle hold them back.
    let _ = tcp.set_nodelay(true);
    if let Some(proxy) = proxy {
        tunnel(&mut tcp, proxy, target).await?;
    }
    if !target.is_tls() {
        return Ok(Box::new(tcp));
    }
    #[cfg(not(feature = "__rustls"))]
    {
        let () = tls;
        Err(failure(TransportErrorKind::Tls, NO_TLS))
    }
    #[cfg(feature = "__rustls")]
    {
        handshake(tls, target, tcp).await
    }
}

/// The TLS handshake over `tcp`.
#[cfg(feature = "__rustls")]
async fn handshake(tls: &TlsConfig, target: &Target, tcp: TcpStream) -> Result<Box<dyn Connection>, TransportError> {
    let name = ServerName::try_from(target.host().to_owned())
        .map_err(|e| failure(TransportErrorKind::Tls, format_args!("invalid server name {}: {e}", target.host())))?;
    let stream = TlsConnector::from(tls.clone()).connect(name, tcp).await.map_err(|e| {
        // futures-rustls reports rustls errors as InvalidData; anything else broke the socket.
        let from_tls = e.kind() == std::io::ErrorKind::InvalidData
            || e.get_ref().is_some_and(|inner| inner.downcast_ref::<rustls::Error>().is_some());
        let kind = if from_tls { TransportErrorKind::Tls } else { TransportErrorKind::Connect };
        failure(kind, format_args!("TLS handshake with {}: {e}", target.host()))
    })?;
    Ok(Box::new(stream))
}

/// No TLS in this build: extra roots cannot be used, and https requests fail.
#[cfg(not(feature = "__rustls"))]
pub(crate) fn tls_config(extra_roots: &[Vec<u8>]) -> Result<TlsConfig, String> {
    if extra_roots.is_empty() {
        Ok(())
    } else {
        Err(NO_TLS.into())
    }
}

/// The rustls configuration omni-shell sets up for every driver (the ring provider, the
/// roots the features choose, the extra PEM certificates), with HTTP/1.1 announced
/// through ALPN (the only protocol spoken here).
#[cfg(feature = "__rustls")]
pub(crate) fn tls_config(extra_roots: &[Vec<u8>]) -> Result<TlsConfig, String> {
    let mut config = omni_shell::tls::rustls_config(extra_roots)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}
