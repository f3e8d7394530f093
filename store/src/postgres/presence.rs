//! [`Presence`] for [`PgStore`]: which sessions run where, kept on the sessions' own rows
//! (`run_status`, `run_title`, `stop_reason`, beside the lease), and a feed of their
//! changes over `LISTEN`/`NOTIFY`.
//!
//! A notice is sent with `pg_notify` in the transaction that records the change, so it is
//! delivered when (and only if) the change commits, and never before the row reads as
//! changed. Its payload is `<id> <change>`: under 80 bytes, far below PostgreSQL's limit
//! of 8000. The channel is one per database: stores in several schemas of one database
//! hear each other's notices, and read no entry for ids that are not theirs.
//!
//! Running means a live lease: a session whose node died shows as running until its
//! lease lapses, then as stopped (`"the lease expired"`) without anyone writing it.

use std::time::Duration;

use omni_protocol::agent::Status;
use omni_protocol::session::{Change, Entry, Listener, Notice, Presence, Run};
use postgres::fallible_iterator::FallibleIterator;
use postgres::{Client, Row};

use super::{fence, not_found, not_owner, pg_error, token_value, Location, PgStore};
use crate::{Claim, SessionId, StoreError, StoreErrorKind};

/// The channel of every notice.
const CHANNEL: &str = "omni_store_feed";

/// What an entry reads from a session's row: id, title, owner, whether its lease is live,
/// status, why it stopped.
const ENTRY: &str = "SELECT id, COALESCE(run_title, title), owner_node,
        owner_node IS NOT NULL AND lease_expires > now(), run_status, stop_reason
    FROM omni_store_sessions";

fn status_name(status: Status) -> &'static str {
    match status {
        Status::Idle => "idle",
        Status::Busy => "busy",
        Status::Paused => "paused",
    }
}

/// Sets the presence columns of `claim`'s session (fenced, as a write) and notifies
/// `change`, in one transaction.
fn record(
    store: &PgStore,
    claim: &Claim,
    change: Change,
    set: &str,
    params: &[&(dyn postgres::types::ToSql + Sync)],
) -> Result<(), StoreError> {
    store.with_client(|client, location| {
        let fail = |e| pg_error(e, location);
        let mut tx = client.transaction().map_err(fail)?;
        if change == Change::Closed {
            // A session withdraws after its last write released the claim (its loop ends
            // with the release): its own epoch is enough, as no other owner came since.
            fence_epoch(&mut tx, location, claim)?;
        } else {
            fence(&mut tx, location, claim)?;
        }
        let id = claim.session().as_str();
        let mut all: Vec<&(dyn postgres::types::ToSql + Sync)> = vec![&id];
        all.extend_from_slice(params);
        tx.execute(&format!("UPDATE omni_store_sessions SET {set} WHERE id = $1"), &all).map_err(fail)?;
        let payload = format!("{id} {}", change.as_str());
        tx.execute("SELECT pg_notify($1, $2)", &[&CHANNEL, &payload]).map_err(fail)?;
        tx.commit().map_err(fail)
    })
}

/// Whether `claim` is still the session's last owner (released or not): no other owner
/// took it since.
fn fence_epoch(tx: &mut postgres::Transaction<'_>, location: &Location, claim: &Claim) -> Result<(), StoreError> {
    let id = claim.session();
    let row = tx
        .query_opt("SELECT epoch FROM omni_store_sessions WHERE id = $1 FOR UPDATE", &[&id.as_str()])
        .map_err(|e| pg_error(e, location))?
        .ok_or_else(|| not_found(location, id))?;
    let epoch: i64 = row.get(0);
    if epoch != token_value(claim) {
        return Err(not_owner(location, claim, &format!("another owner (claim {epoch}) took the session since")));
    }
    Ok(())
}

/// A row of [`ENTRY`] as an entry: `None` for a session its owner has not announced.
fn entry(row: &Row, location: &Location) -> Result<Option<Entry>, StoreError> {
    let id: String = row.try_get(0).map_err(|e| corrupt(location.table("omni_store_sessions"), &e))?;
    let at = location.session(&id);
    let id = SessionId::new(id).map_err(|e| StoreError::new(StoreErrorKind::Corrupt, &at, e.to_string()))?;
    let get = |n| -> Result<Option<String>, StoreError> { row.try_get(n).map_err(|e| corrupt(at.clone(), &e)) };
    let (title, owner, status, reason) = (get(1)?, get(2)?, get(4)?, get(5)?);
    let live: bool = row.try_get(3).map_err(|e| corrupt(at.clone(), &e))?;
    let stopped = |reason: &str| Run::Stopped { reason: reason.to_owned() };
    let run = match (status.as_deref(), owner) {
        (None, _) => return Ok(None),
        (Some("stopped"), _) => stopped(reason.as_deref().unwrap_or("stopped")),
        (Some(_), None) => stopped("the session was released"),
        (Some(_), Some(_)) if !live => stopped("the lease expired"),
        (Some(status), Some(node)) => {
            let status = match status {
                "idle" => Status::Idle,
                "busy" => Status::Busy,
                "paused" => Status::Paused,
                other => {
                    let why = format!("run_status {other:?} is not a status");
                    return Err(StoreError::new(StoreErrorKind::Corrupt, at, why));
                }
            };
            Run::Running { node, status }
        }
    };
    Ok(Some(Entry { id, title, run }))
}

