//! HTTP: the shell's [`Transport`] on the request's own thread, blocking, through
//! omni-shell's HTTP/1.1 exchange ([`omni_shell::http1`], ureq-proto's sans-IO client,
//! written once with omni-smol) over std's sockets and rustls or native-tls
//! ([`connect`]). The exchange takes no decisions of its own: 4xx/5xx and redirects go to
//! the core, which also owns every timeout but connecting's ([`CONNECT_TIMEOUT`]).
//!
//! # Cancellation and keep-alive
//!
//! The exchange blocks inside a poll, which dropping the task cannot interrupt: each
//! request's [`Cancel`] is given to the shell ([`ResponseSink::on_stop`]), which runs it
//! when the request is stopped, on the stopping thread. It shuts down the socket the
//! request is on, so a read blocked on a silent server returns at once, a TLS handshake
//! in progress fails, and the connection is closed; a socket opened after it is shut down
//! as it is watched. (The sink refuses reports from then on, so a server that keeps
//! sending cannot keep the thread reading.) The alternative, a short read timeout polled
//! in a loop, would wake every thread periodically and delay a cancel by up to one period.
//!
//! A connection whose response was read to the end is kept in the shell's pool for the
//! next request to the same server, unless a cancel came first (it may have been shut
//! down): a conversation or an agent's steps pay one handshake, not one per request.

mod connect;

use std::fmt;
use std::future::Future;
use std::net::{Shutdown, TcpStream};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use omni_protocol::dialect::HttpRequest;
use omni_protocol::generate::{TransportError, TransportErrorKind};
use omni_protocol::transport::ProxyRules;
use omni_shell::http1::{failure, Connector, Pool, Target};
use omni_shell::{ResponseSink, Transport};

pub(crate) use connect::CONNECT_TIMEOUT;
use connect::{is_quiet, Stream};

/// The HTTP client of one omni client: cheap to clone, its clones sharing the TLS
/// configuration, the proxies and the idle connections.
#[derive(Clone)]
pub(crate) struct Http(Arc<Connections>);

struct Connections {
    tls: connect::TlsConfig,
    proxies: ProxyRules,
    pool: Pool<Stream>,
}

impl fmt::Debug for Http {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Http").finish_non_exhaustive()
    }
}

impl Http {
    /// Trusts the roots the features choose plus `extra_roots` (PEM) and reaches servers
    /// as `proxies` say; no connection is opened yet.
    pub(crate) fn new(extra_roots: &[Vec<u8>], proxies: ProxyRules) -> Result<Self, String> {
        let tls = connect::tls_config(extra_roots)?;
        Ok(Self(Arc::new(Connections { tls, proxies, pool: Pool::default() })))
    }
}

impl Transport for Http {
    /// The exchange runs inside the future's first poll, on the request's own thread (the
    /// runtime gives every task one).
    fn send(&self, request: HttpRequest, sink: ResponseSink) -> impl Future<Output = ()> + Send + 'static {
        let cancel = Cancel::default();
        let stop = cancel.clone();
        sink.on_stop(move || stop.cancel());
        let connections = self.0.clone();
        async move { omni_shell::http1::send(&Request { connections: &connections, cancel }, request, sink).await }
    }
}

/// One request's way to its server.
struct Request<'a> {
    connections: &'a Connections,
    cancel: Cancel,
}

impl Connector for Request<'_> {
    type Connection = Stream;

    async fn connect(&self, target: &Target, fresh: bool) -> Result<(Stream, bool), TransportError> {
        let pool = &self.connections.pool;
        while let Some(kept) = if fresh { None } else { pool.take(target, Instant::now()) } {
            if is_quiet(kept.tcp()) {
                self.cancel.watch(kept.tcp())?;
                return Ok((kept, true));
            }
        }
        let proxy = self.connections.proxies.for_server(target.is_tls(), target.host());
        Ok((connect::open(&self.connections.tls, target, proxy, &self.cancel).await?, false))
    }

    fn keep(&self, target: Target, connection: Stream) {
        if self.cancel.release() {
            self.connections.pool.put(target, connection, Instant::now());
        }
    }
}

/// What stops a request: the socket it is on now, shut down by [`Cancel::cancel`].
#[derive(Clone, Default)]
pub(crate) struct Cancel(Arc<Mutex<Watch>>);

#[derive(Default)]
struct Watch {
    cancelled: bool,
    /// A handle on the request's socket (the same socket, another descriptor).
    socket: Option<TcpStream>,
}

impl Cancel {
    /// Stops the request promptly: its socket shut down, and any later one as it comes.
    fn cancel(&self) {
        let mut watch = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        watch.cancelled = true;
        if let Some(socket) = watch.socket.take() {
            let _ = socket.shutdown(Shutdown::Both);
        }
    }

    /// Makes `tcp` the socket a cancel shuts down; when the request was cancelled
    /// already, shuts it down now and fails.
    fn watch(&self, tcp: &TcpStream) -> Result<(), TransportError> {
        let mut watch = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let handle = tcp.try_clone();
        if watch.cancelled || handle.is_err() {
            let _ = tcp.shutdown(Shutdown::Both);
            return Err(failure(TransportErrorKind::Other, "the request was stopped"));
        }
        watch.socket = handle.ok();
        Ok(())
    }

    /// Lets go of the socket, whose exchange ended; false when a cancel came first (the
    /// connection may be shut down: it is not kept).
    fn release(&self) -> bool {
        let mut watch = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        watch.socket = None;
        !watch.cancelled
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_root_certificates_are_rejected_when_the_client_is_built() {
        assert!(Http::new(&[b"not a pem".to_vec()], ProxyRules::default()).is_err());
        let garbage = b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n".to_vec();
        assert!(Http::new(&[garbage], ProxyRules::default()).is_err());
        assert!(Http::new(&[], ProxyRules::default()).is_ok());
    }

    #[test]
    fn a_cancel_shuts_the_watched_socket_down_and_any_later_one() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (first, second) = (TcpStream::connect(addr).expect("connect"), TcpStream::connect(addr).expect("connect"));
        let cancel = Cancel::default();
        cancel.watch(&first).expect("watched");
        cancel.cancel();
        assert_eq!(std::io::Read::read(&mut &first, &mut [0; 1]).ok(), Some(0), "the read returns at once");
        assert!(cancel.watch(&second).is_err());
        assert!(!cancel.release(), "a cancelled request's connection is not kept");
        assert!(!is_quiet(&second), "shut down");
    }
}
