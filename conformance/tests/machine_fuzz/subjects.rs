//! The machines under test behind one interface, each with the reference state its events
//! are checked against (terminal events, the agent's history, status and pending turn).

use std::time::Instant;

use omni_conformance::agent_sim;
use omni_protocol::agent::{
    Agent, AgentCallbacks, AgentError, AgentEvent, AgentInput, ErrorDecision, StatePatch, Status, ToolDecision,
    TurnDecision, TurnEnd,
};
use omni_protocol::generate::{Effect, Generate, GenerateError, GenerateEvent, Input, InputError, Report};
use omni_protocol::tool::ToolOutput;
use omni_protocol::{Message, Response, ToolResult, ToolResultContent, ToolUse};

use crate::transition::Step;

/// What the harness needs of a machine.
pub(crate) trait Subject {
    fn report(&mut self, report: Report<'_>, now: Instant);
    fn poll_effect(&mut self) -> Option<Effect>;
    fn poll_timeout(&self) -> Option<Instant>;
    fn handle_timeout(&mut self, now: Instant);
    /// Feeds an application input; `Ok(false)` when the machine refused it (then nothing
    /// may change).
    fn application(&mut self, step: &Step, now: Instant) -> bool;
    /// Drains and checks the events of the last input.
    fn drain_events(&mut self) -> Result<(), String>;
    /// Done (generate) or idle with no turn in flight (agent): nothing may be outstanding.
    fn at_rest(&self) -> bool;
    /// Events drained so far.
    fn event_count(&self) -> usize;
    /// Waiting for the application (agent paused): nothing may be outstanding either.
    fn paused(&self) -> bool {
        false
    }
    /// Whether its inferences happen inside turns (an agent's).
    const TURNS: bool = false;
}

pub(crate) struct GenerateSubject {
    pub(crate) machine: Generate,
    pub(crate) terminal: bool,
    pub(crate) events: usize,
}

impl Subject for GenerateSubject {
    fn report(&mut self, report: Report<'_>, now: Instant) {
        // Driver reports are never refused.
        let refused = self.machine.handle_input(Input::Report(report), now);
        assert!(refused.is_ok(), "a driver report was refused: {refused:?}");
    }
    fn poll_effect(&mut self) -> Option<Effect> {
        self.machine.poll_effect()
    }
    fn poll_timeout(&self) -> Option<Instant> {
        self.machine.poll_timeout().map(|(at, _)| at)
    }
    fn handle_timeout(&mut self, now: Instant) {
        self.machine.handle_timeout(now)
    }
    fn application(&mut self, step: &Step, now: Instant) -> bool {
        match step {
            Step::Cancel => {
                // Refused exactly when the call has ended (then nothing may change).
                let outcome = self.machine.handle_input(Input::Cancel, now);
                if self.terminal {
                    assert_eq!(outcome, Err(InputError::Finished), "a cancel after the end");
                } else {
                    assert_eq!(outcome, Ok(()), "a cancel in flight");
                }
                outcome.is_ok()
            }
            _ => false,
        }
    }
    fn drain_events(&mut self) -> Result<(), String> {
        while let Some(event) = self.machine.poll_event() {
            self.events += 1;
            if self.terminal {
                return Err(format!("event after the terminal one: {event:?}"));
            }
            if matches!(event, GenerateEvent::Finished(_) | GenerateEvent::Failed { .. }) {
                self.terminal = true;
            }
        }
        if self.terminal != self.machine.is_done() {
            return Err(format!("is_done() = {} but terminal event seen = {}", self.machine.is_done(), self.terminal));
        }
        if self.terminal && self.machine.poll_timeout().is_some() {
            return Err("a deadline after the terminal event".into());
        }
        // Never stuck: a call in flight always has a deadline (stall, backoff or tool limit).
        if !self.terminal && self.machine.poll_timeout().is_none() {
            return Err("a call in flight with no deadline: it could wait forever".into());
        }
        Ok(())
    }
    fn at_rest(&self) -> bool {
        self.terminal
    }
    fn event_count(&self) -> usize {
        self.events
    }
}

/// Agent callbacks whose decisions come from the case's choices, in turn.
#[derive(Debug, Clone, Default)]
pub(crate) struct FuzzCallbacks {
    pub(crate) choices: Vec<u8>,
    pub(crate) at: usize,
}

impl FuzzCallbacks {
    fn next(&mut self) -> u8 {
        let choice = self.choices.get(self.at % self.choices.len().max(1)).copied().unwrap_or(0);
        self.at += 1;
        choice
    }
}

fn decision(choice: u8) -> ToolDecision {
    match choice % 6 {
        0 | 1 => ToolDecision::Execute,
        2 => ToolDecision::Reject("no".into()),
        3 => ToolDecision::Result(Ok(ToolOutput::content(vec![ToolResultContent::Text { text: "given".into() }]))),
        4 => ToolDecision::Result(Err("given error".into())),
        _ => ToolDecision::Pause("ask".into()),
    }
}

impl AgentCallbacks for FuzzCallbacks {
    fn handle_turn(&mut self, _response: &Response) -> TurnDecision {
        if self.next().is_multiple_of(4) {
            TurnDecision::Continue("go on".into())
        } else {
            TurnDecision::Stop
        }
    }
    fn handle_tool_use(&mut self, _tool_use: &ToolUse) -> ToolDecision {
        let choice = self.next();
        decision(choice)
    }
    fn handle_tool_result(&mut self, result: ToolResult) -> ToolResult {
        result
    }
    fn handle_error(&mut self, _error: &GenerateError, _attempt: u32) -> ErrorDecision {
        if self.next().is_multiple_of(2) {
            ErrorDecision::Retry
        } else {
            ErrorDecision::Stop
        }
    }
}

pub(crate) struct AgentSubject {
    pub(crate) machine: Agent<FuzzCallbacks>,
    /// Reference: the committed history.
    pub(crate) committed: Vec<Message>,
    /// Reference: a turn is in flight (a prompt started it; a terminal event ended it).
    pub(crate) in_turn: bool,
    /// Reference: the status last announced.
    pub(crate) status: Status,
    /// History given by an accepted `set_state`, to be seen at its `state` event.
    pub(crate) patched: Option<Vec<Message>>,
    /// `terminate` was called: no event may follow.
    pub(crate) terminated: bool,
    /// Reference: the messages the turn in flight announced (`message` events).
    pub(crate) pending: Vec<Message>,
    pub(crate) events: usize,
}

impl Subject for AgentSubject {
    const TURNS: bool = true;

