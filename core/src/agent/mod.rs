//! The agent: a stateful conversation with tools, approval gates, steering and live
//! events, as a sans-IO state machine.
//!
//! ```text
//!                 prompt (staged while busy or paused: last one wins)
//!   Idle ───────────────────────────────┐
//!    ▲                                  ▼
//!    │ stop          ┌──────────── Streaming (inner Generate, max_steps 1) ◄──────┐
//!    │               │ answer without     │ tool calls      │ failure             │
//!    │               ▼ tools to run       ▼                 ▼                     │
//!    ├──── turn end (handle_turn │   Deciding (one call   handle_error ─ retry ─► Backoff
//!    │     or staged prompt)     │   at a time) ──pause──► Paused                 │
//!    │          │ continue ──► next turn │    ◄──resume──────┘                    │
//!    │          │                        ▼                                        │
//!    │          │              Tools (parallel runs, deadlines) ── results ── next step
//!    │   no handler / max_steps: turn end with stop reason tool_use
//!   cancel or final error (from any busy or paused state): the turn is discarded
//! ```
//!
//! A *step* is one model request and its answer; a *turn* starts with a prompt and ends
//! with a stop. Each step runs an inner [`Generate`] machine configured with
//! `max_steps = 1` and no executable tools, so it stops at tool calls and hands them back:
//! the HTTP retries, timeouts and stall detection are the generate machine's, and the agent
//! runs the tool phase itself (decisions through [`AgentCallbacks`], approved tools in
//! parallel, results in call order). The turn's messages join the committed history only
//! when the turn ends; a cancel or a final error leaves the history as it was.
//!
//! Driving contract (the generate machine's): after every `handle_*`, drain
//! [`Agent::poll_effect`] and [`Agent::poll_event`], then wait for the next input or until
//! [`Agent::poll_timeout`] and call [`Agent::handle_timeout`]. Time is always passed in;
//! answers for unknown or cancelled ids are ignored. Request and tool-run ids are the
//! agent's own (unique across steps), not the inner machine's.

mod callbacks;
mod io;
mod partial;
mod tools;

pub use callbacks::{AgentCallbacks, ErrorDecision, NoCallbacks, ToolDecision, TurnDecision};
pub use io::{
    AgentConfig, AgentError, AgentEvent, AgentInput, RetryKind, Snapshot, StatePatch, Status, TurnEnd,
    DEFAULT_AGENT_TOOL_TIMEOUT,
};

use std::collections::VecDeque;
use std::fmt;
use std::time::Instant;

use crate::generate::{
    check_input, Effect, Generate, GenerateConfig, GenerateError, GenerateEvent, Input, RequestId, ToolRunId,
    DEFAULT_MAX_STEPS,
};
use crate::message::{Context, Message, ToolResult, ToolUse};
use crate::response::{Response, StopReason};
use crate::tool::{ToolError, ToolOutput};
use crate::usage::Usage;
use partial::Partial;
use tools::ToolRound;

/// One step's inner generate machine and the mapping of its request ids to ours.
#[derive(Debug)]
struct StepRun {
    generate: Generate,
    /// (ours, inner) for every request of this step.
    ids: Vec<(RequestId, RequestId)>,
}

#[derive(Debug)]
enum State {
    Idle,
    Streaming(Box<StepRun>),
    Backoff { until: Instant },
    Paused(ToolRound),
    Tools(ToolRound),
    Terminated,
}

/// The turn in flight.
#[derive(Debug)]
struct Turn {
    messages: Vec<Message>,
    usage: Usage,
    /// Requests made in this turn (a retried step counts once).
    steps: u32,
    /// The current step's user message (the prompt or the tool results).
    step_user: Message,
    /// Failures of the current step, for `handle_error`'s attempt count.
    failures: u32,
}

/// What a tool decision leads to.
enum Flow {
    Next,
    Pause(ToolUse, String),
    /// A tool without handler was to be executed: the call is the application's.
    EndTurn,
}

/// The agent machine. See the module documentation. `C` holds the callbacks and the
/// application's private state; the default boxes them so every agent has one type.
pub struct Agent<C: AgentCallbacks = Box<dyn AgentCallbacks + Send>> {
    /// Committed history lives in `config.messages`.
    config: AgentConfig,
    callbacks: C,
    state: State,
    turn: Option<Turn>,
    staged: Option<String>,
    status: Status,
    partial: Partial,
    next_id: u64,
    effects: VecDeque<Effect>,
    events: VecDeque<AgentEvent>,
}

