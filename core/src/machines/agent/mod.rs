//! The agent: a stateful conversation with tools, approval gates, steering and live
//! events, as a sans-IO state machine.
//!
//! ```text
//!          prompt                    failure ─► handle_error ─ retry ─► Backoff ─┐
//!   Idle ──────────► Streaming ──────┘                  │ stop                  │
//!    ▲  (a prompt     (one request:  ◄─────────────────┼───────────────────────┘
//!    │   while busy    its retries)                     ▼
//!    │   or paused     │ answer       │ tool calls     Idle (error; turn discarded)
//!    │   is staged)    │ without      ▼
//!    │                 │ calls      Deciding (handle_tool_use, one call at a time)
//!    │                 │              │ pause ─► Paused ─ resume ─┐   │ no handler,
//!    │                 │              ◄───────────────────────────┘   │ max_steps
//!    │                 │              ▼                               │
//!    │                 │            Tools (parallel runs, deadlines)  │
//!    │                 │              │ results in call order         │
//!    │                 │              └──────► next step (Streaming)  │
//!    │                 ▼                                              ▼
//!    └── stop ──── turn end: handle_turn, overridden by a staged prompt ── continue ─► next turn
//!   cancel (busy or paused) ─► Idle, turn discarded
//! ```
//!
//! A *step* is one model request and its answer; a *turn* starts with a prompt and ends
//! with a stop. The agent is the generate machine's loop with callbacks, pauses and a
//! history: each step is one exchange of the request sub-machine the generate machine
//! uses for its steps too (`core/src/machines/request/`: HTTP retries, backoff, stall, timeout,
//! redirects, under the agent's own request ids), and each step's calls go to the tool
//! round it runs too (`core/src/machines/tool_round/`: input validation, approved tools in
//! parallel with deadlines, results in call order), with the agent's policy:
//! [`AgentCallbacks`] decide each call, and may pause for `resume`. The turn's messages
//! join the committed history only when the turn ends; a cancel or a final error leaves
//! the history as it was.
//!
//! Rules at the edges, so that every driver agrees:
//! - `handle_turn` runs at every turn end but a cancel or a final error; its response's
//!   stop reason says why the turn ended (`tool_use` for calls left to the application).
//! - Steering: a prompt while busy or paused is staged (the last one wins); at the next
//!   turn end it overrides the decision (`handle_turn` still runs, to observe the turn).
//!   A cancel or a final error drops it with the turn.
//! - `handle_tool_result` sees every result (executed, timed out, rejected, provided).
//! - `Execute` for a declared tool without a handler, or tool calls when `max_steps`
//!   requests were made, end the turn with stop reason `tool_use`: the turn (with the
//!   unanswered calls) is committed and results already decided for the step are
//!   dropped. The application may answer the calls through `set_state`; otherwise the
//!   next prompt answers each with an error result ahead of its text, since no provider
//!   accepts a history with unanswered calls.
//!   `Execute` for an undeclared tool, or with input that fails validation, gives the model
//!   an error result instead.
//! - A step retried by `handle_error` may already have streamed deltas: the `retry` event
//!   tells subscribers to drop that partial message (as the snapshot does).
//! - Structured output (`options.output`): every step's request asks for it; a turn's
//!   final reply that is not a valid value is answered with a correction message, which
//!   joins the turn like any message (an `output_retry` event, then `message`), while
//!   `output_retries` and `max_steps` allow; not when the reply was cut by the token
//!   limit. `handle_turn`'s response and the `turn` event carry the value or the error.
//!
//! Driving contract (every machine's; the shell's `Machine` trait is its driver-side view): after `new` and
//! every `handle_*`, drain [`Agent::poll_effect`] (a debug build asserts it) and
//! [`Agent::poll_event`], then wait for the next input or until [`Agent::poll_timeout`]
//! (the deadline and its [`Timer`]) and call [`Agent::handle_timeout`]. Time is always
//! passed in; answers for unknown or cancelled ids are ignored; an input the agent cannot
//! take now is refused ([`AgentError`]) and changes nothing. Request and tool-run ids are
//! unique across steps.
#![warn(clippy::wildcard_enum_match_arm)]

