//! The request sub-machine: one HTTP exchange of a step, with its retries, used by the
//! generate machine for each step and by the agent for each of its steps.
//!
//! ```text
//!            ┌──────────── retry (backoff, nothing delivered yet) ◄───┐
//!            ▼                                                        │
//!   new ─► Sending ── head 2xx ─► Streaming ── done ─► Finished       ├── failure
//!            │  ├─ head 3xx, same origin ─► Sending (a new id)         │
//!            │  └─ head 4xx/5xx ─► ErrorBody ── end or 64 KiB ────────┘
//!            └─ total timeout, stall, too large, transport failure ──► failure
//! ```
//!
//! One home for each decision of an exchange: what a transport failure is called (by
//! phase), when a response is too large or stalled, which redirects are followed, which
//! failures are retried and after what wait, and that a key echoed by the server never
//! reaches an error. Request ids come from the owner's counter, so the agent's ids are
//! its own with nothing to remap.
#![warn(clippy::wildcard_enum_match_arm)]

mod retry;
#[cfg(test)]
mod tests;

// The request machine is what retries, so its policy lives here.
pub use retry::RetryPolicy;

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use std::sync::Arc;

use crate::data::error::{ServedBy, StreamError};
use crate::data::event::StreamEvent;
use crate::data::hooks::EventHook;
use crate::data::message::ToolSpec;
use crate::data::model::Model;
use crate::data::response::Response;
use crate::machines::common::{Effect, GenerateError, Report, RequestId, TransportError, TransportErrorKind};
use crate::machines::observe::{self, Observation, Observe};
use crate::machines::timer::{Moment, Timer, TimerTable};
use crate::text_tools::stream::TextCalls;
use crate::text_tools::TextProtocol;
use crate::wire::decoder::StreamDecoder;
use crate::wire::dialect::Dialect;
use crate::wire::http::HttpRequest;
use crate::wire::redirect::{RedirectError, Redirects};
use crate::wire::secret::Secrets;

/// Error bodies are kept up to this size.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// The limits of one exchange.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// Retries of a failed request (and their backoff).
    pub(crate) retry: RetryPolicy,
    /// Time without progress before the stream is stalled.
    pub(crate) stall_timeout: Duration,
    /// Total time of one attempt (the `timeout` option).
    pub(crate) timeout: Option<Duration>,
    /// Largest response body, in bytes.
    pub(crate) max_response_bytes: u64,
}

/// What an exchange tells its owner, but for the stream's events, which go straight
/// to the owner's [`StreamSink`].
#[derive(Debug)]
pub(crate) enum RequestEvent {
    /// The request failed and goes out again after `delay`.
    Retry { attempt: u32, delay: Duration, error: Box<GenerateError> },
    /// The response, complete (after the stream's `Done`).
    Finished(Box<Response>),
    /// The exchange failed for good; `partial` is what was decoded, if anything.
    Failed(Box<(GenerateError, Option<Response>)>),
}

/// Where the decoded events of a stream go: into the owner's own queue, as they are
/// decoded. Every delta passes through here, so it is moved once, not queued again by
/// the exchange and then taken out by its owner. A stream's events come before the
/// [`RequestEvent`] that ends the exchange (`Finished` after `Done`, `Failed` after
/// what was delivered), so an owner that takes its request events after each report
/// sees everything in order.
pub(crate) trait StreamSink {
    /// One decoded event (content, or the final `Done`; a stream's error ends the
    /// attempt instead and becomes a [`RequestEvent`]).
    fn stream(&mut self, event: StreamEvent);
}

/// Where a request's new ids come from and its effects go: the owner's.
pub(crate) struct Out<'a> {
    pub(crate) next_id: &'a mut u64,
    pub(crate) effects: &'a mut VecDeque<Effect>,
}

impl Out<'_> {
    fn send(&mut self, request: HttpRequest) -> RequestId {
        let id = RequestId(*self.next_id);
        *self.next_id += 1;
        self.effects.push_back(Effect::SendRequest { id, request });
        id
    }
}

#[derive(Debug)]
enum Phase {
    AwaitingHead,
    Streaming { decoder: Box<StreamDecoder>, delivered: bool },
    ErrorBody { status: u16, headers: Vec<(String, String)>, body: Vec<u8> },
}

