//! The SSE and NDJSON decoders, through the public API only.

use std::path::{Path, PathBuf};

use omni_protocol::dialect::*;
use proptest::prelude::*;

const MAX: usize = DEFAULT_MAX_EVENT_BYTES;

/// A frame that outlives the callback.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Owned {
    Event { event: String, data: String, id: Option<String> },
    Comment(String),
    Done,
}

fn own(frame: Frame<'_>) -> Owned {
    match frame {
        Frame::Event { event, data, id } => {
            Owned::Event { event: event.into(), data: data.into(), id: id.map(Into::into) }
        }
        Frame::Comment(text) => Owned::Comment(text.into()),
        Frame::Done => Owned::Done,
    }
}

fn ev(event: &str, data: &str, id: Option<&str>) -> Owned {
    Owned::Event { event: event.into(), data: data.into(), id: id.map(Into::into) }
}

fn msg(data: &str) -> Owned {
    ev("", data, None)
}

fn comment(text: &str) -> Owned {
    Owned::Comment(text.into())
}

type Outcome = (Vec<Owned>, Result<StreamEnd, FramingError>);

/// Feeds `chunks` in order then finishes; stops at the first error.
fn run(mut decoder: FrameDecoder, chunks: &[&[u8]]) -> Outcome {
    let mut frames = Vec::new();
    for chunk in chunks {
        if let Err(e) = decoder.feed(chunk, |f| frames.push(own(f))) {
            return (frames, Err(e));
        }
    }
    let end = decoder.finish(|f| frames.push(own(f)));
    (frames, end)
}

fn sse_with(max: usize, chunks: &[&[u8]]) -> Outcome {
    run(FrameDecoder::with_max_event_bytes(Framing::Sse, max), chunks)
}

fn sse(chunks: &[&[u8]]) -> Outcome {
    sse_with(MAX, chunks)
}

fn ndjson_with(max: usize, chunks: &[&[u8]]) -> Outcome {
    run(FrameDecoder::with_max_event_bytes(Framing::Ndjson, max), chunks)
}

fn ndjson(chunks: &[&[u8]]) -> Outcome {
    ndjson_with(MAX, chunks)
}

/// The outcome of feeding `body` in pieces cut at `cuts` (sorted, deduplicated).
fn split_run(framing: Framing, max: usize, body: &[u8], cuts: &[usize]) -> Outcome {
    let mut pieces = Vec::new();
    let mut start = 0;
    for &cut in cuts {
        pieces.push(&body[start..cut]);
        start = cut;
    }
    pieces.push(&body[start..]);
    run(FrameDecoder::with_max_event_bytes(framing, max), &pieces)
}

fn byte_by_byte(framing: Framing, max: usize, body: &[u8]) -> Outcome {
    let cuts: Vec<usize> = (1..body.len()).collect();
    split_run(framing, max, body, &cuts)
}

fn whole(framing: Framing, max: usize, body: &[u8]) -> Outcome {
    split_run(framing, max, body, &[])
}

// ---------------------------------------------------------------- SSE: line endings

#[test]
fn sse_lf_ends_lines() {
    assert_eq!(sse(&[b"data: a\n\ndata: b\n\n"]), (vec![msg("a"), msg("b")], Ok(StreamEnd::Clean)));
}

#[test]
fn sse_cr_ends_lines() {
    assert_eq!(sse(&[b"data: a\r\rdata: b\r\r"]), (vec![msg("a"), msg("b")], Ok(StreamEnd::Clean)));
}

#[test]
fn sse_crlf_ends_lines() {
    assert_eq!(sse(&[b"data: a\r\n\r\ndata: b\r\n\r\n"]), (vec![msg("a"), msg("b")], Ok(StreamEnd::Clean)));
}

#[test]
fn sse_mixed_line_endings() {
    assert_eq!(sse(&[b"data: a\rdata: b\ndata: c\r\n\n"]), (vec![msg("a\nb\nc")], Ok(StreamEnd::Clean)));
}

#[test]
fn sse_crlf_split_across_chunks_is_one_line_end() {
    // Were the LF a second line end, it would be a blank line dispatching "a" alone.
    let out = sse(&[b"data: a\r", b"\ndata: b\r\n\r\n"]);
    assert_eq!(out, (vec![msg("a\nb")], Ok(StreamEnd::Clean)));
}

