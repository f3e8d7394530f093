//! The store's tables, and getting a database to them.
//!
//! The tables are named `omni_store_*` and the schema's version is kept in a table of its
//! own, `omni_store_schema`: a database may be an application's own, and its table names
//! and `PRAGMA user_version` are the application's. Version 1 of this store used
//! `sessions` and `nodes` and `user_version = 1`; such a database is moved to the new
//! names in one transaction, every session kept, and its `user_version` given back (0).
//!
//! Opening reads the schema in a read transaction, and takes the write lock only when
//! there is something to create or migrate: a handle opens while another process holds a
//! long write transaction, and opens a read-only database.

use rusqlite::{Connection, TransactionBehavior};

use super::sql_error;
use crate::{StoreError, StoreErrorKind};

/// The schema version this code writes and reads (1 was the unprefixed tables).
pub(super) const VERSION: i64 = 2;

/// `seq` orders sessions written in the same millisecond: every write sets it one above
/// the highest, so `updated_ms DESC, seq DESC` is the order of the writes. `owner` is the
/// fencing token of the session's last claim: every write checks it in its own
/// transaction, so fencing holds even where the lock files cannot be trusted (two
/// machines sharing the file over a network filesystem whose locks lie).
const SCHEMA: &str = "
    CREATE TABLE omni_store_schema (version INTEGER NOT NULL);
    CREATE TABLE omni_store_sessions (
        id TEXT PRIMARY KEY NOT NULL,
        state TEXT NOT NULL,
        title TEXT,
        created_ms INTEGER NOT NULL,
        updated_ms INTEGER NOT NULL,
        seq INTEGER NOT NULL,
        owner INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX omni_store_sessions_recent ON omni_store_sessions (updated_ms DESC, seq DESC);
    CREATE INDEX omni_store_sessions_seq ON omni_store_sessions (seq);
    CREATE TABLE omni_store_nodes (
        session TEXT NOT NULL REFERENCES omni_store_sessions (id) ON DELETE CASCADE,
        id INTEGER NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (session, id)
    ) WITHOUT ROWID;
";

/// This version's tables.
const TABLES: [&str; 3] = ["omni_store_schema", "omni_store_sessions", "omni_store_nodes"];

/// Version 1's tables and their columns, exactly: only such tables, with
/// `user_version = 1`, are taken for this store's own.
const V1_SESSIONS: [&str; 6] = ["id", "state", "title", "created_ms", "updated_ms", "seq"];
const V1_NODES: [&str; 3] = ["session", "id", "body"];

/// Version 1's rows, moved to this version's tables (nobody owns a session yet), and
/// version 1's tables dropped (the nodes first: they refer to the sessions).
const MIGRATE_V1: &str = "
    INSERT INTO omni_store_sessions (id, state, title, created_ms, updated_ms, seq, owner)
        SELECT id, state, title, created_ms, updated_ms, seq, 0 FROM sessions;
    INSERT INTO omni_store_nodes (session, id, body) SELECT session, id, body FROM nodes;
    DROP TABLE nodes;
    DROP TABLE sessions;
    PRAGMA user_version = 0;
";

/// What a database holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Found {
    /// This version's tables.
    Current,
    /// None of this store's tables.
    Fresh,
    /// Version 1's tables.
    V1,
}

/// A database's tables: this store's, as found, and any others.
#[derive(Debug)]
struct Inspection {
    found: Found,
    /// Tables that are not this store's.
    foreign: Vec<String>,
}

/// Gets the database on `connection` to this version's schema: nothing to do when it is
/// there (checked in a read transaction), else created or migrated under the write lock.
/// `shared`: tables of another application may be there; else they are refused before
/// anything is written. `writable`: false for a read-only database, which must hold the
/// current schema already.
pub(super) fn prepare(
    connection: &mut Connection,
    location: &str,
    shared: bool,
    writable: bool,
) -> Result<(), StoreError> {
    let fail = |e| sql_error(e, location);
    let found = {
        let tx = connection.transaction_with_behavior(TransactionBehavior::Deferred).map_err(fail)?;
        inspect(&tx, location, shared)?
    };
    if !writable {
        if found == Found::Current {
            return Ok(());
        }
        let why = match found {
            Found::V1 => "it holds version 1 of the store's tables, which must be migrated: open it writable once",
            _ => "it holds none of the store's tables, and cannot be given them",
        };
        return Err(StoreError::new(StoreErrorKind::Denied, location, format!("the database is read-only: {why}")));
    }
    // Only now, the database accepted: a refused one is left exactly as it was.
    switch_to_wal(connection, location)?;
    if found == Found::Current {
        return Ok(());
    }
    // IMMEDIATE: two handles opening one new file both find it fresh; the second to get
    // the write lock inspects it again and finds the first one's work.
    let tx = connection.transaction_with_behavior(TransactionBehavior::Immediate).map_err(fail)?;
    match inspect(&tx, location, shared)? {
        Found::Current => {}
        Found::Fresh => tx.execute_batch(SCHEMA).map_err(fail)?,
        Found::V1 => {
            tx.execute_batch(SCHEMA).map_err(fail)?;
            tx.execute_batch(MIGRATE_V1).map_err(fail)?;
        }
    }
    if tx.query_row("SELECT COUNT(*) FROM omni_store_schema", [], |row| row.get::<_, i64>(0)).map_err(fail)? == 0 {
        tx.execute("INSERT INTO omni_store_schema (version) VALUES (?1)", [VERSION]).map_err(fail)?;
    }
    tx.commit().map_err(fail)
}

