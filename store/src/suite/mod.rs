//! The conformance suite every [`Store`] passes, written once: a store's test calls
//! [`run`] with a function that opens a new handle on one store that starts empty (a
//! folder, a database file), and each check panics with what went wrong.
//!
//! ```
//! let store = omni_store::MemoryStore::new();
//! omni_store::suite::run(|| store.clone()); // clones share one store
//! ```
//!
//! What it checks: a branched tree and its state round trip, written as a session writes
//! them (the new nodes of each turn appended, the state saved); a whole tree replaced;
//! creating an id twice, and eight handles racing to create one; list order (the most
//! recently written first) and paging; delete; two handles writing different sessions at
//! once; the typed errors for a session that is not there. And one writer per session:
//! a claim refused while another owner holds the session (a second handle, or the same
//! one), granted after a release with a higher fencing token; every write fenced (a
//! released, forged or other session's claim writes nothing); appends that are not the
//! next ids refused whole; eight handles racing to claim one session (one wins) and two
//! handles writing one session turn by turn, each claiming it in turn, losing nothing;
//! delete refused while owned. [`leases`] adds the checks of a store whose ownership is a
//! lease.
#![allow(clippy::unwrap_used, clippy::missing_panics_doc)]

mod ownership;

pub use ownership::leases;

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use omni_protocol::session::{Node, NodeId, Tree};
use omni_protocol::{Message, Usage};

use crate::{Claim, SessionId, SessionState, Store, StoreErrorKind};

/// Runs every check against the store `open` opens (each call a new handle on the same,
/// initially empty, store).
pub fn run<S: Store>(open: impl Fn() -> S + Sync) {
    let store = open();
    round_trip_as_a_session_writes(&store);
    a_whole_tree_replaces_the_nodes(&store);
    missing_sessions_are_typed_errors(&store);
    an_id_is_created_once(&open);
    list_is_newest_first_and_pages(&store);
    delete_removes_a_session(&store);
    two_handles_write_at_once(&open);
    ownership::one_owner_at_a_time(&open);
    ownership::every_write_is_fenced(&open);
    ownership::appends_must_be_the_next_ids(&store);
    ownership::eight_handles_race_to_claim(&open);
    ownership::two_handles_take_turns_on_one_session(&open);
    ownership::delete_waits_for_the_owner(&open);
}

/// A fresh id for each use, so the checks share one store without meeting.
pub(crate) fn id(name: &str) -> SessionId {
    SessionId::new(name).unwrap()
}

pub(crate) fn state(title: &str, tree: &Tree) -> SessionState {
    SessionState {
        model: Some("anthropic:claude-sonnet-4-5".into()),
        system: Some("Be brief.".into()),
        options: Some(serde_json::json!({"max_tokens": 256})),
        title: Some(title.into()),
        position: tree.position(),
        nodes: tree.len() as u64,
    }
}

/// The nodes added since the store last saw `saved` of them.
pub(crate) fn new_nodes(tree: &Tree, saved: usize) -> &[Node] {
    &tree.nodes()[saved..]
}

/// u0 ─ a1 ─ u2 ─ a3, then a1 regenerated as a4, then the path back on a3's branch: what a
/// session writes, turn by turn.
fn write_branched(store: &impl Store, session: &SessionId) -> Tree {
    let mut tree = Tree::new();
    let claim = store.create(session, &state("branched", &tree)).unwrap();
    let mut saved = 0;
    let mut commit = |tree: &Tree| {
        store.append_nodes(&claim, new_nodes(tree, saved)).unwrap();
        saved = tree.len();
        store.save_state(&claim, &state("branched", tree)).unwrap();
    };
    let usage = Usage { input_tokens: 12, output_tokens: 3, ..Usage::default() };
    tree.append(vec![Message::user("hi"), Message::assistant("hello")], Some(usage));
    commit(&tree);
    tree.append(vec![Message::user("and then?"), Message::assistant("then this")], Some(usage));
    commit(&tree);
    tree.truncate_to(NodeId(0)).unwrap();
    tree.append(vec![Message::assistant("hello again")], Some(usage));
    commit(&tree);
    tree.navigate(Some(NodeId(1))).unwrap();
    store.save_state(&claim, &state("branched", &tree)).unwrap();
    store.release(&claim).unwrap();
    tree
}

