//! A turn's steps: each runs a fresh inner generate machine whose effects and events
//! are forwarded (with the agent's own request ids); its end either starts the tool phase
//! or ends the turn, and its failure goes to `handle_error`.

use std::time::Instant;

use super::{
    Agent, AgentCallbacks, AgentEvent, ErrorDecision, RetryKind, State, Status, StepRun, Turn, TurnDecision, TurnEnd,
};
use crate::generate::structured;
use crate::generate::{
    Effect, Generate, GenerateConfig, GenerateError, GenerateEvent, Input, Report, RequestId, DEFAULT_MAX_STEPS,
};
use crate::message::{Block, Context, Message, Role, ToolResult, ToolUse};
use crate::response::{Response, StopReason};
use crate::usage::Usage;

use crate::tool_round::ToolRound;

impl<C: AgentCallbacks> Agent<C> {
    pub(super) fn start_turn(&mut self, text: String, now: Instant) {
        let user = self.prompt_message(text);
        self.turn = Some(Turn {
            messages: vec![user.clone()],
            usage: Usage::default(),
            steps: 0,
            step_user: user.clone(),
            failures: 0,
            last: None,
            output_retries: 0,
        });
        self.set_status(Status::Busy);
        self.events.push_back(AgentEvent::Message(user));
        self.begin_step(now);
    }

    /// The user message that opens a turn. When the last turn ended on calls nobody
    /// answered (a tool without handler, `max_steps`), every provider would refuse a
    /// history with unanswered calls: each gets an error result, ahead of the text.
    fn prompt_message(&self, text: String) -> Message {
        let Some(last) = self.config.messages.last() else { return Message::user(text) };
        let mut content: Vec<Block> = last
            .tool_uses()
            .map(|call| {
                let reason = "no result: the application did not answer this call";
                Block::ToolResult(ToolResult::error(call.id.clone(), call.name.clone(), reason))
            })
            .collect();
        if content.is_empty() {
            return Message::user(text);
        }
        content.push(Block::text(text));
        Message::new(Role::User, content)
    }

    /// A new step: counts against `max_steps`.
    pub(super) fn begin_step(&mut self, now: Instant) {
        if let Some(turn) = &mut self.turn {
            turn.steps += 1;
            turn.failures = 0;
        }
        self.send_step(now);
    }

    /// Sends the current step (again, after a failure): a fresh inner machine on the
    /// committed history plus the turn so far.
    pub(super) fn send_step(&mut self, now: Instant) {
        self.partial.clear();
        let Some(turn) = &self.turn else { return };
        let mut messages = Vec::with_capacity(self.config.messages.len() + turn.messages.len());
        messages.extend_from_slice(&self.config.messages);
        messages.extend_from_slice(&turn.messages);
        let context = Context {
            system: self.config.system.clone(),
            messages,
            tools: self.config.tools.iter().map(|t| t.spec.clone()).collect(),
        };
        // A forced tool choice holds until the model called a tool in this turn.
        let called = turn.messages.iter().any(|m| m.tool_uses().next().is_some());
        let released = if called { self.config.options.after_tool_calls() } else { None };
        let mut options = released.unwrap_or_else(|| self.config.options.clone());
        options.max_steps = Some(1);
        let mut config = GenerateConfig::new(self.config.model.clone(), self.config.provider.clone(), context, options);
        config.api_key = self.config.api_key.clone();
        config.retry = self.config.retry;
        config.stall_timeout = self.config.stall_timeout;
        config.max_response_bytes = self.config.max_response_bytes;
        // The step's machine checks structured output but never corrects it itself: its
        // correction would not join the turn. The agent corrects (see `step_done`).
        config.output_retries = 0;
        match Generate::new(config, now) {
            Ok(generate) => {
                self.state = State::Streaming(Box::new(StepRun { generate, ids: Vec::new() }));
                self.drain_step(now);
            }
            Err(error) => self.step_failed(error, now),
        }
    }

    /// Routes a request's report to the inner machine when the request is one of this
    /// step's (under the inner machine's id).
    pub(super) fn route_to_step(&mut self, report: Report<'_>, now: Instant) {
        let State::Streaming(run) = &mut self.state else { return };
        let Some(id) = report.request() else { return };
        let Some(&(_, inner)) = run.ids.iter().find(|(ours, _)| *ours == id) else { return };
        // Reports are never refused (unknown ids are ignored).
        let _ = run.generate.handle_input(Input::Report(report.for_request(inner)), now);
        self.drain_step(now);
    }

