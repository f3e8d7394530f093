//! Gemini `responseJsonSchema` and `parametersJsonSchema`.
//!
//! The rules, from the Gemini API reference, `GenerationConfig.responseJsonSchema`
//! (ai.google.dev/api/generate-content#v1beta.GenerationConfig, the same text as
//! `generative_service.proto`): "While the full JSON Schema may be sent, not all features
//! are supported. Specifically, only the following properties are supported: `$id`,
//! `$defs`, `$ref`, `$anchor`, `type`, `format`, `title`, `description`, `enum` (for
//! strings and numbers), `items`, `prefixItems`, `minItems`, `maxItems`, `minimum`,
//! `maximum`, `anyOf`, `oneOf` (interpreted the same as `anyOf`), `properties`,
//! `additionalProperties`, `required`", plus the non-standard `propertyOrdering`. "If
//! `$ref` is set on a sub-schema, no other properties, except for those starting as a
//! `$`, may be set." `FunctionDeclaration.parametersJsonSchema` takes JSON Schema for an
//! object and names no other list, so the same subset is used for tools. Google's
//! structured output guide shows `"type": ["string", "null"]` for nullable values.
//!
//! Conversions keep the meaning where one exists: `const` becomes a one-value `enum`,
//! `null` in an `enum` moves to `type`, an integer `exclusiveMinimum` becomes `minimum`
//! plus one, `definitions` becomes `$defs`, tuple `items` become `prefixItems`, and
//! `allOf` is merged into its node.

use serde_json::{json, Map, Value};

use super::walk::{filter_keywords, for_each_subschema, too_deep, Cx};
use crate::data::depth::MAX_DEPTH;
use crate::data::response::Warning;

/// How warnings name the target.
const PROVIDER: &str = "Gemini";

/// Keywords Gemini takes.
const KEEP: [&str; 21] = [
    "$id",
    "$defs",
    "$ref",
    "$anchor",
    "type",
    "format",
    "title",
    "description",
    "enum",
    "items",
    "prefixItems",
    "minItems",
    "maxItems",
    "minimum",
    "maximum",
    "anyOf",
    "oneOf",
    "properties",
    "additionalProperties",
    "required",
    "propertyOrdering",
];

/// Adapts a schema to the JSON Schema subset Gemini documents for `responseJsonSchema`
/// and `parametersJsonSchema`.
pub fn gemini(schema: &Value) -> (Value, Vec<Warning>) {
    let mut cx = Cx::new(schema);
    let mut adapted = schema.clone();
    // References into a root `definitions` follow it to `$defs`.
    let renamed = match &mut adapted {
        Value::Object(root) if !root.contains_key("$defs") => match root.remove("definitions") {
            Some(defs) => {
                root.insert("$defs".into(), defs);
                true
            }
            None => false,
        },
        _ => false,
    };
    adapt(&mut adapted, "", &mut cx, renamed);
    (adapted, cx.report.into_warnings(PROVIDER))
}

fn adapt(schema: &mut Value, path: &str, cx: &mut Cx<'_>, renamed: bool) {
    if too_deep(path) {
        return cx.report.note(format!("left as given below {MAX_DEPTH} levels of nesting"), path);
    }
    let Value::Object(node) = schema else { return };
    if node.contains_key("$ref") && node.keys().any(|k| !k.starts_with('$')) && !cx.inline_ref(node, path.is_empty()) {
        let beside: Vec<String> = node.keys().filter(|k| !k.starts_with('$')).cloned().collect();
        for keyword in beside {
            node.remove(&keyword);
            cx.report.note(format!("removed `{keyword}` beside a recursive `$ref`"), path);
        }
    }
    if node.contains_key("allOf") && !cx.merge_all_of(node) {
        node.remove("allOf");
        cx.report.note("removed `allOf`", path);
    }
    if let Some(Value::Array(tuple)) = node.get("items") {
        if !node.contains_key("prefixItems") {
            let tuple = Value::Array(tuple.clone());
            node.insert("prefixItems".into(), tuple);
            node.remove("items");
        }
    }
    const_to_enum(node, path, cx);
    enum_values(node, path, cx);
    for (exclusive, inclusive, step) in [("exclusiveMinimum", "minimum", 1), ("exclusiveMaximum", "maximum", -1)] {
        exclusive_bound(node, path, cx, exclusive, inclusive, step);
    }
    // Tuple `items` beside `prefixItems` cannot be converted: dropped.
    let tuple_left = node.get("items").is_some_and(Value::is_array);
    filter_keywords(node, path, cx, |k| KEEP.contains(&k) && !(k == "items" && tuple_left));

    for_each_subschema(node, path, &mut |sub, sub_path, _| adapt(sub, sub_path, cx, renamed));

    if renamed {
        if let Some(Value::String(reference)) = node.get_mut("$ref") {
            if let Some(rest) = reference.strip_prefix("#/definitions/") {
                *reference = format!("#/$defs/{rest}");
            }
        }
    }
}

