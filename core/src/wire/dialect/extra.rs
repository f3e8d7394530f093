//! Provider-specific options ([`Options::extra`]) merged into a built request body.
//!
//! Each dialect declares the extra keys it knows ([`tables`]): the provider's wire name,
//! the object of the body it goes in, its JSON type. After the dialect's builder has
//! written the body, every extra key is merged into it:
//!
//! - a key for a field omni's own options drive (`max_tokens`, `temperature`, `stop`,
//!   `tools`, `messages` ...) is [`RequestError::ExtraOptionCollides`], naming the option
//!   to use, whether or not omni set that field this time: the same extra options never
//!   work with one set of options and fail with another;
//! - a known key goes at its place (creating the parent object when absent); a value of
//!   another JSON type is sent all the same with an `extra_option_type` warning (`null` is
//!   accepted for any key: providers read it as unset);
//! - an unknown key is sent at the top level as given, with an `unknown_extra_option`
//!   warning naming the closest key the dialect knows;
//! - a field the builder has already written is never overwritten: an
//!   [`RequestError::ExtraOptionCollides`] (`reasoning_effort` when `thinking` is set on
//!   Chat Completions, `num_predict` with `max_tokens` on Ollama ...).
//!
//! With `strict_extra`, the two warnings are [`RequestError::InvalidExtraOption`] instead.

mod tables;
#[cfg(test)]
mod tests;

use std::fmt;

use serde_json::{Map, Value};

use super::{Dialect, RequestSpec};
use crate::data::catalogue::suggest;
use crate::data::error::RequestError;
use crate::data::options::Options;
use crate::data::response::Warning;

/// The JSON type a known key takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A whole number.
    Integer,
    /// Any number.
    Number,
    /// A string.
    String,
    /// `true` or `false`.
    Boolean,
    /// An array.
    Array,
    /// An object.
    Object,
    /// One of these strings.
    OneOf(&'static [&'static str]),
    /// A string or a number (Ollama's `keep_alive`: `"5m"` or seconds).
    StringOrNumber,
}

impl Kind {
    /// True when `value` has this type (`null` always does).
    fn accepts(self, value: &Value) -> bool {
        match (self, value) {
            (_, Value::Null) => true,
            (Self::Integer, Value::Number(n)) => n.is_i64() || n.is_u64(),
            (Self::Number | Self::StringOrNumber, Value::Number(_)) => true,
            (Self::String | Self::StringOrNumber, Value::String(_)) => true,
            (Self::OneOf(allowed), Value::String(s)) => allowed.contains(&s.as_str()),
            (Self::Boolean, Value::Bool(_)) => true,
            (Self::Array, Value::Array(_)) => true,
            (Self::Object, Value::Object(_)) => true,
            _ => false,
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Integer => f.write_str("an integer"),
            Self::Number => f.write_str("a number"),
            Self::String => f.write_str("a string"),
            Self::Boolean => f.write_str("a boolean"),
            Self::Array => f.write_str("an array"),
            Self::Object => f.write_str("an object"),
            Self::StringOrNumber => f.write_str("a string or a number"),
            Self::OneOf(allowed) => {
                f.write_str("one of ")?;
                for (at, name) in allowed.iter().enumerate() {
                    let sep = if at == 0 { "" } else { ", " };
                    write!(f, "{sep}\"{name}\"")?;
                }
                Ok(())
            }
        }
    }
}

/// What a value is, for a message.
fn describe(value: &Value) -> String {
    match value {
        Value::Null => "null".into(),
        Value::Bool(_) => "a boolean".into(),
        Value::Number(n) if n.is_f64() => "a fractional number".into(),
        Value::Number(_) => "an integer".into(),
        Value::String(s) if s.chars().count() <= 40 => format!("{s:?}"),
        Value::String(_) => "a long string".into(),
        Value::Array(_) => "an array".into(),
        Value::Object(_) => "an object".into(),
    }
}

/// A key a dialect knows.
#[derive(Debug, Clone, Copy)]
struct Known {
    /// The wire name, as the user writes it.
    name: &'static str,
    /// The object of the body it goes in; `None`: the top level.
    parent: Option<&'static str>,
    /// Its JSON type.
    kind: Kind,
    /// When omni may set the same field: what to do instead, for the collision error.
    set_by: Option<&'static str>,
}

/// The extra keys of one dialect (and provider).
#[derive(Debug, Clone, Copy)]
struct Table {
    /// Keys the dialect knows.
    known: &'static [Known],
    /// Keys this provider adds (OpenRouter's routing on Chat Completions).
    more: &'static [Known],
    /// Fields omni's own options drive, with what to use instead.
    owned: &'static [(&'static str, &'static str)],
}

