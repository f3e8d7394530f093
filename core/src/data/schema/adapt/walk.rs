//! What every adapter shares: finding subschemas, resolving and inlining local `$ref`s,
//! merging `allOf`, dropping keywords (with a hint in the description), and the report
//! that becomes the warnings.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use crate::data::depth::MAX_DEPTH;
use crate::data::response::Warning;

/// Keywords whose value maps names to subschemas.
const SCHEMA_MAPS: [&str; 5] = ["properties", "patternProperties", "$defs", "definitions", "dependentSchemas"];
/// Keywords whose value is a list of subschemas (`items` too, in its draft-07 tuple form).
const SCHEMA_LISTS: [&str; 4] = ["allOf", "anyOf", "oneOf", "prefixItems"];
/// Keywords whose value is one subschema.
const SCHEMA_SINGLES: [&str; 12] = [
    "items",
    "additionalProperties",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
    "unevaluatedItems",
    "unevaluatedProperties",
    "additionalItems",
    "contentSchema",
];

/// At most this many `$ref`s are inlined in one schema: a wide, deep graph of shared
/// definitions could otherwise grow without bound.
const MAX_INLINES: usize = 1_000;
/// A hint longer than this is left out of the description.
const MAX_HINT: usize = 200;
/// A warning lists at most this many places per change.
const MAX_PATHS: usize = 5;

/// The path of a child: `path` plus one JSON Pointer segment.
pub(super) fn child(path: &str, segment: &str) -> String {
    let mut out = String::with_capacity(path.len() + segment.len() + 1);
    out.push_str(path);
    out.push('/');
    for c in segment.chars() {
        match c {
            '~' => out.push_str("~0"),
            '/' => out.push_str("~1"),
            c => out.push(c),
        }
    }
    out
}

/// True when the node at `path` (a JSON Pointer: one `/` per level) lies [`MAX_DEPTH`]
/// levels down: adapters leave it as it is. Each level is a stack frame of theirs, and
/// inlined references can make a schema deeper than the one given (see [`crate::data::depth`]).
pub(super) fn too_deep(path: &str) -> bool {
    path.bytes().filter(|b| *b == b'/').count() >= MAX_DEPTH
}

/// Calls `f` on every direct subschema of `node` with its path and the keyword it sits
/// under, in a fixed order.
pub(super) fn for_each_subschema(node: &mut Map<String, Value>, path: &str, f: &mut dyn FnMut(&mut Value, &str, &str)) {
    for (key, value) in node.iter_mut() {
        let key = key.as_str();
        let here = child(path, key);
        if SCHEMA_MAPS.contains(&key) {
            if let Value::Object(map) = value {
                for (name, schema) in map.iter_mut() {
                    f(schema, &child(&here, name), key);
                }
            }
        } else if SCHEMA_LISTS.contains(&key) || (key == "items" && value.is_array()) {
            if let Value::Array(list) = value {
                for (i, schema) in list.iter_mut().enumerate() {
                    f(schema, &child(&here, &i.to_string()), key);
                }
            }
        } else if SCHEMA_SINGLES.contains(&key) {
            f(value, &here, key);
        }
    }
}

/// Read-only twin of [`for_each_subschema`]: each direct subschema with its path and
/// keyword.
pub(super) fn children<'a>(node: &'a Map<String, Value>, path: &str) -> Vec<(&'a Value, String, &'a str)> {
    let mut out = Vec::new();
    for (key, value) in node {
        let key = key.as_str();
        let here = child(path, key);
        if SCHEMA_MAPS.contains(&key) {
            for (name, schema) in value.as_object().into_iter().flatten() {
                out.push((schema, child(&here, name), key));
            }
        } else if SCHEMA_LISTS.contains(&key) || (key == "items" && value.is_array()) {
            for (i, schema) in value.as_array().into_iter().flatten().enumerate() {
                out.push((schema, child(&here, &i.to_string()), key));
            }
        } else if SCHEMA_SINGLES.contains(&key) {
            out.push((value, here, key));
        }
    }
    out
}

