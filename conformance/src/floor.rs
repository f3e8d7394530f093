//! The decoding pipeline and its floor, shared by the `decode` benchmark and the
//! `profile_decode` example (instruction counts under callgrind).
//!
//! - [`pipeline`]: omni's whole path, bytes in 16 KiB chunks to consumer events and a
//!   response (framing, dialect parsing, accumulation).
//! - [`baseline`]: the least any decoder must do: a memchr scan for event boundaries and a
//!   typed, borrowed serde_json decode of each payload down to the text delta.

use std::borrow::Cow;

use omni_core::{Dialect, StreamDecoder};
use serde::Deserialize;

/// Body chunk size fed to the decoder, as a network read would deliver it.
pub const CHUNK: usize = 16 * 1024;

/// Runs omni's whole decoding path over `body`; returns a count so nothing is optimised away.
#[inline(never)]
pub fn pipeline(body: &[u8], dialect: Dialect) -> usize {
    let mut decoder = StreamDecoder::new(dialect, "bench");
    let mut events = Vec::with_capacity(64);
    let mut count = 0;
    for chunk in body.chunks(CHUNK) {
        decoder.feed(chunk, &mut events);
        count += events.len();
        events.clear();
    }
    decoder.finish(&mut events);
    count + events.len() + decoder.response().message.content.len()
}

// The floor: typed, borrowed payloads down to the text of each delta.
#[derive(Deserialize)]
struct AnthropicEvent<'a> {
    #[serde(borrow)]
    delta: Option<AnthropicDelta<'a>>,
}
#[derive(Deserialize)]
struct AnthropicDelta<'a> {
    #[serde(borrow)]
    text: Option<Cow<'a, str>>,
}
#[derive(Deserialize)]
struct ChatChunk<'a> {
    #[serde(borrow)]
    choices: Vec<ChatChoice<'a>>,
}
#[derive(Deserialize)]
struct ChatChoice<'a> {
    #[serde(borrow)]
    delta: ChatDelta<'a>,
}
#[derive(Deserialize)]
struct ChatDelta<'a> {
    #[serde(borrow)]
    content: Option<Cow<'a, str>>,
}
#[derive(Deserialize)]
struct ResponsesEvent<'a> {
    #[serde(borrow)]
    delta: Option<Cow<'a, str>>,
}
#[derive(Deserialize)]
struct GeminiChunk<'a> {
    #[serde(borrow)]
    candidates: Vec<GeminiCandidate<'a>>,
}
#[derive(Deserialize)]
struct GeminiCandidate<'a> {
    #[serde(borrow)]
    content: GeminiContent<'a>,
}
#[derive(Deserialize)]
struct GeminiContent<'a> {
    #[serde(borrow)]
    parts: Vec<GeminiPart<'a>>,
}
#[derive(Deserialize)]
struct GeminiPart<'a> {
    #[serde(borrow)]
    text: Option<Cow<'a, str>>,
}
#[derive(Deserialize)]
struct OllamaLine<'a> {
    #[serde(borrow)]
    message: OllamaMessage<'a>,
}
#[derive(Deserialize)]
struct OllamaMessage<'a> {
    #[serde(borrow)]
    content: Cow<'a, str>,
}

fn text_len(dialect: Dialect, payload: &str) -> usize {
    let len = |c: Option<Cow<'_, str>>| c.map_or(0, |c| c.len());
    match dialect {
        Dialect::AnthropicMessages => {
            serde_json::from_str::<AnthropicEvent>(payload).ok().and_then(|e| e.delta).map_or(0, |d| len(d.text))
        }
        Dialect::OpenaiCompletions => serde_json::from_str::<ChatChunk>(payload)
            .ok()
            .and_then(|c| c.choices.into_iter().next())
            .map_or(0, |c| len(c.delta.content)),
        Dialect::OpenaiResponses => serde_json::from_str::<ResponsesEvent>(payload).ok().map_or(0, |e| len(e.delta)),
        Dialect::GoogleGemini => serde_json::from_str::<GeminiChunk>(payload)
            .ok()
            .and_then(|c| c.candidates.into_iter().next())
            .map_or(0, |c| c.content.parts.into_iter().map(|p| len(p.text)).sum()),
        Dialect::OllamaChat => serde_json::from_str::<OllamaLine>(payload).ok().map_or(0, |l| l.message.content.len()),
    }
}

/// The floor: event boundaries by memchr, each payload decoded down to its text.
/// Returns the total text length.
#[inline(never)]
pub fn baseline(body: &[u8], dialect: Dialect) -> usize {
    let text = std::str::from_utf8(body).unwrap_or("");
    let mut total = 0;
    if dialect == Dialect::OllamaChat {
        let mut start = 0;
        for end in memchr::memchr_iter(b'\n', body) {
            total += text_len(dialect, text.get(start..end).unwrap_or(""));
            start = end + 1;
        }
        return total;
    }
    let sep: &[u8] = if dialect == Dialect::GoogleGemini { b"\r\n\r\n" } else { b"\n\n" };
    let mut start = 0;
    for end in memchr::memmem::find_iter(body, sep) {
        let event = text.get(start..end).unwrap_or("");
        if let Some(pos) = event.find("data: ") {
            total += text_len(dialect, event.get(pos + 6..).unwrap_or(""));
        }
        start = end + sep.len();
    }
    total
}
