//! # omni-store
//!
//! Where sessions are kept, behind omni-core's [`Store`] trait (data in, data out): the
//! file store (a folder per session: `nodes.jsonl`, one node per line, appended and
//! synced; `session.json`, written to a temporary file, synced and renamed) and the
//! SQLite store (one database file for many sessions, WAL mode, a transaction per write),
//! and [`MemoryStore`] for sessions that need not outlive the process. The first two block while they read or write: the drivers call them off their executor's
//! threads. [`suite`] is the conformance suite every store passes.

mod file;
mod memory;
mod sqlite;
pub mod suite;

pub use file::FileStore;
pub use memory::MemoryStore;
pub use omni_core::machines::session::store::{
    Loaded, SessionId, SessionInfo, SessionState, Store, StoreError, StoreErrorKind, StoreWarning,
};
pub use sqlite::SqliteStore;
