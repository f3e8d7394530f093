//! The generate machine: one call of `stream_text` / `generate_text`, as a sans-IO
//! state machine: a loop of requests and tool rounds with auto-approval.
//!
//! ```text
//!   new ─► Requesting (one exchange: retries, backoff, stall, timeout, redirects;
//!            │          see crate::machines::request) ── failure ─► Failed
//!            │ response
//!            ▼ tool calls + handlers + steps left
//!          Tools (the tool round, every call approved: parallel, deadlines)
//!            │ results in call order
//!            └──────► next step (Requesting)
//!   otherwise: Finished (an invalid structured reply first asks for a correction)
//!   any state ── Cancel ─► Done (stop reason `cancelled`, partial kept)
//! ```
//!
//! Driving contract (every machine's: [`Machine`](crate::machines::Machine)): after `new` and
//! every `handle_*`, drain [`Generate::poll_effect`] (a debug build asserts it) and
//! [`Generate::poll_event`], then wait for the next input or until
//! [`Generate::poll_timeout`] (the deadline and its [`Timer`]) and call
//! [`Generate::handle_timeout`]. Time is always passed in; answers for unknown or
//! cancelled ids are ignored; an input the machine cannot take now is refused
//! ([`InputError`]) and changes nothing.
#![warn(clippy::wildcard_enum_match_arm)]

mod io;
pub(crate) mod structured;
mod tools;

// The shared vocabulary and the retry policy live with what they belong to
// (`machines::common`, the request machine); they are re-exported here, where
// applications and drivers have always found them.
pub use crate::machines::common::{
    Effect, GenerateError, Report, RequestId, ToolOutcome, ToolRunId, TransportError, TransportErrorKind,
};
pub use crate::machines::request::RetryPolicy;
pub(crate) use crate::machines::tool_round::duplicate_tool_name;
pub use crate::machines::tool_round::{ToolDecl, DEFAULT_TOOL_TIMEOUT};
pub use io::{GenerateEvent, Input, InputError};

use std::collections::VecDeque;
use std::sync::Arc;

use crate::text_tools::TextProtocol;
use std::time::{Duration, Instant};

use crate::data::error::RequestError;
use crate::data::event::StreamEvent;
use crate::data::message::{Context, Message, Role};
use crate::data::model::Model;
use crate::data::options::Options;
use crate::data::provider::{ApiKey, Provider};
use crate::data::response::{Response, StopReason, Warning};
use crate::data::schema::{JsonSchemaValidator, Validator};
use crate::data::usage::Usage;
use crate::machines::observe::{self, Observe};
use crate::machines::request::{Limits, Out, Request, RequestEvent, StreamSink};
use crate::machines::timer::{Timer, TimerTable};
use crate::machines::tool_round::{Decided, Runner, ToolRound};
use crate::wire::dialect::RequestSpec;
use crate::wire::http::HttpRequest;
use tools::AutoApprove;

