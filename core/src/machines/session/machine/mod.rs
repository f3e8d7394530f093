//! The session machine: an [`Agent`] with a conversation identity, a branching message
//! tree and persistence through a store, as one sans-IO machine. The agent's effects
//! (requests, tool runs) pass through; store writes are effects of their own
//! ([`SessionEffect::Store`]), whose results come back as [`SessionInput::Stored`].
//!
//! ```text
//!   prompt / regenerate / edit ──► the agent's turn ──► turn committed: its messages join
//!        (idle only; the path       (effects pass        the tree under the head; events
//!        moved first, the           through)             `turn`, `tree`, then `store` when
//!        position kept)                                   the write is reported
//!                               └─► cancelled or failed: the tree's position and the
//!                                   agent's history go back to where they were
//! ```
//!
//! The session writes as the owner of its claim ([`Claim`], taken by whoever opened it):
//! one write at a time, in order: a lease's renewal when it is due, then the nodes the
//! store does not have yet (one append), then the state map when it changed, and at the
//! end the claim's release. A failed write is reported and never stops the session; the
//! next change writes everything still unsaved, so nothing the tree holds is lost to a
//! store that failed for a while. A write refused for good (the claim lost its session,
//! or the store holds what the session did not write: [`StoreErrorKind::is_final`](super::store::StoreErrorKind::is_final)) ends
//! the writing: the session says so ([`SessionError::NotOwner`]) to every later change.
//! A session opened read-only writes nothing and refuses every change.
//!
//! What is written is always a state a turn can start from: while a turn is in flight
//! (a regenerate or an edit has moved the path to its user message) the state map names
//! the position the turn found, so a process killed mid-turn resumes where the last
//! committed turn left it. [`Session::resume`] repairs a path that ends inside a turn
//! anyway (written by an older version, or a batch torn by a crash) and says so.

mod io;
mod writes;

use std::collections::VecDeque;
use std::time::Instant;

pub use io::{SessionEffect, SessionError, SessionEvent, SessionInput, SessionSnapshot, Written};
pub use writes::{StoreOp, WriteId};

use super::store::{Claim, SessionId, SessionState, StoreError, StoreWarning};
use super::tree::{Node, NodeId, Position, Tree};
use crate::data::message::{Block, Message, Role};
use crate::machines::agent::{Agent, AgentCallbacks, AgentEvent, AgentInput, Prompt, StatePatch, Status};
use crate::machines::timer::Timer;
use writes::{renewal, settle};

/// How the turn in flight joins the tree, and where to go back to if it does not.
#[derive(Debug, Clone)]
struct Turn {
    /// A regenerated reply: the turn's user message is the head already.
    regenerate: bool,
    /// The position before the turn moved the path.
    rollback: Position,
}

/// The session machine (see the module's doc).
#[derive(Debug)]
pub struct Session<C: AgentCallbacks> {
    id: SessionId,
    agent: Agent<C>,
    tree: Tree,
    /// Model, system, options and title (the position is the tree's).
    state: SessionState,
    turn: Option<Turn>,
    /// The claim the session writes with; `None`: opened read-only.
    claim: Option<Claim>,
    /// Why writing stopped for good (a write refused for good).
    lost: Option<StoreError>,
    /// When a lease is next renewed.
    renew_at: Option<Instant>,
    /// A renewal is due: the next write.
    renew_due: bool,
    /// Stopping: once nothing is left to write (or a write failed), the claim is released.
    terminating: bool,
    released: bool,
    /// What `resume` repaired.
    repairs: Vec<StoreWarning>,
    /// How many of the tree's nodes the store holds.
    saved: usize,
    /// Bumped at every change of the state map; `state_saved` is the last one written.
    state_version: u64,
    state_saved: u64,
    in_flight: Option<(WriteId, Written, u64)>,
    next_write: u64,
    effects: VecDeque<SessionEffect>,
    events: VecDeque<SessionEvent>,
}

