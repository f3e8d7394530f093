//! Opening a connection: the URL's target, TCP through smol (DNS on smol's blocking
//! pool), through a `CONNECT` tunnel when a proxy applies, and TLS through futures-rustls
//! for https.

use std::fmt;
#[cfg(feature = "__rustls")]
use std::sync::Arc;

use futures_lite::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
#[cfg(feature = "__rustls")]
use futures_rustls::TlsConnector;
use omni_protocol::generate::{TransportError, TransportErrorKind};
use omni_protocol::transport::Proxy;
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
    pub(crate) fn of(uri: &Uri) -> Result<Self, TransportError> {
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
        Ok(Self { host, port, tls })
    }
}

impl Target {
    /// Whether requests to it go over TLS.
    pub(crate) fn is_tls(&self) -> bool {
        self.tls
    }

    /// Its host.
    pub(crate) fn host(&self) -> &str {
        &self.host
    }
}

/// Largest response head a proxy may answer `CONNECT` with.
const MAX_PROXY_HEAD: usize = 64 * 1024;

/// Connects to `target`, through `proxy`'s tunnel when given: DNS, TCP and tunnel
/// failures are `Connect`, handshake failures `Tls`.
pub(crate) async fn open(
    tls: &TlsConfig,
    target: &Target,
    proxy: Option<&Proxy>,
) -> Result<Box<dyn Connection>, TransportError> {
    let (host, port) = proxy.map_or((target.host.as_str(), target.port), |p| (p.host(), p.port()));
    let mut tcp = TcpStream::connect((host, port)).await.map_err(|e| {
        let what = if proxy.is_some() { "proxy " } else { "" };
        failure(TransportErrorKind::Connect, format_args!("{what}{host}:{port}: {e}"))
    })?;
    // Streamed requests are small writes; do not let Nagle hold them back.
    let _ = tcp.set_nodelay(true);
    if let Some(proxy) = proxy {
        tunnel(&mut tcp, proxy, target).await?;
    }
    if !target.tls {
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

/// Asks `proxy` (connected on `tcp`) for a tunnel to `target` and reads its answer:
/// a 2xx opens the tunnel; anything else (407 wants credentials, 403 refuses the host) is
/// a `Connect` failure naming the status. The credentials go in the request only.
async fn tunnel(tcp: &mut TcpStream, proxy: &Proxy, target: &Target) -> Result<(), TransportError> {
    let io = |e: std::io::Error| failure(TransportErrorKind::Connect, format_args!("proxy tunnel: {e}"));
    let authority = if target.host.contains(':') {
        format!("[{}]:{}", target.host, target.port)
    } else {
        format!("{}:{}", target.host, target.port)
    };
    let mut request = format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n");
    if let Some(credentials) = proxy.authorization() {
        request.push_str("Proxy-Authorization: ");
        request.push_str(credentials.expose());
        request.push_str("\r\n");
    }
    request.push_str("\r\n");
    tcp.write_all(request.as_bytes()).await.map_err(io)?;
    // Byte by byte up to the blank line: nothing of the tunnelled stream may be read here.
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if head.len() > MAX_PROXY_HEAD {
            return Err(failure(TransportErrorKind::Connect, "proxy tunnel: response head too large"));
        }
        match tcp.read(&mut byte).await.map_err(io)? {
            0 => return Err(failure(TransportErrorKind::Connect, "proxy tunnel: the proxy closed the connection")),
            _ => head.push(byte[0]),
        }
    }
    let status_line = String::from_utf8_lossy(head.split(|&b| b == b'\r').next().unwrap_or_default()).into_owned();
    let status = status_line.split_whitespace().nth(1).and_then(|s| s.parse::<u16>().ok());
    match status {
        Some(200..=299) => Ok(()),
        Some(407) => Err(failure(
            TransportErrorKind::ProxyAuth,
            format_args!("the proxy wants other credentials for the tunnel to {authority}: HTTP 407"),
        )),
        Some(code) => Err(failure(
            TransportErrorKind::Connect,
            format_args!("the proxy refused the tunnel to {authority}: HTTP {code}"),
        )),
        None => {
            Err(failure(TransportErrorKind::Connect, format_args!("proxy tunnel: not an HTTP answer: {status_line:?}")))
        }
    }
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

/// A transport error of `kind`.
pub(crate) fn failure(kind: TransportErrorKind, message: impl fmt::Display) -> TransportError {
    TransportError { kind, message: message.to_string() }
}