#[derive(Debug)]
struct Attempt<I> {
    id: RequestId,
    deadline: Option<I>,
    stall_at: I,
    /// Body bytes received so far (against [`Limits::max_response_bytes`]).
    received: u64,
    phase: Phase,
    /// Same-origin redirects followed in this attempt (see [`crate::wire::redirect`]).
    redirects: Redirects,
}

#[derive(Debug)]
enum State<I> {
    Sending(Attempt<I>),
    Backoff { until: I },
    Ended,
}

/// One exchange. See the module documentation.
#[derive(Debug)]
pub(crate) struct Request<I = Instant> {
    request: HttpRequest,
    model: Model,
    limits: Limits,
    state: State<I>,
    retries: u32,
    /// Of those, retries after a stall (bounded by [`RetryPolicy::max_stall_retries`]).
    stall_retries: u32,
    events: VecDeque<RequestEvent>,
    scratch: Vec<StreamEvent>,
    /// The text protocol the request offered its tools in, with those tools: each
    /// attempt's reply is read through its parser (`crate::text_tools::stream`).
    text_tools: Option<(Arc<dyn TextProtocol>, Vec<ToolSpec>)>,
    /// The provider's event hook, for each attempt's decoder.
    event_hook: Option<EventHook>,
    /// What the exchange tells the telemetry (its first chunk, redirects, retries, end).
    observe: Observe,
    /// Whether a chunk of a response stream arrived, in any attempt: the time to the
    /// first chunk is measured once per inference, from its first request.
    chunk_seen: bool,
}

/// The provider's error from an HTTP error response (the kept part of its body).
fn error_response(dialect: Dialect, status: u16, headers: &[(String, String)], body: &[u8]) -> GenerateError {
    GenerateError::Provider(dialect.parse_error(status, headers.iter().map(|(n, v)| (n.as_str(), v.as_str())), body))
}

impl<I: Moment> Request<I> {
    /// Sends `request` for `model` (whose dialect decodes the answer).
    pub(crate) fn start(request: HttpRequest, model: Model, limits: Limits, now: I, out: &mut Out<'_>) -> Self {
        let mut this = Self {
            request,
            model,
            limits,
            state: State::Ended,
            retries: 0,
            stall_retries: 0,
            events: VecDeque::new(),
            scratch: Vec::new(),
            text_tools: None,
            event_hook: None,
            observe: Observe::Off,
            chunk_seen: false,
        };
        this.send(now, out);
        this
    }

    /// The reply is read through `protocol`'s parser, which knows `tools` (a request built
    /// for a text protocol, [`crate::text_tools::render::build_request`]); `None`: native.
    pub(crate) fn with_text_tools(mut self, protocol: Option<Arc<dyn TextProtocol>>, tools: &[ToolSpec]) -> Self {
        self.text_tools = protocol.map(|p| (p, tools.to_vec()));
        self
    }

    /// Each attempt's reply is read through the provider's event hook, if it has one.
    pub(crate) fn with_event_hook(mut self, hook: Option<EventHook>) -> Self {
        self.event_hook = hook;
        self
    }

    /// The exchange tells the telemetry what happens to it (its owner told it that it
    /// began: [`crate::machines::observe::inference_started`]).
    pub(crate) fn observed(mut self, observe: Observe) -> Self {
        self.observe = observe;
        self
    }

    /// The next event for the owner.
    pub(crate) fn poll_event(&mut self) -> Option<RequestEvent> {
        self.events.pop_front()
    }

    /// The exchange's deadlines.
    pub(crate) fn timers(&self) -> TimerTable<I> {
        let mut timers = TimerTable::default();
        match &self.state {
            State::Sending(a) => {
                timers.set(Timer::RequestTimeout, a.deadline);
                timers.set(Timer::Stall, Some(a.stall_at));
            }
            State::Backoff { until } => timers.set(Timer::RetryBackoff, Some(*until)),
            State::Ended => {}
        }
        timers
    }

