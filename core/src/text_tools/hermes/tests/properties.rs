//! Property tests: the shared checks on generated replies (prose with tags, partial tags,
//! braces, quotes, non-ASCII text, backtick runs, code spans and think blocks holding the
//! tag (mentions); well-formed calls, arguments as objects or as
//! strings; malformed ones; cut anywhere), the spans held to the reference reading, and
//! the round trip of any arguments (the json protocol's generators of hostile values).

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::{select, Index};
use serde_json::{Map, Value};

use super::super::{Hermes, CLOSER, OPENER};
use super::{reference, tools};
use crate::data::message::ToolSpec;
use crate::text_tools::json::tests::properties::{arguments, hostile_text};
use crate::text_tools::{check, schema_for, InvalidCall, Parsed, TextProtocol};

/// Bodies of calls that are not valid, for every reason.
fn malformed() -> Vec<String> {
    let mut bodies: Vec<String> = [
        r#"{"name": "search", "arguments": {}, "extra": 1}"#,
        r#"{"name": "search", "name": "search"}"#,
        r#"{"name": "search", "arguments": [1]}"#,
        r#"{"name": "search", "arguments": "[1]"}"#,
        r#"{"name": "search", "arguments": "{oops"}"#,
        r#"{"name": 1}"#,
        r#"{"arguments": {"q": 1}}"#,
        r#"{"name": "search", "arguments": {"q": tru}}"#,
        r#"{"name": "search", "arguments": {"q": "</tool_call>"}} x"#,
        r#"{"name": "search"}{"name": "search"}"#,
        r#"{"name": "search", "arguments": {"q": "unterminated"#,
        r#"{"name": search "</tool_call>" }"#,
        r#"{"name": "nope", "arguments": {"q": 1}}"#,
        r#"{"name": "\ud800"}"#,
        "{\"name\": \"search\", \"arguments\": {\"q\": \"a\nb\"}}",
        "",
        "not json",
        "{\"name\": \"search\"}</tool_ca",
    ]
    .map(str::to_owned)
    .into();
    bodies.push(format!("{{\"name\": \"search\", \"arguments\": {}", "[".repeat(70)));
    bodies
}

/// A call: well-formed (to a known tool or not; name first, arguments first, arguments as
/// a string, or without arguments), malformed, or malformed and never closed.
fn call() -> impl Strategy<Value = String> {
    let name = || select(vec!["search", "get_weather", "nope"]);
    prop_oneof![
        (name(), arguments()).prop_map(|(name, arguments)| Hermes.format_call(name, &arguments)),
        (name(), arguments()).prop_map(|(name, arguments)| {
            let (arguments, name) = (Value::Object(arguments), Value::from(name));
            format!("{OPENER} {{ \"arguments\" : {arguments} ,\n\"name\":{name} }}\r\n{CLOSER}")
        }),
        (name(), arguments()).prop_map(|(name, arguments)| {
            let quoted = Value::from(Value::Object(arguments).to_string());
            format!("{OPENER}\n{{\"name\": {}, \"arguments\": {quoted}}}\n{CLOSER}", Value::from(name))
        }),
        name().prop_map(|name| format!("{OPENER}{{\"name\":{}}}{CLOSER}", Value::from(name))),
        select(malformed()).prop_map(|body| format!("{OPENER}\n{body}\n{CLOSER}")),
        select(malformed()).prop_map(|body| format!("{OPENER}{body}")),
    ]
}

fn prose() -> impl Strategy<Value = String> {
    let pieces = vec![
        "<",
        "</",
        "<tool_call>",
        "<tool_call> ",
        "</tool_call>",
        "<tool_",
        "<tool_cal",
        "</tool_cal",
        "<tool_response>",
        "{\"name\": \"search\"}",
        "Let me check. ",
        "\n",
        "`",
        "``",
        "` <tool_call> `",
        "`<tool_call>{\"name\": \"search\"}</tool_call>`",
        "`` <tool_call>",
        "<think>",
        "</think>",
        "<think><tool_call>{\"name\": \"search\"}</tool_call></think>",
    ];
    vec(prop_oneof![select(pieces).prop_map(str::to_owned), hostile_text()], 0..5).prop_map(|pieces| pieces.concat())
}

/// A reply: prose and calls, maybe cut short anywhere.
fn reply() -> impl Strategy<Value = String> {
    (vec(prop_oneof![prose(), call()], 0..6), any::<Index>(), any::<bool>()).prop_map(|(parts, at, cut)| {
        let text = parts.concat();
        if cut {
            text[..check::floor_boundary(&text, at.index(text.len() + 1))].to_owned()
        } else {
            text
        }
    })
}

