//! Checks for a wire format: a [`WireFormat`] of yours, or any [`Dialect`], against
//! sample response bodies (see the [parent module](super) for an example).
//!
//! Bodies are decoded the way omni decodes a response ([`StreamDecoder`]: the format's
//! framing, its stream parser, the accumulator), so what is checked is what your users
//! see: the [`StreamEvent`]s and the final [`Response`].
//!
//! - [`check_splits`]: each sample gives the same events and response fed whole, one
//!   byte at a time, split inside every multi-byte character and between every CR and LF,
//!   and split at generated points.
//! - [`check_cuts`]: every prefix of a sample (for long ones, every prefix around a line
//!   break and generated ones) decodes well formed ([`well_formed`]), and a prefix of a
//!   stream that ends in `Done` either fails (incomplete, or an error) or ends in `Done`
//!   with the very content and stop reason of the whole (see [`Ending`] for formats
//!   without an end marker).
//! - [`check_damage`]: samples damaged byte by byte and in their JSON ([`Damage`]) decode
//!   without a panic, well formed: one terminal event, last; blocks started before their
//!   deltas and ends; no more events than bytes and no more content than bytes.
//! - [`check_requests`]: request building, for any context and options
//!   ([`strategy::context`](super::strategy::context),
//!   [`strategy::options`](super::strategy::options)), never panics and either refuses
//!   with a typed error or gives a sound request: a JSON body, a URL without spaces or
//!   control characters, headers that cannot inject a line, every header carrying the key
//!   or named like a credential marked sensitive, the key nowhere else.

use std::collections::BTreeSet;

use omni_protocol::dialect::{register, StreamDecoder, WireFormat};
use omni_protocol::{Dialect, Response, StreamEvent};
use serde_json::Value;

use super::{CheckFailure, Config, Ending, Panicked, Sample};

mod cut;
mod damage;
mod request;
mod split;

pub use cut::check_cuts;
pub use damage::{check_damage, damages, json_pointers, Damage};
pub use request::{check_request, check_requests};
pub use split::{awkward_cuts, check_splits};

/// Registers `format` (formats are registered by name for the process; registering the
/// same one again is fine) and runs every check of this module on it with `samples`.
/// A name taken by a built-in dialect or another format fails the
/// [`Register`](super::Check::Register) check.
pub fn check_format(format: &'static dyn WireFormat, samples: &[Sample], config: &Config) -> Result<(), CheckFailure> {
    let dialect = register(format).map_err(|e| {
        CheckFailure::new(super::Check::Register, format.name(), "registering the format", e.to_string())
    })?;
    check_dialect(dialect, samples, config)
}

/// Every check of this module on `dialect` (a built-in or a registered format of yours)
/// with `samples`, in order: splits, cuts, damage, requests. The first failure is
/// returned.
pub fn check_dialect(dialect: Dialect, samples: &[Sample], config: &Config) -> Result<(), CheckFailure> {
    check_splits(dialect, samples, config)?;
    check_cuts(dialect, samples, config)?;
    check_damage(dialect, samples, config)?;
    check_requests(dialect, config)
}

/// A body decoded: the events in order and the final response.
#[derive(Debug, Clone, PartialEq)]
pub struct Decoded {
    /// The events, the last one `Done` or `Error` in a well formed decode.
    pub events: Vec<StreamEvent>,
    /// The response at the end.
    pub response: Response,
}

impl Decoded {
    /// True when the last event is `Done`.
    pub fn is_done(&self) -> bool {
        matches!(self.events.last(), Some(StreamEvent::Done { .. }))
    }
}

/// Decodes `body` as a response of `dialect` starting with `model_id`, fed in the pieces
/// that `cuts` make (byte offsets; out-of-range or unordered ones are clamped), then
/// finished. A panic in the decoding (the format's parser) is caught.
pub fn decode(dialect: Dialect, model_id: &str, body: &[u8], cuts: &[usize]) -> Result<Decoded, Panicked> {
    super::guarded(|| {
        let mut decoder = StreamDecoder::new(dialect, model_id);
        let mut events = Vec::new();
        let mut start = 0;
        for &end in cuts.iter().chain(std::iter::once(&body.len())) {
            let end = end.clamp(start, body.len());
            decoder.feed(&body[start..end], &mut events);
            start = end;
        }
        decoder.finish(&mut events);
        Decoded { events, response: decoder.into_response() }
    })
}

