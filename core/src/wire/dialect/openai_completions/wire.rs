//! The wire types of a `chat.completion.chunk`, typed and borrowed (text deltas are
//! parsed without copying), and lenient where compatible servers differ: string fields
//! accept `null` or other JSON, tool arguments may be objects.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::Value;

use crate::wire::delta::UsageUpdate;
use crate::wire::dialect::in_place::{read, read_object, Fields, Fill, OptU64};

/// One `chat.completion.chunk`, or an error payload (`{"error":{…}}`), decoded in place
/// ([`in_place`](crate::wire::dialect::in_place)): with every optional field of a choice, a chunk is a few hundred bytes
/// that a derived decoder would copy several times per text delta.
#[derive(Default)]
pub(super) struct Chunk<'a> {
    pub(super) id: Text<'a>,
    pub(super) model: Text<'a>,
    /// Choice 0 only (`n > 1` streams interleave other choices): the first element of
    /// `choices` whose `index` is 0 or missing; the others are decoded and dropped.
    pub(super) choice: Option<Choice<'a>>,
    // Rare and large fields are boxed.
    pub(super) usage: Option<Box<WireUsage>>,
    /// Groq puts usage here (and, lately, also at the top level).
    pub(super) x_groq: Option<Box<XGroq>>,
    pub(super) error: Option<Box<Value>>,
}

impl<'de> Fields<'de> for Chunk<'de> {
    const NAMES: &'static [&'static str] = &["id", "model", "choices", "usage", "x_groq", "error"];

    fn key(name: &str) -> Option<u8> {
        Some(match name {
            "id" => 0,
            "model" => 1,
            "choices" => 2,
            "usage" => 3,
            "x_groq" => 4,
            "error" => 5,
            _ => return None,
        })
    }

    fn field<A: MapAccess<'de>>(&mut self, key: u8, map: &mut A) -> Result<(), A::Error> {
        match key {
            0 => read(map, &mut self.id),
            1 => read(map, &mut self.model),
            2 => map.next_value_seed(FirstChoice(&mut self.choice)),
            3 => read(map, &mut self.usage),
            4 => read(map, &mut self.x_groq),
            _ => read(map, &mut self.error),
        }
    }
}

#[derive(Deserialize)]
pub(super) struct XGroq {
    #[serde(default)]
    pub(super) usage: Option<Box<WireUsage>>,
}

#[derive(Default)]
pub(super) struct Choice<'a> {
    pub(super) index: OptU64,
    pub(super) delta: Option<ChunkDelta<'a>>,
    pub(super) finish_reason: Text<'a>,
    /// Moonshot sends the final usage inside the choice.
    pub(super) usage: Option<Box<WireUsage>>,
}

impl<'de> Fields<'de> for Choice<'de> {
    const NAMES: &'static [&'static str] = &["index", "delta", "finish_reason", "usage"];

    fn key(name: &str) -> Option<u8> {
        Some(match name {
            "index" => 0,
            "delta" => 1,
            "finish_reason" => 2,
            "usage" => 3,
            _ => return None,
        })
    }

    fn field<A: MapAccess<'de>>(&mut self, key: u8, map: &mut A) -> Result<(), A::Error> {
        match key {
            0 => read(map, &mut self.index),
            1 => read_object(map, &mut self.delta),
            2 => read(map, &mut self.finish_reason),
            _ => read(map, &mut self.usage),
        }
    }
}

#[derive(Default)]
pub(super) struct ChunkDelta<'a> {
    pub(super) content: Text<'a>,
    pub(super) reasoning_content: Text<'a>,
    pub(super) reasoning: Text<'a>,
    pub(super) refusal: Text<'a>,
    pub(super) tool_calls: Option<ToolCalls<'a>>,
    pub(super) function_call: Option<Box<FunctionDelta<'a>>>,
}

