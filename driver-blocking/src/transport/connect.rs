//! Opening a connection on the request's own thread: the name resolved, TCP connected
//! (each bounded by [`CONNECT_TIMEOUT`]: a cancel cannot interrupt either), through the
//! proxy's `CONNECT` tunnel when one applies (the shell's), then TLS for https: rustls
//! (`rustls::StreamOwned`, the shell's configuration) or, with only `native-tls`, the
//! platform's. The socket is handed to the request's [`Cancel`] as soon as it exists, so
//! a cancel shuts it down whatever the exchange is blocked on.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures_lite::io::{AsyncRead, AsyncWrite};
use omni_protocol::generate::{TransportError, TransportErrorKind};
use omni_protocol::transport::Proxy;
use omni_shell::http1::{failure, tunnel, Target};

use super::Cancel;

/// Longest a name resolution, and then a TCP connect, may take (a cancel cannot
/// interrupt either once started).
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// What https connections are made with, as the features choose (rustls wins).
#[cfg(feature = "__rustls")]
pub(super) type TlsConfig = std::sync::Arc<rustls::ClientConfig>;
/// What https connections are made with, as the features choose (rustls wins).
#[cfg(all(feature = "native-tls", not(feature = "__rustls")))]
pub(super) type TlsConfig = native_tls::TlsConnector;
/// What https connections are made with: nothing in a build without TLS.
#[cfg(not(any(feature = "__rustls", feature = "native-tls")))]
pub(super) type TlsConfig = ();

/// A connection to a server, plain or TLS, read and written blocking. Its async face
/// never returns pending: the shell's exchange runs on the request's own thread.
pub(crate) enum Stream {
    Plain(TcpStream),
    #[cfg(feature = "__rustls")]
    Rustls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
    #[cfg(all(feature = "native-tls", not(feature = "__rustls")))]
    Native(Box<native_tls::TlsStream<TcpStream>>),
}

impl Stream {
    /// The socket under it.
    pub(super) fn tcp(&self) -> &TcpStream {
        match self {
            Self::Plain(tcp) => tcp,
            #[cfg(feature = "__rustls")]
            Self::Rustls(tls) => &tls.sock,
            #[cfg(all(feature = "native-tls", not(feature = "__rustls")))]
            Self::Native(tls) => tls.get_ref(),
        }
    }

    fn io(&mut self) -> &mut dyn ReadWrite {
        match self {
            Self::Plain(tcp) => tcp,
            #[cfg(feature = "__rustls")]
            Self::Rustls(tls) => &mut **tls,
            #[cfg(all(feature = "native-tls", not(feature = "__rustls")))]
            Self::Native(tls) => &mut **tls,
        }
    }
}

trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

/// Runs `op` until it is not interrupted by a signal.
fn retrying<T>(mut op: impl FnMut() -> io::Result<T>) -> Poll<io::Result<T>> {
    loop {
        match op() {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            result => return Poll::Ready(result),
        }
    }
}

impl AsyncRead for Stream {
    fn poll_read(self: Pin<&mut Self>, _: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        let io = self.get_mut().io();
        retrying(|| io.read(buf))
    }
}

impl AsyncWrite for Stream {
    fn poll_write(self: Pin<&mut Self>, _: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let io = self.get_mut().io();
        retrying(|| io.write(buf))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        let io = self.get_mut().io();
        retrying(|| io.flush())
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_flush(cx)
    }
}

/// True when a read on `tcp` would wait: a kept connection the server closed (or that
/// has bytes nobody asked for) reads as ready at once and is not used.
pub(super) fn is_quiet(tcp: &TcpStream) -> bool {
    if tcp.set_nonblocking(true).is_err() {
        return false;
    }
    let quiet = matches!(tcp.peek(&mut [0u8; 1]), Err(e) if e.kind() == io::ErrorKind::WouldBlock);
    tcp.set_nonblocking(false).is_ok() && quiet
}

/// Connects to `target`, through `proxy`'s tunnel when given: DNS, TCP and tunnel
/// failures are `Connect`, handshake failures `Tls`.
pub(super) async fn open(
    tls: &TlsConfig,
    target: &Target,
    proxy: Option<&Proxy>,
    cancel: &Cancel,
) -> Result<Stream, TransportError> {
    let (host, port) = proxy.map_or((target.host(), target.port()), |p| (p.host(), p.port()));
    let what = if proxy.is_some() { "proxy " } else { "" };
    let error = |e: io::Error| failure(TransportErrorKind::Connect, format_args!("{what}{host}:{port}: {e}"));
    let tcp = connect(&resolve(host, port).map_err(error)?).map_err(error)?;
    cancel.watch(&tcp)?;
    // Streamed requests are small writes; do not let Nagle hold them back.
    let _ = tcp.set_nodelay(true);
    let mut stream = Stream::Plain(tcp);
    if let Some(proxy) = proxy {
        tunnel(&mut stream, proxy, target).await?;
    }
    match stream {
        Stream::Plain(tcp) if target.is_tls() => handshake(tls, target, tcp),
        stream => Ok(stream),
    }
}

