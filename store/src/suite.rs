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

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use omni_core::machines::session::tree::{Node, NodeId, Tree};
use omni_core::{Message, Usage};

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
    one_owner_at_a_time(&open);
    every_write_is_fenced(&open);
    appends_must_be_the_next_ids(&store);
    eight_handles_race_to_claim(&open);
    two_handles_take_turns_on_one_session(&open);
    delete_waits_for_the_owner(&open);
}

/// A fresh id for each use, so the checks share one store without meeting.
fn id(name: &str) -> SessionId {
    SessionId::new(name).unwrap()
}

fn state(title: &str, tree: &Tree) -> SessionState {
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
fn new_nodes(tree: &Tree, saved: usize) -> &[Node] {
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

/// A turn of two nodes appended to `tree`, written with `claim`.
fn write_turn(store: &impl Store, claim: &Claim, tree: &mut Tree, text: &str) -> Result<(), crate::StoreError> {
    let saved = tree.len();
    let mut next = tree.clone();
    next.append(vec![Message::user(text), Message::assistant(text)], None);
    store.append_nodes(claim, new_nodes(&next, saved))?;
    store.save_state(claim, &state(claim.session().as_str(), &next))?;
    *tree = next;
    Ok(())
}

fn one_owner_at_a_time<S: Store>(open: &(impl Fn() -> S + Sync)) {
    let (one, two) = (open(), open());
    let session = id("owned");
    let first = one.create(&session, &state("owned", &Tree::new())).unwrap();
    // While it is owned: no second owner, from another handle or from the same one.
    for handle in [&one, &two] {
        let refused = handle.claim(&session).unwrap_err();
        assert_eq!(refused.kind, StoreErrorKind::OwnedElsewhere, "{refused}");
    }
    one.renew(&first).unwrap();
    // Reading needs no ownership.
    assert!(two.load(&session).unwrap().tree.is_empty());
    one.release(&first).unwrap();
    one.release(&first).unwrap(); // twice: released already
    let second = two.claim(&session).unwrap();
    assert!(second.token() > first.token(), "a new owner's token is higher: {second:?} after {first:?}");
    let refused = one.renew(&first).unwrap_err();
    assert_eq!(refused.kind, StoreErrorKind::NotOwner, "{refused}");
    let mut tree = Tree::new();
    write_turn(&two, &second, &mut tree, "second's").unwrap();
    two.release(&second).unwrap();
    let third = one.claim(&session).unwrap();
    assert!(third.token() > second.token());
    one.release(&third).unwrap();
}

fn every_write_is_fenced<S: Store>(open: &(impl Fn() -> S + Sync)) {
    let (one, two) = (open(), open());
    let session = id("fenced");
    let mut tree = Tree::new();
    let stale = one.create(&session, &state("fenced", &tree)).unwrap();
    write_turn(&one, &stale, &mut tree, "first").unwrap();
    one.release(&stale).unwrap();
    let owner = two.claim(&session).unwrap();
    // The released claim, a forged one, and a claim on another session: none writes.
    let other = id("fenced-other");
    let other_claim = one.create(&other, &state("other", &Tree::new())).unwrap();
    let forged = [
        stale.clone(),
        Claim::new(session.clone(), owner.token() + 1, None),
        Claim::new(session.clone(), 0, None),
        Claim::new(session.clone(), other_claim.token(), None),
    ];
    for claim in &forged {
        for handle in [&one, &two] {
            let mut attempt = tree.clone();
            let kind = write_turn(handle, claim, &mut attempt, "stale").unwrap_err().kind;
            assert_eq!(kind, StoreErrorKind::NotOwner, "{claim:?}");
            let kind = handle.save_tree(claim, &Tree::new()).unwrap_err().kind;
            assert_eq!(kind, StoreErrorKind::NotOwner, "{claim:?}");
            assert_eq!(handle.renew(claim).unwrap_err().kind, StoreErrorKind::NotOwner, "{claim:?}");
            // Releasing a claim that does not own the session changes nothing.
            handle.release(claim).unwrap();
        }
    }
    let loaded = two.load(&session).unwrap();
    assert_eq!(loaded.tree, tree, "nothing a fenced write carried is stored");
    assert_eq!(loaded.state, state("fenced", &tree));
    // The owner still owns it, and writes.
    write_turn(&two, &owner, &mut tree, "owner's").unwrap();
    assert_eq!(two.load(&session).unwrap().tree.len(), 4);
    two.release(&owner).unwrap();
    one.release(&other_claim).unwrap();
}

fn appends_must_be_the_next_ids(store: &impl Store) {
    let session = id("next-ids");
    let mut tree = Tree::new();
    let claim = store.create(&session, &state("next-ids", &tree)).unwrap();
    write_turn(store, &claim, &mut tree, "first").unwrap();
    let mut longer = tree.clone();
    longer.append(vec![Message::user("a"), Message::assistant("b"), Message::user("c")], None);
    let nodes = longer.nodes();
    let mut bad_parent = nodes[2].clone();
    bad_parent.parent = Some(NodeId(2));
    let mut later_parent = nodes[2].clone();
    later_parent.parent = Some(NodeId(3));
    let refused: [(&str, Vec<Node>); 6] = [
        ("ids already there", nodes[..2].to_vec()),
        ("the last id again", nodes[1..3].to_vec()),
        ("a gap", nodes[3..4].to_vec()),
        ("out of order", vec![nodes[3].clone(), nodes[2].clone()]),
        ("its own parent", vec![bad_parent]),
        ("a later parent", vec![later_parent]),
    ];
    for (why, batch) in refused {
        let error = store.append_nodes(&claim, &batch).unwrap_err();
        assert_eq!(error.kind, StoreErrorKind::Conflict, "{why}: {error}");
        assert_eq!(store.load(&session).unwrap().tree.len(), 2, "{why}: nothing written");
    }
    // A batch good at its start but bad further on is refused whole.
    let mut tail = nodes[3].clone();
    tail.id = NodeId(9);
    let error = store.append_nodes(&claim, &[nodes[2].clone(), tail]).unwrap_err();
    assert_eq!(error.kind, StoreErrorKind::Conflict, "{error}");
    assert_eq!(store.load(&session).unwrap().tree.len(), 2, "nothing of the batch written");
    store.append_nodes(&claim, &nodes[2..]).unwrap();
    assert_eq!(store.load(&session).unwrap().tree.len(), 5);
    store.release(&claim).unwrap();
}

fn eight_handles_race_to_claim<S: Store>(open: &(impl Fn() -> S + Sync)) {
    let session = id("claim-race");
    let store = open();
    let created = store.create(&session, &state("claim-race", &Tree::new())).unwrap();
    store.release(&created).unwrap();
    let start = Barrier::new(8);
    let claims: Vec<(S, Result<Claim, crate::StoreError>)> = thread::scope(|scope| {
        let racers: Vec<_> = (0..8)
            .map(|_| {
                let (open, start, session) = (&open, &start, &session);
                scope.spawn(move || {
                    let handle = open();
                    start.wait();
                    let claim = handle.claim(session);
                    (handle, claim)
                })
            })
            .collect();
        racers.into_iter().map(|r| r.join().unwrap()).collect()
    });
    let won: Vec<_> = claims.iter().filter(|(_, claim)| claim.is_ok()).collect();
    assert_eq!(won.len(), 1, "one claimer wins");
    for (_, claim) in &claims {
        if let Err(e) = claim {
            assert_eq!(e.kind, StoreErrorKind::OwnedElsewhere, "{e}");
        }
    }
    for (handle, claim) in &claims {
        if let Ok(claim) = claim {
            handle.release(claim).unwrap();
        }
    }
}

/// Two handles share one session, each claiming it for a few turns and releasing it, as
/// two processes taking turns at a conversation do: every turn either is written whole by
/// its owner or is refused before anything is written, and the session always loads with
/// every turn reported saved.
fn two_handles_take_turns_on_one_session<S: Store>(open: &(impl Fn() -> S + Sync)) {
    const ROUNDS: usize = 30;
    let session = id("shared");
    let creator = open();
    let created = creator.create(&session, &state("shared", &Tree::new())).unwrap();
    creator.release(&created).unwrap();
    let handles = [open(), open()];
    let saved: Vec<Vec<String>> = thread::scope(|scope| {
        let writers: Vec<_> = handles
            .iter()
            .enumerate()
            .map(|(n, handle)| {
                let session = &session;
                scope.spawn(move || {
                    let mut saved = Vec::new();
                    let mut refused = 0;
                    while saved.len() < ROUNDS {
                        let claim = match handle.claim(session) {
                            Ok(claim) => claim,
                            Err(e) => {
                                assert_eq!(e.kind, StoreErrorKind::OwnedElsewhere, "{e}");
                                refused += 1;
                                assert!(refused < 100_000, "handle {n} never got the session");
                                thread::yield_now();
                                continue;
                            }
                        };
                        // The owner reads what the store holds, then writes its turns.
                        let mut tree = handle.load(session).unwrap().tree;
                        for _ in 0..2 {
                            let text = format!("handle {n} turn {}", saved.len());
                            write_turn(handle, &claim, &mut tree, &text).unwrap();
                            saved.push(text);
                        }
                        handle.release(&claim).unwrap();
                    }
                    saved
                })
            })
            .collect();
        writers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let loaded = handles[0].load(&session).unwrap();
    let texts: Vec<String> = loaded.tree.nodes().iter().map(|node| node.message.text()).collect();
    for text in saved.iter().flatten() {
        assert_eq!(texts.iter().filter(|t| *t == text).count(), 2, "{text}: its turn is stored once, whole");
    }
    assert_eq!(loaded.tree.len(), 2 * saved.iter().map(Vec::len).sum::<usize>());
    assert_eq!(loaded.tree.path().len(), loaded.tree.len(), "one chain, each owner writing after the last");
}

fn delete_waits_for_the_owner<S: Store>(open: &(impl Fn() -> S + Sync)) {
    let (one, two) = (open(), open());
    let session = id("delete-owned");
    let mut tree = Tree::new();
    let claim = one.create(&session, &state("delete-owned", &tree)).unwrap();
    write_turn(&one, &claim, &mut tree, "kept").unwrap();
    let refused = two.delete(&session).unwrap_err();
    assert_eq!(refused.kind, StoreErrorKind::OwnedElsewhere, "{refused}");
    assert_eq!(two.load(&session).unwrap().tree.len(), 2, "nothing deleted");
    one.release(&claim).unwrap();
    assert!(two.delete(&session).unwrap());
    // A session made again under the id: the old claim owns none of it.
    let new = two.create(&session, &state("delete-owned", &Tree::new())).unwrap();
    let mut old_tree = tree.clone();
    let kind = write_turn(&one, &claim, &mut old_tree, "late").unwrap_err().kind;
    assert_eq!(kind, StoreErrorKind::NotOwner);
    assert!(two.load(&session).unwrap().tree.is_empty());
    two.release(&new).unwrap();
}

/// The checks of a store whose ownership is a lease of `lease`: an owner that renews
/// keeps its session past the lease; one that stops loses it to the next claim, and its
/// writes are refused from then on.
pub fn leases<S: Store>(store: &S, lease: Duration) {
    let session = id("leased");
    let mut tree = Tree::new();
    let claim = store.create(&session, &state("leased", &tree)).unwrap();
    assert_eq!(claim.lease(), Some(lease));
    for _ in 0..4 {
        thread::sleep(lease / 2);
        store.renew(&claim).unwrap();
        assert_eq!(store.claim(&session).unwrap_err().kind, StoreErrorKind::OwnedElsewhere);
    }
    write_turn(store, &claim, &mut tree, "renewed").unwrap();
    thread::sleep(lease * 2);
    let next = store.claim(&session).unwrap();
    assert!(next.token() > claim.token());
    let mut late = tree.clone();
    assert_eq!(write_turn(store, &claim, &mut late, "late").unwrap_err().kind, StoreErrorKind::NotOwner);
    assert_eq!(store.renew(&claim).unwrap_err().kind, StoreErrorKind::NotOwner);
    write_turn(store, &next, &mut tree, "next owner's").unwrap();
    assert_eq!(store.load(&session).unwrap().tree.len(), 4);
    store.release(&next).unwrap();
}