/// True for an object schema: `type` says `object`, or it lists properties without a type.
pub(super) fn is_object_schema(node: &Map<String, Value>) -> bool {
    match node.get("type") {
        Some(Value::String(t)) => t == "object",
        Some(Value::Array(types)) => types.iter().any(|t| t == "object"),
        _ => node.contains_key("properties"),
    }
}

/// True when the schema surely accepts `null`: every keyword that restricts the type
/// (`type`, `enum`, `const`, `anyOf`, `oneOf`) allows it. A `$ref` counts as "not sure".
pub(super) fn accepts_null(schema: &Value) -> bool {
    let Value::Object(node) = schema else { return schema == &Value::Bool(true) };
    if node.contains_key("$ref") {
        return false;
    }
    let type_ok = match node.get("type") {
        None => true,
        Some(Value::String(t)) => t == "null",
        Some(Value::Array(types)) => types.iter().any(|t| t == "null"),
        Some(_) => false,
    };
    let enum_ok = node.get("enum").is_none_or(|values| values.as_array().is_some_and(|v| v.contains(&Value::Null)));
    let const_ok = node.get("const").is_none_or(Value::is_null);
    let branches_ok = |key: &str| {
        node.get(key).is_none_or(|branches| branches.as_array().is_some_and(|b| b.iter().any(accepts_null)))
    };
    type_ok && enum_ok && const_ok && branches_ok("anyOf") && branches_ok("oneOf")
}

/// Resolves a reference inside the document (`#` or `#/json/pointer`).
pub(super) fn resolve<'a>(root: &'a Value, reference: &str) -> Option<&'a Value> {
    let pointer = reference.strip_prefix('#')?;
    if pointer.is_empty() {
        Some(root)
    } else if pointer.starts_with('/') {
        root.pointer(pointer)
    } else {
        None
    }
}

/// True when following `reference` can lead back to it: such a definition is recursive
/// and cannot be inlined.
pub(super) fn is_recursive(root: &Value, reference: &str) -> bool {
    let mut seen = BTreeSet::new();
    let mut pending = vec![reference.to_string()];
    while let Some(next) = pending.pop() {
        let Some(target) = resolve(root, &next) else { continue };
        let mut found = Vec::new();
        collect_refs(target, &mut found);
        for r in found {
            if r == reference {
                return true;
            }
            if seen.insert(r.clone()) {
                pending.push(r);
            }
        }
    }
    false
}

/// Every `$ref` string inside `schema` (iteratively: an adapted schema may be deeper
/// than the one given).
pub(super) fn collect_refs(schema: &Value, out: &mut Vec<String>) {
    let mut pending = vec![schema];
    while let Some(next) = pending.pop() {
        let Value::Object(node) = next else { continue };
        if let Some(Value::String(r)) = node.get("$ref") {
            out.push(r.clone());
        }
        pending.extend(children(node, "").into_iter().rev().map(|(sub, _, _)| sub));
    }
}

/// True when the document has a reference that can lead back to itself.
pub(super) fn has_recursion(root: &Value) -> bool {
    let mut refs = Vec::new();
    collect_refs(root, &mut refs);
    let unique: BTreeSet<String> = refs.into_iter().collect();
    unique.iter().any(|r| is_recursive(root, r))
}

/// The walk's shared state: the original document (references resolve against it) and
/// the report.
#[derive(Debug)]
pub(super) struct Cx<'a> {
    pub root: &'a Value,
    pub report: Report,
    inlines: usize,
    /// Hints for the node being adapted, written by [`filter_keywords`].
    pending_hints: Vec<(String, Value)>,
}

impl<'a> Cx<'a> {
    pub(super) fn new(root: &'a Value) -> Self {
        Cx { root, report: Report::default(), inlines: 0, pending_hints: Vec::new() }
    }

    /// Keeps a removed or changed keyword as a hint for the node being adapted.
    pub(super) fn hint(&mut self, keyword: &str, value: Value) {
        self.pending_hints.push((keyword.to_string(), value));
    }

    /// The referenced schema, cloned, when it is local, exists, is not recursive (unless
    /// `allow_recursive`: one level at the root is safe) and the inline budget allows one more.
    pub(super) fn inlinable(&mut self, reference: &str, allow_recursive: bool) -> Option<Value> {
        if self.inlines >= MAX_INLINES || (!allow_recursive && is_recursive(self.root, reference)) {
            return None;
        }
        let target = resolve(self.root, reference)?.clone();
        self.inlines += 1;
        Some(target)
    }

