//! OpenAI strict mode (Chat Completions `response_format` and function `strict`,
//! Responses `text.format` and function `strict`).
//!
//! The rules, from OpenAI's Structured Outputs guide, "Supported schemas"
//! (platform.openai.com/docs/guides/structured-outputs#supported-schemas):
//! - types string, number, boolean, integer, object, array, enum, `anyOf`; `null` in a
//!   type list emulates an optional value;
//! - string `pattern` and `format` (date-time, time, date, duration, email, hostname,
//!   ipv4, ipv6, uuid); number `multipleOf`, `maximum`, `exclusiveMaximum`, `minimum`,
//!   `exclusiveMinimum`; array `minItems`, `maxItems`. The guide lists `minLength`,
//!   `maxLength` and `patternProperties` among what fine-tuned models "additionally" lack,
//!   so the base models take them;
//! - not supported: `allOf`, `not`, `dependentRequired`, `dependentSchemas`, `if`, `then`,
//!   `else`; an unsupported schema with `strict: true` is an error;
//! - the root is an object and not an `anyOf`; every object sets
//!   `additionalProperties: false` and lists every property in `required`;
//! - `$defs` and recursion (`$ref` to `#` or a definition) are supported; a `$ref` with
//!   other keywords beside it is not (OpenAI's own SDK inlines it, `to_strict_json_schema`
//!   in openai-python, `ensure_strict_json_schema` in openai-agents-python, which also
//!   send `oneOf` as `anyOf` and drop `default: null`);
//! - at most 5000 properties, 10 levels of nesting, 1000 enum values, and 120,000
//!   characters of property names, definition names, enum and const values.

use serde_json::{json, Map, Value};

use super::walk::{
    accepts_null, child, children, filter_keywords, for_each_subschema, is_object_schema, resolve, too_deep, Cx,
};
use crate::data::depth;
use crate::data::response::Warning;

/// How warnings name the target.
const PROVIDER: &str = "OpenAI strict mode";

/// Keywords strict mode takes.
const KEEP: [&str; 26] = [
    "type",
    "enum",
    "const",
    "anyOf",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "$ref",
    "$defs",
    "definitions",
    "description",
    "title",
    "default",
    "pattern",
    "format",
    "multipleOf",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "minItems",
    "maxItems",
    "minLength",
    "maxLength",
    "patternProperties",
];

/// Keywords of which every strict schema has one: strict mode has no "any value".
const TYPING: [&str; 5] = ["type", "anyOf", "$ref", "enum", "const"];

/// String formats strict mode takes.
const FORMATS: [&str; 9] = ["date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"];

const MAX_PROPERTIES: usize = 5_000;
const MAX_DEPTH: usize = 10;
const MAX_ENUM_VALUES: usize = 1_000;
const MAX_CHARS: usize = 120_000;

/// Adapts a schema to OpenAI strict mode. When it cannot be made to fit without changing
/// what it means (an open object or map, a root that is not an object …), the original
/// comes back with a `schema_not_strict` warning, to be sent with `strict: false`.
/// Check the result with [`is_openai_strict`] to choose the flag.
pub fn openai_strict(schema: &Value) -> (Value, Vec<Warning>) {
    if schema.is_null() {
        return (Value::Null, Vec::new());
    }
    let mut cx = Cx::new(schema);
    let mut adapted = schema.clone();
    adapt(&mut adapted, "", &mut cx);
    let verdict = match cx.report.blockers.first() {
        Some(_) => Err(cx.report.blockers.join("; ")),
        None => check(&adapted),
    };
    match verdict {
        Ok(()) => (adapted, cx.report.into_warnings(PROVIDER)),
        Err(why) => {
            let message = format!("sent without strict mode, which cannot take this JSON Schema: {why}");
            (schema.clone(), vec![Warning { code: "schema_not_strict".into(), message }])
        }
    }
}

/// True when `schema` meets every strict-mode rule, so it can be sent with `strict: true`.
pub fn is_openai_strict(schema: &Value) -> bool {
    check(schema).is_ok()
}

