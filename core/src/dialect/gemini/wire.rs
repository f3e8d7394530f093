//! The `GenerateContentResponse` chunk as typed, borrowed structs, shaped for speed: a
//! text chunk costs one allocation (its text) and little more than a bare decode.
//!
//! - serde borrows a `Cow<'a, str>` field only when the field is exactly that type; an
//!   `Option<Cow<'a, str>>` is always copied, hence [`Str`].
//! - A `Vec` allocates for its first element, while a chunk nearly always holds one
//!   candidate with one part, hence [`First`] and [`Items`].
//! - [`Part`] is decoded by hand: a derived visitor with every rare field (function
//!   calls, code execution, media) was twice as slow on text chunks. A function call is
//!   kept raw and parsed only when present.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

use super::partial_args::PartialArg;

/// One streamed chunk.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Chunk<'a> {
    #[serde(borrow, default)]
    pub(super) candidates: First<Candidate<'a>>,
    #[serde(borrow, default)]
    pub(super) prompt_feedback: Option<PromptFeedback<'a>>,
    #[serde(default)]
    pub(super) usage_metadata: Option<UsageMetadata>,
    #[serde(borrow, default)]
    pub(super) model_version: Option<Str<'a>>,
    #[serde(borrow, default)]
    pub(super) response_id: Option<Str<'a>>,
    /// An in-stream error (`google.rpc.Status`).
    #[serde(borrow, default)]
    pub(super) error: Option<&'a RawValue>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Candidate<'a> {
    #[serde(borrow, default)]
    pub(super) content: Option<Content<'a>>,
    #[serde(borrow, default)]
    pub(super) finish_reason: Option<Str<'a>>,
}

#[derive(Deserialize)]
pub(super) struct Content<'a> {
    #[serde(borrow, default)]
    pub(super) parts: Items<Part<'a>>,
}

/// One part: text (a thought when `thought`), a function call, or a kind omni does not
/// model; any of them may carry a `thoughtSignature`.
pub(super) struct Part<'a> {
    pub(super) text: Option<Str<'a>>,
    pub(super) thought: bool,
    pub(super) thought_signature: Option<Str<'a>>,
    /// The raw `functionCall` object, parsed as [`FunctionCall`] when present.
    pub(super) function_call: Option<&'a RawValue>,
    /// Code execution or media (`executableCode`, `codeExecutionResult`, `inlineData`,
    /// `fileData`): no block in omni, but it separates the text around it.
    pub(super) unmodelled_kind: bool,
}

impl<'de: 'a, 'a> Deserialize<'de> for Part<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct PartVisitor<'a>(PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for PartVisitor<'a> {
            type Value = Part<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a content part object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Part<'a>, A::Error> {
                let mut part = Part {
                    text: None,
                    thought: false,
                    thought_signature: None,
                    function_call: None,
                    unmodelled_kind: false,
                };
                while let Some(Str(key)) = map.next_key::<Str<'a>>()? {
                    match &*key {
                        "text" => part.text = map.next_value()?,
                        "thought" => part.thought = map.next_value::<Option<bool>>()?.unwrap_or(false),
                        "thoughtSignature" => part.thought_signature = map.next_value()?,
                        "functionCall" => part.function_call = map.next_value()?,
                        "executableCode" | "codeExecutionResult" | "inlineData" | "fileData" => {
                            map.next_value::<IgnoredAny>()?;
                            part.unmodelled_kind = true;
                        }
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(part)
            }
        }
        deserializer.deserialize_map(PartVisitor(PhantomData))
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
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct UsageMetadata {
    pub(super) prompt_token_count: Option<u64>,
    pub(super) cached_content_token_count: Option<u64>,
    pub(super) candidates_token_count: Option<u64>,
    pub(super) tool_use_prompt_token_count: Option<u64>,
    pub(super) thoughts_token_count: Option<u64>,
}

/// A string borrowed from the event data (owned only when it had escapes).
#[derive(Debug, Deserialize)]
#[serde(transparent)]
pub(super) struct Str<'a>(#[serde(borrow)] pub(super) Cow<'a, str>);

/// The first element of a JSON array; later elements are skipped without being kept.
#[derive(Debug)]
pub(super) struct First<T>(pub(super) Option<T>);

impl<T> Default for First<T> {
    fn default() -> Self {
        First(None)
    }
}

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
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(First(None))
            }
        }
        deserializer.deserialize_any(FirstVisitor(PhantomData))
    }
}

/// The elements of a JSON array, the first kept inline: no allocation for one element.
#[derive(Debug)]
pub(super) struct Items<T> {
    first: Option<T>,
    rest: Vec<T>,
}

impl<T> Default for Items<T> {
    fn default() -> Self {
        Items { first: None, rest: Vec::new() }
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
