//! A manager's sessions as the other nodes of a shared store see them, and theirs as it
//! sees them ([`Presence`]): this node's feed written to the store (one batch at a time,
//! the newest state of each session only, so a slow store costs one entry per session at
//! most), and the other nodes' changes read back from their notices into this node's
//! feed.
//!
//! A notice says only which session changed: its entry is read and compared with what
//! this node knew of it, and the difference is what the feed tells. A listener that lost
//! its connection missed notices nobody replays: when it listens again, every running
//! entry is read and compared the same way (and those that stopped meanwhile are read for
//! their reason), so the feed catches up.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use async_channel::Sender;
use omni_protocol::agent::Status;
use omni_protocol::manager::{CloseReason, FeedEvent, OpenSession};
use omni_protocol::session::{Change, Entry, Presence, Run};
use omni_protocol::session::{Claim, SessionId, StoreError};

use crate::runtime::{off_executor, Runtime};

/// How long one wait of the listener lasts before it looks whether the manager is gone.
const LISTEN_SLICE: Duration = Duration::from_millis(500);
/// The longest wait before listening again after a failure.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// One presence write of a session.
#[derive(Debug, Clone)]
pub(crate) enum Write {
    Announce { status: Status, title: Option<String>, change: Change },
    Withdraw { reason: String },
}

/// What the listener tells the manager's loop.
pub(crate) enum Heard {
    /// These sessions changed.
    Notices(Vec<SessionId>),
    /// The listener (re)connected: notices may have been missed.
    Listening,
}

/// What a read of the other nodes' entries found.
pub(crate) struct Read {
    /// The entries read.
    pub(crate) entries: Vec<Entry>,
    /// They are every running entry (a catch-up).
    pub(crate) all: bool,
    /// The entries of sessions known running that were not among them.
    pub(crate) stopped: Vec<Entry>,
}

/// Reads the entries of `ids`; or, for a catch-up (`all`), every running entry and those
/// of the sessions `known` running that are not among them.
pub(crate) fn read(
    presence: &dyn Presence,
    all: bool,
    ids: Vec<SessionId>,
    known: Vec<SessionId>,
) -> Result<Read, StoreError> {
    if !all {
        return Ok(Read { entries: presence.entries(&ids)?, all, stopped: Vec::new() });
    }
    let entries = presence.running()?;
    let missing: Vec<SessionId> = known.into_iter().filter(|id| !entries.iter().any(|e| e.id == *id)).collect();
    let stopped = if missing.is_empty() { Vec::new() } else { presence.entries(&missing)? };
    Ok(Read { entries, all, stopped })
}

/// Another node's running session, as this node last knew it.
#[derive(Debug, Clone, PartialEq)]
struct Remote {
    node: String,
    status: Status,
    title: Option<String>,
}

/// A manager's presence bookkeeping.
pub(crate) struct PresenceSync {
    pub(crate) presence: Arc<dyn Presence>,
    /// The claims of this node's running sessions.
    claims: BTreeMap<SessionId, Claim>,
    /// This node's sessions as last told: status and title.
    local: BTreeMap<SessionId, (Status, Option<String>)>,
    /// Writes not yet sent: the newest per session.
    pending: BTreeMap<SessionId, Write>,
    /// A batch of writes is in flight.
    pub(crate) writing: bool,
    /// The other nodes' running sessions.
    remote: BTreeMap<SessionId, Remote>,
}

impl PresenceSync {
    pub(crate) fn new(presence: Arc<dyn Presence>) -> Self {
        Self {
            presence,
            claims: BTreeMap::new(),
            local: BTreeMap::new(),
            pending: BTreeMap::new(),
            writing: false,
            remote: BTreeMap::new(),
        }
    }

    /// A session of this node started with `claim`.
    pub(crate) fn started(&mut self, id: &SessionId, claim: Option<Claim>) {
        if let Some(claim) = claim {
            self.claims.insert(id.clone(), claim);
        }
    }

    /// One of this node's feed events, to be written.
    pub(crate) fn local_event(&mut self, event: &FeedEvent) {
        let id = event.id().clone();
        let write = match event {
            FeedEvent::Opened { title, status, .. } => {
                self.local.insert(id.clone(), (*status, title.clone()));
                Write::Announce { status: *status, title: title.clone(), change: Change::Opened }
            }
            FeedEvent::Status { status, .. } => {
                let Some(known) = self.local.get_mut(&id) else { return };
                known.0 = *status;
                Write::Announce { status: *status, title: known.1.clone(), change: Change::Status }
            }
            FeedEvent::Title { title, .. } => {
                let Some(known) = self.local.get_mut(&id) else { return };
                known.1.clone_from(title);
                Write::Announce { status: known.0, title: title.clone(), change: Change::Title }
            }
            FeedEvent::TitleFailed { .. } => return,
            FeedEvent::Closed { reason, .. } => {
                self.local.remove(&id);
                Write::Withdraw { reason: reason.to_string() }
            }
        };
        // An announcement not sent yet is still an opening, whatever changed since.
        let write = match (self.pending.remove(&id), write) {
            (Some(Write::Announce { change: Change::Opened, .. }), Write::Announce { status, title, .. }) => {
                Write::Announce { status, title, change: Change::Opened }
            }
            (_, write) => write,
        };
        self.pending.insert(id, write);
    }