fn adapt(schema: &mut Value, path: &str, cx: &mut Cx<'_>) {
    if too_deep(path) {
        return cx.report.block(format_args!("more than {} levels of nesting", depth::MAX_DEPTH), path);
    }
    let Value::Object(node) = schema else {
        cx.report.block(format_args!("the boolean schema `{schema}`"), path);
        return;
    };
    node.remove("$schema");
    node.remove("$comment");
    if let Some(reference) = node.get("$ref").and_then(Value::as_str) {
        if resolve(cx.root, reference).is_none() {
            cx.report.block(format_args!("the reference `{reference}`, which is not inside the document"), path);
            return;
        }
        // A `$ref` must stand alone; the root must be an object, not a reference.
        if (node.len() > 1 || path.is_empty()) && !cx.inline_ref(node, path.is_empty()) {
            let beside: Vec<String> = node.keys().filter(|k| *k != "$ref").cloned().collect();
            for keyword in beside {
                node.remove(&keyword);
                cx.report.note(format!("removed `{keyword}` beside a recursive `$ref`"), path);
            }
        }
    }
    if node.contains_key("allOf") && !cx.merge_all_of(node) {
        node.remove("allOf");
        cx.report.note("removed `allOf`", path);
    }
    if let Some(one_of) = node.remove("oneOf") {
        if node.contains_key("anyOf") {
            cx.report.note("removed `oneOf` beside `anyOf`", path);
        } else {
            node.insert("anyOf".into(), one_of);
            cx.report.note("sent `oneOf` as `anyOf`", path);
        }
    }
    if node.get("default").is_some_and(Value::is_null) {
        node.remove("default");
    }
    if node.get("items").is_some_and(Value::is_array) {
        let tuple = node.remove("items");
        cx.report.note("removed `items` (a tuple)", path);
        cx.hint("items", tuple.unwrap_or_default());
    }
    let format_ok = node.get("format").and_then(Value::as_str).is_none_or(|f| FORMATS.contains(&f));
    filter_keywords(node, path, cx, |k| KEEP.contains(&k) && (k != "format" || format_ok));
    if !node.contains_key("type") && node.contains_key("properties") {
        node.insert("type".into(), json!("object"));
    }

    for_each_subschema(node, path, &mut |sub, sub_path, keyword| {
        if !(keyword == "additionalProperties" && sub == &Value::Bool(false)) {
            adapt(sub, sub_path, cx);
        }
    });

    if is_object_schema(node) {
        close_object(node, path, cx);
    }
    if !TYPING.iter().any(|k| node.contains_key(*k)) {
        cx.report.block("a schema without a type", path);
    }
    if path.is_empty() {
        if node.get("type") != Some(&json!("object")) {
            cx.report.block("a root that is not of type object", path);
        } else if node.contains_key("anyOf") {
            cx.report.block("an `anyOf` at the root", path);
        }
    }
}

/// `additionalProperties: false`, and every property required, the optional ones made
/// nullable so that "absent" can still be said (as `null`).
fn close_object(node: &mut Map<String, Value>, path: &str, cx: &mut Cx<'_>) {
    match node.get("additionalProperties") {
        Some(Value::Bool(false)) => {}
        None if node.contains_key("properties") => {
            node.insert("additionalProperties".into(), Value::Bool(false));
        }
        None => return cx.report.block("a free-form object (no `properties`)", path),
        Some(_) => return cx.report.block("an object open to other properties (`additionalProperties`)", path),
    }
    let names: Vec<String> =
        node.get("properties").and_then(Value::as_object).into_iter().flatten().map(|(k, _)| k.clone()).collect();
    let mut required: Vec<Value> = node.get("required").and_then(Value::as_array).cloned().unwrap_or_default();
    let mut optional = Vec::new();
    for name in names {
        let name = Value::String(name);
        if !required.contains(&name) {
            required.push(name.clone());
            optional.push(name);
        }
    }
    node.insert("required".into(), Value::Array(required));
    let Some(Value::Object(props)) = node.get_mut("properties") else { return };
    for name in optional.iter().filter_map(Value::as_str) {
        if let Some(schema) = props.get_mut(name) {
            if !accepts_null(schema) {
                make_nullable(schema);
            }
            cx.report
                .note("sent optional properties as required and nullable", &child(&child(path, "properties"), name));
        }
    }
}

