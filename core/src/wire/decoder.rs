//! The stream decoder: framing, dialect parsing and accumulation in one pure object.
//!
//! ```text
//!  bytes ─► FrameDecoder ─► Frame ─► DialectState ─► Delta ─► Accumulator ─► StreamEvent
//!                                 └ a provider's event hook, when set (JSON in, JSON out)
//! ```

use crate::data::error::StreamError;
use crate::data::event::StreamEvent;
use crate::data::hooks::EventHook;
use crate::data::message::Origin;
use crate::data::model::Model;
use crate::data::response::Response;
use crate::text_tools::stream::TextCalls;
use crate::wire::accumulator::Accumulator;
use crate::wire::delta::Delta;
use crate::wire::dialect::{DeltaSink, Dialect, DialectState};
use crate::wire::framing::{Frame, FrameDecoder, StreamEnd, DEFAULT_MAX_EVENT_BYTES};

/// What one [`StreamDecoder::feed`] call achieved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Progress {
    /// Whole frames decoded (events, comments, `[DONE]`).
    pub frames: usize,
    /// True when the stream delivered content or metadata, not only keep-alives.
    /// A no-progress timeout resets only on this.
    pub progressed: bool,
}

/// Decodes one response body of one dialect into events and a response.
#[derive(Debug)]
pub struct StreamDecoder {
    frames: FrameDecoder,
    state: DialectState,
    acc: Accumulator,
    deltas: Vec<Delta>,
    /// A text protocol's parser between the dialect and the accumulator, if the request
    /// offered its tools as text (`crate::text_tools`).
    calls: Option<TextCalls>,
    /// The provider's event hook, applied to each event's JSON before the dialect reads it.
    event_hook: Option<EventHook>,
}

impl StreamDecoder {
    /// A decoder for `dialect`; the response starts with `model_id` as its model.
    pub fn new(dialect: Dialect, model_id: &str) -> Self {
        let origin = Origin { dialect: dialect.name().into(), provider: String::new(), model: model_id.into() };
        Self::with_accumulator(dialect, Accumulator::new(model_id, Some(origin)), DEFAULT_MAX_EVENT_BYTES)
    }

    /// A decoder for a catalogue model: records its provider and prices.
    pub fn for_model(model: &Model) -> Self {
        let origin =
            Origin { dialect: model.dialect.name().into(), provider: model.provider.clone(), model: model.id.clone() };
        let acc = Accumulator::new(model.id.clone(), Some(origin)).with_prices(model.prices);
        Self::with_accumulator(model.dialect, acc, DEFAULT_MAX_EVENT_BYTES)
    }

    /// A decoder with a custom accumulator and event size limit.
    pub fn with_accumulator(dialect: Dialect, acc: Accumulator, max_event_bytes: usize) -> Self {
        Self {
            frames: FrameDecoder::with_max_event_bytes(dialect.framing(), max_event_bytes),
            state: dialect.new_stream_state(),
            acc,
            deltas: Vec::new(),
            calls: None,
            event_hook: None,
        }
    }

    /// This decoder, with the reply's text read through a text protocol's parser.
    pub fn with_text_calls(mut self, calls: TextCalls) -> Self {
        self.calls = Some(calls);
        self
    }

    /// This decoder, with each event's JSON payload passed through `hook` (a provider's,
    /// [`crate::data::hooks`]) before the dialect reads it: the payload is parsed, hooked
    /// and written out again for the dialect. A payload that is not JSON goes to the dialect
    /// as it came. `None` leaves the decoder as it was (and costs nothing).
    pub fn with_event_hook(mut self, hook: Option<EventHook>) -> Self {
        self.event_hook = hook;
        self
    }

    /// Feeds body bytes; appends the events they complete to `out`.
    pub fn feed(&mut self, chunk: &[u8], out: &mut Vec<StreamEvent>) -> Progress {
        let mut progress = Progress::default();
        if self.acc.is_terminated() {
            return progress;
        }
        let Self { frames, state, acc, calls, event_hook, .. } = self;
        let result = frames.feed(chunk, |frame| {
            progress.frames += 1;
            if let Err(e) = Self::on_frame(state, acc, calls.as_mut(), event_hook.as_ref(), &frame, out, &mut progress)
            {
                acc.fail(e, out);
            }
        });
        if let Err(e) = result {
            self.acc.fail(StreamError::Framing { message: e.to_string() }, out);
        }
        progress
    }

