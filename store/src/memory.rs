//! A store in memory: sessions that need not outlive the process (tests, a scratch
//! conversation), and the reference the suite's checks were first run against. Clones
//! share one store, as two handles on one folder or database file do.
//!
//! Ownership is kept with each session: the owner's fencing token, and with
//! [`MemoryStore::with_lease`] when its lease lapses (the store's own clock), so that
//! the suite's lease checks run against a store with leases, the shape a store shared by
//! several machines has.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use omni_protocol::session::{assemble, check_append};
use omni_protocol::session::{Node, Tree};

use crate::{Claim, Loaded, SessionId, SessionInfo, SessionList, SessionState, Store, StoreError, StoreErrorKind};

/// Sessions kept in memory (see the module's doc).
#[derive(Debug, Clone, Default)]
pub struct MemoryStore {
    sessions: Arc<Mutex<Sessions>>,
    lease: Option<Duration>,
}

#[derive(Debug, Default)]
struct Sessions {
    by_id: BTreeMap<SessionId, Kept>,
    /// Counts writes: orders sessions written in the same millisecond.
    writes: u64,
    /// The last fencing token handed out, for any session: a session deleted and made
    /// again never gives an old claim's token a second life.
    tokens: u64,
}

#[derive(Debug)]
struct Kept {
    state: SessionState,
    nodes: Vec<Node>,
    created_ms: u64,
    updated_ms: u64,
    last_write: u64,
    owner: Option<Owner>,
}

#[derive(Debug, Clone, Copy)]
struct Owner {
    token: u64,
    /// When a lease lapses; `None` until released.
    until: Option<Instant>,
}

impl Owner {
    fn holds(&self, now: Instant) -> bool {
        self.until.is_none_or(|until| now < until)
    }
}

impl MemoryStore {
    /// An empty store; ownership lasts until released.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty store whose ownership is a lease of `lease`, renewed by [`Store::renew`]:
    /// an owner that stops renewing loses its session to the next claim.
    pub fn with_lease(lease: Duration) -> Self {
        Self { lease: Some(lease), ..Self::default() }
    }

    fn sessions(&self) -> MutexGuard<'_, Sessions> {
        self.sessions.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn owner(&self, token: u64) -> Owner {
        Owner { token, until: self.lease.map(|lease| Instant::now() + lease) }
    }

    /// Applies `write` to the session `claim` owns, stamping it written.
    fn write(&self, claim: &Claim, write: impl FnOnce(&mut Kept) -> Result<(), StoreError>) -> Result<(), StoreError> {
        let mut sessions = self.sessions();
        let id = claim.session();
        let kept = sessions.by_id.get_mut(id).ok_or_else(|| not_found(id))?;
        owned(kept, claim)?;
        write(kept)?;
        sessions.writes += 1;
        let order = sessions.writes;
        let kept = sessions.by_id.get_mut(id).ok_or_else(|| not_found(id))?;
        kept.updated_ms = now_ms().max(kept.updated_ms);
        kept.last_write = order;
        Ok(())
    }
}

/// Whether `claim` owns `kept` now.
fn owned(kept: &Kept, claim: &Claim) -> Result<(), StoreError> {
    match kept.owner {
        Some(owner) if owner.token == claim.token() && owner.holds(Instant::now()) => Ok(()),
        _ => Err(StoreError::new(
            StoreErrorKind::NotOwner,
            claim.session().as_str(),
            format!("claim {} does not own the session", claim.token()),
        )),
    }
}

fn not_found(id: &SessionId) -> StoreError {
    StoreError::new(StoreErrorKind::NotFound, id.as_str(), "no such session")
}

