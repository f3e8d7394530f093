//! The decoding pipeline and its floor, shared by the `decode` benchmark and the
//! `profile_decode` example (instruction counts under callgrind).
//!
//! - [`pipeline`]: omni's whole path, bytes in 16 KiB chunks to consumer events and a
//!   response (framing, dialect parsing, accumulation).
//! - [`machine`]: the same bytes through a whole call's `Generate` machine, offline (the
//!   request machine around the decoder, and every event queued for `poll_event`).
//! - [`baseline`]: the least any decoder must do: a memchr scan for event boundaries and a
//!   typed, borrowed serde_json decode of each payload down to the text delta;
//!   [`baseline_tool`] the same down to a tool call's argument fragment.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use std::time::Instant;

use omni_protocol::generate::{Effect, Generate, Input, Report};
use omni_protocol::{dialect::StreamDecoder, Dialect, Model, Provider};
use serde::de::{Deserializer, IgnoredAny, SeqAccess, Visitor};
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

/// Runs `body` through a call's machine: a `Generate` for `dialect`, started offline, fed
/// the response head, then the body in [`CHUNK`]s with its events taken after each (as a
/// driver does), then the body's end. Returns the number of events.
#[inline(never)]
pub fn machine(body: &[u8], dialect: Dialect) -> usize {
    let now = Instant::now();
    let mut config = crate::scenarios::offline_call();
    config.model = Model { dialect, ..config.model };
    config.provider = Provider { dialect, ..config.provider };
    config.max_response_bytes = u64::MAX;
    let mut machine = Generate::new(config, now).expect("a valid call");
    let Some(Effect::SendRequest { id, .. }) = machine.poll_effect() else { panic!("the call sends a request") };
    machine.handle_input(Input::Report(crate::scenarios::stream_head(id)), now).expect("the head is taken");
    let mut count = 0;
    for chunk in body.chunks(CHUNK) {
        machine.handle_input(Input::Report(Report::Body { id, bytes: chunk }), now).expect("the body is taken");
        while let Some(event) = machine.poll_event() {
            std::hint::black_box(&event);
            count += 1;
        }
    }
    machine.handle_input(Input::Report(Report::BodyEnd { id }), now).expect("the end is taken");
    count + std::iter::from_fn(|| machine.poll_event()).count()
}

// The floor: typed, borrowed payloads down to the text of each delta. Text fields are
// `Cow<'a, str>` themselves, with `default` for events without them: serde borrows a
// `Cow` only when the field is exactly that type (an `Option<Cow<str>>` is always
// copied). Arrays are read through `First`, which keeps the first element and skips the
// rest, so the floor allocates nothing, in every dialect alike.
#[derive(Deserialize)]
struct AnthropicEvent<'a> {
    #[serde(borrow)]
    delta: Option<AnthropicDelta<'a>>,
}
#[derive(Deserialize)]
struct AnthropicDelta<'a> {
    #[serde(borrow, default)]
    text: Cow<'a, str>,
}
#[derive(Deserialize)]
struct ChatChunk<'a> {
    #[serde(borrow)]
    choices: First<ChatChoice<'a>>,
}
#[derive(Deserialize)]
struct ChatChoice<'a> {
    #[serde(borrow)]
    delta: ChatDelta<'a>,
}
#[derive(Deserialize)]
struct ChatDelta<'a> {
    #[serde(borrow, default)]
    content: Cow<'a, str>,
}
#[derive(Deserialize)]
struct ResponsesEvent<'a> {
    #[serde(borrow, default)]
    delta: Cow<'a, str>,
}
#[derive(Deserialize)]
struct GeminiChunk<'a> {
    #[serde(borrow)]
    candidates: First<GeminiCandidate<'a>>,
}
#[derive(Deserialize)]
struct GeminiCandidate<'a> {
    #[serde(borrow)]
    content: GeminiContent<'a>,
}
#[derive(Deserialize)]
struct GeminiContent<'a> {
    #[serde(borrow)]
    parts: First<GeminiPart<'a>>,
}
#[derive(Deserialize)]
struct GeminiPart<'a> {
    #[serde(borrow, default)]
    text: Cow<'a, str>,
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

// Tool-call argument fragments, read alike (Chat Completions and Anthropic Messages).
#[derive(Deserialize)]
struct ChatToolChunk<'a> {
    #[serde(borrow)]
    choices: First<ChatToolChoice<'a>>,
}
#[derive(Deserialize)]
struct ChatToolChoice<'a> {
    #[serde(borrow)]
    delta: ChatToolDelta<'a>,
}
#[derive(Deserialize)]
struct ChatToolDelta<'a> {
    #[serde(borrow)]
    tool_calls: Option<First<ChatToolCall<'a>>>,
}
#[derive(Deserialize)]
struct ChatToolCall<'a> {
    #[serde(borrow)]
    function: ChatFunction<'a>,
}
#[derive(Deserialize)]
struct ChatFunction<'a> {
    #[serde(borrow, default)]
    arguments: Cow<'a, str>,
}
#[derive(Deserialize)]
struct AnthropicToolEvent<'a> {
    #[serde(borrow)]
    delta: Option<AnthropicToolDelta<'a>>,
}
#[derive(Deserialize)]
struct AnthropicToolDelta<'a> {
    #[serde(borrow, default)]
    partial_json: Cow<'a, str>,
}

