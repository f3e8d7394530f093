//! What a store keeps of a session, and the [`Store`] trait stores implement: data in,
//! data out. Nothing here does I/O; a store (omni-store's files or SQLite) does, and a
//! driver calls it off its executor's threads. A session is its nodes (appended as turns
//! are committed, or written whole) and a small state map ([`SessionState`]: where the
//! path stands, the model, the title, ...), saved apart so that a commit writes only what
//! is new.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::tree::{Node, Position, Tree};

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

/// Something a store got past while loading.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreWarning {
    /// The last record was cut short (a crash in the middle of an append) and left out:
    /// it was never reported saved.
    TornRecord {
        /// Where: a file, or a table.
        location: String,
        /// Bytes left out.
        bytes: usize,
    },
}

/// What kind of failure a store met.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
}

impl StoreError {
    /// A failure of `kind` at `location`.
    pub fn new(kind: StoreErrorKind, location: impl Into<String>, message: impl Into<String>) -> Self {
        Self { kind, location: location.into(), message: message.into() }
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.location, self.message)
    }
}

impl std::error::Error for StoreError {}

/// Where sessions are kept. Every method is one write or one read, atomic: a write either
/// happens whole or fails without effect (an append cut by a crash is a torn record that
/// loading leaves out and reports). Calls may block: drivers make them off their
/// executor's threads. Implementations must be safe to share between threads and between
/// processes holding the same store.
pub trait Store: Send + Sync + 'static {
    /// Creates session `id` with `state` and no node; [`StoreErrorKind::Exists`] when it
    /// exists, decided atomically (two creators of one id: one wins).
    fn create(&self, id: &SessionId, state: &SessionState) -> Result<(), StoreError>;

    /// Appends `nodes` (the next ids, in order) to session `id`'s nodes.
    fn append_nodes(&self, id: &SessionId, nodes: &[Node]) -> Result<(), StoreError>;

    /// Replaces session `id`'s nodes with `tree`'s.
    fn save_tree(&self, id: &SessionId, tree: &Tree) -> Result<(), StoreError>;

    /// Replaces session `id`'s state map.
    fn save_state(&self, id: &SessionId, state: &SessionState) -> Result<(), StoreError>;

    /// Session `id`: its tree (position restored from the state) and state.
    fn load(&self, id: &SessionId) -> Result<Loaded, StoreError>;

    /// Up to `limit` sessions after the first `offset`, the most recently written first.
    fn list(&self, limit: usize, offset: usize) -> Result<Vec<SessionInfo>, StoreError>;

    /// Deletes session `id`; false when there was none.
    fn delete(&self, id: &SessionId) -> Result<bool, StoreError>;

    /// Whether session `id` exists.
    fn exists(&self, id: &SessionId) -> Result<bool, StoreError>;
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
