//! [`Store`] for [`PgStore`]: sessions, their nodes and their leases.
//!
//! Every lease is computed by the database's clock (`now()`, the time the statement's
//! transaction began), never the client's. Claims and renewals are one conditional
//! statement each, so that two nodes racing for a session are decided by the row lock
//! PostgreSQL takes for the UPDATE: the second re-reads the row the first wrote and finds
//! its condition false.

use omni_protocol::session::{assemble, check_append};
use omni_protocol::session::{Node, Tree};
use postgres::error::SqlState;
use postgres::Transaction;

use super::{fence, not_found, not_owner, owned_elsewhere, pg_error, token_value, Location, PgStore};
use crate::{Claim, Loaded, SessionId, SessionInfo, SessionList, SessionState, Store, StoreError, StoreErrorKind};

/// Milliseconds since the Unix epoch of a TIMESTAMPTZ column.
macro_rules! ms {
    ($column:literal) => {
        concat!("(EXTRACT(EPOCH FROM ", $column, ") * 1000)::BIGINT")
    };
}

impl PgStore {
    /// Runs `write` for `claim`'s owner in one transaction: fenced first ([`fence`]),
    /// the session stamped as written after, committed last. An error rolls it back.
    fn write_owned<T>(
        &self,
        claim: &Claim,
        write: impl FnOnce(&mut Transaction<'_>, &Location) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.with_client(|client, location| {
            let fail = |e| pg_error(e, location);
            let mut tx = client.transaction().map_err(fail)?;
            fence(&mut tx, location, claim)?;
            let value = write(&mut tx, location)?;
            tx.execute(
                "UPDATE omni_store_sessions
                 SET updated_at = GREATEST(updated_at, now()), seq = nextval('omni_store_writes')
                 WHERE id = $1",
                &[&claim.session().as_str()],
            )
            .map_err(fail)?;
            tx.commit().map_err(fail)?;
            Ok(value)
        })
    }

    fn state_json(&self, state: &SessionState) -> Result<String, StoreError> {
        serde_json::to_string(state)
            .map_err(|e| StoreError::new(StoreErrorKind::Io, &self.location.0, format!("cannot write as JSON: {e}")))
    }

    /// Why no row was claimed or renewed: there is none, or another owner holds it.
    fn holder(&self, client: &mut postgres::Client, id: &SessionId) -> Result<Option<Holder>, StoreError> {
        let row = client
            .query_opt(
                "SELECT owner_node, owner_node IS NOT NULL AND lease_expires > now()
                 FROM omni_store_sessions WHERE id = $1",
                &[&id.as_str()],
            )
            .map_err(|e| pg_error(e, &self.location))?;
        Ok(row.map(|row| match (row.get::<_, Option<String>>(0), row.get::<_, bool>(1)) {
            (Some(node), true) => Holder::Live(node),
            _ => Holder::Free,
        }))
    }

    /// A row of `list`'s query as a session, or why it is not one.
    fn info(&self, row: &postgres::Row) -> Result<SessionInfo, StoreError> {
        let id: String = row.try_get(0).map_err(|e| {
            StoreError::new(StoreErrorKind::Corrupt, self.location.table("omni_store_sessions"), e.to_string())
        })?;
        let location = format!("{}:omni_store_sessions({id})", self.location.0);
        let corrupt = |why: String| StoreError::new(StoreErrorKind::Corrupt, &location, why);
        let id = SessionId::new(id).map_err(|e| corrupt(e.to_string()))?;
        let title: Option<String> = row.try_get(1).map_err(|e| corrupt(e.to_string()))?;
        // Parsed, not shown: a session whose state does not parse would not load.
        let state: String = row.try_get(4).map_err(|e| corrupt(e.to_string()))?;
        serde_json::from_str::<SessionState>(&state).map_err(|e| corrupt(format!("its state: {e}")))?;
        // Times before the epoch (a clock set far back) read as the epoch.
        let ms = |n: usize| {
            row.try_get::<_, i64>(n).map(|ms| u64::try_from(ms).unwrap_or(0)).map_err(|e| corrupt(e.to_string()))
        };
        Ok(SessionInfo { id, title, created_ms: ms(2)?, updated_ms: ms(3)? })
    }
}

/// Who holds a session that exists.
enum Holder {
    /// `node`, with a live lease.
    Live(String),
    /// Nobody: released, or the lease expired.
    Free,
}