/// Default cap on model requests in one call's tool loop.
pub const DEFAULT_MAX_STEPS: u32 = 10;
/// Default time without progress (keep-alives do not count) before a stream is stalled.
///
/// Why 120 s, retried once ([`RetryPolicy::max_stall_retries`]): the official SDKs wait far
/// longer. openai-python and anthropic-sdk-python default to `httpx.Timeout(600, connect=5)`,
/// a 10-minute read timeout that any byte (a keep-alive too) resets, retried twice
/// (`DEFAULT_MAX_RETRIES = 2`): a silent server holds a call 30 minutes. Google's genai SDKs
/// set no timeout at all. A shorter limit would cut real calls: a reasoning model thinks
/// in silence before its first token (OpenAI's Responses API streams reasoning summaries
/// only on request, and omni does not ask by default: they need a verified organisation),
/// and a long prompt's prefill takes tens of seconds. What a shorter worst case can come
/// from is the retries: a stall is retried only before anything reached the caller, where
/// it is a dead connection (one retry finds a live one) or a slow model (a retry thinks
/// just as long, and pays again). So one retry, not two: a silent server holds a call
/// about 4 minutes (two stalls and a backoff), down from 6, and a stall mid-stream fails
/// at once, with what arrived.
pub const DEFAULT_STALL_TIMEOUT: Duration = Duration::from_secs(120);
/// Default number of corrections asked for invalid structured output.
pub const DEFAULT_OUTPUT_RETRIES: u32 = 3;
/// Default cap on one response body, in bytes (256 MiB), keep-alives and framing
/// included. The largest legitimate answers are a model's longest output (64k to 128k
/// tokens today) at 150 to 600 bytes of SSE framing per token, about 80 MB at worst
/// (OpenAI's Responses stream then repeats the whole output in its final event), or a few
/// images inline as base64: tens of MiB. A quarter of a GiB leaves room for all of these
/// while a server that never stops (content, or keep-alives with no total timeout set)
/// is cut after a bounded amount of work instead of growing the response without end.
pub const DEFAULT_MAX_RESPONSE_BYTES: u64 = 256 * 1024 * 1024;
/// Everything one call needs.
#[derive(Debug, Clone)]
pub struct GenerateConfig {
    /// The model.
    pub model: Model,
    /// Its provider.
    pub provider: Provider,
    /// System prompt and history (its `tools` are sent too, as schema-only tools).
    pub context: Context,
    /// Options.
    pub options: Options,
    /// The resolved key.
    pub api_key: Option<ApiKey>,
    /// Tools, with whether the driver has a handler for each.
    pub tools: Vec<ToolDecl>,
    /// Retry policy.
    pub retry: RetryPolicy,
    /// No-progress limit.
    pub stall_timeout: Duration,
    /// Largest response body accepted, in bytes; past it the call fails with
    /// [`GenerateError::ResponseTooLarge`], keeping what arrived until then.
    pub max_response_bytes: u64,
    /// Checks structured output; `None` with an `output` option: compiled from its schema.
    /// Given without an `output` option, its schema is sent as one (named `output`).
    pub output_validator: Option<Arc<dyn Validator>>,
    /// Corrections asked for when the reply is not valid structured output.
    pub output_retries: u32,
    /// What setting the call up found worth telling (a model the catalogue does not know
    /// but one close to it): on the response's `warnings`.
    pub warnings: Vec<Warning>,
    /// What the call tells the application's telemetry ([`Effect::Observe`]); off by
    /// default.
    pub observe: Observe,
}

impl GenerateConfig {
    /// A configuration with default retry policy and timeouts.
    pub fn new(model: Model, provider: Provider, context: Context, options: Options) -> Self {
        Self {
            model,
            provider,
            context,
            options,
            api_key: None,
            tools: Vec::new(),
            retry: RetryPolicy::default(),
            stall_timeout: DEFAULT_STALL_TIMEOUT,
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            output_validator: None,
            output_retries: DEFAULT_OUTPUT_RETRIES,
            warnings: Vec::new(),
            observe: Observe::Off,
        }
    }
}

#[derive(Debug)]
enum State {
    Requesting(Box<Request>),
    Tools(ToolRound),
    Done,
}

/// The generate machine. See the module documentation.
#[derive(Debug)]
pub struct Generate {
    config: GenerateConfig,
    state: State,
    /// Messages this call added (assistant replies and tool results), in order.
    added: Vec<Message>,
    step: u32,
    usage: Usage,
    warnings: Vec<Warning>,
    last: Option<Response>,
    /// Validated structured output, or why there is none.
    output: Option<Result<serde_json::Value, String>>,
    output_retries: u32,
    /// Corrections asked for a reply whose tool call could not be read.
    call_retries: u32,
    request: HttpRequest,
    /// The text protocol the request offers the tools in, if not native.
    text_protocol: Option<Arc<dyn TextProtocol>>,
    /// The next step's [`Observation::InferenceStarted`](observe::Observation), when observed.
    started: Option<Effect>,
    next_id: u64,
    effects: VecDeque<Effect>,
    events: VecDeque<GenerateEvent>,
}

impl Generate {
    /// Starts a call: validates the options, builds the first request and queues it.
    pub fn new(mut config: GenerateConfig, now: Instant) -> Result<Self, GenerateError> {
        config.options.validate().map_err(|e| GenerateError::Request(RequestError::InvalidOptions(e)))?;
        crate::machines::tool_round::prepare_tools(&mut config.tools)
            .map_err(|e| GenerateError::Request(RequestError::Unsupported { message: e }))?;
        if let (None, Some(output)) = (&config.output_validator, &config.options.output) {
            let compiled = JsonSchemaValidator::new(output.schema.clone()).map_err(|e| {
                GenerateError::Request(RequestError::Unsupported { message: format!("output schema: {e}") })
            })?;
            config.output_validator = Some(Arc::new(compiled));
        }
        // A validator alone still asks the provider for JSON: its schema goes on the wire.
        if let (Some(validator), None) = (&config.output_validator, &config.options.output) {
            config.options.output =
                Some(crate::data::options::OutputSchema { name: "output".into(), schema: validator.schema().clone() });
        }
        for decl in &config.tools {
            if !config.context.tools.iter().any(|t| t.name == decl.spec.name) {
                config.context.tools.push(decl.spec.clone());
            }
        }
        let request = build(&config, &[])?;
        let mut machine = Self {
            config,
            state: State::Done,
            added: Vec::new(),
            step: 0,
            usage: Usage::default(),
            warnings: Vec::new(),
            last: None,
            output: None,
            output_retries: 0,
            call_retries: 0,
            request: request.0,
            text_protocol: request.2,
            started: request.3,
            next_id: 0,
            effects: VecDeque::new(),
            events: VecDeque::new(),
        };
        machine.warnings.extend(std::mem::take(&mut machine.config.warnings));
        machine.warnings.extend(request.1);
        machine.send(now);
        Ok(machine)
    }

