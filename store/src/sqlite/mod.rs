//! The SQLite store: one database file for many sessions. WAL mode with `synchronous=FULL`
//! (a commit reported saved is in the synced WAL, so it survives the process being killed
//! or the machine losing power), a busy timeout (several handles and processes share one
//! file: they wait for each other instead of failing), and a transaction per write, begun
//! `IMMEDIATE` so that concurrent writers queue for the write lock up front instead of
//! failing when a read lock cannot be upgraded.
//!
//! The tables are the store's own, under names no application would use ([`schema`]): a
//! session is a row of `omni_store_sessions` (its state as JSON, the title copied out for
//! `list`, its times, a write counter and its owner's fencing token) and its nodes are
//! rows of `omni_store_nodes` (each node as JSON, keyed by session and node id, deleted
//! with their session by a cascading foreign key). A database holding other tables is an
//! application's: the store keeps its sessions there only when opened with
//! [`SqliteStore::open_shared`]. A database that cannot be written is opened read-only
//! ([`connect`]).
//!
//! Ownership: a lock file per session in a folder beside the database (`<db>.omni-locks/`),
//! locked by the owner ([`crate::lock`]). SQLite's own locks last one transaction and
//! a row naming an owner outlives a crashed one; a file lock is held across transactions
//! and goes with the owner's process. The row keeps the token of its last claim too, and
//! every write checks it in the write's own transaction: should two machines share the
//! file over a network filesystem whose locks lie, the later claim still fences the
//! earlier one.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use omni_protocol::session::{assemble, check_append};
use omni_protocol::session::{Node, Tree};
use rusqlite::types::Value;
use rusqlite::{params, Connection, ErrorCode, OptionalExtension, Row, Transaction, TransactionBehavior};

use crate::lock::{owned_elsewhere, Locking, Owners, SessionLock};
use crate::{Claim, Loaded, SessionId, SessionInfo, SessionList, SessionState, Store, StoreError, StoreErrorKind};

use self::connect::Mode;

mod connect;
mod schema;

/// How long a handle waits for another one's write lock before giving up with
/// [`StoreErrorKind::Io`].
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Stamps a session as written now (its time, and the next write counter), if `?3` is
/// its owner's token.
const TOUCH: &str = "UPDATE omni_store_sessions
    SET updated_ms = ?2, seq = (SELECT COALESCE(MAX(seq), 0) + 1 FROM omni_store_sessions)
    WHERE id = ?1 AND owner = ?3";

/// Sessions in one SQLite database file (see the module's doc). Each handle holds one
/// connection; open several on one file, in one process or many, and they take turns.
#[derive(Debug)]
pub struct SqliteStore {
    /// rusqlite's connection is `Send` but not `Sync`: one call at a time per handle.
    connection: Mutex<Connection>,
    /// Whether writes can succeed (false for a read-only database or handle).
    writable: bool,
    /// The database's path, as every error names it.
    path: String,
    /// The folder of the sessions' lock files.
    locks: PathBuf,
    /// The sessions this handle owns.
    owners: Owners,
}

