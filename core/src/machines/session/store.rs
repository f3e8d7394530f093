//! What a store keeps of a session, and the [`Store`] trait stores implement: data in,
//! data out. Nothing here does I/O; a store (omni-store's files or SQLite) does, and a
//! driver calls it off its executor's threads. A session is its nodes (appended as turns
//! are committed, or written whole) and a small state map ([`SessionState`]: where the
//! path stands, the model, the title, ...), saved apart so that a commit writes only what
//! is new.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::tree::{Node, NodeId, Position, Tree};

/// A session's id: 1 to 64 characters of the URL-safe base64 alphabet (`A-Z a-z 0-9 - _`),
/// so it is a safe file name, URL segment and database key as it is.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct SessionId(String);

/// The longest id.
pub const MAX_ID_LEN: usize = 64;

/// An id that is not one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidId(pub String);

impl fmt::Display for InvalidId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} is not a session id (1 to {MAX_ID_LEN} of A-Z a-z 0-9 - _)", self.0)
    }
}

impl std::error::Error for InvalidId {}

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

impl SessionId {
    /// `id` if it is a valid id.
    pub fn new(id: impl Into<String>) -> Result<Self, InvalidId> {
        let id = id.into();
        let valid = !id.is_empty() && id.len() <= MAX_ID_LEN && id.bytes().all(|b| ALPHABET.contains(&b));
        if valid {
            Ok(Self(id))
        } else {
            Err(InvalidId(id))
        }
    }

    /// The id of 16 random bytes (the driver draws them: the core has no randomness), in
    /// URL-safe base64 without padding: 22 characters.
    pub fn from_random(bytes: [u8; 16]) -> Self {
        let mut id = String::with_capacity(22);
        for chunk in bytes.chunks(3) {
            let word = chunk.iter().fold(0u32, |word, &b| (word << 8) | u32::from(b)) << (8 * (3 - chunk.len()));
            for i in 0..=chunk.len() {
                id.push(char::from(ALPHABET[((word >> (18 - 6 * i)) & 63) as usize]));
            }
        }
        Self(id)
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for SessionId {
    type Error = InvalidId;
    fn try_from(id: String) -> Result<Self, InvalidId> {
        Self::new(id)
    }
}

impl From<SessionId> for String {
    fn from(id: SessionId) -> Self {
        id.0
    }
}

/// A session's small state map, saved whole at every change of it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionState {
    /// The model, as `provider:model`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The system prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
    /// Request options, as the application gave them (JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<serde_json::Value>,
    /// The title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Where the path stands, and the cursors.
    #[serde(default)]
    pub position: Position,
    /// How many nodes the tree held when this state was saved: nodes beyond them were
    /// committed after it (a process that stopped between a turn's nodes and its state),
    /// and the session takes the newest onto its path when it resumes.
    #[serde(default)]
    pub nodes: u64,
}

/// One session in a store's list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionInfo {
    /// Its id.
    pub id: SessionId,
    /// Its title.
    pub title: Option<String>,
    /// When it was created, in milliseconds since the Unix epoch (the store's clock).
    pub created_ms: u64,
    /// When it was last written, likewise.
    pub updated_ms: u64,
}

/// A page of a store's sessions, and the entries it could not read.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SessionList {
    /// The sessions of the page, the most recently written first.
    pub sessions: Vec<SessionInfo>,
    /// Entries that are not readable sessions (a damaged record, a file that is not a
    /// session's, a row with a bad id): each reported, none hiding the others. Not paged:
    /// every page reports them all.
    pub unreadable: Vec<StoreError>,
}

impl SessionList {
    /// A page being made from a store's entries, newest first: the first `offset`
    /// readable ones skipped, then up to `limit` kept, every unreadable one reported.
    pub fn pager(limit: usize, offset: usize) -> Pager {
        Pager { limit, offset, skipped: 0, list: Self::default() }
    }
}