#[test]
fn sse_lone_cr_at_chunk_end_waits_for_next_byte() {
    let mut d = SseDecoder::new(MAX);
    let mut frames = Vec::new();
    d.feed(b"data: a\r", |f| frames.push(own(f))).unwrap();
    assert!(frames.is_empty());
    // The next byte is not an LF: the CR was a line end on its own, and this CR too.
    d.feed(b"\rdata: b\r", |f| frames.push(own(f))).unwrap();
    assert_eq!(frames, vec![msg("a")]);
    d.feed(b"", |f| frames.push(own(f))).unwrap();
    d.feed(b"\n", |f| frames.push(own(f))).unwrap();
    assert_eq!(frames, vec![msg("a")], "an LF after a chunk-final CR (even after an empty chunk) is not a line");
    d.feed(b"\r", |f| frames.push(own(f))).unwrap();
    assert_eq!(frames, vec![msg("a"), msg("b")]);
    assert_eq!(d.finish(|f| frames.push(own(f))), Ok(StreamEnd::Clean));
}

#[test]
fn sse_cr_cr_lf_is_two_line_ends() {
    // "\r\r\n" = CR, then CRLF: a line end and a blank line.
    assert_eq!(sse(&[b"data: a\r\r\ndata: b\n\n"]), (vec![msg("a"), msg("b")], Ok(StreamEnd::Clean)));
}

// ---------------------------------------------------------------- SSE: BOM

#[test]
fn sse_bom_is_skipped_once() {
    assert_eq!(sse(&[b"\xEF\xBB\xBFdata: a\n\n"]), (vec![msg("a")], Ok(StreamEnd::Clean)));
    // A second BOM is content: the field name is "\u{FEFF}data", unknown, so ignored.
    assert_eq!(sse(&[b"\xEF\xBB\xBF\xEF\xBB\xBFdata: a\n\n"]), (vec![], Ok(StreamEnd::Clean)));
    // Not at the start of the stream: content too.
    assert_eq!(sse(&[b"data: a\n\n\xEF\xBB\xBFdata: b\n\n"]), (vec![msg("a")], Ok(StreamEnd::Clean)));
}

#[test]
fn sse_bom_split_across_chunks() {
    let out = sse(&[b"\xEF", b"\xBB", b"\xBF", b"data: a\n\n"]);
    assert_eq!(out, (vec![msg("a")], Ok(StreamEnd::Clean)));
    let out = sse(&[b"\xEF\xBB", b"\xBFdata: a\n\n"]);
    assert_eq!(out, (vec![msg("a")], Ok(StreamEnd::Clean)));
    let out = sse(&[b"", b"\xEF", b"", b"\xBB\xBF:x\n"]);
    assert_eq!(out, (vec![comment("x")], Ok(StreamEnd::Clean)));
}

#[test]
fn sse_bom_lookalike_bytes_are_kept() {
    // Two BOM bytes then something else: the bytes belong to the first line.
    let out = sse(&[b"\xEF\xBB", b"\n:x\n"]);
    assert_eq!(out, (vec![comment("x")], Ok(StreamEnd::Cut)), "the first line was a (nameless) field");
    // A body that stops inside a would-be BOM still held bytes: a cut.
    assert_eq!(sse(&[b"\xEF\xBB"]), (vec![], Ok(StreamEnd::Cut)));
}

// ---------------------------------------------------------------- SSE: fields

#[test]
fn sse_comments_are_frames_and_do_not_touch_the_event() {
    let out = sse(&[b": ping\n:\ndata: a\n:mid\ndata: b\n\n"]);
    assert_eq!(out, (vec![comment(" ping"), comment(""), comment("mid"), msg("a\nb")], Ok(StreamEnd::Clean)));
}

#[test]
fn sse_one_space_after_colon_is_removed() {
    let out = sse(&[b"data:a\n\ndata: a\n\ndata:  two spaces\n\ndata: a: b\n\ndata:\tx\n\n"]);
    let expected = vec![msg("a"), msg("a"), msg(" two spaces"), msg("a: b"), msg("\tx")];
    assert_eq!(out, (expected, Ok(StreamEnd::Clean)));
}

