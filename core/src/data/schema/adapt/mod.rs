//! Fitting a JSON Schema to what each provider accepts.
//!
//! Providers take different subsets of JSON Schema, and some reject a request over one
//! keyword they do not know. Each function here takes the schema a user gave (a tool's
//! input schema or a structured-output schema) and returns the schema to send plus a
//! warning for anything removed or changed. They are pure and deterministic. Replies are
//! still validated against the original schema, so an adaptation only loosens or reshapes
//! what the provider enforces, never what omni accepts.
//!
//! | provider | function | what changes |
//! |---|---|---|
//! | OpenAI strict mode | [`openai_strict`] | objects closed, optional properties required and nullable, unsupported keywords removed; if it cannot fit, the original is sent with `strict: false` |
//! | Gemini | [`gemini`] | only the documented keyword list is kept; `const`, exclusive bounds, `definitions` converted |
//! | Anthropic structured outputs | [`anthropic_output`] | objects closed, constraints removed |
//! | Ollama | [`ollama`] | nothing: the schema becomes a grammar that skips what it does not know |
//!
//! A removed keyword with a plain value is appended to the description
//! (`{minLength: 3}`), as Anthropic's SDKs do, so the model still reads it.
//!
//! Strict mode's nullable stand-ins for optional properties come back as `null`;
//! [`validate_adapted`] drops those before giving up on a reply.

mod anthropic;
mod gemini;
mod openai;
mod walk;

#[cfg(test)]
mod tests;

use serde_json::Value;

pub use anthropic::anthropic_output;
pub use gemini::gemini;
pub use openai::{is_openai_strict, openai_strict};

use super::{ValidationError, Validator};
use crate::data::depth::MAX_DEPTH;
use crate::data::response::Warning;
use walk::{accepts_null, resolve};

/// Ollama's `format` and tool `parameters`: sent as given. Ollama turns `format` into a
/// sampling grammar that ignores keywords it does not handle, and reads tool parameters
/// into its own types, dropping unknown fields; neither rejects a schema (Ollama's API
/// documentation, "Structured outputs", names no limits).
pub fn ollama(schema: &Value) -> (Value, Vec<Warning>) {
    (schema.clone(), Vec::new())
}

/// Prefixes each warning with what its schema belongs to, e.g. ``tool `search` ``.
pub fn label(warnings: Vec<Warning>, subject: &str) -> impl Iterator<Item = Warning> + '_ {
    warnings.into_iter().map(move |w| Warning { message: format!("{subject}: {}", w.message), ..w })
}

/// Validates a value the model produced for an adapted schema. Strict mode makes optional
/// properties required and nullable, so the model says `null` for "absent": when the value
/// fails, such nulls are removed and the value checked again, and the errors that remain
/// are the real ones. A value nested deeper than [`MAX_DEPTH`] is refused whatever the
/// validator (see [`MAX_DEPTH`](crate::data::depth::MAX_DEPTH)).
pub fn validate_adapted(validator: &dyn Validator, value: &Value) -> Result<Value, ValidationError> {
    super::validate::refuse_too_deep(value)?;
    let err = match validator.validate(value) {
        Ok(valid) => return Ok(valid),
        Err(err) => err,
    };
    let mut cleaned = value.clone();
    if drop_optional_nulls(validator.schema(), &mut cleaned) {
        validator.validate(&cleaned)
    } else {
        Err(err)
    }
}

/// Removes `null` values of properties that `schema` leaves optional and does not allow
/// to be null, following `properties`, `items`, `prefixItems`, `additionalProperties`,
/// combinators and local references. Returns true when something was removed.
pub fn drop_optional_nulls(schema: &Value, value: &mut Value) -> bool {
    drop_nulls(schema, schema, value, 0)
}

fn drop_nulls(root: &Value, schema: &Value, value: &mut Value, depth: usize) -> bool {
    let Value::Object(node) = schema else { return false };
    // References can loop: the walk stops at the depth bound.
    if depth > MAX_DEPTH {
        return false;
    }
    let mut changed = false;
    if let Some(target) = node.get("$ref").and_then(Value::as_str).and_then(|r| resolve(root, r)) {
        changed |= drop_nulls(root, target, value, depth + 1);
    }
    for key in ["allOf", "anyOf", "oneOf"] {
        for branch in node.get(key).and_then(Value::as_array).into_iter().flatten() {
            changed |= drop_nulls(root, branch, value, depth + 1);
        }
    }
    match value {
        Value::Object(map) => {
            let props = node.get("properties").and_then(Value::as_object);
            let required = node.get("required").and_then(Value::as_array);
            let nullable = |schema: &Value| {
                let target = schema.get("$ref").and_then(Value::as_str).and_then(|r| resolve(root, r));
                accepts_null(target.unwrap_or(schema))
            };
            let absent: Vec<String> = map
                .iter()
                .filter(|(name, v)| {
                    v.is_null()
                        && !required.is_some_and(|r| r.iter().any(|n| n == name.as_str()))
                        && props.and_then(|p| p.get(name.as_str())).is_some_and(|s| !nullable(s))
                })
                .map(|(name, _)| name.clone())
                .collect();
            for name in absent {
                map.remove(&name);
                changed = true;
            }
            let extra = node.get("additionalProperties").filter(|s| s.is_object());
            for (name, v) in map.iter_mut() {
                if let Some(sub) = props.and_then(|p| p.get(name)).or(extra) {
                    changed |= drop_nulls(root, sub, v, depth + 1);
                }
            }
        }
        Value::Array(items) => {
            let prefix = node.get("prefixItems").and_then(Value::as_array);
            let rest = node.get("items").filter(|s| s.is_object());
            for (i, item) in items.iter_mut().enumerate() {
                if let Some(sub) = prefix.and_then(|p| p.get(i)).or(rest) {
                    changed |= drop_nulls(root, sub, item, depth + 1);
                }
            }
        }
        _ => {}
    }
    changed
}
