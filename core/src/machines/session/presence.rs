//! Which sessions are running, and where: what a session manager shows (`list_open`) and
//! tells (its live feed) across the machines that share a store. A store shared by
//! machines (omni-store's PostgreSQL store) implements [`Presence`]; a manager on one
//! machine needs none (it knows its own sessions).
//!
//! A notice carries only a session's id and what changed, never the change itself: a
//! listener reads the entry ([`Presence::entries`]). So a listener that lost its
//! connection, and with it the notices sent meanwhile (nobody replays them), catches up
//! by reading every entry again ([`Presence::running`]) and comparing.

use std::time::Duration;

use super::store::{Claim, SessionId, StoreError};
use crate::machines::agent::Status;

/// What changed about a running session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Change {
    /// It started running on a node.
    Opened,
    /// Its agent's status changed.
    Status,
    /// Its title changed.
    Title,
    /// It stopped running.
    Closed,
}

impl Change {
    /// The change's name in a notice.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Opened => "opened",
            Self::Status => "status",
            Self::Title => "title",
            Self::Closed => "closed",
        }
    }

    /// The change a notice names.
    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "opened" => Self::Opened,
            "status" => Self::Status,
            "title" => Self::Title,
            "closed" => Self::Closed,
            _ => return None,
        })
    }
}

/// A session's entry: where it runs and how it is doing, or why it stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The session.
    pub id: SessionId,
    /// Its title.
    pub title: Option<String>,
    /// Running, or not.
    pub run: Run,
}

/// Whether a session runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Run {
    /// It runs on `node`, its agent `status`.
    Running {
        /// The node that owns it.
        node: String,
        /// Its agent's status.
        status: Status,
    },
    /// It does not run (any more): why, as the node that closed it said (or "the lease
    /// expired" for a node that stopped renewing it).
    Stopped {
        /// Why.
        reason: String,
    },
}

/// One notice: the session `id` had `change`; read its entry for what it is now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    /// The session.
    pub id: SessionId,
    /// What changed.
    pub change: Change,
}

/// The running sessions of every node sharing a store, and notices of their changes.
/// Calls may block: drivers make them off their executor's threads.
pub trait Presence: Send + Sync + 'static {
    /// This node's name, as entries and [`StoreError::owner`] show it.
    fn node(&self) -> &str;

    /// Records that the session of `claim` runs here with `status` (and `title`), and
    /// notifies listeners of `change` (`Opened`, `Status` or `Title`). Refused
    /// ([`StoreErrorKind::NotOwner`](super::store::StoreErrorKind::NotOwner)) when the
    /// claim no longer owns the session.
    fn announce(&self, claim: &Claim, status: Status, title: Option<&str>, change: Change) -> Result<(), StoreError>;

    /// Records that the session of `claim` stopped running here, and why, and notifies
    /// listeners (`Closed`). Call it before releasing the claim.
    fn withdraw(&self, claim: &Claim, reason: &str) -> Result<(), StoreError>;

    /// Every session running on any node (whose owner holds a live lease), by id.
    fn running(&self) -> Result<Vec<Entry>, StoreError>;

    /// The entries of `ids`, in order; an id without an entry is left out.
    fn entries(&self, ids: &[SessionId]) -> Result<Vec<Entry>, StoreError>;

    /// Starts listening for every node's notices (this node's too).
    fn listen(&self) -> Result<Box<dyn Listener>, StoreError>;
}

/// A listener's end: notices as they come.
pub trait Listener: Send {
    /// The notices that came, waiting up to `timeout` for the first: empty when none
    /// came. An error means the connection is gone: notices may have been missed, so
    /// the caller listens again and reads [`Presence::running`] to catch up.
    fn wait(&mut self, timeout: Duration) -> Result<Vec<Notice>, StoreError>;
}