#[test]
fn sse_line_without_colon_is_a_field_with_empty_value() {
    // "data" alone appends an empty line: the event is dispatched, with empty data.
    assert_eq!(sse(&[b"data\n\n"]), (vec![msg("")], Ok(StreamEnd::Clean)));
    assert_eq!(sse(&[b"data\ndata\n\n"]), (vec![msg("\n")], Ok(StreamEnd::Clean)));
    assert_eq!(sse(&[b"event\ndata: x\n\n"]), (vec![msg("x")], Ok(StreamEnd::Clean)));
}

#[test]
fn sse_multi_line_data_is_joined_with_lf() {
    let out = sse(&[b"data: first\ndata:\ndata: third\n\n"]);
    assert_eq!(out, (vec![msg("first\n\nthird")], Ok(StreamEnd::Clean)));
}

#[test]
fn sse_event_field_sets_the_type_and_resets_after_dispatch() {
    let out = sse(&[b"event: add\ndata: 1\n\ndata: 2\n\nevent: a\nevent: b\ndata: 3\n\n"]);
    assert_eq!(out, (vec![ev("add", "1", None), msg("2"), ev("b", "3", None)], Ok(StreamEnd::Clean)));
}

#[test]
fn sse_id_field_sets_the_id_and_it_persists() {
    let out = sse(&[b"id: 1\ndata: a\n\ndata: b\n\nid: 2\ndata: c\n\n"]);
    assert_eq!(
        out,
        (vec![ev("", "a", Some("1")), ev("", "b", Some("1")), ev("", "c", Some("2"))], Ok(StreamEnd::Clean))
    );
}

#[test]
fn sse_id_persists_across_events_without_data() {
    // The id is kept even when its own event has no data (and so is not dispatched).
    let mut d = SseDecoder::new(MAX);
    let mut frames = Vec::new();
    d.feed(b"id: 7\n\ndata: x\n\n", |f| frames.push(own(f))).unwrap();
    assert_eq!(frames, vec![ev("", "x", Some("7"))]);
    assert_eq!(d.last_event_id(), Some("7"));
}

#[test]
fn sse_id_with_nul_is_ignored_and_empty_id_resets() {
    let out = sse(&[b"id: 1\ndata: a\n\nid: 2\x003\ndata: b\n\nid\ndata: c\n\n"]);
    assert_eq!(out, (vec![ev("", "a", Some("1")), ev("", "b", Some("1")), msg("c")], Ok(StreamEnd::Clean)));
}

#[test]
fn sse_retry_field_accepts_only_ascii_digits() {
    let mut d = SseDecoder::new(MAX);
    let mut frames = Vec::new();
    assert_eq!(d.retry(), None);
    d.feed(b"retry: 3000\n\n", |f| frames.push(own(f))).unwrap();
    assert_eq!(d.retry(), Some(3000));
    for bogus in
        [&b"retry: 12x\n\n"[..], b"retry: -1\n\n", b"retry:  5\n\n", b"retry:\n\n", b"retry\n\n", b"retry: 1.5\n\n"]
    {
        d.feed(bogus, |f| frames.push(own(f))).unwrap();
        assert_eq!(d.retry(), Some(3000), "{:?}", String::from_utf8_lossy(bogus));
    }
    d.feed(b"retry:0042\n\n", |f| frames.push(own(f))).unwrap();
    assert_eq!(d.retry(), Some(42));
    assert!(frames.is_empty(), "retry alone dispatches nothing");
}

#[test]
fn sse_unknown_fields_are_ignored_and_names_are_case_sensitive() {
    let out = sse(&[b"foo: bar\nData: x\ndata : y\nEVENT: e\ndata: z\n\n"]);
    assert_eq!(out, (vec![msg("z")], Ok(StreamEnd::Clean)));
}

#[test]
fn sse_blank_line_without_data_dispatches_nothing_and_resets_the_type() {
    let out = sse(&[b"event: ping\n\n\n\nid: 1\n\nevent: a\n\ndata: x\n\n"]);
    assert_eq!(out, (vec![ev("", "x", Some("1"))], Ok(StreamEnd::Clean)));
}

