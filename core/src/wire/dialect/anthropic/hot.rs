//! The hot event, `content_block_delta`, decoded by hand.
//!
//! It is nearly every event of a stream, so its decoder is shaped by measurement: a
//! derived struct with one field per delta kind is six strings wide and is copied
//! several times while serde returns it, and every `Option` field adds a layer to each
//! value read. Here keys are matched as they are parsed, the delta type becomes a
//! [`DeltaKind`] without keeping the string, the candidate contents stay in locals, and
//! only the content the type names is returned. It reads what the derived types read:
//! the same keys, `null` as absent, a repeated key as an error, anything else skipped.
//!
//! Before any of that, [`exact`] reads the event in the one shape Anthropic writes it,
//! by its fixed parts, without a JSON parser; the decoder is for every other shape.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;

use crate::wire::dialect::in_place::{OptStr, OptU64};

/// `{"type":"content_block_delta","index":…,"delta":{…}}`.
pub(super) struct DeltaEvent<'a> {
    pub(super) index: Option<u64>,
    pub(super) delta: Option<BlockDeltaBody<'a>>,
}

/// The `delta` object of a content block delta: its kind and that kind's content.
pub(super) struct BlockDeltaBody<'a> {
    pub(super) kind: DeltaKind,
    /// The field the kind names (`text`, `thinking`, `signature`, `partial_json`).
    pub(super) content: Option<Cow<'a, str>>,
}

/// The delta kinds omni forwards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum DeltaKind {
    Text,
    Thinking,
    Signature,
    InputJson,
    /// `citations_delta`, kinds added later, or no type at all.
    Other,
}

/// The hot event read without a JSON parser, when it has exactly the shape Anthropic
/// writes: `{"type":"content_block_delta","index":N,"delta":{"type":"K","F":"S"}}`, K one
/// of the four delta types, F the content field it names and S a string without
/// escapes. That is nearly every event of a stream, and reading it by its fixed parts
/// costs a fraction of a JSON parse. Anything else (whitespace, another key order or
/// another key, an escape, a number serde would refuse) is `None`, and the caller parses
/// the event as JSON: what this accepts it reads exactly as [`DeltaEvent`]'s decoder does.
pub(super) fn exact(data: &str) -> Option<DeltaEvent<'_>> {
    let rest = data.strip_prefix(r#"{"type":"content_block_delta","index":"#)?;
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    // JSON has no leading zeros; at most 19 digits always fit a u64.
    if digits == 0 || digits > 19 || (digits > 1 && rest.starts_with('0')) {
        return None;
    }
    let index = rest.get(..digits)?.parse::<u64>().ok()?;
    let rest = rest.get(digits..)?.strip_prefix(r#","delta":{"type":""#)?;
    let (kind, rest) = if let Some(rest) = rest.strip_prefix(r#"text_delta","text":""#) {
        (DeltaKind::Text, rest)
    } else if let Some(rest) = rest.strip_prefix(r#"input_json_delta","partial_json":""#) {
        (DeltaKind::InputJson, rest)
    } else if let Some(rest) = rest.strip_prefix(r#"thinking_delta","thinking":""#) {
        (DeltaKind::Thinking, rest)
    } else if let Some(rest) = rest.strip_prefix(r#"signature_delta","signature":""#) {
        (DeltaKind::Signature, rest)
    } else {
        return None;
    };
    // The string ends at the first quote; a backslash before it is an escape to decode.
    let end = memchr::memchr2(b'"', b'\\', rest.as_bytes())?;
    let (content, tail) = rest.split_at(end);
    // JSON strings hold no control characters (serde refuses them): checked without an
    // early exit, so the loop vectorises.
    if content.bytes().fold(false, |control, b| control | (b < 0x20)) || tail != "\"}}" {
        return None;
    }
    Some(DeltaEvent { index: Some(index), delta: Some(BlockDeltaBody { kind, content: Some(Cow::Borrowed(content)) }) })
}

impl DeltaKind {
    pub(super) fn from_type(kind: Option<&str>) -> Self {
        match kind {
            Some("text_delta") => Self::Text,
            Some("thinking_delta") => Self::Thinking,
            Some("signature_delta") => Self::Signature,
            Some("input_json_delta") => Self::InputJson,
            _ => Self::Other,
        }
    }

    /// Which content key of [`BODY_KEYS`] this kind reads.
    fn content_key(self) -> Option<usize> {
        match self {
            Self::Text => Some(1),
            Self::Thinking => Some(2),
            Self::Signature => Some(3),
            Self::InputJson => Some(4),
            Self::Other => None,
        }
    }
}

/// The delta type as a string or `null` (absent), like `Option<&str>` but kept as a kind.
impl<'de> Deserialize<'de> for DeltaKind {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KindVisitor;
        impl<'de> Visitor<'de> for KindVisitor {
            type Value = DeltaKind;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a delta type or null")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<DeltaKind, E> {
                Ok(DeltaKind::from_type(Some(v)))
            }
            fn visit_unit<E: de::Error>(self) -> Result<DeltaKind, E> {
                Ok(DeltaKind::Other)
            }
            fn visit_none<E: de::Error>(self) -> Result<DeltaKind, E> {
                Ok(DeltaKind::Other)
            }
        }
        deserializer.deserialize_any(KindVisitor)
    }
}

