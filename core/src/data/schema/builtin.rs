//! The built-in validator: the JSON Schema subset that schemars and typical tool schemas
//! use, checked by walking the schema itself, in a few hundred lines and without the
//! `jsonschema` crate (and its two regular-expression engines, about 2.2 MB of binary).
//!
//! A keyword it cannot check (`pattern`, `patternProperties`, `if`, a remote `$ref` …) is
//! refused when the schema is compiled, with [`SchemaError::Unsupported`] naming it: a
//! validator that let such a value through unchecked would tell a tool handler that its
//! input is valid when it was never checked. Annotations (`title`, `description`,
//! `default`, `examples`, `format` in draft 2019-09 and later …) and keywords that are no
//! part of JSON Schema are ignored, as the `jsonschema` crate ignores them.
//!
//! Its messages and paths have the `jsonschema` crate's shape (`"a" is not of type
//! "integer"` at `/items/1`), so the tool error a model reads is the same whichever
//! validator a build has.

use std::fmt;

use serde_json::{Map, Value};

use super::validate::{refuse_too_deep, truncate, SchemaError, ValidationError, Validator, MAX_REPORTED};
use crate::data::depth::{self, MAX_DEPTH};

/// Subschemas applied inside one another for one value (`$ref` chains, `allOf` within
/// `anyOf` …) on top of the value's own nesting. A schema whose `$ref`s loop without
/// descending into the value (`{"$ref": "#"}`) would otherwise recurse for ever.
const MAX_APPLIED: usize = 4 * MAX_DEPTH;

/// JSON Schema keywords that constrain a value and that this validator does not check.
const UNSUPPORTED: &[&str] = &[
    "pattern",
    "patternProperties",
    "propertyNames",
    "multipleOf",
    "dependentRequired",
    "dependentSchemas",
    "dependencies",
    "contains",
    "minContains",
    "maxContains",
    "unevaluatedProperties",
    "unevaluatedItems",
    "additionalItems",
    "if",
    "then",
    "else",
    "$dynamicRef",
    "$dynamicAnchor",
    "$recursiveRef",
    "$recursiveAnchor",
    "contentSchema",
];

/// The type names of JSON Schema.
const TYPES: &[&str] = &["null", "boolean", "object", "array", "number", "integer", "string"];

/// Validates against a JSON Schema with no dependency beyond serde_json: `type` (one or a
/// list; `integer` is any number without a fraction), `properties`, `required`,
/// `additionalProperties`, `items`, `prefixItems`, `enum`, `const`, `minimum`, `maximum`,
/// `exclusiveMinimum`, `exclusiveMaximum`, `minLength`, `maxLength` (in characters),
/// `minItems`, `maxItems`, `uniqueItems`, `minProperties`, `maxProperties`, `anyOf`,
/// `oneOf`, `allOf`, `not`, boolean schemas, and `$ref` to `#`, `#/$defs/…` or
/// `#/definitions/…`. Drafts 2020-12 (the default), 2019-09, 7 and 6; draft 4 is refused.
///
/// It is what [`JsonSchemaValidator`](super::JsonSchemaValidator) uses in a build without
/// the `jsonschema` feature, and can be used on its own in any build.
///
/// ```
/// use omni_protocol::schema::{BuiltinValidator, SchemaError, Validator};
/// use serde_json::json;
///
/// let v = BuiltinValidator::new(json!({
///     "type": "object",
///     "properties": {"days": {"type": "integer", "minimum": 1}},
///     "required": ["days"]
/// }))
/// .unwrap();
/// assert_eq!(v.validate(&json!({"days": 0})).unwrap_err().to_string(), "at /days: 0 is less than the minimum of 1");
///
/// let err = BuiltinValidator::new(json!({"type": "string", "pattern": "^a"})).unwrap_err();
/// assert!(matches!(err, SchemaError::Unsupported { ref keyword, .. } if keyword == "pattern"));
/// ```
#[derive(Debug, Clone)]
pub struct BuiltinValidator {
    schema: Value,
    /// Drafts 6 and 7: `$ref` replaces the keywords beside it.
    legacy: bool,
}