    fn report(&mut self, report: Report<'_>, now: Instant) {
        // Driver reports are never refused.
        let refused = self.machine.handle_input(AgentInput::Report(report), now);
        assert!(refused.is_ok(), "a driver report was refused: {refused:?}");
    }
    fn poll_effect(&mut self) -> Option<Effect> {
        self.machine.poll_effect()
    }
    fn poll_timeout(&self) -> Option<Instant> {
        self.machine.poll_timeout().map(|(at, _)| at)
    }
    fn handle_timeout(&mut self, now: Instant) {
        self.machine.handle_timeout(now)
    }
    fn application(&mut self, step: &Step, now: Instant) -> bool {
        let (input, patched) = match step {
            Step::Cancel => (AgentInput::Cancel, None),
            Step::Prompt(n) => (AgentInput::Prompt(format!("prompt {n}")), None),
            Step::Resume(n) => (AgentInput::Resume(decision(*n)), None),
            Step::Terminate => {
                self.machine.terminate(now);
                self.terminated = true;
                self.in_turn = false;
                return true;
            }
            Step::SetState(n) => {
                let messages = (n % 2 == 0).then(Vec::new);
                let patch = StatePatch {
                    system: Some(Some(format!("system {n}"))),
                    messages: messages.clone(),
                    ..StatePatch::default()
                };
                (AgentInput::SetState(Box::new(patch)), Some(messages.unwrap_or_else(|| self.committed.clone())))
            }
            _ => return false,
        };
        let starts = matches!(step, Step::Prompt(_)) && self.machine.status() == Status::Idle;
        let outcome = self.machine.handle_input(input, now);
        if self.terminated {
            assert_eq!(outcome, Err(AgentError::Terminated), "{step:?} after terminate");
        }
        let accepted = outcome.is_ok();
        if accepted && starts {
            self.in_turn = true;
        }
        if accepted {
            self.patched = patched;
        }
        accepted
    }
    fn drain_events(&mut self) -> Result<(), String> {
        while let Some(event) = self.machine.poll_event() {
            self.events += 1;
            if self.terminated {
                return Err(format!("event after terminate: {}", agent_sim::transcript_line(&event)));
            }
            match &event {
                AgentEvent::State(_) => {
                    let Some(messages) = self.patched.take() else {
                        return Err("a state event without set_state".into());
                    };
                    self.committed = messages;
                    continue;
                }
                AgentEvent::Status(status) => self.status = *status,
                _ => {}
            }
            if !self.in_turn {
                return Err(format!(
                    "turn event {} after the turn's terminal event",
                    agent_sim::transcript_line(&event)
                ));
            }
            match event {
                AgentEvent::Message(message) => self.pending.push(*message),
                AgentEvent::Turn { end, messages, .. } => {
                    if messages != self.pending {
                        return Err(format!(
                            "the turn commits {} messages, its message events announced {}",
                            messages.len(),
                            self.pending.len()
                        ));
                    }
                    self.pending.clear();
                    self.committed.extend(messages);
                    self.in_turn = end == TurnEnd::Continue;
                }
                AgentEvent::Error(_) | AgentEvent::Cancelled(_) => {
                    self.pending.clear();
                    self.in_turn = false;
                }
                _ => {}
            }
        }
        if self.machine.messages() != self.committed.as_slice() {
            return Err(format!(
                "history is {} messages, the reference {}: it changed outside a turn end",
                self.machine.messages().len(),
                self.committed.len()
            ));
        }
        let snapshot = self.machine.snapshot();
        if !self.terminated && (snapshot.committed != self.committed || snapshot.pending != self.pending) {
            return Err(format!(
                "the snapshot ({} committed, {} pending) disagrees with the events ({} committed, {} pending)",
                snapshot.committed.len(),
                snapshot.pending.len(),
                self.committed.len(),
                self.pending.len()
            ));
        }
        if self.machine.status() != self.status {
            return Err(format!(
                "status() {:?} but the last status event said {:?}",
                self.machine.status(),
                self.status
            ));
        }
        if !self.in_turn && self.status != Status::Idle && !self.terminated {
            return Err(format!("status {:?} after the turn's terminal event", self.status));
        }
        if !self.in_turn && self.machine.poll_timeout().is_some() {
            return Err("a deadline with no turn in flight".into());
        }
        // Never stuck: a turn in flight waits for the application only when paused.
        if self.in_turn && self.status != Status::Paused && self.machine.poll_timeout().is_none() {
            return Err(format!("a turn in flight ({:?}) with no deadline: it could wait forever", self.status));
        }
        Ok(())
    }
    fn at_rest(&self) -> bool {
        !self.in_turn
    }
    fn paused(&self) -> bool {
        self.status == Status::Paused && !self.terminated
    }
    fn event_count(&self) -> usize {
        self.events
    }
}
