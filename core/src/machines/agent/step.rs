//! A turn's steps: each is one exchange (the request sub-machine, with its retries,
//! stall and timeout, under the agent's own request ids); its end either starts the tool
//! round or ends the turn, and its failure goes to `handle_error`.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use super::{
    Agent, AgentCallbacks, AgentError, AgentEvent, ErrorDecision, PartialMessage, Prompt, RetryKind, State, Status,
    StepRun, Turn, TurnDecision, TurnEnd,
};
use crate::data::error::RequestError;
use crate::data::event::StreamEvent;
use crate::data::message::{Block, Context, Message, Role, ToolResult, ToolUse};
use crate::data::options::{Options, OutputSchema};
use crate::data::response::{Response, StopReason, Warning};
use crate::data::schema::{JsonSchemaValidator, Validator};
use crate::data::usage::Usage;
use crate::machines::common::{Effect, GenerateError, Report};
use crate::machines::generate::structured;
use crate::machines::generate::DEFAULT_MAX_STEPS;
use crate::machines::request::{Limits, Out, Request, RequestEvent, StreamSink};
use crate::wire::dialect::RequestSpec;

use crate::machines::tool_round::ToolRound;

impl<C: AgentCallbacks> Agent<C> {
    pub(super) fn start_turn(&mut self, prompt: Prompt, now: Instant) {
        let user = self.prompt_message(prompt.content);
        // A prompt's own options hold for its turn only (`take_turn` puts these back).
        let restore_options = prompt.options.map(|options| {
            let merged = options.merged_over(&self.config.options);
            std::mem::replace(&mut self.config.options, merged)
        });
        self.turn = Some(Box::new(Turn {
            messages: vec![user.clone()],
            usage: Usage::default(),
            steps: 0,
            step_user: user.clone(),
            failures: 0,
            last: None,
            output_retries: 0,
            call_retries: 0,
            restore_options,
        }));
        self.set_status(Status::Busy);
        if self.config.observe.is_on() {
            self.effects.push_back(Effect::Observe(crate::machines::observe::Observation::TurnStarted));
        }
        self.events.push_back(AgentEvent::Message(Box::new(user)));
        self.begin_step(now);
    }

    /// The user message that opens a turn. When the last turn ended on calls nobody
    /// answered (a tool without handler, `max_steps`), every provider would refuse a
    /// history with unanswered calls: each gets the result the prompt carries for it (a
    /// tool the application ran itself), else an error result, in the calls' order and
    /// ahead of the rest of the prompt.
    fn prompt_message(&self, mut content: Vec<Block>) -> Message {
        let open: Vec<(String, String)> = self
            .config
            .messages
            .last()
            .map(|last| last.tool_uses().map(|call| (call.id.clone(), call.name.clone())).collect())
            .unwrap_or_default();
        if open.is_empty() {
            return Message::new(Role::User, content);
        }
        let mut results = Vec::with_capacity(open.len() + content.len());
        for (id, name) in open {
            let given = content.iter().position(|b| matches!(b, Block::ToolResult(r) if r.tool_use_id == id));
            results.push(match given {
                Some(at) => content.remove(at),
                None => {
                    let reason = "no result: the application did not answer this call";
                    Block::ToolResult(ToolResult::error(id, name, reason))
                }
            });
        }
        results.extend(content);
        Message::new(Role::User, results)
    }

    /// A new step: counts against `max_steps`.
    pub(super) fn begin_step(&mut self, now: Instant) {
        let Some(turn) = &mut self.turn else { return };
        turn.steps += 1;
        turn.failures = 0;
        let step = turn.steps;
        // Tools replaced during the last step (checked when they were staged).
        if let Some(tools) = self.staged_tools.take() {
            if let Err(error) = self.apply_patch(super::StatePatch { tools: Some(tools), ..Default::default() }) {
                let message = format!("the tools replaced for step {step}: {error}");
                return self.step_failed(GenerateError::Request(RequestError::Unsupported { message }), now);
            }
        }
        // The callbacks see the step and may change the system prompt, tools and options
        // for it and the steps after it, checked as `set_state` checks a change.
        if let Some(patch) = self.callbacks.handle_step(step, &self.state()) {
            if let Err(error) = self.apply_step_patch(patch) {
                let message = format!("handle_step's change for step {step}: {error}");
                return self.step_failed(GenerateError::Request(RequestError::Unsupported { message }), now);
            }
        }
        self.send_step(now);
    }

    /// A change from `handle_step`: the system prompt, tools and options only.
    fn apply_step_patch(&mut self, patch: super::StatePatch) -> Result<(), AgentError> {
        let mid_turn = patch.model.is_some()
            || patch.provider.is_some()
            || patch.api_key.is_some()
            || patch.messages.is_some()
            || patch.messages_with.is_some();
        if mid_turn {
            return Err(AgentError::InvalidMessages(
                "a step may change only the system prompt, the tools and the options".into(),
            ));
        }
        self.apply_patch(patch)
    }

