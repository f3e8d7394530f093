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
//! object leaves it absent, a repeated key is an error ([`Seen`]).

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;

use crate::error::StreamError;

/// A struct whose fields are read one by one from a JSON object.
pub(crate) trait Fields<'de>: Default {
    /// Reads the value of `key` into `self` and returns true; returns false, without
    /// reading, for a key this struct does not know.
    fn field<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A, seen: &mut Seen) -> Result<bool, A::Error>;
}

/// The known keys read so far in one object, to refuse a repeated key.
#[derive(Debug, Default)]
pub(crate) struct Seen(u64);

impl Seen {
    /// Marks field `bit` (below 64) as read; an error if it was already.
    pub(crate) fn once<E: de::Error>(&mut self, bit: u32, name: &'static str) -> Result<(), E> {
        let mask = 1u64 << bit;
        if self.0 & mask != 0 {
            return Err(E::duplicate_field(name));
        }
        self.0 |= mask;
        Ok(())
    }
}

/// Reads a field's value into `slot`.
pub(crate) fn read<'de, A: MapAccess<'de>, T: Deserialize<'de>>(
    map: &mut A,
    seen: &mut Seen,
    (bit, name): (u32, &'static str),
    slot: &mut T,
) -> Result<(), A::Error> {
    seen.once(bit, name)?;
    *slot = map.next_value()?;
    Ok(())
}

/// Reads an optional object field into `slot` in place (`null` leaves it `None`).
pub(crate) fn read_object<'de, A: MapAccess<'de>, T: Fields<'de>>(
    map: &mut A,
    seen: &mut Seen,
    (bit, name): (u32, &'static str),
    slot: &mut Option<T>,
) -> Result<(), A::Error> {
    seen.once(bit, name)?;
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
        let mut seen = Seen::default();
        while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
            if !self.0.field(&key, &mut map, &mut seen)? {
                map.next_value::<IgnoredAny>()?;
            }
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

/// An object key, borrowed unless it holds escapes.
struct Key<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor<'a>(PhantomData<&'a ()>);
        impl<'de> Visitor<'de> for KeyVisitor<'de> {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object key")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Key(Cow::Owned(v.to_string())))
            }
        }
        deserializer.deserialize_str(KeyVisitor(PhantomData))
    }
}
