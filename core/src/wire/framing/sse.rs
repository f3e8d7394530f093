//! Server-sent events, per the WHATWG HTML standard ("Parsing an event stream" and
//! "Interpreting an event stream", section 9.2 of html.spec.whatwg.org).
//!
//! ```text
//!  bytes ─► lines (LF | CR | CRLF, BOM skipped once) ─► one line at a time:
//!    ""              dispatch: data pending? Done ([DONE]) or Event; reset data and type
//!    ":text"         Frame::Comment(text)
//!    "name:value"    field (one space after the colon dropped); "name" alone: empty value
//!      data   append to the data buffer ('\n' between lines)
//!      event  set the event type
//!      id     set the last event id (unless it holds NUL); kept across events
//!      retry  ASCII digits only: record the reconnection time
//!      other  ignored
//! ```
//!
//! Lines are decoded from UTF-8 whole (never a chunk at a time), invalid bytes become
//! U+FFFD. Since line endings and `:` are ASCII, decoding a line's parts separately
//! gives exactly what decoding the whole stream would.

use std::borrow::Cow;

use memchr::memchr;

use super::lines::{capped_reservation, decode, LineSink, LineSplitter};
use super::{Frame, FramingError, StreamEnd};

/// The OpenAI-style end-of-stream marker, sent as a whole event's data.
const DONE: &str = "[DONE]";

/// An incremental `text/event-stream` decoder.
///
/// Feed body chunks of any size with [`feed`](Self::feed); frames borrow the decoder's
/// buffers, which are reused from event to event, so a steady stream allocates nothing.
/// One event (its data plus the line being received) may hold at most
/// `max_event_bytes`; beyond that the decoder fails with
/// [`FramingError::EventTooLarge`] and keeps failing.
#[derive(Debug)]
pub struct SseDecoder {
    lines: LineSplitter<true>,
    state: EventState,
    failed: Option<FramingError>,
}

/// The WHATWG buffers: data, event type, last event id, plus our bookkeeping.
#[derive(Debug)]
struct EventState {
    /// The data lines so far, joined with `\n` (without the spec's trailing LF).
    data: String,
    /// Whether any `data` line was seen: `data:` alone makes a non-empty spec buffer
    /// ("\n") and so dispatches an event with empty data.
    has_data: bool,
    event_type: String,
    /// The last event id; empty means none (the spec does not tell "" from no id).
    last_id: String,
    retry: Option<u64>,
    /// A field line arrived since the last blank line: the body is inside an event.
    in_event: bool,
    max: usize,
}

impl SseDecoder {
    /// A decoder that refuses events larger than `max_event_bytes`.
    pub fn new(max_event_bytes: usize) -> Self {
        Self {
            lines: LineSplitter::new(max_event_bytes),
            state: EventState {
                data: String::new(),
                has_data: false,
                event_type: String::new(),
                last_id: String::new(),
                retry: None,
                in_event: false,
                max: max_event_bytes,
            },
            failed: None,
        }
    }

    /// Feeds a chunk; calls `on_frame` for every frame it completes.
    pub fn feed<F: FnMut(Frame<'_>)>(&mut self, chunk: &[u8], mut on_frame: F) -> Result<(), FramingError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let mut sink = Interpreter::new(&mut self.state, &mut on_frame);
        let result = self.lines.feed(chunk, &mut sink);
        // The event still pending at the chunk's end must outlive the chunk.
        sink.keep_pending();
        self.remember(result)
    }

    /// Ends the body.
    ///
    /// The WHATWG algorithm discards an unterminated line and an undispatched event at
    /// the end of the stream. We deliberately do not: the pending line is taken as a
    /// complete line, the pending event is dispatched as if a blank line followed, and
    /// the result is [`StreamEnd::Cut`], so nothing received is lost and the caller
    /// decides whether a cut stream is fatal. [`StreamEnd::Clean`] means the body
    /// ended between events. (The stream decoder takes a cut event's content but not its
    /// word that the response is finished: a stream finished only by such an event is
    /// incomplete, as it is for a WHATWG client, which never sees that event.)
    pub fn finish<F: FnMut(Frame<'_>)>(&mut self, mut on_frame: F) -> Result<StreamEnd, FramingError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let mut sink = Interpreter::new(&mut self.state, &mut on_frame);
        let had_line = self.lines.finish(&mut sink);
        let had_line = self.remember(had_line)?;
        let had_event = self.state.in_event;
        if had_event {
            Interpreter::new(&mut self.state, &mut on_frame).dispatch();
        }
        Ok(if had_line || had_event { StreamEnd::Cut } else { StreamEnd::Clean })
    }

