//! HTTP/1.1 written once for the drivers that speak it themselves (omni-smol over smol's
//! sockets, omni-blocking over std's): one exchange per request on ureq-proto's sans-IO
//! client, over any connection that reads and writes (`AsyncRead + AsyncWrite`; a
//! blocking socket is one whose polls never return pending, so omni-blocking runs the
//! same walk on its request's thread).
//!
//! ```text
//!   connect (a kept connection, or a fresh one)          the driver's [`Connector`]
//!     └► request head (the key spliced in) + body        exchange.rs
//!          └► response head ─► sink.head
//!               └► body chunks ─► sink.body … ─► keep the connection? ─► sink.end
//!   a kept connection the server had closed: once more, on a fresh one
//! ```
//!
//! A driver keeps what its runtime needs: opening a connection (TCP, the proxy's
//! `CONNECT` tunnel through [`tunnel`], TLS), checking a kept one is still quiet, and how
//! a request is stopped (omni-smol drops the future; omni-blocking shuts the socket
//! down, see [`ResponseSink::on_stop`](crate::ResponseSink::on_stop)).
//!
//! Failure kinds, by phase: before a response head, `Connect` (the simulation's view of a
//! server that drops the connection); the body cut, `Reset`; bytes that are not HTTP,
//! `Other`. TLS handshakes and tunnels are the driver's and report `Tls`, `Connect` or
//! `ProxyAuth`.

mod exchange;
mod pool;
mod tunnel;

use std::fmt;
use std::future::Future;

use futures_lite::io::{AsyncRead, AsyncWrite};
use omni_protocol::dialect::HttpRequest;
use omni_protocol::generate::{TransportError, TransportErrorKind};
use ureq_proto::http::Uri;

use crate::ResponseSink;

pub use pool::Pool;
pub use tunnel::tunnel;

/// What the exchange needs from a driver: a connection for a request, and a place for
/// it once its response was read to the end.
pub trait Connector: Send + Sync {
    /// A byte stream to the server, plain or TLS.
    type Connection: AsyncRead + AsyncWrite + Unpin + Send;

    /// A connection to `target`: a kept one when `fresh` is false and one is there (then
    /// `true` comes with it), else a new one.
    fn connect(
        &self,
        target: &Target,
        fresh: bool,
    ) -> impl Future<Output = Result<(Self::Connection, bool), TransportError>> + Send;

    /// The exchange on `connection` ended cleanly and neither side asked to close it: it
    /// may carry the next request to `target`.
    fn keep(&self, target: Target, connection: Self::Connection);
}

/// Sends `request` through `connector` and streams its response into `sink`.
pub async fn send(connector: &impl Connector, request: HttpRequest, sink: ResponseSink) {
    match exchange::exchange(connector, request, &sink).await {
        Ok(()) => sink.end().await,
        Err(error) => sink.fail(error).await,
    }
}

/// Where a request goes (and which kept connections may carry it).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Target {
    host: String,
    port: u16,
    tls: bool,
}

impl Target {
    /// The target of an absolute `http` or `https` URL.
    pub fn of(uri: &Uri) -> Result<Self, TransportError> {
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

    /// Whether requests to it go over TLS.
    pub fn is_tls(&self) -> bool {
        self.tls
    }

    /// Its host (an IPv6 address without brackets).
    pub fn host(&self) -> &str {
        &self.host
    }

    /// Its port.
    pub fn port(&self) -> u16 {
        self.port
    }
}

/// A transport error of `kind`.
pub fn failure(kind: TransportErrorKind, message: impl fmt::Display) -> TransportError {
    TransportError { kind, message: message.to_string() }
}
