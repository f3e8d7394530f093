//! A store in memory: sessions that need not outlive the process (tests, a scratch
//! conversation), and the reference the suite's checks were first run against. Clones
//! share one store, as two handles on one folder or database file do.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use omni_core::machines::session::store::assemble;
use omni_core::machines::session::tree::{Node, Tree};

use crate::{Loaded, SessionId, SessionInfo, SessionState, Store, StoreError, StoreErrorKind};

/// Sessions kept in memory (see the module's doc).
#[derive(Debug, Clone, Default)]
pub struct MemoryStore(Arc<Mutex<Sessions>>);

#[derive(Debug, Default)]
struct Sessions {
    by_id: BTreeMap<SessionId, Kept>,
    /// Counts writes: orders sessions written in the same millisecond.
    writes: u64,
}

#[derive(Debug)]
struct Kept {
    state: SessionState,
    nodes: Vec<Node>,
    created_ms: u64,
    updated_ms: u64,
    last_write: u64,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn sessions(&self) -> MutexGuard<'_, Sessions> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Applies `write` to session `id`, stamping it written.
    fn write(&self, id: &SessionId, write: impl FnOnce(&mut Kept) -> Result<(), StoreError>) -> Result<(), StoreError> {
        let mut sessions = self.sessions();
        sessions.writes += 1;
        let order = sessions.writes;
        let kept = sessions.by_id.get_mut(id).ok_or_else(|| not_found(id))?;
        write(kept)?;
        kept.updated_ms = now_ms().max(kept.updated_ms);
        kept.last_write = order;
        Ok(())
    }
}

fn not_found(id: &SessionId) -> StoreError {
    StoreError::new(StoreErrorKind::NotFound, id.as_str(), "no such session")
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl Store for MemoryStore {
    fn create(&self, id: &SessionId, state: &SessionState) -> Result<(), StoreError> {
        let mut sessions = self.sessions();
        if sessions.by_id.contains_key(id) {
            return Err(StoreError::new(StoreErrorKind::Exists, id.as_str(), "a session with this id exists"));
        }
        sessions.writes += 1;
        let (now, last_write) = (now_ms(), sessions.writes);
        let kept = Kept { state: state.clone(), nodes: Vec::new(), created_ms: now, updated_ms: now, last_write };
        sessions.by_id.insert(id.clone(), kept);
        Ok(())
    }

    fn append_nodes(&self, id: &SessionId, nodes: &[Node]) -> Result<(), StoreError> {
        self.write(id, |kept| {
            kept.nodes.extend_from_slice(nodes);
            Ok(())
        })
    }

    fn save_tree(&self, id: &SessionId, tree: &Tree) -> Result<(), StoreError> {
        self.write(id, |kept| {
            kept.nodes = tree.nodes().to_vec();
            Ok(())
        })
    }

    fn save_state(&self, id: &SessionId, state: &SessionState) -> Result<(), StoreError> {
        self.write(id, |kept| {
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

    fn list(&self, limit: usize, offset: usize) -> Result<Vec<SessionInfo>, StoreError> {
        let sessions = self.sessions();
        let mut all: Vec<(&SessionId, &Kept)> = sessions.by_id.iter().collect();
        all.sort_by_key(|(_, kept)| std::cmp::Reverse((kept.updated_ms, kept.last_write)));
        let info = |(id, kept): (&SessionId, &Kept)| SessionInfo {
            id: id.clone(),
            title: kept.state.title.clone(),
            created_ms: kept.created_ms,
            updated_ms: kept.updated_ms,
        };
        Ok(all.into_iter().skip(offset).take(limit).map(info).collect())
    }

    fn delete(&self, id: &SessionId) -> Result<bool, StoreError> {
        Ok(self.sessions().by_id.remove(id).is_some())
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
}
