//! A reference reading of where calls begin and end, written apart from the parser: the
//! whole text at once, a recursive descent over the JSON instead of an incremental
//! tokenizer. The property tests hold the parser's spans and held-back bytes to it.

use crate::data::depth::MAX_DEPTH;
use crate::text_tools::check::{self, Prose};

use super::super::{FENCE, OPENER};

/// A call's span in a text: where it begins and, when its closing fence is in the text,
/// where it ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Span {
    pub(super) start: usize,
    pub(super) end: Option<usize>,
}

/// The calls of `text`, in order (an unclosed one is the last), and what may be held
/// back of its end when the text ends in prose.
pub(super) fn spans_and_hold(text: &str) -> (Vec<Span>, usize) {
    let mut spans = Vec::new();
    let mut from = 0;
    loop {
        let start = match check::next_call(text, from, OPENER, true) {
            Prose::Call(start) => start,
            Prose::End { hold } => return (spans, hold),
        };
        let body = start + OPENER.len();
        let bytes = &text.as_bytes()[body..];
        // The fence is searched for from the first byte after the object that is not
        // whitespace, or from the byte that breaks the JSON.
        let search_from = match object_extent(bytes) {
            Ok(end) => body + end + bytes[end..].iter().take_while(|b| b" \t\n\r".contains(b)).count(),
            Err(at) => body + at,
        };
        let Some(fence) = text[search_from..].find(FENCE) else {
            spans.push(Span { start, end: None });
            return (spans, text.len() - start);
        };
        let end = search_from + fence + FENCE.len();
        spans.push(Span { start, end: Some(end) });
        from = end;
    }
}

/// The calls of `text`, in order (an unclosed one is the last).
pub(super) fn spans(text: &str) -> Vec<Span> {
    spans_and_hold(text).0
}

/// The most a parser may hold back after reading `fed`: the unclosed call, or the end of
/// the prose that could begin a delimiter (or an opener whose code span is not decided).
pub(super) fn held(fed: &str) -> usize {
    spans_and_hold(fed).1
}

/// Where the JSON of a call's body (what follows the opener) stops being a valid
/// beginning of an object, if it does: the offset of the first byte that cannot continue
/// it (its length when it ends first).
pub(super) fn json_break(body: &str) -> Option<usize> {
    object_extent(body.as_bytes()).err()
}

/// Where the call's object ends (after whitespace and the object), or `Err` with the
/// offset of the first byte that cannot continue it (the length when the text ends first).
pub(in crate::text_tools) fn object_extent(bytes: &[u8]) -> Result<usize, usize> {
    let mut reader = Reader { bytes, at: 0 };
    reader.whitespace();
    if reader.peek() != Some(b'{') {
        return Err(reader.at);
    }
    reader.value(0)?;
    Ok(reader.at)
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn whitespace(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    fn eat(&mut self, byte: u8) -> Result<(), usize> {
        if self.peek() == Some(byte) {
            self.at += 1;
            Ok(())
        } else {
            Err(self.at)
        }
    }

    fn eat_digits(&mut self) -> Result<(), usize> {
        if !self.peek().is_some_and(|b| b.is_ascii_digit()) {
            return Err(self.at);
        }
        while self.peek().is_some_and(|b| b.is_ascii_digit()) {
            self.at += 1;
        }
        Ok(())
    }

    /// A value inside `open` arrays and objects (the call's object is one level more
    /// than the arguments' bound).
    fn value(&mut self, open: usize) -> Result<(), usize> {
        match self.peek() {
            Some(b'{' | b'[') if open > MAX_DEPTH => Err(self.at),
            Some(b'{') => self.container(open + 1, b'}', true),
            Some(b'[') => self.container(open + 1, b']', false),
            Some(b'"') => self.string(),
            Some(b't') => b"true".iter().try_for_each(|&b| self.eat(b)),
            Some(b'f') => b"false".iter().try_for_each(|&b| self.eat(b)),
            Some(b'n') => b"null".iter().try_for_each(|&b| self.eat(b)),
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => Err(self.at),
        }
    }

    fn container(&mut self, open: usize, close: u8, members: bool) -> Result<(), usize> {
        self.at += 1;
        self.whitespace();
        if self.peek() == Some(close) {
            self.at += 1;
            return Ok(());
        }
        loop {
            if members {
                self.string()?;
                self.whitespace();
                self.eat(b':')?;
                self.whitespace();
            }
            self.value(open)?;
            self.whitespace();
            if self.peek() == Some(close) {
                self.at += 1;
                return Ok(());
            }
            self.eat(b',')?;
            self.whitespace();
        }
    }

    fn string(&mut self) -> Result<(), usize> {
        self.eat(b'"')?;
        loop {
            match self.peek() {
                Some(b'"') => {
                    self.at += 1;
                    return Ok(());
                }
                Some(b'\\') => {
                    self.at += 1;
                    match self.peek() {
                        Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => self.at += 1,
                        Some(b'u') => {
                            self.at += 1;
                            for _ in 0..4 {
                                if !self.peek().is_some_and(|b| b.is_ascii_hexdigit()) {
                                    return Err(self.at);
                                }
                                self.at += 1;
                            }
                        }
                        _ => return Err(self.at),
                    }
                }
                Some(byte) if byte >= 0x20 => self.at += 1,
                _ => return Err(self.at),
            }
        }
    }

    fn number(&mut self) -> Result<(), usize> {
        if self.peek() == Some(b'-') {
            self.at += 1;
        }
        if self.peek() == Some(b'0') {
            self.at += 1;
        } else {
            self.eat_digits()?;
        }
        if self.peek() == Some(b'.') {
            self.at += 1;
            self.eat_digits()?;
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.at += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.at += 1;
            }
            self.eat_digits()?;
        }
        Ok(())
    }
}