    /// True when `report` is about this exchange's request in flight.
    pub(crate) fn owns(&self, report: &Report<'_>) -> bool {
        matches!((&self.state, report.request()), (State::Sending(a), Some(id)) if a.id == id)
    }

    /// Feeds a report about the request in flight (others are ignored).
    pub(crate) fn handle_report(
        &mut self,
        report: Report<'_>,
        now: I,
        out: &mut Out<'_>,
        stream: &mut impl StreamSink,
    ) {
        if !self.owns(&report) {
            return;
        }
        match report {
            Report::ResponseHead { status, headers, .. } => self.on_head(status, headers, now, out),
            Report::Body { bytes, .. } => self.on_body(bytes, now, out, stream),
            Report::BodyEnd { .. } => self.on_body_end(now, out, stream),
            Report::TransportFailed { mut error, .. } => {
                let State::Sending(attempt) = &self.state else { return };
                // One rule for every driver: what breaks before the response head is a
                // connect failure, what breaks after it a reset (TLS stays TLS, and a proxy
                // asking for credentials stays that).
                let before_head = matches!(attempt.phase, Phase::AwaitingHead);
                error.kind = match (error.kind, before_head) {
                    (kind @ (TransportErrorKind::Tls | TransportErrorKind::ProxyAuth), _) => kind,
                    (TransportErrorKind::Connect | TransportErrorKind::Reset | TransportErrorKind::Other, true) => {
                        TransportErrorKind::Connect
                    }
                    (TransportErrorKind::Connect | TransportErrorKind::Reset | TransportErrorKind::Other, false) => {
                        TransportErrorKind::Reset
                    }
                };
                self.fail_attempt(GenerateError::Transport(error), false, now, out);
            }
            Report::ToolFinished { .. } => {}
        }
    }

    /// Acts on the exchange's deadlines that have passed.
    pub(crate) fn handle_timeout(&mut self, now: I, out: &mut Out<'_>) {
        let timers = self.timers();
        if timers.expired(Timer::RetryBackoff, now) {
            self.send(now, out);
        } else if timers.expired(Timer::RequestTimeout, now) {
            let limit = self.limits.timeout.unwrap_or_default();
            self.fail_attempt(GenerateError::Timeout(limit), true, now, out);
        } else if timers.expired(Timer::Stall, now) {
            self.fail_attempt(GenerateError::Stalled(self.limits.stall_timeout), true, now, out);
        }
    }

    /// Stops the exchange: the request in flight is cancelled; what was decoded is returned.
    pub(crate) fn cancel(&mut self, out: &mut Out<'_>) -> Option<Response> {
        let partial = match std::mem::replace(&mut self.state, State::Ended) {
            State::Sending(attempt) => {
                out.effects.push_back(Effect::CancelRequest { id: attempt.id });
                match attempt.phase {
                    Phase::Streaming { decoder, .. } => Some(decoder.into_response()),
                    Phase::AwaitingHead | Phase::ErrorBody { .. } => None,
                }
            }
            State::Backoff { .. } => None,
            State::Ended => return None,
        };
        out.effects.extend(observe::inference_ended(self.observe, partial.as_ref(), Some("cancelled")));
        partial
    }

    fn send(&mut self, now: I, out: &mut Out<'_>) {
        let id = out.send(self.request.clone());
        self.state = State::Sending(Attempt {
            id,
            deadline: self.limits.timeout.map(|t| now + t),
            stall_at: now + self.limits.stall_timeout,
            received: 0,
            phase: Phase::AwaitingHead,
            redirects: Redirects::default(),
        });
    }

    fn on_head(&mut self, status: u16, headers: Vec<(String, String)>, now: I, out: &mut Out<'_>) {
        let State::Sending(a) = &mut self.state else { return };
        if !matches!(a.phase, Phase::AwaitingHead) {
            return;
        }
        if let Some(next) = a.redirects.on_head(&self.request, status, &headers) {
            self.on_redirect(next, status, now, out);
            return;
        }
        a.stall_at = now + self.limits.stall_timeout;
        a.phase = if (200..300).contains(&status) {
            let content_type = headers.iter().find(|(name, _)| name.eq_ignore_ascii_case("content-type"));
            let decoder = StreamDecoder::for_model(&self.model)
                .with_event_hook(self.event_hook.clone())
                .with_content_type(content_type.map(|(_, value)| value.clone()));
            let decoder = match &self.text_tools {
                // Call ids from the attempt's request id and the call's number: unique in
                // the conversation, no clock or randomness.
                Some((protocol, tools)) => {
                    decoder.with_text_calls(TextCalls::new(protocol.parser(tools), format!("call_{}_", a.id.0)))
                }
                None => decoder,
            };
            Phase::Streaming { decoder: Box::new(decoder), delivered: false }
        } else {
            Phase::ErrorBody { status, headers, body: Vec::new() }
        };
    }