impl BuiltinValidator {
    /// Checks that `schema` is well formed and uses only keywords this validator checks.
    /// A schema nested deeper than [`MAX_DEPTH`] levels is refused.
    pub fn new(schema: Value) -> Result<Self, SchemaError> {
        if depth::exceeds(&schema, MAX_DEPTH) {
            return Err(SchemaError::Invalid(format!("the schema is nested deeper than {MAX_DEPTH} levels")));
        }
        let legacy = match schema.get("$schema").and_then(Value::as_str) {
            Some(uri) if uri.contains("draft-04") => {
                return Err(SchemaError::Unsupported { keyword: "$schema".into(), path: "/$schema".into() })
            }
            Some(uri) => uri.contains("draft-06") || uri.contains("draft-07"),
            None => false,
        };
        let mut path = String::new();
        check(&schema, &schema, legacy, &mut path)?;
        Ok(Self { schema, legacy })
    }
}

impl Validator for BuiltinValidator {
    fn schema(&self) -> &Value {
        &self.schema
    }

    fn validate(&self, value: &Value) -> Result<Value, ValidationError> {
        refuse_too_deep(value)?;
        let mut walk = Walk { root: &self.schema, legacy: self.legacy, errors: Vec::new(), limit: MAX_REPORTED };
        walk.apply(&self.schema, value, &mut String::new(), 0);
        let mut errors = walk.errors.into_iter();
        let Some((path, first)) = errors.next() else { return Ok(value.clone()) };
        let mut messages = vec![truncate(first)];
        messages.extend(errors.map(|(at, message)| format!("at {at}: {}", truncate(message))));
        Err(ValidationError { path, message: messages.join("; ") })
    }
}

/// Checks one schema and everything under it; `path` is its JSON Pointer in the root.
fn check(root: &Value, schema: &Value, legacy: bool, path: &mut String) -> Result<(), SchemaError> {
    let map = match schema {
        Value::Bool(_) => return Ok(()),
        Value::Object(map) => map,
        _ => return Err(invalid(path, "a schema must be an object or a boolean")),
    };
    for (keyword, value) in map {
        let len = path.len();
        push_segment(path, keyword);
        let at = |problem: &str| invalid(path, problem);
        match keyword.as_str() {
            "type" => {
                let known = |t: &Value| t.as_str().is_some_and(|t| TYPES.contains(&t));
                let ok = match value {
                    Value::Array(types) => types.iter().all(known),
                    other => known(other),
                };
                if !ok {
                    return Err(at("`type` must be a type name or a list of them"));
                }
            }
            "properties" | "$defs" | "definitions" => {
                let Value::Object(subs) = value else { return Err(at("must be an object of schemas")) };
                for (name, sub) in subs {
                    let len = path.len();
                    push_segment(path, name);
                    check(root, sub, legacy, path)?;
                    path.truncate(len);
                }
            }
            "items" if value.is_array() => return Err(unsupported("items", path)),
            "additionalProperties" | "items" | "not" => check(root, value, legacy, path)?,
            "prefixItems" | "anyOf" | "oneOf" | "allOf" => {
                let Some(subs) = value.as_array().filter(|s| !s.is_empty()) else {
                    return Err(at("must be a non-empty list of schemas"));
                };
                for (i, sub) in subs.iter().enumerate() {
                    let len = path.len();
                    push_segment(path, &i.to_string());
                    check(root, sub, legacy, path)?;
                    path.truncate(len);
                }
            }
            "required" if !value.as_array().is_some_and(|names| names.iter().all(Value::is_string)) => {
                return Err(at("`required` must be a list of property names"));
            }
            "enum" if !value.is_array() => return Err(at("`enum` must be a list")),
            "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" => match value {
                Value::Number(_) => {}
                // Draft 4's form, a flag on `minimum`/`maximum`.
                Value::Bool(_) => return Err(unsupported(keyword, path)),
                _ => return Err(at("must be a number")),
            },
            "minLength" | "maxLength" | "minItems" | "maxItems" | "minProperties" | "maxProperties"
                if value.as_u64().is_none() =>
            {
                return Err(at("must be a non-negative integer"));
            }
            "uniqueItems" if !value.is_boolean() => return Err(at("`uniqueItems` must be a boolean")),
            "$ref" => {
                let Some(reference) = value.as_str() else { return Err(at("`$ref` must be a string")) };
                if !reference.starts_with('#') {
                    return Err(SchemaError::Unsupported {
                        keyword: format!("$ref to {reference:?} (only refs within the schema, `#/…`)"),
                        path: path.clone(),
                    });
                }
                if !(reference == "#" || reference.starts_with("#/")) {
                    return Err(SchemaError::Unsupported {
                        keyword: format!("$ref to the anchor {reference:?}"),
                        path: path.clone(),
                    });
                }
                if !resolve(root, reference).is_some_and(|s| s.is_object() || s.is_boolean()) {
                    return Err(at(&format!("`$ref` {reference:?} points at no schema")));
                }
            }
            // An `$id` below the root would make the `$ref`s under it relative to itself.
            "$id" if len > 0 => return Err(unsupported(keyword, path)),
            // Assertions in drafts 6 and 7 (the `jsonschema` crate checks them there).
            "format" | "contentMediaType" | "contentEncoding" if legacy => return Err(unsupported(keyword, path)),
            _ if UNSUPPORTED.contains(&keyword.as_str()) => return Err(unsupported(keyword, path)),
            // Annotations and keywords no draft defines: ignored, as `jsonschema` does.
            _ => {}
        }
        path.truncate(len);
    }
    Ok(())
}