/// Makes a [`SessionList`] page as a store reads its entries ([`SessionList::pager`]).
#[derive(Debug)]
pub struct Pager {
    limit: usize,
    offset: usize,
    skipped: usize,
    list: SessionList,
}

impl Pager {
    /// The next entry, newest first: a session, or why it is not one.
    pub fn push(&mut self, entry: Result<SessionInfo, StoreError>) {
        match entry {
            Ok(_) if self.skipped < self.offset => self.skipped += 1,
            Ok(info) if self.list.sessions.len() < self.limit => self.list.sessions.push(info),
            Ok(_) => {}
            Err(e) => self.list.unreadable.push(e),
        }
    }

    /// The page.
    pub fn finish(self) -> SessionList {
        self.list
    }
}

/// A session as a store gives it back.
#[derive(Debug, Clone, PartialEq)]
pub struct Loaded {
    /// Its nodes as a tree, the position restored.
    pub tree: Tree,
    /// Its state map.
    pub state: SessionState,
    /// What the store found and got past, without losing anything that was saved whole.
    pub warnings: Vec<StoreWarning>,
}

/// Something got past while loading: nothing saved whole was lost.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreWarning {
    /// The last record was cut short (a crash in the middle of an append) and left out:
    /// it was never reported saved.
    TornRecord {
        /// Where: a file, or a table.
        location: String,
        /// Bytes left out.
        bytes: usize,
    },
    /// The saved position was not one a turn can start from (it ended inside a turn: on
    /// a user message, or on nodes of a turn cut by a crash) and was moved to the nearest
    /// point that is. Every node is still in the tree.
    PathRepaired {
        /// The path as saved.
        saved: Vec<NodeId>,
        /// The path now.
        now: Vec<NodeId>,
    },
}

impl fmt::Display for StoreWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TornRecord { location, bytes } => {
                write!(f, "{location}: a torn last record ({bytes} bytes, never reported saved) was left out")
            }
            Self::PathRepaired { saved, now } => {
                write!(f, "the saved path {saved:?} ended inside a turn; the session resumes at {now:?}")
            }
        }
    }
}

/// What kind of failure a store met.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreErrorKind {
    /// No session has this id.
    NotFound,
    /// A session with this id exists already.
    Exists,
    /// What is stored is not a session (a corrupt record or file, a broken tree).
    Corrupt,
    /// Permission denied.
    Denied,
    /// Any other failure to read or write (a full disk, a lost connection, ...).
    Io,
    /// Another owner (a handle in this process or another) holds the session: it cannot
    /// be claimed, or deleted, until that owner releases it or its process ends.
    OwnedElsewhere,
    /// A write carried a claim that is not (or no longer) the session's owner: it was
    /// released, its lease ran out and another owner took the session, or the session
    /// was deleted and made again. Nothing was written.
    NotOwner,
    /// The write does not follow what the store holds (nodes that are not the next ids,
    /// or whose parent does not precede them). Nothing was written.
    Conflict,
}

impl StoreErrorKind {
    /// Whether writing again with the same claim can ever succeed: false for a claim that
    /// lost its session, or a write the store refuses for what it holds.
    pub fn is_final(self) -> bool {
        matches!(self, Self::NotFound | Self::OwnedElsewhere | Self::NotOwner | Self::Conflict)
    }
}

/// A store's failure: its kind, where, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreError {
    /// What kind.
    pub kind: StoreErrorKind,
    /// Where: a file (with its line for a record), a table, or the session's id.
    pub location: String,
    /// Why, in words.
    pub message: String,
    /// Who holds the session, when the store knows it: the node named by a store shared
    /// by machines, for [`StoreErrorKind::OwnedElsewhere`].
    pub owner: Option<String>,
}

impl StoreError {
    /// A failure of `kind` at `location`.
    pub fn new(kind: StoreErrorKind, location: impl Into<String>, message: impl Into<String>) -> Self {
        Self { kind, location: location.into(), message: message.into(), owner: None }
    }

