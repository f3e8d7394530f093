//! Opening the database file: read-write when it can be, else read-only.
//!
//! A database may be readable and not writable: a read-only file (SQLite then opens it
//! read-only on its own), a read-only folder (no journal, WAL or shared-memory file can
//! be made beside it), or a handle asked for read-only. Such a handle loads and lists;
//! its writes and claims are [`StoreErrorKind::Denied`].
//!
//! A WAL database read in a read-only folder needs its shared-memory file, which the last
//! writer to close removed and nobody can make again: SQLite cannot open it but as
//! `immutable`, its promise that nothing changes the file. It holds there: a writer could
//! not make its WAL file either.

use std::path::Path;

use rusqlite::{Connection, ErrorCode, OpenFlags, MAIN_DB};

use super::{schema, sql_error, BUSY_TIMEOUT};
use crate::{StoreError, StoreErrorKind};

/// How a handle opens its database.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Mode {
    /// Tables of another application may be in the database.
    pub(super) shared: bool,
    /// Never write, even when the database could be written.
    pub(super) read_only: bool,
}

/// An open database, ready for the store.
#[derive(Debug)]
pub(super) struct Opened {
    pub(super) connection: Connection,
    /// Whether writes can succeed: false for a read-only database or handle.
    pub(super) writable: bool,
}

/// Why read-write opening failed: because the database cannot be written (read-only
/// opening may still work), or for another reason, said.
enum Failure {
    NotWritable,
    Other(StoreError),
}

/// The database at `path`, opened as `mode` says.
pub(super) fn open(path: &Path, location: &str, mode: Mode) -> Result<Opened, StoreError> {
    if !mode.read_only {
        match read_write(path, location, mode) {
            Ok(connection) => return Ok(Opened { connection, writable: true }),
            Err(Failure::NotWritable) => {}
            Err(Failure::Other(error)) => return Err(error),
        }
    }
    Ok(Opened { connection: read_only(path, location, mode)?, writable: false })
}

/// Whether `e` says the database (or its folder) cannot be written or opened for writing.
fn not_writable(e: &rusqlite::Error) -> bool {
    matches!(e.sqlite_error_code(), Some(ErrorCode::ReadOnly | ErrorCode::PermissionDenied | ErrorCode::CannotOpen))
}

fn read_write(path: &Path, location: &str, mode: Mode) -> Result<Connection, Failure> {
    let raw = |e: rusqlite::Error| {
        if not_writable(&e) {
            Failure::NotWritable
        } else {
            Failure::Other(sql_error(e, location))
        }
    };
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let mut connection = Connection::open_with_flags(path, flags).map_err(raw)?;
    // Before anything that locks: every later statement waits this long for a lock.
    connection.busy_timeout(BUSY_TIMEOUT).map_err(raw)?;
    // A write-protected file is opened read-only without a word: asked here.
    if connection.is_readonly(MAIN_DB).map_err(raw)? {
        return Err(Failure::NotWritable);
    }
    // The first read: a WAL database in a read-only folder fails here.
    probe(&connection).map_err(raw)?;
    // Per connection: sync the WAL at every commit; enforce the cascade on delete.
    connection.execute_batch("PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON;").map_err(raw)?;
    // Denied: the file refused a write (opening read-only may do), or the store refused
    // another application's database (which opening read-only refuses again, as such).
    schema::prepare(&mut connection, location, mode.shared, true).map_err(|error| match error.kind {
        StoreErrorKind::Denied => Failure::NotWritable,
        _ => Failure::Other(error),
    })?;
    Ok(connection)
}

fn read_only(path: &Path, location: &str, mode: Mode) -> Result<Connection, StoreError> {
    let fail = |e| sql_error(e, location);
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let mut connection = Connection::open_with_flags(path, flags).map_err(fail)?;
    connection.busy_timeout(BUSY_TIMEOUT).map_err(fail)?;
    if let Err(e) = probe(&connection) {
        // SQLite says CANTOPEN or READONLY_CANTINIT, by version and by what is missing.
        if !matches!(e.sqlite_error_code(), Some(ErrorCode::CannotOpen | ErrorCode::ReadOnly)) {
            return Err(fail(e));
        }
        // A WAL database whose shared-memory file cannot be made (see the module's doc).
        let flags = flags | OpenFlags::SQLITE_OPEN_URI;
        connection = Connection::open_with_flags(immutable_uri(path), flags).map_err(fail)?;
        probe(&connection).map_err(fail)?;
    }
    connection.execute_batch("PRAGMA foreign_keys = ON;").map_err(fail)?;
    schema::prepare(&mut connection, location, mode.shared, false)?;
    Ok(connection)
}

/// Reads the database's header and schema: the first statement to touch the file.
fn probe(connection: &Connection) -> rusqlite::Result<()> {
    connection.query_row("SELECT COUNT(*) FROM sqlite_schema", [], |row| row.get::<_, i64>(0)).map(drop)
}

/// The `file:` URI of `path`, opened immutable. Every byte but the unreserved ones and
/// `/` is percent-encoded, so no `?` or `#` in a name is read as the URI's.
fn immutable_uri(path: &Path) -> String {
    let text = path.to_string_lossy();
    #[cfg(windows)]
    let text = format!("/{}", text.replace('\\', "/"));
    let mut uri = String::from("file:");
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~/".contains(&byte) {
            uri.push(char::from(byte));
        } else {
            uri.push_str(&format!("%{byte:02X}"));
        }
    }
    uri.push_str("?immutable=1");
    uri
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_immutable_uri_encodes_what_a_uri_would_read() {
        assert_eq!(immutable_uri(Path::new("/tmp/a b/s?.db")), "file:/tmp/a%20b/s%3F.db?immutable=1");
        assert_eq!(immutable_uri(Path::new("rel/x#1.db")), "file:rel/x%231.db?immutable=1");
    }
}