fn corrupt(location: String, e: &postgres::Error) -> StoreError {
    StoreError::new(StoreErrorKind::Corrupt, location, e.to_string())
}

impl Presence for PgStore {
    fn node(&self) -> &str {
        &self.node
    }

    fn announce(&self, claim: &Claim, status: Status, title: Option<&str>, change: Change) -> Result<(), StoreError> {
        let status = status_name(status);
        record(self, claim, change, "run_status = $2, run_title = $3, stop_reason = NULL", &[&status, &title])
    }

    fn withdraw(&self, claim: &Claim, reason: &str) -> Result<(), StoreError> {
        record(self, claim, Change::Closed, "run_status = 'stopped', stop_reason = $2", &[&reason])
    }

    fn running(&self) -> Result<Vec<Entry>, StoreError> {
        let rows = self.with_client(|client, location| {
            let query = format!(
                "{ENTRY} WHERE owner_node IS NOT NULL AND lease_expires > now()
                    AND run_status IN ('idle', 'busy', 'paused') ORDER BY id"
            );
            client.query(&query, &[]).map_err(|e| pg_error(e, location))
        })?;
        let mut entries = Vec::with_capacity(rows.len());
        for row in &rows {
            entries.extend(entry(row, &self.location)?);
        }
        Ok(entries)
    }

    fn entries(&self, ids: &[SessionId]) -> Result<Vec<Entry>, StoreError> {
        let keys: Vec<&str> = ids.iter().map(SessionId::as_str).collect();
        let rows = self.with_client(|client, location| {
            client.query(&format!("{ENTRY} WHERE id = ANY($1)"), &[&keys]).map_err(|e| pg_error(e, location))
        })?;
        let mut found = Vec::with_capacity(rows.len());
        for row in &rows {
            found.extend(entry(row, &self.location)?);
        }
        // In the order asked (an id asked twice, twice).
        Ok(ids.iter().filter_map(|id| found.iter().find(|entry| &entry.id == id).cloned()).collect())
    }

    /// A connection of its own, which does nothing but listen: notices arrive on the
    /// connection that ran `LISTEN`, between its statements, so the store's connection
    /// (busy with writes, and replaced when broken) cannot be the one.
    fn listen(&self) -> Result<Box<dyn Listener>, StoreError> {
        let mut client = self.open()?;
        client.batch_execute(&format!("LISTEN {CHANNEL}")).map_err(|e| pg_error(e, &self.location))?;
        Ok(Box::new(PgListener { client, location: self.location.clone() }))
    }
}

/// The listening end of [`PgStore::listen`].
struct PgListener {
    client: Client,
    location: Location,
}

impl std::fmt::Debug for PgListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgListener").field("database", &self.location.0).finish_non_exhaustive()
    }
}

impl PgListener {
    fn gone(&self, why: &str) -> StoreError {
        StoreError::new(
            StoreErrorKind::Io,
            self.location.table(CHANNEL),
            format!("the listening connection is gone ({why}): notices may have been missed"),
        )
    }
}

impl Listener for PgListener {
    /// The first notice waited for up to `timeout`, then those already arrived. The
    /// driver's iterators answer "none" alike for a timeout and a closed connection, so
    /// the connection is asked after each.
    fn wait(&mut self, timeout: Duration) -> Result<Vec<Notice>, StoreError> {
        if self.client.is_closed() {
            return Err(self.gone("closed"));
        }
        let mut raw = Vec::new();
        let first = self.client.notifications().timeout_iter(timeout).next();
        match first {
            Ok(Some(notification)) => raw.push(notification),
            Ok(None) => {}
            Err(e) => return Err(self.gone(&super::describe(&e))),
        }
        if !raw.is_empty() {
            let drained: Result<Vec<_>, _> = self.client.notifications().iter().collect();
            match drained {
                Ok(notifications) => raw.extend(notifications),
                Err(e) => return Err(self.gone(&super::describe(&e))),
            }
        }
        if self.client.is_closed() {
            return Err(self.gone("closed"));
        }
        // Another application's notice on the channel, or a malformed one: skipped.
        let notices = raw
            .iter()
            .filter(|notification| notification.channel() == CHANNEL)
            .filter_map(|notification| {
                let (id, change) = notification.payload().split_once(' ')?;
                Some(Notice { id: SessionId::new(id).ok()?, change: Change::parse(change)? })
            })
            .collect();
        Ok(notices)
    }
}
