//! The PostgreSQL store ([`PgStore`], feature `postgres`): sessions in a database that
//! several machines share, each running some of them.
//!
//! A session is a row of `omni_store_sessions` and its nodes rows of `omni_store_nodes`
//! ([`schema`]); every write is one transaction.
//!
//! **Ownership across machines is a lease row, not an advisory lock.** The session's row
//! names its owner (`owner_node`), the owner's fencing token (`epoch`, from a sequence:
//! every takeover gets a higher one) and when the lease lapses (`lease_expires`, always
//! computed by the database's clock, `now() + lease`, so that machines whose clocks
//! disagree still agree on who owns what). Why not `pg_advisory_lock`, held by the
//! owner's connection: an advisory lock dies silently with its connection (a network
//! blip, a server restart, an idle timeout) while the old node keeps running and
//! writing, believing it still owns the session; nothing tells it, and nothing fences its
//! writes. And a session-level advisory lock does not survive a transaction-mode pooler
//! (PgBouncer), which hands each transaction to whichever server connection is free, so
//! the lock is taken on one connection and the writes go through others. A lease row
//! lives in the data: every write checks, in its own transaction, with the session's row
//! locked (`SELECT ... FOR UPDATE`), that its claim's epoch is the row's and the lease is
//! live; a node that was paused or cut off past its lease finds its writes refused
//! ([`StoreErrorKind::NotOwner`]) as soon as another node has claimed the session. Owners
//! renew their leases ([`Store::renew`](crate::Store::renew), or
//! [`Store::renew_many`](crate::Store::renew_many) for all of a node's
//! sessions in one statement).
//!
//! Presence ([`Presence`](omni_protocol::session::Presence)) is kept on the same rows (`run_status`, `run_title`,
//! `stop_reason`): which sessions run on which node, and a feed of their changes over
//! `LISTEN`/`NOTIFY` on the channel `omni_store_feed` ([`presence`]).
//!
//! One connection per handle, behind a mutex: every call is one short transaction, so a
//! pool would mostly add a dependency; a process that wants calls in parallel opens
//! several handles (each is cheap to hold). A connection found broken is dropped: the
//! call that found it fails with [`StoreErrorKind::Io`] (a write's fate is then unknown,
//! as with any lost connection) and the next call connects again. Connections are made
//! without TLS (a database on the same machine or a private network); see the crate's
//! README.

use std::fmt;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use postgres::error::SqlState;
use postgres::{Client, Config, NoTls};

use crate::{Claim, SessionId, StoreError, StoreErrorKind};

mod presence;
mod schema;
mod sessions;
pub mod testing;

/// How long connecting may take, unless the connection string says (`connect_timeout`).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Sessions in a PostgreSQL database shared by machines (see the module's doc). `Debug`
/// shows the node, the lease and where the database is, never the password.
pub struct PgStore {
    /// Where to connect (with the password: never shown).
    config: Config,
    /// The database as errors name it: user, hosts, ports and database, no password.
    location: Location,
    /// This node's name: the owner the session rows name.
    node: String,
    /// How long a claim lasts without renewal.
    lease: Duration,
    /// The connection; `None` after it was found broken, until the next call.
    client: Mutex<Option<Client>>,
}

impl fmt::Debug for PgStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgStore")
            .field("node", &self.node)
            .field("lease", &self.lease)
            .field("database", &self.location.0)
            .finish_non_exhaustive()
    }
}

impl PgStore {
    /// Connects to the database at `url` (`postgres://user:password@host:port/db`, or
    /// `key=value` pairs; options such as `options=-csearch_path%3Dmy_schema` are
    /// honoured), gets it to the store's schema (creating or migrating it: safe when
    /// several processes connect at once), and gives a handle whose claims name `node`
    /// as their owner and last `lease` unless renewed. A database written by a newer
    /// version of this store is refused ([`StoreErrorKind::Io`], nothing written); an
    /// unreachable one is `Io`; a refused login `Denied`. No error shows the password.
    pub fn connect(url: &str, node: impl Into<String>, lease: Duration) -> Result<Self, StoreError> {
        let mut config: Config = url.parse().map_err(|e| {
            StoreError::new(StoreErrorKind::Io, "postgres", format!("the connection string: {}", describe(&e)))
        })?;
        let node = node.into();
        // An unreachable server (a dropped route) would otherwise hold the first call
        // for as long as the operating system's TCP timeout: minutes.
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        if config.get_application_name().is_none() {
            config.application_name(&format!("omni-store {node}"));
        }
        let location = Location::of(&config);
        let store = Self { config, location, node, lease, client: Mutex::new(None) };
        store.with_client(schema::prepare)?;
        Ok(store)
    }

