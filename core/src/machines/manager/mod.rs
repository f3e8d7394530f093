//! The session manager's bookkeeping: which sessions run, how each is doing, when an
//! unused one is closed, its title, its lease, and the live feed of it all, as one
//! sans-IO machine. The sessions themselves run elsewhere (each on its own loop, so that a
//! prompt to one never waits for another's work); they tell the manager what changed
//! ([`ManagerInput::Status`], [`ManagerInput::Controllers`], ...), and the manager asks its
//! driver to start, stop, title and renew them through effects.
//!
//! ```text
//!  open ──► Starting ──Started──► Running ──close / delete / idle / lease lost──► Stopping
//!  (Start     (requests for it      (feed: opened, status,    (a busy turn finishes       │
//!   effect)    wait, then replay)    title; idle timer;        first; then the Stop        │
//!                                    title made once)          effect)                     │
//!                                                       Ended ◄────────────────────────────┘
//!                                 (feed: closed; a delete goes on to the store; requests
//!                                  that came meanwhile replay: an open starts it again)
//! ```
//!
//! **Idle shutdown** is armed only while a running session has no controller and its
//! agent is idle, re-evaluated at each transition (the last controller leaves, the agent
//! becomes idle) and checked again when it fires: a new controller or a prompt disarms it.
//! Observers (the feed, a title being made) never keep a session open.
//!
//! **Leases**: a store shared by machines gives claims with a lease. The manager renews
//! all of them in one store call per interval (a third of the lease), and stops a session
//! at once when its renewal is refused for good or its lease would lapse unrenewed (a
//! partition): the store fences its writes anyway, and stopping it here means this node
//! never believes it owns what another may have taken.

mod io;
mod lease;
mod news;
pub(crate) mod title;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, Instant};

pub use io::{
    Answer, CloseReason, FeedEvent, IdleShutdown, ManagerEffect, ManagerError, ManagerInput, OpenSession, Opening,
    RenewalId, RequestId, Started, TitleId,
};
pub use title::TitleMode;

use crate::data::message::Message;
use crate::machines::agent::Status;
use crate::machines::session::store::{Claim, SessionId};
use crate::machines::timer::Timer;

/// The default idle shutdown: five minutes.
pub const DEFAULT_IDLE_AFTER: Duration = Duration::from_secs(5 * 60);

/// The default most sessions one manager runs at once.
pub const DEFAULT_MAX_SESSIONS: usize = 100_000;

/// How a manager runs its sessions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManagerConfig {
    /// How long an unused idle session stays open (`None`: forever), unless its `open`
    /// says otherwise.
    pub idle_after: Option<Duration>,
    /// How titles are made.
    pub titles: TitleMode,
    /// The most sessions running (or starting, or stopping) at once.
    pub max_sessions: usize,
}

impl Default for ManagerConfig {
    fn default() -> Self {
        Self { idle_after: Some(DEFAULT_IDLE_AFTER), titles: TitleMode::default(), max_sessions: DEFAULT_MAX_SESSIONS }
    }
}

/// Where a session is in its life here.
#[derive(Debug)]
enum Phase {
    /// Its `Start` effect is out for `opener` (sent `at`): other requests for it wait in
    /// `queued`.
    Starting {
        opener: RequestId,
        create: bool,
        idle: IdleShutdown,
        at: Instant,
    },
    Running,
    /// Its `Stop` effect is out (or waits for a busy turn): requests for it wait.
    Stopping,
}

/// Where a session's title is.
#[derive(Debug, PartialEq)]
enum Titling {
    /// Not made yet: made after the first committed turn.
    Wanted,
    /// A model is making it from these messages (the heuristic's fallback).
    Making(TitleId, Vec<Message>),
    /// Made, or set by the application: never made again.
    Done,
}