    /// The reconnection time (ms) from the last valid `retry:` field, if any.
    pub fn retry(&self) -> Option<u64> {
        self.state.retry
    }

    /// The last event id (`id:` field), kept across events; `None` when unset or reset
    /// by an empty `id:`.
    pub fn last_event_id(&self) -> Option<&str> {
        self.state.id()
    }

    fn remember<T>(&mut self, result: Result<T, FramingError>) -> Result<T, FramingError> {
        if let Err(e) = &result {
            self.failed = Some(e.clone());
        }
        result
    }
}

impl EventState {
    fn id(&self) -> Option<&str> {
        (!self.last_id.is_empty()).then_some(self.last_id.as_str())
    }
}

/// Interprets lines against the event state, emitting frames.
///
/// While the current event's `data` and `event` fields are single lines of the chunk
/// being fed, they are kept as slices of it and dispatched without a copy; they are
/// copied into the state's buffers only when the event goes on past the chunk (see
/// [`keep_pending`](Self::keep_pending)) or gets a second data line.
struct Interpreter<'s, 'c, F> {
    state: &'s mut EventState,
    /// The data, when it is one line of the chunk (then `state.data` is empty).
    data: Option<&'c str>,
    /// The event type, when its last `event` line is in the chunk (it overrides `state.event_type`).
    event_type: Option<&'c str>,
    on_frame: &'s mut F,
}

/// A field value: a slice of the chunk (valid UTF-8), or bytes that live only for the call.
enum Value<'c, 't> {
    Chunk(&'c str),
    Line(&'t [u8]),
}

impl Value<'_, '_> {
    fn text(&self) -> Cow<'_, str> {
        match self {
            Value::Chunk(text) => Cow::Borrowed(text),
            Value::Line(bytes) => decode(bytes),
        }
    }

    fn bytes(&self) -> &[u8] {
        match self {
            Value::Chunk(text) => text.as_bytes(),
            Value::Line(bytes) => bytes,
        }
    }
}

impl<'s, 'c, F: FnMut(Frame<'_>)> Interpreter<'s, 'c, F> {
    fn new(state: &'s mut EventState, on_frame: &'s mut F) -> Self {
        Interpreter { state, data: None, event_type: None, on_frame }
    }

    fn data_len(&self) -> usize {
        self.data.map_or(self.state.data.len(), str::len)
    }

    /// Copies the borrowed parts of the pending event into the state's buffers.
    fn keep_pending(&mut self) {
        let state = &mut *self.state;
        if let Some(data) = self.data.take() {
            reserve_capped(&mut state.data, data.len(), state.max);
            state.data.push_str(data);
        }
        if let Some(event_type) = self.event_type.take() {
            set_capped(&mut state.event_type, Cow::Borrowed(event_type), state.max);
        }
    }

    fn field(&mut self, name: &[u8], value: Value<'c, '_>) -> Result<(), FramingError> {
        self.state.in_event = true;
        match name {
            b"data" => {
                if let (false, Value::Chunk(text)) = (self.state.has_data, &value) {
                    if text.len() > self.state.max {
                        return Err(FramingError::EventTooLarge { limit: self.state.max });
                    }
                    self.data = Some(text);
                    self.state.has_data = true;
                    return Ok(());
                }
                self.keep_pending();
                let state = &mut *self.state;
                let value = value.text();
                let separator = usize::from(state.has_data);
                // Invalid bytes grow when replaced by U+FFFD: check the decoded size.
                if state.data.len() + separator + value.len() > state.max {
                    return Err(FramingError::EventTooLarge { limit: state.max });
                }
                reserve_capped(&mut state.data, separator + value.len(), state.max);
                if state.has_data {
                    state.data.push('\n');
                }
                state.data.push_str(&value);
                state.has_data = true;
            }
            b"event" => match value {
                Value::Chunk(text) => self.event_type = Some(text),
                Value::Line(bytes) => {
                    self.event_type = None;
                    set_capped(&mut self.state.event_type, decode(bytes), self.state.max);
                }
            },
            // An id holding NUL is ignored (it could not be sent back as a header).
            b"id" if memchr(0, value.bytes()).is_none() => {
                set_capped(&mut self.state.last_id, value.text(), self.state.max)
            }
            b"retry" => self.state.retry = parse_digits(value.bytes()).or(self.state.retry),
            _ => {}
        }
        Ok(())
    }

    /// A blank line (or the end of a cut body): hand over the pending event, if it has data.
    fn dispatch(&mut self) {
        let data = self.data.take();
        let event_type = self.event_type.take();
        let state = &mut *self.state;
        state.in_event = false;
        if state.has_data {
            let data = data.unwrap_or(&state.data);
            let frame = if data == DONE {
                Frame::Done
            } else {
                let event = event_type.unwrap_or(&state.event_type);
                Frame::Event { event, data, id: state.id() }
            };
            (self.on_frame)(frame);
        }
        state.data.clear();
        state.has_data = false;
        state.event_type.clear();
    }
}

impl<'c, F: FnMut(Frame<'_>)> LineSink<'c> for Interpreter<'_, 'c, F> {
    fn room(&self) -> usize {
        self.state.max.saturating_sub(self.data_len())
    }

    fn line(&mut self, line: &[u8]) -> Result<(), FramingError> {
        match line.split_first() {
            None => {
                self.dispatch();
                Ok(())
            }
            Some((b':', comment)) => {
                (self.on_frame)(Frame::Comment(&decode(comment)));
                Ok(())
            }
            Some(_) => match split_field(line) {
                Some((name, skip)) => self.field(name, Value::Line(line.get(skip..).unwrap_or_default())),
                None => self.field(line, Value::Line(b"")),
            },
        }
    }

    fn chunk_line(&mut self, line: &'c str) -> Result<(), FramingError> {
        match line.as_bytes().split_first() {
            None => {
                self.dispatch();
                Ok(())
            }
            Some((b':', _)) => {
                (self.on_frame)(Frame::Comment(line.get(1..).unwrap_or_default()));
                Ok(())
            }
            // The first data line of an event, nearly every event's only one: kept as it
            // is, without splitting the line or matching its name.
            Some((b'd', _)) if !self.state.has_data && line.starts_with("data:") => {
                let value = line.get(5..).unwrap_or_default();
                let value = value.strip_prefix(' ').unwrap_or(value);
                if value.len() > self.state.max {
                    return Err(FramingError::EventTooLarge { limit: self.state.max });
                }
                self.state.in_event = true;
                self.state.has_data = true;
                self.data = Some(value);
                Ok(())
            }
            Some((b'e', _)) if line.starts_with("event:") => {
                let value = line.get(6..).unwrap_or_default();
                self.state.in_event = true;
                self.event_type = Some(value.strip_prefix(' ').unwrap_or(value));
                Ok(())
            }
            Some(_) => match split_field(line.as_bytes()) {
                // The colon and the space are ASCII: `skip` is a character boundary.
                Some((name, skip)) => self.field(name, Value::Chunk(line.get(skip..).unwrap_or_default())),
                None => self.field(line.as_bytes(), Value::Chunk("")),
            },
        }
    }
}

