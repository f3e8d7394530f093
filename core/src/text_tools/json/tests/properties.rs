//! Property tests: the shared checks on generated replies (prose with backticks, braces,
//! quotes, partial fences and non-ASCII text; well-formed calls; malformed ones; cut
//! anywhere), the spans held to the reference reading, the JSON the tokenizer accepts
//! held to serde_json's, and the round trip of any arguments.

use proptest::collection::{btree_map, vec};
use proptest::prelude::*;
use proptest::sample::{select, Index};
use serde_json::{Map, Value};

use super::super::{Json, FENCE, OPENER};
use super::{reference, tools};
use crate::data::message::ToolSpec;
use crate::text_tools::{check, schema_for, InvalidCall, Parsed, TextProtocol};

/// Text made to trip a reader of JSON or of fences.
pub(in crate::text_tools) fn hostile_text() -> impl Strategy<Value = String> {
    let pieces = vec![
        "`",
        "```",
        "```tool_call",
        "\"",
        "'",
        "{",
        "}",
        "[",
        "]",
        ":",
        ",",
        "\\",
        "\\u",
        "\\\"",
        "\n",
        "\r",
        "\t",
        "\u{0}",
        "\u{1f}",
        "\u{7f}",
        "é",
        "日本",
        "😀",
        "\u{2028}",
        " ",
        "tool",
        "arguments",
        "<think>",
        "</think>",
    ];
    vec(prop_oneof![select(pieces).prop_map(str::to_owned), any::<char>().prop_map(String::from)], 0..6)
        .prop_map(|pieces| pieces.concat())
}

/// Any JSON value, arrays and objects nested up to four levels (five with the arguments
/// object around it).
fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_filter("JSON numbers are finite", |f| f.is_finite()).prop_map(Value::from),
        hostile_text().prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 24, 4, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..4).prop_map(Value::Array),
            btree_map(hostile_text(), inner, 0..4).prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

pub(in crate::text_tools) fn arguments() -> impl Strategy<Value = Map<String, Value>> {
    btree_map(hostile_text(), value(), 0..5).prop_map(|map| map.into_iter().collect())
}

/// Bodies of calls that are not valid, for every reason.
fn malformed() -> Vec<String> {
    let mut bodies: Vec<String> = [
        r#"{"tool": "search", "arguments": {}, "extra": 1}"#,
        r#"{"tool": "search", "tool": "search"}"#,
        r#"{"tool": "search", "arguments": [1]}"#,
        r#"{"tool": 1}"#,
        r#"{"arguments": {"q": 1}}"#,
        r#"{"tool": "search", "arguments": {"q": tru}}"#,
        r#"{"tool": "search", "arguments": {"q": "```"}} x"#,
        r#"{"tool": "search"}{"tool": "search"}"#,
        r#"{"tool": "search", "arguments": {"q": "unterminated"#,
        r#"{"tool": search "```" }"#,
        r#"{"tool": "nope", "arguments": {"q": 1}}"#,
        r#"{"tool": "\ud800"}"#,
        r#"{"tool": "search", "arguments": {"n": 1e999}}"#,
        "{\"tool\": \"search\", \"arguments\": {\"q\": \"a\nb\"}}",
        "",
        "``",
        "{\"tool\": \"search\"}``",
    ]
    .map(str::to_owned)
    .into();
    bodies.push(format!("{{\"tool\": \"search\", \"arguments\": {}", "[".repeat(70)));
    bodies
}

/// A call: well-formed (to a known tool or not; tool first, arguments first, or without
/// arguments), malformed, or malformed and never closed.
fn call() -> impl Strategy<Value = String> {
    let name = || select(vec!["search", "get_weather", "nope"]);
    prop_oneof![
        (name(), arguments()).prop_map(|(name, arguments)| Json.format_call(name, &arguments)),
        (name(), arguments()).prop_map(|(name, arguments)| {
            let (arguments, name) = (Value::Object(arguments), Value::from(name));
            format!("{OPENER} {{ \"arguments\" : {arguments} ,\n\"tool\":{name} }}\r\n{FENCE}")
        }),
        name().prop_map(|name| format!("{OPENER}{{\"tool\":{}}}{FENCE}", Value::from(name))),
        select(malformed()).prop_map(|body| format!("{OPENER}\n{body}\n{FENCE}")),
        select(malformed()).prop_map(|body| format!("{OPENER}{body}")),
    ]
}

