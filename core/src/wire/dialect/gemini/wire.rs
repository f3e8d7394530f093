//! The `GenerateContentResponse` chunk as typed, borrowed structs, shaped for speed: a
//! text chunk costs one allocation (its text) and little more than a bare decode.
//!
//! - serde borrows a `Cow<'a, str>` field only when the field is exactly that type; an
//!   `Option<Cow<'a, str>>` is always copied, hence [`Str`].
//! - A `Vec` allocates for its first element, while a chunk nearly always holds one
//!   candidate with one part: the first candidate and the first part are kept inline
//!   ([`Content`], [`Items`]).
//! - The chunk is decoded in place ([`in_place`](crate::wire::dialect::in_place)): with every
//!   rare field of a part (function calls, code execution, media) it is a few hundred
//!   bytes, which a derived decoder would copy several times per text chunk. A function
//!   call is kept raw and parsed only when present.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

use super::partial_args::PartialArg;
use crate::wire::dialect::in_place::{read, read_object, Fields, Fill, OptStr, OptU64};

/// One streamed chunk, decoded in place ([`in_place`](crate::wire::dialect::in_place)).
#[derive(Default)]
pub(super) struct Chunk<'a> {
    /// The first candidate; later ones are skipped without being kept.
    pub(super) candidate: Option<Candidate<'a>>,
    pub(super) prompt_feedback: Option<PromptFeedback<'a>>,
    pub(super) usage_metadata: Option<UsageMetadata>,
    pub(super) model_version: OptStr<'a>,
    pub(super) response_id: OptStr<'a>,
    /// An in-stream error (`google.rpc.Status`).
    pub(super) error: Option<&'a RawValue>,
}

impl<'de> Fields<'de> for Chunk<'de> {
    const NAMES: &'static [&'static str] =
        &["candidates", "promptFeedback", "usageMetadata", "modelVersion", "responseId", "error"];

    fn key(name: &str) -> Option<u8> {
        Some(match name {
            "candidates" => 0,
            "promptFeedback" => 1,
            "usageMetadata" => 2,
            "modelVersion" => 3,
            "responseId" => 4,
            "error" => 5,
            _ => return None,
        })
    }

    fn field<A: MapAccess<'de>>(&mut self, key: u8, map: &mut A) -> Result<(), A::Error> {
        match key {
            0 => map.next_value_seed(FirstInPlace(&mut self.candidate)),
            1 => read(map, &mut self.prompt_feedback),
            2 => read_object(map, &mut self.usage_metadata),
            3 => read(map, &mut self.model_version),
            4 => read(map, &mut self.response_id),
            _ => read(map, &mut self.error),
        }
    }
}

#[derive(Default)]
pub(super) struct Candidate<'a> {
    pub(super) content: Option<Content<'a>>,
    pub(super) finish_reason: OptStr<'a>,
}

impl<'de> Fields<'de> for Candidate<'de> {
    const NAMES: &'static [&'static str] = &["content", "finishReason"];

    fn key(name: &str) -> Option<u8> {
        Some(match name {
            "content" => 0,
            "finishReason" => 1,
            _ => return None,
        })
    }

    fn field<A: MapAccess<'de>>(&mut self, key: u8, map: &mut A) -> Result<(), A::Error> {
        match key {
            0 => read_object(map, &mut self.content),
            _ => read(map, &mut self.finish_reason),
        }
    }
}

#[derive(Default)]
pub(super) struct Content<'a> {
    /// The first part, decoded in place: a chunk nearly always holds one.
    pub(super) first_part: Option<Part<'a>>,
    pub(super) more_parts: Vec<Part<'a>>,
}

impl<'de> Fields<'de> for Content<'de> {
    const NAMES: &'static [&'static str] = &["parts"];

    fn key(name: &str) -> Option<u8> {
        (name == "parts").then_some(0)
    }

    fn field<A: MapAccess<'de>>(&mut self, _key: u8, map: &mut A) -> Result<(), A::Error> {
        map.next_value_seed(PartsInPlace(self))
    }
}