/// Inserts `nodes` into session `id`'s, in one statement.
fn insert_nodes(
    tx: &mut Transaction<'_>,
    location: &Location,
    id: &SessionId,
    nodes: &[Node],
) -> Result<(), StoreError> {
    if nodes.is_empty() {
        return Ok(());
    }
    let keys: Vec<i64> = nodes.iter().map(node_key).collect();
    let bodies =
        nodes.iter().map(serde_json::to_string).collect::<Result<Vec<String>, _>>().map_err(|e| {
            StoreError::new(StoreErrorKind::Io, location.session(id), format!("cannot write as JSON: {e}"))
        })?;
    tx.execute(
        "INSERT INTO omni_store_nodes (session, id, body) SELECT $1, * FROM unnest($2::BIGINT[], $3::TEXT[])",
        &[&id.as_str(), &keys, &bodies],
    )
    .map_err(|e| match e.code() {
        // Checked before for appends: a backstop.
        Some(&SqlState::UNIQUE_VIOLATION) => {
            StoreError::new(StoreErrorKind::Conflict, location.session(id), "the session has these nodes already")
        }
        _ => pg_error(e, location),
    })?;
    Ok(())
}

/// A node's id as the database's BIGINT. Ids count nodes, so they are far below 2^63.
fn node_key(node: &Node) -> i64 {
    i64::try_from(node.id.0).unwrap_or(i64::MAX)
}

impl Store for PgStore {
    fn create(&self, id: &SessionId, state: &SessionState) -> Result<Claim, StoreError> {
        let json = self.state_json(state)?;
        let epoch = self.with_client(|client, location| {
            // The primary key decides, atomically: no check-then-write.
            let row = client
                .query_opt(
                    "INSERT INTO omni_store_sessions (id, state, title, epoch, owner_node, lease_expires)
                     VALUES ($1, $2, $3, nextval('omni_store_epochs'), $4, now() + $5::BIGINT * INTERVAL '1 millisecond')
                     ON CONFLICT (id) DO NOTHING
                     RETURNING epoch",
                    &[&id.as_str(), &json, &state.title, &self.node, &self.lease_ms()],
                )
                .map_err(|e| pg_error(e, location))?;
            row.map(|row| row.get::<_, i64>(0)).ok_or_else(|| {
                StoreError::new(StoreErrorKind::Exists, location.session(id), "a session with this id exists")
            })
        })?;
        Ok(self.claim_of(id, epoch))
    }

    /// One conditional UPDATE takes over a released or expired lease, with a new epoch.
    /// The presence of the last owner is cleared: the new owner announces its own.
    fn claim(&self, id: &SessionId) -> Result<Claim, StoreError> {
        let epoch = self.with_client(|client, location| {
            // A lease that lapses between the UPDATE and the look at who holds it: the
            // UPDATE again (a few times at most: each try either claims or finds a live
            // lease, unless leases lapse as fast as the statements run).
            for _ in 0..3 {
                let row = client
                    .query_opt(
                        "UPDATE omni_store_sessions
                         SET epoch = nextval('omni_store_epochs'), owner_node = $2,
                             lease_expires = now() + $3::BIGINT * INTERVAL '1 millisecond',
                             run_status = NULL, run_title = NULL, stop_reason = NULL
                         WHERE id = $1 AND (owner_node IS NULL OR lease_expires <= now())
                         RETURNING epoch",
                        &[&id.as_str(), &self.node, &self.lease_ms()],
                    )
                    .map_err(|e| match e.code() {
                        // Another node holds the row in a transaction (it writes, or it
                        // stalled in the middle of a write until the server ends it).
                        Some(code) if *code == SqlState::LOCK_NOT_AVAILABLE => StoreError::new(
                            StoreErrorKind::OwnedElsewhere,
                            location.session(id),
                            "another node is writing the session",
                        ),
                        _ => pg_error(e, location),
                    })?;
                if let Some(row) = row {
                    return Ok(row.get::<_, i64>(0));
                }
                match self.holder(client, id)? {
                    None => return Err(not_found(location, id)),
                    Some(Holder::Live(node)) => return Err(owned_elsewhere(location, id, &node)),
                    Some(Holder::Free) => {}
                }
            }
            Err(StoreError::new(
                StoreErrorKind::OwnedElsewhere,
                location.session(id),
                "its leases lapse as fast as it is claimed",
            ))
        })?;
        Ok(self.claim_of(id, epoch))
    }

