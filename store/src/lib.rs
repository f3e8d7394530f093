//! # omni-store
//!
//! Where sessions are kept, behind omni-protocol's [`Store`] trait (data in, data out): the
//! file store (a folder per session: `nodes.jsonl`, one node per line, appended and
//! synced; `session.json`, written to a temporary file, synced and renamed) and the
//! SQLite store (one database file for many sessions, WAL mode, a transaction per write),
//! and [`MemoryStore`] for sessions that need not outlive the process; with the feature
//! `postgres`, `PgStore`: sessions in a PostgreSQL database shared by machines, ownership
//! a lease with a fencing token, and presence (which session runs on which node, and a
//! feed of changes over `LISTEN`/`NOTIFY`). The first two
//! block while they read or write: the drivers call them off their executor's threads.
//!
//! Features: `sqlite` (default), `SqliteStore` (rusqlite, with the SQLite library
//! bundled and compiled from source); `postgres`, `PgStore` (the `postgres` crate, and
//! tokio through it).
//!
//! Every store enforces one writer per session ([`Claim`]): the file and SQLite stores
//! with a lock on a per-session lock file that the operating system drops when the
//! owner's process ends ([`lock`]), so a crashed owner never leaves a session locked.
//! [`suite`] is the conformance suite every store passes.

mod file;
pub mod lock;
mod memory;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "sqlite")]
mod sqlite;
pub mod suite;

pub use file::FileStore;
pub use memory::MemoryStore;
pub use omni_protocol::session::{
    Claim, Loaded, SessionId, SessionInfo, SessionList, SessionState, Store, StoreError, StoreErrorKind, StoreWarning,
};
#[cfg(feature = "postgres")]
pub use postgres::{testing as postgres_testing, PgStore};
#[cfg(feature = "sqlite")]
pub use sqlite::SqliteStore;
