//! The hot event, `content_block_delta`, decoded by hand.
//!
//! It is nearly every event of a stream. A derived struct with one field per delta kind
//! is six strings wide and is moved several times while serde builds it; this visitor
//! keeps the candidates in locals and returns only the one string the delta's `type`
//! names. It reads exactly what the derived types read: the same keys, `null` as absent,
//! a repeated key as an error, anything else skipped.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;

use super::stream::Str;

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
    /// `citations_delta` and kinds added later.
    Other,
}

impl DeltaKind {
    pub(super) fn from_type(kind: Option<&str>) -> DeltaKind {
        match kind {
            Some("text_delta") => DeltaKind::Text,
            Some("thinking_delta") => DeltaKind::Thinking,
            Some("signature_delta") => DeltaKind::Signature,
            Some("input_json_delta") => DeltaKind::InputJson,
            _ => DeltaKind::Other,
        }
    }
}

/// Stores a field's value, refusing a second occurrence as the derived types do.
fn set_once<'de, A: MapAccess<'de>, T: Deserialize<'de>>(
    slot: &mut Option<T>,
    map: &mut A,
    name: &'static str,
) -> Result<(), A::Error> {
    if slot.is_some() {
        return Err(de::Error::duplicate_field(name));
    }
    *slot = Some(map.next_value()?);
    Ok(())
}

impl<'de: 'a, 'a> Deserialize<'de> for DeltaEvent<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct EventVisitor<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for EventVisitor<'a> {
            type Value = DeltaEvent<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a content_block_delta event")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut index: Option<Option<u64>> = None;
                let mut delta: Option<Option<BlockDeltaBody<'a>>> = None;
                while let Some(Str(key)) = map.next_key::<Str<'de>>()? {
                    match &*key {
                        "index" => set_once(&mut index, &mut map, "index")?,
                        "delta" => set_once(&mut delta, &mut map, "delta")?,
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(DeltaEvent { index: index.flatten(), delta: delta.flatten() })
            }
        }
        deserializer.deserialize_struct("DeltaEvent", &["index", "delta"], EventVisitor(std::marker::PhantomData))
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for BlockDeltaBody<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct BodyVisitor<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for BodyVisitor<'a> {
            type Value = BlockDeltaBody<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a content block delta")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut kind: Option<Option<Str<'a>>> = None;
                let mut text: Option<Option<Str<'a>>> = None;
                let mut thinking: Option<Option<Str<'a>>> = None;
                let mut signature: Option<Option<Str<'a>>> = None;
                let mut partial_json: Option<Option<Str<'a>>> = None;
                let mut stop_reason: Option<Option<Str<'a>>> = None;
                while let Some(Str(key)) = map.next_key::<Str<'de>>()? {
                    match &*key {
                        "type" => set_once(&mut kind, &mut map, "type")?,
                        "text" => set_once(&mut text, &mut map, "text")?,
                        "thinking" => set_once(&mut thinking, &mut map, "thinking")?,
                        "signature" => set_once(&mut signature, &mut map, "signature")?,
                        "partial_json" => set_once(&mut partial_json, &mut map, "partial_json")?,
                        "stop_reason" => set_once(&mut stop_reason, &mut map, "stop_reason")?,
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                let kind = DeltaKind::from_type(kind.flatten().as_ref().map(Str::as_str));
                let content = match kind {
                    DeltaKind::Text => text,
                    DeltaKind::Thinking => thinking,
                    DeltaKind::Signature => signature,
                    DeltaKind::InputJson => partial_json,
                    DeltaKind::Other => None,
                };
                Ok(BlockDeltaBody { kind, content: content.flatten().map(|s| s.0) })
            }
        }
        const FIELDS: &[&str] = &["type", "text", "thinking", "signature", "partial_json", "stop_reason"];
        deserializer.deserialize_struct("RawDelta", FIELDS, BodyVisitor(std::marker::PhantomData))
    }
}