fn invalid(path: &str, problem: &str) -> SchemaError {
    if path.is_empty() {
        SchemaError::Invalid(problem.into())
    } else {
        SchemaError::Invalid(format!("at {path}: {problem}"))
    }
}

fn unsupported(keyword: &str, path: &str) -> SchemaError {
    SchemaError::Unsupported { keyword: keyword.into(), path: path.into() }
}

/// Appends `/segment` to a JSON Pointer, escaped (`~` as `~0`, `/` as `~1`).
fn push_segment(path: &mut String, segment: &str) {
    path.push('/');
    for c in segment.chars() {
        match c {
            '~' => path.push_str("~0"),
            '/' => path.push_str("~1"),
            c => path.push(c),
        }
    }
}

/// The schema a local `$ref` (`#` or `#/a/b`) points at.
fn resolve<'a>(root: &'a Value, reference: &str) -> Option<&'a Value> {
    let pointer = reference.strip_prefix('#')?;
    if pointer.is_empty() {
        return Some(root);
    }
    if !pointer.contains('%') {
        return root.pointer(pointer);
    }
    // A URI fragment may percent-encode its pointer (`#/$defs/a%20b`).
    let mut bytes = Vec::with_capacity(pointer.len());
    let mut rest = pointer.as_bytes();
    while let Some((&b, tail)) = rest.split_first() {
        let hex = tail.get(..2).and_then(|h| std::str::from_utf8(h).ok()).and_then(|h| u8::from_str_radix(h, 16).ok());
        match (b, hex) {
            (b'%', Some(decoded)) => {
                bytes.push(decoded);
                rest = &tail[2..];
            }
            _ => {
                bytes.push(b);
                rest = tail;
            }
        }
    }
    root.pointer(std::str::from_utf8(&bytes).ok()?)
}

/// One validation: the errors found so far, up to `limit`.
struct Walk<'a> {
    root: &'a Value,
    legacy: bool,
    errors: Vec<(String, String)>,
    limit: usize,
}