    /// The next batch of writes with their claims, unless one is in flight.
    pub(crate) fn next_batch(&mut self) -> Option<Vec<(Claim, Write)>> {
        if self.writing || self.pending.is_empty() {
            return None;
        }
        let pending = std::mem::take(&mut self.pending);
        let mut batch = Vec::with_capacity(pending.len());
        for (id, write) in pending {
            let claim = match write {
                // The session is over here: its claim is of no more use after this.
                Write::Withdraw { .. } => self.claims.remove(&id),
                Write::Announce { .. } => self.claims.get(&id).cloned(),
            };
            batch.extend(claim.map(|claim| (claim, write)));
        }
        self.writing = !batch.is_empty();
        Some(batch).filter(|batch| !batch.is_empty())
    }

    /// Compares entries read from the store with what this node knew, and returns what
    /// the feed tells. `all` says they are every running entry (after a reconnect): a
    /// session known running and not among them stopped, and is looked up in `stopped`.
    pub(crate) fn compare(&mut self, entries: Vec<Entry>, all: bool, stopped: Vec<Entry>) -> Vec<FeedEvent> {
        let node = self.presence.node().to_owned();
        let mut events = Vec::new();
        let mut seen = BTreeSet::new();
        for entry in entries.into_iter().chain(stopped) {
            let Entry { id, title, run } = entry;
            if !seen.insert(id.clone()) {
                continue;
            }
            match run {
                Run::Running { node: owner, status } if owner != node => {
                    let now = Remote { node: owner, status, title: title.clone() };
                    match self.remote.insert(id.clone(), now) {
                        None => events.push(FeedEvent::Opened { id, title, status }),
                        Some(before) => {
                            if before.status != status {
                                events.push(FeedEvent::Status { id: id.clone(), status });
                            }
                            if before.title != title {
                                events.push(FeedEvent::Title { id, title });
                            }
                        }
                    }
                }
                // This node's own, told by its own feed; or stopped.
                Run::Running { .. } => {
                    self.remote.remove(&id);
                }
                Run::Stopped { reason } => {
                    if self.remote.remove(&id).is_some() {
                        events.push(FeedEvent::Closed { id, reason: CloseReason::parse(&reason) });
                    }
                }
            }
        }
        if all {
            let gone: Vec<SessionId> = self.remote.keys().filter(|id| !seen.contains(*id)).cloned().collect();
            for id in gone {
                self.remote.remove(&id);
                events.push(FeedEvent::Closed { id, reason: CloseReason::Failed("stopped while unheard".into()) });
            }
        }
        events
    }

    /// The known sessions a resync must look up when they are not running any more.
    pub(crate) fn known_remote(&self) -> Vec<SessionId> {
        self.remote.keys().cloned().collect()
    }

    /// The other nodes' running sessions, for `list_open`.
    pub(crate) fn remote_open(&self) -> impl Iterator<Item = OpenSession> + '_ {
        self.remote.iter().map(|(id, remote)| OpenSession {
            id: id.clone(),
            node: Some(remote.node.clone()),
            title: remote.title.clone(),
            status: remote.status,
            controllers: 0,
        })
    }

    /// The node running `id`, if another node does (as last heard).
    pub(crate) fn node_of(&self, id: &SessionId) -> Option<String> {
        self.remote.get(id).map(|remote| remote.node.clone())
    }
}

/// Writes a batch, in order; failures are left for the next change to mend (an entry is
/// advisory: the lease, not the entry, says who owns a session).
pub(crate) fn write_batch(presence: &dyn Presence, batch: Vec<(Claim, Write)>) -> Vec<StoreError> {
    let mut failures = Vec::new();
    for (claim, write) in batch {
        let written = match write {
            Write::Announce { status, title, change } => presence.announce(&claim, status, title.as_deref(), change),
            Write::Withdraw { reason } => presence.withdraw(&claim, &reason),
        };
        failures.extend(written.err());
    }
    failures
}

/// Listens for every node's notices until `heard` closes (the manager ended), listening
/// again after each failure with a growing pause.
pub(crate) async fn listen<R: Runtime>(presence: Arc<dyn Presence>, runtime: R, heard: Sender<Heard>) {
    let mut backoff = Duration::from_millis(100);
    while !heard.is_closed() {
        let listening = {
            let presence = presence.clone();
            off_executor(&runtime, move || presence.listen()).await
        };
        let Ok(Ok(mut listener)) = listening else {
            runtime.sleep_until(runtime.now() + backoff).await;
            backoff = (backoff * 2).min(MAX_BACKOFF);
            continue;
        };
        backoff = Duration::from_millis(100);
        if heard.send(Heard::Listening).await.is_err() {
            return;
        }
        loop {
            let waited = off_executor(&runtime, move || {
                let notices = listener.wait(LISTEN_SLICE);
                (listener, notices)
            })
            .await;
            let Ok((back, notices)) = waited else { break };
            listener = back;
            match notices {
                Ok(notices) if notices.is_empty() => {
                    if heard.is_closed() {
                        return;
                    }
                }
                Ok(notices) => {
                    let ids = notices.into_iter().map(|notice| notice.id).collect();
                    if heard.send(Heard::Notices(ids)).await.is_err() {
                        return;
                    }
                }
                // The connection is gone: listen again, and catch up.
                Err(_) => break,
            }
        }
    }
}