/// The invariants every decode of `body` holds, damaged input or not: exactly one
/// terminal event (`Done` or `Error`), last; a block's deltas and end only after its
/// start, no block started twice; no more events than bytes (plus the terminal one) and
/// no more bytes of content (text, thinking, tool input) than bytes of body, so nothing is
/// amplified and memory stays bounded by the input. `Err` says what was wrong.
pub fn well_formed(body: &[u8], decoded: &Decoded) -> Result<(), String> {
    let events = &decoded.events;
    let terminal = |e: &StreamEvent| matches!(e, StreamEvent::Done { .. } | StreamEvent::Error { .. });
    match events.iter().position(terminal) {
        Some(at) if at + 1 == events.len() => {}
        Some(at) => {
            let after = events.get(at + 1).map(|e| format!("{e:?}")).unwrap_or_default();
            return Err(format!(
                "a terminal event at {at} of {} events, then {}",
                events.len(),
                super::clip(&after, 200)
            ));
        }
        None => return Err(format!("no terminal event (Done or Error) among {} events", events.len())),
    }
    let mut open = BTreeSet::new();
    for (at, event) in events.iter().enumerate() {
        let (index, ok) = match event {
            StreamEvent::TextStart { index, .. }
            | StreamEvent::ThinkingStart { index, .. }
            | StreamEvent::ToolUseStart { index, .. } => (*index, open.insert(*index)),
            StreamEvent::TextDelta { index, .. }
            | StreamEvent::ThinkingDelta { index, .. }
            | StreamEvent::ToolUseDelta { index, .. } => (*index, open.contains(index)),
            StreamEvent::TextEnd { index, .. }
            | StreamEvent::ThinkingEnd { index, .. }
            | StreamEvent::ToolUseEnd { index, .. } => (*index, open.remove(index)),
            _ => continue,
        };
        if !ok {
            let event = super::clip(&format!("{event:?}"), 200);
            return Err(format!("event {at} is out of order for block {index}: {event}"));
        }
    }
    if events.len() > body.len() + 1 {
        return Err(format!("{} events from {} bytes", events.len(), body.len()));
    }
    let content = content_bytes(&decoded.response);
    if content > body.len() {
        return Err(format!("{content} bytes of content from {} bytes of body", body.len()));
    }
    Ok(())
}

/// Bytes of text, thinking and tool input the response holds.
fn content_bytes(response: &Response) -> usize {
    serde_json::to_value(&response.message.content).map(|content| string_bytes(&content)).unwrap_or(0)
}

fn string_bytes(value: &Value) -> usize {
    match value {
        Value::String(s) => s.len(),
        Value::Array(items) => items.iter().map(string_bytes).sum(),
        Value::Object(map) => map.iter().filter(|(k, _)| k.as_str() != "type").map(|(_, v)| string_bytes(v)).sum(),
        _ => 0,
    }
}

/// How `dialect`'s streams end: Gemini's has no end marker whatever the configuration.
fn ending(dialect: Dialect, config: &Config) -> Ending {
    if dialect == Dialect::GoogleGemini {
        Ending::Unmarked
    } else {
        config.ending
    }
}

/// What differs between two decodes of the same body, if anything: the first event that
/// differs, or the responses.
fn difference(whole: &Decoded, other: &Decoded, other_name: &str) -> Option<String> {
    if whole == other {
        return None;
    }
    let at = whole.events.iter().zip(&other.events).position(|(a, b)| a != b);
    let show =
        |e: Option<&StreamEvent>| e.map_or_else(|| "nothing".to_owned(), |e| super::clip(&format!("{e:?}"), 300));
    Some(match at {
        Some(at) => format!(
            "event {at} differs:\n    whole:     {}\n    {other_name:<10} {}",
            show(whole.events.get(at)),
            show(other.events.get(at))
        ),
        None if whole.events.len() != other.events.len() => {
            let at = whole.events.len().min(other.events.len());
            format!(
                "whole gave {} events, {other_name} {}; event {at}:\n    whole:     {}\n    {other_name:<10} {}",
                whole.events.len(),
                other.events.len(),
                show(whole.events.get(at)),
                show(other.events.get(at))
            )
        }
        None => format!(
            "the events agree, the responses differ:\n    whole:     {}\n    {other_name:<10} {}",
            super::clip(&format!("{:?}", whole.response), 400),
            super::clip(&format!("{:?}", other.response), 400)
        ),
    })
}
