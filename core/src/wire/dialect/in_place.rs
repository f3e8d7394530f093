//! Decoding JSON objects in place, for the hot events of the dialects.
//!
//! A derived `Deserialize` builds its struct in the visitor and returns it through
//! several layers of serde and serde_json, each a copy. For a stream chunk that is a
//! couple of hundred bytes (every optional field of a choice or a part), those copies
//! cost more than decoding the JSON did. Here the caller owns the struct, starting from
//! its default, and a visitor writes each field straight into it ([`Fill`]); only the
//! small field values move.
//!
//! Decoding matches the derived types: unknown keys are skipped, `null` for an optional
//! object leaves it absent, a repeated key is an error. Keys are matched as
//! they are parsed ([`Fields::key`]), and optional scalars are read in one step
//! ([`OptStr`], [`OptU64`]) rather than through `deserialize_option`: on a short event
//! those layers are a measurable share of the decode.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;

use crate::data::error::StreamError;

/// A struct whose fields are read one by one from a JSON object.
pub(crate) trait Fields<'de>: Default {
    /// The keys this struct reads, numbered by position (at most 64).
    const NAMES: &'static [&'static str];
    /// A repeated key is an error, as in a derived decoder.
    const REFUSE_REPEATS: bool = true;
    /// The number of a key in [`NAMES`](Self::NAMES), or `None` for a key to skip.
    /// Matched while the key is parsed, as a derived field identifier is.
    fn key(name: &str) -> Option<u8>;
    /// Reads the value of key number `key` into `self`.
    fn field<A: MapAccess<'de>>(&mut self, key: u8, map: &mut A) -> Result<(), A::Error>;
}

/// Reads a field's value into `slot`.
pub(crate) fn read<'de, A: MapAccess<'de>, T: Deserialize<'de>>(map: &mut A, slot: &mut T) -> Result<(), A::Error> {
    *slot = map.next_value()?;
    Ok(())
}

/// Reads an optional object field into `slot` in place (`null` leaves it `None`).
pub(crate) fn read_object<'de, A: MapAccess<'de>, T: Fields<'de>>(
    map: &mut A,
    slot: &mut Option<T>,
) -> Result<(), A::Error> {
    map.next_value_seed(FillOption(slot))
}

/// Decodes one event payload into `out`, in place.
pub(crate) fn parse_into<'de, T: Fields<'de>>(data: &'de str, out: &mut T) -> Result<(), StreamError> {
    let mut de = serde_json::Deserializer::from_str(data);
    Fill(out).deserialize(&mut de).and_then(|()| de.end()).map_err(|e| StreamError::decode(e, data))
}

/// Seed and visitor that fill a [`Fields`] struct from an object.
pub(crate) struct Fill<'o, T>(pub(crate) &'o mut T);

impl<'de, T: Fields<'de>> DeserializeSeed<'de> for Fill<'_, T> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de, T: Fields<'de>> Visitor<'de> for Fill<'_, T> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = 0u64;
        while let Some(key) = map.next_key_seed(KeyOf::<T>(PhantomData))? {
            let Some(key) = key else {
                map.next_value::<IgnoredAny>()?;
                continue;
            };
            let bit = 1u64 << (key & 63);
            if T::REFUSE_REPEATS && seen & bit != 0 {
                return Err(de::Error::duplicate_field(T::NAMES.get(usize::from(key)).copied().unwrap_or("?")));
            }
            seen |= bit;
            self.0.field(key, &mut map)?;
        }
        Ok(())
    }
}

/// Seed and visitor for an optional object: filled in place when present.
struct FillOption<'o, T>(&'o mut Option<T>);

impl<'de, T: Fields<'de>> DeserializeSeed<'de> for FillOption<'_, T> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_option(self)
    }
}

impl<'de, T: Fields<'de>> Visitor<'de> for FillOption<'_, T> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object or null")
    }

    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        Fill(self.0.insert(T::default())).deserialize(deserializer)
    }
}

/// An object key, numbered by [`Fields::key`] while it is parsed.
struct KeyOf<T>(PhantomData<T>);

impl<'de, T: Fields<'de>> DeserializeSeed<'de> for KeyOf<T> {
    type Value = Option<u8>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Option<u8>, D::Error> {
        deserializer.deserialize_identifier(self)
    }
}

impl<'de, T: Fields<'de>> Visitor<'de> for KeyOf<T> {
    type Value = Option<u8>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<Option<u8>, E> {
        Ok(T::key(key))
    }
}

/// An optional string: `Option<Cow<str>>` as serde reads it (`null` is `None`, any other
/// type an error), but borrowed when unescaped (serde copies a `Cow` inside an `Option`),
/// and read in one step rather than through `deserialize_option`.
#[derive(Debug, Default)]
pub(crate) struct OptStr<'a>(pub(crate) Option<Cow<'a, str>>);

impl<'a> OptStr<'a> {
    /// The string, if any.
    pub(crate) fn as_deref(&self) -> Option<&str> {
        self.0.as_deref()
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for OptStr<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct OptStrVisitor<'a>(PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for OptStrVisitor<'a> {
            type Value = OptStr<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string or null")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(OptStr(Some(Cow::Borrowed(v))))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(OptStr(Some(Cow::Owned(v.to_string()))))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(OptStr(Some(Cow::Owned(v))))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(OptStr(None))
            }
            fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(OptStr(None))
            }
        }
        deserializer.deserialize_any(OptStrVisitor(PhantomData))
    }
}

/// An optional non-negative integer: `Option<u64>` as serde reads it, in one step.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct OptU64(pub(crate) Option<u64>);

impl<'de> Deserialize<'de> for OptU64 {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct OptU64Visitor;
        impl<'de> Visitor<'de> for OptU64Visitor {
            type Value = OptU64;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a non-negative integer or null")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
                Ok(OptU64(Some(v)))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
                u64::try_from(v)
                    .map(|v| OptU64(Some(v)))
                    .map_err(|_| E::invalid_value(de::Unexpected::Signed(v), &self))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(OptU64(None))
            }
            fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(OptU64(None))
            }
        }
        deserializer.deserialize_any(OptU64Visitor)
    }
}

/// Checks that [`Fields::key`] numbers every name by its position in [`Fields::NAMES`].
#[cfg(test)]
pub(crate) fn assert_keys_match_names<'de, T: Fields<'de>>() {
    assert!(T::NAMES.len() <= 64);
    for (i, name) in T::NAMES.iter().enumerate() {
        assert_eq!(T::key(name).map(usize::from), Some(i), "key {name:?}");
    }
}