#[test]
fn sse_done_marker() {
    assert_eq!(sse(&[b"data: [DONE]\n\n"]), (vec![Owned::Done], Ok(StreamEnd::Clean)));
    assert_eq!(sse(&[b"data:[DONE]\r\n\r\n"]), (vec![Owned::Done], Ok(StreamEnd::Clean)));
    // Only exactly "[DONE]", after joining.
    let out = sse(&[b"data: [DONE] \n\ndata: [DONE]\ndata: x\n\ndata: [done]\n\n"]);
    assert_eq!(out, (vec![msg("[DONE] "), msg("[DONE]\nx"), msg("[done]")], Ok(StreamEnd::Clean)));
}

// ---------------------------------------------------------------- SSE: size cap

#[test]
fn sse_event_at_the_limit_is_accepted() {
    // "data: " + 10 bytes = a 16-byte line, the limit.
    assert_eq!(sse_with(16, &[b"data: 0123456789\n\n"]), (vec![msg("0123456789")], Ok(StreamEnd::Clean)));
}

#[test]
fn sse_oversized_event_fails_and_the_decoder_stays_failed() {
    let limit = 16;
    let mut d = SseDecoder::new(limit);
    let mut frames = Vec::new();
    d.feed(b"data: ok\n\n", |f| frames.push(own(f))).unwrap();
    let err = d.feed(b"data: 0123456789ab\n\n", |f| frames.push(own(f)));
    assert_eq!(err, Err(FramingError::EventTooLarge { limit }));
    assert_eq!(d.feed(b"data: ok\n\n", |f| frames.push(own(f))), Err(FramingError::EventTooLarge { limit }));
    assert_eq!(d.finish(|f| frames.push(own(f))), Err(FramingError::EventTooLarge { limit }));
    assert_eq!(frames, vec![msg("ok")]);
}

#[test]
fn sse_oversized_unterminated_line_fails_before_its_end() {
    // The line never ends; the decoder refuses it as soon as it outgrows the limit.
    let mut d = SseDecoder::new(32);
    let chunk = [b'x'; 20];
    assert_eq!(d.feed(b"data: ", |_| {}), Ok(()));
    assert_eq!(d.feed(&chunk, |_| {}), Ok(()));
    assert_eq!(d.feed(&chunk, |_| {}), Err(FramingError::EventTooLarge { limit: 32 }));
}

#[test]
fn sse_accumulated_data_counts_toward_the_limit() {
    // Each line fits; together they do not.
    let out = sse_with(16, &[b"data: 01234\ndata: 56789\ndata: abcde\n\n"]);
    assert_eq!(out, (vec![], Err(FramingError::EventTooLarge { limit: 16 })));
    // Dispatching frees the room again.
    let out = sse_with(16, &[b"data: 01234\n\ndata: 56789\n\ndata: abcde\n\n"]);
    assert_eq!(out, (vec![msg("01234"), msg("56789"), msg("abcde")], Ok(StreamEnd::Clean)));
}

// ---------------------------------------------------------------- SSE: UTF-8

#[test]
fn sse_multibyte_characters_split_across_chunks() {
    let body = "event: é\ndata: ü€😀 日本\n: ☕\n\n".as_bytes();
    let expected = (vec![comment(" ☕"), ev("é", "ü€😀 日本", None)], Ok(StreamEnd::Clean));
    assert_eq!(whole(Framing::Sse, MAX, body), expected);
    assert_eq!(byte_by_byte(Framing::Sse, MAX, body), expected);
    // Cut inside the 4-byte emoji at each position.
    let emoji = body.iter().position(|&b| b == 0xF0).unwrap();
    for cut in emoji + 1..emoji + 4 {
        assert_eq!(split_run(Framing::Sse, MAX, body, &[cut]), expected);
    }
}

#[test]
fn sse_invalid_utf8_becomes_replacement_characters() {
    let out = sse(&[b"event: e\xFF\ndata: a\xC3\ndata: \xE2\x82b\x80\n:\xFE\n\n"]);
    let expected = vec![comment("\u{FFFD}"), ev("e\u{FFFD}", "a\u{FFFD}\n\u{FFFD}b\u{FFFD}", None)];
    assert_eq!(out, (expected, Ok(StreamEnd::Clean)));
}

// ---------------------------------------------------------------- SSE: end of body

