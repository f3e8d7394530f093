//! How deeply nested a JSON value omni builds, walks or validates may be.
//!
//! serde_json, recursive code and the `jsonschema` crate walk a value with one stack
//! frame (or several) per level, so a value nested deeply enough overflows the stack and
//! aborts the process: an abort cannot be caught. Every value parsed from JSON text is
//! already bounded by serde_json's parser (128 levels, its recursion limit, which omni
//! never disables), but values are also *built* from input (Gemini's `partialArgs`
//! paths, inlined schema references) and handed over by applications (tool inputs,
//! schemas). Those are held to [`MAX_DEPTH`], in one place each:
//!
//! | where | what is bounded | past the bound |
//! |---|---|---|
//! | Gemini `partialArgs` | segments of a leaf's JSON path | a `Decode` stream error |
//! | the accumulator | a tool call's parsed input | kept as text with `invalid_tool_input`, as for bad JSON |
//! | `Dialect::build_request` | tool inputs, schemas, private data in the context, extra options | [`RequestError::TooDeep`](crate::data::error::RequestError::TooDeep) |
//! | `JsonSchemaValidator` | the schema it compiles, each value it checks | `SchemaError`, `ValidationError` |
//! | schema adaptation | the depth it descends to | the rest is left as given, with a warning |
//!
//! Audited and bounded already: every JSON text omni parses (stream events, tool
//! arguments, error bodies, structured output, user schemas from text) goes through
//! serde_json with its recursion limit on (its `unbounded_depth` feature is off in the whole
//! dependency tree, and `disable_recursion_limit` is called nowhere), so a parsed value
//! has at most 128 levels, which serialising, cloning and dropping handle on a small stack;
//! request builders wrap values in a fixed number of levels; framing, text and thinking
//! are flat; `schema::for_type` follows Rust types, whose recursion stays a `$ref`.
//!
//! The bound is half the parser's: 64 levels is far beyond any real tool input or schema
//! (OpenAI's strict mode allows 10 levels of objects), and validating a value that deep
//! with `jsonschema` takes about 2 to 4 KiB of stack per level in a debug build, so it
//! fits a 256 KiB thread stack with room to spare; 128 levels do not.

use serde_json::Value;

use crate::data::message::{Block, Context};
use crate::data::options::Options;

/// The deepest nesting of arrays and objects omni builds, walks or validates.
pub const MAX_DEPTH: usize = 64;

/// True when `value` nests arrays and objects more than `limit` levels deep (`[]` is one
/// level, `[[1]]` two, a scalar none). Iterative, so any value can be measured; stops at
/// the first path found too deep.
pub fn exceeds(value: &Value, limit: usize) -> bool {
    let mut pending: Vec<(&Value, usize)> = vec![(value, 0)];
    while let Some((value, above)) = pending.pop() {
        let level = above + 1;
        match value {
            Value::Array(_) | Value::Object(_) if level > limit => return true,
            Value::Array(items) => pending.extend(items.iter().map(|child| (child, level))),
            Value::Object(map) => pending.extend(map.values().map(|child| (child, level))),
            _ => {}
        }
    }
    false
}

/// The first value of a request's input nested deeper than [`MAX_DEPTH`], named for an
/// error: a tool input or private data in the history, a tool's schema, the output schema,
/// an extra option.
/// Values the core parsed are within the bound already; this catches what the
/// application built.
pub(crate) fn too_deep_in_request(context: &Context, options: &Options) -> Option<String> {
    let too_deep = |value: &Value| exceeds(value, MAX_DEPTH);
    for (at, message) in context.messages.iter().enumerate() {
        if let Some(key) = message.private.iter().find(|(_, value)| too_deep(value)).map(|(key, _)| key) {
            return Some(format!("the private data `{key}` of message {at}"));
        }
        for block in &message.content {
            if let Block::ToolUse(call) = block {
                if too_deep(&call.input) {
                    return Some(format!("the input of tool call `{}` in message {at}", call.id));
                }
            }
        }
    }
    if let Some(tool) = context.tools.iter().find(|tool| too_deep(&tool.input_schema)) {
        return Some(format!("the schema of tool `{}`", tool.name));
    }
    if let Some(output) = options.output.as_ref().filter(|output| too_deep(&output.schema)) {
        return Some(format!("the output schema `{}`", output.name));
    }
    // One level under the limit: a known key may be placed one object down the body.
    let (key, _) = options.extra.iter().find(|(_, value)| exceeds(value, MAX_DEPTH - 1))?;
    Some(format!("the extra option `{key}`"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// `levels` arrays nested in one another, built without recursion.
    fn nested(levels: usize) -> Value {
        let mut value = json!(1);
        for _ in 0..levels {
            value = Value::Array(vec![value]);
        }
        value
    }

    #[test]
    fn counts_levels_of_arrays_and_objects() {
        assert!(!exceeds(&json!(1), 0));
        assert!(!exceeds(&json!([]), 1));
        assert!(exceeds(&json!([]), 0));
        assert!(!exceeds(&json!({"a": [1, {"b": 2}]}), 3));
        assert!(exceeds(&json!({"a": [1, {"b": {}}]}), 3));
        assert!(!exceeds(&nested(MAX_DEPTH), MAX_DEPTH));
        assert!(exceeds(&nested(MAX_DEPTH + 1), MAX_DEPTH));
    }

    #[test]
    fn measures_a_value_far_deeper_than_the_stack_could_walk() {
        let deep = nested(100_000);
        assert!(exceeds(&deep, MAX_DEPTH));
        // Taken apart level by level: the default drop would recurse 100,000 times.
        dismantle(deep);
    }

    fn dismantle(mut value: Value) {
        while let Value::Array(mut items) = value {
            value = items.pop().unwrap_or(Value::Null);
        }
    }
}
