//! Borrowed, typed shapes of the stream's JSON payloads.
//!
//! Every event is parsed once into [`EventPayload`]; nested objects are read only by the
//! events that use them. Scalar fields use lenient types that read an unexpected JSON
//! type as "absent" instead of failing, because an event this dialect does not know may
//! reuse a field name with another type (`response.reasoning_summary.delta` has an
//! object `delta`), and unknown events must never fail a stream.

use std::borrow::Cow;
use std::fmt;

use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::data::error::StreamError;
use crate::wire::dialect::common;
use crate::wire::dialect::in_place::{read, Fields};

/// One stream event: the fields of every event this dialect reads.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct EventPayload<'a> {
    #[serde(rename = "type", borrow)]
    pub kind: LenientStr<'a>,
    #[serde(borrow)]
    pub delta: LenientStr<'a>,
    #[serde(borrow)]
    pub item_id: LenientStr<'a>,
    pub output_index: LenientU64,
    pub content_index: LenientU64,
    pub summary_index: LenientU64,
    #[serde(borrow)]
    pub item: Option<ItemPayload<'a>>,
    #[serde(borrow)]
    pub response: Option<ResponsePayload<'a>>,
    #[serde(borrow)]
    pub text: LenientStr<'a>,
    #[serde(borrow)]
    pub arguments: LenientStr<'a>,
    #[serde(borrow)]
    pub refusal: LenientStr<'a>,
}

/// The hot event, `response.output_text.delta`, recognised by the prefix OpenAI always
/// writes ([`TEXT_DELTA_PREFIX`]) and decoded in place
/// ([`in_place`](crate::wire::dialect::in_place)) into just the fields it uses: the whole
/// [`EventPayload`] is hundreds of bytes, built and copied for every delta.
#[derive(Debug, Default)]
pub(super) struct TextDeltaPayload<'a> {
    pub delta: LenientStr<'a>,
    pub item_id: LenientStr<'a>,
    pub output_index: LenientU64,
    pub content_index: LenientU64,
}

impl<'de> Fields<'de> for TextDeltaPayload<'de> {
    const NAMES: &'static [&'static str] = &["delta", "item_id", "output_index", "content_index"];

    fn key(name: &str) -> Option<u8> {
        Some(match name {
            "delta" => 0,
            "item_id" => 1,
            "output_index" => 2,
            "content_index" => 3,
            _ => return None,
        })
    }

    fn field<A: MapAccess<'de>>(&mut self, key: u8, map: &mut A) -> Result<(), A::Error> {
        match key {
            0 => read(map, &mut self.delta),
            1 => read(map, &mut self.item_id),
            2 => read(map, &mut self.output_index),
            _ => read(map, &mut self.content_index),
        }
    }
}

/// How a `response.output_text.delta` payload starts.
pub(super) const TEXT_DELTA_PREFIX: &str = r#"{"type":"response.output_text.delta""#;

/// An output item (`output_item.added` / `.done`).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct ItemPayload<'a> {
    #[serde(rename = "type", borrow)]
    pub kind: LenientStr<'a>,
    #[serde(borrow)]
    pub id: LenientStr<'a>,
    #[serde(borrow)]
    pub call_id: LenientStr<'a>,
    #[serde(borrow)]
    pub name: LenientStr<'a>,
    #[serde(borrow)]
    pub arguments: LenientStr<'a>,
    #[serde(borrow)]
    pub encrypted_content: LenientStr<'a>,
    /// Freeform input of a custom tool call.
    #[serde(borrow)]
    pub input: LenientStr<'a>,
    /// Reasoning summary parts; read only for reasoning items.
    #[serde(borrow)]
    pub summary: Option<&'a RawValue>,
    /// Message content or reasoning text parts; read only for those items.
    #[serde(borrow)]
    pub content: Option<&'a RawValue>,
}

impl<'a> ItemPayload<'a> {
    /// `summary` as text parts.
    pub(super) fn summary_parts(&self) -> Result<Vec<TextPart<'a>>, StreamError> {
        parts(self.summary)
    }

    /// `content` as text parts (`output_text`, `refusal`, `reasoning_text`).
    pub(super) fn content_parts(&self) -> Result<Vec<TextPart<'a>>, StreamError> {
        parts(self.content)
    }
}

fn parts<'a>(raw: Option<&'a RawValue>) -> Result<Vec<TextPart<'a>>, StreamError> {
    match raw {
        Some(raw) if raw.get() != "null" => common::parse_json(raw.get()),
        _ => Ok(Vec::new()),
    }
}

/// A content or summary part: `{"type": "output_text", "text": …}`, `{"type": "refusal", "refusal": …}`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct TextPart<'a> {
    #[serde(rename = "type", borrow)]
    pub kind: LenientStr<'a>,
    #[serde(borrow)]
    pub text: LenientStr<'a>,
    #[serde(borrow)]
    pub refusal: LenientStr<'a>,
}

/// The response object of `response.created`, `.completed`, `.incomplete`, `.failed`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct ResponsePayload<'a> {
    #[serde(borrow)]
    pub id: LenientStr<'a>,
    #[serde(borrow)]
    pub model: LenientStr<'a>,
    #[serde(borrow)]
    pub status: LenientStr<'a>,
    #[serde(borrow)]
    pub incomplete_details: Option<IncompleteDetails<'a>>,
    #[serde(borrow)]
    pub error: Option<&'a RawValue>,
    pub usage: Option<UsagePayload>,
}

/// `incomplete_details`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct IncompleteDetails<'a> {
    #[serde(borrow)]
    pub reason: LenientStr<'a>,
}

/// `usage`: totals with their cached and reasoning parts.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct UsagePayload {
    pub input_tokens: LenientU64,
    pub output_tokens: LenientU64,
    pub input_tokens_details: Option<TokenDetails>,
    pub output_tokens_details: Option<TokenDetails>,
}

/// `input_tokens_details` / `output_tokens_details`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct TokenDetails {
    pub cached_tokens: LenientU64,
    pub reasoning_tokens: LenientU64,
}

/// Visitor methods that read every other JSON value (skipping containers) as `None`.
macro_rules! forward_to_absent {
    () => {
        fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_none<E>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_any(self)
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            Ok(None)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            Ok(None)
        }
    };
}

/// A string, or `None` for null or any other JSON type. Borrowed when unescaped.
#[derive(Debug, Default)]
pub(super) struct LenientStr<'a>(pub Option<Cow<'a, str>>);

/// A non-negative integer, or `None` for null or any other JSON type.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct LenientU64(pub Option<u64>);

impl<'de: 'a, 'a> Deserialize<'de> for LenientStr<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct StrVisitor;
        impl<'de> Visitor<'de> for StrVisitor {
            type Value = Option<Cow<'de, str>>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Some(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Some(Cow::Owned(v.to_string())))
            }
            fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
                Ok(Some(Cow::Owned(v)))
            }
            fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
                Ok(None)
            }
            forward_to_absent!();
        }
        deserializer.deserialize_any(StrVisitor).map(LenientStr)
    }
}

impl<'de> Deserialize<'de> for LenientU64 {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct U64Visitor;
        impl<'de> Visitor<'de> for U64Visitor {
            type Value = Option<u64>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
                Ok(Some(v))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
                Ok(u64::try_from(v).ok())
            }
            fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
                Ok(None)
            }
            forward_to_absent!();
        }
        deserializer.deserialize_any(U64Visitor).map(LenientU64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_delta_keys_are_numbered_by_name() {
        crate::wire::dialect::in_place::assert_keys_match_names::<TextDeltaPayload<'_>>();
    }
}
