//! Line splitting shared by both decoders.
//!
//! Complete lines are handed to the sink straight out of the caller's chunk (no copy);
//! only the unfinished tail of a chunk is kept, in `partial`, and completed by the next
//! chunk. So every byte is scanned for a line end exactly once and copied at most once,
//! and there is nothing to compact: `partial` only ever holds the current line.
//!
//! UTF-8 is checked once per chunk, over all the complete lines it holds (a character
//! split by the chunk's end lies after its last line end), and the lines are handed over
//! as text slices of it: checking line by line costs several times more on short lines.
//! A chunk with invalid bytes falls back to decoding line by line (invalid bytes become
//! U+FFFD), and so does the line that completes `partial`.
//!
//! ```text
//!  chunk ─► [BOM check, stream start only] ─► partial line? ─► complete lines ─► sink
//!                                                                └► tail ─► partial
//! ```

use std::borrow::Cow;

use memchr::{memchr, memchr2, memrchr, memrchr2};

use super::FramingError;

/// The UTF-8 byte order mark, which the WHATWG "UTF-8 decode" skips once at stream start.
const BOM: [u8; 3] = [0xEF, 0xBB, 0xBF];

/// Receives whole lines (without their line ending). `'c` is the lifetime of the chunk
/// being fed: lines taken straight from it may be kept until the end of the feed.
pub(super) trait LineSink<'c> {
    /// How many bytes the current line may hold before the event exceeds its limit.
    fn room(&self) -> usize;
    /// One complete line that lives only for this call (assembled across chunks, or from
    /// a chunk that is not valid UTF-8).
    fn line(&mut self, line: &[u8]) -> Result<(), FramingError>;
    /// One complete line of the current chunk, already valid UTF-8.
    fn chunk_line(&mut self, line: &'c str) -> Result<(), FramingError>;
}

/// Splits a byte stream into lines. `CR_ENDS_LINE`: SSE ends lines at LF, CR or CRLF;
/// NDJSON only at LF (a CR before it is the sink's business).
#[derive(Debug)]
pub(super) struct LineSplitter<const CR_ENDS_LINE: bool> {
    /// The bytes of the line not yet terminated.
    partial: Vec<u8>,
    /// How many bytes of a leading BOM have been seen; `None` once the start is decided.
    bom_seen: Option<usize>,
    /// The last line ended with a CR at the very end of a chunk: an LF starting the next
    /// chunk completes that CRLF instead of ending an empty line.
    after_cr: bool,
    /// The event size limit, the allocation cap of `partial`.
    max: usize,
}

impl<const CR_ENDS_LINE: bool> LineSplitter<CR_ENDS_LINE> {
    pub(super) fn new(max: usize) -> Self {
        Self { partial: Vec::new(), bom_seen: Some(0), after_cr: false, max }
    }

    /// Splits `chunk`, passing every line it completes to `sink`.
    pub(super) fn feed<'c, S: LineSink<'c>>(&mut self, mut chunk: &'c [u8], sink: &mut S) -> Result<(), FramingError> {
        if let Some(seen) = self.bom_seen {
            chunk = self.skip_bom(seen, chunk, sink)?;
        }
        if self.after_cr {
            let Some(&first) = chunk.first() else { return Ok(()) };
            self.after_cr = false;
            if first == b'\n' {
                chunk = chunk.get(1..).unwrap_or_default();
            }
        }
        if !self.partial.is_empty() {
            let Some(end) = find_line_end::<CR_ENDS_LINE>(chunk) else {
                return self.keep(chunk, sink);
            };
            let head = chunk.get(..end).unwrap_or_default();
            self.keep(head, sink)?;
            sink.line(&self.partial)?;
            self.partial.clear();
            chunk = self.after_line_end(chunk, end);
        }
        // Everything up to the last line end is complete lines; the rest is the tail.
        let Some(last_end) = find_last_line_end::<CR_ENDS_LINE>(chunk) else {
            return self.keep(chunk, sink);
        };
        let (lines, tail) = chunk.split_at(last_end + 1);
        match std::str::from_utf8(lines) {
            Ok(text) => self.text_lines(text, sink)?,
            Err(_) => self.byte_lines(lines, sink)?,
        }
        // A CR ending the last line may be the first half of a CRLF.
        if CR_ENDS_LINE && lines.last() == Some(&b'\r') {
            match tail.first() {
                Some(b'\n') => return self.keep(tail.get(1..).unwrap_or_default(), sink),
                Some(_) => {}
                None => self.after_cr = true,
            }
        }
        self.keep(tail, sink)
    }

    /// Complete lines (every one ends with its line end) of valid UTF-8, passed on as
    /// slices of the chunk.
    fn text_lines<'c, S: LineSink<'c>>(&mut self, mut text: &'c str, sink: &mut S) -> Result<(), FramingError> {
        while let Some(end) = find_line_end::<CR_ENDS_LINE>(text.as_bytes()) {
            // Line ends are ASCII, so these slices fall on character boundaries.
            let line = text.get(..end).unwrap_or_default();
            if line.len() > sink.room() {
                return Err(FramingError::EventTooLarge { limit: self.max });
            }
            sink.chunk_line(line)?;
            text = text.get(line_end_len::<CR_ENDS_LINE>(text.as_bytes(), end)..).unwrap_or_default();
        }
        Ok(())
    }

    /// Complete lines holding invalid UTF-8 somewhere: each is decoded on its own.
    fn byte_lines<'c, S: LineSink<'c>>(&mut self, mut bytes: &'c [u8], sink: &mut S) -> Result<(), FramingError> {
        while let Some(end) = find_line_end::<CR_ENDS_LINE>(bytes) {
            let line = bytes.get(..end).unwrap_or_default();
            if line.len() > sink.room() {
                return Err(FramingError::EventTooLarge { limit: self.max });
            }
            sink.line(line)?;
            bytes = bytes.get(line_end_len::<CR_ENDS_LINE>(bytes, end)..).unwrap_or_default();
        }
        Ok(())
    }

