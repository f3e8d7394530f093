//! Application actions fired by events, shared by the agent simulation
//! ([`crate::agent_sim`]) and the driver tests, and the late subscriber's consistency
//! check. This module is the contract that makes their transcripts identical.
//!
//! A scenario's actions are `(When, Action)` pairs. [`When::Start`] fires before
//! anything happens; [`When::After`] fires once the `nth` (1-based) *event* line starting
//! with `prefix` has been written. Several actions may share a trigger: they fire in their
//! listed order, each at most once. [`ActionScript`] keeps the count.
//!
//! # Placement rule
//!
//! A driver test runs a scenario like this:
//!
//! 1. It performs the actions of [`ActionScript::start`], in order, before reading any
//!    event.
//! 2. It reads the agent's events one at a time. For each, it writes
//!    [`transcript_line`](crate::agent_sim::transcript_line), then asks
//!    [`ActionScript::after_line`] with that line and performs the due actions one by
//!    one, in order, waiting for each reply. Right after performing one, it writes
//!    [`action_line`] if there is one (`refused <name>: <error>`, or `subscribed`).
//!    Action lines are not events: they trigger nothing.
//!
//! The agent processes an input fully before it takes the next command. So when an
//! action is performed, the agent has already emitted the whole *batch* its trigger
//! event belonged to (every event caused by one input: a body chunk, a tool result, a
//! deadline, an earlier action), the action is accepted or refused in the state after
//! that batch, and the events it causes come after that batch (and after those of
//! actions performed before it).
//!
//! The simulation reproduces this exactly: it drains the events of one input into lines,
//! collecting the actions due after each line; only once the batch is drained does it
//! apply them, in order, writing each one's line right after its trigger line (after
//! the lines of earlier actions of the same trigger). The batch of each applied action
//! is drained the same way; actions it makes due queue behind those already due.
//!
//! In a real run the batch is a matter of timing, so the scenarios
//! ([`crate::agent_scenarios`]) leave at least 300 ms between a trigger's batch and the
//! next input the action must precede (the next streamed chunk, the slow tool's result,
//! the end of the reply). Earlier inputs merged into the trigger's batch change nothing.

use omni_protocol::agent::{AgentError, AgentEvent, PartialMessage, Snapshot, Status};
use omni_protocol::{Message, Role};

use crate::agent_sim::Action;

/// When a scripted action fires.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum When {
    /// At time 0, before anything else.
    Start,
    /// Once the `nth` (1-based; 0 counts as 1) event line starting with `prefix` has been written.
    After {
        /// Start of the trigger line, e.g. `"pause "` or `"  {\"type\":\"text_delta\""`.
        prefix: String,
        /// Which matching line.
        nth: usize,
    },
}

impl When {
    /// [`When::After`] the `nth` line starting with `prefix`.
    pub fn after(prefix: impl Into<String>, nth: usize) -> Self {
        Self::After { prefix: prefix.into(), nth }
    }
}

#[derive(Debug, Clone)]
struct Entry {
    when: When,
    action: Action,
    /// Matching lines seen so far.
    seen: usize,
    fired: bool,
}

/// Fires a scenario's actions on their triggers; see the module documentation for how
/// to call it.
#[derive(Debug, Clone)]
pub struct ActionScript {
    entries: Vec<Entry>,
}

impl ActionScript {
    /// A script of `actions`, none fired yet.
    pub fn new(actions: Vec<(When, Action)>) -> Self {
        let entries = actions.into_iter().map(|(when, action)| Entry { when, action, seen: 0, fired: false }).collect();
        Self { entries }
    }

    /// The actions to perform before anything else, in order.
    pub fn start(&mut self) -> Vec<Action> {
        let mut due = Vec::new();
        for entry in &mut self.entries {
            if entry.when == When::Start && !entry.fired {
                entry.fired = true;
                due.push(entry.action.clone());
            }
        }
        due
    }

    /// Call after writing each event's transcript line: the actions due now, in order.
    pub fn after_line(&mut self, line: &str) -> Vec<Action> {
        let mut due = Vec::new();
        for entry in &mut self.entries {
            let When::After { prefix, nth } = &entry.when else { continue };
            if entry.fired || !line.starts_with(prefix.as_str()) {
                continue;
            }
            entry.seen += 1;
            if entry.seen >= (*nth).max(1) {
                entry.fired = true;
                due.push(entry.action.clone());
            }
        }
        due
    }

    /// Actions whose trigger never came (a scenario bug, or a run that ended early).
    pub fn unfired(&self) -> Vec<(When, Action)> {
        self.entries.iter().filter(|e| !e.fired).map(|e| (e.when.clone(), e.action.clone())).collect()
    }
}

/// The transcript line of a performed action, if it has one: `refused <name>: <error>`
/// when the agent refused it, `subscribed` for a successful [`Action::Subscribe`].
pub fn action_line(action: &Action, outcome: &Result<(), AgentError>) -> Option<String> {
    match (action, outcome) {
        (_, Err(error)) => Some(format!("refused {}: {error}", action.name())),
        (Action::Subscribe, Ok(())) => Some("subscribed".into()),
        (_, Ok(())) => None,
    }
}

/// What `events` say the agent holds after them, starting idle with `initial` committed:
/// the committed history (turns), the pending turn, the partial message and the status.
/// A `state` event (`set_state`) does not say what changed: history replaced that way is
/// not followed.
pub fn rebuild(initial: &[Message], events: &[AgentEvent]) -> Snapshot {
    let mut snapshot =
        Snapshot { status: Status::Idle, committed: initial.to_vec(), pending: Vec::new(), partial: None };
    let mut partial = PartialMessage::default();
    for event in events {
        match event {
            AgentEvent::Status(status) => snapshot.status = *status,
            AgentEvent::Stream(e) => partial.apply(e),
            AgentEvent::Message(m) => {
                if m.role == Role::Assistant {
                    partial.clear();
                }
                snapshot.pending.push((**m).clone());
            }
            AgentEvent::Step { .. } | AgentEvent::Retry { .. } => partial.clear(),
            AgentEvent::Turn { messages, .. } => {
                snapshot.committed.extend(messages.iter().cloned());
                snapshot.pending.clear();
                partial.clear();
            }
            AgentEvent::Cancelled(_) | AgentEvent::Error(_) => {
                snapshot.pending.clear();
                partial.clear();
            }
            _ => {}
        }
    }
    snapshot.partial = partial.message();
    snapshot
}

/// Checks a late subscriber against the main subscriber: the events it received
/// (`seen`) are exactly the last ones of `main`, and its `snapshot` equals what the main
/// events before them built up from the `initial` history (see [`rebuild`]). Returns the
/// subscription point (the index in `main` of the subscriber's first event).
pub fn check_late_subscriber(
    initial: &[Message],
    main: &[AgentEvent],
    snapshot: &Snapshot,
    seen: &[AgentEvent],
) -> Result<usize, String> {
    let Some(point) = main.len().checked_sub(seen.len()) else {
        return Err(format!("the subscriber saw {} events, the main subscriber {}", seen.len(), main.len()));
    };
    if main.get(point..) != Some(seen) {
        return Err(format!("the subscriber's events are not the last {} main events", seen.len()));
    }
    let built = rebuild(initial, main.get(..point).unwrap_or_default());
    if built != *snapshot {
        return Err(format!("the snapshot differs from the first {point} events:\n{snapshot:#?}\nbuilt:\n{built:#?}"));
    }
    Ok(point)
}
