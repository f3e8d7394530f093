//! Idle keep-alive connections, per server, for the next request to it: an agent's steps
//! and a conversation's calls then pay one TCP and TLS handshake, not one per request.
//!
//! A connection goes back only when its response was read to the end and neither side
//! asked to close it (ureq-proto's cleanup state says so); a cancelled, failed or
//! abandoned exchange drops its connection, which closes it. A connection taken out is
//! checked first: one the server closed while it sat idle (or that has bytes nobody
//! asked for) reads as ready at once and is dropped; a quiet one reads as pending and is
//! used. The server may still close it between that check and the request: the exchange
//! then sends the request again, once, on a fresh connection.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use futures_lite::io::AsyncReadExt;

use super::connect::{Connection, Target};

/// Idle connections kept per server; more are closed.
const MAX_IDLE_PER_TARGET: usize = 8;
/// Longest a connection stays idle in the pool (as hyper's default): past it, a silent
/// middlebox may have dropped it without either end knowing.
const IDLE_LIMIT: Duration = Duration::from_secs(90);

/// The idle connections of one client.
#[derive(Default)]
pub(crate) struct Pool {
    idle: Mutex<HashMap<Target, Vec<Idle>>>,
}

struct Idle {
    connection: Box<dyn Connection>,
    since: Instant,
}

impl Pool {
    /// An idle connection to `target` that still looks open, the most recently used first.
    pub(crate) async fn checkout(&self, target: &Target) -> Option<Box<dyn Connection>> {
        loop {
            let mut idle = self.take(target)?;
            if is_quiet(&mut *idle).await {
                return Some(idle);
            }
        }
    }

    /// Keeps `connection`, whose exchange ended cleanly, for the next request to `target`.
    pub(crate) fn put(&self, target: Target, connection: Box<dyn Connection>) {
        let Ok(mut idle) = self.idle.lock() else { return };
        let queue = idle.entry(target).or_default();
        if queue.len() >= MAX_IDLE_PER_TARGET {
            queue.remove(0); // the oldest goes: it is the likeliest to have been closed
        }
        queue.push(Idle { connection, since: Instant::now() });
    }

    /// The newest idle connection to `target` younger than [`IDLE_LIMIT`]; older ones are
    /// dropped on the way.
    fn take(&self, target: &Target) -> Option<Box<dyn Connection>> {
        let mut idle = self.idle.lock().ok()?;
        let queue = idle.get_mut(target)?;
        queue.retain(|entry| entry.since.elapsed() < IDLE_LIMIT);
        let newest = queue.pop().map(|entry| entry.connection);
        if queue.is_empty() {
            idle.remove(target);
        }
        newest
    }

    /// How many idle connections there are to `target`.
    #[cfg(test)]
    fn idle_count(&self, target: &Target) -> usize {
        self.idle.lock().map(|idle| idle.get(target).map_or(0, Vec::len)).unwrap_or(0)
    }
}

/// True when a read on `connection` would wait: no end of stream, no error, no stray bytes.
async fn is_quiet(connection: &mut dyn Connection) -> bool {
    let mut probe = [0u8; 1];
    futures_lite::future::poll_once(connection.read(&mut probe)).await.is_none()
}

#[cfg(test)]
mod tests {
    use super::*;
    use smol::net::{TcpListener, TcpStream};

    async fn pair(listener: &TcpListener) -> (TcpStream, TcpStream) {
        let client = TcpStream::connect(listener.local_addr().expect("addr")).await.expect("connect");
        let (server, _) = listener.accept().await.expect("accept");
        (client, server)
    }

    fn target(listener: &TcpListener) -> Target {
        let addr = listener.local_addr().expect("addr");
        Target::of(&format!("http://{addr}/").parse().expect("uri")).expect("target")
    }

    #[test]
    fn a_quiet_connection_is_reused_and_a_closed_one_is_dropped() {
        smol::block_on(async {
            let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
            let target = target(&listener);
            let pool = Pool::default();
            let (open, _open_server) = pair(&listener).await;
            let (closed, closed_server) = pair(&listener).await;
            pool.put(target.clone(), Box::new(open));
            pool.put(target.clone(), Box::new(closed));
            drop(closed_server);
            smol::Timer::after(Duration::from_millis(20)).await; // the FIN arrives
            assert!(pool.checkout(&target).await.is_some(), "the quiet one is handed out");
            assert_eq!(pool.idle_count(&target), 0, "the closed one was dropped on the way");
            assert!(pool.checkout(&target).await.is_none());
        });
    }

    #[test]
    fn a_connection_with_stray_bytes_is_not_reused() {
        smol::block_on(async {
            use futures_lite::io::AsyncWriteExt;
            let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
            let target = target(&listener);
            let pool = Pool::default();
            let (client, mut server) = pair(&listener).await;
            pool.put(target.clone(), Box::new(client));
            server.write_all(b"HTTP/1.1 408 Request Timeout\r\n\r\n").await.expect("write");
            smol::Timer::after(Duration::from_millis(20)).await;
            assert!(pool.checkout(&target).await.is_none());
        });
    }

    #[test]
    fn at_most_a_few_idle_connections_are_kept_per_server() {
        smol::block_on(async {
            let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
            let target = target(&listener);
            let pool = Pool::default();
            let mut servers = Vec::new();
            for _ in 0..MAX_IDLE_PER_TARGET + 3 {
                let (client, server) = pair(&listener).await;
                servers.push(server);
                pool.put(target.clone(), Box::new(client));
            }
            assert_eq!(pool.idle_count(&target), MAX_IDLE_PER_TARGET);
        });
    }
}
