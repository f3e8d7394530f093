//! The generate machine: one call of `stream_text` / `generate_text`, as a sans-IO
//! state machine with the tool loop, retries, timeouts and cancellation.
//!
//! ```text
//!            ┌──────────── retry (backoff, nothing delivered yet) ◄───┐
//!            ▼                                                        │
//!   new ─► Sending ── head 2xx ─► Streaming ── done ─► step finished ─┤── failure
//!            │  └─ head 4xx/5xx ─► ErrorBody ── end or 64 KiB ─► failure ┘
//!            │                         tool calls + handlers + steps left
//!            │                                       ▼
//!            └───────────────◄──── next step ◄── Tools (parallel, deadlines)
//!   any state ── Cancel ─► Done (stop reason `cancelled`, partial kept)
//! ```
//!
//! Driving contract (every machine's, see [`crate::machine::Machine`]): after `new` and
//! every `handle_*`, drain [`Generate::poll_effect`] (a debug build asserts it) and
//! [`Generate::poll_event`], then wait for the next input or until
//! [`Generate::poll_timeout`] (the deadline and its [`Timer`]) and call
//! [`Generate::handle_timeout`]. Time is always passed in; answers for unknown or
//! cancelled ids are ignored; an input the machine cannot take now is refused
//! ([`InputError`]) and changes nothing.
#![warn(clippy::wildcard_enum_match_arm)]

mod io;
mod retry;
pub(crate) mod structured;
mod tools;

pub use crate::tool_round::{duplicate_tool_name, effective_tool_timeout, ToolDecl, DEFAULT_TOOL_TIMEOUT};
pub use io::{
    Effect, GenerateError, GenerateEvent, Input, InputError, Report, RequestId, ToolOutcome, ToolRunId, TransportError,
    TransportErrorKind,
};
pub use retry::RetryPolicy;

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::decoder::StreamDecoder;
use crate::dialect::{Dialect, RequestSpec};
use crate::event::StreamEvent;
use crate::http::HttpRequest;
use crate::message::{Context, Message, Role};
use crate::model::Model;
use crate::options::Options;
use crate::provider::{ApiKey, Provider};
use crate::redirect::{RedirectError, Redirects};
use crate::response::{Response, StopReason, Warning};
use crate::schema::{JsonSchemaValidator, Validator};
use crate::secret::Secrets;
use crate::timer::{Timer, TimerTable};
use crate::tool_round::{Decided, Runner, ToolRound};
use crate::usage::Usage;
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
/// Error bodies are kept up to this size.
const MAX_ERROR_BODY: usize = 64 * 1024;

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
}

impl GenerateConfig {
    /// A configuration with default retry policy and timeouts.
    pub fn new(model: Model, provider: Provider, context: Context, options: Options) -> Self {
        GenerateConfig {
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
        }
    }
}

#[derive(Debug)]
enum Phase {
    AwaitingHead,
    Streaming { decoder: Box<StreamDecoder>, delivered: bool },
    ErrorBody { status: u16, headers: Vec<(String, String)>, body: Vec<u8> },
}

#[derive(Debug)]
struct Attempt {
    id: RequestId,
    deadline: Option<Instant>,
    stall_at: Instant,
    /// Body bytes received so far (against [`GenerateConfig::max_response_bytes`]).
    received: u64,
    phase: Phase,
    /// Same-origin redirects followed in this attempt (see [`crate::redirect`]).
    redirects: Redirects,
}

#[derive(Debug)]
enum State {
    Sending(Attempt),
    Backoff { until: Instant },
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
    retries: u32,
    /// Of those, retries after a stall (bounded by [`RetryPolicy::max_stall_retries`]).
    stall_retries: u32,
    usage: Usage,
    warnings: Vec<Warning>,
    last: Option<Response>,
    /// Validated structured output, or why there is none.
    output: Option<Result<serde_json::Value, String>>,
    output_retries: u32,
    request: HttpRequest,
    next_id: u64,
    effects: VecDeque<Effect>,
    events: VecDeque<GenerateEvent>,
    scratch: Vec<StreamEvent>,
}

