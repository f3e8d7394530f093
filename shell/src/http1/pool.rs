//! Idle keep-alive connections, per server, for the next request to it: an agent's steps
//! and a conversation's calls then pay one TCP and TLS handshake, not one per request.
//!
//! A connection comes here only when its response was read to the end and neither side
//! asked to close it (ureq-proto's cleanup state says so); a cancelled, failed or
//! abandoned exchange drops its connection, which closes it. The driver checks one taken
//! out before using it (one the server closed while it sat idle, or that has bytes nobody
//! asked for, is dropped); the server may still close it between that check and the
//! request, and the exchange then sends the request again, once, on a fresh connection.
//! Time is passed in.

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::Target;

/// Idle connections kept per server; more are closed, the oldest first.
const MAX_IDLE_PER_TARGET: usize = 8;
/// Longest a connection stays idle (as hyper's default): past it, a silent middlebox may
/// have dropped it without either end knowing.
const IDLE_LIMIT: Duration = Duration::from_secs(90);

/// The idle connections of one client.
#[derive(Debug)]
pub struct Pool<C> {
    idle: Mutex<BTreeMap<Target, Vec<(C, Instant)>>>,
}

impl<C> Default for Pool<C> {
    fn default() -> Self {
        Self { idle: Mutex::new(BTreeMap::new()) }
    }
}

impl<C> Pool<C> {
    /// The most recently kept connection to `target` idle for less than 90 s at
    /// `now`; older ones are dropped on the way.
    pub fn take(&self, target: &Target, now: Instant) -> Option<C> {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        let queue = idle.get_mut(target)?;
        queue.retain(|(_, since)| now.saturating_duration_since(*since) < IDLE_LIMIT);
        let newest = queue.pop().map(|(connection, _)| connection);
        if queue.is_empty() {
            idle.remove(target);
        }
        newest
    }

    /// Keeps `connection`, idle since `now`, for the next request to `target`; expired
    /// connections to any server go first.
    pub fn put(&self, target: Target, connection: C, now: Instant) {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        idle.retain(|_, queue| {
            queue.retain(|(_, since)| now.saturating_duration_since(*since) < IDLE_LIMIT);
            !queue.is_empty()
        });
        let queue = idle.entry(target).or_default();
        if queue.len() >= MAX_IDLE_PER_TARGET {
            queue.remove(0); // the oldest goes: it is the likeliest to have been closed
        }
        queue.push((connection, now));
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::disallowed_methods)] // a test's own clock

    use super::*;

    fn target(url: &str) -> Target {
        Target::of(&url.parse().unwrap()).unwrap()
    }

    #[test]
    fn the_newest_fresh_connection_to_the_same_server_is_taken() {
        let (pool, now) = (Pool::default(), Instant::now());
        pool.put(target("http://LOCALHOST:8080/a"), 1, now);
        pool.put(target("http://localhost:8080/b"), 2, now);
        assert_eq!(pool.take(&target("https://localhost:8080/"), now), None, "another scheme");
        assert_eq!(pool.take(&target("http://localhost:8080/c"), now), Some(2), "the newest first");
        pool.put(target("http://localhost:8080/"), 3, now);
        assert_eq!(pool.take(&target("http://localhost:8080/"), now + IDLE_LIMIT), None, "both expired");
    }

    #[test]
    fn at_most_a_few_idle_connections_are_kept_per_server() {
        let (pool, now, server) = (Pool::default(), Instant::now(), target("http://127.0.0.1:1/"));
        for n in 0..MAX_IDLE_PER_TARGET + 3 {
            pool.put(server.clone(), n, now);
        }
        let mut kept = Vec::new();
        while let Some(n) = pool.take(&server, now) {
            kept.push(n);
        }
        assert_eq!(kept.len(), MAX_IDLE_PER_TARGET);
        assert!(!kept.contains(&0), "the oldest went");
    }
}