    /// The same failure, naming the session's owner.
    pub fn with_owner(mut self, owner: impl Into<String>) -> Self {
        self.owner = Some(owner.into());
        self
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.location, self.message)?;
        match &self.owner {
            Some(owner) => write!(f, " (owner: {owner})"),
            None => Ok(()),
        }
    }
}

impl std::error::Error for StoreError {}

/// Ownership of one session: what [`Store::create`] and [`Store::claim`] give, and what
/// every write carries. A session has at most one owner at a time; a store refuses a
/// write whose claim is not the owner's ([`StoreErrorKind::NotOwner`]).
///
/// `token` is a fencing token: every new owner of a session gets a higher one than any
/// before, so a store can refuse a late write of an owner that lost the session even when
/// the owners cannot see each other (two machines and a database). `lease` says how the
/// ownership ends: `None`, when it is released or the owner's process ends (the file and
/// SQLite stores hold a lock the operating system drops with the process); `Some(d)`, a
/// lease that lapses `d` after it was taken or last renewed ([`Store::renew`]), for a
/// store shared by machines that cannot see each other's processes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Claim {
    session: SessionId,
    token: u64,
    lease: Option<Duration>,
}

impl Claim {
    /// A claim on `session` with fencing token `token`, for a store to hand out.
    pub fn new(session: SessionId, token: u64, lease: Option<Duration>) -> Self {
        Self { session, token, lease }
    }

    /// The session owned.
    pub fn session(&self) -> &SessionId {
        &self.session
    }

    /// The fencing token.
    pub fn token(&self) -> u64 {
        self.token
    }

    /// How long the ownership lasts without renewal; `None` until released.
    pub fn lease(&self) -> Option<Duration> {
        self.lease
    }
}

/// Where sessions are kept. Every method is one write or one read, atomic: a write either
/// happens whole or fails without effect (an append cut by a crash is a torn record that
/// loading leaves out and reports). Calls may block: drivers make them off their
/// executor's threads. Implementations must be safe to share between threads and between
/// processes holding the same store.
///
/// **One writer per session.** Writing takes ownership ([`create`](Self::create) or
/// [`claim`](Self::claim)), which holds until [`release`](Self::release), the end of the
/// owner's process, or the lapse of a lease; every write is fenced by its [`Claim`].
/// Reading ([`load`](Self::load), [`list`](Self::list)) needs none: a reader sees the
/// last whole write. Whole-state writes are safe under this rule: a write either comes
/// from the one owner, which holds the newest state, or is refused.
pub trait Store: Send + Sync + 'static {
    /// Creates session `id` with `state` and no node, owned by the caller:
    /// [`StoreErrorKind::Exists`] when it exists, decided atomically (two creators of one
    /// id: one wins).
    fn create(&self, id: &SessionId, state: &SessionState) -> Result<Claim, StoreError>;

    /// Takes ownership of session `id`: [`StoreErrorKind::OwnedElsewhere`] at once (no
    /// waiting) while another owner holds it, [`StoreErrorKind::NotFound`] when there is
    /// no such session. A claim taken after a crashed owner's is always possible.
    fn claim(&self, id: &SessionId) -> Result<Claim, StoreError>;

    /// Extends a lease (nothing to do for ownership that lasts until released, but the
    /// check that `claim` still owns its session): [`StoreErrorKind::NotOwner`] when it
    /// does not.
    fn renew(&self, claim: &Claim) -> Result<(), StoreError>;

    /// Extends every lease of `claims` at once, one answer per claim in order: what a
    /// node that runs many sessions calls once per interval instead of one `renew` per
    /// session. A store shared by machines does it in one statement; the default renews
    /// them one by one.
    fn renew_many(&self, claims: &[Claim]) -> Vec<Result<(), StoreError>> {
        claims.iter().map(|claim| self.renew(claim)).collect()
    }

    /// Gives up ownership; a claim that no longer owns its session is released already
    /// (`Ok`).
    fn release(&self, claim: &Claim) -> Result<(), StoreError>;

    /// Appends `nodes` to the claimed session's: refused ([`StoreErrorKind::Conflict`],
    /// nothing written) unless they are the next ids in order, each parent before its
    /// node.
    fn append_nodes(&self, claim: &Claim, nodes: &[Node]) -> Result<(), StoreError>;

    /// Replaces the claimed session's nodes with `tree`'s.
    fn save_tree(&self, claim: &Claim, tree: &Tree) -> Result<(), StoreError>;

    /// Replaces the claimed session's state map.
    fn save_state(&self, claim: &Claim, state: &SessionState) -> Result<(), StoreError>;

    /// Session `id`: its tree (position restored from the state) and state, as the last
    /// whole write left them. Needs no ownership.
    fn load(&self, id: &SessionId) -> Result<Loaded, StoreError>;

    /// Up to `limit` sessions after the first `offset`, the most recently written first,
    /// and the entries that are not readable sessions.
    fn list(&self, limit: usize, offset: usize) -> Result<SessionList, StoreError>;

    /// Deletes session `id`; false when there was none. Refused
    /// ([`StoreErrorKind::OwnedElsewhere`]) while an owner holds it.
    fn delete(&self, id: &SessionId) -> Result<bool, StoreError>;

    /// Whether session `id` exists.
    fn exists(&self, id: &SessionId) -> Result<bool, StoreError>;
}