impl<C: AgentCallbacks> fmt::Debug for Agent<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Agent")
            .field("status", &self.status)
            .field("state", &self.state)
            .field("committed", &self.config.messages.len())
            .field("staged", &self.staged)
            .finish_non_exhaustive()
    }
}

impl<C: AgentCallbacks> Agent<C> {
    /// Creates an idle agent: runs `init`, then checks the history, options and tools.
    pub fn new(mut config: AgentConfig, mut callbacks: C) -> Result<Self, AgentError> {
        callbacks.init(&mut config).map_err(AgentError::Init)?;
        io::validate_history(&config.messages)?;
        io::validate_setup(&config.options, &mut config.tools)?;
        Ok(Agent {
            config,
            callbacks,
            state: State::Idle,
            turn: None,
            staged: None,
            status: Status::Idle,
            partial: Partial::default(),
            next_id: 0,
            effects: VecDeque::new(),
            events: VecDeque::new(),
        })
    }

    /// The next effect for the driver.
    pub fn poll_effect(&mut self) -> Option<Effect> {
        self.effects.pop_front()
    }

    /// The next event for the application.
    pub fn poll_event(&mut self) -> Option<AgentEvent> {
        self.events.pop_front()
    }

    /// The next deadline, if any.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match &self.state {
            State::Streaming(run) => run.generate.poll_timeout(),
            State::Backoff { until } => Some(*until),
            State::Tools(round) => round.next_deadline(),
            State::Idle | State::Paused(_) | State::Terminated => None,
        }
    }

    /// Current status.
    pub fn status(&self) -> Status {
        self.status
    }

    /// The configuration; its `messages` are the committed history.
    pub fn config(&self) -> &AgentConfig {
        &self.config
    }

    /// The committed history.
    pub fn messages(&self) -> &[Message] {
        &self.config.messages
    }

    /// The callbacks and the application state they hold.
    pub fn callbacks(&self) -> &C {
        &self.callbacks
    }

    /// The callbacks, mutably.
    pub fn callbacks_mut(&mut self) -> &mut C {
        &mut self.callbacks
    }

    /// Committed, pending and partial messages: with every later event, the whole story.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            status: self.status,
            committed: self.config.messages.clone(),
            pending: self.turn.as_ref().map(|t| t.messages.clone()).unwrap_or_default(),
            partial: self.partial.message(),
        }
    }

    /// Feeds one input. Application inputs may be refused (typed error, nothing changes);
    /// driver inputs for unknown ids are ignored.
    pub fn handle_input(&mut self, input: AgentInput<'_>, now: Instant) -> Result<(), AgentError> {
        let terminated = matches!(self.state, State::Terminated);
        match input {
            _ if terminated => Err(AgentError::Terminated),
            AgentInput::Prompt(text) => {
                if matches!(self.state, State::Idle) {
                    self.start_turn(text, now);
                } else {
                    self.staged = Some(text);
                }
                Ok(())
            }
            AgentInput::Resume(decision) => self.resume(decision, now),
            AgentInput::Cancel => self.cancel(now),
            AgentInput::SetState(patch) => self.set_state(*patch),
            AgentInput::ResponseHead { id, status, headers } => {
                self.route_to_step(id, now, |id| Input::ResponseHead { id, status, headers });
                Ok(())
            }
            AgentInput::Body { id, bytes } => {
                self.route_to_step(id, now, |id| Input::Body { id, bytes });
                Ok(())
            }
            AgentInput::BodyEnd { id } => {
                self.route_to_step(id, now, |id| Input::BodyEnd { id });
                Ok(())
            }
            AgentInput::TransportFailed { id, error } => {
                self.route_to_step(id, now, |id| Input::TransportFailed { id, error });
                Ok(())
            }
            AgentInput::ToolFinished { id, outcome } => {
                self.tool_finished(id, outcome, now);
                Ok(())
            }
        }
    }

    /// Acts on deadlines that have passed.
    pub fn handle_timeout(&mut self, now: Instant) {
        match &mut self.state {
            State::Streaming(run) => {
                run.generate.handle_timeout(now);
                self.drain_step(now);
            }
            State::Backoff { until } if now >= *until => self.send_step(now),
            State::Tools(round) => {
                let expired = round.expired(now);
                if expired.is_empty() {
                    return;
                }
                let State::Tools(mut round) = std::mem::replace(&mut self.state, State::Idle) else { return };
                for (id, index, result) in expired {
                    self.effects.push_back(Effect::CancelTool { id });
                    self.record(&mut round, index, result);
                }
                self.after_result(round, now);
            }
            _ => {}
        }
    }

    /// Stops the agent for good: cancels work in flight (effects only, no events) and
    /// calls `terminate`. Drivers call this when the last handle goes away.
    pub fn terminate(&mut self, now: Instant) {
        if matches!(self.state, State::Terminated) {
            return;
        }
        self.abort(now);
        self.turn = None;
        self.staged = None;
        self.state = State::Terminated;
        self.callbacks.terminate();
    }

    fn set_status(&mut self, status: Status) {
        if self.status != status {
            self.status = status;
            self.events.push_back(AgentEvent::Status(status));
        }
    }

    fn start_turn(&mut self, text: String, now: Instant) {
        let user = Message::user(text);
        self.turn = Some(Turn {
            messages: vec![user.clone()],
            usage: Usage::default(),
            steps: 0,
            step_user: user.clone(),
            failures: 0,
        });
        self.set_status(Status::Busy);
        self.events.push_back(AgentEvent::Message(user));
        self.begin_step(now);
    }

    /// A new step: counts against `max_steps`.
    fn begin_step(&mut self, now: Instant) {
        if let Some(turn) = &mut self.turn {
            turn.steps += 1;
            turn.failures = 0;
        }
        self.send_step(now);
    }

    /// Sends the current step (again, after a failure): a fresh inner machine on the
    /// committed history plus the turn so far.
    fn send_step(&mut self, now: Instant) {
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
        let mut options = self.config.options.clone();
        options.max_steps = Some(1);
        let mut config = GenerateConfig::new(self.config.model.clone(), self.config.provider.clone(), context, options);
        config.api_key = self.config.api_key.clone();
        config.retry = self.config.retry;
        config.stall_timeout = self.config.stall_timeout;
        match Generate::new(config, now) {
            Ok(generate) => {
                self.state = State::Streaming(Box::new(StepRun { generate, ids: Vec::new() }));
                self.drain_step(now);
            }
            Err(error) => self.step_failed(error, now),
        }
    }

    /// Routes a driver input to the inner machine when the id is one of this step's.
    fn route_to_step<'a>(&mut self, id: RequestId, now: Instant, input: impl FnOnce(RequestId) -> Input<'a>) {
        let State::Streaming(run) = &mut self.state else { return };
        let Some(&(_, inner)) = run.ids.iter().find(|(ours, _)| *ours == id) else { return };
        run.generate.handle_input(input(inner), now);
        self.drain_step(now);
    }

    /// Forwards the inner machine's effects (with our ids) and events; acts on its end.
    fn drain_step(&mut self, now: Instant) {
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
                _ => {}
            }
        }
        match end {
            Some(Ok(response)) => self.step_done(*response, now),
            Some(Err(error)) => self.step_failed(error, now),
            None => {}
        }
    }

    fn step_done(&mut self, response: Response, now: Instant) {
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
            if turn.steps >= max_steps {
                self.end_turn(StopReason::ToolUse, TurnDecision::Stop, now);
                return;
            }
            self.decide(ToolRound::new(calls), now);
            return;
        }
        let turn_response = Response { messages: turn.messages.clone(), usage: turn.usage, ..response };
        let decision = self.callbacks.handle_turn(&turn_response);
        self.end_turn(stop, decision, now);
    }

    /// Commits the turn; a staged prompt overrides the decision.
    fn end_turn(&mut self, stop: StopReason, decision: TurnDecision, now: Instant) {
        self.state = State::Idle;
        let decision = match self.staged.take() {
            Some(text) => TurnDecision::Continue(text),
            None => decision,
        };
        let Some(turn) = self.turn.take() else { return };
        self.config.messages.extend(turn.messages.iter().cloned());
        let end = match decision {
            TurnDecision::Stop => TurnEnd::Stop,
            TurnDecision::Continue(_) => TurnEnd::Continue,
        };
        if end == TurnEnd::Stop {
            self.set_status(Status::Idle);
        }
        self.events.push_back(AgentEvent::Turn { end, stop_reason: stop, messages: turn.messages, usage: turn.usage });
        if let TurnDecision::Continue(text) = decision {
            self.start_turn(text, now);
        }
    }

    fn step_failed(&mut self, error: GenerateError, now: Instant) {
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

    /// Takes decisions in order until one pauses or every call is decided, then runs
    /// the approved calls.
    fn decide(&mut self, mut round: ToolRound, now: Instant) {
        while let Some((index, call)) = round.next_undecided() {
            let call = call.clone();
            let decision = self.callbacks.handle_tool_use(&call);
            match self.apply(&mut round, index, call, decision) {
                Flow::Next => {}
                Flow::Pause(call, reason) => return self.pause(round, call, reason),
                Flow::EndTurn => return self.end_turn(StopReason::ToolUse, TurnDecision::Stop, now),
            }
        }
        let runs = round.start_runs(&mut self.next_id, now);
        self.effects.extend(runs);
        self.after_result(round, now);
    }

    fn pause(&mut self, round: ToolRound, call: ToolUse, reason: String) {
        self.state = State::Paused(round);
        self.set_status(Status::Paused);
        self.events.push_back(AgentEvent::Pause { tool_use: call, reason });
    }

    fn resume(&mut self, decision: ToolDecision, now: Instant) -> Result<(), AgentError> {
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
            Flow::EndTurn => self.end_turn(StopReason::ToolUse, TurnDecision::Stop, now),
        }
        Ok(())
    }

    /// Applies one decision to call `index`.
    fn apply(&mut self, round: &mut ToolRound, index: usize, call: ToolUse, decision: ToolDecision) -> Flow {
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
                        let limit =
                            decl.timeout.or(self.config.options.tool_timeout).unwrap_or(self.config.tool_timeout);
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
    fn record(&mut self, round: &mut ToolRound, index: usize, result: ToolResult) {
        let result = self.callbacks.handle_tool_result(result);
        self.events.push_back(AgentEvent::ToolResult(result.clone()));
        round.set_result(index, result);
    }

    fn tool_finished(&mut self, id: ToolRunId, outcome: crate::generate::ToolOutcome, now: Instant) {
        let State::Tools(round) = &self.state else { return };
        let Some((index, result)) = round.finish(id, outcome) else { return };
        let State::Tools(mut round) = std::mem::replace(&mut self.state, State::Idle) else { return };
        self.record(&mut round, index, result);
        self.after_result(round, now);
    }

    /// Waits for the remaining runs, or sends the results to the model.
    fn after_result(&mut self, round: ToolRound, now: Instant) {
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

    fn cancel(&mut self, now: Instant) -> Result<(), AgentError> {
        if matches!(self.state, State::Idle) {
            return Err(AgentError::Idle);
        }
        self.abort(now);
        self.turn = None;
        self.staged = None;
        self.state = State::Idle;
        self.set_status(Status::Idle);
        self.events.push_back(AgentEvent::Cancelled);
        Ok(())
    }

    /// Cancels the request or tool runs in flight (effects only).
    fn abort(&mut self, now: Instant) {
        self.partial.clear();
        match std::mem::replace(&mut self.state, State::Idle) {
            State::Streaming(mut run) => {
                run.generate.handle_input(Input::Cancel, now);
                while let Some(effect) = run.generate.poll_effect() {
                    if let Effect::CancelRequest { id: inner } = effect {
                        if let Some(&(ours, _)) = run.ids.iter().find(|(_, i)| *i == inner) {
                            self.effects.push_back(Effect::CancelRequest { id: ours });
                        }
                    }
                }
            }
            State::Tools(round) => self.effects.extend(round.running().into_iter().map(|id| Effect::CancelTool { id })),
            other => self.state = other,
        }
    }

    fn set_state(&mut self, patch: StatePatch) -> Result<(), AgentError> {
        if !matches!(self.state, State::Idle) {
            return Err(AgentError::Busy);
        }
        if let Some(messages) = &patch.messages {
            io::validate_history(messages)?;
        }
        let options = patch.options.as_ref().unwrap_or(&self.config.options);
        let mut tools = patch.tools;
        io::validate_setup(options, tools.as_deref_mut().unwrap_or_default())?;
        // Everything is valid: apply it all.
        if let Some(model) = patch.model {
            self.config.model = model;
        }
        if let Some(provider) = patch.provider {
            self.config.provider = provider;
        }
        if let Some(system) = patch.system {
            self.config.system = system;
        }
        if let Some(messages) = patch.messages {
            self.config.messages = messages;
        }
        if let Some(tools) = tools {
            self.config.tools = tools;
        }
        if let Some(options) = patch.options {
            self.config.options = options;
        }
        self.events.push_back(AgentEvent::State);
        Ok(())
    }
}