    /// The next effect for the driver.
    pub fn poll_effect(&mut self) -> Option<Effect> {
        self.effects.pop_front()
    }

    /// The next event for the application.
    pub fn poll_event(&mut self) -> Option<GenerateEvent> {
        self.events.pop_front()
    }

    /// How many events [`Generate::poll_event`] would give now (a driver that hands them
    /// over in batches sizes the batch with it).
    pub fn pending_events(&self) -> usize {
        self.events.len()
    }

    /// The next deadline and why, if any.
    pub fn poll_timeout(&self) -> Option<(Instant, Timer)> {
        self.timers().next()
    }

    /// The machine's deadlines, from its state.
    pub(crate) fn timers(&self) -> TimerTable<Instant> {
        let mut timers = TimerTable::default();
        match &self.state {
            State::Requesting(request) => timers = request.timers(),
            State::Tools(round) => timers.set(Timer::ToolDeadline, round.next_deadline()),
            State::Done => {}
        }
        timers
    }

    /// True once `Finished` or `Failed` was emitted.
    pub fn is_done(&self) -> bool {
        matches!(self.state, State::Done)
    }

    /// Feeds one input. A `Cancel` after the call ended is refused (nothing changes);
    /// reports for unknown or finished requests and runs are ignored.
    pub fn handle_input(&mut self, input: Input<'_>, now: Instant) -> Result<(), InputError> {
        debug_assert!(self.effects.is_empty(), "the driver feeds input before executing every effect (poll_effect)");
        match input {
            Input::Cancel if self.is_done() => return Err(InputError::Finished),
            Input::Cancel => self.cancel(),
            Input::Report(Report::ToolFinished { id, outcome }) => {
                if let State::Tools(round) = &mut self.state {
                    round.finish(id, outcome, &mut AutoApprove { events: &mut self.events, step: self.step });
                }
                self.maybe_continue_after_tools(now);
            }
            Input::Report(report) => {
                if let State::Requesting(request) = &mut self.state {
                    request.handle_report(
                        report,
                        now,
                        &mut Out { next_id: &mut self.next_id, effects: &mut self.effects },
                        &mut StepEvents { step: self.step, events: &mut self.events },
                    );
                    self.pump(now);
                }
            }
        }
        Ok(())
    }

    /// Acts on deadlines that have passed (the timer table says which).
    pub fn handle_timeout(&mut self, now: Instant) {
        debug_assert!(self.effects.is_empty(), "the driver feeds input before executing every effect (poll_effect)");
        let timers = self.timers();
        match &mut self.state {
            // The exchange has its own timers (timeout, stall, retry backoff).
            State::Requesting(request) => {
                request.handle_timeout(now, &mut Out { next_id: &mut self.next_id, effects: &mut self.effects });
                self.pump(now);
            }
            State::Tools(round) if timers.expired(Timer::ToolDeadline, now) => {
                let mut policy = AutoApprove { events: &mut self.events, step: self.step };
                round.expire(now, &mut policy, &mut self.effects);
                self.maybe_continue_after_tools(now);
            }
            State::Tools(_) | State::Done => {}
        }
    }

    fn send(&mut self, now: Instant) {
        let limits = Limits {
            retry: self.config.retry,
            stall_timeout: self.config.stall_timeout,
            timeout: self.config.options.timeout,
            max_response_bytes: self.config.max_response_bytes,
        };
        self.effects.extend(self.started.take());
        let mut out = Out { next_id: &mut self.next_id, effects: &mut self.effects };
        let request = Request::start(self.request.clone(), self.config.model.clone(), limits, now, &mut out)
            .with_text_tools(self.text_protocol.clone(), &self.config.context.tools)
            .with_event_hook(self.config.provider.hooks.event.clone())
            .observed(self.config.observe);
        self.state = State::Requesting(Box::new(request));
    }

