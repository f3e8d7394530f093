//! Function call arguments streamed as `partialArgs` (Vertex AI with
//! `functionCallingConfig.streamFunctionCallArguments`; the Gemini API sends whole calls).
//!
//! Each `PartialArg` names one leaf by an RFC 9535 JSON path (`$.recipe.steps[2]`) and
//! carries a string piece (continued while `willContinue` is true), a number, a boolean
//! or a null. The leaves are assembled into one object, emitted as the call's input when
//! the call ends.
//!
//! Two kinds of malformed leaf are told apart. A leaf far past its array's end is dropped
//! (what came before it still makes sense). A leaf whose path is nested deeper than
//! [`MAX_DEPTH`] is a `Decode` error that ends the stream: a 28 KB event of 14,000 path
//! segments would otherwise build a value that overflows the stack when it is written out
//! or dropped, and no real tool input is nested that deeply (see [`crate::data::depth`]).

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::{Map, Number, Value};

use super::wire::Str;
use crate::data::depth::MAX_DEPTH;
use crate::data::error::StreamError;

/// How far past an array's end a leaf may land (the elements between become nulls).
/// Elements stream in order, so a leaf much further out is malformed: it is dropped
/// rather than allowed to turn a few bytes of path into megabytes of nulls.
const MAX_INDEX_GAP: usize = 1_000;

/// One `PartialArg`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct PartialArg<'a> {
    #[serde(borrow, default)]
    json_path: Cow<'a, str>,
    #[serde(borrow, default)]
    string_value: Option<Str<'a>>,
    #[serde(default)]
    number_value: Option<Number>,
    #[serde(default)]
    bool_value: Option<bool>,
    /// `"NULL_VALUE"` when the leaf is null.
    #[serde(borrow, default)]
    null_value: Option<Str<'a>>,
    #[serde(default)]
    will_continue: Option<bool>,
}

/// The arguments of one call being assembled.
#[derive(Debug, Default)]
pub(super) struct PartialArgs {
    root: Map<String, Value>,
    /// The path of a string leaf whose next piece is still to come.
    open_string: Option<String>,
}

#[derive(Debug, PartialEq)]
enum Segment<'a> {
    Key(Cow<'a, str>),
    Index(usize),
}

impl PartialArgs {
    /// Starts from the call's whole `args`, if it came with any.
    pub(super) fn with_args(args: Option<Map<String, Value>>) -> Self {
        Self { root: args.unwrap_or_default(), open_string: None }
    }

    /// Applies one streamed leaf. Unknown value kinds are ignored; a path nested deeper
    /// than [`MAX_DEPTH`] is an error.
    pub(super) fn apply(&mut self, arg: &PartialArg<'_>) -> Result<(), StreamError> {
        let Some(path) = parse_path(&arg.json_path) else {
            let message = format!("a partialArgs jsonPath is nested deeper than {MAX_DEPTH} levels");
            return Err(StreamError::decode(message, &arg.json_path));
        };
        let continuing = self.open_string.as_deref() == Some(&*arg.json_path);
        self.open_string = None;
        let value = if let Some(Str(piece)) = &arg.string_value {
            if arg.will_continue == Some(true) {
                self.open_string = Some(arg.json_path.to_string());
            }
            if continuing {
                if let Some(Value::String(s)) = self.leaf(&path) {
                    s.push_str(piece);
                    return Ok(());
                }
            }
            Value::String(piece.to_string())
        } else if let Some(n) = &arg.number_value {
            Value::Number(n.clone())
        } else if let Some(b) = arg.bool_value {
            Value::Bool(b)
        } else if arg.null_value.is_some() {
            Value::Null
        } else {
            return Ok(());
        };
        if let Some(slot) = self.leaf(&path) {
            *slot = value;
        }
        Ok(())
    }

    /// The arguments as JSON text.
    pub(super) fn into_json(self) -> String {
        Value::Object(self.root).to_string()
    }