/// The first element of a JSON array, the rest skipped: a typed decode without the
/// allocation of a `Vec`.
struct First<T>(Option<T>);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for First<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct FirstVisitor<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for FirstVisitor<T> {
            type Value = First<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an array")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let first = seq.next_element()?;
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(First(first))
            }
        }
        deserializer.deserialize_seq(FirstVisitor(PhantomData))
    }
}

/// The floor's work on one event's payload: a typed, borrowed decode down to the text
/// of its delta. Returns the text's length (0 for an event without text, or invalid).
pub fn text_len(dialect: Dialect, payload: &str) -> usize {
    match dialect {
        Dialect::AnthropicMessages => {
            serde_json::from_str::<AnthropicEvent>(payload).ok().and_then(|e| e.delta).map_or(0, |d| d.text.len())
        }
        Dialect::OpenaiCompletions => serde_json::from_str::<ChatChunk>(payload)
            .ok()
            .and_then(|c| c.choices.0)
            .map_or(0, |c| c.delta.content.len()),
        Dialect::OpenaiResponses => serde_json::from_str::<ResponsesEvent>(payload).ok().map_or(0, |e| e.delta.len()),
        Dialect::GoogleGemini => serde_json::from_str::<GeminiChunk>(payload)
            .ok()
            .and_then(|c| c.candidates.0)
            .and_then(|c| c.content.parts.0)
            .map_or(0, |p| p.text.len()),
        Dialect::Custom(_) => unreachable!("built-in wires only"),
        Dialect::OllamaChat => serde_json::from_str::<OllamaLine>(payload).ok().map_or(0, |l| l.message.content.len()),
    }
}

/// The floor's work on one event's payload of a streamed tool call: a typed, borrowed
/// decode down to its argument fragment (Chat Completions' first call's
/// `function.arguments`, Anthropic's `partial_json`). Returns the fragment's length
/// unescaped (0 for an event without one, or invalid, and in the other dialects). A
/// fragment with an escape (a `"`) is copied by serde, as it would be by any client.
pub fn tool_args_len(dialect: Dialect, payload: &str) -> usize {
    match dialect {
        Dialect::OpenaiCompletions => serde_json::from_str::<ChatToolChunk>(payload)
            .ok()
            .and_then(|c| c.choices.0)
            .and_then(|c| c.delta.tool_calls)
            .and_then(|t| t.0)
            .map_or(0, |t| t.function.arguments.len()),
        Dialect::AnthropicMessages => serde_json::from_str::<AnthropicToolEvent>(payload)
            .ok()
            .and_then(|e| e.delta)
            .map_or(0, |d| d.partial_json.len()),
        Dialect::Custom(_) => unreachable!("built-in wires only"),
        Dialect::OpenaiResponses | Dialect::GoogleGemini | Dialect::OllamaChat => 0,
    }
}

/// The floor: event boundaries by memchr, each payload decoded down to its text.
/// Returns the total text length.
#[inline(never)]
pub fn baseline(body: &[u8], dialect: Dialect) -> usize {
    floor_with(body, dialect, text_len)
}

/// The floor of a tool call's stream ([`crate::synth::tool_call_stream`]): event
/// boundaries by memchr, each payload decoded down to its argument fragment. Returns the
/// total fragment length.
#[inline(never)]
pub fn baseline_tool(body: &[u8], dialect: Dialect) -> usize {
    floor_with(body, dialect, tool_args_len)
}

fn floor_with(body: &[u8], dialect: Dialect, decode: fn(Dialect, &str) -> usize) -> usize {
    let text = std::str::from_utf8(body).unwrap_or("");
    let mut total = 0;
    if dialect == Dialect::OllamaChat {
        let mut start = 0;
        for end in memchr::memchr_iter(b'\n', body) {
            total += decode(dialect, text.get(start..end).unwrap_or(""));
            start = end + 1;
        }
        return total;
    }
    let sep: &[u8] = if dialect == Dialect::GoogleGemini { b"\r\n\r\n" } else { b"\n\n" };
    let data = memchr::memmem::Finder::new("data: ");
    let mut start = 0;
    for end in memchr::memmem::find_iter(body, sep) {
        let event = body.get(start..end).unwrap_or_default();
        if let Some(pos) = data.find(event) {
            total += decode(dialect, text.get(start + pos + 6..end).unwrap_or(""));
        }
        start = end + sep.len();
    }
    total
}