mod callbacks;
mod change;
mod decide;
mod io;
mod partial;
mod step;

pub use callbacks::{AgentCallbacks, ErrorDecision, NoCallbacks, ToolDecision, TurnDecision};
pub use change::StateChange;
pub use io::{
    AgentConfig, AgentError, AgentEvent, AgentInput, AgentState, Prompt, RetryKind, Snapshot, StatePatch, Status,
    TurnEnd, Update,
};
pub use partial::PartialMessage;

use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;
use std::time::Instant;

use crate::data::message::{Block, Message};
use crate::data::options::Options;
use crate::data::response::{Response, StopReason, Warning};
use crate::data::schema::Validator;
use crate::data::usage::Usage;
use crate::machines::common::{Effect, Report};
use crate::machines::observe::Observation;
use crate::machines::request::{Out, Request};
use crate::machines::timer::{Timer, TimerTable};
use crate::machines::tool_round::{ToolDecl, ToolRound};

/// One step's exchange, and what its response needs besides: the request's warnings
/// and the structured-output check.
struct StepRun {
    request: Request,
    warnings: Vec<Warning>,
    validator: Option<Arc<dyn Validator>>,
}

impl fmt::Debug for StepRun {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StepRun")
            .field("request", &self.request)
            .field("warnings", &self.warnings)
            .finish_non_exhaustive()
    }
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
    /// The last step's response, for `handle_turn`.
    last: Option<Response>,
    /// Corrections asked for invalid structured output in this turn.
    output_retries: u32,
    /// Corrections asked for a reply whose tool call could not be read, in this turn.
    call_retries: u32,
    /// The agent's options before this turn's prompt changed them, put back at its end.
    restore_options: Option<Options>,
}