    /// The body ended (cleanly or not): emits the final `done` or `error`.
    pub fn finish(&mut self, out: &mut Vec<StreamEvent>) {
        if self.acc.is_terminated() {
            return;
        }
        // Under the WHATWG rules an SSE event the body ends inside is never dispatched, so
        // a stream whose end was only announced by such an event did not end: its content
        // is kept (the event is still decoded: nothing received is lost) but the stream
        // is incomplete. NDJSON has no such rule: a last line without its newline is a
        // whole line (JSON Lines), and only a missing stop makes the stream incomplete.
        let ended_before = self.acc.response().stop_reason.is_some();
        let sse = matches!(self.frames, FrameDecoder::Sse(_));
        let Self { frames, state, acc, calls, event_hook, .. } = self;
        let mut progress = Progress::default();
        // A frame handed over here is one the body ended inside (a last SSE event without
        // its blank line, a last NDJSON line without its newline). One that does not parse
        // is the front half of an event: the stream was cut, which is `Incomplete` (and
        // retryable before anything reached the caller), not a malformed stream.
        let end = frames.finish(|frame| {
            if Self::on_frame(state, acc, calls.as_mut(), event_hook.as_ref(), &frame, out, &mut progress).is_err() {
                acc.fail(StreamError::Incomplete, out);
            }
        });
        if let Err(e) = end {
            self.acc.fail(StreamError::Framing { message: e.to_string() }, out);
            return;
        }
        self.state.finish(&mut self.deltas);
        for d in self.deltas.drain(..) {
            match &mut self.calls {
                Some(calls) => calls.push(d, &mut self.acc, out),
                None => self.acc.push(d, out),
            }
        }
        if let Some(calls) = &mut self.calls {
            // What the parser held back (text, or a call the reply ended inside).
            calls.finish(&mut self.acc, out);
        }
        let ended = if sse { ended_before } else { self.acc.response().stop_reason.is_some() };
        if end == Ok(StreamEnd::Cut) && !ended {
            self.acc.fail(StreamError::Incomplete, out);
        }
        self.acc.finish(out);
    }

    /// Parses one frame into the accumulator; the caller decides what a parse error means.
    fn on_frame(
        state: &mut DialectState,
        acc: &mut Accumulator,
        calls: Option<&mut TextCalls>,
        hook: Option<&EventHook>,
        frame: &Frame<'_>,
        out: &mut Vec<StreamEvent>,
        progress: &mut Progress,
    ) -> Result<(), StreamError> {
        if acc.is_terminated() {
            return Ok(());
        }
        // Deltas go straight into the accumulator, in the order the dialect produces them.
        let mut sink = AccumulatorSink { acc, calls, out, pushed: false };
        let parsed = match (hook, frame) {
            (Some(hook), Frame::Event { event, data, id }) => match hooked(hook, event, data) {
                Some(data) => state.parse_to(&Frame::Event { event, data: &data, id: *id }, &mut sink),
                None => state.parse_to(frame, &mut sink),
            },
            _ => state.parse_to(frame, &mut sink),
        };
        progress.progressed |= sink.pushed;
        parsed
    }

    /// The response so far.
    pub fn response(&self) -> &Response {
        self.acc.response()
    }

    /// The response, consuming the decoder.
    pub fn into_response(self) -> Response {
        self.acc.into_response()
    }

    /// True once `done` or `error` was emitted.
    pub fn is_terminated(&self) -> bool {
        self.acc.is_terminated()
    }
}

/// `data` through an event hook: `None` when it is not JSON (the dialect then reads it as
/// it came, and says what is wrong with it).
fn hooked(hook: &EventHook, event: &str, data: &str) -> Option<String> {
    let mut value: serde_json::Value = serde_json::from_str(data).ok()?;
    hook.get()(event, &mut value);
    serde_json::to_string(&value).ok()
}

/// Feeds deltas to the accumulator as the dialect produces them.
struct AccumulatorSink<'a> {
    acc: &'a mut Accumulator,
    calls: Option<&'a mut TextCalls>,
    out: &'a mut Vec<StreamEvent>,
    pushed: bool,
}

impl DeltaSink for AccumulatorSink<'_> {
    #[inline]
    fn push(&mut self, delta: Delta) {
        self.pushed = true;
        match &mut self.calls {
            None => self.acc.push(delta, self.out),
            Some(calls) => calls.push(delta, self.acc, self.out),
        }
    }
}

/// Decodes a whole body in one go: the events and the final response.
pub fn decode_body(dialect: Dialect, model_id: &str, body: &[u8]) -> (Vec<StreamEvent>, Response) {
    let mut decoder = StreamDecoder::new(dialect, model_id);
    let mut events = Vec::new();
    decoder.feed(body, &mut events);
    decoder.finish(&mut events);
    (events, decoder.into_response())
}
