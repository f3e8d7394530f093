//! The session manager at scale, each case beside its baseline in the same run (report
//! the ratios):
//!
//! - `open_from_sqlite` / `read_rows_raw`: opening 10,000 sessions of one turn from a
//!   SQLite store through a manager (each claimed, loaded, its agent and loop started),
//!   against reading the same rows with rusqlite and decoding them, nothing else;
//!   `claim_and_release_only` shows how much of it is the durable claims.
//! - `first_event::<N>`: the time from a prompt to its first streamed event with N idle
//!   sessions open beside it, N = 1 and 10,000 (goal: the 10,000 case at most 1.1x the
//!   other).
//! - With `OMNI_PG_URL` (`eval "$(scripts/postgres.sh start)"`), otherwise skipped:
//!   `pg_commit` / `pg_insert`, a turn committed through the PostgreSQL store (two nodes
//!   appended and the state saved, each fenced) against a plain INSERT of the same rows
//!   on a connection of its own; `pg_renew_many` / `pg_renew_each`, the leases of 10,000
//!   sessions renewed in one statement against one statement each.
//!
//! `cargo bench -p omni-conformance --bench manager` (add `--features postgres` for the
//! PostgreSQL cases).
#![allow(clippy::disallowed_methods, clippy::disallowed_types, missing_docs, clippy::unwrap_used)]

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use divan::Bencher;
use omni_conformance::async_manager::{quick, MODEL};
use omni_conformance::replay::ReplayServer;
use omni_conformance::session_drive::{replay_client, TempDir};
use omni_protocol::agent::AgentEvent;
use omni_protocol::manager::IdleShutdown;
use omni_protocol::session::SessionEvent;
use omni_protocol::session::{Node, Tree};
use omni_protocol::session::{SessionId, SessionState, Store};
use omni_protocol::Message;
use omni_store::{MemoryStore, SqliteStore};
use omni_tokio::{Client, SessionManager, SessionOptions, Subscription};

fn main() {
    divan::main();
}

const MANY: usize = 10_000;

fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap())
}

fn idle() -> SessionOptions {
    SessionOptions::new().no_controller().idle(IdleShutdown::Never)
}

fn id(i: usize) -> SessionId {
    SessionId::new(format!("s{i}")).unwrap()
}

/// A SQLite file of [`MANY`] sessions of one turn each.
fn sqlite_sessions() -> &'static (TempDir, std::path::PathBuf) {
    static FILE: OnceLock<(TempDir, std::path::PathBuf)> = OnceLock::new();
    FILE.get_or_init(|| {
        let dir = TempDir::new("bench-manager");
        std::fs::create_dir_all(&dir.0).unwrap();
        let path = dir.0.join("sessions.db");
        let store = SqliteStore::open(&path).unwrap();
        for i in 0..MANY {
            let state = SessionState { model: Some(MODEL.into()), ..SessionState::default() };
            let claim = store.create(&id(i), &state).unwrap();
            let mut tree = Tree::new();
            tree.append(vec![Message::user("How do I sort a Vec?"), Message::assistant("Use v.sort().")], None);
            store.append_nodes(&claim, tree.nodes()).unwrap();
            let state = SessionState { position: tree.position(), nodes: 2, ..state };
            store.save_state(&claim, &state).unwrap();
            store.release(&claim).unwrap();
        }
        (dir, path)
    })
}

#[divan::bench(sample_count = 3, sample_size = 1)]
fn open_from_sqlite(bencher: Bencher) {
    let (_, path) = sqlite_sessions();
    let server = ReplayServer::start(Vec::new()).unwrap();
    let client = replay_client::<Client>(&server).unwrap();
    bencher.bench_local(|| {
        runtime().block_on(async {
            let store: Arc<dyn Store> = Arc::new(SqliteStore::open(path).unwrap());
            let manager =
                client.session_manager(store, |client, _id| client.agent(MODEL)).idle_after(None).start().unwrap();
            for i in 0..MANY {
                manager.open_with(id(i), idle()).await.unwrap();
            }
            manager.shutdown().await.unwrap();
        });
    });
}

#[divan::bench(sample_count = 3, sample_size = 1)]
fn read_rows_raw(bencher: Bencher) {
    let (_, path) = sqlite_sessions();
    bencher.bench_local(|| {
        let db = rusqlite::Connection::open(path).unwrap();
        let mut state = db.prepare("SELECT state FROM omni_store_sessions WHERE id = ?1").unwrap();
        let mut nodes = db.prepare("SELECT body FROM omni_store_nodes WHERE session = ?1 ORDER BY id").unwrap();
        let mut count = 0;
        for i in 0..MANY {
            let key = id(i);
            let kept: String = state.query_row([key.as_str()], |row| row.get(0)).unwrap();
            let _: SessionState = serde_json::from_str(&kept).unwrap();
            let rows = nodes.query_map([key.as_str()], |row| row.get::<_, String>(0)).unwrap();
            for body in rows {
                let _: Node = serde_json::from_str(&body.unwrap()).unwrap();
                count += 1;
            }
        }
        assert_eq!(count, 2 * MANY);
    });
}

/// Where the time of `open_from_sqlite` goes: the claims alone (each a lock file taken and
/// counted, and the owner written to the session's row in a synced transaction), with
/// their releases.
#[divan::bench(sample_count = 3, sample_size = 1)]
fn claim_and_release_only(bencher: Bencher) {
    let (_, path) = sqlite_sessions();
    bencher.bench_local(|| {
        let store = SqliteStore::open(path).unwrap();
        for i in 0..MANY {
            let claim = store.claim(&id(i)).unwrap();
            store.release(&claim).unwrap();
        }
    });
}