impl Table {
    /// The table of `dialect`, with the additions of the provider at `base_url`.
    fn of(dialect: Dialect, base_url: &str) -> Self {
        let (known, owned) = match dialect {
            Dialect::AnthropicMessages => (tables::ANTHROPIC, tables::ANTHROPIC_OWNED),
            Dialect::OpenaiCompletions => (tables::OPENAI_COMPLETIONS, tables::OPENAI_COMPLETIONS_OWNED),
            Dialect::OpenaiResponses => (tables::OPENAI_RESPONSES, tables::OPENAI_RESPONSES_OWNED),
            Dialect::GoogleGemini => (tables::GEMINI, tables::GEMINI_OWNED),
            Dialect::OllamaChat => (tables::OLLAMA, tables::OLLAMA_OWNED),
            // An application's format declares no keys: every extra one is sent top-level
            // with a warning (an error in strict mode), never over a field it wrote.
            Dialect::Custom(_) => (&[][..], &[][..]),
        };
        let more = match dialect {
            Dialect::OpenaiCompletions if is_openrouter(base_url) => tables::OPENROUTER,
            _ => &[],
        };
        Self { known, more, owned }
    }

    fn known(&self, key: &str) -> Option<&'static Known> {
        self.known.iter().chain(self.more).find(|k| k.name == key)
    }

    fn owned(&self, key: &str) -> Option<&'static str> {
        self.owned.iter().find(|(name, _)| *name == key).map(|(_, instead)| *instead)
    }

    /// The closest known or owned key to `key`, for a "did you mean".
    fn suggestion(&self, key: &str) -> Option<String> {
        let names = self.known.iter().chain(self.more).map(|k| k.name).chain(self.owned.iter().map(|(name, _)| *name));
        suggest::closest(key, names, 1).into_iter().next()
    }
}

/// True for a base URL whose host is OpenRouter's.
fn is_openrouter(base_url: &str) -> bool {
    let rest = base_url.split_once("://").map_or(base_url, |(_, rest)| rest);
    let host = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = host.rsplit_once('@').map_or(host, |(_, host)| host);
    let host = host.split(':').next().unwrap_or("").to_ascii_lowercase();
    host == "openrouter.ai" || host.ends_with(".openrouter.ai")
}

/// Merges `spec.options.extra` into `body`, the object the dialect's builder wrote, by the
/// rules of the module documentation.
pub(crate) fn merge(
    dialect: Dialect,
    spec: &RequestSpec<'_>,
    body: &mut Value,
    warnings: &mut Vec<Warning>,
) -> Result<(), RequestError> {
    let options: &Options = spec.options;
    if options.extra.is_empty() {
        return Ok(());
    }
    let Value::Object(body) = body else {
        return Err(RequestError::Unsupported { message: "extra options need a JSON object body".into() });
    };
    let table = Table::of(dialect, &spec.provider.base_url);
    let strict = options.strict_extra == Some(true);
    let collides = |key: &str, instead: Option<&str>| RequestError::ExtraOptionCollides {
        key: key.to_string(),
        instead: instead.map(str::to_string),
    };
    for (key, value) in &options.extra {
        if let Some(instead) = table.owned(key) {
            return Err(collides(key, Some(instead)));
        }
        let Some(known) = table.known(key) else {
            if body.contains_key(key) {
                return Err(collides(key, None));
            }
            let mut reason = format!("not a key the {dialect} dialect knows");
            if let Some(close) = table.suggestion(key) {
                reason.push_str(&format!(" (did you mean `{close}`?)"));
            }
            if strict {
                return Err(RequestError::InvalidExtraOption { key: key.clone(), reason });
            }
            warnings.push(Warning {
                code: "unknown_extra_option".into(),
                message: format!("extra option `{key}`: {reason}; sent as given at the top level of the body"),
            });
            body.insert(key.clone(), value.clone());
            continue;
        };
        let slot = match known.parent {
            None => &mut *body,
            Some(parent) => match body.entry(parent).or_insert_with(|| Value::Object(Map::new())) {
                Value::Object(slot) => slot,
                _ => return Err(collides(key, known.set_by)),
            },
        };
        if slot.contains_key(key) {
            return Err(collides(key, known.set_by));
        }
        if !known.kind.accepts(value) {
            let reason = format!("the {dialect} dialect expects {}, got {}", known.kind, describe(value));
            if strict {
                return Err(RequestError::InvalidExtraOption { key: key.clone(), reason });
            }
            warnings.push(Warning {
                code: "extra_option_type".into(),
                message: format!("extra option `{key}`: {reason}; sent as given"),
            });
        }
        slot.insert(key.clone(), value.clone());
    }
    Ok(())
}