    /// Takes what the step's exchange said (its stream events are already queued, see
    /// [`StepEvents`]): retries go to the application; its end finishes the step or
    /// fails the call.
    fn pump(&mut self, now: Instant) {
        // One event at a time (no buffer per input): the exchange's end changes the state,
        // and nothing follows it.
        loop {
            let State::Requesting(request) = &mut self.state else { return };
            let Some(event) = request.poll_event() else { return };
            match event {
                RequestEvent::Retry { attempt, delay, error } => {
                    self.events.push_back(GenerateEvent::Retry { step: self.step, attempt, delay, error })
                }
                RequestEvent::Finished(response) => self.finish_step(*response, now),
                RequestEvent::Failed(failure) => {
                    let (error, partial) = *failure;
                    self.state = State::Done;
                    if let Some(partial) = partial {
                        self.absorb(partial);
                    }
                    let partial = self.take_response(StopReason::Error);
                    self.events.push_back(GenerateEvent::Failed { error: Box::new(error), partial: Box::new(partial) });
                }
            }
        }
    }

    /// Adds a step's response to the call's totals.
    fn absorb(&mut self, response: Response) {
        self.usage += response.usage;
        self.warnings.extend(response.warnings.iter().cloned());
        if !response.message.content.is_empty() {
            self.added.push(response.message.clone());
        }
        self.last = Some(response);
    }

    fn finish_step(&mut self, response: Response, now: Instant) {
        self.state = State::Done;
        let stop = response.stop_reason.unwrap_or(StopReason::Stop);
        let calls: Vec<_> = response.message.tool_uses().cloned().collect();
        self.absorb(response);
        let max_steps = self.config.options.max_steps.unwrap_or(DEFAULT_MAX_STEPS);
        let loop_on = stop == StopReason::ToolUse
            && !calls.is_empty()
            && self.step + 1 < max_steps
            && tools::all_runnable(&self.config.tools, &self.config.context.tools, &calls);
        if !loop_on {
            self.finish_or_correct(stop, now);
            return;
        }
        let mut round = ToolRound::new(calls);
        let mut policy = AutoApprove { events: &mut self.events, step: self.step };
        let mut runner = Runner {
            tools: &self.config.tools,
            options: &self.config.options,
            next_id: &mut self.next_id,
            effects: &mut self.effects,
            now,
        };
        match round.decide(&mut policy, &mut runner) {
            Decided::All => {}
            // Neither happens: auto-approval never pauses, and `all_runnable` found a
            // handler for every known tool. Were it to, the calls are the caller's.
            Decided::Pause(..) | Decided::Unhandled => return self.finish_or_correct(stop, now),
        }
        self.state = State::Tools(round);
        self.maybe_continue_after_tools(now);
    }

    fn maybe_continue_after_tools(&mut self, now: Instant) {
        let State::Tools(round) = &self.state else { return };
        if !round.is_complete() {
            return;
        }
        let State::Tools(round) = std::mem::replace(&mut self.state, State::Done) else { return };
        self.added.push(Message::new(Role::User, round.into_results()));
        self.next_step(now);
    }

    /// Sends the next request: the original context plus everything added so far.
    fn next_step(&mut self, now: Instant) {
        self.step += 1;
        match build(&self.config, &self.added) {
            Ok((request, warnings, protocol, started)) => {
                self.request = request;
                self.text_protocol = protocol;
                self.started = started;
                for w in warnings {
                    if !self.warnings.contains(&w) {
                        self.warnings.push(w);
                    }
                }
                self.send(now);
            }
            Err(error) => {
                let partial = self.take_response(StopReason::Error);
                self.events.push_back(GenerateEvent::Failed { error: Box::new(error), partial: Box::new(partial) });
            }
        }
    }

    /// Finishes, unless structured output is expected and the reply is not valid: then
    /// asks the model for a corrected reply (not when the reply was cut by the token
    /// limit, nor when it ends with tool calls left to the caller — `max_steps` reached,
    /// or a tool without handler: a correction after calls without results is a history
    /// no provider accepts — and at most `output_retries` times).
    fn finish_or_correct(&mut self, stop: StopReason, now: Instant) {
        if self.correct_unread_call(stop, now) {
            return;
        }
        let Some(validator) = self.config.output_validator.clone() else {
            self.finish(stop);
            return;
        };
        let Some(last) = &self.last else {
            self.finish(stop);
            return;
        };
        match structured::judge(validator.as_ref(), last, stop) {
            Ok(value) => self.output = Some(Ok(value)),
            Err(invalid) if invalid.correctable() && self.output_retries < self.config.output_retries => {
                self.output_retries += 1;
                let error = invalid.error;
                self.events.push_back(GenerateEvent::OutputRetry {
                    step: self.step,
                    attempt: self.output_retries,
                    error: error.clone(),
                });
                self.added.push(Message::user(structured::correction(&error)));
                self.next_step(now);
                return;
            }
            Err(invalid) => self.output = Some(Err(invalid.into_message())),
        }
        self.finish(stop);
    }