    /// Forwards the inner machine's effects (with our ids) and events; acts on its end.
    pub(super) fn drain_step(&mut self, now: Instant) {
        let State::Streaming(run) = &mut self.state else { return };
        while let Some(effect) = run.generate.poll_effect() {
            match effect {
                Effect::SendRequest { id: inner, request } => {
                    let ours = RequestId(self.next_id);
                    self.next_id += 1;
                    run.ids.push((ours, inner));
                    self.effects.push_back(Effect::SendRequest { id: ours, request });
                }
                Effect::CancelRequest { id: inner } => {
                    if let Some(&(ours, _)) = run.ids.iter().find(|(_, i)| *i == inner) {
                        self.effects.push_back(Effect::CancelRequest { id: ours });
                    }
                }
                // No tool is executable in the inner machine.
                Effect::RunTool { .. } | Effect::CancelTool { .. } => {}
            }
        }
        let mut end = None;
        while let Some(event) = run.generate.poll_event() {
            match event {
                GenerateEvent::Stream { event: crate::StreamEvent::Done { .. }, .. } => {}
                GenerateEvent::Stream { event, .. } => {
                    self.partial.apply(&event);
                    self.events.push_back(AgentEvent::Stream(event));
                }
                GenerateEvent::Retry { attempt, delay, error, .. } => {
                    self.partial.clear();
                    self.events.push_back(AgentEvent::Retry { kind: RetryKind::Request, attempt, delay, error });
                }
                GenerateEvent::Finished(response) => end = Some(Ok(response)),
                GenerateEvent::Failed { error, .. } => end = Some(Err(error)),
                // The step's machine has no executable tool and never corrects output
                // (`output_retries = 0`): the agent runs both itself.
                GenerateEvent::ToolResult { .. } | GenerateEvent::OutputRetry { .. } => {
                    debug_assert!(false, "a step's machine runs no tool and corrects nothing");
                }
            }
        }
        match end {
            Some(Ok(response)) => self.step_done(*response, now),
            Some(Err(error)) => self.step_failed(error, now),
            None => {}
        }
    }

    pub(super) fn step_done(&mut self, response: Response, now: Instant) {
        self.state = State::Idle;
        self.partial.clear();
        let Some(turn) = &mut self.turn else { return };
        let stop = response.stop_reason.unwrap_or(StopReason::Stop);
        let assistant = response.message.clone();
        turn.usage += response.usage;
        if !assistant.content.is_empty() {
            turn.messages.push(assistant.clone());
            self.events.push_back(AgentEvent::Message(assistant.clone()));
        }
        let user = Box::new(turn.step_user.clone());
        self.events.push_back(AgentEvent::Step {
            user,
            assistant: Box::new(assistant.clone()),
            stop_reason: stop,
            usage: response.usage,
        });
        let calls: Vec<ToolUse> = assistant.tool_uses().cloned().collect();
        if stop == StopReason::ToolUse && !calls.is_empty() {
            let max_steps = self.config.options.max_steps.unwrap_or(DEFAULT_MAX_STEPS);
            let cap_reached = turn.steps >= max_steps;
            turn.last = Some(response);
            if cap_reached {
                self.end_turn(StopReason::ToolUse, now);
            } else {
                self.decide(ToolRound::new(calls), now);
            }
            return;
        }
        // Structured output: an invalid final reply gets a correction, as a call's does,
        // while corrections and steps remain; the correction joins the turn.
        let max_steps = self.config.options.max_steps.unwrap_or(DEFAULT_MAX_STEPS);
        let may_correct =
            stop != StopReason::Length && turn.output_retries < self.config.output_retries && turn.steps < max_steps;
        if let (Some(error), true) = (response.output_error.clone(), may_correct) {
            turn.output_retries += 1;
            let correction = Message::user(structured::correction(&error));
            turn.messages.push(correction.clone());
            turn.step_user = correction.clone();
            turn.last = Some(response);
            self.events.push_back(AgentEvent::OutputRetry { attempt: turn.output_retries, error });
            self.events.push_back(AgentEvent::Message(correction));
            self.begin_step(now);
            return;
        }
        turn.last = Some(response);
        self.end_turn(stop, now);
    }

    /// Commits the turn after asking `handle_turn`; a staged prompt overrides its decision.
    pub(super) fn end_turn(&mut self, stop: StopReason, now: Instant) {
        self.state = State::Idle;
        let Some(turn) = self.turn.take() else { return };
        let mut response = turn.last.clone().unwrap_or_else(|| Response::empty(self.config.model.id.clone()));
        response.messages = turn.messages.clone();
        response.usage = turn.usage;
        response.stop_reason = Some(stop);
        let decision = self.callbacks.handle_turn(&response);
        let decision = match self.staged.take() {
            Some(text) => TurnDecision::Continue(text),
            None => decision,
        };
        self.config.messages.extend(turn.messages.iter().cloned());
        let end = match decision {
            TurnDecision::Stop => TurnEnd::Stop,
            TurnDecision::Continue(_) => TurnEnd::Continue,
        };
        if end == TurnEnd::Stop {
            self.set_status(Status::Idle);
        }
        let output = match (response.output, response.output_error) {
            (Some(value), _) => Some(Ok(value)),
            (None, Some(error)) => Some(Err(error)),
            (None, None) => None,
        };
        self.events.push_back(AgentEvent::Turn {
            end,
            stop_reason: stop,
            messages: turn.messages,
            usage: turn.usage,
            output,
        });
        if let TurnDecision::Continue(text) = decision {
            self.start_turn(text, now);
        }
    }

    pub(super) fn step_failed(&mut self, error: GenerateError, now: Instant) {
        self.state = State::Idle;
        self.partial.clear();
        let Some(turn) = &mut self.turn else { return };
        turn.failures += 1;
        let attempt = turn.failures;
        if self.callbacks.handle_error(&error, attempt) == ErrorDecision::Retry {
            if let Some(delay) = self.config.error_backoff.delay(attempt, None) {
                self.events.push_back(AgentEvent::Retry { kind: RetryKind::Step, attempt, delay, error });
                self.state = State::Backoff { until: now + delay };
                return;
            }
        }
        self.turn = None;
        self.staged = None;
        self.set_status(Status::Idle);
        self.events.push_back(AgentEvent::Error(error));
    }
}