    fn renew(&self, claim: &Claim) -> Result<(), StoreError> {
        self.with_client(|client, location| {
            let renewed = client
                .execute(
                    "UPDATE omni_store_sessions SET lease_expires = now() + $3::BIGINT * INTERVAL '1 millisecond'
                     WHERE id = $1 AND epoch = $2 AND owner_node IS NOT NULL AND lease_expires > now()",
                    &[&claim.session().as_str(), &token_value(claim), &self.lease_ms()],
                )
                .map_err(|e| pg_error(e, location))?;
            if renewed > 0 {
                return Ok(());
            }
            match self.holder(client, claim.session())? {
                None => Err(not_found(location, claim.session())),
                Some(_) => Err(not_owner(location, claim, "it was released, taken over, or its lease expired")),
            }
        })
    }

    /// One statement for every claim: the claims as two arrays (ids, epochs) joined to
    /// the rows; the rows renewed come back, and a claim whose (id, epoch) is not among
    /// them does not own its session (or there is none).
    fn renew_many(&self, claims: &[Claim]) -> Vec<Result<(), StoreError>> {
        if claims.is_empty() {
            return Vec::new();
        }
        let ids: Vec<&str> = claims.iter().map(|claim| claim.session().as_str()).collect();
        let epochs: Vec<i64> = claims.iter().map(token_value).collect();
        let renewed = self.with_client(|client, location| {
            client
                .query(
                    "UPDATE omni_store_sessions AS s
                     SET lease_expires = now() + $3::BIGINT * INTERVAL '1 millisecond'
                     FROM unnest($1::TEXT[], $2::BIGINT[]) AS c (id, epoch)
                     WHERE s.id = c.id AND s.epoch = c.epoch
                       AND s.owner_node IS NOT NULL AND s.lease_expires > now()
                     RETURNING s.id, s.epoch",
                    &[&ids, &epochs, &self.lease_ms()],
                )
                .map_err(|e| pg_error(e, location))
        });
        let renewed: Vec<(String, i64)> = match renewed {
            Ok(rows) => rows.iter().map(|row| (row.get(0), row.get(1))).collect(),
            Err(e) => return claims.iter().map(|_| Err(e.clone())).collect(),
        };
        claims
            .iter()
            .map(|claim| {
                let key = (claim.session().as_str(), token_value(claim));
                if renewed.iter().any(|(id, epoch)| (id.as_str(), *epoch) == key) {
                    Ok(())
                } else {
                    Err(not_owner(
                        &self.location,
                        claim,
                        "it was released, taken over or deleted, or its lease expired",
                    ))
                }
            })
            .collect()
    }

    /// The owner is cleared and the epoch kept, so that the next owner's is higher.
    fn release(&self, claim: &Claim) -> Result<(), StoreError> {
        self.with_client(|client, location| {
            client
                .execute(
                    "UPDATE omni_store_sessions SET owner_node = NULL, lease_expires = NULL
                     WHERE id = $1 AND epoch = $2",
                    &[&claim.session().as_str(), &token_value(claim)],
                )
                .map(drop)
                .map_err(|e| pg_error(e, location))
        })
    }

    fn append_nodes(&self, claim: &Claim, nodes: &[Node]) -> Result<(), StoreError> {
        let id = claim.session();
        self.write_owned(claim, |tx, location| {
            let next: i64 = tx
                .query_one("SELECT COALESCE(MAX(id) + 1, 0) FROM omni_store_nodes WHERE session = $1", &[&id.as_str()])
                .map_err(|e| pg_error(e, location))?
                .get(0);
            check_append(u64::try_from(next).unwrap_or(0), nodes, &location.session(id))?;
            insert_nodes(tx, location, id, nodes)
        })
    }

    fn save_tree(&self, claim: &Claim, tree: &Tree) -> Result<(), StoreError> {
        let id = claim.session();
        self.write_owned(claim, |tx, location| {
            tx.execute("DELETE FROM omni_store_nodes WHERE session = $1", &[&id.as_str()])
                .map_err(|e| pg_error(e, location))?;
            insert_nodes(tx, location, id, tree.nodes())
        })
    }

