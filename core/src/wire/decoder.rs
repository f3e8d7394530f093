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
    /// offered its tools as text ([`TextCallFilter`]).
    calls: Option<Box<dyn TextCallFilter>>,
    /// The provider's event hook, applied to each event's JSON before the dialect reads it.
    event_hook: Option<EventHook>,
    /// Whether the response is of the dialect's format, as far as its events show.
    format: FormatCheck,
}

/// What stands between the dialect and the accumulator when a request offered its tools
/// as text: a text protocol's parser (`text_tools::stream::TextCalls`), which reads the
/// calls out of the reply's text and gives the accumulator the deltas of native calls.
/// The wire owns this trait so that it needs nothing of the text tools; a decoder without
/// one (native tools) goes straight from the dialect to the accumulator.
pub trait TextCallFilter: Send + std::fmt::Debug {
    /// One delta from the dialect, in stream order: what it makes goes to `acc`.
    fn push(&mut self, delta: Delta, acc: &mut Accumulator, out: &mut Vec<StreamEvent>);

    /// The reply ended: what was held back goes to `acc` (text, or a call the reply
    /// ended inside). Called once, before the accumulator finishes.
    fn finish(&mut self, acc: &mut Accumulator, out: &mut Vec<StreamEvent>);
}

/// Whether a response's events are the dialect's. An event the dialect reads gives a
/// delta; a stream none of whose events did, after [`WRONG_FORMAT_AFTER`] of them or at
/// its clean end, is of another format (a Chat Completions server asked for the Responses
/// API, an HTML page), which no retry mends: it fails with
/// [`StreamError::WrongFormat`] naming what was expected and what came.
#[derive(Debug)]
struct FormatCheck {
    dialect: &'static str,
    content_type: Option<String>,
    /// An event gave a delta: the format is the dialect's.
    recognised: bool,
    /// Whole events read before that, and the first of them.
    unread: usize,
    first: Option<String>,
    /// The body's first bytes while no event has come: a body of no events at all (an
    /// HTML page read as SSE) is quoted from them.
    head: Vec<u8>,
}

/// Events without a delta after which a stream is known to be of another format. No
/// dialect starts with so many events that give nothing (a few metadata events at most).
const WRONG_FORMAT_AFTER: usize = 64;

/// How much of the first event a wrong-format error quotes.
const QUOTED_EVENT_BYTES: usize = 200;

impl FormatCheck {
    fn new(dialect: Dialect) -> Self {
        Self {
            dialect: dialect.name(),
            content_type: None,
            recognised: false,
            unread: 0,
            first: None,
            head: Vec::new(),
        }
    }

    /// Body bytes, kept (the first [`QUOTED_EVENT_BYTES`]) while no event has come.
    fn bytes(&mut self, chunk: &[u8]) {
        if self.unread == 0 && !self.recognised && self.head.len() < QUOTED_EVENT_BYTES {
            let room = QUOTED_EVENT_BYTES - self.head.len();
            self.head.extend_from_slice(&chunk[..chunk.len().min(room)]);
        }
    }

    /// One whole event read, with `pushed` whether it gave a delta; the error once the
    /// stream is known to be of another format.
    fn event(&mut self, frame: &Frame<'_>, pushed: bool) -> Option<StreamError> {
        if self.recognised || !matches!(frame, Frame::Event { .. }) {
            return None;
        }
        if pushed {
            self.recognised = true;
            return None;
        }
        self.unread += 1;
        if self.first.is_none() {
            self.first = Some(quote(frame));
        }
        (self.unread >= WRONG_FORMAT_AFTER).then(|| self.error())
    }

    /// An event the dialect could not parse (`error`), before any was read: of another
    /// format when its data is not JSON at all (SSE lines read as NDJSON, an HTML page), or
    /// well-formed JSON whose fields have other types than the dialect's (another API's
    /// event). Malformed JSON, or a limit passed, is left a decode error: the right
    /// format, broken.
    fn unparsed(&mut self, frame: &Frame<'_>, error: &StreamError) -> Option<StreamError> {
        let Frame::Event { data, .. } = frame else { return None };
        if self.recognised {
            return None;
        }
        let looks_json = matches!(data.trim_start().as_bytes().first(), Some(b'{' | b'['));
        if looks_json {
            let StreamError::Decode { message, .. } = error else { return None };
            // serde's words for a shape that is not the expected one.
            let shape = ["invalid type", "missing field", "unknown variant", "invalid value"]
                .iter()
                .any(|words| message.starts_with(words));
            if !shape || serde_json::from_str::<serde::de::IgnoredAny>(data).is_err() {
                return None;
            }
        }
        self.first.get_or_insert_with(|| quote(frame));
        Some(self.error())
    }