    /// The slot at `path`, creating objects and arrays on the way; `None` for a path
    /// that cannot be built (the root is an object, an index lies too far past its array's
    /// end).
    fn leaf(&mut self, path: &[Segment<'_>]) -> Option<&mut Value> {
        let (first, rest) = path.split_first()?;
        let Segment::Key(key) = first else { return None };
        let mut slot = self.root.entry(key.as_ref()).or_insert(Value::Null);
        for segment in rest {
            slot = match segment {
                Segment::Key(key) => {
                    if !slot.is_object() {
                        *slot = Value::Object(Map::new());
                    }
                    slot.as_object_mut()?.entry(key.as_ref()).or_insert(Value::Null)
                }
                Segment::Index(i) => {
                    if *i > slot.as_array().map_or(0, Vec::len).saturating_add(MAX_INDEX_GAP) {
                        return None;
                    }
                    if !slot.is_array() {
                        *slot = Value::Array(Vec::new());
                    }
                    let items = slot.as_array_mut()?;
                    if items.len() <= *i {
                        items.resize(*i + 1, Value::Null);
                    }
                    items.get_mut(*i)?
                }
            };
        }
        Some(slot)
    }
}

/// Parses `$.a.b[0]['c d']`. A path that does not parse names a top-level key spelled
/// as the whole path, so its value is kept rather than lost. `None` for a path of more
/// than [`MAX_DEPTH`] segments (each one a level of nesting).
fn parse_path(path: &str) -> Option<Vec<Segment<'_>>> {
    match parse_path_strict(path) {
        Strict::Parsed(segments) => Some(segments),
        Strict::Malformed => Some(vec![Segment::Key(Cow::Borrowed(path))]),
        Strict::TooDeep => None,
    }
}

enum Strict<'a> {
    Parsed(Vec<Segment<'a>>),
    Malformed,
    TooDeep,
}

fn parse_path_strict(path: &str) -> Strict<'_> {
    match segments(path) {
        Some(segments) if segments.len() > MAX_DEPTH => Strict::TooDeep,
        // The arguments are an object: the first step must be a key.
        Some(segments) if matches!(segments.first(), Some(Segment::Key(_))) => Strict::Parsed(segments),
        _ => Strict::Malformed,
    }
}

