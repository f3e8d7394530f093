//! HTTP/1.1 over smol: omni-shell's exchange ([`omni_shell::http1`], ureq-proto's sans-IO
//! client, written once with omni-blocking) over smol's TCP and futures-rustls, the
//! connections opened here ([`connect`]) and kept in the shell's pool. Cancelling is
//! dropping the task, which closes the socket.

mod connect;

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use futures_lite::io::AsyncReadExt;
use omni_protocol::dialect::HttpRequest;
use omni_protocol::generate::TransportError;
use omni_protocol::transport::ProxyRules;
use omni_shell::http1::{Connector, Pool, Target};
use omni_shell::{ResponseSink, Transport};

use connect::{tls_config, Connection};

/// What a client's requests share: the TLS configuration, the proxies, and the idle
/// connections.
pub(crate) struct Connections {
    tls: connect::TlsConfig,
    proxies: ProxyRules,
    pool: Pool<Box<dyn Connection>>,
}

impl Connections {
    /// Trusts the roots the features choose plus `extra_roots` (PEM) and reaches servers
    /// as `proxies` say; no connection is opened yet.
    pub(crate) fn new(extra_roots: &[Vec<u8>], proxies: ProxyRules) -> Result<Arc<Self>, String> {
        Ok(Arc::new(Self { tls: tls_config(extra_roots)?, proxies, pool: Pool::default() }))
    }
}

impl std::fmt::Debug for Connections {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connections").finish_non_exhaustive()
    }
}

impl Connector for Connections {
    type Connection = Box<dyn Connection>;

    async fn connect(&self, target: &Target, fresh: bool) -> Result<(Self::Connection, bool), TransportError> {
        while let Some(mut kept) = if fresh { None } else { self.pool.take(target, Instant::now()) } {
            if is_quiet(&mut *kept).await {
                return Ok((kept, true));
            }
        }
        let proxy = self.proxies.for_server(target.is_tls(), target.host());
        Ok((connect::open(&self.tls, target, proxy).await?, false))
    }

    fn keep(&self, target: Target, connection: Self::Connection) {
        self.pool.put(target, connection, Instant::now());
    }
}

/// True when a read on `connection` would wait: a kept connection the server closed (or
/// that has bytes nobody asked for) reads as ready at once and is dropped.
async fn is_quiet(connection: &mut dyn Connection) -> bool {
    let mut probe = [0u8; 1];
    futures_lite::future::poll_once(connection.read(&mut probe)).await.is_none()
}

/// The shell's [`Transport`] over this HTTP/1.1 client: cheap to clone, its clones sharing
/// the idle connections.
#[derive(Debug, Clone)]
pub struct Http1(pub(crate) Arc<Connections>);

impl Transport for Http1 {
    fn send(&self, request: HttpRequest, sink: ResponseSink) -> impl Future<Output = ()> + Send + 'static {
        let connections = self.0.clone();
        async move { omni_shell::http1::send(&*connections, request, sink).await }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_lite::io::AsyncWriteExt;
    use smol::net::{TcpListener, TcpStream};
    use std::time::Duration;

    #[test]
    fn a_quiet_connection_is_reused_and_a_closed_or_talking_one_is_not() {
        smol::block_on(async {
            let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
            let addr = listener.local_addr().expect("addr");
            let mut pairs = Vec::new();
            for _ in 0..3 {
                let client = TcpStream::connect(addr).await.expect("connect");
                pairs.push((client, listener.accept().await.expect("accept").0));
            }
            let (mut talking, mut closed) = (pairs.pop().expect("pair"), pairs.pop().expect("pair"));
            talking.1.write_all(b"HTTP/1.1 408 Request Timeout\r\n\r\n").await.expect("write");
            drop(closed.1);
            smol::Timer::after(Duration::from_millis(20)).await; // the bytes and the FIN arrive
            assert!(is_quiet(&mut pairs[0].0).await);
            assert!(!is_quiet(&mut closed.0).await);
            assert!(!is_quiet(&mut talking.0).await);
        });
    }
}
