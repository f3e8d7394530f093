//! The session scenarios on a virtual clock: the session machine over a real agent, its
//! requests answered by the scripted replies (the agent simulation's timeline), its store
//! writes executed at once against a store in memory. A [`SessionDriver`] like every
//! driver's, so [`run_session_scenario`](crate::session_scenarios::run_session_scenario)
//! writes the transcript the drivers are held to.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use omni_protocol::agent::{Agent, AgentConfig, NoCallbacks};
use omni_protocol::generate::Effect;
use omni_protocol::session::Tree;
use omni_protocol::session::{Claim, SessionId, SessionState, Store};
use omni_protocol::session::{Session, SessionEffect, SessionEvent, SessionInput, SessionSnapshot};

use crate::agent_sim::{config, schedule_reply, Queue};
use crate::session_scenarios::{Action, SessionDriver, SessionScenario, TITLE};
use crate::sim::Reply;

/// The model every session scenario uses, as a store keeps it.
pub const MODEL: &str = "anthropic:claude-sonnet-4-5";

/// The agent configuration of the session scenarios: the agent scenarios' model, key and
/// system prompt, no tools.
pub fn session_config() -> AgentConfig {
    AgentConfig { tools: Vec::new(), ..config() }
}

/// A session on a virtual clock (see the module's doc).
pub struct SimSession {
    session: Session<NoCallbacks>,
    store: Arc<dyn Store>,
    start: Instant,
    now: Duration,
    replies: VecDeque<Reply>,
    queue: Queue,
    seq: u64,
}

impl std::fmt::Debug for SimSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimSession").field("session", &self.session).field("now", &self.now).finish_non_exhaustive()
    }
}

impl SimSession {
    /// A new session `id`, created in `store`, answered with `scenario`'s replies.
    pub fn create(scenario: &SessionScenario, store: Arc<dyn Store>, id: SessionId) -> Result<Self, String> {
        let state = SessionState {
            model: Some(MODEL.into()),
            system: session_config().system,
            title: Some(TITLE.into()),
            ..SessionState::default()
        };
        let claim = store.create(&id, &state).map_err(|e| e.to_string())?;
        let start = Instant::now();
        let session = Self::open(id, Some(claim), Tree::new(), state, start)?;
        Ok(Self {
            session,
            store,
            start,
            now: Duration::ZERO,
            replies: scenario.replies.iter().cloned().collect(),
            queue: BTreeMap::new(),
            seq: 0,
        })
    }

    fn open(
        id: SessionId,
        claim: Option<Claim>,
        tree: Tree,
        state: SessionState,
        now: Instant,
    ) -> Result<Session<NoCallbacks>, String> {
        let agent = Agent::new(session_config(), NoCallbacks, now).map_err(|e| e.to_string())?;
        Session::resume(id, claim, agent, tree, state, now).map_err(|e| e.to_string())
    }

    fn at(&self) -> Instant {
        self.start + self.now
    }

    /// Executes every effect: requests get their scripted replies, store writes are made
    /// at once and their results fed back.
    fn run_effects(&mut self) {
        let mut results = Vec::new();
        while let Some(effect) = self.session.poll_effect() {
            match effect {
                SessionEffect::Agent(Effect::SendRequest { id, .. }) => {
                    let reply = self.replies.pop_front();
                    schedule_reply(&mut self.queue, &mut self.seq, self.now, id, reply);
                }
                SessionEffect::Agent(Effect::CancelRequest { id }) => {
                    self.queue.retain(|_, s| s.request() != Some(id));
                }
                // The session scenarios give the agent no tools.
                SessionEffect::Agent(Effect::RunTool { .. } | Effect::CancelTool { .. }) => {}
                // The session scenarios leave telemetry off.
                SessionEffect::Agent(Effect::Observe(_)) => {}
                SessionEffect::Store { write, claim, op } => {
                    results.push((write, op.apply(&*self.store, &claim)));
                }
            }
        }
        for (write, result) in results {
            let at = self.at();
            // The machine sent the write: its result is never refused.
            let _ = self.session.handle_input(SessionInput::Stored { write, result }, at);
        }
    }
}

impl SessionDriver for SimSession {
    fn act(&mut self, action: Action) -> Result<(), String> {
        self.run_effects();
        let input = match action {
            Action::Prompt(text) => SessionInput::Prompt(text),
            Action::Regenerate(id) => SessionInput::Regenerate(id),
            Action::Navigate(id) => SessionInput::Navigate(id),
            Action::Edit(parent, text) => SessionInput::Edit(parent, text),
            Action::Title(title) => SessionInput::Title(title),
            Action::Cancel => SessionInput::Cancel,
        };
        let at = self.at();
        self.session.handle_input(input, at).map_err(|e| e.to_string())
    }

    fn next_event(&mut self, _limit: Duration) -> Option<SessionEvent> {
        for _ in 0..1_000_000 {
            if let Some(event) = self.session.poll_event() {
                return Some(event);
            }
            self.run_effects();
            if let Some(event) = self.session.poll_event() {
                return Some(event);
            }
            let next_input = self.queue.keys().next().map(|(at, _)| *at);
            let deadline = self.session.poll_timeout().map(|(d, _)| d.saturating_duration_since(self.start));
            match (next_input, deadline) {
                (Some(at), d) if d.is_none_or(|d| at <= d) => {
                    self.now = self.now.max(at);
                    let (_, item) = self.queue.pop_first()?;
                    let at = self.at();
                    let _ = self.session.handle_input(SessionInput::Report(item.report()), at);
                }
                (_, Some(d)) => {
                    self.now = self.now.max(d);
                    let at = self.at();
                    self.session.handle_timeout(at);
                }
                (None, None) => return None,
                (Some(_), None) => unreachable!("matched above"),
            }
        }
        None
    }

    fn reload(&mut self) -> Result<(SessionSnapshot, SessionState), String> {
        self.run_effects();
        // The session stops, as a dropped handle's does: its writes, then its release.
        let at = self.at();
        self.session.terminate(at);
        self.run_effects();
        let id = self.session.id().clone();
        let claim = self.store.claim(&id).map_err(|e| e.to_string())?;
        let loaded = self.store.load(&id).map_err(|e| e.to_string())?;
        self.session = Self::open(id, Some(claim), loaded.tree, loaded.state, self.at())?;
        self.run_effects();
        Ok((self.session.snapshot(), self.session.state()))
    }
}
