//! The session's writes: what each does ([`StoreOp`]), and the machine's side of them,
//! one at a time, as the owner of its claim: what goes next ([`Session::flush`]), what
//! an answer changes ([`Session::stored`]), the lease's renewal, and the state map as
//! the store keeps it. Also the repair of a path saved inside a turn, which `resume`
//! applies.

use std::time::{Duration, Instant};

use super::{Session, SessionEffect, SessionError, SessionEvent, Written};
use crate::data::message::Role;
use crate::machines::agent::AgentCallbacks;
use crate::machines::session::store::{Claim, SessionState, Store, StoreError};
use crate::machines::session::tree::{Node, Tree};

/// A store write, numbered so that its result finds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WriteId(pub u64);

/// What a write does.
#[derive(Debug, Clone, PartialEq)]
pub enum StoreOp {
    /// Append these nodes.
    Append(Vec<Node>),
    /// Replace the state map.
    SaveState(SessionState),
    /// Extend the claim's lease.
    Renew,
    /// Give up the claim (the session's last write).
    Release,
}

impl StoreOp {
    /// Makes this write to `store` as the owner of `claim`: the one call of the store's
    /// method each write stands for (the driver runs it where blocking is allowed).
    pub fn apply(&self, store: &dyn Store, claim: &Claim) -> Result<(), StoreError> {
        match self {
            Self::Append(nodes) => store.append_nodes(claim, nodes),
            Self::SaveState(state) => store.save_state(claim, state),
            Self::Renew => store.renew(claim),
            Self::Release => store.release(claim),
        }
    }
}

impl<C: AgentCallbacks> Session<C> {
    /// The state map as the store keeps it: the node count of the tree now, and the
    /// position of the last committed turn (while a turn is in flight, where it found the
    /// path: a regenerate or an edit moves the path to its user message, which is not a
    /// state to resume from).
    pub fn state(&self) -> SessionState {
        let position = self.turn.as_ref().map_or_else(|| self.tree.position(), |turn| turn.rollback.clone());
        SessionState { position, nodes: self.tree.len() as u64, ..self.state.clone() }
    }

    /// Sends the next write, unless one is in flight.
    pub(super) fn flush(&mut self) {
        if self.in_flight.is_some() || !self.writing() {
            return;
        }
        let Some(claim) = self.claim.clone() else { return };
        let (op, written) = if self.renew_due {
            (StoreOp::Renew, Written::Renewed)
        } else if self.saved < self.tree.len() {
            let nodes = self.tree.nodes()[self.saved..].to_vec();
            let count = nodes.len();
            (StoreOp::Append(nodes), Written::Nodes(count))
        } else if self.state_saved != self.state_version {
            (StoreOp::SaveState(self.state()), Written::State)
        } else if self.terminating {
            (StoreOp::Release, Written::Released)
        } else {
            return;
        };
        let write = WriteId(self.next_write);
        self.next_write += 1;
        self.in_flight = Some((write, written, self.state_version));
        self.effects.push_back(SessionEffect::Store { write, claim, op });
    }

    pub(super) fn stored(
        &mut self,
        write: WriteId,
        result: Result<(), StoreError>,
        now: Instant,
    ) -> Result<(), SessionError> {
        let Some((id, written, version)) = self.in_flight else { return Err(SessionError::UnknownWrite(write)) };
        if id != write {
            return Err(SessionError::UnknownWrite(write));
        }
        self.in_flight = None;
        let lease = self.claim.as_ref().and_then(Claim::lease);
        match &result {
            Ok(()) => match written {
                Written::Nodes(count) => self.saved += count,
                Written::State => self.state_saved = version,
                Written::Renewed => {
                    self.renew_due = false;
                    self.renew_at = lease.map(|lease| now + renewal(lease));
                }
                Written::Released => self.released = true,
            },
            Err(e) if e.kind.is_final() => {
                // Writing again cannot succeed: the claim lost its session, or the store
                // holds what this session did not write. Stop, and say so to every change.
                self.lost = Some(e.clone());
                self.renew_due = false;
            }
            Err(_) => {
                if written == Written::Renewed {
                    // Tried again soon, well within the lease.
                    self.renew_due = false;
                    self.renew_at = lease.map(|lease| now + lease / 10);
                }
                if written == Written::Released {
                    // Nothing more to do: the lock or lease goes with the process or lapses.
                    self.released = true;
                }
            }
        }
        let ok = result.is_ok();
        self.events.push_back(SessionEvent::Store { written, result });
        // After a failure the next change writes again (no loop against a store that
        // keeps failing); after a success, whatever else is unsaved goes now. A stopping
        // session goes on to its release either way.
        if ok {
            self.flush();
        } else if self.terminating {
            self.saved = self.tree.len();
            self.state_saved = self.state_version;
            self.flush();
        }
        Ok(())
    }
}
/// How long after a lease is taken or renewed it is renewed again: a third of it, so two
/// renewals can fail before it lapses.
pub(super) fn renewal(lease: Duration) -> Duration {
    lease / 3
}

/// Moves a path that ends inside a turn (on a user message) to one a turn can start from:
/// down the branch last used under it when that ends on a reply, else back to the last
/// reply on the way (or no path). Whether it moved.
pub(super) fn settle(tree: &mut Tree) -> bool {
    let ends_a_turn =
        |tree: &Tree| tree.head().and_then(|head| tree.message(head)).is_none_or(|m| m.role == Role::Assistant);
    if ends_a_turn(tree) {
        return false;
    }
    tree.extend();
    if ends_a_turn(tree) {
        return true;
    }
    // Down the branch to a user message without a reply (a batch torn between its nodes):
    // back to the last reply on the way.
    let last_reply =
        tree.path().iter().rev().copied().find(|&id| tree.message(id).is_some_and(|m| m.role == Role::Assistant));
    let moved = match last_reply {
        Some(reply) => tree.truncate_to(reply),
        None => tree.navigate(None),
    };
    // A node of the path is always in the tree.
    debug_assert!(moved.is_ok());
    true
}
