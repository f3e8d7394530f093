//! The leases of a manager's sessions: renewed together, one store call per interval (a
//! third of the lease), and watched: a session whose lease may have lapsed, or whose
//! renewal was refused for good, is stopped here at once.
//!
//! A lease is counted from when its renewal was *sent* (the store sets the expiry from
//! its own clock when it gets the call, which is later), so this node always thinks its
//! lease ends no later than the store does.

use std::time::{Duration, Instant};

use super::{CloseReason, Manager, ManagerEffect, Phase, RenewalId};
use crate::machines::session::store::{SessionId, StoreError};
use crate::machines::timer::Timer;

/// The batch renewal's bookkeeping.
#[derive(Debug, Default)]
pub(super) struct Renewal {
    /// The leases' length (every claim of one store has the same).
    lease: Option<Duration>,
    /// When the next batch goes out.
    next_at: Option<Instant>,
    /// The batch in flight: its sessions and when it was sent.
    in_flight: Option<(RenewalId, Vec<SessionId>, Instant)>,
    /// The earliest lease end among the running sessions.
    earliest_end: Option<Instant>,
    next_id: u64,
}

impl Renewal {
    /// A session with a lease of `lease`, sure to hold `until`, started: renewals run
    /// from now on.
    pub(super) fn schedule(&mut self, lease: Duration, until: Instant, now: Instant) {
        self.lease = Some(self.lease.map_or(lease, |known| known.min(lease)));
        if self.next_at.is_none() && self.in_flight.is_none() {
            self.next_at = Some(now + lease / 3);
        }
        self.earliest_end = Some(self.earliest_end.map_or(until, |end| end.min(until)));
    }

    pub(super) fn poll_timeout(&self) -> Option<(Instant, Timer)> {
        let renew = self.next_at.map(|at| (at, Timer::LeaseRenewal));
        let lapse = self.earliest_end.map(|at| (at, Timer::LeaseLapse));
        match (renew, lapse) {
            (Some(a), Some(b)) => Some(if b.0 < a.0 { b } else { a }),
            (a, b) => a.or(b),
        }
    }
}

impl Manager {
    /// Sends the batch when it is due, and stops the sessions whose lease may have lapsed.
    pub(super) fn lease_timeout(&mut self, now: Instant) {
        if self.renewal.earliest_end.is_some_and(|end| end <= now) {
            let lapsed: Vec<SessionId> = self
                .sessions
                .iter()
                .filter(|(_, entry)| entry.lease_until.is_some_and(|until| until <= now))
                .map(|(id, _)| id.clone())
                .collect();
            for id in lapsed {
                if let Some(entry) = self.sessions.get_mut(&id) {
                    entry.lease_until = None;
                }
                self.ask_stop(&id, CloseReason::LeaseLost("the lease was not renewed in time".into()));
            }
            self.renewal.earliest_end = self.earliest_lease_end();
        }
        if self.renewal.next_at.is_some_and(|at| at <= now) {
            self.renewal.next_at = None;
            self.send_renewal(now);
        }
    }

    fn send_renewal(&mut self, now: Instant) {
        let (ids, claims): (Vec<SessionId>, Vec<_>) = self
            .sessions
            .iter()
            .filter(|(_, entry)| matches!(entry.phase, Phase::Running | Phase::Stopping) && entry.lease_until.is_some())
            .filter_map(|(id, entry)| Some((id.clone(), entry.claim.clone()?)))
            .unzip();
        if ids.is_empty() {
            // Nothing leased runs: renewals start again with the next session that is.
            return;
        }
        let renewal = RenewalId(self.renewal.next_id);
        self.renewal.next_id += 1;
        self.renewal.in_flight = Some((renewal, ids, now));
        self.effects.push_back(ManagerEffect::Renew { renewal, claims });
    }

    /// A batch's answers: each renewed lease extended from when the batch was sent; a
    /// session refused for good stopped; one that failed for a while tried again soon.
    pub(super) fn renewed(&mut self, renewal: RenewalId, results: Vec<Result<(), StoreError>>, now: Instant) {
        let Some((current, ids, sent)) = self.renewal.in_flight.take() else { return };
        if current != renewal {
            self.renewal.in_flight = Some((current, ids, sent));
            return;
        }
        let Some(lease) = self.renewal.lease else { return };
        let mut failed = false;
        for (id, result) in ids.iter().zip(results.into_iter().map(Some).chain(std::iter::repeat(None))) {
            let Some(entry) = self.sessions.get_mut(id) else { continue };
            match result {
                Some(Ok(())) => entry.lease_until = entry.lease_until.map(|until| until.max(sent + lease)),
                Some(Err(e)) if e.kind.is_final() => {
                    entry.lease_until = None;
                    self.ask_stop(id, CloseReason::LeaseLost(e.to_string()));
                }
                // A failure that may pass, or a store that gave fewer answers than claims.
                Some(Err(_)) | None => failed = true,
            }
        }
        self.renewal.earliest_end = self.earliest_lease_end();
        let interval = if failed { lease / 10 } else { lease / 3 };
        self.renewal.next_at = Some(now + interval);
    }

    fn earliest_lease_end(&self) -> Option<Instant> {
        self.sessions.values().filter_map(|entry| entry.lease_until).min()
    }
}