#[test]
fn sse_finish_clean_between_events() {
    assert_eq!(sse(&[]), (vec![], Ok(StreamEnd::Clean)));
    assert_eq!(sse(&[b"data: a\n\n"]), (vec![msg("a")], Ok(StreamEnd::Clean)));
    assert_eq!(sse(&[b"data: a\n\n: ping\n"]), (vec![msg("a"), comment(" ping")], Ok(StreamEnd::Clean)));
    assert_eq!(sse(&[b"data: a\r\r"]), (vec![msg("a")], Ok(StreamEnd::Clean)));
}

#[test]
fn sse_finish_cut_delivers_the_partial_event() {
    // An unterminated last line counts as a line, and the event is dispatched.
    assert_eq!(sse(&[b"data: a\ndata: b"]), (vec![msg("a\nb")], Ok(StreamEnd::Cut)));
    // Terminated line but no blank line.
    assert_eq!(sse(&[b"event: x\ndata: a\n"]), (vec![ev("x", "a", None)], Ok(StreamEnd::Cut)));
    assert_eq!(sse(&[b"data: [DONE]"]), (vec![Owned::Done], Ok(StreamEnd::Cut)));
    // Inside an event without data: nothing to deliver, still a cut.
    assert_eq!(sse(&[b"data: a\n\nevent: x\n"]), (vec![msg("a")], Ok(StreamEnd::Cut)));
    // An unterminated comment.
    assert_eq!(sse(&[b": ping"]), (vec![comment(" ping")], Ok(StreamEnd::Cut)));
}

#[test]
fn frame_decoder_dispatches_to_both_framings() {
    let mut d = FrameDecoder::new(Framing::Sse);
    let mut frames = Vec::new();
    d.feed(b"data: x\n\n", |f| frames.push(own(f))).unwrap();
    let mut d = FrameDecoder::new(Framing::Ndjson);
    d.feed(b"{\"a\":1}\n", |f| frames.push(own(f))).unwrap();
    assert_eq!(frames, vec![msg("x"), msg("{\"a\":1}")]);
}

// ---------------------------------------------------------------- NDJSON

#[test]
fn ndjson_lf_lines() {
    let out = ndjson(&[b"{\"a\":1}\n{\"b\":2}\n"]);
    assert_eq!(out, (vec![msg("{\"a\":1}"), msg("{\"b\":2}")], Ok(StreamEnd::Clean)));
}

#[test]
fn ndjson_crlf_lines() {
    let out = ndjson(&[b"{\"a\":1}\r\n{\"b\":2}\r\n"]);
    assert_eq!(out, (vec![msg("{\"a\":1}"), msg("{\"b\":2}")], Ok(StreamEnd::Clean)));
}

#[test]
fn ndjson_crlf_split_across_chunks() {
    let out = ndjson(&[b"{\"a\":1}\r", b"\n{\"b\":2}\r", b"\n"]);
    assert_eq!(out, (vec![msg("{\"a\":1}"), msg("{\"b\":2}")], Ok(StreamEnd::Clean)));
}

#[test]
fn ndjson_lone_cr_does_not_end_a_line() {
    assert_eq!(ndjson(&[b"{}\r{}\n"]), (vec![msg("{}\r{}")], Ok(StreamEnd::Clean)));
}

#[test]
fn ndjson_blank_lines_are_keep_alives() {
    let out = ndjson(&[b"\n  \n\t\r\n{}\n \r\n"]);
    assert_eq!(out, (vec![comment(""), comment(""), comment(""), msg("{}"), comment("")], Ok(StreamEnd::Clean)));
}

#[test]
fn ndjson_line_split_across_chunks() {
    let out = ndjson(&[b"{\"a\"", b":", b"1}\n{", b"}\n"]);
    assert_eq!(out, (vec![msg("{\"a\":1}"), msg("{}")], Ok(StreamEnd::Clean)));
}

#[test]
fn ndjson_bom_is_skipped_once() {
    assert_eq!(ndjson(&[b"\xEF", b"\xBB\xBF{}\n"]), (vec![msg("{}")], Ok(StreamEnd::Clean)));
}

#[test]
fn ndjson_multibyte_characters_split_across_chunks() {
    let body = "{\"t\":\"ü€😀\"}\n".as_bytes();
    let expected = (vec![msg("{\"t\":\"ü€😀\"}")], Ok(StreamEnd::Clean));
    assert_eq!(whole(Framing::Ndjson, MAX, body), expected);
    assert_eq!(byte_by_byte(Framing::Ndjson, MAX, body), expected);
}

