//! Borrowing building blocks for the chunk types, so a text chunk costs one allocation
//! (its text) however it is nested.
//!
//! serde borrows a `Cow<'a, str>` field only when the field is exactly that type; an
//! `Option<Cow<'a, str>>` is always copied. And a `Vec` allocates for its first element,
//! while a chunk nearly always holds one candidate with one part.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{IgnoredAny, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};

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