/// The agent machine. See the module documentation. `C` holds the callbacks and the
/// application's private state; the default boxes them so every agent has one type.
pub struct Agent<C: AgentCallbacks = Box<dyn AgentCallbacks + Send>> {
    /// Committed history lives in `config.messages`.
    config: AgentConfig,
    callbacks: C,
    state: State,
    // Boxed, as `staged`: an idle agent (thousands of idle sessions in one process) holds
    // neither, and inline they would be more than a KiB of it.
    turn: Option<Box<Turn>>,
    staged: Option<Box<Prompt>>,
    /// Tools replaced mid-turn, offered from the next step.
    staged_tools: Option<Vec<ToolDecl>>,
    status: Status,
    partial: PartialMessage,
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
    /// `now` is when it starts, as for every machine (an idle agent has no deadline yet).
    pub fn new(mut config: AgentConfig, mut callbacks: C, now: Instant) -> Result<Self, AgentError> {
        let _ = now;
        callbacks.init(&mut config).map_err(AgentError::Init)?;
        io::validate_history(&config.messages)?;
        io::validate_setup(&config.options, &mut config.tools)?;
        Ok(Self {
            config,
            callbacks,
            state: State::Idle,
            turn: None,
            staged: None,
            staged_tools: None,
            status: Status::Idle,
            partial: PartialMessage::default(),
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

    /// The next deadline and why, if any.
    pub fn poll_timeout(&self) -> Option<(Instant, Timer)> {
        self.timers().next()
    }

    /// The agent's deadlines, from its state (a step's are its request's).
    fn timers(&self) -> TimerTable<Instant> {
        let mut timers = TimerTable::default();
        match &self.state {
            State::Streaming(run) => timers = run.request.timers(),
            State::Backoff { until } => timers.set(Timer::StepBackoff, Some(*until)),
            State::Tools(round) => timers.set(Timer::ToolDeadline, round.next_deadline()),
            State::Idle | State::Paused(_) | State::Terminated => {}
        }
        timers
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

    /// Status, model, system prompt, committed history, tools and options.
    pub fn state(&self) -> AgentState {
        AgentState {
            status: self.status,
            model: self.config.model.clone(),
            system: self.config.system.clone(),
            messages: self.config.messages.clone(),
            tools: self.config.tools.iter().map(|t| t.spec.clone()).collect(),
            options: self.config.options.clone(),
        }
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
        debug_assert!(self.effects.is_empty(), "the driver feeds input before executing every effect (poll_effect)");
        let terminated = matches!(self.state, State::Terminated);
        let from_application = matches!(
            input,
            AgentInput::Prompt(_)
                | AgentInput::PromptWith(_)
                | AgentInput::Resume(_)
                | AgentInput::Cancel
                | AgentInput::SetState(_)
                | AgentInput::ReplaceTools(_)
        );
        match input {
            _ if terminated && from_application => Err(AgentError::Terminated),
            // Late answers for work that was cancelled at termination.
            _ if terminated => Ok(()),
            AgentInput::Prompt(text) => self.prompt(Prompt::text(text), now),
            AgentInput::PromptWith(prompt) => self.prompt(*prompt, now),
            AgentInput::Resume(decision) => self.resume(decision, now),
            AgentInput::Cancel => self.cancel(),
            AgentInput::SetState(patch) => self.set_state(*patch),
            AgentInput::ReplaceTools(tools) => self.replace_tools(tools),
            AgentInput::Report(Report::ToolFinished { id, outcome }) => {
                self.tool_finished(id, outcome, now);
                Ok(())
            }
            AgentInput::Report(report) => {
                self.route_to_step(report, now);
                Ok(())
            }
        }
    }

    /// Acts on deadlines that have passed (the timer table says which).
    pub fn handle_timeout(&mut self, now: Instant) {
        debug_assert!(self.effects.is_empty(), "the driver feeds input before executing every effect (poll_effect)");
        let timers = self.timers();
        if timers.expired(Timer::StepBackoff, now) {
            self.send_step(now);
        } else if timers.expired(Timer::ToolDeadline, now) {
            self.tools_timeout(now);
        } else {
            // The step's request has its own timers (timeout, stall, retry backoff).
            self.step_timeout(now);
        }
    }

    /// Stops the agent for good: cancels work in flight (effects only, no events) and
    /// calls `terminate`. Drivers call this when the last handle goes away.
    pub fn terminate(&mut self, now: Instant) {
        // Nothing to time: the work in flight is cancelled, none is started.
        let _ = now;
        if matches!(self.state, State::Terminated) {
            return;
        }
        self.abort();
        self.take_turn(Some("cancelled"));
        self.staged = None;
        self.state = State::Terminated;
        self.callbacks.terminate();
    }

    pub(super) fn set_status(&mut self, status: Status) {
        if self.status != status {
            self.status = status;
            self.events.push_back(AgentEvent::Status(status));
        }
    }

    /// Starts a turn when idle, else stages the prompt. Its options are checked now; tool
    /// results in it answer the last turn's open calls, so they come only while idle.
    fn prompt(&mut self, prompt: Prompt, now: Instant) -> Result<(), AgentError> {
        if let Some(options) = &prompt.options {
            options.clone().merged_over(&self.config.options).validate().map_err(AgentError::InvalidOptions)?;
        }
        let results = prompt.content.iter().any(|b| matches!(b, Block::ToolResult(_)));
        if !matches!(self.state, State::Idle) {
            if results {
                self.idle()?;
            }
            self.staged = Some(Box::new(prompt));
            return Ok(());
        }
        if results {
            step::check_results(self.config.messages.last(), &prompt.content)?;
        }
        self.start_turn(prompt, now);
        Ok(())
    }

    /// Ends the turn in flight, its own options (a prompt's) given back to the agent's;
    /// `error_type` says why when it did not end well (the telemetry's `error.type`).
    fn take_turn(&mut self, error_type: Option<&'static str>) -> Option<Box<Turn>> {
        let turn = self.turn.take()?;
        if self.config.observe.is_on() {
            self.effects.push_back(Effect::Observe(Observation::TurnEnded { error_type }));
        }
        if let Some(options) = &turn.restore_options {
            self.config.options.clone_from(options);
        }
        Some(turn)
    }

    fn cancel(&mut self) -> Result<(), AgentError> {
        if matches!(self.state, State::Idle) {
            return Err(AgentError::Idle);
        }
        let partial = self.partial.message();
        self.abort();
        let turn = self.take_turn(Some("cancelled"));
        self.staged = None;
        self.state = State::Idle;
        self.set_status(Status::Idle);
        // What the discarded turn had produced, the reply being streamed included.
        let mut response = Response::empty(self.config.model.id.clone());
        if let Some(turn) = turn {
            response.messages = turn.messages;
            response.usage = turn.usage;
        }
        if let Some(message) = partial.filter(|m| !m.content.is_empty()) {
            response.message = message.clone();
            response.messages.push(message);
        }
        response.stop_reason = Some(StopReason::Cancelled);
        self.events.push_back(AgentEvent::Cancelled(Box::new(response)));
        Ok(())
    }

    /// Cancels the request or tool runs in flight (effects only).
    fn abort(&mut self) {
        self.partial.clear();
        match std::mem::replace(&mut self.state, State::Idle) {
            State::Streaming(mut run) => {
                // The partial answer goes with the turn.
                let _ = run.request.cancel(&mut Out { next_id: &mut self.next_id, effects: &mut self.effects });
            }
            State::Tools(round) => self.effects.extend(round.cancel().map(|id| Effect::CancelTool { id })),
            other @ (State::Idle | State::Backoff { .. } | State::Paused(_) | State::Terminated) => self.state = other,
        }
    }

    fn replace_tools(&mut self, mut tools: Vec<ToolDecl>) -> Result<(), AgentError> {
        crate::machines::tool_round::prepare_tools(&mut tools).map_err(AgentError::InvalidTool)?;
        match self.state {
            State::Idle => self.apply_patch(StatePatch { tools: Some(tools), ..StatePatch::default() }),
            State::Streaming(_) | State::Backoff { .. } | State::Paused(_) | State::Tools(_) | State::Terminated => {
                self.staged_tools = Some(tools);
                Ok(())
            }
        }
    }

    fn set_state(&mut self, patch: StatePatch) -> Result<(), AgentError> {
        self.idle()?;
        self.apply_patch(patch)
    }

    /// What may change only while idle is refused as `Paused` while a call waits for a
    /// decision, else as `Busy` while a turn is in flight.
    fn idle(&self) -> Result<(), AgentError> {
        match self.state {
            State::Idle => Ok(()),
            State::Paused(_) => Err(AgentError::Paused),
            State::Streaming(_) | State::Backoff { .. } | State::Tools(_) | State::Terminated => Err(AgentError::Busy),
        }
    }

    /// Checks `patch` whole and applies it, or nothing (`set_state`, and `handle_step`'s
    /// changes between steps).
    fn apply_patch(&mut self, patch: StatePatch) -> Result<(), AgentError> {
        let mut patch = patch;
        // The functional forms see the values the agent holds now (or the patch's own).
        if let Some(update) = patch.system_with.take() {
            let current = patch.system.take().unwrap_or_else(|| self.config.system.clone());
            patch.system = Some(update.apply(&current));
        }
        if let Some(update) = patch.messages_with.take() {
            let current = patch.messages.take().unwrap_or_else(|| self.config.messages.clone());
            patch.messages = Some(update.apply(&current));
        }
        if let Some(update) = patch.options_with.take() {
            let current = patch.options.take().unwrap_or_else(|| self.config.options.clone());
            patch.options = Some(update.apply(&current));
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
        if let Some(api_key) = patch.api_key {
            self.config.api_key = api_key;
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
        self.events.push_back(AgentEvent::State(Box::new(self.state())));
        Ok(())
    }
}