const EVENT_KEYS: &[&str] = &["index", "delta"];
const BODY_KEYS: &[&str] = &["type", "text", "thinking", "signature", "partial_json", "stop_reason"];

/// A key's position in `keys` (`keys.len()` for any other key), matched while parsed.
struct KeyIn(fn(&str) -> usize);

impl<'de> DeserializeSeed<'de> for KeyIn {
    type Value = usize;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<usize, D::Error> {
        deserializer.deserialize_identifier(self)
    }
}

impl<'de> Visitor<'de> for KeyIn {
    type Value = usize;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }
    fn visit_str<E: de::Error>(self, key: &str) -> Result<usize, E> {
        Ok((self.0)(key))
    }
}

fn event_key(key: &str) -> usize {
    match key {
        "index" => 0,
        "delta" => 1,
        _ => 2,
    }
}

fn body_key(key: &str) -> usize {
    match key {
        "type" => 0,
        "text" => 1,
        "thinking" => 2,
        "signature" => 3,
        "partial_json" => 4,
        "stop_reason" => 5,
        _ => 6,
    }
}

/// Marks key `n` of `names` as read; a repeated key is an error.
fn once<E: de::Error>(seen: &mut u8, n: usize, names: &[&'static str]) -> Result<(), E> {
    let bit = 1u8 << (n & 7);
    if *seen & bit != 0 {
        return Err(E::duplicate_field(names.get(n).copied().unwrap_or("?")));
    }
    *seen |= bit;
    Ok(())
}

impl<'de: 'a, 'a> Deserialize<'de> for DeltaEvent<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct EventVisitor<'a>(PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for EventVisitor<'a> {
            type Value = DeltaEvent<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a content_block_delta event")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut event = DeltaEvent { index: None, delta: None };
                let mut seen = 0u8;
                while let Some(key) = map.next_key_seed(KeyIn(event_key))? {
                    match key {
                        0 => {
                            once(&mut seen, key, EVENT_KEYS)?;
                            event.index = map.next_value::<OptU64>()?.0;
                        }
                        1 => {
                            once(&mut seen, key, EVENT_KEYS)?;
                            event.delta = map.next_value()?;
                        }
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(event)
            }
        }
        deserializer.deserialize_struct("DeltaEvent", EVENT_KEYS, EventVisitor(PhantomData))
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for BlockDeltaBody<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct BodyVisitor<'a>(PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for BodyVisitor<'a> {
            type Value = BlockDeltaBody<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a content block delta")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut kind = DeltaKind::Other;
                // `text`, `thinking`, `signature`, `partial_json`, until the type is known.
                let mut contents: [Option<Cow<'a, str>>; 4] = [None, None, None, None];
                let mut seen = 0u8;
                while let Some(key) = map.next_key_seed(KeyIn(body_key))? {
                    if key < BODY_KEYS.len() {
                        once(&mut seen, key, BODY_KEYS)?;
                    }
                    match key {
                        0 => kind = map.next_value()?,
                        1..=4 => {
                            let value = map.next_value::<OptStr<'a>>()?.0;
                            if let Some(slot) = contents.get_mut(key - 1) {
                                *slot = value;
                            }
                        }
                        5 => {
                            map.next_value::<OptStr<'a>>()?;
                        }
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                let content = kind.content_key().and_then(|key| contents.get_mut(key - 1)).and_then(Option::take);
                Ok(BlockDeltaBody { kind, content })
            }
        }
        deserializer.deserialize_struct("RawDelta", BODY_KEYS, BodyVisitor(PhantomData))
    }
}

#[cfg(test)]
mod tests {

    use proptest::prelude::*;
    use proptest::sample::select;
    use proptest::test_runner::TestCaseError;

    use super::*;

    /// The event's parts, to compare the two readings.
    fn parts(event: &DeltaEvent<'_>) -> (Option<u64>, Option<(DeltaKind, Option<String>)>) {
        (event.index, event.delta.as_ref().map(|d| (d.kind, d.content.as_deref().map(str::to_string))))
    }

    #[test]
    fn the_exact_shape_reads_as_the_decoder_does_and_any_other_is_left_to_it() {
        let read = [
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}"#,
            r#"{"type":"content_block_delta","index":12,"delta":{"type":"text_delta","text":""}}"#,
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{}"}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hmm é"}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQB"}}"#,
            r#"{"type":"content_block_delta","index":9999999999999999999,"delta":{"type":"text_delta","text":"x"}}"#,
        ];
        for data in read {
            let fast = exact(data).unwrap_or_else(|| panic!("read by its parts: {data}"));
            let full: DeltaEvent<'_> = serde_json::from_str(data).unwrap();
            assert_eq!(parts(&fast), parts(&full), "{data}");
        }
        let left = [
            // An escape, a control character, a key of another kind, another key order.
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a\"b"}}"#,
            "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"a\tb\"}}",
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","thinking":"x"}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"text":"x","type":"text_delta"}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"citations_delta","citation":{}}}"#,
            // More keys, whitespace, a number serde refuses or reads otherwise, no index.
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x","more":1}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"}} "#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"}"#,
            r#"{"type":"content_block_delta","index":01,"delta":{"type":"text_delta","text":"x"}}"#,
            r#"{"type":"content_block_delta","index":1.0,"delta":{"type":"text_delta","text":"x"}}"#,
            r#"{"type":"content_block_delta","index":-1,"delta":{"type":"text_delta","text":"x"}}"#,
            // Twenty digits: left to serde, which reads u64::MAX and refuses one more.
            r#"{"type":"content_block_delta","index":18446744073709551615,"delta":{"type":"text_delta","text":"x"}}"#,
            r#"{"type":"content_block_delta","index":18446744073709551616,"delta":{"type":"text_delta","text":"x"}}"#,
            r#"{"type":"content_block_delta","index":null,"delta":{"type":"text_delta","text":"x"}}"#,
            r#"{"type":"content_block_delta","delta":{"type":"text_delta","text":"x"}}"#,
        ];
        for data in left {
            assert!(exact(data).is_none(), "left to the decoder: {data}");
        }
    }
    use crate::wire::dialect::near_json::*;

    // Under [`Wild::OTHER`]: delta kinds omni does not forward, or written escaped; a
    // content key other than the kind's; a second content key, or `stop_reason`.

    const KINDS: [(&str, &str); 4] = [
        ("text_delta", "text"),
        ("input_json_delta", "partial_json"),
        ("thinking_delta", "thinking"),
        ("signature_delta", "signature"),
    ];

    /// A `content_block_delta` event near the one shape Anthropic writes.
    fn near_event(w: Wild) -> BoxedStrategy<String> {
        let other = w.on(Wild::OTHER);
        let kind = w.either(
            Wild::OTHER,
            (0..KINDS.len()).prop_map(|k| (k, J::Raw(encode(KINDS[k].0, Enc::Raw)))).boxed(),
            prop_oneof![
                (0..KINDS.len()).prop_map(|k| (k, J::Raw(encode(KINDS[k].0, Enc::AllEscaped)))),
                (0..KINDS.len(), select(&["citations_delta", "Text_delta", "text_delt", "text_delta ", ""][..]))
                    .prop_map(|(k, kind)| (k, J::Raw(encode(kind, Enc::Raw)))),
                (0..KINDS.len()).prop_map(|k| (k, raw("null"))),
            ]
            .boxed(),
        );
        let key = if other { prop::option::weighted(0.3, 0..KINDS.len()).boxed() } else { Just(None).boxed() };
        let second =
            if other { prop::option::weighted(0.3, (0..KINDS.len(), string(w))).boxed() } else { Just(None).boxed() };
        let stop = if other {
            prop::option::weighted(0.3, prop_oneof![Just(raw("null")), string(w)]).boxed()
        } else {
            Just(None).boxed()
        };
        // Under `Wild::TYPE`, sometimes a type that is not a string.
        let odd_kind =
            if w.on(Wild::TYPE) { prop::option::weighted(0.3, scalar(w)).boxed() } else { Just(None).boxed() };
        let delta_fields = (
            prop::option::weighted(if w.on(Wild::SHAPE) { 0.85 } else { 0.999 }, (kind, key)),
            odd_kind,
            typed(w, string(w)),
            second,
            stop,
        )
            .prop_map(|(kind, odd_kind, content, second, stop)| {
                let mut fields = Vec::new();
                if let Some(((k, kind), key)) = kind {
                    fields.push(("type".to_string(), odd_kind.unwrap_or(kind)));
                    fields.push((KINDS[key.unwrap_or(k)].1.to_string(), content));
                }
                if let Some((k, content)) = second {
                    fields.push((KINDS[k].1.to_string(), content));
                }
                if let Some(stop) = stop {
                    fields.push(("stop_reason".to_string(), stop));
                }
                fields
            })
            .boxed();
        let delta_extra = &["x", "type", "text", "thinking", "signature", "partial_json", "stop_reason", "citation"];
        let delta = object(w, delta_fields, delta_extra);
        // Under `Wild::TYPE`, sometimes another value, or the delta in an array.
        let delta =
            w.either(Wild::TYPE, delta.clone(), prop_oneof![scalar(w), delta.prop_map(|d| J::Arr(vec![d]))].boxed());
        let event_type = w.either(
            Wild::OTHER,
            Just(raw("\"content_block_delta\"")).boxed(),
            prop_oneof![Just(raw("\"content_block_start\"")), scalar(w)].boxed(),
        );
        let fields = present(vec![
            field(w, "type", 1.0, event_type),
            field(w, "index", 1.0, typed(w, number(w))),
            field(w, "delta", 1.0, delta),
        ]);
        payload(w, object(w, fields, &["x", "type", "index", "delta", "usage"]))
    }

    /// Whenever the fast path reads an event, the decoder reads it too, and the same.
    fn agrees(data: &str) -> Result<bool, TestCaseError> {
        let Some(fast) = exact(data) else { return Ok(false) };
        let full = serde_json::from_str::<DeltaEvent<'_>>(data);
        prop_assert!(full.is_ok(), "read by its parts but refused by the decoder: {:?}", data);
        prop_assert_eq!(parts(&fast), parts(&full.unwrap()), "{:?}", data);
        Ok(true)
    }

    #[test]
    fn what_the_fast_path_reads_near_the_hot_shape_the_decoder_reads_the_same() {
        let counts = count_read(Wild::any().prop_flat_map(near_event), agrees);
        assert_fair_share("anthropic, near the hot shape", counts);
    }

    #[test]
    fn the_fast_path_reads_every_event_of_the_exact_shape() {
        let event = (0u64..=9_999_999_999_999_999_999, 0..KINDS.len(), plain()).prop_map(|(index, k, content)| {
            let (kind, key) = KINDS[k];
            format!(
                r#"{{"type":"content_block_delta","index":{index},"delta":{{"type":"{kind}","{key}":"{content}"}}}}"#
            )
        });
        let counts = count_read(event, |data| {
            let read = agrees(data)?;
            prop_assert!(read, "not read by its parts: {:?}", data);
            Ok(read)
        });
        assert_all_read("anthropic, the exact shape", counts);
    }
}