impl<'de> Fields<'de> for ChunkDelta<'de> {
    const NAMES: &'static [&'static str] =
        &["content", "reasoning_content", "reasoning", "refusal", "tool_calls", "function_call"];

    fn key(name: &str) -> Option<u8> {
        Some(match name {
            "content" => 0,
            "reasoning_content" => 1,
            "reasoning" => 2,
            "refusal" => 3,
            "tool_calls" => 4,
            "function_call" => 5,
            _ => return None,
        })
    }

    fn field<A: MapAccess<'de>>(&mut self, key: u8, map: &mut A) -> Result<(), A::Error> {
        match key {
            0 => read(map, &mut self.content),
            1 => read(map, &mut self.reasoning_content),
            2 => read(map, &mut self.reasoning),
            3 => read(map, &mut self.refusal),
            4 => read(map, &mut self.tool_calls),
            _ => read(map, &mut self.function_call),
        }
    }
}

/// The `tool_calls` array of one chunk. Streams send one call per chunk (the arguments
/// come in fragments of a few bytes, a chunk each), so the first is kept inline and only
/// further ones go to a `Vec`: a fragment costs no allocation for the array.
#[derive(Default)]
pub(super) struct ToolCalls<'a> {
    first: Option<ToolCallDelta<'a>>,
    rest: Vec<ToolCallDelta<'a>>,
}

impl<'a> ToolCalls<'a> {
    /// The array of one call.
    pub(super) fn one(call: ToolCallDelta<'a>) -> Self {
        Self { first: Some(call), rest: Vec::new() }
    }
}

impl<'a> IntoIterator for ToolCalls<'a> {
    type Item = ToolCallDelta<'a>;
    type IntoIter = std::iter::Chain<std::option::IntoIter<ToolCallDelta<'a>>, std::vec::IntoIter<ToolCallDelta<'a>>>;

    fn into_iter(self) -> Self::IntoIter {
        self.first.into_iter().chain(self.rest)
    }
}

impl<'de> Deserialize<'de> for ToolCalls<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Calls;

        impl<'de> Visitor<'de> for Calls {
            type Value = ToolCalls<'de>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an array of tool calls")
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<ToolCalls<'de>, A::Error> {
                let mut calls = ToolCalls { first: seq.next_element()?, rest: Vec::new() };
                while let Some(call) = seq.next_element()? {
                    calls.rest.push(call);
                }
                Ok(calls)
            }
        }

        d.deserialize_seq(Calls)
    }
}

#[derive(Deserialize)]
pub(super) struct ToolCallDelta<'a> {
    #[serde(default)]
    pub(super) index: Option<u64>,
    #[serde(default, borrow)]
    pub(super) id: Text<'a>,
    #[serde(default, borrow)]
    pub(super) function: Option<FunctionDelta<'a>>,
}

#[derive(Deserialize)]
pub(super) struct FunctionDelta<'a> {
    #[serde(default, borrow)]
    pub(super) name: Text<'a>,
    #[serde(default, borrow)]
    pub(super) arguments: Arguments<'a>,
}

/// Usage as the API and its copies report it.
#[derive(Deserialize)]
pub(super) struct WireUsage {
    /// Whole prompt, cached tokens included.
    #[serde(default)]
    pub(super) prompt_tokens: Option<u64>,
    /// Whole output, reasoning included.
    #[serde(default)]
    pub(super) completion_tokens: Option<u64>,
    #[serde(default)]
    pub(super) prompt_tokens_details: Option<PromptDetails>,
    #[serde(default)]
    pub(super) completion_tokens_details: Option<CompletionDetails>,
    /// DeepSeek.
    #[serde(default)]
    pub(super) prompt_cache_hit_tokens: Option<u64>,
    /// Moonshot.
    #[serde(default)]
    pub(super) cached_tokens: Option<u64>,
}

#[derive(Deserialize)]
pub(super) struct PromptDetails {
    #[serde(default)]
    pub(super) cached_tokens: Option<u64>,
    /// OpenRouter.
    #[serde(default)]
    pub(super) cache_write_tokens: Option<u64>,
}

#[derive(Deserialize)]
pub(super) struct CompletionDetails {
    #[serde(default)]
    pub(super) reasoning_tokens: Option<u64>,
}