/// Lets a schema also accept `null`: `"type": [t, "null"]` for a plain type, else
/// `{"anyOf": [schema, {"type": "null"}]}` (the forms OpenAI's guide shows).
fn make_nullable(schema: &mut Value) {
    if let Value::Object(node) = schema {
        let plain = !["enum", "const", "$ref", "anyOf"].iter().any(|k| node.contains_key(*k));
        match node.get_mut("type") {
            Some(Value::String(t)) if plain => {
                let t = std::mem::take(t);
                node.insert("type".into(), json!([t, "null"]));
                return;
            }
            Some(Value::Array(types)) if plain => {
                types.push(json!("null"));
                return;
            }
            _ => {}
        }
    }
    let inner = std::mem::take(schema);
    *schema = json!({"anyOf": [inner, {"type": "null"}]});
}

/// What the verifier counts against the size limits.
#[derive(Default)]
struct Totals {
    properties: usize,
    enum_values: usize,
    chars: usize,
}

/// `Ok` when the schema meets every rule, else the first reason it does not.
fn check(schema: &Value) -> Result<(), String> {
    let Value::Object(root) = schema else { return Err("the root is not an object schema".into()) };
    if root.get("type") != Some(&json!("object")) {
        return Err("the root is not of type object".into());
    }
    if root.contains_key("anyOf") {
        return Err("the root is an `anyOf`".into());
    }
    let mut totals = Totals::default();
    check_node(schema, schema, "", 0, &mut totals)?;
    if totals.properties > MAX_PROPERTIES {
        return Err(format!("{} properties (at most {MAX_PROPERTIES})", totals.properties));
    }
    if totals.enum_values > MAX_ENUM_VALUES {
        return Err(format!("{} enum values (at most {MAX_ENUM_VALUES})", totals.enum_values));
    }
    if totals.chars > MAX_CHARS {
        return Err(format!("{} characters of names and values (at most {MAX_CHARS})", totals.chars));
    }
    Ok(())
}

fn check_node(root: &Value, schema: &Value, path: &str, depth: usize, totals: &mut Totals) -> Result<(), String> {
    let here = if path.is_empty() { "the root" } else { path };
    let Value::Object(node) = schema else { return Err(format!("a boolean schema at {here}")) };
    if let Some(keyword) = node.keys().find(|k| !KEEP.contains(&k.as_str())) {
        return Err(format!("`{keyword}` at {here}"));
    }
    if let Some(format) = node.get("format").and_then(Value::as_str).filter(|f| !FORMATS.contains(f)) {
        return Err(format!("the format `{format}` at {here}"));
    }
    if let Some(reference) = node.get("$ref") {
        let resolvable = reference.as_str().is_some_and(|r| resolve(root, r).is_some());
        if !resolvable || node.len() > 1 {
            return Err(format!("a `$ref` that is not alone or not inside the document at {here}"));
        }
    }
    if node.get("items").is_some_and(Value::is_array) {
        return Err(format!("a tuple `items` at {here}"));
    }
    if !TYPING.iter().any(|k| node.contains_key(*k)) {
        return Err(format!("a schema without a type at {here}"));
    }
    let mut depth = depth;
    if is_object_schema(node) {
        depth += 1;
        if depth > MAX_DEPTH {
            return Err(format!("more than {MAX_DEPTH} levels of nested objects at {here}"));
        }
        if node.get("additionalProperties") != Some(&Value::Bool(false)) {
            return Err(format!("an object without `additionalProperties: false` at {here}"));
        }
        let required = node.get("required").and_then(Value::as_array);
        let props = node.get("properties").and_then(Value::as_object);
        for name in props.into_iter().flat_map(Map::keys) {
            if !required.is_some_and(|r| r.iter().any(|n| n == name)) {
                return Err(format!("the optional property `{name}` at {here}"));
            }
            totals.chars += name.chars().count();
        }
        totals.properties += props.map_or(0, Map::len);
    }
    for defs in ["$defs", "definitions"] {
        totals.chars += node
            .get(defs)
            .and_then(Value::as_object)
            .into_iter()
            .flat_map(Map::keys)
            .map(|k| k.chars().count())
            .sum::<usize>();
    }
    if let Some(values) = node.get("enum").and_then(Value::as_array) {
        totals.enum_values += values.len();
        totals.chars += values.iter().filter_map(Value::as_str).map(|s| s.chars().count()).sum::<usize>();
    }
    if let Some(Value::String(c)) = node.get("const") {
        totals.chars += c.chars().count();
    }
    for (sub, sub_path, keyword) in children(node, path) {
        if !(keyword == "additionalProperties" && sub == &Value::Bool(false)) {
            check_node(root, sub, &sub_path, depth, totals)?;
        }
    }
    Ok(())
}