    /// Sends the current step (again, after a failure): one exchange (the request
    /// sub-machine, as a call's step) on the committed history plus the turn so far.
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
        let options = released.as_ref().unwrap_or(&self.config.options);
        // The application's own validator, as a call takes one: its schema is sent when the
        // options name none.
        let with_schema;
        let options = match (&self.config.output_validator, &options.output) {
            (Some(own), None) => {
                let output = OutputSchema { name: "output".into(), schema: own.schema().clone() };
                with_schema = Options { output: Some(output), ..options.clone() };
                &with_schema
            }
            _ => options,
        };
        // Checked when the options were set; compiled for each step, as a call does.
        let validator = match (&self.config.output_validator, &options.output) {
            (Some(own), _) => Some(own.clone()),
            (None, None) => None,
            (None, Some(output)) => match JsonSchemaValidator::new(output.schema.clone()) {
                Ok(compiled) => Some(Arc::new(compiled) as Arc<dyn Validator>),
                Err(e) => {
                    let message = format!("output schema: {e}");
                    return self.step_failed(GenerateError::Request(RequestError::Unsupported { message }), now);
                }
            },
        };
        let spec = RequestSpec {
            model: &self.config.model,
            provider: &self.config.provider,
            context: &context,
            options,
            api_key: self.config.api_key.as_ref(),
        };
        let (built, protocol) = match crate::text_tools::render::build_request(&spec) {
            Ok(built) => built,
            Err(error) => return self.step_failed(GenerateError::Request(error), now),
        };
        let limits = Limits {
            retry: self.config.retry,
            stall_timeout: self.config.stall_timeout,
            timeout: options.timeout,
            max_response_bytes: self.config.max_response_bytes,
        };
        let observe = self.config.observe;
        self.effects.extend(crate::machines::observe::inference_started(observe, &spec, &built.request));
        let mut out = Out { next_id: &mut self.next_id, effects: &mut self.effects };
        let request = Request::start(built.request, self.config.model.clone(), limits, now, &mut out)
            .with_text_tools(protocol, &context.tools)
            .with_event_hook(self.config.provider.hooks.event.clone())
            .observed(observe);
        self.state = State::Streaming(Box::new(StepRun { request, warnings: built.warnings, validator }));
        self.drain_step(now);
    }

    /// Feeds a report to the step's exchange (it ignores those of other requests).
    pub(super) fn route_to_step(&mut self, report: Report<'_>, now: Instant) {
        let State::Streaming(run) = &mut self.state else { return };
        let mut out = Out { next_id: &mut self.next_id, effects: &mut self.effects };
        run.request.handle_report(
            report,
            now,
            &mut out,
            &mut StepEvents { partial: &mut self.partial, events: &mut self.events },
        );
        self.drain_step(now);
    }

    /// The step's exchange's deadlines that passed.
    pub(super) fn step_timeout(&mut self, now: Instant) {
        let State::Streaming(run) = &mut self.state else { return };
        run.request.handle_timeout(now, &mut Out { next_id: &mut self.next_id, effects: &mut self.effects });
        self.drain_step(now);
    }

    /// Forwards what the step's exchange said (its stream events are already queued, see
    /// [`StepEvents`]); acts on its end.
    pub(super) fn drain_step(&mut self, now: Instant) {
        // One event at a time (no buffer per input): the exchange's end changes the state,
        // and nothing follows it.
        loop {
            let State::Streaming(run) = &mut self.state else { return };
            let Some(event) = run.request.poll_event() else { return };
            match event {
                RequestEvent::Retry { attempt, delay, error } => {
                    self.partial.clear();
                    self.events.push_back(AgentEvent::Retry { kind: RetryKind::Request, attempt, delay, error });
                }
                RequestEvent::Finished(response) => {
                    let State::Streaming(run) = std::mem::replace(&mut self.state, State::Idle) else { return };
                    let StepRun { warnings, validator, .. } = *run;
                    return self.step_done(step_response(*response, warnings, validator.as_deref()), now);
                }
                RequestEvent::Failed(failure) => return self.step_failed(failure.0, now),
            }
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
            self.events.push_back(AgentEvent::Message(Box::new(assistant.clone())));
        }
        let user = Box::new(turn.step_user.clone());
        self.events.push_back(AgentEvent::Step {
            user,
            assistant: Box::new(assistant.clone()),
            stop_reason: stop,
            usage: Box::new(response.usage),
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
            self.events.push_back(AgentEvent::Message(Box::new(correction)));
            self.begin_step(now);
            return;
        }
        // A text protocol's call that could not be read: the model is told, and tries again.
        let unread = crate::text_tools::correct::unread_call(&response).map(|w| w.message.clone());
        let allowed =
            self.config.options.tool_call_retries.unwrap_or(crate::text_tools::correct::DEFAULT_TOOL_CALL_RETRIES);
        if let Some(why) =
            unread.filter(|_| stop != StopReason::Length && turn.call_retries < allowed && turn.steps < max_steps)
        {
            let protocol = crate::text_tools::render::protocol_for(
                &self.config.model,
                &self.config.provider,
                &self.config.options,
            );
            if let Some(protocol) = protocol.text() {
                let specs: Vec<_> = self.config.tools.iter().map(|t| t.spec.clone()).collect();
                let correction = Message::user(crate::text_tools::correct::correction(protocol.as_ref(), &specs, &why));
                turn.call_retries += 1;
                turn.messages.push(correction.clone());
                turn.step_user = correction.clone();
                turn.last = Some(response);
                self.events.push_back(AgentEvent::Message(Box::new(correction)));
                self.begin_step(now);
                return;
            }
        }
        turn.last = Some(response);
        self.end_turn(stop, now);
    }

    /// Commits the turn after asking `handle_turn`; a staged prompt overrides its decision.
    pub(super) fn end_turn(&mut self, stop: StopReason, now: Instant) {
        self.state = State::Idle;
        let Some(turn) = self.take_turn(None) else { return };
        let mut response = turn.last.clone().unwrap_or_else(|| Response::empty(self.config.model.id.clone()));
        response.messages = turn.messages.clone();
        response.usage = turn.usage;
        response.stop_reason = Some(stop);
        let decision = self.callbacks.handle_turn(&response);
        let decision = match self.staged.take() {
            Some(prompt) => TurnDecision::ContinueWith(prompt),
            None => decision,
        };
        self.config.messages.extend(turn.messages.iter().cloned());
        let end = match decision {
            TurnDecision::Stop => TurnEnd::Stop,
            TurnDecision::Continue(_) | TurnDecision::ContinueWith(_) => TurnEnd::Continue,
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
            usage: Box::new(turn.usage),
            output: output.map(Box::new),
        });
        match decision {
            TurnDecision::Stop => {}
            TurnDecision::Continue(text) => self.start_turn(Prompt::text(text), now),
            TurnDecision::ContinueWith(prompt) => self.start_turn(*prompt, now),
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
                self.events.push_back(AgentEvent::Retry {
                    kind: RetryKind::Step,
                    attempt,
                    delay,
                    error: Box::new(error),
                });
                self.state = State::Backoff { until: now + delay };
                return;
            }
        }
        self.take_turn(Some(crate::machines::observe::error_type(&error)));
        self.staged = None;
        self.set_status(Status::Idle);
        self.events.push_back(AgentEvent::Error(Box::new(error)));
    }
}