impl<C: AgentCallbacks> Session<C> {
    /// A session loaded from a store (or just created in it: an empty tree): `tree` with
    /// its position, `state` its map, written as the owner of `claim` (`None`: read-only,
    /// every change refused). The agent's history becomes the tree's active path.
    ///
    /// Nodes beyond those the state counts were committed after it was saved: the process
    /// stopped between a turn's nodes and the state that moves the path onto them. The
    /// path is moved onto the newest of them (and the state written again), so a turn
    /// reported saved is on the path, not left on a branch the next prompt would start.
    ///
    /// A path that ends inside a turn (on a user message: a batch torn between its
    /// nodes, or a state written mid-turn by an older version) is repaired: on down the
    /// branch last used when there is one, else back to the last reply on it. Each repair
    /// is in [`repairs`](Self::repairs); nothing that loads is refused.
    pub fn resume(
        id: SessionId,
        claim: Option<Claim>,
        agent: Agent<C>,
        mut tree: Tree,
        state: SessionState,
        now: Instant,
    ) -> Result<Self, SessionError> {
        let saved_path = tree.path().to_vec();
        let behind = (tree.len() as u64) > state.nodes;
        if behind {
            let newest = NodeId(tree.len() as u64 - 1);
            tree.navigate(Some(newest))?;
        }
        let repaired = settle(&mut tree);
        let mut session = Self::with(id, claim, agent, tree, state, now);
        if repaired {
            let now_path = session.tree.path().to_vec();
            session.repairs.push(StoreWarning::PathRepaired { saved: saved_path, now: now_path });
        }
        session.sync_history(now)?;
        if behind || repaired {
            session.changed();
        }
        Ok(session)
    }

    fn with(
        id: SessionId,
        claim: Option<Claim>,
        agent: Agent<C>,
        tree: Tree,
        state: SessionState,
        now: Instant,
    ) -> Self {
        let renew_at = claim.as_ref().and_then(Claim::lease).map(|lease| now + renewal(lease));
        Self {
            id,
            agent,
            saved: tree.len(),
            tree,
            state,
            turn: None,
            claim,
            lost: None,
            renew_at,
            renew_due: false,
            terminating: false,
            released: false,
            repairs: Vec::new(),
            state_version: 0,
            state_saved: 0,
            in_flight: None,
            next_write: 0,
            effects: VecDeque::new(),
            events: VecDeque::new(),
        }
    }

    /// What [`resume`](Self::resume) repaired.
    pub fn repairs(&self) -> &[StoreWarning] {
        &self.repairs
    }

    /// The claim the session writes with (`None` when read-only).
    pub fn claim(&self) -> Option<&Claim> {
        self.claim.as_ref()
    }

    /// Why the session stopped writing for good, if it did.
    pub fn lost(&self) -> Option<&StoreError> {
        self.lost.as_ref()
    }

    /// The session's id.
    pub fn id(&self) -> &SessionId {
        &self.id
    }

    /// The tree.
    pub fn tree(&self) -> &Tree {
        &self.tree
    }

    /// The agent.
    pub fn agent(&self) -> &Agent<C> {
        &self.agent
    }

    /// The agent's callbacks (the application's private state).
    pub fn callbacks_mut(&mut self) -> &mut C {
        self.agent.callbacks_mut()
    }

    /// The title.
    pub fn title(&self) -> Option<&str> {
        self.state.title.as_deref()
    }

    /// Everything before the next event, for a subscriber that joins now: taken together
    /// with the event feed, it misses nothing and repeats nothing.
    pub fn snapshot(&self) -> SessionSnapshot {
        SessionSnapshot { tree: self.tree.clone(), agent: self.agent.snapshot(), title: self.state.title.clone() }
    }

    /// Whether everything the session holds is in the store.
    pub fn is_saved(&self) -> bool {
        self.saved == self.tree.len() && self.state_saved == self.state_version
    }

    /// Whether the claim is released (the session's writing is over).
    pub fn is_released(&self) -> bool {
        self.released
    }

    /// The next effect to execute.
    pub fn poll_effect(&mut self) -> Option<SessionEffect> {
        if let Some(effect) = self.effects.pop_front() {
            return Some(effect);
        }
        self.agent.poll_effect().map(SessionEffect::Agent)
    }

    /// The next event for the application.
    pub fn poll_event(&mut self) -> Option<SessionEvent> {
        self.events.pop_front()
    }

    /// The next deadline: the agent's, or a lease's renewal.
    pub fn poll_timeout(&self) -> Option<(Instant, Timer)> {
        let renew = self.renew_at.filter(|_| self.writing()).map(|at| (at, Timer::LeaseRenewal));
        match (self.agent.poll_timeout(), renew) {
            (Some(agent), Some(renew)) => Some(if renew.0 < agent.0 { renew } else { agent }),
            (agent, renew) => agent.or(renew),
        }
    }

    /// Leaves the lease's renewal to whoever runs this session with others (a session
    /// manager renews all its sessions' leases in one store call): the session no longer
    /// renews its own claim.
    pub fn leave_renewal(&mut self) {
        self.renew_at = None;
        self.renew_due = false;
    }

