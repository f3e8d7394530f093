//! A response of another format than its dialect's fails at once with a clear error: each
//! dialect's recorded text stream (`conformance/fixtures/<dialect>/text`) read as every
//! other dialect ends in `StreamError::WrongFormat`, naming the dialect expected and
//! quoting the first event, and never as `Incomplete` (which is retried, and says nothing
//! of the cause). The real stream of each dialect is still read as it was.
#![allow(clippy::unwrap_used)]

use omni_conformance::fixtures::fixtures_root;
use omni_protocol::dialect::{decode_body, StreamDecoder};
use omni_protocol::{Dialect, StreamError, StreamEvent};

const DIALECTS: [Dialect; 5] = [
    Dialect::AnthropicMessages,
    Dialect::OpenaiCompletions,
    Dialect::OpenaiResponses,
    Dialect::GoogleGemini,
    Dialect::OllamaChat,
];

fn text_body(dialect: Dialect) -> Vec<u8> {
    let folder = fixtures_root().join(dialect.name()).join("text");
    let file = if dialect == Dialect::OllamaChat { "body.ndjson" } else { "body.sse" };
    std::fs::read(folder.join(file)).unwrap_or_else(|e| panic!("{}: {e}", folder.display()))
}

fn last_error(events: &[StreamEvent]) -> Option<&StreamError> {
    match events.last() {
        Some(StreamEvent::Error { error }) => Some(error),
        _ => None,
    }
}

#[test]
fn every_dialects_stream_read_as_another_is_a_wrong_format() {
    for actual in DIALECTS {
        let body = text_body(actual);
        let (events, _) = decode_body(actual, "m", &body);
        assert!(matches!(events.last(), Some(StreamEvent::Done { .. })), "{actual:?} reads its own: {events:?}");
        for expected in DIALECTS.into_iter().filter(|d| *d != actual) {
            let (events, _) = decode_body(expected, "m", &body);
            match last_error(&events) {
                Some(StreamError::WrongFormat { dialect, first_event, .. }) => {
                    assert_eq!(dialect, expected.name());
                    assert!(!first_event.is_empty() && first_event.len() <= 200, "{first_event:?}");
                }
                other => panic!("{actual:?} read as {expected:?}: {other:?} ({events:?})"),
            }
            assert!(
                !events.iter().any(|e| matches!(e, StreamEvent::TextDelta { .. })),
                "{actual:?} read as {expected:?} gave text"
            );
        }
    }
}

#[test]
fn the_error_names_the_content_type_and_the_fix() {
    let body = text_body(Dialect::OpenaiCompletions);
    let mut decoder = StreamDecoder::new(Dialect::OpenaiResponses, "gpt-5")
        .with_content_type(Some("text/event-stream; charset=utf-8".into()));
    let mut events = Vec::new();
    decoder.feed(&body, &mut events);
    decoder.finish(&mut events);
    let error = last_error(&events).unwrap().to_string();
    assert!(error.contains("not a openai_responses stream"), "{error}");
    assert!(error.contains("content type text/event-stream"), "{error}");
    assert!(error.contains("chat.completion.chunk"), "the first event is quoted: {error}");
    assert!(error.contains("Provider::openai_compatible"), "{error}");
}

/// A long stream of another format fails before its end: after 64 events that gave
/// nothing, not after the whole body.
#[test]
fn a_long_stream_of_another_format_fails_early() {
    let event = "data: {\"object\":\"chat.completion.chunk\",\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\n";
    let mut decoder = StreamDecoder::new(Dialect::OpenaiResponses, "gpt-5");
    let mut events = Vec::new();
    let mut fed = 0;
    while last_error(&events).is_none() && fed < 1_000 {
        decoder.feed(event.as_bytes(), &mut events);
        fed += 1;
    }
    assert_eq!(fed, 64);
    assert!(matches!(last_error(&events), Some(StreamError::WrongFormat { .. })), "{events:?}");
}

/// What is not a wrong format stays what it was: a stream cut before its first event is
/// incomplete (and retried), malformed JSON of the right kind is a decode error, and a
/// stream of keep-alives only says nothing about its format.
#[test]
fn a_cut_or_broken_stream_is_not_called_a_wrong_format() {
    let cut = b"event: message_start\ndata: {\"type\":\"message_start\",\"mess";
    let (events, _) = decode_body(Dialect::AnthropicMessages, "m", cut);
    assert!(matches!(last_error(&events), Some(StreamError::Incomplete)), "{events:?}");
    let broken = b"data: {\"choices\": [\n\n";
    let (events, _) = decode_body(Dialect::OpenaiCompletions, "m", broken);
    assert!(matches!(last_error(&events), Some(StreamError::Decode { .. })), "{events:?}");
    let pings = b": ping\n\n: ping\n\n";
    let (events, _) = decode_body(Dialect::OpenaiResponses, "m", pings);
    assert!(matches!(last_error(&events), Some(StreamError::Incomplete)), "{events:?}");
}

/// An HTML page where a stream was due (a proxy's login or error page with status 200).
#[test]
fn an_html_page_is_a_wrong_format() {
    for dialect in [Dialect::OllamaChat, Dialect::AnthropicMessages] {
        let page = b"<!DOCTYPE html>\n<html><body>Please sign in</body></html>\n";
        let (events, _) = decode_body(dialect, "m", page);
        assert!(matches!(last_error(&events), Some(StreamError::WrongFormat { .. })), "{dialect:?}: {events:?}");
    }
}
