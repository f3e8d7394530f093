//! The system prompt of a text protocol, assembled from named parts through a template:
//! the caller's system instruction, the protocol's rules, the tools' documentation, and an
//! optional section of the application's own. A placeholder the template names but no part
//! fills is an error, never an empty hole in the prompt.

use std::collections::BTreeMap;
use std::fmt::{self, Write as _};

use serde_json::{Map, Value};

use super::TextProtocol;
use crate::data::message::ToolSpec;

/// The template used unless the application gives its own. The tools come first, so that
/// the part that changes least is the prefix a provider's prompt cache can keep.
pub(crate) const DEFAULT_TEMPLATE: &str = "{rules}\n\n{tools}\n\n{system}\n\n{user}";

/// The parts a template can name: `{system}`, `{rules}`, `{tools}`, `{user}`. A part left
/// empty is dropped with the blank lines around it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct PromptParts {
    /// The caller's system instruction.
    pub system: String,
    /// The protocol's rules.
    pub rules: String,
    /// The tools' documentation.
    pub tools: String,
    /// An optional section of the application's.
    pub user: String,
}

/// A template that cannot be filled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TemplateError {
    /// A placeholder with no part of that name.
    UnknownPlaceholder(String),
    /// A `{` without its `}`.
    Unclosed(usize),
}

impl fmt::Display for TemplateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnknownPlaceholder(name) => {
                write!(f, "the prompt template names {{{name}}}, which is not one of system, rules, tools, user")
            }
            Self::Unclosed(at) => write!(f, "the prompt template opens a placeholder at byte {at} and never closes it"),
        }
    }
}

impl std::error::Error for TemplateError {}

/// Fills `template` with `parts`. `{{` and `}}` stand for literal braces. Runs of blank
/// lines left by empty parts shrink to one blank line, and the result is trimmed.
pub(crate) fn render(template: &str, parts: &PromptParts) -> Result<String, TemplateError> {
    let named: BTreeMap<&str, &str> = [
        ("system", parts.system.as_str()),
        ("rules", parts.rules.as_str()),
        ("tools", parts.tools.as_str()),
        ("user", parts.user.as_str()),
    ]
    .into_iter()
    .collect();
    let mut out = String::with_capacity(template.len() + parts.tools.len() + parts.rules.len() + parts.system.len());
    let mut rest = template;
    let mut offset = 0;
    while let Some(at) = rest.find(['{', '}']) {
        out.push_str(&rest[..at]);
        let brace = rest.as_bytes()[at];
        let after = &rest[at + 1..];
        if after.as_bytes().first() == Some(&brace) {
            out.push(char::from(brace));
            rest = &after[1..];
            offset += at + 2;
            continue;
        }
        if brace == b'}' {
            // A lone `}` is literal text.
            out.push('}');
            rest = after;
            offset += at + 1;
            continue;
        }
        let Some(end) = after.find('}') else { return Err(TemplateError::Unclosed(offset + at)) };
        let name = after[..end].trim();
        let value = named.get(name).ok_or_else(|| TemplateError::UnknownPlaceholder(name.to_string()))?;
        out.push_str(value);
        rest = &after[end + 1..];
        offset += at + 1 + end + 1;
    }
    out.push_str(rest);
    Ok(collapse_blank_lines(&out))
}