    /// Replaces `{"$ref": r, ...siblings}` by the referenced schema with the siblings laid
    /// over it (theirs win, as OpenAI's own SDK does). Returns false when the reference
    /// cannot be inlined; the node is then unchanged.
    pub(super) fn inline_ref(&mut self, node: &mut Map<String, Value>, allow_recursive: bool) -> bool {
        let Some(Value::String(reference)) = node.get("$ref") else { return false };
        let reference = reference.clone();
        let Some(Value::Object(mut target)) = self.inlinable(&reference, allow_recursive) else { return false };
        node.remove("$ref");
        for (key, value) in std::mem::take(node) {
            target.insert(key, value);
        }
        *node = target;
        true
    }

    /// Merges `allOf` into its node when every branch is an object schema (or a
    /// reference to one) whose keywords agree with the node's: the common output of
    /// schema generators for "this definition, plus a description". Returns false, leaving
    /// the node unchanged, on any conflict.
    pub(super) fn merge_all_of(&mut self, node: &mut Map<String, Value>) -> bool {
        self.merge_all_of_at(node, 0)
    }

    /// [`Cx::merge_all_of`] `nested` levels into branches that hold `allOf` themselves
    /// (each through a reference, so a chain of definitions cannot recurse without bound).
    fn merge_all_of_at(&mut self, node: &mut Map<String, Value>, nested: usize) -> bool {
        if nested >= MAX_DEPTH {
            return false;
        }
        let Some(Value::Array(branches)) = node.get("allOf") else { return false };
        let branches = branches.clone();
        let mut merged = node.clone();
        merged.remove("allOf");
        for branch in branches {
            let mut branch = match branch {
                Value::Bool(true) => continue,
                Value::Object(b) => b,
                _ => return false,
            };
            if branch.contains_key("$ref") && !self.inline_ref(&mut branch, false) {
                return false;
            }
            if branch.contains_key("allOf") && !self.merge_all_of_at(&mut branch, nested + 1) {
                return false;
            }
            if !merge_into(&mut merged, branch) {
                return false;
            }
        }
        *node = merged;
        true
    }
}

/// Lays `branch` over `target` as an intersection; false on a conflict.
fn merge_into(target: &mut Map<String, Value>, branch: Map<String, Value>) -> bool {
    for (key, value) in branch {
        match key.as_str() {
            "properties" => {
                let Value::Object(props) = value else { return false };
                let entry = target.entry("properties").or_insert_with(|| Value::Object(Map::new()));
                let Value::Object(existing) = entry else { return false };
                for (name, schema) in props {
                    match existing.get(&name) {
                        Some(old) if old != &schema => return false,
                        _ => {
                            existing.insert(name, schema);
                        }
                    }
                }
            }
            "required" => {
                let Value::Array(names) = value else { return false };
                let entry = target.entry("required").or_insert_with(|| Value::Array(Vec::new()));
                let Value::Array(existing) = entry else { return false };
                for name in names {
                    if !existing.contains(&name) {
                        existing.push(name);
                    }
                }
            }
            // Annotations: the node's own text wins.
            "description" | "title" | "$comment" | "examples" | "default" => {
                target.entry(key).or_insert(value);
            }
            _ => match target.get(&key) {
                Some(old) if old != &value => return false,
                _ => {
                    target.insert(key, value);
                }
            },
        }
    }
    true
}

/// What happens to a keyword a provider does not take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Drop {
    /// A constraint or structure the provider will not enforce: removed, kept as a hint
    /// in the description when it is a plain value, and reported.
    Reported,
    /// An annotation (`default`, `examples` …): removed and kept as a hint, not reported,
    /// since nothing the provider enforces changes.
    Quiet,
    /// Meta data about the document (`$schema`, `$comment`): removed without a trace.
    Silent,
}