/// Puts the database in WAL mode unless it is already (the mode is kept in the file, and
/// switching needs every other connection out of the way).
fn switch_to_wal(connection: &Connection, location: &str) -> Result<(), StoreError> {
    let fail = |e| sql_error(e, location);
    let mode: String = connection.query_row("PRAGMA journal_mode", [], |row| row.get(0)).map_err(fail)?;
    if mode.eq_ignore_ascii_case("wal") {
        return Ok(());
    }
    let mode = super::wal_mode(connection).map_err(fail)?;
    if mode.eq_ignore_ascii_case("wal") {
        Ok(())
    } else {
        Err(StoreError::new(StoreErrorKind::Io, location, format!("journal mode is {mode}, not WAL")))
    }
}

/// What the database holds, refusing what this store cannot use: a newer version, a
/// damaged schema, or (unless `shared`) tables of another application.
fn inspect(connection: &Connection, location: &str, shared: bool) -> Result<Found, StoreError> {
    let Inspection { found, foreign } = tables(connection, location)?;
    if !shared && !foreign.is_empty() {
        let message = format!(
            "the database holds tables of another application ({}): open it with SqliteStore::open_shared to keep \
             sessions beside them",
            foreign.join(", ")
        );
        return Err(StoreError::new(StoreErrorKind::Denied, location, message));
    }
    Ok(found)
}

fn tables(connection: &Connection, location: &str) -> Result<Inspection, StoreError> {
    let fail = |e| sql_error(e, location);
    // The first read of the file: a file that is not a database fails here.
    let mut select = connection
        .prepare("SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'")
        .map_err(fail)?;
    let names: Vec<String> =
        select.query_map([], |row| row.get(0)).map_err(fail)?.collect::<Result<_, _>>().map_err(fail)?;
    let has = |table: &str| names.iter().any(|name| name == table);
    let others = |ours: &[&str]| names.iter().filter(|name| !ours.contains(&name.as_str())).cloned().collect();
    if has(TABLES[0]) {
        let version: Option<i64> =
            connection.query_row("SELECT MAX(version) FROM omni_store_schema", [], |row| row.get(0)).map_err(fail)?;
        return match version {
            Some(VERSION) if TABLES.iter().all(|table| has(table)) => {
                Ok(Inspection { found: Found::Current, foreign: others(&TABLES) })
            }
            // Newer (or nonsense): left untouched, never downgraded. Not `Corrupt`, which
            // might invite deleting it: this code is too old to read it.
            Some(other) if other > VERSION => Err(StoreError::new(
                StoreErrorKind::Io,
                location,
                format!(
                    "the database's schema is version {other}; this omni-store knows up to {VERSION}: use a newer one"
                ),
            )),
            _ => Err(StoreError::new(StoreErrorKind::Corrupt, location, "the store's schema table is damaged")),
        };
    }
    if TABLES.iter().any(|table| has(table)) {
        return Err(StoreError::new(
            StoreErrorKind::Corrupt,
            location,
            "the store's tables without their schema version",
        ));
    }
    if is_v1(connection, &names).map_err(fail)? {
        return Ok(Inspection { found: Found::V1, foreign: others(&["sessions", "nodes"]) });
    }
    Ok(Inspection { found: Found::Fresh, foreign: names })
}

/// Whether the database holds version 1 of this store's tables: `user_version = 1`, and
/// `sessions` and `nodes` with exactly version 1's columns.
fn is_v1(connection: &Connection, names: &[String]) -> rusqlite::Result<bool> {
    if !["sessions", "nodes"].iter().all(|table| names.iter().any(|name| name == table)) {
        return Ok(false);
    }
    let version: i64 = connection.pragma_query_value(None, "user_version", |row| row.get(0))?;
    Ok(version == 1 && columns(connection, "sessions")? == V1_SESSIONS && columns(connection, "nodes")? == V1_NODES)
}

fn columns(connection: &Connection, table: &str) -> rusqlite::Result<Vec<String>> {
    let mut select = connection.prepare("SELECT name FROM pragma_table_info(?1) ORDER BY cid")?;
    let names = select.query_map([table], |row| row.get(0))?.collect();
    names
}

/// The schema version in `connection`'s database, for tests.
#[cfg(test)]
pub(super) fn version(connection: &Connection) -> rusqlite::Result<Option<i64>> {
    connection.query_row("SELECT MAX(version) FROM omni_store_schema", [], |row| row.get(0))
}