/// The provider's error from an HTTP error response (the kept part of its body).
fn error_response(dialect: Dialect, status: u16, headers: &[(String, String)], body: &[u8]) -> GenerateError {
    GenerateError::Provider(dialect.parse_error(status, headers.iter().map(|(n, v)| (n.as_str(), v.as_str())), body))
}

impl Generate {
    /// Starts a call: validates the options, builds the first request and queues it.
    pub fn new(mut config: GenerateConfig, now: Instant) -> Result<Self, GenerateError> {
        config.options.validate().map_err(|e| GenerateError::Request(crate::RequestError::InvalidOptions(e)))?;
        crate::tool_round::prepare_tools(&mut config.tools)
            .map_err(|e| GenerateError::Request(crate::RequestError::Unsupported { message: e }))?;
        if let (None, Some(output)) = (&config.output_validator, &config.options.output) {
            let compiled = JsonSchemaValidator::new(output.schema.clone()).map_err(|e| {
                GenerateError::Request(crate::RequestError::Unsupported { message: format!("output schema: {e}") })
            })?;
            config.output_validator = Some(Arc::new(compiled));
        }
        // A validator alone still asks the provider for JSON: its schema goes on the wire.
        if let (Some(validator), None) = (&config.output_validator, &config.options.output) {
            config.options.output =
                Some(crate::options::OutputSchema { name: "output".into(), schema: validator.schema().clone() });
        }
        for decl in &config.tools {
            if !config.context.tools.iter().any(|t| t.name == decl.spec.name) {
                config.context.tools.push(decl.spec.clone());
            }
        }
        let request = build(&config, &[])?;
        let mut machine = Generate {
            config,
            state: State::Done,
            added: Vec::new(),
            step: 0,
            retries: 0,
            stall_retries: 0,
            usage: Usage::default(),
            warnings: Vec::new(),
            last: None,
            output: None,
            output_retries: 0,
            request: request.0,
            next_id: 0,
            effects: VecDeque::new(),
            events: VecDeque::new(),
            scratch: Vec::new(),
        };
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

    /// The next deadline and why, if any.
    pub fn poll_timeout(&self) -> Option<(Instant, Timer)> {
        self.timers().next()
    }

    /// The machine's deadlines, from its state.
    pub(crate) fn timers(&self) -> TimerTable<Instant> {
        let mut timers = TimerTable::default();
        match &self.state {
            State::Sending(a) => {
                timers.set(Timer::RequestTimeout, a.deadline);
                timers.set(Timer::Stall, Some(a.stall_at));
            }
            State::Backoff { until } => timers.set(Timer::RetryBackoff, Some(*until)),
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
            Input::Report(Report::ResponseHead { id, status, headers }) => self.on_head(id, status, headers, now),
            Input::Report(Report::Body { id, bytes }) => self.on_body(id, bytes, now),
            Input::Report(Report::BodyEnd { id }) => self.on_body_end(id, now),
            Input::Report(Report::TransportFailed { id, mut error }) => {
                let State::Sending(attempt) = &self.state else { return Ok(()) };
                if attempt.id != id {
                    return Ok(());
                }
                // One rule for every driver: what breaks before the response head is a
                // connect failure, what breaks after it a reset (TLS stays TLS, and a proxy
                // asking for credentials stays that).
                let before_head = matches!(attempt.phase, Phase::AwaitingHead);
                error.kind = match (error.kind, before_head) {
                    (kind @ (TransportErrorKind::Tls | TransportErrorKind::ProxyAuth), _) => kind,
                    (_, true) => TransportErrorKind::Connect,
                    (_, false) => TransportErrorKind::Reset,
                };
                self.fail_attempt(GenerateError::Transport(error), false, now);
            }
            Input::Report(Report::ToolFinished { id, outcome }) => {
                if let State::Tools(round) = &mut self.state {
                    round.finish(id, outcome, &mut AutoApprove { events: &mut self.events, step: self.step });
                }
                self.maybe_continue_after_tools(now);
            }
        }
        Ok(())
    }

    /// Acts on deadlines that have passed (the timer table says which).
    pub fn handle_timeout(&mut self, now: Instant) {
        debug_assert!(self.effects.is_empty(), "the driver feeds input before executing every effect (poll_effect)");
        let timers = self.timers();
        if timers.expired(Timer::RetryBackoff, now) {
            self.send(now);
        } else if timers.expired(Timer::RequestTimeout, now) {
            let limit = self.config.options.timeout.unwrap_or_default();
            self.fail_attempt(GenerateError::Timeout(limit), true, now);
        } else if timers.expired(Timer::Stall, now) {
            self.fail_attempt(GenerateError::Stalled(self.config.stall_timeout), true, now);
        } else if timers.expired(Timer::ToolDeadline, now) {
            if let State::Tools(round) = &mut self.state {
                let mut policy = AutoApprove { events: &mut self.events, step: self.step };
                round.expire(now, &mut policy, &mut self.effects);
            }
            self.maybe_continue_after_tools(now);
        }
    }

    fn send(&mut self, now: Instant) {
        let id = RequestId(self.next_id);
        self.next_id += 1;
        self.effects.push_back(Effect::SendRequest { id, request: self.request.clone() });
        self.state = State::Sending(Attempt {
            id,
            deadline: self.config.options.timeout.map(|t| now + t),
            stall_at: now + self.config.stall_timeout,
            received: 0,
            phase: Phase::AwaitingHead,
            redirects: Redirects::default(),
        });
    }

    fn on_head(&mut self, id: RequestId, status: u16, headers: Vec<(String, String)>, now: Instant) {
        let State::Sending(a) = &mut self.state else { return };
        if a.id != id || !matches!(a.phase, Phase::AwaitingHead) {
            return;
        }
        if let Some(next) = a.redirects.on_head(&self.request, status, &headers) {
            self.on_redirect(next, now);
            return;
        }
        a.stall_at = now + self.config.stall_timeout;
        a.phase = if (200..300).contains(&status) {
            Phase::Streaming { decoder: Box::new(StreamDecoder::for_model(&self.config.model)), delivered: false }
        } else {
            Phase::ErrorBody { status, headers, body: Vec::new() }
        };
    }

    /// A redirect head: a same-origin one goes out again under a new id (the 3xx's
    /// connection is dropped, its body unread); any other fails the attempt.
    fn on_redirect(&mut self, next: Result<HttpRequest, RedirectError>, now: Instant) {
        let State::Sending(a) = &mut self.state else { return };
        match next {
            Ok(request) => {
                self.effects.push_back(Effect::CancelRequest { id: a.id });
                a.id = RequestId(self.next_id);
                self.next_id += 1;
                a.stall_at = now + self.config.stall_timeout;
                self.effects.push_back(Effect::SendRequest { id: a.id, request });
            }
            Err(error) => self.fail_attempt(GenerateError::Redirect(error), true, now),
        }
    }

    fn on_body(&mut self, id: RequestId, bytes: &[u8], now: Instant) {
        let State::Sending(a) = &mut self.state else { return };
        if a.id != id {
            return;
        }
        // The size limit: what fits is taken as usual (and kept), then the call fails.
        let limit = self.config.max_response_bytes;
        let room = usize::try_from(limit.saturating_sub(a.received)).unwrap_or(usize::MAX);
        let over_limit = bytes.len() > room;
        let bytes = bytes.get(..room).unwrap_or(bytes);
        a.received += bytes.len() as u64;
        match &mut a.phase {
            Phase::Streaming { decoder, .. } => {
                let progress = decoder.feed(bytes, &mut self.scratch);
                if progress.progressed {
                    a.stall_at = now + self.config.stall_timeout;
                }
                self.drain_stream_events(now);
            }
            Phase::ErrorBody { status, headers, body } => {
                let room = MAX_ERROR_BODY.saturating_sub(body.len());
                body.extend_from_slice(&bytes[..bytes.len().min(room)]);
                // Bytes of an error page are the server's progress, like content.
                a.stall_at = now + self.config.stall_timeout;
                if body.len() >= MAX_ERROR_BODY {
                    // All of the error that is kept has come: reading the rest of a huge
                    // page would only cost time, so the request is closed and the error
                    // is read from the part kept.
                    let error = error_response(self.config.model.dialect, *status, headers, body);
                    self.fail_attempt(error, true, now);
                    return;
                }
            }
            Phase::AwaitingHead => {}
        }
        // Unless what fitted already ended the attempt (a finished step, a stream error).
        let still_open = matches!(&self.state, State::Sending(a) if a.id == id);
        if over_limit && still_open {
            self.fail_attempt(GenerateError::ResponseTooLarge(limit), true, now);
        }
    }

    fn on_body_end(&mut self, id: RequestId, now: Instant) {
        let State::Sending(a) = &mut self.state else { return };
        if a.id != id {
            return;
        }
        match &mut a.phase {
            Phase::Streaming { decoder, .. } => {
                decoder.finish(&mut self.scratch);
                self.drain_stream_events(now);
            }
            Phase::ErrorBody { status, headers, body } => {
                let error = error_response(self.config.model.dialect, *status, headers, body);
                self.fail_attempt(error, false, now);
            }
            Phase::AwaitingHead => {
                let error = TransportError {
                    kind: TransportErrorKind::Other,
                    message: "the body ended before the response head".into(),
                };
                self.fail_attempt(GenerateError::Transport(error), false, now);
            }
        }
    }

    /// Forwards decoded events; a terminal `done` finishes the step, an `error` fails
    /// the attempt.
    fn drain_stream_events(&mut self, now: Instant) {
        let mut events = std::mem::take(&mut self.scratch);
        for event in events.drain(..) {
            match event {
                StreamEvent::Error { error } => {
                    let error = match error {
                        crate::StreamError::Provider(e) => GenerateError::Provider(e),
                        other @ (crate::StreamError::Framing { .. }
                        | crate::StreamError::Decode { .. }
                        | crate::StreamError::Incomplete
                        | crate::StreamError::InvalidToolInput { .. }) => GenerateError::Stream(other),
                    };
                    self.fail_attempt(error, true, now);
                }
                StreamEvent::Done { .. } => {
                    self.events.push_back(GenerateEvent::Stream { step: self.step, event });
                    self.finish_step(now);
                }
                event @ (StreamEvent::TextStart { .. }
                | StreamEvent::TextDelta { .. }
                | StreamEvent::TextEnd { .. }
                | StreamEvent::ThinkingStart { .. }
                | StreamEvent::ThinkingDelta { .. }
                | StreamEvent::ThinkingEnd { .. }
                | StreamEvent::ToolUseStart { .. }
                | StreamEvent::ToolUseDelta { .. }
                | StreamEvent::ToolUseEnd { .. }) => {
                    if let State::Sending(Attempt { phase: Phase::Streaming { delivered, .. }, .. }) = &mut self.state {
                        *delivered = true;
                    }
                    self.events.push_back(GenerateEvent::Stream { step: self.step, event });
                }
            }
        }
        self.scratch = events;
    }

    /// A request failed: retry when nothing reached the caller yet and the failure is
    /// retryable, else fail the call with what was received. `in_flight` says the
    /// request may still be open and must be cancelled.
    fn fail_attempt(&mut self, mut error: GenerateError, in_flight: bool, now: Instant) {
        let State::Sending(attempt) = std::mem::replace(&mut self.state, State::Done) else { return };
        // A key the server echoed back never reaches the caller's error (or its logs).
        Secrets::of_request(&self.request).scrub_error(&mut error);
        if in_flight {
            self.effects.push_back(Effect::CancelRequest { id: attempt.id });
        }
        let (partial, delivered) = match attempt.phase {
            Phase::Streaming { decoder, delivered } => (Some(decoder.into_response()), delivered),
            Phase::AwaitingHead | Phase::ErrorBody { .. } => (None, false),
        };
        let stalled = matches!(error, GenerateError::Stalled(_));
        let stalls_left = !stalled || self.stall_retries < self.config.retry.max_stall_retries;
        if !delivered && error.is_retryable() && stalls_left && self.retries < self.config.retry.max_retries {
            let retry_after = if let GenerateError::Provider(e) = &error { e.retry_after } else { None };
            if let Some(delay) = self.config.retry.delay(self.retries + 1, retry_after) {
                self.retries += 1;
                self.stall_retries += u32::from(stalled);
                self.events.push_back(GenerateEvent::Retry { step: self.step, attempt: self.retries, delay, error });
                self.state = State::Backoff { until: now + delay };
                return;
            }
        }
        if let Some(partial) = partial {
            self.absorb(partial);
        }
        let partial = self.response(StopReason::Error);
        self.events.push_back(GenerateEvent::Failed { error, partial: Box::new(partial) });
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

    fn finish_step(&mut self, now: Instant) {
        let State::Sending(attempt) = std::mem::replace(&mut self.state, State::Done) else { return };
        let Phase::Streaming { decoder, .. } = attempt.phase else { return };
        let response = decoder.into_response();
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
        self.retries = 0;
        self.stall_retries = 0;
        match build(&self.config, &self.added) {
            Ok((request, warnings)) => {
                self.request = request;
                for w in warnings {
                    if !self.warnings.contains(&w) {
                        self.warnings.push(w);
                    }
                }
                self.send(now);
            }
            Err(error) => {
                let partial = self.response(StopReason::Error);
                self.events.push_back(GenerateEvent::Failed { error, partial: Box::new(partial) });
            }
        }
    }

    /// Finishes, unless structured output is expected and the reply is not valid: then
    /// asks the model for a corrected reply (not when the reply was cut by the token
    /// limit, nor when it ends with tool calls left to the caller — `max_steps` reached,
    /// or a tool without handler: a correction after calls without results is a history
    /// no provider accepts — and at most `output_retries` times).
    fn finish_or_correct(&mut self, stop: StopReason, now: Instant) {
        let Some(validator) = self.config.output_validator.clone() else {
            self.finish(stop);
            return;
        };
        let text = self.last.as_ref().map(Response::text).unwrap_or_default();
        match structured::check(validator.as_ref(), &text) {
            Ok(value) => self.output = Some(Ok(value)),
            Err(error) if stop == StopReason::Length => {
                self.output = Some(Err(format!("{error} (the reply was cut by the output token limit)")))
            }
            Err(error) if self.last.as_ref().is_some_and(|r| r.message.tool_uses().next().is_some()) => {
                self.output = Some(Err(format!("{error} (the reply ended with tool calls left to the caller)")))
            }
            Err(error) if self.output_retries < self.config.output_retries => {
                self.output_retries += 1;
                self.events.push_back(GenerateEvent::OutputRetry {
                    step: self.step,
                    attempt: self.output_retries,
                    error: error.clone(),
                });
                self.added.push(Message::user(structured::correction(&error)));
                self.next_step(now);
                return;
            }
            Err(error) => self.output = Some(Err(error)),
        }
        self.finish(stop);
    }

    fn finish(&mut self, stop: StopReason) {
        self.state = State::Done;
        let response = self.response(stop);
        self.events.push_back(GenerateEvent::Finished(Box::new(response)));
    }

    fn cancel(&mut self) {
        match std::mem::replace(&mut self.state, State::Done) {
            State::Done => return,
            State::Sending(attempt) => {
                self.effects.push_back(Effect::CancelRequest { id: attempt.id });
                if let Phase::Streaming { decoder, .. } = attempt.phase {
                    self.absorb(decoder.into_response());
                }
            }
            State::Tools(round) => self.effects.extend(round.cancel().map(|id| Effect::CancelTool { id })),
            State::Backoff { .. } => {}
        }
        self.finish(StopReason::Cancelled);
    }

    /// The call's response so far, ending with `stop`.
    fn response(&self, stop: StopReason) -> Response {
        let mut response = match &self.last {
            Some(last) => Response { messages: Vec::new(), warnings: Vec::new(), ..last.clone() },
            None => Response::empty(self.config.model.id.clone()),
        };
        if let Some(last_assistant) = self.added.iter().rev().find(|m| m.role == Role::Assistant) {
            response.message = last_assistant.clone();
        }
        response.messages = self.added.clone();
        response.stop_reason = Some(stop);
        response.usage = self.usage;
        response.warnings = self.warnings.clone();
        match &self.output {
            Some(Ok(value)) => response.output = Some(value.clone()),
            Some(Err(error)) => response.output_error = Some(error.clone()),
            None => {}
        }
        response
    }
}

/// Builds the request for the next step: the original context plus what this call added
/// (after tool calls, a forced tool choice is released: [`Options::after_tool_calls`]).
fn build(config: &GenerateConfig, added: &[Message]) -> Result<(HttpRequest, Vec<Warning>), GenerateError> {
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
    let built = config.model.dialect.build_request(&spec).map_err(GenerateError::Request)?;
    Ok((built.request, built.warnings))
}