/// `const` becomes a one-value `enum` (strings and numbers only).
fn const_to_enum(node: &mut Map<String, Value>, path: &str, cx: &mut Cx<'_>) {
    let Some(value) = node.remove("const") else { return };
    let fits = value.is_string() || value.is_number();
    match node.get("enum").and_then(Value::as_array) {
        _ if !fits => {
            cx.report.note("removed `const`", path);
            cx.hint("const", value);
        }
        None => {
            node.insert("enum".into(), json!([value]));
        }
        Some(values) if values.contains(&value) => {
            node.insert("enum".into(), json!([value]));
        }
        Some(_) => {
            cx.report.note("removed `const`", path);
            cx.hint("const", value);
        }
    }
}

/// `enum` takes strings and numbers: `null` moves to `type`; other values drop the enum.
fn enum_values(node: &mut Map<String, Value>, path: &str, cx: &mut Cx<'_>) {
    let Some(Value::Array(values)) = node.get("enum") else { return };
    if values.iter().all(|v| v.is_string() || v.is_number()) {
        return;
    }
    let without_null: Vec<Value> = values.iter().filter(|v| !v.is_null()).cloned().collect();
    if without_null.len() < values.len() && without_null.iter().all(|v| v.is_string() || v.is_number()) {
        let typed = match node.get_mut("type") {
            Some(Value::String(t)) => {
                let t = std::mem::take(t);
                node.insert("type".into(), json!([t, "null"]));
                true
            }
            Some(Value::Array(types)) => {
                if !types.contains(&json!("null")) {
                    types.push(json!("null"));
                }
                true
            }
            _ => false,
        };
        if !typed {
            cx.report.note("removed `null` from `enum`", path);
        }
        node.insert("enum".into(), Value::Array(without_null));
    } else if let Some(values) = node.remove("enum") {
        cx.report.note("removed `enum` (Gemini takes strings and numbers)", path);
        cx.hint("enum", values);
    }
}

/// `exclusiveMinimum: n` becomes `minimum: n + 1` on integers (the same set of values),
/// else `minimum: n` (one value wider, reported). Likewise for the maximum.
fn exclusive_bound(
    node: &mut Map<String, Value>,
    path: &str,
    cx: &mut Cx<'_>,
    exclusive: &str,
    inclusive: &str,
    step: i64,
) {
    let Some(bound) = node.get(exclusive).and_then(Value::as_number).cloned() else { return };
    if node.contains_key(inclusive) {
        return; // Left to the keyword filter, which drops and reports it.
    }
    node.remove(exclusive);
    let integer = node.get("type") == Some(&json!("integer"));
    match bound.as_i64().and_then(|n| n.checked_add(step)) {
        Some(next) if integer => {
            node.insert(inclusive.into(), json!(next));
        }
        _ => {
            node.insert(inclusive.into(), Value::Number(bound));
            cx.report.note(format!("sent `{exclusive}` as the inclusive `{inclusive}`"), path);
        }
    }
}