/// One session's bookkeeping.
#[derive(Debug)]
struct Entry {
    phase: Phase,
    status: Status,
    title: Option<String>,
    controllers: usize,
    idle_after: Option<Duration>,
    /// The idle shutdown's deadline, when armed (also in `Manager::idle`).
    idle_at: Option<Instant>,
    titling: Titling,
    claim: Option<Claim>,
    /// Until when its lease holds for sure, as far as this node knows.
    lease_until: Option<Instant>,
    /// Why it is to stop, once asked.
    close: Option<CloseReason>,
    /// Requests that came while it was starting or stopping, replayed after.
    queued: Vec<ManagerInput>,
    /// `close` requests, answered when it ended.
    closers: Vec<RequestId>,
    /// `delete` requests: the store's delete follows its end.
    deleters: Vec<RequestId>,
}

/// A store call in flight for a request.
#[derive(Debug)]
enum Pending {
    /// A rename: answer `Renamed`.
    Rename,
    /// A rename of the manager's own (a title made after its session stopped).
    OwnRename,
    /// A delete, and the other deletes of the same session waiting on it.
    Delete(Vec<RequestId>),
}

/// The session manager's machine (see the module's doc).
#[derive(Debug)]
pub struct Manager {
    config: ManagerConfig,
    sessions: BTreeMap<SessionId, Entry>,
    /// Armed idle deadlines, earliest first.
    idle: BTreeSet<(Instant, SessionId)>,
    pending: BTreeMap<RequestId, Pending>,
    renewal: lease::Renewal,
    shutting_down: bool,
    next_title: u64,
    /// The manager's own requests count down from the top, clear of the driver's.
    next_own_request: u64,
    effects: VecDeque<ManagerEffect>,
    events: VecDeque<FeedEvent>,
}