    /// Acts on the deadlines that passed.
    pub fn handle_timeout(&mut self, now: Instant) {
        debug_assert!(self.effects.is_empty(), "the driver feeds input before executing every effect (poll_effect)");
        self.agent.handle_timeout(now);
        self.pump(now);
        if self.renew_at.is_some_and(|at| at <= now) {
            self.renew_at = None;
            self.renew_due = true;
            self.flush();
        }
    }

    /// Stops the session for good (its last handle went away): the agent's work is
    /// cancelled through effects and `terminate` is called; a turn in flight is rolled
    /// back. Writes still owed to the store keep coming out as effects, so that a driver
    /// that executes them before it stops loses nothing that was committed.
    pub fn terminate(&mut self, now: Instant) {
        self.take_agent_effects();
        self.agent.terminate(now);
        self.pump(now);
        // A stopped agent reports no cancel: the path goes back to where the turn found it.
        if let Some(turn) = self.turn.take() {
            let _ = self.tree.restore(&turn.rollback);
        }
        self.terminating = true;
        self.flush();
    }

    /// Feeds an input; a refused one changes nothing.
    pub fn handle_input(&mut self, input: SessionInput<'_>, now: Instant) -> Result<(), SessionError> {
        debug_assert!(self.effects.is_empty(), "the driver feeds input before executing every effect (poll_effect)");
        let result = match input {
            SessionInput::Prompt(text) => self.writable().and_then(|()| self.start(false, Prompt::text(text), now)),
            SessionInput::PromptWith(prompt) => self.writable().and_then(|()| self.start(false, *prompt, now)),
            SessionInput::Navigate(id) => self.writable().and_then(|()| self.navigate(id, now)),
            SessionInput::Regenerate(id) => self.writable().and_then(|()| self.regenerate(id, now)),
            SessionInput::Edit(parent, text) => self.writable().and_then(|()| self.edit(parent, text, now)),
            SessionInput::Title(title) => self.writable().map(|()| {
                self.state.title.clone_from(&title);
                self.events.push_back(SessionEvent::Title(title));
                self.changed();
            }),
            SessionInput::Cancel => self.agent.handle_input(AgentInput::Cancel, now).map_err(SessionError::Agent),
            SessionInput::Resume(decision) => {
                self.agent.handle_input(AgentInput::Resume(decision), now).map_err(SessionError::Agent)
            }
            SessionInput::ReplaceTools(tools) => {
                self.agent.handle_input(AgentInput::ReplaceTools(tools), now).map_err(SessionError::Agent)
            }
            SessionInput::Report(report) => {
                let _ = self.agent.handle_input(AgentInput::Report(report), now);
                Ok(())
            }
            SessionInput::Stored { write, result } => self.stored(write, result, now),
        };
        self.pump(now);
        result
    }

    /// `Ok` when the session may change: it owns its session, and has not lost it.
    fn writable(&self) -> Result<(), SessionError> {
        match (&self.claim, &self.lost) {
            (None, _) => Err(SessionError::ReadOnly),
            (Some(_), Some(lost)) => Err(SessionError::NotOwner(lost.clone())),
            (Some(_), None) => Ok(()),
        }
    }

    /// Whether writes still go out.
    pub(super) fn writing(&self) -> bool {
        self.claim.is_some() && self.lost.is_none() && !self.released
    }

    fn idle(&self) -> Result<(), SessionError> {
        match self.agent.status() {
            Status::Idle => Ok(()),
            Status::Busy => Err(SessionError::Busy),
            Status::Paused => Err(SessionError::Paused),
        }
    }

    /// Queues the agent's effects as the session's: the agent is fed nothing before its
    /// effects are out, and they go to the driver in the order the agent made them.
    fn take_agent_effects(&mut self) {
        while let Some(effect) = self.agent.poll_effect() {
            self.effects.push_back(SessionEffect::Agent(effect));
        }
    }

    /// Gives the agent the active path as its history.
    fn sync_history(&mut self, now: Instant) -> Result<(), SessionError> {
        self.take_agent_effects();
        let patch = StatePatch { messages: Some(self.tree.messages()), ..StatePatch::default() };
        self.agent.handle_input(AgentInput::SetState(Box::new(patch)), now).map_err(SessionError::Agent)
    }

    /// Starts a turn from where the path now stands; `rollback` is where it stood.
    fn start(&mut self, regenerate: bool, prompt: Prompt, now: Instant) -> Result<(), SessionError> {
        self.idle()?;
        let rollback = self.tree.position();
        self.begin(regenerate, rollback, prompt, now)
    }