fn round_trip_as_a_session_writes(store: &impl Store) {
    let session = id("round-trip");
    let tree = write_branched(store, &session);
    let loaded = store.load(&session).unwrap();
    assert_eq!(loaded.tree, tree, "the tree, its path and cursors come back");
    assert_eq!(loaded.state, state("branched", &tree), "the state comes back");
    assert!(loaded.warnings.is_empty(), "nothing to warn of: {:?}", loaded.warnings);
    assert_eq!(loaded.tree.usage().input_tokens, 36, "every turn's usage, on every branch");
    assert!(store.exists(&session).unwrap());
}

fn a_whole_tree_replaces_the_nodes(store: &impl Store) {
    let session = id("replaced");
    write_branched(store, &session);
    let claim = store.claim(&session).unwrap();
    let mut tree = Tree::new();
    tree.append(vec![Message::user("only this"), Message::assistant("and this")], None);
    store.save_tree(&claim, &tree).unwrap();
    store.save_state(&claim, &state("replaced", &tree)).unwrap();
    let loaded = store.load(&session).unwrap();
    assert_eq!(loaded.tree, tree);
    // Appends go on after a whole save.
    tree.append(vec![Message::user("more")], None);
    store.append_nodes(&claim, new_nodes(&tree, 2)).unwrap();
    store.save_state(&claim, &state("replaced", &tree)).unwrap();
    assert_eq!(store.load(&session).unwrap().tree, tree);
    store.release(&claim).unwrap();
}

fn missing_sessions_are_typed_errors(store: &impl Store) {
    let missing = id("never-made");
    assert!(!store.exists(&missing).unwrap());
    assert_eq!(store.load(&missing).unwrap_err().kind, StoreErrorKind::NotFound);
    assert_eq!(store.claim(&missing).unwrap_err().kind, StoreErrorKind::NotFound);
    // A claim on a session that is not there owns nothing.
    let forged = Claim::new(missing.clone(), 1, None);
    let tree = Tree::new();
    let refused = store.save_state(&forged, &state("x", &tree)).unwrap_err().kind;
    assert!(matches!(refused, StoreErrorKind::NotFound | StoreErrorKind::NotOwner), "{refused:?}");
    let mut one = Tree::new();
    one.append(vec![Message::user("x")], None);
    let refused = store.append_nodes(&forged, one.nodes()).unwrap_err().kind;
    assert!(matches!(refused, StoreErrorKind::NotFound | StoreErrorKind::NotOwner), "{refused:?}");
    assert!(!store.exists(&missing).unwrap(), "a failed write makes no session");
    store.release(&forged).unwrap();
}

fn an_id_is_created_once<S: Store>(open: &(impl Fn() -> S + Sync)) {
    let store = open();
    let session = id("created-once");
    let empty = Tree::new();
    let first = store.create(&session, &state("first", &empty)).unwrap();
    assert_eq!(first.session(), &session);
    store.release(&first).unwrap();
    let again = store.create(&session, &state("second", &empty)).unwrap_err();
    assert_eq!(again.kind, StoreErrorKind::Exists);
    assert_eq!(store.load(&session).unwrap().state.title.as_deref(), Some("first"), "the first one stands");
    // Eight handles race to create one id: exactly one wins, atomically.
    let raced = id("raced");
    let start = Barrier::new(8);
    let won: usize = thread::scope(|scope| {
        let racers: Vec<_> = (0..8)
            .map(|n| {
                let (open, start, raced) = (&open, &start, &raced);
                scope.spawn(move || {
                    let handle = open();
                    start.wait();
                    match handle.create(raced, &state(&format!("racer {n}"), &Tree::new())) {
                        Ok(claim) => {
                            handle.release(&claim).unwrap();
                            1
                        }
                        Err(e) => {
                            assert_eq!(e.kind, StoreErrorKind::Exists, "{e}");
                            0
                        }
                    }
                })
            })
            .collect();
        racers.into_iter().map(|r| r.join().unwrap()).sum()
    });
    assert_eq!(won, 1, "one creator wins");
    assert!(store.load(&raced).is_ok());
}