    /// This node's name.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// How long a claim lasts without renewal.
    pub fn lease(&self) -> Duration {
        self.lease
    }

    /// A new connection to the database, with the timeouts that keep one stalled node
    /// from holding up the others: a transaction left idle longer than a lease (its node
    /// frozen, or cut off, in the middle of it) is ended by the server, its row locks let
    /// go, and what it wrote rolled back (that node's lease is gone anyway); a statement
    /// waits for a row lock at most half a lease.
    fn open(&self) -> Result<Client, StoreError> {
        let mut client = self.config.connect(NoTls).map_err(|e| pg_error(e, &self.location))?;
        // The server takes at most `i32::MAX` milliseconds.
        let lease = self.lease_ms().clamp(MIN_TIMEOUT_MS, i64::from(i32::MAX));
        let settings = format!(
            "SET idle_in_transaction_session_timeout = {lease}; SET lock_timeout = {}",
            (lease / 2).max(MIN_TIMEOUT_MS)
        );
        client.batch_execute(&settings).map_err(|e| pg_error(e, &self.location))?;
        Ok(client)
    }

    /// Runs `call` on the handle's connection, connecting first when there is none (the
    /// first call, or the one after a broken connection), and dropping a connection that
    /// `call` found broken so that the next call connects again.
    fn with_client<T>(
        &self,
        call: impl FnOnce(&mut Client, &Location) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let mut guard = self.client();
        if guard.as_ref().is_none_or(Client::is_closed) {
            *guard = None;
            *guard = Some(self.open()?);
        }
        let Some(client) = guard.as_mut() else {
            return Err(StoreError::new(StoreErrorKind::Io, &self.location.0, "no connection"));
        };
        let result = call(client, &self.location);
        if client.is_closed() {
            *guard = None;
        }
        result
    }

    fn client(&self) -> MutexGuard<'_, Option<Client>> {
        // A panic while the lock was held cannot have left a transaction open (dropping
        // one rolls it back), so the connection is as good as before.
        self.client.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The lease in milliseconds, as the SQL takes it (at least 1).
    fn lease_ms(&self) -> i64 {
        i64::try_from(self.lease.as_millis()).unwrap_or(i64::MAX).max(1)
    }

    fn claim_of(&self, id: &SessionId, epoch: i64) -> Claim {
        Claim::new(id.clone(), u64::try_from(epoch).unwrap_or(0), Some(self.lease))
    }
}

/// Where the database is, as errors and `Debug` name it: `postgres://user@host:port/db`,
/// never the password.
#[derive(Debug, Clone)]
pub(crate) struct Location(String);

impl Location {
    fn of(config: &Config) -> Self {
        let hosts: Vec<String> = config
            .get_hosts()
            .iter()
            .enumerate()
            .map(|(n, host)| {
                let host = match host {
                    postgres::config::Host::Tcp(name) => name.clone(),
                    postgres::config::Host::Unix(path) => path.display().to_string(),
                };
                match config.get_ports().get(n).or(config.get_ports().first()) {
                    Some(port) => format!("{host}:{port}"),
                    None => host,
                }
            })
            .collect();
        let user = config.get_user().map(|user| format!("{user}@")).unwrap_or_default();
        let db = config.get_dbname().unwrap_or_default();
        Self(format!("postgres://{user}{}/{db}", hosts.join(",")))
    }

    /// A table of the store.
    pub(crate) fn table(&self, table: &str) -> String {
        format!("{}:{table}", self.0)
    }

    /// A session's row.
    pub(crate) fn session(&self, id: &impl fmt::Display) -> String {
        format!("{}:omni_store_sessions({id})", self.0)
    }