impl SqliteStore {
    /// Opens (creating it if need be) the database at `path`, and its schema; read-only
    /// when it cannot be written. A database holding tables of another application is
    /// refused ([`StoreErrorKind::Denied`], nothing written): see [`Self::open_shared`].
    /// A file that is not a database is [`StoreErrorKind::Corrupt`]; a database written
    /// by a newer version of this store is [`StoreErrorKind::Io`] (nothing is wrong with
    /// it, this code is too old to read it; never `Corrupt`, which might invite deleting
    /// it).
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        Self::open_as(path.as_ref(), Mode::default())
    }

    /// As [`Self::open`], in a database that may hold an application's own tables: the
    /// store's are beside them, under names of their own (`omni_store_*`).
    pub fn open_shared(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        Self::open_as(path.as_ref(), Mode { shared: true, ..Mode::default() })
    }

    /// As [`Self::open`], never writing (a viewer): loads and lists; creates, claims,
    /// writes and deletions are [`StoreErrorKind::Denied`]. The database must hold the
    /// store's current tables.
    pub fn open_read_only(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        Self::open_as(path.as_ref(), Mode { read_only: true, ..Mode::default() })
    }

    fn open_as(path: &Path, mode: Mode) -> Result<Self, StoreError> {
        let location = path.display().to_string();
        let opened = connect::open(path, &location, mode)?;
        let mut locks = path.as_os_str().to_owned();
        locks.push(".omni-locks");
        Ok(Self {
            connection: Mutex::new(opened.connection),
            writable: opened.writable,
            path: location,
            locks: locks.into(),
            owners: Owners::default(),
        })
    }

    /// Whether this handle can write: a read-only one cannot.
    pub fn is_writable(&self) -> bool {
        self.writable
    }

    fn connection(&self) -> MutexGuard<'_, Connection> {
        // A panic while the lock was held cannot have left a transaction open (dropping it
        // rolls back), so the connection is as good as before.
        self.connection.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn fail(&self) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
        |e| sql_error(e, &self.path)
    }

    fn session_location(&self, id: &SessionId) -> String {
        format!("{}:sessions({id})", self.path)
    }

    /// `Ok` when this handle may write; [`StoreErrorKind::Denied`] for a read-only one,
    /// before any lock is taken.
    fn writable(&self, id: &SessionId) -> Result<(), StoreError> {
        if self.writable {
            Ok(())
        } else {
            Err(StoreError::new(StoreErrorKind::Denied, self.session_location(id), "the database is open read-only"))
        }
    }

    /// Runs `write` in one `IMMEDIATE` transaction and commits it; an error rolls it back.
    fn write<T>(&self, write: impl FnOnce(&Transaction<'_>) -> Result<T, StoreError>) -> Result<T, StoreError> {
        let mut connection = self.connection();
        let tx = connection.transaction_with_behavior(TransactionBehavior::Immediate).map_err(self.fail())?;
        let value = write(&tx)?;
        tx.commit().map_err(self.fail())?;
        Ok(value)
    }

    /// Runs `write` for `claim`'s owner: checked against the lock this handle holds, then
    /// against the row's owner token inside the write's own transaction (a claim taken
    /// since, anywhere, fences this one), the session stamped as written.
    fn write_owned<T>(
        &self,
        claim: &Claim,
        write: impl FnOnce(&Transaction<'_>) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let id = claim.session();
        self.writable(id)?;
        self.owned(claim)?;
        self.write(|tx| {
            let token = token_value(claim.token());
            if tx.execute(TOUCH, params![id.as_str(), now_ms(), token]).map_err(self.fail())? == 0 {
                return Err(self.fenced(tx, claim));
            }
            write(tx)
        })
    }

    /// Why `claim`'s write found no row of its own: none at all, or another owner's.
    fn fenced(&self, tx: &Transaction<'_>, claim: &Claim) -> StoreError {
        let owner: Result<Option<i64>, _> = tx
            .query_row("SELECT owner FROM omni_store_sessions WHERE id = ?1", [claim.session().as_str()], |row| {
                row.get(0)
            })
            .optional();
        match owner {
            Ok(None) => self.not_found(claim.session()),
            Ok(Some(owner)) => StoreError::new(
                StoreErrorKind::NotOwner,
                self.session_location(claim.session()),
                format!("claim {} does not own the session: the database names owner {owner}", claim.token()),
            ),
            Err(e) => sql_error(e, &self.path),
        }
    }

    fn insert_nodes(&self, tx: &Transaction<'_>, id: &SessionId, nodes: &[Node]) -> Result<(), StoreError> {
        let mut insert = tx
            .prepare_cached("INSERT INTO omni_store_nodes (session, id, body) VALUES (?1, ?2, ?3)")
            .map_err(self.fail())?;
        for node in nodes {
            let body = serde_json::to_string(node).map_err(|e| self.unwritable(e))?;
            insert.execute(params![id.as_str(), node_key(node), body]).map_err(|e| match e.sqlite_error_code() {
                // Checked before for appends; a backstop that names the node.
                Some(ErrorCode::ConstraintViolation) => StoreError::new(
                    StoreErrorKind::Conflict,
                    self.node_location(id, node_key(node)),
                    "the session has this node already",
                ),
                _ => sql_error(e, &self.path),
            })?;
        }
        Ok(())
    }

    fn not_found(&self, id: &SessionId) -> StoreError {
        StoreError::new(StoreErrorKind::NotFound, self.session_location(id), "no such session")
    }

    fn node_location(&self, id: &SessionId, node: i64) -> String {
        format!("{}:nodes({id},{node})", self.path)
    }

    fn unwritable(&self, e: serde_json::Error) -> StoreError {
        StoreError::new(StoreErrorKind::Io, &self.path, format!("cannot write as JSON: {e}"))
    }

    /// Takes session `id`'s lock, for a claim or a deletion.
    fn lock(&self, id: &SessionId) -> Result<SessionLock, StoreError> {
        let io = |e: std::io::Error, doing: &str| {
            let kind = if e.kind() == std::io::ErrorKind::PermissionDenied {
                StoreErrorKind::Denied
            } else {
                StoreErrorKind::Io
            };
            StoreError::new(kind, self.locks.display().to_string(), format!("{doing}: {e}"))
        };
        std::fs::create_dir_all(&self.locks).map_err(|e| io(e, "creating the lock folder"))?;
        match SessionLock::take(&self.locks.join(id.as_str()), false) {
            Ok(Locking::Taken(lock)) => Ok(lock),
            Ok(Locking::Held) => Err(owned_elsewhere(&self.session_location(id))),
            Err(e) => Err(io(e, "locking the session")),
        }
    }

    /// `Ok` when `claim` owns its session here.
    fn owned(&self, claim: &Claim) -> Result<(), StoreError> {
        self.owners.check(claim, &self.session_location(claim.session()))
    }

    fn state_json(&self, state: &SessionState) -> Result<String, StoreError> {
        serde_json::to_string(state).map_err(|e| self.unwritable(e))
    }

    /// A row of `list`'s query as a session, or why it is not one.
    fn info(&self, row: &Row<'_>) -> Result<SessionInfo, StoreError> {
        let id = match row.get::<_, Value>(0).map_err(self.fail())? {
            Value::Text(id) => id,
            other => format!("{other:?}"),
        };
        let location = format!("{}:sessions({id})", self.path);
        let corrupt = |why: String| StoreError::new(StoreErrorKind::Corrupt, &location, why);
        let id = SessionId::new(id).map_err(|e| corrupt(e.to_string()))?;
        let title: Option<String> = row.get(1).map_err(|e| corrupt(e.to_string()))?;
        let created_ms: i64 = row.get(2).map_err(|e| corrupt(e.to_string()))?;
        let updated_ms: i64 = row.get(3).map_err(|e| corrupt(e.to_string()))?;
        // Parsed, not shown: a session whose state does not parse would not load.
        let state: String = row.get(4).map_err(|e| corrupt(e.to_string()))?;
        serde_json::from_str::<SessionState>(&state).map_err(|e| corrupt(format!("its state: {e}")))?;
        // Times before the epoch (a clock set far back) read as the epoch.
        let ms = |t: i64| u64::try_from(t).unwrap_or(0);
        Ok(SessionInfo { id, title, created_ms: ms(created_ms), updated_ms: ms(updated_ms) })
    }
}

impl Store for SqliteStore {
    fn create(&self, id: &SessionId, state: &SessionState) -> Result<Claim, StoreError> {
        self.writable(id)?;
        let json = self.state_json(state)?;
        // The lock before the row: the session is owned from the moment it exists. A lock
        // held by another means the id is in use (being created or owned).
        let lock = match self.lock(id) {
            Ok(lock) => lock,
            Err(e) if e.kind == StoreErrorKind::OwnedElsewhere => {
                return Err(StoreError::new(StoreErrorKind::Exists, e.location, "a session with this id exists"))
            }
            Err(e) => return Err(e),
        };
        let token = token_value(lock.token());
        self.write(|tx| {
            let now = now_ms();
            // The primary key decides, atomically: no check-then-write.
            let inserted = tx.execute(
                "INSERT INTO omni_store_sessions (id, state, title, created_ms, updated_ms, seq, owner)
                 VALUES (?1, ?2, ?3, ?4, ?4, (SELECT COALESCE(MAX(seq), 0) + 1 FROM omni_store_sessions), ?5)",
                params![id.as_str(), json, state.title, now, token],
            );
            match inserted {
                Ok(_) => Ok(()),
                Err(e) if e.sqlite_error_code() == Some(ErrorCode::ConstraintViolation) => Err(StoreError::new(
                    StoreErrorKind::Exists,
                    self.session_location(id),
                    "a session with this id exists",
                )),
                Err(e) => Err(sql_error(e, &self.path)),
            }
        })?;
        Ok(self.owners.keep(id, lock))
    }

    fn claim(&self, id: &SessionId) -> Result<Claim, StoreError> {
        self.writable(id)?;
        // Checked first so that ids never made leave no lock file behind.
        if !self.exists(id)? {
            return Err(self.not_found(id));
        }
        let mut lock = self.lock(id)?;
        // The new owner's token in the row, in a write transaction: from its commit on,
        // every earlier owner's write is refused by the database itself. It is above the
        // row's last owner's as well as the lock file's count, so that two claimers whose
        // file locks did not exclude each other (a network file system that ignores them)
        // still get different tokens, and the later one fences the earlier.
        let token = self.write(|tx| {
            let last: Option<i64> = tx
                .query_row("SELECT owner FROM omni_store_sessions WHERE id = ?1", [id.as_str()], |row| row.get(0))
                .optional()
                .map_err(self.fail())?
                .ok_or_else(|| self.not_found(id))?;
            let after_last = last.and_then(|owner| owner.checked_add(1)).unwrap_or(0);
            let token = token_value(lock.token()).max(after_last);
            tx.execute("UPDATE omni_store_sessions SET owner = ?2 WHERE id = ?1", params![id.as_str(), token])
                .map_err(self.fail())?;
            Ok(token)
        })?;
        let location = self.session_location(id);
        lock.raise(u64::try_from(token).unwrap_or(0))
            .map_err(|e| StoreError::new(StoreErrorKind::Io, location, format!("counting the owner: {e}")))?;
        Ok(self.owners.keep(id, lock))
    }

    fn renew(&self, claim: &Claim) -> Result<(), StoreError> {
        self.owned(claim)
    }

    fn release(&self, claim: &Claim) -> Result<(), StoreError> {
        self.owners.release(claim);
        Ok(())
    }

    /// Refuses ([`StoreErrorKind::Conflict`], nothing written) nodes that are not the
    /// session's next ids in order, or whose parent does not precede them: stored, they
    /// would make a tree that no longer loads.
    fn append_nodes(&self, claim: &Claim, nodes: &[Node]) -> Result<(), StoreError> {
        let id = claim.session();
        self.write_owned(claim, |tx| {
            let next: i64 = tx
                .query_row(
                    "SELECT COALESCE(MAX(id) + 1, 0) FROM omni_store_nodes WHERE session = ?1",
                    [id.as_str()],
                    |row| row.get(0),
                )
                .map_err(self.fail())?;
            let next = u64::try_from(next).unwrap_or(0);
            check_append(next, nodes, &format!("{}:nodes({id})", self.path))?;
            self.insert_nodes(tx, id, nodes)
        })
    }

    fn save_tree(&self, claim: &Claim, tree: &Tree) -> Result<(), StoreError> {
        let id = claim.session();
        self.write_owned(claim, |tx| {
            tx.execute("DELETE FROM omni_store_nodes WHERE session = ?1", [id.as_str()]).map_err(self.fail())?;
            self.insert_nodes(tx, id, tree.nodes())
        })
    }

    fn save_state(&self, claim: &Claim, state: &SessionState) -> Result<(), StoreError> {
        let json = self.state_json(state)?;
        self.write_owned(claim, |tx| {
            tx.execute(
                "UPDATE omni_store_sessions SET state = ?2, title = ?3 WHERE id = ?1",
                params![claim.session().as_str(), json, state.title],
            )
            .map_err(self.fail())?;
            Ok(())
        })
    }

    fn load(&self, id: &SessionId) -> Result<Loaded, StoreError> {
        let mut connection = self.connection();
        // One read transaction: the state and the nodes from the same snapshot, even while
        // another handle writes.
        let tx = connection.transaction_with_behavior(TransactionBehavior::Deferred).map_err(self.fail())?;
        let state: String = tx
            .query_row("SELECT state FROM omni_store_sessions WHERE id = ?1", [id.as_str()], |row| row.get(0))
            .optional()
            .map_err(self.fail())?
            .ok_or_else(|| self.not_found(id))?;
        let state: SessionState = serde_json::from_str(&state)
            .map_err(|e| StoreError::new(StoreErrorKind::Corrupt, self.session_location(id), e.to_string()))?;
        let mut select =
            tx.prepare("SELECT id, body FROM omni_store_nodes WHERE session = ?1 ORDER BY id").map_err(self.fail())?;
        let mut rows = select.query([id.as_str()]).map_err(self.fail())?;
        let mut nodes = Vec::new();
        while let Some(row) = rows.next().map_err(self.fail())? {
            let key: i64 = row.get(0).map_err(self.fail())?;
            let corrupt = |why: String| StoreError::new(StoreErrorKind::Corrupt, self.node_location(id, key), why);
            let body: String = row.get(1).map_err(|e| corrupt(e.to_string()))?;
            let node: Node = serde_json::from_str(&body).map_err(|e| corrupt(e.to_string()))?;
            if node_key(&node) != key {
                return Err(corrupt(format!("the row holds node {}", node.id)));
            }
            nodes.push(node);
        }
        assemble(nodes, state, Vec::new(), &format!("{}:nodes({id})", self.path))
    }

    /// Every row is read, so that every bad one (an id that is not one, a state that does
    /// not parse) is reported, on every page, and none shifts the pages of the rest.
    fn list(&self, limit: usize, offset: usize) -> Result<SessionList, StoreError> {
        let connection = self.connection();
        let mut select = connection
            .prepare_cached(
                "SELECT id, title, created_ms, updated_ms, state FROM omni_store_sessions
                 ORDER BY updated_ms DESC, seq DESC",
            )
            .map_err(self.fail())?;
        let mut rows = select.query([]).map_err(self.fail())?;
        let mut page = SessionList::pager(limit, offset);
        while let Some(row) = rows.next().map_err(self.fail())? {
            page.push(self.info(row));
        }
        Ok(page.finish())
    }

    fn delete(&self, id: &SessionId) -> Result<bool, StoreError> {
        self.writable(id)?;
        if self.owners.holds(id) {
            return Err(owned_elsewhere(&self.session_location(id)));
        }
        if !self.exists(id)? {
            return Ok(false);
        }
        // Held through the delete: no owner can come between. The lock file stays (a
        // claimer that opened it would otherwise lock a file nobody else looks at).
        let _lock = self.lock(id)?;
        // The nodes go with the row (ON DELETE CASCADE), in the same transaction.
        self.write(|tx| {
            let deleted = tx.execute("DELETE FROM omni_store_sessions WHERE id = ?1", [id.as_str()]);
            Ok(deleted.map_err(self.fail())? > 0)
        })
    }

    fn exists(&self, id: &SessionId) -> Result<bool, StoreError> {
        self.connection()
            .query_row("SELECT 1 FROM omni_store_sessions WHERE id = ?1", [id.as_str()], |_| Ok(()))
            .optional()
            .map(|row| row.is_some())
            .map_err(self.fail())
    }
}

/// A fencing token as SQLite's integer. Tokens count owners, so they are far below 2^63.
fn token_value(token: u64) -> i64 {
    i64::try_from(token).unwrap_or(i64::MAX)
}

/// Puts the database in WAL mode (a no-op once it is: the mode is kept in the file), and
/// the mode it is in. Switching a new file to WAL needs every other connection out of the
/// way, and SQLite answers `SQLITE_BUSY` at once then, without calling the busy handler
/// (seen with eight handles opening one new file together): so this waits and tries again
/// itself, for as long as the busy timeout.
fn wal_mode(connection: &Connection) -> rusqlite::Result<String> {
    let started = Instant::now();
    loop {
        match connection.query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0)) {
            Err(e) if e.sqlite_error_code() == Some(ErrorCode::DatabaseBusy) && started.elapsed() < BUSY_TIMEOUT => {
                thread::sleep(Duration::from_millis(5));
            }
            done => return done,
        }
    }
}