    /// The body ended: the unterminated line (if any) is passed on as a complete line.
    /// Returns whether there was one.
    pub(super) fn finish<'c, S: LineSink<'c>>(&mut self, sink: &mut S) -> Result<bool, FramingError> {
        if let Some(seen) = self.bom_seen.take() {
            // A stream that stopped inside a would-be BOM: those bytes are content.
            let bytes = BOM.get(..seen).unwrap_or_default();
            self.keep(bytes, sink)?;
        }
        self.after_cr = false;
        if self.partial.is_empty() {
            return Ok(false);
        }
        let result = sink.line(&self.partial);
        self.partial.clear();
        result.map(|()| true)
    }

    /// Consumes a leading BOM, possibly split across chunks. Bytes that began like a BOM
    /// but were not one become the start of the first line.
    fn skip_bom<'c, S: LineSink<'c>>(
        &mut self,
        mut seen: usize,
        mut chunk: &'c [u8],
        sink: &S,
    ) -> Result<&'c [u8], FramingError> {
        while let (Some(&want), Some(&got)) = (BOM.get(seen), chunk.first()) {
            if want != got {
                self.bom_seen = None;
                self.keep(BOM.get(..seen).unwrap_or_default(), sink)?;
                return Ok(chunk);
            }
            seen += 1;
            chunk = chunk.get(1..).unwrap_or_default();
        }
        self.bom_seen = if seen == BOM.len() { None } else { Some(seen) };
        Ok(chunk)
    }

    /// Appends bytes of an unterminated line, refusing (before allocating) to let the
    /// line grow past the room the event has left.
    fn keep<'c, S: LineSink<'c>>(&mut self, bytes: &[u8], sink: &S) -> Result<(), FramingError> {
        if bytes.is_empty() {
            return Ok(());
        }
        let needed = self.partial.len().saturating_add(bytes.len());
        if needed > sink.room() {
            return Err(FramingError::EventTooLarge { limit: self.max });
        }
        reserve_capped(&mut self.partial, bytes.len(), self.max);
        self.partial.extend_from_slice(bytes);
        Ok(())
    }

    /// The rest of `chunk` after the line ending found at `end`.
    fn after_line_end<'c>(&mut self, chunk: &'c [u8], end: usize) -> &'c [u8] {
        let mut next = end + 1;
        if CR_ENDS_LINE && chunk.get(end) == Some(&b'\r') {
            match chunk.get(next) {
                Some(b'\n') => next += 1,
                Some(_) => {}
                // A CR ends the chunk: the line is complete either way, but an LF that
                // starts the next chunk belongs to this line ending (one CRLF).
                None => self.after_cr = true,
            }
        }
        chunk.get(next..).unwrap_or_default()
    }
}

/// The index of the first line-ending byte in `bytes`. An empty line (the blank line
/// ending every SSE event) is answered without a search.
#[inline]
fn find_line_end<const CR_ENDS_LINE: bool>(bytes: &[u8]) -> Option<usize> {
    match bytes.first() {
        None => None,
        Some(b'\n') => Some(0),
        Some(b'\r') if CR_ENDS_LINE => Some(0),
        Some(_) if CR_ENDS_LINE => memchr2(b'\n', b'\r', bytes),
        Some(_) => memchr(b'\n', bytes),
    }
}

/// The index of the last line-ending byte in `bytes`.
#[inline]
fn find_last_line_end<const CR_ENDS_LINE: bool>(bytes: &[u8]) -> Option<usize> {
    if CR_ENDS_LINE {
        memrchr2(b'\n', b'\r', bytes)
    } else {
        memrchr(b'\n', bytes)
    }
}

/// Where the next line starts, after the line end found at `end`: a CR directly followed
/// by an LF is one line end. (A CR at the very end is handled by the caller.)
#[inline]
fn line_end_len<const CR_ENDS_LINE: bool>(bytes: &[u8], end: usize) -> usize {
    if CR_ENDS_LINE && bytes.get(end) == Some(&b'\r') && bytes.get(end + 1) == Some(&b'\n') {
        end + 2
    } else {
        end + 1
    }
}

/// How much to `reserve_exact` so a buffer of `len` bytes and `capacity` can take
/// `additional` more: geometric growth like `Vec`'s, but never past `cap` (callers
/// check that `len + additional <= cap` first), so a buffer near the event limit does
/// not double into an allocation beyond it. Zero when it already fits.
pub(super) fn capped_reservation(len: usize, capacity: usize, additional: usize, cap: usize) -> usize {
    let needed = len.saturating_add(additional);
    if needed <= capacity {
        return 0;
    }
    let target = needed.max(capacity.saturating_mul(2).min(cap)).max(64.min(cap));
    target - len
}

/// Grows `buf` for `additional` more bytes within `cap` (see [`capped_reservation`]).
fn reserve_capped(buf: &mut Vec<u8>, additional: usize, cap: usize) {
    let amount = capped_reservation(buf.len(), buf.capacity(), additional, cap);
    if amount > 0 {
        buf.reserve_exact(amount);
    }
}

/// Decodes one line (or part of one) from UTF-8, invalid bytes as U+FFFD; borrowed when
/// valid. `str::from_utf8` first: it is much faster than the lossy decoder on the
/// (overwhelmingly common) valid input.
#[inline]
pub(super) fn decode(bytes: &[u8]) -> Cow<'_, str> {
    match std::str::from_utf8(bytes) {
        Ok(text) => Cow::Borrowed(text),
        Err(_) => String::from_utf8_lossy(bytes),
    }
}