/// The parse's calls sit where the reference reading puts them, closed or not.
fn spans_match(text: &str, events: &[Parsed]) -> Result<(), TestCaseError> {
    let mut offset = 0;
    let mut spans = Vec::new();
    for event in events {
        match event {
            Parsed::Text(t) => offset += t.len(),
            Parsed::CallEnd { raw, .. } | Parsed::Invalid { raw, .. } => {
                let closed = !matches!(event, Parsed::Invalid { reason: InvalidCall::Unclosed, .. });
                spans.push(reference::Span { start: offset, end: closed.then_some(offset + raw.len()) });
                offset += raw.len();
            }
            Parsed::CallStart { .. } | Parsed::CallDelta { .. } | Parsed::Warning(_) => {}
        }
    }
    prop_assert_eq!(spans, reference::spans(text), "in {:?}", text);
    Ok(())
}

/// Each valid call is what its text says, read by serde_json (arguments given as a
/// string read as the object they hold), and its deltas join into its arguments; a call
/// starts only with a known tool.
fn calls_agree(events: &[Parsed]) -> Result<(), TestCaseError> {
    let known = |name: &str| tools().iter().any(|tool| tool.name == name);
    let mut started: Option<&str> = None;
    let mut deltas = String::new();
    for event in events {
        match event {
            Parsed::CallStart { name, .. } => {
                prop_assert!(known(name), "a start for {}", name);
                started = Some(name);
                deltas.clear();
            }
            Parsed::CallDelta { json, .. } => deltas.push_str(json),
            Parsed::CallEnd { arguments, raw, .. } => {
                let name = started.take();
                prop_assert!(name.is_some(), "an end without a start: {:?}", events);
                let joined: Value = serde_json::from_str(&deltas).map_err(|e| TestCaseError::fail(e.to_string()))?;
                prop_assert_eq!(&joined, &Value::Object(arguments.clone()));
                let body = raw.strip_prefix(OPENER).and_then(|r| r.strip_suffix(CLOSER)).unwrap_or_default();
                let read: Map<String, Value> =
                    serde_json::from_str(body).map_err(|e| TestCaseError::fail(format!("{body:?}: {e}")))?;
                prop_assert_eq!(read.get("name").and_then(Value::as_str), name);
                let written = match read.get("arguments") {
                    None => Value::Object(Map::new()),
                    Some(Value::String(text)) => {
                        serde_json::from_str(text).map_err(|e| TestCaseError::fail(e.to_string()))?
                    }
                    Some(other) => other.clone(),
                };
                prop_assert_eq!(written, joined);
            }
            Parsed::Invalid { reason, .. } => {
                if let InvalidCall::UnknownTool(name) = reason {
                    prop_assert!(!known(name) && started.is_none(), "{:?}", events);
                }
                started = None;
            }
            Parsed::Text(_) | Parsed::Warning(_) => {}
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn replies_parse_the_same_however_they_are_split(text in reply(), cuts in vec(0..1500usize, 0..10)) {
        let events = check::check_parse(&Hermes, &tools(), &text, &cuts, &reference::held).map_err(TestCaseError::fail)?;
        if text.len() <= 400 {
            let every: Vec<usize> = (0..text.len()).collect();
            check::check_parse(&Hermes, &tools(), &text, &every, &reference::held).map_err(TestCaseError::fail)?;
        }
        spans_match(&text, &events)?;
        calls_agree(&events)?;
    }

    /// A valid call right after mentions (inline code, a think block) reads back as the
    /// call written, however the reply is split; the mentions are text.
    #[test]
    fn a_call_after_mentions_reads_back(
        mentions in vec(select(MENTIONS), 1..4),
        arguments in arguments(),
        cuts in vec(0..600usize, 0..6),
    ) {
        let prose = mentions.join("\n");
        let call = Hermes.format_call("search", &arguments);
        let reply = format!("{prose}{call}");
        let events = check::check_parse(&Hermes, &tools(), &reply, &cuts, &reference::held).map_err(TestCaseError::fail)?;
        spans_match(&reply, &events)?;
        prop_assert_eq!(&events[0], &Parsed::Text(prose));
        let last = events.last();
        prop_assert!(matches!(last, Some(Parsed::CallEnd { arguments: read, raw, .. }) if *read == arguments && *raw == call), "{:?}", events);
    }

    #[test]
    fn any_arguments_make_the_round_trip(name in "[a-z_][a-z0-9_]{0,15}", arguments in arguments()) {
        let tool = ToolSpec { name, description: "A tool.".to_owned(), input_schema: schema_for(&arguments) };
        check::check_round_trip(&Hermes, &tool, &arguments).map_err(TestCaseError::fail)?;
    }
}

/// Prose that mentions the tag (each piece leaves no code span or think block open).
const MENTIONS: &[&str] = &[
    "Use a `<tool_call>` block.",
    "`` <tool_call>{\"name\": \"search\"}</tool_call> ``\n",
    "` `` <tool_call>{\"name\": \"search\"} `` `",
    "<think>I'll write <tool_call>{\"name\": \"search\"}</tool_call> now</think>\n",
    "<think>`</think>",
    "`<think>` ",
    "a ` b\n",
    "<tool_call> is the tag. ",
];
