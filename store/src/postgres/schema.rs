//! The store's tables in a PostgreSQL database, and getting a database to them.
//!
//! Every name is `omni_store_*` (tables, sequences, indexes): the database may be an
//! application's own, and the names it uses are its. The schema's version is the one row
//! of `omni_store_meta`; [`MIGRATIONS`] takes a database from any older version to this
//! one, each step in order, and a database of a newer version than this code knows is
//! refused untouched.
//!
//! Two processes connecting to a fresh database at once: both would find no tables and
//! both run `CREATE TABLE`, and the second would fail (or, with `IF NOT EXISTS`, skip a
//! half-made schema of the first without knowing which statements ran). So migrating
//! happens in one transaction that first takes `pg_advisory_xact_lock` on a key of this
//! store's own: the second process waits there until the first commits, then reads the
//! version again and finds nothing to do. The lock is a transaction's, so it ends with
//! the transaction whatever happens (a crashed migrator's rollback frees it), and it
//! works through a transaction-mode pooler because it never outlives the transaction.
//! DDL is transactional in PostgreSQL, so a migration either happens whole or not at all.
//! A database already at this version is recognised by one read, without the lock.

use postgres::Client;

use super::{pg_error, Location};
use crate::{StoreError, StoreErrorKind};

/// The schema version this code writes and reads: the number of [`MIGRATIONS`].
pub(crate) const VERSION: i64 = MIGRATIONS.len() as i64;

/// The key of the advisory lock migrations take: any fixed number will do as long as no
/// application uses it; this one is "omni_sto" in ASCII.
const MIGRATION_LOCK: i64 = 0x6f6d_6e69_5f73_746f;

/// Migration `n` (from 0) takes a database from version `n` to `n + 1`.
///
/// Version 1. A session is a row of `omni_store_sessions`: its state as JSON text (parsed
/// by the store, so that a damaged row is reported as such rather than refused by the
/// database on the way in), the title copied out for `list`, its times from the
/// database's clock, `seq` (the write order, from a sequence: it orders writes of the
/// same microsecond, and sequences never block concurrent writers). Ownership is a lease:
/// `epoch` is the fencing token of the last claim, from a sequence shared by every
/// session so that a session deleted and made again never gives an old claim's token a
/// second life; `owner_node` and `lease_expires` say who holds it and until when (NULL
/// once released). Presence: `run_status` ('idle', 'busy', 'paused', 'stopped', or NULL
/// when the current owner has not announced it), `run_title` and `stop_reason`. The
/// nodes are rows of `omni_store_nodes`, deleted with their session by the cascade.
pub(crate) const MIGRATIONS: [&str; 1] = ["
    CREATE TABLE omni_store_meta (version BIGINT NOT NULL);
    CREATE SEQUENCE omni_store_epochs;
    CREATE SEQUENCE omni_store_writes;
    CREATE TABLE omni_store_sessions (
        id TEXT PRIMARY KEY,
        state TEXT NOT NULL,
        title TEXT,
        created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        seq BIGINT NOT NULL DEFAULT nextval('omni_store_writes'),
        epoch BIGINT NOT NULL,
        owner_node TEXT,
        lease_expires TIMESTAMPTZ,
        run_status TEXT CHECK (run_status IN ('idle', 'busy', 'paused', 'stopped')),
        run_title TEXT,
        stop_reason TEXT
    );
    CREATE INDEX omni_store_sessions_recent ON omni_store_sessions (updated_at DESC, seq DESC);
    CREATE INDEX omni_store_sessions_running ON omni_store_sessions (lease_expires)
        WHERE owner_node IS NOT NULL;
    CREATE TABLE omni_store_nodes (
        session TEXT NOT NULL REFERENCES omni_store_sessions (id) ON DELETE CASCADE,
        id BIGINT NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (session, id)
    );
"];

/// The database's schema version: 0 when it holds none of the store's tables.
fn version(client: &mut impl postgres::GenericClient, location: &Location) -> Result<i64, StoreError> {
    let fail = |e| pg_error(e, location);
    // Asked of pg_class with a query, in the schema the store's tables are made in (the
    // search path's first), not with `to_regclass`: that answers from the backend's
    // catalog cache, which keeps "no such table" until the backend next takes a lock on
    // a table; the advisory lock is not one, so the check again under the lock would not
    // see the tables another process just made (found by the test of four handles
    // connecting at once).
    let has_meta: bool = client
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_class c
                JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
                WHERE c.relname = 'omni_store_meta' AND n.nspname = current_schema())",
            &[],
        )
        .map_err(fail)?
        .get(0);
    if !has_meta {
        return Ok(0);
    }
    let version: Option<i64> = client.query_one("SELECT MAX(version) FROM omni_store_meta", &[]).map_err(fail)?.get(0);
    match version {
        Some(version) if version >= 1 => Ok(version),
        _ => Err(StoreError::new(StoreErrorKind::Corrupt, location.table("omni_store_meta"), "no schema version")),
    }
}

/// Refuses a database of a newer version: left untouched, never downgraded. `Io`, not
/// `Corrupt`, which might invite deleting it: nothing is wrong with it, this code is too
/// old to read it.
fn check_not_newer(version: i64, location: &Location) -> Result<(), StoreError> {
    if version > VERSION {
        return Err(StoreError::new(
            StoreErrorKind::Io,
            location.table("omni_store_meta"),
            format!(
                "the database's schema is version {version}; this omni-store knows up to {VERSION}: use a newer one"
            ),
        ));
    }
    Ok(())
}

/// Gets the database on `client` to this version's schema (see the module's doc).
pub(super) fn prepare(client: &mut Client, location: &Location) -> Result<(), StoreError> {
    let found = version(client, location)?;
    check_not_newer(found, location)?;
    if found == VERSION {
        return Ok(());
    }
    let fail = |e| pg_error(e, location);
    let mut tx = client.transaction().map_err(fail)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK]).map_err(fail)?;
    // Again, under the lock: another process may have migrated meanwhile.
    let found = version(&mut tx, location)?;
    check_not_newer(found, location)?;
    let from = usize::try_from(found).unwrap_or(0);
    for migration in MIGRATIONS.iter().skip(from) {
        tx.batch_execute(migration).map_err(fail)?;
    }
    if found < VERSION {
        tx.execute("DELETE FROM omni_store_meta", &[]).map_err(fail)?;
        tx.execute("INSERT INTO omni_store_meta (version) VALUES ($1)", &[&VERSION]).map_err(fail)?;
    }
    tx.commit().map_err(fail)
}