impl Manager {
    /// A manager with no session running.
    pub fn new(config: ManagerConfig) -> Self {
        Self {
            config,
            sessions: BTreeMap::new(),
            idle: BTreeSet::new(),
            pending: BTreeMap::new(),
            renewal: lease::Renewal::default(),
            shutting_down: false,
            next_title: 0,
            next_own_request: u64::MAX,
            effects: VecDeque::new(),
            events: VecDeque::new(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &ManagerConfig {
        &self.config
    }

    /// Takes one input.
    pub fn handle_input(&mut self, input: ManagerInput, now: Instant) {
        match input {
            ManagerInput::Open { request, id, create, idle } => self.open(request, id, create, idle, now),
            ManagerInput::Close { request, id } => self.close(request, id),
            ManagerInput::Delete { request, id } => self.delete(request, id),
            ManagerInput::Rename { request, id, title } => self.rename(request, id, title),
            ManagerInput::StoreDone { request, result } => self.store_done(request, result),
            ManagerInput::Renewed { renewal, results } => self.renewed(renewal, results, now),
            news => self.news(news, now),
        }
    }

    /// The running sessions (starting and stopping ones left out), by id.
    pub fn open_sessions(&self) -> Vec<OpenSession> {
        self.sessions
            .iter()
            .filter(|(_, entry)| matches!(entry.phase, Phase::Running))
            .map(|(id, entry)| OpenSession {
                id: id.clone(),
                node: None,
                title: entry.title.clone(),
                status: entry.status,
                controllers: entry.controllers,
            })
            .collect()
    }

    /// Whether session `id` runs here.
    pub fn is_running(&self, id: &SessionId) -> bool {
        self.sessions.get(id).is_some_and(|entry| matches!(entry.phase, Phase::Running))
    }

    /// How many sessions run, start or stop.
    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    /// Whether no session runs, starts or stops.
    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }

    /// Closes every session (as `close` does: a busy turn finishes first) and refuses
    /// every later request; the manager is done once [`is_empty`](Self::is_empty).
    pub fn shut_down(&mut self, now: Instant) {
        // Nothing it does waits on time, but every input of a machine takes it.
        let _ = now;
        self.shutting_down = true;
        let ids: Vec<SessionId> = self.sessions.keys().cloned().collect();
        for id in ids {
            self.ask_stop(&id, CloseReason::Closed);
        }
    }

    /// The next effect for the driver.
    pub fn poll_effect(&mut self) -> Option<ManagerEffect> {
        self.effects.pop_front()
    }

    /// The next feed event.
    pub fn poll_event(&mut self) -> Option<FeedEvent> {
        self.events.pop_front()
    }

    /// The next deadline: an idle shutdown, a lease's renewal or its lapse.
    pub fn poll_timeout(&self) -> Option<(Instant, Timer)> {
        let idle = self.idle.first().map(|(at, _)| (*at, Timer::IdleShutdown));
        match (idle, self.renewal.poll_timeout()) {
            (Some(a), Some(b)) => Some(if b.0 < a.0 { b } else { a }),
            (a, b) => a.or(b),
        }
    }

    /// Acts on the deadlines that passed.
    pub fn handle_timeout(&mut self, now: Instant) {
        while let Some((at, id)) = self.idle.first().cloned() {
            if at > now {
                break;
            }
            self.idle.remove(&(at, id.clone()));
            let Some(entry) = self.sessions.get_mut(&id) else { continue };
            entry.idle_at = None;
            // Checked again: a transition since would have disarmed it, but a deadline is
            // never trusted alone.
            if unused(entry) {
                self.ask_stop(&id, CloseReason::Idle);
            }
        }
        self.lease_timeout(now);
    }

    fn open(&mut self, request: RequestId, id: SessionId, create: bool, idle: IdleShutdown, now: Instant) {
        if self.shutting_down {
            return self.answer(request, Err(ManagerError::ShuttingDown));
        }
        let Some(entry) = self.sessions.get_mut(&id) else {
            if self.sessions.len() >= self.config.max_sessions {
                return self.answer(request, Err(ManagerError::TooMany { limit: self.config.max_sessions }));
            }
            self.sessions.insert(id.clone(), Entry::starting(request, create, idle, now));
            self.effects.push_back(ManagerEffect::Start { request, id, create });
            return;
        };
        match entry.phase {
            Phase::Running if create => self.answer(request, Err(ManagerError::Exists(id))),
            Phase::Running => {
                self.answer(request, Ok(Answer::Opened(Opening::Existing)));
            }
            Phase::Starting { .. } if create => self.answer(request, Err(ManagerError::Exists(id))),
            Phase::Starting { .. } | Phase::Stopping => {
                entry.queued.push(ManagerInput::Open { request, id, create, idle });
            }
        }
    }

    fn close(&mut self, request: RequestId, id: SessionId) {
        let Some(entry) = self.sessions.get_mut(&id) else {
            return self.answer(request, Ok(Answer::Closed));
        };
        if let Phase::Starting { .. } = entry.phase {
            entry.queued.push(ManagerInput::Close { request, id });
            return;
        }
        entry.closers.push(request);
        self.ask_stop(&id, CloseReason::Closed);
    }

    fn delete(&mut self, request: RequestId, id: SessionId) {
        let Some(entry) = self.sessions.get_mut(&id) else {
            self.pending.insert(request, Pending::Delete(Vec::new()));
            self.effects.push_back(ManagerEffect::Delete { request, id });
            return;
        };
        if let Phase::Starting { .. } = entry.phase {
            entry.queued.push(ManagerInput::Delete { request, id });
            return;
        }
        entry.deleters.push(request);
        self.ask_stop(&id, CloseReason::Deleted);
    }

    fn rename(&mut self, request: RequestId, id: SessionId, title: Option<String>) {
        match self.sessions.get_mut(&id) {
            None => {
                self.pending.insert(request, Pending::Rename);
                self.effects.push_back(ManagerEffect::Rename { request, id, title });
            }
            Some(entry) if matches!(entry.phase, Phase::Running) => {
                // The application's title wins over one still being made.
                entry.titling = Titling::Done;
                self.set_title(&id, title);
                self.answer(request, Ok(Answer::Renamed));
            }
            Some(entry) => entry.queued.push(ManagerInput::Rename { request, id, title }),
        }
    }

    fn store_done(&mut self, request: RequestId, result: Result<bool, crate::machines::session::store::StoreError>) {
        match self.pending.remove(&request) {
            Some(Pending::Rename) => self.answer(request, result.map(|_| Answer::Renamed).map_err(ManagerError::Store)),
            Some(Pending::Delete(others)) => {
                for request in std::iter::once(request).chain(others) {
                    let answer = result.clone().map(Answer::Deleted).map_err(ManagerError::Store);
                    self.answer(request, answer);
                }
            }
            Some(Pending::OwnRename) | None => {}
        }
    }

    /// Asks session `id` to stop for `reason` (the first reason asked is the one told):
    /// at once, unless a turn is in flight and the reason lets it finish.
    fn ask_stop(&mut self, id: &SessionId, reason: CloseReason) {
        let Some(entry) = self.sessions.get_mut(id) else { return };
        if let Phase::Starting { .. } = entry.phase {
            return;
        }
        let urgent = matches!(reason, CloseReason::LeaseLost(_));
        if entry.close.is_none() || urgent {
            entry.close = Some(reason);
        }
        self.disarm_idle(id);
        self.stop_when_ready(id, urgent);
    }

    /// Sends the `Stop` of a session asked to stop, once its turn is over (a paused turn
    /// waits for a decision that may never come: it is stopped as it is).
    fn stop_when_ready(&mut self, id: &SessionId, urgent: bool) {
        let Some(entry) = self.sessions.get_mut(id) else { return };
        let ready = urgent || entry.status != Status::Busy;
        if !matches!(entry.phase, Phase::Running) || !ready {
            return;
        }
        let Some(reason) = entry.close.clone() else { return };
        entry.phase = Phase::Stopping;
        self.effects.push_back(ManagerEffect::Stop { id: id.clone(), reason });
    }

    fn answer(&mut self, request: RequestId, answer: Result<Answer, ManagerError>) {
        self.effects.push_back(ManagerEffect::Answer { request, answer });
    }

    fn own_request(&mut self) -> RequestId {
        self.next_own_request -= 1;
        RequestId(self.next_own_request + 1)
    }

    /// Sets a running session's title: the session writes it; the feed tells it.
    fn set_title(&mut self, id: &SessionId, title: Option<String>) {
        let Some(entry) = self.sessions.get_mut(id) else { return };
        if entry.title == title {
            return;
        }
        entry.title.clone_from(&title);
        self.effects.push_back(ManagerEffect::SetTitle { id: id.clone(), title: title.clone() });
        self.events.push_back(FeedEvent::Title { id: id.clone(), title });
    }

    /// Arms or disarms a session's idle shutdown after a transition.
    fn reconsider_idle(&mut self, id: &SessionId, now: Instant) {
        let Some(entry) = self.sessions.get_mut(id) else { return };
        if !unused(entry) {
            return self.disarm_idle(id);
        }
        if entry.idle_at.is_some() {
            return;
        }
        if let Some(after) = entry.idle_after {
            let at = now + after;
            entry.idle_at = Some(at);
            self.idle.insert((at, id.clone()));
        }
    }

    fn disarm_idle(&mut self, id: &SessionId) {
        if let Some(entry) = self.sessions.get_mut(id) {
            if let Some(at) = entry.idle_at.take() {
                self.idle.remove(&(at, id.clone()));
            }
        }
    }
}

/// Whether a session is unused: running, not asked to stop, no controller, agent idle.
fn unused(entry: &Entry) -> bool {
    matches!(entry.phase, Phase::Running)
        && entry.close.is_none()
        && entry.controllers == 0
        && entry.status == Status::Idle
        && entry.idle_after.is_some()
}

impl Entry {
    fn starting(opener: RequestId, create: bool, idle: IdleShutdown, at: Instant) -> Self {
        Self {
            phase: Phase::Starting { opener, create, idle, at },
            status: Status::Idle,
            title: None,
            controllers: 0,
            idle_after: None,
            idle_at: None,
            titling: Titling::Wanted,
            claim: None,
            lease_until: None,
            close: None,
            queued: Vec::new(),
            closers: Vec::new(),
            deleters: Vec::new(),
        }
    }
}