/// A manager with `idle` idle sessions open, and one more session to prompt.
struct Busy {
    server: ReplayServer,
    _manager: SessionManager,
    session: omni_tokio::Session,
    events: Subscription<SessionEvent>,
}

fn with_idle_sessions(idle_count: usize) -> Busy {
    let server = ReplayServer::start(Vec::new()).unwrap();
    let client = replay_client::<Client>(&server).unwrap();
    runtime().block_on(async {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let manager =
            client.session_manager(store, |client, _id| client.agent(MODEL)).idle_after(None).start().unwrap();
        for i in 0..idle_count {
            manager.create_with(id(i), idle()).await.unwrap();
        }
        let opened = manager.create().await.unwrap();
        let events = opened.events.unwrap();
        Busy { server, _manager: manager, session: opened.session, events }
    })
}

#[divan::bench(consts = [1, MANY], sample_count = 50, sample_size = 1)]
fn first_event<const IDLE: usize>(bencher: Bencher) {
    let mut busy = with_idle_sessions(IDLE);
    bencher.bench_local(|| {
        busy.server.push_replies([quick()]);
        runtime().block_on(async {
            busy.session.prompt("Hi").await.unwrap();
            // The first streamed event: the time measured ends here ...
            loop {
                if let SessionEvent::Agent(AgentEvent::Stream(_)) = busy.events.next_event().await.unwrap() {
                    break;
                }
            }
        });
        // ... and the turn's end is waited for outside it.
        divan::black_box(());
        runtime().block_on(async {
            while let Some(event) = busy.events.next_event().await {
                if matches!(event, SessionEvent::Agent(AgentEvent::Status(omni_protocol::agent::Status::Idle))) {
                    break;
                }
            }
            // Its writes too, so that they do not run into the next prompt.
            while !busy.session.is_saved().await.unwrap() {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        });
    });
}

#[cfg(feature = "postgres")]
mod postgres {
    use std::time::Duration;

    use divan::Bencher;
    use omni_protocol::session::Tree;
    use omni_protocol::session::{SessionState, Store};
    use omni_protocol::Message;
    use omni_store::postgres_testing::TestDatabase;

    use super::{id, MANY};

    const LEASE: Duration = Duration::from_secs(600);

    #[divan::bench(sample_count = 20, sample_size = 10)]
    fn pg_commit(bencher: Bencher) {
        let Some(db) = TestDatabase::new("bench_commit") else { return };
        let store = db.store("bench", LEASE);
        let claim = store.create(&id(0), &SessionState::default()).unwrap();
        let mut tree = Tree::new();
        bencher.bench_local(|| {
            let saved = tree.len();
            tree.append(vec![Message::user("How do I sort a Vec?"), Message::assistant("Use v.sort().")], None);
            store.append_nodes(&claim, &tree.nodes()[saved..]).unwrap();
            let state = SessionState { position: tree.position(), nodes: tree.len() as u64, ..SessionState::default() };
            store.save_state(&claim, &state).unwrap();
        });
    }

    #[divan::bench(sample_count = 20, sample_size = 10)]
    fn pg_insert(bencher: Bencher) {
        let Some(db) = TestDatabase::new("bench_insert") else { return };
        let mut client = db.client();
        client.batch_execute("CREATE TABLE plain_nodes (session TEXT, id BIGINT, body TEXT, PRIMARY KEY (session, id)); CREATE TABLE plain_state (id TEXT PRIMARY KEY, state TEXT)").unwrap();
        client.execute("INSERT INTO plain_state VALUES ('s0', '{}')", &[]).unwrap();
        let mut tree = Tree::new();
        bencher.bench_local(|| {
            let saved = tree.len();
            tree.append(vec![Message::user("How do I sort a Vec?"), Message::assistant("Use v.sort().")], None);
            let mut tx = client.transaction().unwrap();
            for node in &tree.nodes()[saved..] {
                let body = serde_json::to_string(node).unwrap();
                tx.execute("INSERT INTO plain_nodes VALUES ('s0', $1, $2)", &[&(node.id.0 as i64), &body]).unwrap();
            }
            let state =
                serde_json::to_string(&SessionState { position: tree.position(), ..SessionState::default() }).unwrap();
            tx.execute("UPDATE plain_state SET state = $1 WHERE id = 's0'", &[&state]).unwrap();
            tx.commit().unwrap();
        });
    }

    fn leased(name: &str) -> Option<(TestDatabase, omni_store::PgStore, Vec<omni_store::Claim>)> {
        let db = TestDatabase::new(name)?;
        let store = db.store("bench", LEASE);
        let claims = (0..MANY).map(|i| store.create(&id(i), &SessionState::default()).unwrap()).collect();
        Some((db, store, claims))
    }

    #[divan::bench(sample_count = 5, sample_size = 1)]
    fn pg_renew_many(bencher: Bencher) {
        let Some((_db, store, claims)) = leased("bench_renew_many") else { return };
        bencher.bench_local(|| assert!(store.renew_many(&claims).iter().all(Result::is_ok)));
    }

    #[divan::bench(sample_count = 5, sample_size = 1)]
    fn pg_renew_each(bencher: Bencher) {
        let Some((_db, store, claims)) = leased("bench_renew_each") else { return };
        bencher.bench_local(|| assert!(claims.iter().all(|claim| store.renew(claim).is_ok())));
    }
}