/// A step's response as the turn keeps it, as a one-step call would give it: the
/// request's warnings first, the answer as its one message, and with structured output
/// the value or why there is none (the agent, not the step, asks for corrections).
fn step_response(mut response: Response, warnings: Vec<Warning>, validator: Option<&dyn Validator>) -> Response {
    let stop = response.stop_reason.unwrap_or(StopReason::Stop);
    let mut all = warnings;
    all.extend(response.warnings.iter().cloned());
    response.warnings = all;
    response.messages = if response.message.content.is_empty() { Vec::new() } else { vec![response.message.clone()] };
    response.stop_reason = Some(stop);
    if let Some(validator) = validator {
        match structured::judge(validator, &response, stop) {
            Ok(value) => response.output = Some(value),
            Err(invalid) => response.output_error = Some(invalid.into_message()),
        }
    }
    response
}

/// A step's stream events, applied to the message being streamed and queued for the
/// application as they are decoded. The stream's `Done` is not an agent event: the step's
/// end is told by [`AgentEvent::Step`].
struct StepEvents<'a> {
    partial: &'a mut PartialMessage,
    events: &'a mut VecDeque<AgentEvent>,
}

impl StreamSink for StepEvents<'_> {
    #[inline]
    fn stream(&mut self, event: StreamEvent) {
        if matches!(event, StreamEvent::Done { .. }) {
            return;
        }
        self.partial.apply(&event);
        self.events.push_back(AgentEvent::Stream(event));
    }
}

/// Tool results in a prompt must answer calls the last committed message left open.
pub(super) fn check_results(last: Option<&Message>, content: &[Block]) -> Result<(), AgentError> {
    for block in content {
        if let Block::ToolResult(result) = block {
            let open = last.is_some_and(|m| m.tool_uses().any(|call| call.id == result.tool_use_id));
            if !open {
                return Err(AgentError::InvalidMessages(format!(
                    "a tool result for {}, which no open call of the last turn has",
                    result.tool_use_id
                )));
            }
        }
    }
    Ok(())
}