    /// A redirect head: a same-origin one goes out again under a new id (the 3xx's
    /// connection is dropped, its body unread); any other fails the attempt.
    fn on_redirect(&mut self, next: Result<HttpRequest, RedirectError>, status: u16, now: I, out: &mut Out<'_>) {
        let State::Sending(a) = &mut self.state else { return };
        match next {
            Ok(request) => {
                out.effects.push_back(Effect::CancelRequest { id: a.id });
                if self.observe.is_on() {
                    out.effects.push_back(Effect::Observe(Observation::Redirected { status }));
                }
                a.id = out.send(request);
                a.stall_at = now + self.limits.stall_timeout;
            }
            Err(error) => self.fail_attempt(GenerateError::Redirect(error), true, now, out),
        }
    }

    fn on_body(&mut self, bytes: &[u8], now: I, out: &mut Out<'_>, stream: &mut impl StreamSink) {
        let State::Sending(a) = &mut self.state else { return };
        let id = a.id;
        // The size limit: what fits is taken as usual (and kept), then the call fails.
        let limit = self.limits.max_response_bytes;
        let room = usize::try_from(limit.saturating_sub(a.received)).unwrap_or(usize::MAX);
        let over_limit = bytes.len() > room;
        let bytes = bytes.get(..room).unwrap_or(bytes);
        a.received += bytes.len() as u64;
        match &mut a.phase {
            Phase::Streaming { decoder, .. } => {
                if !self.chunk_seen && !bytes.is_empty() && self.observe.is_on() {
                    self.chunk_seen = true;
                    out.effects.push_back(Effect::Observe(Observation::FirstChunk));
                }
                let progress = decoder.feed(bytes, &mut self.scratch);
                if progress.progressed {
                    a.stall_at = now + self.limits.stall_timeout;
                }
                self.drain_stream_events(now, out, stream);
            }
            Phase::ErrorBody { status, headers, body } => {
                let room = MAX_ERROR_BODY.saturating_sub(body.len());
                body.extend_from_slice(&bytes[..bytes.len().min(room)]);
                // Bytes of an error page are the server's progress, like content.
                a.stall_at = now + self.limits.stall_timeout;
                if body.len() >= MAX_ERROR_BODY {
                    // All of the error that is kept has come: reading the rest of a huge
                    // page would only cost time, so the request is closed and the error
                    // is read from the part kept.
                    let error = error_response(self.model.dialect, *status, headers, body);
                    self.fail_attempt(error, true, now, out);
                    return;
                }
            }
            Phase::AwaitingHead => {}
        }
        // Unless what fitted already ended the attempt (a finished step, a stream error).
        let still_open = matches!(&self.state, State::Sending(a) if a.id == id);
        if over_limit && still_open {
            self.fail_attempt(GenerateError::ResponseTooLarge(limit), true, now, out);
        }
    }

    fn on_body_end(&mut self, now: I, out: &mut Out<'_>, stream: &mut impl StreamSink) {
        let State::Sending(a) = &mut self.state else { return };
        match &mut a.phase {
            Phase::Streaming { decoder, .. } => {
                decoder.finish(&mut self.scratch);
                self.drain_stream_events(now, out, stream);
            }
            Phase::ErrorBody { status, headers, body } => {
                let error = error_response(self.model.dialect, *status, headers, body);
                self.fail_attempt(error, false, now, out);
            }
            Phase::AwaitingHead => {
                let error = TransportError {
                    kind: TransportErrorKind::Other,
                    message: "the body ended before the response head".into(),
                };
                self.fail_attempt(GenerateError::Transport(error), false, now, out);
            }
        }
    }

