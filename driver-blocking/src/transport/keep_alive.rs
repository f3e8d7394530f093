//! Keep-alive without losing per-request cancellation: every request still runs on a
//! ureq agent of its own (so cancelling it shuts down only its connection), but an
//! agent whose response was read to the end goes back here, its connection idle in
//! ureq's pool, and the next request to the same server with the same key takes it.
//!
//! An agent's connection is only ever used by one request at a time. ureq checks an idle
//! connection before reusing it (one the server closed is dropped and a new one made)
//! and returns a connection to the agent's pool only when the response was complete and
//! neither side asked to close it. The key's header lines are part of what an agent is
//! kept under, since the connector that splices them in belongs to the agent.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ureq::http::Uri;

/// Idle agents (each with its one idle connection) kept per server and key.
const MAX_IDLE_PER_SERVER: usize = 8;
/// Idle agents kept in all: per-call keys make a server and key pair per tenant, and each
/// idle agent holds a socket.
const MAX_IDLE_TOTAL: usize = 32;
/// Longest an agent stays idle here (as hyper's default pool timeout); ureq is told the
/// same for its connection.
pub(crate) const IDLE_LIMIT: Duration = Duration::from_secs(90);

/// What an idle agent can serve: a scheme and authority, and the sensitive header lines.
/// Not `Debug`: it holds the key.
#[derive(Clone, PartialEq, Eq, Hash)]
pub(crate) struct Server {
    origin: String,
    secret: Vec<u8>,
}

impl Server {
    /// The server of `url` for a request carrying `secret`; `None` when the URL has no
    /// scheme or authority (such a request fails in ureq anyway).
    pub(crate) fn of(url: &str, secret: &[u8]) -> Option<Self> {
        let uri: Uri = url.parse().ok()?;
        let origin = format!("{}://{}", uri.scheme_str()?, uri.authority()?).to_ascii_lowercase();
        Some(Self { origin, secret: secret.to_vec() })
    }
}

/// The idle agents of one client.
#[derive(Default)]
pub(crate) struct IdleAgents {
    idle: Mutex<HashMap<Server, Vec<(ureq::Agent, Instant)>>>,
}

impl IdleAgents {
    /// The most recently used idle agent for `server` younger than [`IDLE_LIMIT`].
    pub(crate) fn take(&self, server: &Server) -> Option<ureq::Agent> {
        let mut idle = self.idle.lock().ok()?;
        let queue = idle.get_mut(server)?;
        queue.retain(|(_, since)| since.elapsed() < IDLE_LIMIT);
        let newest = queue.pop().map(|(agent, _)| agent);
        if queue.is_empty() {
            idle.remove(server);
        }
        newest
    }

    /// Keeps `agent`, whose request ended cleanly, for the next request to `server`.
    /// Expired agents go first; past the limits the oldest go (they are the likeliest to
    /// have been closed by their server).
    pub(crate) fn put(&self, server: Server, agent: ureq::Agent) {
        let Ok(mut idle) = self.idle.lock() else { return };
        idle.retain(|_, queue| {
            queue.retain(|(_, since)| since.elapsed() < IDLE_LIMIT);
            !queue.is_empty()
        });
        let queue = idle.entry(server).or_default();
        if queue.len() >= MAX_IDLE_PER_SERVER {
            queue.remove(0);
        }
        queue.push((agent, Instant::now()));
        while idle.values().map(Vec::len).sum::<usize>() > MAX_IDLE_TOTAL {
            let oldest = idle
                .iter()
                .filter_map(|(server, queue)| Some((queue.first()?.1, server.clone())))
                .min_by_key(|(since, _)| *since);
            let Some((_, server)) = oldest else { break };
            if let Some(queue) = idle.get_mut(&server) {
                queue.remove(0);
                if queue.is_empty() {
                    idle.remove(&server);
                }
            }
        }
    }

    #[cfg(test)]
    fn count(&self, server: &Server) -> usize {
        self.idle.lock().map(|idle| idle.get(server).map_or(0, Vec::len)).unwrap_or(0)
    }

    #[cfg(test)]
    fn total(&self) -> usize {
        self.idle.lock().map(|idle| idle.values().map(Vec::len).sum()).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agents_are_kept_per_origin_and_key() {
        let idle = IdleAgents::default();
        let a = Server::of("https://API.example.com/v1/messages", b"x-api-key: 1\r\n").expect("server");
        let same = Server::of("https://api.example.com/v1/other", b"x-api-key: 1\r\n").expect("server");
        let other_key = Server::of("https://api.example.com/v1/messages", b"x-api-key: 2\r\n").expect("server");
        let other_port = Server::of("https://api.example.com:8443/v1", b"x-api-key: 1\r\n").expect("server");
        idle.put(a.clone(), ureq::Agent::new_with_defaults());
        assert!(idle.take(&other_key).is_none(), "never with another key");
        assert!(idle.take(&other_port).is_none());
        assert!(idle.take(&same).is_some(), "host names are case-insensitive; the path does not matter");
        assert!(idle.take(&a).is_none(), "an agent serves one request at a time");
        assert!(Server::of("not a url", b"").is_none());
    }

    #[test]
    fn at_most_a_few_agents_are_kept_per_server() {
        let idle = IdleAgents::default();
        let server = Server::of("http://127.0.0.1:1/", b"").expect("server");
        for _ in 0..MAX_IDLE_PER_SERVER + 2 {
            idle.put(server.clone(), ureq::Agent::new_with_defaults());
        }
        assert_eq!(idle.count(&server), MAX_IDLE_PER_SERVER);
    }

    #[test]
    fn at_most_a_few_dozen_agents_are_kept_in_all_the_oldest_going_first() {
        let idle = IdleAgents::default();
        let tenant = |n: usize| Server::of("https://api.example.com/v1", format!("x-api-key: {n}\r\n").as_bytes());
        for n in 0..MAX_IDLE_TOTAL + 5 {
            idle.put(tenant(n).expect("server"), ureq::Agent::new_with_defaults());
        }
        assert_eq!(idle.total(), MAX_IDLE_TOTAL);
        assert_eq!(idle.count(&tenant(0).expect("server")), 0, "the oldest went");
        assert_eq!(idle.count(&tenant(MAX_IDLE_TOTAL + 4).expect("server")), 1, "the newest stays");
    }
}