    /// With a text protocol, a reply whose call could not be read (and no call read) is
    /// answered with a correction, while `tool_call_retries` and `max_steps` allow (not
    /// when the reply was cut by the token limit). True when a step was sent.
    fn correct_unread_call(&mut self, stop: StopReason, now: Instant) -> bool {
        let (Some(protocol), Some(last)) = (&self.text_protocol, &self.last) else { return false };
        let Some(unread) = crate::text_tools::correct::unread_call(last) else { return false };
        let allowed =
            self.config.options.tool_call_retries.unwrap_or(crate::text_tools::correct::DEFAULT_TOOL_CALL_RETRIES);
        let max_steps = self.config.options.max_steps.unwrap_or(DEFAULT_MAX_STEPS);
        if stop == StopReason::Length || self.call_retries >= allowed || self.step + 1 >= max_steps {
            return false;
        }
        self.call_retries += 1;
        let text =
            crate::text_tools::correct::correction(protocol.as_ref(), &self.config.context.tools, &unread.message);
        self.added.push(Message::user(text));
        self.next_step(now);
        true
    }

    fn finish(&mut self, stop: StopReason) {
        self.state = State::Done;
        let response = self.take_response(stop);
        self.events.push_back(GenerateEvent::Finished(Box::new(response)));
    }

    fn cancel(&mut self) {
        match std::mem::replace(&mut self.state, State::Done) {
            State::Done => return,
            State::Requesting(mut request) => {
                let mut out = Out { next_id: &mut self.next_id, effects: &mut self.effects };
                if let Some(partial) = request.cancel(&mut out) {
                    self.absorb(partial);
                }
            }
            State::Tools(round) => self.effects.extend(round.cancel().map(|id| Effect::CancelTool { id })),
        }
        self.finish(StopReason::Cancelled);
    }

    /// The call's response, ending with `stop`, moved out of the machine: it is taken
    /// once, when the call ends (finished or failed), so nothing is copied but the last
    /// reply's message in the rare case where the last step's is empty.
    fn take_response(&mut self, stop: StopReason) -> Response {
        let mut response = match self.last.take() {
            Some(last) => Response { messages: Vec::new(), warnings: Vec::new(), ..last },
            None => Response::empty(self.config.model.id.clone()),
        };
        // The last step's message, when not empty, is the last assistant message added.
        if response.message.content.is_empty() {
            if let Some(last_assistant) = self.added.iter().rev().find(|m| m.role == Role::Assistant) {
                response.message = last_assistant.clone();
            }
        }
        response.messages = std::mem::take(&mut self.added);
        response.stop_reason = Some(stop);
        response.usage = self.usage;
        response.warnings = std::mem::take(&mut self.warnings);
        match self.output.take() {
            Some(Ok(value)) => response.output = Some(value),
            Some(Err(error)) => response.output_error = Some(error),
            None => {}
        }
        response
    }
}

/// A step's stream events, queued for the application as they are decoded.
struct StepEvents<'a> {
    step: u32,
    events: &'a mut VecDeque<GenerateEvent>,
}

impl StreamSink for StepEvents<'_> {
    #[inline]
    fn stream(&mut self, event: StreamEvent) {
        self.events.push_back(GenerateEvent::Stream { step: self.step, event });
    }
}

/// Builds the request for the next step: the original context plus what this call added
/// (after tool calls, a forced tool choice is released: [`Options::after_tool_calls`]).
/// A step's request, its warnings, its text protocol, and its observation (when observed).
type Built = (HttpRequest, Vec<Warning>, Option<Arc<dyn TextProtocol>>, Option<Effect>);

fn build(config: &GenerateConfig, added: &[Message]) -> Result<Built, GenerateError> {
    let mut context = config.context.clone();
    context.messages.extend(added.iter().cloned());
    let called = added.iter().any(|m| m.tool_uses().next().is_some());
    let released = if called { config.options.after_tool_calls() } else { None };
    let options = released.as_ref().unwrap_or(&config.options);
    let spec = RequestSpec {
        model: &config.model,
        provider: &config.provider,
        context: &context,
        options,
        api_key: config.api_key.as_ref(),
    };
    let (built, protocol) = crate::text_tools::render::build_request(&spec).map_err(GenerateError::Request)?;
    let started = observe::inference_started(config.observe, &spec, &built.request);
    Ok((built.request, built.warnings, protocol, started))
}