/// The segments of a path, stopping one past [`MAX_DEPTH`] (enough to tell it is too deep).
fn segments(path: &str) -> Option<Vec<Segment<'_>>> {
    let mut rest = path.strip_prefix('$')?;
    let mut segments = Vec::new();
    while !rest.is_empty() && segments.len() <= MAX_DEPTH {
        if let Some(after) = rest.strip_prefix('.') {
            let end = after.find(['.', '[']).unwrap_or(after.len());
            if end == 0 {
                return None;
            }
            segments.push(Segment::Key(Cow::Borrowed(&after[..end])));
            rest = &after[end..];
        } else if let Some(after) = rest.strip_prefix('[') {
            let close = after.find(']')?;
            let inner = &after[..close];
            let quoted = inner
                .strip_prefix('\'')
                .and_then(|s| s.strip_suffix('\''))
                .or_else(|| inner.strip_prefix('"').and_then(|s| s.strip_suffix('"')));
            match quoted {
                Some(key) => segments.push(Segment::Key(Cow::Borrowed(key))),
                None => segments.push(Segment::Index(inner.parse().ok()?)),
            }
            rest = &after[close + 1..];
        } else {
            return None;
        }
    }
    Some(segments)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arg(path: &str, value: serde_json::Value) -> PartialArg<'static> {
        let mut v = value;
        v["jsonPath"] = serde_json::json!(path);
        let text: &'static str = Box::leak(v.to_string().into_boxed_str());
        serde_json::from_str(text).unwrap()
    }

    #[test]
    fn parses_paths() {
        use Segment::*;
        assert_eq!(
            parse_path("$.recipe.steps[6].name"),
            Some(vec![Key("recipe".into()), Key("steps".into()), Index(6), Key("name".into())])
        );
        assert_eq!(parse_path("$['a b'][\"c\"]"), Some(vec![Key("a b".into()), Key("c".into())]));
        assert_eq!(parse_path("not a path"), Some(vec![Key("not a path".into())]));
        assert_eq!(parse_path("$[0]"), Some(vec![Key("$[0]".into())]));
    }

    #[test]
    fn a_leaf_far_past_the_end_of_its_array_is_dropped_not_allocated() {
        let mut args = PartialArgs::default();
        args.apply(&arg("$.xs[2]", serde_json::json!({"numberValue": 1}))).unwrap();
        args.apply(&arg("$.xs[5000000]", serde_json::json!({"numberValue": 2}))).unwrap();
        args.apply(&arg("$.ys[1001]", serde_json::json!({"numberValue": 3}))).unwrap();
        args.apply(&arg("$.zs[1000]", serde_json::json!({"numberValue": 4}))).unwrap();
        let value: serde_json::Value = serde_json::from_str(&args.into_json()).unwrap();
        assert_eq!(value["xs"], serde_json::json!([null, null, 1]));
        assert_eq!(value["ys"], serde_json::Value::Null, "the leaf was dropped");
        assert_eq!(value["zs"].as_array().map(Vec::len), Some(1001), "a gap of up to 1,000 is filled");
    }

    #[test]
    fn assembles_nested_leaves_and_continued_strings() {
        let mut args = PartialArgs::default();
        args.apply(&arg("$.r.items[1].name", serde_json::json!({"stringValue": "Gro", "willContinue": true}))).unwrap();
        args.apply(&arg("$.r.items[1].name", serde_json::json!({"stringValue": "und beef"}))).unwrap();
        args.apply(&arg("$.r.count", serde_json::json!({"numberValue": 2}))).unwrap();
        args.apply(&arg("$.r.ok", serde_json::json!({"boolValue": true}))).unwrap();
        args.apply(&arg("$.r.none", serde_json::json!({"nullValue": "NULL_VALUE"}))).unwrap();
        args.apply(&arg("$.r.items[9999999]", serde_json::json!({"stringValue": "x"}))).unwrap();
        let value: Value = serde_json::from_str(&args.into_json()).unwrap();
        assert_eq!(
            value,
            serde_json::json!({"r": {"items": [null, {"name": "Ground beef"}], "count": 2, "ok": true, "none": null}})
        );
    }

    #[test]
    fn a_path_nested_deeper_than_the_bound_is_a_typed_error_not_a_deep_value() {
        let mut args = PartialArgs::default();
        let deepest = format!("${}", ".a".repeat(MAX_DEPTH));
        args.apply(&arg(&deepest, serde_json::json!({"numberValue": 1}))).unwrap();
        let mixed = format!("$.b{}", "[0]".repeat(MAX_DEPTH - 1));
        args.apply(&arg(&mixed, serde_json::json!({"boolValue": true}))).unwrap();
        // The 28 KB event of the issue: 14,000 segments.
        for path in [format!("${}", ".a".repeat(MAX_DEPTH + 1)), format!("$.b{}", "[0]".repeat(14_000))] {
            let err = args.apply(&arg(&path, serde_json::json!({"stringValue": "x"}))).unwrap_err();
            let StreamError::Decode { message, payload } = err else { panic!("a decode error") };
            assert!(message.contains("deeper than 64 levels"), "{message}");
            assert!(payload.len() <= 200, "the payload is quoted, not copied whole");
        }
        let value: Value = serde_json::from_str(&args.into_json()).unwrap();
        assert!(!crate::data::depth::exceeds(&value, MAX_DEPTH), "what was kept stays within the bound");
        assert!(crate::data::depth::exceeds(&value, MAX_DEPTH - 1), "a leaf at the bound is kept");
    }
}