    fn begin(
        &mut self,
        regenerate: bool,
        rollback: Position,
        prompt: Prompt,
        now: Instant,
    ) -> Result<(), SessionError> {
        self.take_agent_effects();
        match self.agent.handle_input(AgentInput::PromptWith(Box::new(prompt)), now) {
            Ok(()) => {
                self.turn = Some(Turn { regenerate, rollback });
                Ok(())
            }
            Err(e) => {
                self.go_back(&rollback, now);
                Err(SessionError::Agent(e))
            }
        }
    }

    fn navigate(&mut self, id: Option<NodeId>, now: Instant) -> Result<(), SessionError> {
        self.idle()?;
        let before = self.tree.position();
        self.tree.navigate(id)?;
        if let Err(e) = self.sync_history(now) {
            self.go_back(&before, now);
            return Err(e);
        }
        self.tree_changed(Vec::new());
        Ok(())
    }

    fn regenerate(&mut self, id: NodeId, now: Instant) -> Result<(), SessionError> {
        self.idle()?;
        let message = self.tree.message(id).ok_or(SessionError::NotFound(id))?;
        let is_user = message.role == Role::User && !message.content.iter().any(|b| matches!(b, Block::ToolResult(_)));
        if !is_user {
            return Err(SessionError::NotAUserNode(id));
        }
        // The same message again, attachments and all.
        let prompt = Prompt::new(message.content.clone());
        let rollback = self.tree.position();
        self.tree.truncate_to(id)?;
        // The agent is given the messages before the user message, which it is prompted with again.
        let mut before = self.tree.messages();
        before.pop();
        let patch = StatePatch { messages: Some(before), ..StatePatch::default() };
        self.take_agent_effects();
        if let Err(e) = self.agent.handle_input(AgentInput::SetState(Box::new(patch)), now) {
            self.go_back(&rollback, now);
            return Err(SessionError::Agent(e));
        }
        self.begin(true, rollback, prompt, now)
    }

    fn edit(&mut self, parent: Option<NodeId>, text: String, now: Instant) -> Result<(), SessionError> {
        self.idle()?;
        if let Some(id) = parent {
            let message = self.tree.message(id).ok_or(SessionError::NotFound(id))?;
            if message.role != Role::Assistant {
                return Err(SessionError::NotAnAssistantNode(id));
            }
        }
        let rollback = self.tree.position();
        match parent {
            Some(id) => self.tree.truncate_to(id)?,
            None => self.tree.navigate(None)?,
        }
        if let Err(e) = self.sync_history(now) {
            self.go_back(&rollback, now);
            return Err(e);
        }
        self.begin(false, rollback, Prompt::text(text), now)
    }

    /// Puts the path back where it was, and the agent's history with it.
    fn go_back(&mut self, position: &Position, now: Instant) {
        // A position taken from this tree is always one it can take back.
        if self.tree.restore(position).is_ok() {
            let _ = self.sync_history(now);
        }
    }

    /// Takes the agent's effects and events: a committed turn joins the tree, a
    /// cancelled or failed one is rolled back.
    fn pump(&mut self, now: Instant) {
        self.take_agent_effects();
        let mut roll_back = false;
        while let Some(event) = self.agent.poll_event() {
            let commit = match &event {
                AgentEvent::Turn { messages, usage, end, .. } => Some((messages.clone(), **usage, *end)),
                AgentEvent::Cancelled(_) | AgentEvent::Error(_) => {
                    roll_back = true;
                    None
                }
                _ => None,
            };
            self.events.push_back(SessionEvent::Agent(event));
            if let Some((messages, usage, end)) = commit {
                self.commit(messages, usage, end == crate::machines::agent::TurnEnd::Continue);
            }
        }
        if roll_back {
            if let Some(turn) = self.turn.take() {
                self.go_back(&turn.rollback, now);
                self.tree_changed(Vec::new());
            }
        }
    }

    fn commit(&mut self, mut messages: Vec<Message>, usage: crate::data::usage::Usage, continues: bool) {
        let turn = self.turn.take();
        if turn.as_ref().is_some_and(|t| t.regenerate) && !messages.is_empty() {
            // The user message is in the tree already: the reply hangs under it.
            messages.remove(0);
        }
        let added = self.tree.append(messages, Some(usage));
        let added = added.iter().filter_map(|&id| self.tree.node(id)).cloned().collect();
        self.tree_changed(added);
        if continues {
            // The agent goes on with a new turn (its own, or a staged prompt).
            self.turn = Some(Turn { regenerate: false, rollback: self.tree.position() });
        }
    }

    fn tree_changed(&mut self, added: Vec<Node>) {
        self.events.push_back(SessionEvent::Tree { added, path: self.tree.path().to_vec() });
        self.changed();
    }

    /// The state map changed: written at the next chance.
    fn changed(&mut self) {
        self.state_version += 1;
        self.flush();
    }
}