    /// Forwards decoded events; a terminal `done` finishes the exchange, an `error`
    /// fails the attempt.
    fn drain_stream_events(&mut self, now: I, out: &mut Out<'_>, stream: &mut impl StreamSink) {
        let mut events = std::mem::take(&mut self.scratch);
        for event in events.drain(..) {
            match event {
                StreamEvent::Error { error } => {
                    let error = match *error {
                        StreamError::Provider(e) => GenerateError::Provider(e),
                        other @ (StreamError::Framing { .. }
                        | StreamError::Decode { .. }
                        | StreamError::Incomplete
                        | StreamError::WrongFormat { .. }
                        | StreamError::InvalidToolInput { .. }) => GenerateError::Stream(other),
                    };
                    self.fail_attempt(error, true, now, out);
                }
                StreamEvent::Done { .. } => {
                    stream.stream(event);
                    self.finish(out);
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
                    stream.stream(event);
                }
            }
        }
        self.scratch = events;
    }

    fn finish(&mut self, out: &mut Out<'_>) {
        let State::Sending(attempt) = std::mem::replace(&mut self.state, State::Ended) else { return };
        match attempt.phase {
            Phase::Streaming { decoder, .. } => {
                let response = decoder.into_response();
                out.effects.extend(observe::inference_ended(self.observe, Some(&response), None));
                self.events.push_back(RequestEvent::Finished(Box::new(response)))
            }
            phase @ (Phase::AwaitingHead | Phase::ErrorBody { .. }) => {
                self.state = State::Sending(Attempt { phase, ..attempt });
            }
        }
    }

    /// An attempt failed: retry when nothing reached the owner yet and the failure is
    /// retryable, else fail with what was received. `in_flight` says the request may
    /// still be open and must be cancelled.
    fn fail_attempt(&mut self, mut error: GenerateError, in_flight: bool, now: I, out: &mut Out<'_>) {
        let State::Sending(attempt) = std::mem::replace(&mut self.state, State::Ended) else { return };
        // A key the server echoed back never reaches the caller's error (or its logs).
        error.scrub(&Secrets::of_request(&self.request));
        // The provider's words alone rarely say which of several providers and models
        // answered: the error names them, and the host.
        if let GenerateError::Provider(e) | GenerateError::Stream(StreamError::Provider(e)) = &mut error {
            if e.served_by.is_none() {
                e.served_by = Some(Box::new(ServedBy::new(&self.model.provider, &self.model.id, &self.request.url)));
            }
        }
        if in_flight {
            out.effects.push_back(Effect::CancelRequest { id: attempt.id });
        }
        let (partial, delivered) = match attempt.phase {
            Phase::Streaming { decoder, delivered } => (Some(decoder.into_response()), delivered),
            Phase::AwaitingHead | Phase::ErrorBody { .. } => (None, false),
        };
        let stalled = matches!(error, GenerateError::Stalled(_));
        let retry = self.limits.retry;
        let stalls_left = !stalled || self.stall_retries < retry.max_stall_retries;
        if !delivered && error.is_retryable() && stalls_left && self.retries < retry.max_retries {
            let retry_after = if let GenerateError::Provider(e) = &error { e.retry_after } else { None };
            if let Some(delay) = retry.delay(self.retries + 1, retry_after) {
                self.retries += 1;
                self.stall_retries += u32::from(stalled);
                if self.observe.is_on() {
                    let error_type = observe::error_type(&error);
                    let retrying = Observation::Retrying { attempt: self.retries, delay, error_type };
                    out.effects.push_back(Effect::Observe(retrying));
                }
                self.events.push_back(RequestEvent::Retry { attempt: self.retries, delay, error: Box::new(error) });
                self.state = State::Backoff { until: now + delay };
                return;
            }
        }
        if self.observe.is_on() {
            let error_type = observe::error_type(&error);
            out.effects.extend(observe::inference_ended(self.observe, partial.as_ref(), Some(error_type)));
        }
        self.events.push_back(RequestEvent::Failed(Box::new((error, partial))));
    }
}