    fn save_state(&self, claim: &Claim, state: &SessionState) -> Result<(), StoreError> {
        let json = self.state_json(state)?;
        self.write_owned(claim, |tx, location| {
            tx.execute(
                "UPDATE omni_store_sessions SET state = $2, title = $3 WHERE id = $1",
                &[&claim.session().as_str(), &json, &state.title],
            )
            .map(drop)
            .map_err(|e| pg_error(e, location))
        })
    }

    fn load(&self, id: &SessionId) -> Result<Loaded, StoreError> {
        let (state, rows) = self.with_client(|client, location| {
            let fail = |e| pg_error(e, location);
            // One snapshot for the state and the nodes, even while the owner writes.
            let mut tx = client
                .build_transaction()
                .isolation_level(postgres::IsolationLevel::RepeatableRead)
                .read_only(true)
                .start()
                .map_err(fail)?;
            let state: String = tx
                .query_opt("SELECT state FROM omni_store_sessions WHERE id = $1", &[&id.as_str()])
                .map_err(fail)?
                .ok_or_else(|| not_found(location, id))?
                .get(0);
            let rows = tx
                .query("SELECT id, body FROM omni_store_nodes WHERE session = $1 ORDER BY id", &[&id.as_str()])
                .map_err(fail)?;
            tx.commit().map_err(fail)?;
            Ok((state, rows))
        })?;
        let location = &self.location;
        let state: SessionState = serde_json::from_str(&state)
            .map_err(|e| StoreError::new(StoreErrorKind::Corrupt, location.session(id), format!("its state: {e}")))?;
        let mut nodes = Vec::with_capacity(rows.len());
        for row in &rows {
            let key: i64 = row.get(0);
            let corrupt = |why: String| StoreError::new(StoreErrorKind::Corrupt, location.node(id, key), why);
            let body: &str = row.try_get(1).map_err(|e| corrupt(e.to_string()))?;
            let node: Node = serde_json::from_str(body).map_err(|e| corrupt(e.to_string()))?;
            if node_key(&node) != key {
                return Err(corrupt(format!("the row holds node {}", node.id)));
            }
            nodes.push(node);
        }
        assemble(nodes, state, Vec::new(), &location.table(&format!("omni_store_nodes({id})")))
    }

    /// Every row is read, so that every bad one (an id that is not one, a state that does
    /// not parse) is reported, on every page, and none shifts the pages of the rest.
    fn list(&self, limit: usize, offset: usize) -> Result<SessionList, StoreError> {
        let rows = self.with_client(|client, location| {
            client
                .query(
                    concat!(
                        "SELECT id, title, ",
                        ms!("created_at"),
                        ", ",
                        ms!("updated_at"),
                        ", state FROM omni_store_sessions ORDER BY updated_at DESC, seq DESC"
                    ),
                    &[],
                )
                .map_err(|e| pg_error(e, location))
        })?;
        let mut page = SessionList::pager(limit, offset);
        for row in &rows {
            page.push(self.info(row));
        }
        Ok(page.finish())
    }

    /// Refused while a live lease is held; the row locked while deciding, so that no
    /// claim comes between. The nodes go with the row (ON DELETE CASCADE).
    fn delete(&self, id: &SessionId) -> Result<bool, StoreError> {
        self.with_client(|client, location| {
            let fail = |e| pg_error(e, location);
            let mut tx = client.transaction().map_err(fail)?;
            let row = tx
                .query_opt(
                    "SELECT owner_node, owner_node IS NOT NULL AND lease_expires > now()
                     FROM omni_store_sessions WHERE id = $1 FOR UPDATE",
                    &[&id.as_str()],
                )
                .map_err(fail)?;
            let Some(row) = row else { return Ok(false) };
            if let (Some(owner), true) = (row.get::<_, Option<String>>(0), row.get::<_, bool>(1)) {
                return Err(owned_elsewhere(location, id, &owner));
            }
            tx.execute("DELETE FROM omni_store_sessions WHERE id = $1", &[&id.as_str()]).map_err(fail)?;
            tx.commit().map_err(fail)?;
            Ok(true)
        })
    }

    fn exists(&self, id: &SessionId) -> Result<bool, StoreError> {
        self.with_client(|client, location| {
            client
                .query_opt("SELECT 1 FROM omni_store_sessions WHERE id = $1", &[&id.as_str()])
                .map(|row| row.is_some())
                .map_err(|e| pg_error(e, location))
        })
    }
}