fn owned_elsewhere(id: &SessionId) -> StoreError {
    StoreError::new(StoreErrorKind::OwnedElsewhere, id.as_str(), "another owner holds the session")
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl Store for MemoryStore {
    fn create(&self, id: &SessionId, state: &SessionState) -> Result<Claim, StoreError> {
        let mut sessions = self.sessions();
        if sessions.by_id.contains_key(id) {
            return Err(StoreError::new(StoreErrorKind::Exists, id.as_str(), "a session with this id exists"));
        }
        sessions.writes += 1;
        sessions.tokens += 1;
        let (now, last_write, token) = (now_ms(), sessions.writes, sessions.tokens);
        let owner = Some(self.owner(token));
        let kept =
            Kept { state: state.clone(), nodes: Vec::new(), created_ms: now, updated_ms: now, last_write, owner };
        sessions.by_id.insert(id.clone(), kept);
        Ok(Claim::new(id.clone(), token, self.lease))
    }

    fn claim(&self, id: &SessionId) -> Result<Claim, StoreError> {
        let mut sessions = self.sessions();
        let token = sessions.tokens + 1;
        let owner = self.owner(token);
        let kept = sessions.by_id.get_mut(id).ok_or_else(|| not_found(id))?;
        if kept.owner.is_some_and(|owner| owner.holds(Instant::now())) {
            return Err(owned_elsewhere(id));
        }
        kept.owner = Some(owner);
        sessions.tokens = token;
        Ok(Claim::new(id.clone(), token, self.lease))
    }

    fn renew(&self, claim: &Claim) -> Result<(), StoreError> {
        let mut sessions = self.sessions();
        let id = claim.session();
        let kept = sessions.by_id.get_mut(id).ok_or_else(|| not_found(id))?;
        owned(kept, claim)?;
        kept.owner = Some(self.owner(claim.token()));
        Ok(())
    }

    fn release(&self, claim: &Claim) -> Result<(), StoreError> {
        let mut sessions = self.sessions();
        if let Some(kept) = sessions.by_id.get_mut(claim.session()) {
            if kept.owner.is_some_and(|owner| owner.token == claim.token()) {
                kept.owner = None;
            }
        }
        Ok(())
    }

    fn append_nodes(&self, claim: &Claim, nodes: &[Node]) -> Result<(), StoreError> {
        self.write(claim, |kept| {
            check_append(kept.nodes.len() as u64, nodes, claim.session().as_str())?;
            kept.nodes.extend_from_slice(nodes);
            Ok(())
        })
    }

    fn save_tree(&self, claim: &Claim, tree: &Tree) -> Result<(), StoreError> {
        self.write(claim, |kept| {
            kept.nodes = tree.nodes().to_vec();
            Ok(())
        })
    }

    fn save_state(&self, claim: &Claim, state: &SessionState) -> Result<(), StoreError> {
        self.write(claim, |kept| {
            kept.state = state.clone();
            Ok(())
        })
    }

    fn load(&self, id: &SessionId) -> Result<Loaded, StoreError> {
        let (nodes, state) = {
            let sessions = self.sessions();
            let kept = sessions.by_id.get(id).ok_or_else(|| not_found(id))?;
            (kept.nodes.clone(), kept.state.clone())
        };
        assemble(nodes, state, Vec::new(), id.as_str())
    }

    fn list(&self, limit: usize, offset: usize) -> Result<SessionList, StoreError> {
        let sessions = self.sessions();
        let mut all: Vec<(&SessionId, &Kept)> = sessions.by_id.iter().collect();
        all.sort_by_key(|(_, kept)| std::cmp::Reverse((kept.updated_ms, kept.last_write)));
        let info = |(id, kept): (&SessionId, &Kept)| SessionInfo {
            id: id.clone(),
            title: kept.state.title.clone(),
            created_ms: kept.created_ms,
            updated_ms: kept.updated_ms,
        };
        let sessions = all.into_iter().skip(offset).take(limit).map(info).collect();
        Ok(SessionList { sessions, unreadable: Vec::new() })
    }

    fn delete(&self, id: &SessionId) -> Result<bool, StoreError> {
        let mut sessions = self.sessions();
        match sessions.by_id.get(id) {
            None => Ok(false),
            Some(kept) if kept.owner.is_some_and(|owner| owner.holds(Instant::now())) => Err(owned_elsewhere(id)),
            Some(_) => Ok(sessions.by_id.remove(id).is_some()),
        }
    }

    fn exists(&self, id: &SessionId) -> Result<bool, StoreError> {
        Ok(self.sessions().by_id.contains_key(id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_memory_store_passes_the_suite() {
        let store = MemoryStore::new();
        crate::suite::run(|| store.clone());
    }

    #[test]
    fn a_memory_store_with_leases_passes_the_suite_and_its_lease_checks() {
        let store = MemoryStore::with_lease(Duration::from_secs(30));
        crate::suite::run(|| store.clone());
        let short = MemoryStore::with_lease(Duration::from_millis(50));
        crate::suite::leases(&short, Duration::from_millis(50));
    }
}