/// A field line's name, and where its value starts (one space after the colon is
/// dropped); `None` for a line without a colon (a name with an empty value).
fn split_field(line: &[u8]) -> Option<(&[u8], usize)> {
    // Field names are short: a plain loop finds the colon of `data:` before memchr
    // would have set up; memchr takes over for long names.
    let head = line.get(..8).unwrap_or(line);
    let colon = match head.iter().position(|&b| b == b':') {
        Some(colon) => colon,
        None => head.len() + memchr(b':', line.get(head.len()..).unwrap_or_default())?,
    };
    let name = line.get(..colon).unwrap_or_default();
    let skip = colon + 1 + usize::from(line.get(colon + 1) == Some(&b' '));
    Some((name, skip))
}

/// A `retry` value: one or more ASCII digits, base ten (saturating: the spec sets no bound).
fn parse_digits(value: &[u8]) -> Option<u64> {
    if value.is_empty() {
        return None;
    }
    value
        .iter()
        .try_fold(0u64, |ms, &b| b.is_ascii_digit().then(|| ms.saturating_mul(10).saturating_add(u64::from(b - b'0'))))
}

/// Replaces `buf` with `value`, reusing its allocation and never growing past `cap`.
fn set_capped(buf: &mut String, value: Cow<'_, str>, cap: usize) {
    buf.clear();
    reserve_capped(buf, value.len(), cap);
    buf.push_str(&value);
}

fn reserve_capped(buf: &mut String, additional: usize, cap: usize) {
    let amount = capped_reservation(buf.len(), buf.capacity(), additional, cap);
    if amount > 0 {
        buf.reserve_exact(amount);
    }
}
