//! Validation behind a trait: the `jsonschema` crate (feature `jsonschema`, on by
//! default) or the [built-in subset](super::BuiltinValidator), anything else a user plugs
//! in. A schema is compiled once and reused for every value.

use std::fmt;

use serde_json::Value;

use crate::data::depth::{self, MAX_DEPTH};

/// At most this many problems are reported at once: enough to fix, short enough for a model.
pub(super) const MAX_REPORTED: usize = 3;

/// Why a value does not match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidationError {
    /// JSON Pointer of the first offending value (`""` for the root).
    pub path: String,
    /// What is wrong, short and readable (several problems joined with `; `).
    pub message: String,
}

impl fmt::Display for ValidationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "at {}: {}", self.path, self.message)
        }
    }
}

impl std::error::Error for ValidationError {}

/// A schema that cannot be compiled.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SchemaError {
    /// Not a valid JSON Schema (or nested too deeply): what is wrong.
    Invalid(String),
    /// A valid schema using a keyword the [built-in validator](super::BuiltinValidator)
    /// does not check (`pattern`, `patternProperties`, a remote `$ref` …). Refused rather
    /// than let values through unchecked; the `jsonschema` feature checks them.
    Unsupported {
        /// The keyword, as written in the schema (a `$ref` with its target).
        keyword: String,
        /// JSON Pointer of the keyword in the schema.
        path: String,
    },
}

impl fmt::Display for SchemaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Invalid(problem) => write!(f, "invalid JSON Schema: {problem}"),
            Self::Unsupported { keyword, path } => write!(
                f,
                "the JSON Schema keyword `{keyword}` (at {path}) is not supported by omni's built-in validator; \
                 enable omni's `jsonschema` feature to check it"
            ),
        }
    }
}

impl std::error::Error for SchemaError {}

/// Something that gives a wire schema and checks values against it. Anywhere omni takes
/// a schema, it takes one of these too.
pub trait Validator: Send + Sync + fmt::Debug {
    /// The JSON Schema sent to the provider.
    fn schema(&self) -> &Value;

    /// Checks `value`; returns the value to use (a validator may cast or normalise it).
    fn validate(&self, value: &Value) -> Result<Value, ValidationError>;
}

/// The default validator, compiled once: the `jsonschema` crate with the `jsonschema`
/// feature (on by default, every draft and keyword), else the
/// [built-in validator](super::BuiltinValidator) (the common subset; a schema with a
/// keyword outside it is refused with [`SchemaError::Unsupported`]).
pub struct JsonSchemaValidator {
    schema: Value,
    compiled: Compiled,
}

#[cfg(feature = "jsonschema")]
type Compiled = jsonschema::Validator;
#[cfg(not(feature = "jsonschema"))]
type Compiled = super::BuiltinValidator;

impl fmt::Debug for JsonSchemaValidator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JsonSchemaValidator").field("schema", &self.schema).finish_non_exhaustive()
    }
}

impl JsonSchemaValidator {
    /// Compiles `schema` (the draft is taken from `$schema`, 2020-12 by default). A schema
    /// nested deeper than [`MAX_DEPTH`] levels is refused: compiling it recurses once per
    /// level (see [`MAX_DEPTH`](crate::data::depth::MAX_DEPTH)).
    pub fn new(schema: Value) -> Result<Self, SchemaError> {
        if depth::exceeds(&schema, MAX_DEPTH) {
            return Err(SchemaError::Invalid(format!("the schema is nested deeper than {MAX_DEPTH} levels")));
        }
        #[cfg(feature = "jsonschema")]
        let compiled = jsonschema::validator_for(&schema).map_err(|e| SchemaError::Invalid(e.to_string()))?;
        #[cfg(not(feature = "jsonschema"))]
        let compiled = super::BuiltinValidator::new(schema.clone())?;
        Ok(Self { schema, compiled })
    }
}

impl Validator for JsonSchemaValidator {
    fn schema(&self) -> &Value {
        &self.schema
    }

    #[cfg(not(feature = "jsonschema"))]
    fn validate(&self, value: &Value) -> Result<Value, ValidationError> {
        self.compiled.validate(value)
    }

    /// Checks `value`; a value nested deeper than [`MAX_DEPTH`] levels is refused before
    /// `jsonschema` walks it (it recurses once per level).
    #[cfg(feature = "jsonschema")]
    fn validate(&self, value: &Value) -> Result<Value, ValidationError> {
        refuse_too_deep(value)?;
        let mut errors = self.compiled.iter_errors(value).peekable();
        let Some(first) = errors.next() else { return Ok(value.clone()) };
        let path = first.instance_path().to_string();
        let mut messages = vec![describe(&first)];
        for e in errors.take(MAX_REPORTED - 1) {
            messages.push(format!("at {}: {}", e.instance_path(), describe(&e)));
        }
        Err(ValidationError { path, message: messages.join("; ") })
    }
}

/// Refuses a value nested deeper than [`MAX_DEPTH`] levels, which no validator is asked to
/// walk (see [`crate::data::depth`]).
pub(crate) fn refuse_too_deep(value: &Value) -> Result<(), ValidationError> {
    if depth::exceeds(value, MAX_DEPTH) {
        let message = format!("the value is nested deeper than {MAX_DEPTH} levels");
        return Err(ValidationError { path: String::new(), message });
    }
    Ok(())
}

/// The error's message, with long instance values cut so a huge input stays readable.
#[cfg(feature = "jsonschema")]
fn describe(e: &jsonschema::ValidationError<'_>) -> String {
    truncate(e.to_string())
}

/// `text` cut to 200 bytes (at a character boundary) with `…`: a message quotes the
/// offending value, which may be huge.
pub(super) fn truncate(text: String) -> String {
    const MAX: usize = 200;
    if text.len() <= MAX {
        return text;
    }
    let mut end = MAX;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_the_offending_path() {
        let v = JsonSchemaValidator::new(json!({
            "type": "object",
            "properties": {"items": {"type": "array", "items": {"type": "integer"}}},
            "required": ["items"]
        }))
        .unwrap();
        let err = v.validate(&json!({"items": [1, "two"]})).unwrap_err();
        assert_eq!(err.path, "/items/1");
        assert!(err.to_string().starts_with("at /items/1: "), "{err}");
        let err = v.validate(&json!({})).unwrap_err();
        assert_eq!(err.path, "");
        assert!(err.message.contains("items"), "{err}");
    }

    #[test]
    fn rejects_an_invalid_schema() {
        assert!(JsonSchemaValidator::new(json!({"type": 12})).is_err());
    }
}