/// At most one blank line in a row, none at either end.
fn collapse_blank_lines(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut blank_run = 0;
    for line in text.trim().lines() {
        if line.trim().is_empty() {
            blank_run += 1;
            if blank_run > 1 {
                continue;
            }
        } else {
            blank_run = 0;
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out.truncate(out.trim_end().len());
    out
}

/// One tool, as the model is told about it: its name and description, its parameters
/// (required ones first, each with its type and description), and an example call in the
/// protocol's own format: the tool's own examples (its input schema's `examples`, see
/// [`super::render::examples`]), else one made from its schema.
pub(crate) fn tool_doc(protocol: &dyn TextProtocol, tool: &ToolSpec, examples: &[Map<String, Value>]) -> String {
    let mut doc = format!("## {}\n", tool.name);
    if !tool.description.trim().is_empty() {
        let _ = writeln!(doc, "{}", tool.description.trim());
    }
    let properties = tool.input_schema.get("properties").and_then(Value::as_object);
    let required: Vec<&str> = tool
        .input_schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    match properties.filter(|p| !p.is_empty()) {
        None => doc.push_str("Parameters: none.\n"),
        Some(properties) => {
            doc.push_str("Parameters:\n");
            let mut names: Vec<&String> = properties.keys().collect();
            // Required parameters first, each group in the schema's order.
            names.sort_by_key(|name| !required.contains(&name.as_str()));
            for name in names {
                let schema = &properties[name];
                let need = if required.contains(&name.as_str()) { "required" } else { "optional" };
                let _ = write!(doc, "- {name} ({}, {need})", type_name(schema));
                if let Some(description) = schema.get("description").and_then(Value::as_str) {
                    let _ = write!(doc, ": {}", description.trim());
                }
                if let Some(values) = schema.get("enum").and_then(Value::as_array) {
                    let values: Vec<String> = values.iter().map(Value::to_string).collect();
                    let _ = write!(doc, " (one of {})", values.join(", "));
                }
                doc.push('\n');
            }
        }
    }
    let generated;
    let examples = if examples.is_empty() {
        generated = [example_from_schema(&tool.input_schema)];
        &generated[..]
    } else {
        examples
    };
    for example in examples {
        let _ = write!(doc, "Example:\n{}\n", protocol.format_call(&tool.name, example));
    }
    doc
}

/// The documentation of every tool, one after the other, under a heading.
pub(crate) fn tools_doc(protocol: &dyn TextProtocol, tools: &[(ToolSpec, Vec<Map<String, Value>>)]) -> String {
    if tools.is_empty() {
        return String::new();
    }
    let mut doc = String::from("# Tools\n\n");
    for (tool, examples) in tools {
        doc.push_str(&tool_doc(protocol, tool, examples));
        doc.push('\n');
    }
    doc.truncate(doc.trim_end().len());
    doc
}

/// A schema's type, as the documentation names it.
fn type_name(schema: &Value) -> String {
    match schema.get("type") {
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(types)) => types.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(" or "),
        _ if schema.get("enum").is_some() => "enum".into(),
        _ => "any".into(),
    }
}

/// Arguments that fit `schema`, for a tool that brings no example of its own: every
/// required parameter (all of them when none is marked required) with a value of its type
/// (its first `enum` value or its `default` or `examples[0]` where the schema has one).
pub(crate) fn example_from_schema(schema: &Value) -> Map<String, Value> {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else { return Map::new() };
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    properties
        .iter()
        .filter(|(name, _)| required.is_empty() || required.contains(&name.as_str()))
        .map(|(name, property)| (name.clone(), example_value(name, property, 0)))
        .collect()
}

/// A value of `schema`'s type; `depth` bounds nested objects and arrays.
fn example_value(name: &str, schema: &Value, depth: usize) -> Value {
    if let Some(value) = schema.get("enum").and_then(Value::as_array).and_then(|v| v.first()) {
        return value.clone();
    }
    if let Some(value) = schema.get("default").or_else(|| schema.get("examples").and_then(|e| e.get(0))) {
        return value.clone();
    }
    let kind = match schema.get("type") {
        Some(Value::String(t)) => t.as_str(),
        Some(Value::Array(types)) => types.iter().filter_map(Value::as_str).find(|t| *t != "null").unwrap_or("null"),
        _ => "string",
    };
    match kind {
        "integer" => Value::from(1),
        "number" => Value::from(1.5),
        "boolean" => Value::Bool(true),
        "null" => Value::Null,
        "array" if depth < 3 => {
            let item = schema
                .get("items")
                .map_or(Value::String(format!("{name} item")), |s| example_value(name, s, depth + 1));
            Value::Array(vec![item])
        }
        "object" if depth < 3 => Value::Object(example_from_schema(schema)),
        "array" => Value::Array(Vec::new()),
        "object" => Value::Object(Map::new()),
        _ => Value::String(format!("example {name}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_template_fills_named_parts_and_drops_empty_ones() {
        let parts =
            PromptParts { system: "Be brief.".into(), rules: "R".into(), tools: "T".into(), user: String::new() };
        assert_eq!(render(DEFAULT_TEMPLATE, &parts).unwrap(), "R\n\nT\n\nBe brief.");
        assert_eq!(render("{{literal}} {system}", &parts).unwrap(), "{literal} Be brief.");
        assert_eq!(render("a } b {user}", &parts).unwrap(), "a } b");
    }

    #[test]
    fn an_unknown_or_unclosed_placeholder_is_an_error() {
        let parts = PromptParts::default();
        assert_eq!(render("{system} {tool}", &parts), Err(TemplateError::UnknownPlaceholder("tool".into())));
        assert_eq!(render("abc {system", &parts), Err(TemplateError::Unclosed(4)));
    }

    #[test]
    fn an_example_fits_the_schema() {
        let schema = json!({
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "days": {"type": "integer"},
                "unit": {"type": "string", "enum": ["c", "f"]},
                "tags": {"type": "array", "items": {"type": "string"}},
                "verbose": {"type": "boolean"}
            },
            "required": ["city", "days", "unit", "tags"]
        });
        let example = example_from_schema(&schema);
        assert_eq!(
            Value::Object(example),
            json!({"city": "example city", "days": 1, "unit": "c", "tags": ["example tags"]})
        );
    }
}