impl<'a> Content<'a> {
    /// The parts in order, each to be taken from its place.
    pub(super) fn parts_mut(&mut self) -> impl Iterator<Item = &mut Part<'a>> {
        self.first_part.iter_mut().chain(&mut self.more_parts)
    }
}

/// One part: text (a thought when `thought`), a function call, or a kind omni does not
/// model; any of them may carry a `thoughtSignature`.
#[derive(Default)]
pub(super) struct Part<'a> {
    pub(super) text: OptStr<'a>,
    pub(super) thought: bool,
    pub(super) thought_signature: OptStr<'a>,
    /// The raw `functionCall` object, parsed as [`FunctionCall`] when present: keeping
    /// the part small keeps text chunks fast.
    pub(super) function_call: Option<&'a RawValue>,
    /// Code execution or media (`executableCode`, `codeExecutionResult`, `inlineData`,
    /// `fileData`): no block in omni, but it separates the text around it.
    pub(super) unmodelled_kind: bool,
}

impl<'de> Fields<'de> for Part<'de> {
    const NAMES: &'static [&'static str] = &["text", "thought", "thoughtSignature", "functionCall", "(unmodelled)"];
    /// The hand-written decoder this replaces took the last of repeated keys.
    const REFUSE_REPEATS: bool = false;

    fn key(name: &str) -> Option<u8> {
        Some(match name {
            "text" => 0,
            "thought" => 1,
            "thoughtSignature" => 2,
            "functionCall" => 3,
            "executableCode" | "codeExecutionResult" | "inlineData" | "fileData" => 4,
            _ => return None,
        })
    }

    fn field<A: MapAccess<'de>>(&mut self, key: u8, map: &mut A) -> Result<(), A::Error> {
        match key {
            0 => read(map, &mut self.text),
            1 => {
                self.thought = map.next_value::<Option<bool>>()?.unwrap_or(false);
                Ok(())
            }
            2 => read(map, &mut self.thought_signature),
            3 => read(map, &mut self.function_call),
            _ => {
                map.next_value::<IgnoredAny>()?;
                self.unmodelled_kind = true;
                Ok(())
            }
        }
    }
}

/// The first element of an array decoded into `slot` in place; later elements are
/// skipped without being kept. `null` leaves it empty.
struct FirstInPlace<'o, T>(&'o mut Option<T>);

impl<'de, T: Fields<'de>> DeserializeSeed<'de> for FirstInPlace<'_, T> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de, T: Fields<'de>> Visitor<'de> for FirstInPlace<'_, T> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        if seq.next_element_seed(FillSlot(self.0))?.is_some() {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
        }
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
}

/// `parts`: the first decoded in place, the rest collected.
struct PartsInPlace<'o, 'a>(&'o mut Content<'a>);

impl<'de> DeserializeSeed<'de> for PartsInPlace<'_, 'de> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for PartsInPlace<'_, 'de> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        if seq.next_element_seed(FillSlot(&mut self.0.first_part))?.is_some() {
            let mut part = None;
            while seq.next_element_seed(FillSlot(&mut part))?.is_some() {
                self.0.more_parts.extend(part.take());
            }
        }
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
}

/// One array element decoded into `slot`.
struct FillSlot<'o, T>(&'o mut Option<T>);

impl<'de, T: Fields<'de>> DeserializeSeed<'de> for FillSlot<'_, T> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        Fill(self.0.insert(T::default())).deserialize(deserializer)
    }
}