/// A node's id as SQLite's integer. Ids count nodes, so they are far below 2^63.
fn node_key(node: &Node) -> i64 {
    i64::try_from(node.id.0).unwrap_or(i64::MAX)
}

/// Now, in milliseconds since the Unix epoch (a clock before it reads as the epoch).
fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// A SQLite failure as a store's: a lock still held when the busy timeout ran out is
/// [`StoreErrorKind::Io`], a refused permission [`StoreErrorKind::Denied`], a file that is
/// not a database or a damaged one [`StoreErrorKind::Corrupt`].
fn sql_error(e: rusqlite::Error, location: &str) -> StoreError {
    let kind = match e.sqlite_error_code() {
        Some(ErrorCode::PermissionDenied | ErrorCode::ReadOnly) => StoreErrorKind::Denied,
        Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt) => StoreErrorKind::Corrupt,
        _ => StoreErrorKind::Io,
    };
    let message = match e.sqlite_error_code() {
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => {
            format!("{e} (another handle held the database for more than {} s)", BUSY_TIMEOUT.as_secs())
        }
        _ => e.to_string(),
    };
    StoreError::new(kind, location, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `open` promised is in force on the handle's own connection (the crash test's
    /// guarantee rests on `synchronous = FULL`, which is per connection and not stored).
    #[test]
    fn a_handle_runs_in_wal_with_full_sync_and_foreign_keys() {
        let dir = std::env::temp_dir().join(format!("omni-sqlite-pragmas-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let store = SqliteStore::open(dir.join("s.db")).unwrap();
        let connection = store.connection();
        let pragma = |name: &str| -> String {
            connection.pragma_query_value(None, name, |row| row.get::<_, rusqlite::types::Value>(0)).map_or_else(
                |e| e.to_string(),
                |value| match value {
                    rusqlite::types::Value::Integer(n) => n.to_string(),
                    rusqlite::types::Value::Text(s) => s,
                    other => format!("{other:?}"),
                },
            )
        };
        assert_eq!(pragma("journal_mode"), "wal");
        assert_eq!(pragma("synchronous"), "2", "FULL");
        assert_eq!(pragma("foreign_keys"), "1");
        assert_eq!(pragma("user_version"), "0", "the application's, untouched");
        assert_eq!(schema::version(&connection).unwrap(), Some(schema::VERSION));
        drop(connection);
        drop(store);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn sqlite_failures_map_to_kinds() {
        let failure = |code: i32| rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(code), None);
        let kind = |code| sql_error(failure(code), "db").kind;
        assert_eq!(kind(rusqlite::ffi::SQLITE_READONLY), StoreErrorKind::Denied);
        assert_eq!(kind(rusqlite::ffi::SQLITE_PERM), StoreErrorKind::Denied);
        assert_eq!(kind(rusqlite::ffi::SQLITE_NOTADB), StoreErrorKind::Corrupt);
        assert_eq!(kind(rusqlite::ffi::SQLITE_CORRUPT), StoreErrorKind::Corrupt);
        assert_eq!(kind(rusqlite::ffi::SQLITE_FULL), StoreErrorKind::Io);
        let busy = sql_error(failure(rusqlite::ffi::SQLITE_BUSY), "db");
        assert_eq!(busy.kind, StoreErrorKind::Io);
        assert!(busy.message.contains("more than 5 s"), "{busy}");
    }
}