    /// A node's row.
    pub(crate) fn node(&self, id: &SessionId, node: i64) -> String {
        format!("{}:omni_store_nodes({id},{node})", self.0)
    }
}

/// A PostgreSQL failure as a store's: a refused login or permission is
/// [`StoreErrorKind::Denied`], anything else (a lost connection, a server that is not
/// there, a failed statement) [`StoreErrorKind::Io`]. The message is the driver's and the
/// server's, which never carry the connection string.
pub(crate) fn pg_error(e: postgres::Error, location: &Location) -> StoreError {
    let denied =
        [SqlState::INVALID_PASSWORD, SqlState::INVALID_AUTHORIZATION_SPECIFICATION, SqlState::INSUFFICIENT_PRIVILEGE];
    let kind = match e.code() {
        Some(code) if denied.contains(code) => StoreErrorKind::Denied,
        _ => StoreErrorKind::Io,
    };
    StoreError::new(kind, &location.0, describe(&e))
}

/// The error and its causes, in words.
fn describe(e: &postgres::Error) -> String {
    let mut message = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    message
}

/// A fencing token as the database's BIGINT: epochs come from a sequence, so they are
/// positive and far below 2^63; a token beyond (forged) is -1, which no row holds.
fn token_value(claim: &Claim) -> i64 {
    i64::try_from(claim.token()).unwrap_or(-1)
}

/// Refusals every part of the store words alike.
fn not_found(location: &Location, id: &SessionId) -> StoreError {
    StoreError::new(StoreErrorKind::NotFound, location.session(id), "no such session")
}

fn not_owner(location: &Location, claim: &Claim, why: &str) -> StoreError {
    StoreError::new(
        StoreErrorKind::NotOwner,
        location.session(claim.session()),
        format!("claim {} does not own the session: {why}", claim.token()),
    )
}

/// The shortest of the connection's timeouts, in milliseconds (a very short lease would
/// otherwise make every lock wait fail).
const MIN_TIMEOUT_MS: i64 = 100;

fn owned_elsewhere(location: &Location, id: &SessionId, owner: &str) -> StoreError {
    StoreError::new(StoreErrorKind::OwnedElsewhere, location.session(id), format!("node {owner} holds a live lease"))
        .with_owner(owner)
}

/// Checks, inside `tx`, that `claim` owns its session now: its row locked until the
/// transaction ends (`FOR UPDATE`), so that no claim can take the session over between
/// this check and the write's commit, its epoch the claim's and its lease live by the
/// database's clock. What every write and every announcement does first.
fn fence(tx: &mut postgres::Transaction<'_>, location: &Location, claim: &Claim) -> Result<(), StoreError> {
    let row = tx
        .query_opt(
            "SELECT epoch, owner_node IS NOT NULL AND lease_expires > now()
             FROM omni_store_sessions WHERE id = $1 FOR UPDATE",
            &[&claim.session().as_str()],
        )
        .map_err(|e| pg_error(e, location))?
        .ok_or_else(|| not_found(location, claim.session()))?;
    let (epoch, live): (i64, bool) = (row.get(0), row.get(1));
    if epoch != token_value(claim) {
        return Err(not_owner(location, claim, &format!("the session's owner holds claim {epoch}")));
    }
    if !live {
        return Err(not_owner(location, claim, "it was released, or its lease expired"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs without a server: what errors and `Debug` name is the database, never the password.
    #[test]
    fn the_location_names_the_database_and_never_the_password() {
        let config: Config = "postgres://omni:hunter2secret@db.example:6543/chats".parse().unwrap();
        assert_eq!(Location::of(&config).0, "postgres://omni@db.example:6543/chats");
        let config: Config = "host=/run/pg user=u password=hunter2secret dbname=d".parse().unwrap();
        assert_eq!(Location::of(&config).0, "postgres://u@/run/pg/d");
        let bad = PgStore::connect("postgres://omni:hunter2secret@h/db?nonsense=1", "n", Duration::from_secs(1));
        let bad = bad.unwrap_err();
        assert!(!format!("{bad} {bad:?}").contains("hunter2secret"), "{bad:?}");
        assert_eq!(bad.kind, StoreErrorKind::Io);
    }
}