/// The addresses of `host`; an address is taken as is, a name looked up on a thread of
/// its own so that the lookup is bounded by [`CONNECT_TIMEOUT`] (the system's resolver
/// cannot be interrupted).
fn resolve(host: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
    if let Ok(ip) = host.parse::<std::net::IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, port)]);
    }
    let (found, lookup) = std::sync::mpsc::sync_channel(1);
    let name = host.to_owned();
    std::thread::Builder::new().name("omni-resolve".into()).spawn(move || {
        let _ = found.send((name.as_str(), port).to_socket_addrs().map(Iterator::collect));
    })?;
    lookup.recv_timeout(CONNECT_TIMEOUT).unwrap_or_else(|_| Err(io::ErrorKind::TimedOut.into()))
}

/// The first of `addresses` that answers, all of them within [`CONNECT_TIMEOUT`].
fn connect(addresses: &[SocketAddr]) -> io::Result<TcpStream> {
    let deadline = Instant::now() + CONNECT_TIMEOUT;
    let mut last = io::Error::new(io::ErrorKind::NotFound, "the name has no address");
    for address in addresses {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        match TcpStream::connect_timeout(address, left) {
            Ok(tcp) => return Ok(tcp),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// The TLS handshake over `tcp`, done here so that its failures are `Tls`.
#[cfg(feature = "__rustls")]
fn handshake(tls: &TlsConfig, target: &Target, mut tcp: TcpStream) -> Result<Stream, TransportError> {
    let failed = |e: &dyn std::fmt::Display| {
        failure(TransportErrorKind::Tls, format_args!("TLS handshake with {}: {e}", target.host()))
    };
    let name = rustls::pki_types::ServerName::try_from(target.host().to_owned()).map_err(|e| failed(&e))?;
    let mut connection = rustls::ClientConnection::new(tls.clone(), name).map_err(|e| failed(&e))?;
    while connection.is_handshaking() {
        connection.complete_io(&mut tcp).map_err(|e| {
            // rustls reports its own errors as InvalidData; anything else broke the socket.
            let from_tls = e.kind() == io::ErrorKind::InvalidData;
            let kind = if from_tls { TransportErrorKind::Tls } else { TransportErrorKind::Connect };
            failure(kind, format_args!("TLS handshake with {}: {e}", target.host()))
        })?;
    }
    Ok(Stream::Rustls(Box::new(rustls::StreamOwned::new(connection, tcp))))
}

/// The TLS handshake over `tcp`, done here so that its failures are `Tls`.
#[cfg(all(feature = "native-tls", not(feature = "__rustls")))]
fn handshake(tls: &TlsConfig, target: &Target, tcp: TcpStream) -> Result<Stream, TransportError> {
    let stream = tls
        .connect(target.host(), tcp)
        .map_err(|e| failure(TransportErrorKind::Tls, format_args!("TLS handshake with {}: {e}", target.host())))?;
    Ok(Stream::Native(Box::new(stream)))
}

/// No TLS in this build: an https request fails.
#[cfg(not(any(feature = "__rustls", feature = "native-tls")))]
fn handshake(_: &TlsConfig, _: &Target, _: TcpStream) -> Result<Stream, TransportError> {
    Err(failure(TransportErrorKind::Tls, NO_TLS))
}

/// Why an https request cannot be sent by a build without TLS.
#[cfg(not(any(feature = "__rustls", feature = "native-tls")))]
const NO_TLS: &str = "this build of omni-blocking has no TLS (plain http only): enable one of its features \
                      `rustls-webpki-roots` (the default), `rustls-native-roots` or `native-tls` for https";

/// The rustls configuration omni-shell sets up for every driver, HTTP/1.1 announced
/// through ALPN (the only protocol spoken here).
#[cfg(feature = "__rustls")]
pub(super) fn tls_config(extra_roots: &[Vec<u8>]) -> Result<TlsConfig, String> {
    let mut config = omni_shell::tls::rustls_config(extra_roots)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(std::sync::Arc::new(config))
}

/// The platform's TLS with its roots; extra certificates, when given, replace them.
#[cfg(all(feature = "native-tls", not(feature = "__rustls")))]
pub(super) fn tls_config(extra_roots: &[Vec<u8>]) -> Result<TlsConfig, String> {
    const END: &str = "-----END CERTIFICATE-----";
    let mut builder = native_tls::TlsConnector::builder();
    for pem in extra_roots {
        let text = String::from_utf8_lossy(pem);
        let blocks: Vec<&str> = text.split_inclusive(END).filter(|block| block.ends_with(END)).collect();
        if blocks.is_empty() {
            return Err("no PEM certificate found in a root certificate".into());
        }
        for block in blocks {
            let cert = native_tls::Certificate::from_pem(block.as_bytes())
                .map_err(|e| format!("invalid PEM certificate: {e}"))?;
            builder.add_root_certificate(cert).disable_built_in_roots(true);
        }
    }
    builder.build().map_err(|e| e.to_string())
}

/// No TLS: plain http only, and no extra roots.
#[cfg(not(any(feature = "__rustls", feature = "native-tls")))]
pub(super) fn tls_config(extra_roots: &[Vec<u8>]) -> Result<TlsConfig, String> {
    if extra_roots.is_empty() {
        Ok(())
    } else {
        Err(NO_TLS.into())
    }
}