/// Whether `nodes` may be appended to a session whose next node id is `next`: the next
/// ids in order, each parent before its node. Every store's `append_nodes` asks this
/// before writing, so that what it holds is always a tree that loads.
pub fn check_append(next: u64, nodes: &[Node], location: &str) -> Result<(), StoreError> {
    for (expected, node) in (next..).zip(nodes) {
        let why = if node.id.0 != expected {
            format!("node {} appended where node {expected} is next", node.id)
        } else if node.parent.is_some_and(|parent| parent >= node.id) {
            format!("node {} names a parent that does not precede it", node.id)
        } else {
            continue;
        };
        return Err(StoreError::new(StoreErrorKind::Conflict, location, why));
    }
    Ok(())
}

/// The tree of loaded `nodes` with `state`'s position, for a store's [`Store::load`]: a
/// broken tree or position is [`StoreErrorKind::Corrupt`] at `location`.
pub fn assemble(
    nodes: Vec<Node>,
    state: SessionState,
    warnings: Vec<StoreWarning>,
    location: &str,
) -> Result<Loaded, StoreError> {
    let corrupt = |e: super::tree::TreeError| StoreError::new(StoreErrorKind::Corrupt, location, e.to_string());
    let mut tree = Tree::from_nodes(nodes).map_err(corrupt)?;
    tree.restore(&state.position).map_err(corrupt)?;
    Ok(Loaded { tree, state, warnings })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_url_safe_and_bounded() {
        assert!(SessionId::new("abc-DEF_123").is_ok());
        for bad in ["", "a/b", "a b", "..", "é", &"a".repeat(MAX_ID_LEN + 1)] {
            assert!(SessionId::new(bad).is_err(), "{bad:?}");
        }
        assert!(serde_json::from_str::<SessionId>("\"../etc\"").is_err(), "checked when read back too");
    }

    #[test]
    fn a_random_id_is_the_bytes_in_url_safe_base64() {
        assert_eq!(SessionId::from_random([0; 16]).as_str(), "AAAAAAAAAAAAAAAAAAAAAA");
        assert_eq!(SessionId::from_random([0xff; 16]).as_str(), "_____________________w");
        let bytes: [u8; 16] = *b"session id bytes";
        // RFC 4648 §5 alphabet, no padding: "c2Vzc2lvbiBpZCBieXRlcw==" in standard base64.
        assert_eq!(SessionId::from_random(bytes).as_str(), "c2Vzc2lvbiBpZCBieXRlcw");
        assert!(SessionId::new(SessionId::from_random(bytes).as_str()).is_ok());
    }
}