/// How a keyword outside a provider's list is dropped.
pub(super) fn default_drop(keyword: &str) -> Drop {
    match keyword {
        "$schema" | "$comment" | "$vocabulary" | "$id" | "$anchor" | "$dynamicAnchor" => Drop::Silent,
        "default" | "examples" | "deprecated" | "readOnly" | "writeOnly" | "contentMediaType" | "contentEncoding"
        | "nullable" => Drop::Quiet,
        k if k.starts_with("x-") => Drop::Quiet,
        _ => Drop::Reported,
    }
}

/// Removes every keyword `keep` rejects, reporting and hinting as [`default_drop`] says,
/// then writes the node's hints into its description.
pub(super) fn filter_keywords(node: &mut Map<String, Value>, path: &str, cx: &mut Cx<'_>, keep: impl Fn(&str) -> bool) {
    let rejected: Vec<String> = node.keys().filter(|k| !keep(k)).cloned().collect();
    let mut hints = std::mem::take(&mut cx.pending_hints);
    for keyword in rejected {
        let Some(value) = node.remove(&keyword) else { continue };
        let how = default_drop(&keyword);
        if how == Drop::Reported {
            cx.report.note(format!("removed `{keyword}`"), path);
        }
        if how != Drop::Silent {
            hints.push((keyword, value));
        }
    }
    hints.sort_by(|a, b| a.0.cmp(&b.0));
    add_hints(node, &hints);
}

/// Appends dropped keywords to the description, as Anthropic's SDK does, so the model
/// still reads them: `…\n\n{minLength: 3, pattern: "^a"}`. Schemas (objects) are left
/// out, and a node with `$ref` gets nothing (a sibling of `$ref` is refused).
fn add_hints(node: &mut Map<String, Value>, hints: &[(String, Value)]) {
    if node.contains_key("$ref") {
        return;
    }
    let parts: Vec<String> = hints
        .iter()
        .filter(|(_, v)| !v.is_object() && !v.as_array().is_some_and(|a| a.iter().any(Value::is_object)))
        .map(|(k, v)| format!("{k}: {v}"))
        .filter(|part| part.len() <= MAX_HINT)
        .collect();
    if parts.is_empty() {
        return;
    }
    let hint = format!("{{{}}}", parts.join(", "));
    let description = match node.get("description").and_then(Value::as_str) {
        Some(text) if !text.is_empty() => format!("{text}\n\n{hint}"),
        _ => hint,
    };
    node.insert("description".into(), Value::String(description));
}

/// Changes made to a schema, and (OpenAI strict mode) why it cannot be made to fit.
#[derive(Debug, Default)]
pub(super) struct Report {
    /// Each change with the places it was made, in the order first seen.
    changes: Vec<(String, Vec<String>)>,
    /// Reasons the schema cannot take the provider's strict form.
    pub blockers: Vec<String>,
}

impl Report {
    /// Records a change at `path`.
    pub(super) fn note(&mut self, change: impl Into<String>, path: &str) {
        let change = change.into();
        let path = path.to_string();
        match self.changes.iter_mut().find(|(c, _)| *c == change) {
            Some((_, paths)) => paths.push(path),
            None => self.changes.push((change, vec![path])),
        }
    }

    /// Records why the schema cannot be adapted.
    pub(super) fn block(&mut self, why: impl std::fmt::Display, path: &str) {
        self.blockers.push(format!("{why} at {}", place(path)));
    }

    /// One `schema_adapted` warning listing every change, or none.
    pub(super) fn into_warnings(self, provider: &str) -> Vec<Warning> {
        if self.changes.is_empty() {
            return Vec::new();
        }
        let changes: Vec<String> =
            self.changes.iter().map(|(change, paths)| format!("{change} at {}", places(paths))).collect();
        vec![Warning {
            code: "schema_adapted".into(),
            message: format!("the JSON Schema was adapted for {provider}: {}", changes.join("; ")),
        }]
    }
}

fn place(path: &str) -> String {
    if path.is_empty() {
        "the root".into()
    } else {
        path.to_string()
    }
}

fn places(paths: &[String]) -> String {
    let mut shown: Vec<String> = paths.iter().take(MAX_PATHS).map(|p| place(p)).collect();
    if paths.len() > MAX_PATHS {
        shown.push(format!("and {} more", paths.len() - MAX_PATHS));
    }
    shown.join(", ")
}
