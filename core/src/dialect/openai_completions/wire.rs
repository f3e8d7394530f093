//! The wire types of a `chat.completion.chunk`, typed and borrowed (text deltas are
//! parsed without copying), and lenient where compatible servers differ: string fields
//! accept `null` or other JSON, tool arguments may be objects.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::Value;

use crate::delta::UsageUpdate;

/// One `chat.completion.chunk`, or an error payload (`{"error":{…}}`).
#[derive(Deserialize)]
pub(super) struct Chunk<'a> {
    #[serde(default, borrow)]
    pub(super) id: Text<'a>,
    #[serde(default, borrow)]
    pub(super) model: Text<'a>,
    /// Choice 0 only (`n > 1` streams interleave other choices), read without a `Vec`.
    #[serde(default, borrow)]
    pub(super) choices: FirstChoice<'a>,
    // Rare and large fields are boxed: chunks are moved by value while decoding.
    #[serde(default)]
    pub(super) usage: Option<Box<WireUsage>>,
    /// Groq puts usage here (and, lately, also at the top level).
    #[serde(default)]
    pub(super) x_groq: Option<Box<XGroq>>,
    #[serde(default)]
    pub(super) error: Option<Box<Value>>,
}

#[derive(Deserialize)]
pub(super) struct XGroq {
    #[serde(default)]
    pub(super) usage: Option<Box<WireUsage>>,
}

#[derive(Deserialize)]
pub(super) struct Choice<'a> {
    #[serde(default)]
    pub(super) index: Option<u64>,
    #[serde(default, borrow)]
    pub(super) delta: Option<ChunkDelta<'a>>,
    #[serde(default, borrow)]
    pub(super) finish_reason: Text<'a>,
    /// Moonshot sends the final usage inside the choice.
    #[serde(default)]
    pub(super) usage: Option<Box<WireUsage>>,
}

#[derive(Deserialize)]
pub(super) struct ChunkDelta<'a> {
    #[serde(default, borrow)]
    pub(super) content: Text<'a>,
    #[serde(default, borrow)]
    pub(super) reasoning_content: Text<'a>,
    #[serde(default, borrow)]
    pub(super) reasoning: Text<'a>,
    #[serde(default, borrow)]
    pub(super) refusal: Text<'a>,
    #[serde(default, borrow)]
    pub(super) tool_calls: Option<Vec<ToolCallDelta<'a>>>,
    #[serde(default, borrow)]
    pub(super) function_call: Option<Box<FunctionDelta<'a>>>,
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

/// The choice with index 0 from the `choices` array (a missing index counts as 0);
/// the other choices are parsed and dropped.
#[derive(Default)]
pub(super) struct FirstChoice<'a>(pub(super) Option<Choice<'a>>);

impl<'de: 'a, 'a> Deserialize<'de> for FirstChoice<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Choices<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for Choices<'a> {
            type Value = FirstChoice<'a>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an array of choices")
            }

            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(FirstChoice(None))
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut first = None;
                while let Some(choice) = seq.next_element::<Choice<'de>>()? {
                    if first.is_none() && choice.index.unwrap_or(0) == 0 {
                        first = Some(choice);
                    }
                }
                Ok(FirstChoice(first))
            }
        }
        d.deserialize_any(Choices(std::marker::PhantomData))
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
