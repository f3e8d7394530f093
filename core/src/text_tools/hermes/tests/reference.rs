//! A reference reading of where calls begin and end, written apart from the parser: the
//! whole text at once, over the shared reference reading of the prose's mention rules
//! ([`next_call`]) and the json protocol's recursive-descent JSON reader. The property
//! tests hold the parser's spans and held-back bytes to it.

use super::super::{CLOSER, OPENER};
use crate::text_tools::check::{next_call, Prose};
use crate::text_tools::json::tests::reference::object_extent;

/// A call's span in a text: where it begins and, when its closing tag is in the text,
/// where it ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Span {
    pub(super) start: usize,
    pub(super) end: Option<usize>,
}

fn whitespace(bytes: &[u8]) -> usize {
    bytes.iter().take_while(|b| b" \t\n\r".contains(b)).count()
}

/// The calls of `text`, in order (an unclosed one is the last), and, when none is left
/// open, how much of the prose at the end a parser may hold back.
fn read(text: &str) -> (Vec<Span>, usize) {
    let mut spans = Vec::new();
    let mut from = 0;
    loop {
        let start = match next_call(text, from, OPENER, false) {
            Prose::Call(start) => start,
            Prose::End { hold } => return (spans, hold),
        };
        let body = start + OPENER.len();
        let bytes = &text.as_bytes()[body..];
        let blank = whitespace(bytes);
        if blank == bytes.len() {
            spans.push(Span { start, end: None });
            return (spans, text.len() - start);
        }
        if bytes[blank] != b'{' {
            // A mention of the tag: prose, read on (outside code) after the whitespace.
            from = body + blank;
            continue;
        }
        let search_from = match object_extent(bytes) {
            Ok(end) => body + end + whitespace(&bytes[end..]),
            Err(at) => body + at,
        };
        let Some(close) = text[search_from..].find(CLOSER) else {
            spans.push(Span { start, end: None });
            return (spans, text.len() - start);
        };
        let end = search_from + close + CLOSER.len();
        spans.push(Span { start, end: Some(end) });
        from = end;
    }
}

/// The calls of `text`, in order (an unclosed one is the last).
pub(super) fn spans(text: &str) -> Vec<Span> {
    read(text).0
}

/// The most a parser may hold back after reading `fed`: the unclosed call, or what the
/// prose after the last call may hold (see [`next_call`]).
pub(super) fn held(fed: &str) -> usize {
    read(fed).1
}