/// A `functionCall`: whole (`name`, `args`, `id`) or, on Vertex, streamed (`partialArgs`,
/// `willContinue`).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct FunctionCall<'a> {
    #[serde(borrow, default)]
    pub(super) id: Option<Str<'a>>,
    #[serde(borrow, default)]
    pub(super) name: Option<Str<'a>>,
    #[serde(borrow, default)]
    pub(super) args: Option<&'a RawValue>,
    #[serde(borrow, default)]
    pub(super) partial_args: Items<PartialArg<'a>>,
    #[serde(default)]
    pub(super) will_continue: Option<bool>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct PromptFeedback<'a> {
    #[serde(borrow, default)]
    pub(super) block_reason: Option<Str<'a>>,
}

/// Cumulative token counts.
#[derive(Default)]
pub(super) struct UsageMetadata {
    pub(super) prompt_token_count: Option<u64>,
    pub(super) cached_content_token_count: Option<u64>,
    pub(super) candidates_token_count: Option<u64>,
    pub(super) tool_use_prompt_token_count: Option<u64>,
    pub(super) thoughts_token_count: Option<u64>,
}

impl<'de> Fields<'de> for UsageMetadata {
    const NAMES: &'static [&'static str] = &[
        "promptTokenCount",
        "cachedContentTokenCount",
        "candidatesTokenCount",
        "toolUsePromptTokenCount",
        "thoughtsTokenCount",
    ];

    fn key(name: &str) -> Option<u8> {
        Some(match name {
            "promptTokenCount" => 0,
            "cachedContentTokenCount" => 1,
            "candidatesTokenCount" => 2,
            "toolUsePromptTokenCount" => 3,
            "thoughtsTokenCount" => 4,
            _ => return None,
        })
    }

    fn field<A: MapAccess<'de>>(&mut self, key: u8, map: &mut A) -> Result<(), A::Error> {
        let slot = match key {
            0 => &mut self.prompt_token_count,
            1 => &mut self.cached_content_token_count,
            2 => &mut self.candidates_token_count,
            3 => &mut self.tool_use_prompt_token_count,
            _ => &mut self.thoughts_token_count,
        };
        *slot = map.next_value::<OptU64>()?.0;
        Ok(())
    }
}

/// A string borrowed from the event data (owned only when it had escapes).
#[derive(Debug, Deserialize)]
#[serde(transparent)]
pub(super) struct Str<'a>(#[serde(borrow)] pub(super) Cow<'a, str>);

/// The elements of a JSON array, the first kept inline: no allocation for one element.
#[derive(Debug)]
pub(super) struct Items<T> {
    first: Option<T>,
    rest: Vec<T>,
}

impl<T> Default for Items<T> {
    fn default() -> Self {
        Self { first: None, rest: Vec::new() }
    }
}

impl<T> Items<T> {
    pub(super) fn is_empty(&self) -> bool {
        self.first.is_none()
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = &T> {
        self.first.iter().chain(&self.rest)
    }
}

impl<T> IntoIterator for Items<T> {
    type Item = T;
    type IntoIter = std::iter::Chain<std::option::IntoIter<T>, std::vec::IntoIter<T>>;
    fn into_iter(self) -> Self::IntoIter {
        self.first.into_iter().chain(self.rest)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Items<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ItemsVisitor<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for ItemsVisitor<T> {
            type Value = Items<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an array")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut items = Items { first: seq.next_element()?, rest: Vec::new() };
                if items.first.is_some() {
                    while let Some(item) = seq.next_element()? {
                        items.rest.push(item);
                    }
                }
                Ok(items)
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(Items::default())
            }
        }
        deserializer.deserialize_any(ItemsVisitor(PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::dialect::in_place::assert_keys_match_names;

    #[test]
    fn chunk_keys_are_numbered_by_name() {
        assert_keys_match_names::<Chunk<'_>>();
        assert_keys_match_names::<Candidate<'_>>();
        assert_keys_match_names::<Content<'_>>();
        assert_keys_match_names::<UsageMetadata>();
        for name in ["text", "thought", "thoughtSignature", "functionCall"] {
            assert_eq!(Part::key(name).map(usize::from), Part::NAMES.iter().position(|n| *n == name));
        }
    }
}
