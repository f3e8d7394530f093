//! The suite's checks of one writer per session (issue 22): claims refused while owned,
//! fenced writes, appends that do not follow refused, claims raced, two handles taking
//! turns at one session, deletion waiting for the owner, and leases.

use std::sync::Barrier;
use std::thread;
use std::time::Duration;

use omni_protocol::session::{Node, NodeId, Tree};
use omni_protocol::Message;

use super::{id, new_nodes, state};
use crate::{Claim, Store, StoreErrorKind};

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

pub(super) fn one_owner_at_a_time<S: Store>(open: &(impl Fn() -> S + Sync)) {
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

pub(super) fn every_write_is_fenced<S: Store>(open: &(impl Fn() -> S + Sync)) {
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

pub(super) fn appends_must_be_the_next_ids(store: &impl Store) {
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

pub(super) fn eight_handles_race_to_claim<S: Store>(open: &(impl Fn() -> S + Sync)) {
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
pub(super) fn two_handles_take_turns_on_one_session<S: Store>(open: &(impl Fn() -> S + Sync)) {
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

pub(super) fn delete_waits_for_the_owner<S: Store>(open: &(impl Fn() -> S + Sync)) {
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