impl Walk<'_> {
    fn full(&self) -> bool {
        self.errors.len() >= self.limit
    }

    fn fail(&mut self, path: &str, message: impl fmt::Display) {
        if !self.full() {
            self.errors.push((path.to_owned(), message.to_string()));
        }
    }

    /// True when `value` matches `schema`, found without collecting messages.
    fn matches(&self, schema: &Value, value: &Value, applied: usize) -> bool {
        let mut walk = Walk { root: self.root, legacy: self.legacy, errors: Vec::new(), limit: 1 };
        walk.apply(schema, value, &mut String::new(), applied);
        walk.errors.is_empty()
    }

    /// Applies `schema` to `value` (at `path`); `applied` counts the subschemas entered.
    fn apply(&mut self, schema: &Value, value: &Value, path: &mut String, applied: usize) {
        let map = match schema {
            Value::Bool(true) => return,
            Value::Bool(false) => return self.fail(path, format_args!("False schema does not allow {value}")),
            Value::Object(map) => map,
            // Refused when compiled.
            _ => return,
        };
        if applied > MAX_APPLIED {
            return self.fail(path, "the schema refers to itself too deeply for this value");
        }
        if let Some(target) = map.get("$ref").and_then(Value::as_str).and_then(|r| resolve(self.root, r)) {
            self.apply(target, value, path, applied + 1);
            if self.legacy {
                return;
            }
        }
        for (keyword, arg) in map {
            if self.full() {
                return;
            }
            self.keyword(map, keyword, arg, value, path, applied);
        }
    }

    fn keyword(
        &mut self,
        map: &Map<String, Value>,
        keyword: &str,
        arg: &Value,
        value: &Value,
        path: &mut String,
        applied: usize,
    ) {
        match (keyword, value) {
            ("type", _) => match arg {
                Value::String(t) if !has_type(value, t) => {
                    self.fail(path, format_args!("{value} is not of type \"{t}\""))
                }
                Value::Array(types) if !types.iter().any(|t| t.as_str().is_some_and(|t| has_type(value, t))) => {
                    // In `jsonschema`'s order (alphabetical), so the message is the same.
                    let mut names: Vec<&str> = types.iter().filter_map(Value::as_str).collect();
                    names.sort_unstable();
                    let names: Vec<String> = names.iter().map(|t| format!("\"{t}\"")).collect();
                    self.fail(path, format_args!("{value} is not of types {}", names.join(", ")));
                }
                _ => {}
            },
            ("enum", _) => {
                let options = arg.as_array().map_or(&[][..], Vec::as_slice);
                if !options.iter().any(|o| equal(o, value)) {
                    self.fail(path, format_args!("{value} is not one of {}", enum_list(options)));
                }
            }
            ("const", _) if !equal(arg, value) => self.fail(path, format_args!("{arg} was expected")),
            ("minimum", Value::Number(n)) if below(n, arg, false) => {
                self.fail(path, format_args!("{value} is less than the minimum of {arg}"));
            }
            ("exclusiveMinimum", Value::Number(n)) if below(n, arg, true) => {
                self.fail(path, format_args!("{value} is less than or equal to the minimum of {arg}"));
            }
            ("maximum", Value::Number(n)) if above(n, arg, false) => {
                self.fail(path, format_args!("{value} is greater than the maximum of {arg}"));
            }
            ("exclusiveMaximum", Value::Number(n)) if above(n, arg, true) => {
                self.fail(path, format_args!("{value} is greater than or equal to the maximum of {arg}"));
            }
            ("minLength", Value::String(s)) => {
                let limit = arg.as_u64().unwrap_or(0);
                if (s.chars().count() as u64) < limit {
                    self.fail(path, format_args!("{value} is shorter than {limit} character{}", plural(limit)));
                }
            }
            ("maxLength", Value::String(s)) => {
                let limit = arg.as_u64().unwrap_or(u64::MAX);
                if s.chars().count() as u64 > limit {
                    self.fail(path, format_args!("{value} is longer than {limit} character{}", plural(limit)));
                }
            }
            ("minItems", Value::Array(items)) => {
                let limit = arg.as_u64().unwrap_or(0);
                if (items.len() as u64) < limit {
                    self.fail(path, format_args!("{value} has less than {limit} item{}", plural(limit)));
                }
            }
            ("maxItems", Value::Array(items)) => {
                let limit = arg.as_u64().unwrap_or(u64::MAX);
                if items.len() as u64 > limit {
                    self.fail(path, format_args!("{value} has more than {limit} item{}", plural(limit)));
                }
            }
            ("minProperties", Value::Object(props)) => {
                let limit = arg.as_u64().unwrap_or(0);
                if (props.len() as u64) < limit {
                    let s = if limit == 1 { "y" } else { "ies" };
                    self.fail(path, format_args!("{value} has less than {limit} propert{s}"));
                }
            }
            ("maxProperties", Value::Object(props)) => {
                let limit = arg.as_u64().unwrap_or(u64::MAX);
                if props.len() as u64 > limit {
                    let s = if limit == 1 { "y" } else { "ies" };
                    self.fail(path, format_args!("{value} has more than {limit} propert{s}"));
                }
            }
            ("uniqueItems", Value::Array(items)) if arg == &Value::Bool(true) => {
                let repeated = items.iter().enumerate().any(|(i, a)| items[i + 1..].iter().any(|b| equal(a, b)));
                if repeated {
                    self.fail(path, format_args!("{value} has non-unique elements"));
                }
            }
            ("required", Value::Object(props)) => {
                for name in arg.as_array().into_iter().flatten() {
                    if name.as_str().is_some_and(|n| !props.contains_key(n)) {
                        self.fail(path, format_args!("{name} is a required property"));
                    }
                }
            }
            ("properties", Value::Object(props)) => {
                for (name, sub) in arg.as_object().into_iter().flatten() {
                    if let Some(child) = props.get(name) {
                        self.descend(sub, child, path, name, applied);
                    }
                }
            }
            ("additionalProperties", Value::Object(props)) => {
                let declared = map.get("properties").and_then(Value::as_object);
                let mut extra = props.iter().filter(|(name, _)| !declared.is_some_and(|d| d.contains_key(*name)));
                if arg == &Value::Bool(false) {
                    let names: Vec<String> = extra.map(|(name, _)| format!("'{name}'")).collect();
                    if !names.is_empty() {
                        let verb = if names.len() == 1 { "was" } else { "were" };
                        self.fail(
                            path,
                            format_args!(
                                "Additional properties are not allowed ({} {verb} unexpected)",
                                names.join(", ")
                            ),
                        );
                    }
                } else {
                    extra.try_for_each(|(name, child)| {
                        self.descend(arg, child, path, name, applied);
                        if self.full() {
                            None
                        } else {
                            Some(())
                        }
                    });
                }
            }
            ("prefixItems", Value::Array(items)) => {
                for (i, (sub, item)) in arg.as_array().into_iter().flatten().zip(items).enumerate() {
                    self.descend(sub, item, path, &i.to_string(), applied);
                }
            }
            ("items", Value::Array(items)) => {
                let skip = map.get("prefixItems").and_then(Value::as_array).map_or(0, Vec::len);
                for (i, item) in items.iter().enumerate().skip(skip) {
                    if self.full() {
                        return;
                    }
                    self.descend(arg, item, path, &i.to_string(), applied);
                }
            }
            ("allOf", _) => {
                for sub in arg.as_array().into_iter().flatten() {
                    self.apply(sub, value, path, applied + 1);
                }
            }
            ("anyOf", _) => {
                let subs = arg.as_array().map_or(&[][..], Vec::as_slice);
                if !subs.iter().any(|sub| self.matches(sub, value, applied + 1)) {
                    self.fail(
                        path,
                        format_args!("{value} is not valid under any of the schemas listed in the 'anyOf' keyword"),
                    );
                }
            }
            ("oneOf", _) => {
                let subs = arg.as_array().map_or(&[][..], Vec::as_slice);
                let mut valid = subs.iter().filter(|sub| self.matches(sub, value, applied + 1));
                match (valid.next(), valid.next()) {
                    (None, _) => self.fail(
                        path,
                        format_args!("{value} is not valid under any of the schemas listed in the 'oneOf' keyword"),
                    ),
                    (Some(_), Some(_)) => self.fail(
                        path,
                        format_args!(
                            "{value} is valid under more than one of the schemas listed in the 'oneOf' keyword"
                        ),
                    ),
                    _ => {}
                }
            }
            ("not", _) if self.matches(arg, value, applied + 1) => {
                self.fail(path, format_args!("{arg} is not allowed for {value}"));
            }
            _ => {}
        }
    }

    /// Applies `schema` to a member or item, its path `path/segment`.
    fn descend(&mut self, schema: &Value, child: &Value, path: &mut String, segment: &str, applied: usize) {
        let len = path.len();
        push_segment(path, segment);
        self.apply(schema, child, path, applied + 1);
        path.truncate(len);
    }
}