#[test]
fn ndjson_invalid_utf8_becomes_replacement_characters() {
    assert_eq!(ndjson(&[b"{\"t\":\"a\xFFb\"}\n"]), (vec![msg("{\"t\":\"a\u{FFFD}b\"}")], Ok(StreamEnd::Clean)));
}

#[test]
fn ndjson_oversized_line_fails_and_the_decoder_stays_failed() {
    let limit = 8;
    let mut d = NdjsonDecoder::new(limit);
    let mut frames = Vec::new();
    d.feed(b"{\"a\":1}\n", |f| frames.push(own(f))).unwrap();
    assert_eq!(d.feed(b"{\"a\":", |f| frames.push(own(f))), Ok(()));
    assert_eq!(d.feed(b"12345}\n", |f| frames.push(own(f))), Err(FramingError::EventTooLarge { limit }));
    assert_eq!(d.feed(b"{}\n", |f| frames.push(own(f))), Err(FramingError::EventTooLarge { limit }));
    assert_eq!(d.finish(|f| frames.push(own(f))), Err(FramingError::EventTooLarge { limit }));
    assert_eq!(frames, vec![msg("{\"a\":1}")]);
    assert_eq!(ndjson_with(limit, &[b"{\"a\":12345}\n"]), (vec![], Err(FramingError::EventTooLarge { limit })));
}

#[test]
fn ndjson_finish_clean_and_cut() {
    assert_eq!(ndjson(&[]), (vec![], Ok(StreamEnd::Clean)));
    assert_eq!(ndjson(&[b"{}\n"]), (vec![msg("{}")], Ok(StreamEnd::Clean)));
    // A last line without a newline is delivered and reported as a cut.
    assert_eq!(ndjson(&[b"{}\n{\"done\":true}"]), (vec![msg("{}"), msg("{\"done\":true}")], Ok(StreamEnd::Cut)));
    assert_eq!(ndjson(&[b"{}\n{\"done\":true}\r"]), (vec![msg("{}"), msg("{\"done\":true}")], Ok(StreamEnd::Cut)));
}

// ---------------------------------------------------------------- chunking invariance

/// One generated SSE line (without its line ending).
fn sse_line() -> impl Strategy<Value = Vec<u8>> {
    let text = "[a-z0-9 :\\[\\]{}\"é€😀日\u{FEFF}]{0,12}";
    prop_oneof![
        3 => text.prop_map(|t| format!("data: {t}").into_bytes()),
        1 => text.prop_map(|t| format!("data:{t}").into_bytes()),
        1 => Just(b"data".to_vec()),
        1 => Just(b"data: [DONE]".to_vec()),
        1 => "[a-z_]{0,8}".prop_map(|t| format!("event: {t}").into_bytes()),
        1 => "[0-9a-z]{0,4}".prop_map(|t| format!("id: {t}").into_bytes()),
        1 => "[0-9x]{0,4}".prop_map(|t| format!("retry: {t}").into_bytes()),
        1 => text.prop_map(|t| format!(":{t}").into_bytes()),
        1 => text.prop_map(|t| format!("x-{t}").into_bytes()),
        3 => Just(Vec::new()),
        // Stray bytes: invalid UTF-8, part of a BOM, NUL.
        1 => prop::collection::vec(prop_oneof![Just(0xFFu8), Just(0xEF), Just(0xBB), Just(0xC3), Just(0), Just(b'a')], 1..4)
            .prop_map(|mut b| { let mut l = b"data: ".to_vec(); l.append(&mut b); l }),
    ]
}

fn line_end() -> impl Strategy<Value = &'static [u8]> {
    prop_oneof![Just(&b"\n"[..]), Just(&b"\r"[..]), Just(&b"\r\n"[..])]
}

/// A generated SSE body: optional BOM, lines with random endings, maybe no final ending.
fn sse_body() -> impl Strategy<Value = Vec<u8>> {
    (any::<bool>(), prop::collection::vec((sse_line(), line_end()), 0..24), any::<bool>()).prop_map(
        |(bom, lines, terminated)| {
            let mut body = if bom { b"\xEF\xBB\xBF".to_vec() } else { Vec::new() };
            let count = lines.len();
            for (i, (line, end)) in lines.into_iter().enumerate() {
                body.extend_from_slice(&line);
                if terminated || i + 1 < count {
                    body.extend_from_slice(end);
                }
            }
            body
        },
    )
}

