//! Framing: turning response body bytes into whole events.
//!
//! Three decoders (SSE, NDJSON, a whole JSON body), one contract: feed byte chunks of any size, receive complete frames
//! through a callback (borrowed, so a frame costs no allocation), and call
//! [`FrameDecoder::finish`] at the end of the body to learn whether the stream ended
//! cleanly or was cut mid-event. Memory is bounded: one event larger than the limit
//! is an error, never an allocation.

mod lines;
mod ndjson;
mod sse;
mod whole;

pub use ndjson::NdjsonDecoder;
pub use sse::SseDecoder;
pub use whole::WholeDecoder;

use std::fmt;

/// Default cap on the size of one event: 16 MiB.
///
/// It also bounds the work of one [`StreamDecoder::feed`](crate::wire::decoder::StreamDecoder::feed):
/// decoding is linear in bytes, blocks and tool calls, so a feed costs its chunk plus at
/// most one event, and a driver looks at cancels and deadlines between feeds. The
/// costliest event is one packed with tool calls (Chat Completions' `tool_calls`,
/// Gemini's parts, Ollama's `tool_calls`): 150,000 calls in one 16 MB Chat Completions
/// chunk decode in ~0.7 s on the CI-class machine this was measured on (`many_calls`
/// bench, `one_event_of_16_mib`), ~3.5 µs a call. The cap stays at 16 MiB rather than
/// lower because single events that large are legitimate (Gemini returns generated images
/// inline as base64 in one part; Ollama and Gemini send a call's whole arguments in one
/// line or part), and their cost per byte is small; what makes an event slow is the
/// number of calls in it, which no provider sends by the thousand.
pub const DEFAULT_MAX_EVENT_BYTES: usize = 16 * 1024 * 1024;

/// Which framing a body uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// Server-sent events (`text/event-stream`), per the WHATWG HTML standard.
    Sse,
    /// Newline-delimited JSON: one JSON value per line.
    Ndjson,
    /// One JSON document, the whole body (a format that does not stream).
    Json,
}

/// One complete frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Frame<'a> {
    /// An event. For NDJSON, `event` is empty and `data` is the line.
    Event {
        /// The `event:` field, or `""` when absent (the WHATWG default type is `message`).
        event: &'a str,
        /// The `data:` lines joined with `\n`.
        data: &'a str,
        /// The last event id seen (`id:` field), if any.
        id: Option<&'a str>,
    },
    /// A comment line (`: ping`) or blank NDJSON keep-alive: proof of life, not progress.
    Comment(&'a str),
    /// The OpenAI-style terminator `data: [DONE]`.
    Done,
}

/// How the body ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamEnd {
    /// Every event was terminated.
    Clean,
    /// The body stopped inside an event. Whatever whole lines it held were still
    /// dispatched, so nothing received is lost; the caller decides if that is fatal.
    Cut,
}

/// Framing failures.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FramingError {
    /// One event grew past the limit.
    EventTooLarge {
        /// The limit in bytes.
        limit: usize,
    },
}

impl fmt::Display for FramingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::EventTooLarge { limit } => write!(f, "an event exceeded the limit of {limit} bytes"),
        }
    }
}

impl std::error::Error for FramingError {}

/// Either decoder, chosen by [`Framing`].
#[derive(Debug)]
pub enum FrameDecoder {
    /// SSE.
    Sse(SseDecoder),
    /// NDJSON.
    Ndjson(NdjsonDecoder),
    /// A whole JSON body.
    Json(WholeDecoder),
}

impl FrameDecoder {
    /// A decoder with the default event size limit.
    pub fn new(framing: Framing) -> Self {
        Self::with_max_event_bytes(framing, DEFAULT_MAX_EVENT_BYTES)
    }

    /// A decoder with a custom event size limit.
    pub fn with_max_event_bytes(framing: Framing, max: usize) -> Self {
        match framing {
            Framing::Sse => Self::Sse(SseDecoder::new(max)),
            Framing::Ndjson => Self::Ndjson(NdjsonDecoder::new(max)),
            Framing::Json => Self::Json(WholeDecoder::new(max)),
        }
    }

    /// Feeds a chunk; calls `on_frame` for every frame it completes.
    pub fn feed<F: FnMut(Frame<'_>)>(&mut self, chunk: &[u8], on_frame: F) -> Result<(), FramingError> {
        match self {
            Self::Sse(d) => d.feed(chunk, on_frame),
            Self::Ndjson(d) => d.feed(chunk, on_frame),
            Self::Json(d) => d.feed(chunk, on_frame),
        }
    }

    /// Ends the body: dispatches what is pending and reports how it ended.
    pub fn finish<F: FnMut(Frame<'_>)>(&mut self, on_frame: F) -> Result<StreamEnd, FramingError> {
        match self {
            Self::Sse(d) => d.finish(on_frame),
            Self::Ndjson(d) => d.finish(on_frame),
            Self::Json(d) => d.finish(on_frame),
        }
    }
}