fn list_is_newest_first_and_pages(store: &impl Store) {
    // The sessions written so far, then three more, each written after the last.
    let before = store.list(usize::MAX, 0).unwrap().sessions.len();
    let names = ["list-a", "list-b", "list-c"];
    let mut claims = Vec::new();
    for name in names {
        thread::sleep(Duration::from_millis(3));
        claims.push(store.create(&id(name), &state(name, &Tree::new())).unwrap());
    }
    // Writing the first again makes it the newest.
    thread::sleep(Duration::from_millis(3));
    let mut tree = Tree::new();
    tree.append(vec![Message::user("touched")], None);
    store.append_nodes(&claims[0], tree.nodes()).unwrap();
    for claim in &claims {
        store.release(claim).unwrap();
    }
    let listed = store.list(usize::MAX, 0).unwrap();
    assert!(listed.unreadable.is_empty(), "{:?}", listed.unreadable);
    let all = listed.sessions;
    assert_eq!(all.len(), before + 3);
    let newest: Vec<&str> = all.iter().take(3).map(|info| info.id.as_str()).collect();
    assert_eq!(newest, ["list-a", "list-c", "list-b"], "the most recently written first");
    assert!(all.windows(2).all(|w| w[0].updated_ms >= w[1].updated_ms));
    assert_eq!(all[1].title.as_deref(), Some("list-c"));
    assert!(all.iter().all(|info| info.created_ms <= info.updated_ms));
    let page: Vec<SessionId> = store.list(2, 1).unwrap().sessions.into_iter().map(|info| info.id).collect();
    assert_eq!(page, [id("list-c"), id("list-b")], "limit and offset");
    assert!(store.list(5, all.len()).unwrap().sessions.is_empty(), "past the end");
}

fn delete_removes_a_session(store: &impl Store) {
    let session = id("deleted");
    write_branched(store, &session);
    assert!(store.delete(&session).unwrap());
    assert!(!store.exists(&session).unwrap());
    assert_eq!(store.load(&session).unwrap_err().kind, StoreErrorKind::NotFound);
    assert!(!store.delete(&session).unwrap(), "a second delete finds nothing");
    assert!(store.list(usize::MAX, 0).unwrap().sessions.iter().all(|info| info.id != session));
    // The id can be used again, from nothing.
    let claim = store.create(&session, &state("reborn", &Tree::new())).unwrap();
    assert!(store.load(&session).unwrap().tree.is_empty());
    store.release(&claim).unwrap();
}

fn two_handles_write_at_once<S: Store>(open: &(impl Fn() -> S + Sync)) {
    const TURNS: usize = 40;
    let handles = [Arc::new(open()), Arc::new(open())];
    let ids = [id("writer-one"), id("writer-two")];
    thread::scope(|scope| {
        for (handle, session) in handles.iter().zip(&ids) {
            scope.spawn(move || {
                let mut tree = Tree::new();
                let claim = handle.create(session, &state(session.as_str(), &tree)).unwrap();
                for turn in 0..TURNS {
                    let saved = tree.len();
                    let text = format!("{session} {turn}");
                    tree.append(vec![Message::user(text.clone()), Message::assistant(text)], None);
                    handle.append_nodes(&claim, new_nodes(&tree, saved)).unwrap();
                    handle.save_state(&claim, &state(session.as_str(), &tree)).unwrap();
                }
                handle.release(&claim).unwrap();
            });
        }
    });
    for session in &ids {
        let loaded = handles[0].load(session).unwrap();
        assert_eq!(loaded.tree.len(), 2 * TURNS, "{session}: every turn of both writers");
        let last = loaded.tree.messages().last().map(Message::text);
        assert_eq!(last, Some(format!("{session} {}", TURNS - 1)));
    }
}
