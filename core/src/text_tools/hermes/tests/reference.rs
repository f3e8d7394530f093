//! A reference reading of where calls begin and end, written apart from the parser: the
//! whole text at once, over the json protocol's recursive-descent JSON reader. The
//! property tests hold the parser's spans and held-back bytes to it.

use super::super::{CLOSER, OPENER};
use crate::text_tools::json::tests::reference::object_extent;
use crate::text_tools::partial_suffix;

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

/// The calls of `text`, in order (an unclosed one is the last).
pub(super) fn spans(text: &str) -> Vec<Span> {
    let mut spans = Vec::new();
    let mut from = 0;
    while let Some(found) = text[from..].find(OPENER) {
        let start = from + found;
        let body = start + OPENER.len();
        let bytes = &text.as_bytes()[body..];
        let blank = whitespace(bytes);
        if blank == bytes.len() {
            spans.push(Span { start, end: None });
            break;
        }
        if bytes[blank] != b'{' {
            // A mention of the tag: prose, read on after the whitespace.
            from = body + blank;
            continue;
        }
        let search_from = match object_extent(bytes) {
            Ok(end) => body + end + whitespace(&bytes[end..]),
            Err(at) => body + at,
        };
        let Some(close) = text[search_from..].find(CLOSER) else {
            spans.push(Span { start, end: None });
            break;
        };
        let end = search_from + close + CLOSER.len();
        spans.push(Span { start, end: Some(end) });
        from = end;
    }
    spans
}

/// The most a parser may hold back after reading `fed`: the unclosed call, or the end of
/// the prose that could begin the opener.
pub(super) fn held(fed: &str) -> usize {
    match spans(fed).last() {
        Some(Span { start, end: None }) => fed.len() - start,
        Some(Span { end: Some(end), .. }) => partial_suffix(&fed[*end..], OPENER),
        None => partial_suffix(fed, OPENER),
    }
}