fn plural(n: u64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// `a, b or c`, or for more than three the first two and how many more, as `jsonschema`
/// writes an enum.
fn enum_list(options: &[Value]) -> String {
    const SHOWN: usize = 3;
    let text = |values: &[Value]| values.iter().map(Value::to_string).collect::<Vec<_>>().join(", ");
    match options {
        [] => String::new(),
        [only] => only.to_string(),
        [init @ .., last] if options.len() <= SHOWN => format!("{} or {last}", text(init)),
        _ => {
            let more = options.len() - (SHOWN - 1);
            format!("{} or {more} other candidate{}", text(&options[..SHOWN - 1]), plural(more as u64))
        }
    }
}

/// Whether `value` is of the JSON Schema type `name`: `integer` is any number without a
/// fraction (`1.0` is one), `number` any number.
fn has_type(value: &Value, name: &str) -> bool {
    match (name, value) {
        ("null", Value::Null)
        | ("boolean", Value::Bool(_))
        | ("object", Value::Object(_))
        | ("array", Value::Array(_))
        | ("string", Value::String(_))
        | ("number", Value::Number(_)) => true,
        ("integer", Value::Number(n)) => n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0),
        _ => false,
    }
}

/// JSON equality as JSON Schema defines it: numbers by value (`1` equals `1.0`).
fn equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => compare(x, y) == Some(std::cmp::Ordering::Equal),
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(a, b)| equal(a, b)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, a)| y.get(k).is_some_and(|b| equal(a, b)))
        }
        _ => a == b,
    }
}

