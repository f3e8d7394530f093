//! What an open idle session costs a manager's process, measured by a counting allocator:
//! 2,000 sessions opened without a controller and left idle, the heap before and after,
//! less what the store keeps of them (measured by making as many sessions in a store of
//! their own). The goal is at most 8 KiB a session beyond its history (these have none).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::sync::Arc;
use std::time::Duration;

use omni_conformance::heap::CountingAllocator;
use omni_conformance::replay::ReplayServer;
use omni_conformance::session_drive::replay_client;
use omni_protocol::manager::IdleShutdown;
use omni_protocol::session::{SessionId, SessionState, Store};
use omni_store::MemoryStore;
use omni_tokio::{Client, SessionOptions};

#[global_allocator]
static HEAP: CountingAllocator = CountingAllocator::new();

const SESSIONS: usize = 2_000;
/// The goal per session, in bytes.
const GOAL: usize = 8 * 1024;

/// Heap bytes a memory store takes for `n` sessions as a manager leaves them (created,
/// claimed, their state saved).
fn store_share(n: usize) -> usize {
    let store = MemoryStore::new();
    let before = HEAP.live();
    for i in 0..n {
        let id = SessionId::new(format!("s{i}")).expect("id");
        let claim = store.create(&id, &SessionState::default()).expect("created");
        store.save_state(&claim, &SessionState::default()).expect("saved");
    }
    let after = HEAP.live();
    drop(store);
    after.saturating_sub(before)
}

#[test]
fn an_open_idle_session_costs_at_most_8_kib() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    runtime.block_on(async {
        let server = ReplayServer::start(Vec::new()).expect("replay server");
        let client = replay_client::<Client>(&server).expect("client");
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let manager = client
            .session_manager(store, |client, _id| client.agent("anthropic:claude-sonnet-4-5"))
            .idle_after(None)
            .start()
            .expect("manager");
        // One session first: the runtime's and the manager's own one-time costs.
        let options = || SessionOptions::new().no_controller().idle(IdleShutdown::Never);
        let warm = manager.create_with(SessionId::new("warm").expect("id"), options()).await.expect("created");
        drop(warm);
        tokio::time::sleep(Duration::from_millis(100)).await;
        let before = HEAP.live();
        let mut handles = Vec::with_capacity(SESSIONS);
        for i in 0..SESSIONS {
            let id = SessionId::new(format!("s{i}")).expect("id");
            let opened = manager.create_with(id, options()).await.expect("created");
            handles.push(opened.session.id().clone());
        }
        // Let every session's loop settle (its writes done).
        tokio::time::sleep(Duration::from_millis(300)).await;
        let after = HEAP.live();
        let open = manager.list_open().await.expect("list_open").len();
        assert_eq!(open, SESSIONS + 1, "every session is open");
        let ids = SESSIONS * std::mem::size_of::<SessionId>() + handles.iter().map(|id| id.as_str().len()).sum::<usize>();
        let store = store_share(SESSIONS);
        let per_session = (after - before).saturating_sub(store + ids) / SESSIONS;
        eprintln!(
            "an open idle session: {per_session} bytes ({:.2} of the {GOAL}-byte goal); the store's share {} bytes each",
            per_session as f64 / GOAL as f64,
            store / SESSIONS
        );
        manager.shutdown().await.expect("shutdown");
        assert!(per_session <= GOAL, "{per_session} bytes a session, more than {GOAL}");
    });
}