fn prose() -> impl Strategy<Value = String> {
    let pieces = vec![
        "``",
        "```",
        "```json\n{\"tool\": \"search\"}\n```",
        "```tool_",
        "```tool_cal",
        "tool_call",
        "{\"tool\": \"search\"}",
        "Let me check. ",
        "\n",
        "`` ```tool_call ``",
        "` ```tool_call {\"tool\": \"search\"} `",
        "`` ```tool_call",
        "<think>```tool_call\n{\"tool\": \"search\"}\n```</think>",
        "<think>",
        "</think>",
        "````markdown\n```tool_call\n{}\n```\n````\n",
        "```text\n",
        "\n```\n",
        "`",
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

/// Each valid call is what its text says, read by serde_json, and its deltas join into
/// its arguments; a call starts only with a known tool, and an unknown one never starts.
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
                let body = raw.strip_prefix(OPENER).and_then(|r| r.strip_suffix(FENCE)).unwrap_or_default();
                let read: Map<String, Value> =
                    serde_json::from_str(body).map_err(|e| TestCaseError::fail(format!("{body:?}: {e}")))?;
                prop_assert_eq!(read.get("tool").and_then(Value::as_str), name);
                prop_assert_eq!(read.get("arguments").cloned().unwrap_or_else(|| Value::Object(Map::new())), joined);
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
        let events = check::check_parse(&Json, &tools(), &text, &cuts, &reference::held).map_err(TestCaseError::fail)?;
        if text.len() <= 400 {
            let every: Vec<usize> = (0..text.len()).collect();
            check::check_parse(&Json, &tools(), &text, &every, &reference::held).map_err(TestCaseError::fail)?;
        }
        spans_match(&text, &events)?;
        calls_agree(&events)?;
    }

    #[test]
    fn the_json_accepted_is_the_json_serde_json_reads(
        value in vec(select(vec![
            "{", "}", "[", "]", "\"", ",", ":", "0", "1", "-", ".", "e", "+", "true", "fals", "null", "\\", "u", "a",
            " ", "\n", "\t", "`", "é",
        ]), 0..12).prop_map(|pieces| pieces.concat()),
        tail in select(vec!["", "```", " x ```", "\"```"]),
    ) {
        // A fence in a string after the value: a tokenizer that let through what breaks
        // the JSON would not end the call there, as the reference does.
        let body = format!("{{\"tool\":\"search\",\"arguments\":{{\"v\":{value},\"w\":\"```\"}}}}");
        let text = format!("{OPENER}{body}{FENCE}{tail}");
        let every: Vec<usize> = (0..text.len()).collect();
        let events = check::check_parse(&Json, &tools(), &text, &every, &reference::held).map_err(TestCaseError::fail)?;
        spans_match(&text, &events)?;
        calls_agree(&events)?;
        let valid = events.iter().any(|e| matches!(e, Parsed::CallEnd { .. }));
        let read = serde_json::from_str::<Map<String, Value>>(&body).is_ok_and(|call| {
            call.len() == 2 && call["tool"] == "search" && call["arguments"].is_object()
        });
        prop_assert_eq!(valid, read, "{:?}: {:?}", body, events);
        // The tokenizer rejects the first byte the reference rejects (unless a fault of the
        // call came before it).
        let why = events.iter().find_map(|e| match e {
            Parsed::Invalid { reason: InvalidCall::Malformed(why), .. } => Some(why.as_str()),
            _ => None,
        });
        if let (Some(at), Some(why)) = (reference::json_break(&text[OPENER.len()..]), why) {
            if why.starts_with("invalid JSON") {
                let said = format!("invalid JSON at byte {} of the call:", OPENER.len() + at);
                prop_assert!(why.starts_with(&said), "{:?} is not {:?}", why, said);
            }
        }
    }

    #[test]
    fn any_arguments_make_the_round_trip(name in "[a-z_][a-z0-9_]{0,15}", arguments in arguments()) {
        let tool = ToolSpec { name, description: "A tool.".to_owned(), input_schema: schema_for(&arguments) };
        check::check_round_trip(&Json, &tool, &arguments).map_err(TestCaseError::fail)?;
    }

    /// A valid call right after mentions (inline code, another code block, a think
    /// block) reads back as the call written, however the reply is split; the mentions
    /// are text.
    #[test]
    fn a_call_after_mentions_reads_back(
        mentions in vec(select(MENTIONS), 1..4),
        arguments in arguments(),
        cuts in vec(0..600usize, 0..6),
    ) {
        let prose = mentions.join("\n");
        let call = Json.format_call("search", &arguments);
        let reply = format!("{prose}{call}");
        let events = check::check_parse(&Json, &tools(), &reply, &cuts, &reference::held).map_err(TestCaseError::fail)?;
        spans_match(&reply, &events)?;
        prop_assert_eq!(&events[0], &Parsed::Text(prose));
        let last = events.last();
        prop_assert!(matches!(last, Some(Parsed::CallEnd { arguments: read, raw, .. }) if *read == arguments && *raw == call), "{:?}", events);
    }
}

/// Prose that mentions the opener (each piece leaves no code span, block or think open).
const MENTIONS: &[&str] = &[
    "Use a `` ```tool_call `` block.",
    "` ```tool_call `\n",
    "````markdown\n```tool_call\n{\"tool\": \"search\"}\n```\n````\n",
    "```markdown\nWrite ```tool_call blocks.\n```\n",
    "<think>I'll write ```tool_call now</think>\n",
    "`<think>` ",
    "a ` b\n",
];