/// Orders two JSON numbers exactly when both are integers, else as `f64`.
fn compare(x: &serde_json::Number, y: &serde_json::Number) -> Option<std::cmp::Ordering> {
    let int = |n: &serde_json::Number| n.as_i64().map(i128::from).or_else(|| n.as_u64().map(i128::from));
    match (int(x), int(y)) {
        (Some(a), Some(b)) => Some(a.cmp(&b)),
        _ => x.as_f64()?.partial_cmp(&y.as_f64()?),
    }
}

/// `n` below the bound `limit` (or at it, when `exclusive`).
fn below(n: &serde_json::Number, limit: &Value, exclusive: bool) -> bool {
    let Value::Number(limit) = limit else { return false };
    match compare(n, limit) {
        Some(std::cmp::Ordering::Less) => true,
        Some(std::cmp::Ordering::Equal) => exclusive,
        _ => false,
    }
}

/// `n` above the bound `limit` (or at it, when `exclusive`).
fn above(n: &serde_json::Number, limit: &Value, exclusive: bool) -> bool {
    let Value::Number(limit) = limit else { return false };
    match compare(n, limit) {
        Some(std::cmp::Ordering::Greater) => true,
        Some(std::cmp::Ordering::Equal) => exclusive,
        _ => false,
    }
}

#[cfg(test)]
mod tests;
