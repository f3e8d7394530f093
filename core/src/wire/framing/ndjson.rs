//! Newline-delimited JSON: one JSON value per line (Ollama's streaming format).
//!
//! Lines end at LF; a CR before it is dropped (CRLF). Every non-blank line becomes
//! `Frame::Event { event: "", data: line, id: None }`; blank or whitespace-only lines
//! are keep-alives, `Frame::Comment("")`. The line is handed over as text (decoded from
//! UTF-8 whole, invalid bytes as U+FFFD, a leading BOM skipped once); parsing the JSON
//! is the dialect's job.

use super::lines::{decode, LineSink, LineSplitter};
use super::{Frame, FramingError, StreamEnd};

/// An incremental NDJSON decoder.
///
/// Complete lines are passed on straight from the chunk; only an unfinished last line
/// is buffered, and it may hold at most `max_event_bytes` (beyond that the decoder
/// fails with [`FramingError::EventTooLarge`] and keeps failing).
#[derive(Debug)]
pub struct NdjsonDecoder {
    lines: LineSplitter<false>,
    max: usize,
    failed: Option<FramingError>,
}

impl NdjsonDecoder {
    /// A decoder that refuses lines larger than `max_event_bytes`.
    pub fn new(max_event_bytes: usize) -> Self {
        Self { lines: LineSplitter::new(max_event_bytes), max: max_event_bytes, failed: None }
    }

    /// Feeds a chunk; calls `on_frame` for every line it completes.
    pub fn feed<F: FnMut(Frame<'_>)>(&mut self, chunk: &[u8], mut on_frame: F) -> Result<(), FramingError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let result = self.lines.feed(chunk, &mut Emitter { max: self.max, on_frame: &mut on_frame });
        self.remember(result)
    }

    /// Ends the body. A last line without a newline is still dispatched (nothing
    /// received is lost) and reported as [`StreamEnd::Cut`]; the caller decides whether
    /// that is fatal.
    pub fn finish<F: FnMut(Frame<'_>)>(&mut self, mut on_frame: F) -> Result<StreamEnd, FramingError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let result = self.lines.finish(&mut Emitter { max: self.max, on_frame: &mut on_frame });
        let had_line = self.remember(result)?;
        Ok(if had_line { StreamEnd::Cut } else { StreamEnd::Clean })
    }

    fn remember<T>(&mut self, result: Result<T, FramingError>) -> Result<T, FramingError> {
        if let Err(e) = &result {
            self.failed = Some(e.clone());
        }
        result
    }
}

/// Turns lines into frames.
struct Emitter<'a, F> {
    max: usize,
    on_frame: &'a mut F,
}

impl<'c, F: FnMut(Frame<'_>)> LineSink<'c> for Emitter<'_, F> {
    fn room(&self) -> usize {
        self.max
    }

    fn line(&mut self, line: &[u8]) -> Result<(), FramingError> {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if is_blank(line) {
            (self.on_frame)(Frame::Comment(""));
        } else {
            let data = decode(line);
            (self.on_frame)(Frame::Event { event: "", data: &data, id: None });
        }
        Ok(())
    }

    fn chunk_line(&mut self, line: &'c str) -> Result<(), FramingError> {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if is_blank(line.as_bytes()) {
            (self.on_frame)(Frame::Comment(""));
        } else {
            (self.on_frame)(Frame::Event { event: "", data: line, id: None });
        }
        Ok(())
    }
}

/// Blank or whitespace-only: a keep-alive.
fn is_blank(line: &[u8]) -> bool {
    line.iter().all(|b| matches!(b, b' ' | b'\t' | b'\r'))
}