    /// At the stream's end: of another format when events came and none was read, or when
    /// the body held no event at all but text that is not a keep-alive (an HTML page).
    /// `response` is what was read in the end (a dialect may give its deltas only when the
    /// body ends: a whole JSON document).
    fn at_end(&mut self, response: &Response) -> Option<StreamError> {
        let read = !response.message.content.is_empty() || response.stop_reason.is_some() || response.id.is_some();
        if self.recognised || read {
            return None;
        }
        if self.unread == 0 {
            let head = String::from_utf8_lossy(&self.head);
            let text = head.trim_start();
            if text.is_empty() || text.starts_with(':') {
                return None;
            }
            self.first = Some(text.to_owned());
        }
        Some(self.error())
    }

    fn error(&self) -> StreamError {
        StreamError::WrongFormat {
            dialect: self.dialect.to_owned(),
            content_type: self.content_type.clone(),
            first_event: self.first.clone().unwrap_or_default(),
        }
    }
}

/// An event as a wrong-format error quotes it: `event: data`, at most
/// [`QUOTED_EVENT_BYTES`] of it.
fn quote(frame: &Frame<'_>) -> String {
    let Frame::Event { event, data, .. } = frame else { return String::new() };
    let whole = if event.is_empty() { (*data).to_owned() } else { format!("{event}: {data}") };
    let mut end = whole.len().min(QUOTED_EVENT_BYTES);
    while !whole.is_char_boundary(end) {
        end -= 1;
    }
    whole[..end].to_owned()
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
            format: FormatCheck::new(dialect),
        }
    }

    /// This decoder, told the response's content type (quoted by a wrong-format error).
    pub fn with_content_type(mut self, content_type: Option<String>) -> Self {
        self.format.content_type = content_type;
        self
    }

    /// This decoder, with the reply's text read through a text protocol's parser.
    pub fn with_text_calls(mut self, calls: impl TextCallFilter + 'static) -> Self {
        self.calls = Some(Box::new(calls));
        self
    }

    /// This decoder, with each event's JSON payload passed through `hook` (a provider's,
    /// [`ProviderHooks`](crate::data::hooks::ProviderHooks)) before the dialect reads it: the payload is parsed, hooked
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
        let Self { frames, state, acc, calls, event_hook, format, .. } = self;
        format.bytes(chunk);
        let result = frames.feed(chunk, |frame| {
            progress.frames += 1;
            let mut known = false;
            let read = Self::on_frame(
                state,
                acc,
                calls.as_deref_mut(),
                event_hook.as_ref(),
                &frame,
                out,
                &mut progress,
                &mut known,
            );
            let wrong = match &read {
                Ok(()) => format.event(&frame, known),
                Err(error) => format.unparsed(&frame, error),
            };
            if let Some(e) = wrong.or(read.err()) {
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
            let mut known = false;
            let read = Self::on_frame(
                state,
                acc,
                calls.as_deref_mut(),
                event_hook.as_ref(),
                &frame,
                out,
                &mut progress,
                &mut known,
            );
            if read.is_err() {
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
        // Events that came, none of them the dialect's: another format, cut or not.
        if let Some(wrong) = self.format.at_end(self.acc.response()) {
            self.acc.fail(wrong, out);
        } else if end == Ok(StreamEnd::Cut) && !ended {
            self.acc.fail(StreamError::Incomplete, out);
        }
        self.acc.finish(out);
    }

    /// Parses one frame into the accumulator; the caller decides what a parse error means.
    /// `known` is set when the frame gave a delta only the dialect's own format gives
    /// (content, a block, an id, a model, a stop: not usage alone, which a foreign event
    /// can be read as).
    #[allow(clippy::too_many_arguments)]
    fn on_frame(
        state: &mut DialectState,
        acc: &mut Accumulator,
        calls: Option<&mut (dyn TextCallFilter + 'static)>,
        hook: Option<&EventHook>,
        frame: &Frame<'_>,
        out: &mut Vec<StreamEvent>,
        progress: &mut Progress,
        known: &mut bool,
    ) -> Result<(), StreamError> {
        if acc.is_terminated() {
            return Ok(());
        }
        // Deltas go straight into the accumulator, in the order the dialect produces them.
        let mut sink = AccumulatorSink { acc, calls, out, pushed: false, known: false };
        let parsed = match (hook, frame) {
            (Some(hook), Frame::Event { event, data, id }) => match hooked(hook, event, data) {
                Some(data) => state.parse_to(&Frame::Event { event, data: &data, id: *id }, &mut sink),
                None => state.parse_to(frame, &mut sink),
            },
            _ => state.parse_to(frame, &mut sink),
        };
        progress.progressed |= sink.pushed;
        *known |= sink.known;
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
    calls: Option<&'a mut (dyn TextCallFilter + 'static)>,
    out: &'a mut Vec<StreamEvent>,
    pushed: bool,
    /// A delta of the dialect's own format came (see `on_frame`).
    known: bool,
}

impl DeltaSink for AccumulatorSink<'_> {
    #[inline]
    fn push(&mut self, delta: Delta) {
        self.pushed = true;
        self.known |= !matches!(&delta, Delta::Message(meta)
            if meta.id.is_none() && meta.model.is_none() && meta.stop_reason.is_none());
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