impl WireUsage {
    /// Cached tokens are taken out of the prompt count; reasoning stays in the output.
    pub(super) fn normalise(&self) -> UsageUpdate {
        let details = self.prompt_tokens_details.as_ref();
        let cache_read = [details.and_then(|d| d.cached_tokens), self.prompt_cache_hit_tokens, self.cached_tokens]
            .into_iter()
            .flatten()
            .max();
        let cache_write = details.and_then(|d| d.cache_write_tokens);
        let reasoning = self.completion_tokens_details.as_ref().and_then(|d| d.reasoning_tokens);
        let prompt = self.prompt_tokens;
        UsageUpdate {
            input_tokens: prompt
                .map(|p| p.saturating_sub(cache_read.unwrap_or(0)).saturating_sub(cache_write.unwrap_or(0))),
            output_tokens: self.completion_tokens,
            cache_read_tokens: cache_read.or(prompt.map(|_| 0)),
            cache_write_tokens: cache_write.or(prompt.map(|_| 0)),
            reasoning_tokens: reasoning.or(self.completion_tokens.map(|_| 0)),
        }
    }
}

/// Fills the choice with index 0 (a missing index counts as 0) from the `choices` array,
/// in place; the other choices are decoded and dropped. `null` means no choice.
struct FirstChoice<'o, 'a>(&'o mut Option<Choice<'a>>);

impl<'de> DeserializeSeed<'de> for FirstChoice<'_, 'de> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for FirstChoice<'_, 'de> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of choices")
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut other = None;
        loop {
            // Until choice 0 is found, each choice is decoded straight into its place.
            let slot = if self.0.is_none() { &mut *self.0 } else { &mut other };
            let present = seq.next_element_seed(FillChoice(slot))?;
            if present.is_none() {
                return Ok(());
            }
            if self.0.as_ref().is_some_and(|c| c.index.0.unwrap_or(0) != 0) {
                *self.0 = None;
            }
        }
    }
}

/// One element of `choices`, decoded into `slot`.
struct FillChoice<'o, 'a>(&'o mut Option<Choice<'a>>);

impl<'de> DeserializeSeed<'de> for FillChoice<'_, 'de> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        Fill(self.0.insert(Choice::default())).deserialize(d)
    }
}

/// A string field: strings are kept (borrowed when unescaped); `null`, numbers, arrays
/// and objects (some servers send content parts) read as absent rather than failing.
#[derive(Debug, Default)]
pub(super) struct Text<'a>(pub(super) Option<Cow<'a, str>>);

/// Tool arguments: a JSON string as sent by the API; an object or array (sent by some
/// servers) is kept as its JSON text.
#[derive(Debug, Default)]
pub(super) struct Arguments<'a>(pub(super) Option<Cow<'a, str>>);

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(LenientString { keep_json: false }).map(Text)
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Arguments<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(LenientString { keep_json: true }).map(Arguments)
    }
}

struct LenientString {
    /// Keep objects and arrays as JSON text instead of dropping them.
    keep_json: bool,
}

impl<'de> Visitor<'de> for LenientString {
    type Value = Option<Cow<'de, str>>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Some(Cow::Borrowed(v)))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Some(Cow::Owned(v.to_string())))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(Some(Cow::Owned(v)))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        if self.keep_json {
            let value = Value::deserialize(de::value::SeqAccessDeserializer::new(seq))?;
            return Ok(Some(Cow::Owned(value.to_string())));
        }
        IgnoredAny.visit_seq(seq).map(|_| None)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        if self.keep_json {
            let value = Value::deserialize(de::value::MapAccessDeserializer::new(map))?;
            return Ok(Some(Cow::Owned(value.to_string())));
        }
        IgnoredAny.visit_map(map).map(|_| None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::dialect::in_place::assert_keys_match_names;

    #[test]
    fn chunk_keys_are_numbered_by_name() {
        assert_keys_match_names::<Chunk<'_>>();
        assert_keys_match_names::<Choice<'_>>();
        assert_keys_match_names::<ChunkDelta<'_>>();
    }
}
