//! Anthropic structured outputs (`output_config.format`; strict tool use shares the rules,
//! but omni does not ask for it, so tool schemas go as given).
//!
//! The rules, from Anthropic's structured outputs guide, "JSON Schema limitations"
//! (platform.claude.com/docs/en/build-with-claude/structured-outputs#json-schema-limitations):
//! - supported: every basic type; `enum` of strings, numbers, booleans or nulls; `const`;
//!   `anyOf` and `allOf` ("`allOf` with `$ref` not supported"); `$ref`, `$defs` and
//!   `definitions` inside the document; `default`; `required`; `additionalProperties`,
//!   which "must be set to `false` for objects"; string formats date-time, time, date,
//!   duration, email, hostname, uri, ipv4, ipv6, uuid; array `minItems` of 0 or 1; simple
//!   `pattern`s (no backreferences, lookaround or `\b`);
//! - not supported: recursive schemas, numerical constraints (`minimum`, `maximum`,
//!   `multipleOf` …), string length constraints, array constraints beyond `minItems` 0 or
//!   1; "If you use an unsupported feature, you'll receive a 400 error".
//!
//! Anthropic's SDKs (`transform_schema` in anthropic-sdk-python) apply the same rules the
//! same way: `oneOf` goes as `anyOf`, unsupported keywords move into the description,
//! objects get `additionalProperties: false`.

use serde_json::{json, Map, Value};

use super::walk::{filter_keywords, for_each_subschema, has_recursion, is_object_schema, too_deep, Cx};
use crate::data::depth::MAX_DEPTH;
use crate::data::response::Warning;

/// How warnings name the target.
const PROVIDER: &str = "Anthropic structured outputs";

/// Keywords structured outputs take.
const KEEP: [&str; 18] = [
    "type",
    "enum",
    "const",
    "anyOf",
    "allOf",
    "$ref",
    "$defs",
    "definitions",
    "default",
    "required",
    "additionalProperties",
    "properties",
    "items",
    "format",
    "minItems",
    "pattern",
    "title",
    "description",
];

/// String formats structured outputs take.
const FORMATS: [&str; 10] =
    ["date-time", "time", "date", "duration", "email", "hostname", "uri", "ipv4", "ipv6", "uuid"];

/// Adapts an output schema to Anthropic structured outputs. A recursive schema cannot be
/// adapted; it is sent as is with a `schema_unsupported` warning.
pub fn anthropic_output(schema: &Value) -> (Value, Vec<Warning>) {
    let mut cx = Cx::new(schema);
    let mut adapted = schema.clone();
    adapt(&mut adapted, "", &mut cx);
    let mut warnings = cx.report.into_warnings(PROVIDER);
    if has_recursion(&adapted) {
        warnings.push(Warning {
            code: "schema_unsupported".into(),
            message: format!("the JSON Schema is recursive, which {PROVIDER} do not support; the API may reject it"),
        });
    }
    (adapted, warnings)
}

fn adapt(schema: &mut Value, path: &str, cx: &mut Cx<'_>) {
    if too_deep(path) {
        return cx.report.note(format!("left as given below {MAX_DEPTH} levels of nesting"), path);
    }
    let Value::Object(node) = schema else { return };
    let beside_ref = |k: &String| !matches!(k.as_str(), "$ref" | "$defs" | "definitions");
    if node.contains_key("$ref") && node.keys().any(beside_ref) && !cx.inline_ref(node, path.is_empty()) {
        let beside: Vec<String> = node.keys().filter(|k| beside_ref(k)).cloned().collect();
        for keyword in beside {
            node.remove(&keyword);
            cx.report.note(format!("removed `{keyword}` beside a recursive `$ref`"), path);
        }
    }
    if node.contains_key("allOf") && !cx.merge_all_of(node) && !inline_all_of_refs(node, cx) {
        node.remove("allOf");
        cx.report.note("removed `allOf` (with a recursive `$ref`)", path);
    }
    if let Some(one_of) = node.remove("oneOf") {
        if node.contains_key("anyOf") {
            cx.report.note("removed `oneOf` beside `anyOf`", path);
        } else {
            node.insert("anyOf".into(), one_of);
            cx.report.note("sent `oneOf` as `anyOf`", path);
        }
    }
    if node.get("enum").and_then(Value::as_array).is_some_and(|v| v.iter().any(|v| v.is_object() || v.is_array())) {
        node.remove("enum");
        cx.report.note("removed `enum` (objects and arrays in it)", path);
    }
    if let Some(n) = node.get("minItems").and_then(Value::as_u64).filter(|n| *n > 1) {
        node.insert("minItems".into(), json!(1));
        cx.report.note("sent `minItems` above 1 as 1", path);
        cx.hint("minItems", json!(n));
    }
    let format_ok = node.get("format").and_then(Value::as_str).is_none_or(|f| FORMATS.contains(&f));
    let pattern_ok = node.get("pattern").and_then(Value::as_str).is_none_or(simple_pattern);
    let tuple = node.get("items").is_some_and(Value::is_array);
    filter_keywords(node, path, cx, |k| {
        KEEP.contains(&k) && (k != "format" || format_ok) && (k != "pattern" || pattern_ok) && (k != "items" || !tuple)
    });

    for_each_subschema(node, path, &mut |sub, sub_path, _| adapt(sub, sub_path, cx));

    if is_object_schema(node) {
        match node.get("additionalProperties") {
            Some(Value::Bool(false)) => {}
            None if node.contains_key("properties") => {}
            None => cx.report.note("closed a free-form object (it can only be empty)", path),
            Some(_) => cx.report.note("closed an object open to other properties", path),
        }
        node.insert("additionalProperties".into(), Value::Bool(false));
    }
}

/// Replaces `$ref` branches of `allOf` by what they point to; false when one is recursive.
fn inline_all_of_refs(node: &mut Map<String, Value>, cx: &mut Cx<'_>) -> bool {
    let Some(Value::Array(branches)) = node.get_mut("allOf") else { return true };
    for branch in branches.iter_mut() {
        if let Value::Object(b) = branch {
            if b.contains_key("$ref") && !cx.inline_ref(b, false) {
                return false;
            }
        }
    }
    true
}

/// False for regular expressions with what structured outputs reject: backreferences,
/// lookahead or lookbehind, and word boundaries.
fn simple_pattern(pattern: &str) -> bool {
    if ["(?=", "(?!", "(?<=", "(?<!"].iter().any(|p| pattern.contains(p)) {
        return false;
    }
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if c == '\\' && matches!(chars.next(), Some('b' | 'B' | '1'..='9')) {
            return false;
        }
    }
    true
}