fn ndjson_body() -> impl Strategy<Value = Vec<u8>> {
    let line = prop_oneof![
        3 => "\\{\"[a-zé😀]{0,6}\":[0-9]{1,3}\\}".prop_map(String::into_bytes),
        1 => "[ \t]{0,3}".prop_map(String::into_bytes),
        1 => Just(b"{\"a\xFF\":1}".to_vec()),
    ];
    let end = prop_oneof![Just(&b"\n"[..]), Just(&b"\r\n"[..])];
    (prop::collection::vec((line, end), 0..16), any::<bool>()).prop_map(|(lines, terminated)| {
        let mut body = Vec::new();
        let count = lines.len();
        for (i, (line, end)) in lines.into_iter().enumerate() {
            body.extend_from_slice(&line);
            if terminated || i + 1 < count {
                body.extend_from_slice(end);
            }
        }
        body
    })
}

/// A body, sorted cut points into it, and a limit that is sometimes small enough to hit.
fn split_case(body: impl Strategy<Value = Vec<u8>>) -> impl Strategy<Value = (Vec<u8>, Vec<usize>, usize)> {
    (body, prop_oneof![Just(MAX), 8usize..64]).prop_flat_map(|(body, max)| {
        let len = body.len();
        (Just(body), prop::collection::btree_set(0..=len, 0..12), Just(max))
            .prop_map(|(body, cuts, max)| (body, cuts.into_iter().collect::<Vec<_>>(), max))
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn sse_any_split_gives_the_same_frames((body, cuts, max) in split_case(sse_body())) {
        let expected = whole(Framing::Sse, max, &body);
        prop_assert_eq!(&split_run(Framing::Sse, max, &body, &cuts), &expected);
        prop_assert_eq!(&byte_by_byte(Framing::Sse, max, &body), &expected);
    }

    #[test]
    fn ndjson_any_split_gives_the_same_frames((body, cuts, max) in split_case(ndjson_body())) {
        let expected = whole(Framing::Ndjson, max, &body);
        prop_assert_eq!(&split_run(Framing::Ndjson, max, &body, &cuts), &expected);
        prop_assert_eq!(&byte_by_byte(Framing::Ndjson, max, &body), &expected);
    }

    #[test]
    fn sse_arbitrary_bytes_never_panic(body in prop::collection::vec(any::<u8>(), 0..256), max in 0usize..64) {
        let expected = whole(Framing::Sse, max, &body);
        prop_assert_eq!(byte_by_byte(Framing::Sse, max, &body), expected);
    }
}

// ---------------------------------------------------------------- real corpus

fn upstream_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures/upstream")
}

fn files_with_extension(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            files_with_extension(&path, ext, out);
        } else if path.extension().is_some_and(|e| e == ext) {
            out.push(path);
        }
    }
}

// Reading test fixtures is the test harness's I/O, not the core's.
#[allow(clippy::disallowed_methods)]
fn check_corpus(framing: Framing, ext: &str) {
    let dir = upstream_dir();
    if !dir.is_dir() {
        println!("skipping: no upstream fixtures at {}", dir.display());
        return;
    }
    let mut files = Vec::new();
    files_with_extension(&dir, ext, &mut files);
    files.sort();
    assert!(!files.is_empty(), "no .{ext} files under {}", dir.display());
    for file in files {
        let body = std::fs::read(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let expected = whole(framing, MAX, &body);
        assert!(expected.1.is_ok(), "{}: {:?}", file.display(), expected.1);
        assert!(expected.0.iter().any(|f| matches!(f, Owned::Event { .. })), "{}: no events", file.display());
        assert_eq!(byte_by_byte(framing, MAX, &body), expected, "{}", file.display());
    }
}

#[test]
fn upstream_sse_corpus_byte_by_byte_equals_whole() {
    check_corpus(Framing::Sse, "sse");
}

#[test]
fn upstream_ndjson_corpus_byte_by_byte_equals_whole() {
    check_corpus(Framing::Ndjson, "ndjson");
}
