//! The tool round as the agent runs it: the callbacks decide each call (a pause waits
//! for `resume`) and see each result; the round itself (validation, parallel runs with
//! deadlines, results in call order) is the one the generate machine runs too
//! ([`crate::machines::tool_round`]). Its results become the next step's user message.

use std::collections::VecDeque;
use std::time::Instant;

use super::{Agent, AgentCallbacks, AgentError, AgentEvent, State, Status, ToolDecision};
use crate::data::message::{Message, Role, ToolResult, ToolUse};
use crate::data::response::StopReason;
use crate::machines::common::{ToolOutcome, ToolRunId};
use crate::machines::tool_round::{Decided, Runner, ToolPolicy, ToolRound};

/// The agent's policy: its callbacks decide, and see every result before the
/// application (an event) and the model do.
struct Callbacks<'a, C> {
    callbacks: &'a mut C,
    events: &'a mut VecDeque<AgentEvent>,
}

impl<C: AgentCallbacks> ToolPolicy for Callbacks<'_, C> {
    fn decide(&mut self, call: &ToolUse) -> ToolDecision {
        self.callbacks.handle_tool_use(call)
    }

    fn seen(&mut self, result: ToolResult) -> ToolResult {
        let result = self.callbacks.handle_tool_result(result);
        self.events.push_back(AgentEvent::ToolResult(Box::new(result.clone())));
        result
    }
}

/// The policy and the runner of a round, borrowed from the agent's separate fields.
fn round_parts<C: AgentCallbacks>(agent: &mut Agent<C>, now: Instant) -> (Callbacks<'_, C>, Runner<'_>) {
    let Agent { config, callbacks, events, effects, next_id, .. } = agent;
    let runner = Runner { tools: &config.tools, options: &config.options, next_id, effects, now };
    (Callbacks { callbacks, events }, runner)
}

impl<C: AgentCallbacks> Agent<C> {
    /// Takes decisions in order until one pauses or every call is decided, then runs
    /// the approved calls.
    pub(super) fn decide(&mut self, mut round: ToolRound, now: Instant) {
        let (mut policy, mut runner) = round_parts(self, now);
        let decided = round.decide(&mut policy, &mut runner);
        self.after_decided(round, decided, now);
    }

    pub(super) fn resume(&mut self, decision: ToolDecision, now: Instant) -> Result<(), AgentError> {
        let State::Paused(_) = &self.state else { return Err(AgentError::NotPaused) };
        let State::Paused(mut round) = std::mem::replace(&mut self.state, State::Idle) else {
            return Err(AgentError::NotPaused);
        };
        if !matches!(decision, ToolDecision::Pause(_)) {
            self.set_status(Status::Busy);
        }
        let (mut policy, mut runner) = round_parts(self, now);
        let decided = round.resume(decision, &mut policy, &mut runner);
        self.after_decided(round, decided, now);
        Ok(())
    }

    fn after_decided(&mut self, round: ToolRound, decided: Decided, now: Instant) {
        match decided {
            Decided::All => self.after_result(round, now),
            Decided::Pause(call, reason) => {
                self.state = State::Paused(round);
                self.set_status(Status::Paused);
                self.events.push_back(AgentEvent::Pause { tool_use: Box::new(call), reason });
            }
            // A tool without handler was to be executed: the calls are the application's.
            Decided::Unhandled => self.end_turn(StopReason::ToolUse, now),
        }
    }

    pub(super) fn tool_finished(&mut self, id: ToolRunId, outcome: ToolOutcome, now: Instant) {
        let Some(mut round) = self.take_round() else { return };
        let (mut policy, _) = round_parts(self, now);
        if round.finish(id, outcome, &mut policy) {
            self.after_result(round, now);
        } else {
            self.state = State::Tools(round);
        }
    }

    pub(super) fn tools_timeout(&mut self, now: Instant) {
        let Some(mut round) = self.take_round() else { return };
        let (mut policy, runner) = round_parts(self, now);
        if round.expire(now, &mut policy, runner.effects) {
            self.after_result(round, now);
        } else {
            self.state = State::Tools(round);
        }
    }

    /// The round whose tools run, taken out of the state (which is left as it was when no
    /// tools run: a late answer must not disturb a step).
    fn take_round(&mut self) -> Option<ToolRound> {
        match std::mem::replace(&mut self.state, State::Idle) {
            State::Tools(round) => Some(round),
            other @ (State::Idle
            | State::Streaming(_)
            | State::Backoff { .. }
            | State::Paused(_)
            | State::Terminated) => {
                self.state = other;
                None
            }
        }
    }

    /// Waits for the remaining runs, or sends the results to the model.
    pub(super) fn after_result(&mut self, round: ToolRound, now: Instant) {
        if !round.is_complete() {
            self.state = State::Tools(round);
            return;
        }
        let message = Message::new(Role::User, round.into_results());
        let Some(turn) = &mut self.turn else { return };
        turn.messages.push(message.clone());
        turn.step_user = message.clone();
        self.events.push_back(AgentEvent::Message(Box::new(message)));
        self.begin_step(now);
    }
}
