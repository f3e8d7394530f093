//! The tool phase as the agent runs it: decisions one call at a time through the
//! callbacks (a pause waits for `resume`), then the approved calls in parallel, then the
//! results, in call order, as the next step's user message.

use std::time::Instant;

use super::{Agent, AgentCallbacks, AgentError, AgentEvent, Flow, State, Status, ToolDecision};
use crate::generate::{check_input, effective_tool_timeout, ToolOutcome, ToolRunId};
use crate::message::{ToolResult, ToolUse};
use crate::response::StopReason;
use crate::tool::{ToolError, ToolOutput};

use super::tools::ToolRound;

impl<C: AgentCallbacks> Agent<C> {
    /// Takes decisions in order until one pauses or every call is decided, then runs
    /// the approved calls.
    pub(super) fn decide(&mut self, mut round: ToolRound, now: Instant) {
        while let Some((index, call)) = round.next_undecided() {
            let call = call.clone();
            let decision = self.callbacks.handle_tool_use(&call);
            match self.apply(&mut round, index, call, decision) {
                Flow::Next => {}
                Flow::Pause(call, reason) => return self.pause(round, call, reason),
                Flow::EndTurn => return self.end_turn(StopReason::ToolUse, now),
            }
        }
        let runs = round.start_runs(&mut self.next_id, now);
        self.effects.extend(runs);
        self.after_result(round, now);
    }

    pub(super) fn pause(&mut self, round: ToolRound, call: ToolUse, reason: String) {
        self.state = State::Paused(round);
        self.set_status(Status::Paused);
        self.events.push_back(AgentEvent::Pause { tool_use: call, reason });
    }

    pub(super) fn resume(&mut self, decision: ToolDecision, now: Instant) -> Result<(), AgentError> {
        let State::Paused(_) = &self.state else { return Err(AgentError::NotPaused) };
        let State::Paused(mut round) = std::mem::replace(&mut self.state, State::Idle) else {
            return Err(AgentError::NotPaused);
        };
        let Some((index, call)) = round.next_undecided() else {
            self.after_result(round, now);
            return Ok(());
        };
        let call = call.clone();
        if !matches!(decision, ToolDecision::Pause(_)) {
            self.set_status(Status::Busy);
        }
        match self.apply(&mut round, index, call, decision) {
            Flow::Next => self.decide(round, now),
            Flow::Pause(call, reason) => self.pause(round, call, reason),
            Flow::EndTurn => self.end_turn(StopReason::ToolUse, now),
        }
        Ok(())
    }

    /// Applies one decision to call `index`.
    pub(super) fn apply(&mut self, round: &mut ToolRound, index: usize, call: ToolUse, decision: ToolDecision) -> Flow {
        let result = match decision {
            ToolDecision::Pause(reason) => return Flow::Pause(call, reason),
            ToolDecision::Reject(reason) => ToolResult::error(&call.id, &call.name, reason),
            ToolDecision::Result(Ok(ToolOutput(content))) => {
                ToolResult { tool_use_id: call.id.clone(), name: call.name.clone(), content, is_error: false }
            }
            ToolDecision::Result(Err(ToolError(message))) => ToolResult::error(&call.id, &call.name, message),
            ToolDecision::Execute => match self.config.tools.iter().find(|t| t.spec.name == call.name) {
                None => ToolResult::error(&call.id, &call.name, format!("unknown tool {:?}", call.name)),
                Some(decl) if !decl.executable => return Flow::EndTurn,
                Some(decl) => match check_input(decl, &call) {
                    Err(message) => ToolResult::error(&call.id, &call.name, message),
                    Ok(input) => {
                        let limit = effective_tool_timeout(Some(decl), &self.config.options);
                        round.approve(index, ToolUse { input, ..call }, limit);
                        return Flow::Next;
                    }
                },
            },
        };
        self.record(round, index, result);
        Flow::Next
    }

    /// A result is known: the callbacks see it, then the application, then it is kept.
    pub(super) fn record(&mut self, round: &mut ToolRound, index: usize, result: ToolResult) {
        let result = self.callbacks.handle_tool_result(result);
        self.events.push_back(AgentEvent::ToolResult(result.clone()));
        round.set_result(index, result);
    }

    pub(super) fn tool_finished(&mut self, id: ToolRunId, outcome: ToolOutcome, now: Instant) {
        let State::Tools(round) = &self.state else { return };
        let Some((index, result)) = round.finish(id, outcome) else { return };
        let State::Tools(mut round) = std::mem::replace(&mut self.state, State::Idle) else { return };
        self.record(&mut round, index, result);
        self.after_result(round, now);
    }

    /// Waits for the remaining runs, or sends the results to the model.
    pub(super) fn after_result(&mut self, round: ToolRound, now: Instant) {
        if !round.is_complete() {
            self.state = State::Tools(round);
            return;
        }
        let message = round.into_message();
        let Some(turn) = &mut self.turn else { return };
        turn.messages.push(message.clone());
        turn.step_user = message.clone();
        self.events.push_back(AgentEvent::Message(message));
        self.begin_step(now);
    }
}
