//! The json protocol's tests: exact events for each case of the format here, the
//! shared property checks with generated replies in `properties`, both held to a
//! reference reading of the spans written apart from the parser (`reference`).

use serde_json::json;

use super::{Json, FENCE, NO_TOOL, OPENER};
use crate::data::message::ToolSpec;
use crate::text_tools::check::expect::{delta, end, invalid, object, start, text};
use crate::text_tools::{check, InvalidCall, Parsed, TextProtocol};

pub(in crate::text_tools) mod properties;
pub(in crate::text_tools) mod reference;

fn tool(name: &str) -> ToolSpec {
    ToolSpec { name: name.to_owned(), description: String::new(), input_schema: json!({ "type": "object" }) }
}

fn tools() -> Vec<ToolSpec> {
    vec![tool("get_weather"), tool("search")]
}

/// The merged events of `text`, after the shared checks with one byte at a time and the
/// reference's hold-back bound.
fn parse(text: &str) -> Vec<Parsed> {
    let cuts: Vec<usize> = (0..text.len()).collect();
    check::check_parse(&Json, &tools(), text, &cuts, &reference::held).unwrap()
}

/// The events of `text` fed whole, not merged.
fn parse_whole(text: &str) -> Vec<Parsed> {
    check::parse_whole(&Json, &tools(), text)
}

/// What a parser holds back after reading `text`.
fn held_after(text: &str) -> usize {
    let mut parser = Json.parser(&tools());
    parser.feed(text, &mut Vec::new());
    parser.held()
}

/// The one malformed call of `body` wrapped in a block between two pieces of prose: its
/// reason, after checking the span is the block.
fn malformed_reason(body: &str) -> String {
    let call = format!("{OPENER}\n{body}\n{FENCE}");
    let events = parse(&format!("Before.\n{call}\nAfter."));
    let invalid = events.iter().find_map(|e| match e {
        Parsed::Invalid { raw, reason: InvalidCall::Malformed(why), .. } if *raw == call => Some(why.clone()),
        _ => None,
    });
    assert_eq!(events.last(), Some(&text("\nAfter.")), "{body}: {events:?}");
    invalid.unwrap_or_else(|| panic!("{body}: not one malformed call spanning the block: {events:?}"))
}

#[test]
fn a_call_between_prose() {
    let call = "```tool_call\n{\"tool\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}\n```";
    assert_eq!(
        parse(&format!("Let me check.\n{call}\nDone.")),
        [
            text("Let me check.\n"),
            start(0, "get_weather"),
            delta(0, "{\"city\": \"Paris\", \"days\": 3}"),
            end(0, json!({ "city": "Paris", "days": 3 }), call),
            text("\nDone."),
        ]
    );
}

#[test]
fn the_start_comes_when_the_name_closes_and_the_arguments_stream_as_they_come() {
    let mut parser = Json.parser(&tools());
    let mut out = Vec::new();
    parser.feed("Hi ```tool_call {\"tool\": \"sea", &mut out);
    assert_eq!(out, [text("Hi ")]);
    parser.feed("rch\", \"arguments\": {\"q\": \"ru", &mut out);
    assert_eq!(out[1..], [start(0, "search"), delta(0, "{\"q\": \"ru")]);
    parser.feed("st\"}}", &mut out);
    assert_eq!(out[3..], [delta(0, "st\"}")]);
    assert_eq!(parser.held(), "```tool_call {\"tool\": \"search\", \"arguments\": {\"q\": \"rust\"}}".len());
    parser.feed(" ``", &mut out);
    assert_eq!(out.len(), 4);
    parser.feed("` ok", &mut out);
    let raw = "```tool_call {\"tool\": \"search\", \"arguments\": {\"q\": \"rust\"}} ```";
    assert_eq!(out[4..], [end(0, json!({ "q": "rust" }), raw), text(" ok")]);
    assert_eq!(parser.held(), 0, "the prose after the call is not held: {out:?}");
}

#[test]
fn arguments_before_the_tool_come_out_at_once_after_the_start() {
    let call = "```tool_call\n{\"arguments\": {\"q\": \"x\"}, \"tool\": \"search\"}\n```";
    assert_eq!(parse_whole(call), [start(0, "search"), delta(0, "{\"q\": \"x\"}"), end(0, json!({ "q": "x" }), call)]);
    let mut parser = Json.parser(&tools());
    let mut out = Vec::new();
    parser.feed("```tool_call\n{\"arguments\": {\"q\": \"x\"}, \"tool\": \"sear", &mut out);
    assert_eq!(out, [], "nothing is said before the name is known");
}

#[test]
fn without_arguments_the_arguments_are_empty() {
    let call = "```tool_call{\"tool\":\"search\"}```";
    assert_eq!(parse(call), [start(0, "search"), delta(0, "{}"), end(0, json!({}), call)]);
}

#[test]
fn calls_are_numbered_valid_or_not() {
    let first = "```tool_call\n{\"tool\": \"search\", \"arguments\": {\"q\": \"a\"}}\n```";
    let second = "```tool_call\n{\"tool\": \"nope\"}\n```";
    let third = "```tool_call\n{\"tool\": \"get_weather\", \"arguments\": {}}\n```";
    assert_eq!(
        parse(&format!("{first}\n{second}\n{third}")),
        [
            start(0, "search"),
            delta(0, "{\"q\": \"a\"}"),
            end(0, json!({ "q": "a" }), first),
            text("\n"),
            invalid(1, second, InvalidCall::UnknownTool("nope".to_owned())),
            text("\n"),
            start(2, "get_weather"),
            delta(2, "{}"),
            end(2, json!({}), third),
        ]
    );
}

#[test]
fn backticks_braces_and_fences_inside_strings_are_text() {
    let arguments = json!({ "code": "```\nfn main() { println!(\"}\"); }\n```", "tick": "`", "fence": "```tool_call" });
    let call = format!("{OPENER}\n{{\"tool\": \"search\", \"arguments\": {arguments}}}\n{FENCE}");
    let events = parse(&format!("{call}!"));
    assert_eq!(events[2..], [end(0, arguments, &call), text("!")]);
}

#[test]
fn prose_with_braces_quotes_and_other_code_blocks_stays_text() {
    for prose in [
        "Objects look like {\"a\": 1}; a lone } or { is fine.",
        "```json\n{\"tool\": \"search\", \"arguments\": {}}\n```",
        "```tool\n{}\n``` and ```tool-call or ```toolcall",
        "Backticks: ` and `` and ``` and ````, then é日本😀.",
        "a tool_call without a fence: tool_call {\"tool\": \"search\"}",
    ] {
        assert_eq!(parse(prose), [text(prose)]);
    }
}

#[test]
fn prose_is_held_back_only_while_it_could_begin_the_opener() {
    assert_eq!(held_after("Hello ```tool"), 7);
    assert_eq!(held_after("Hello ```tool_cal"), 11);
    assert_eq!(held_after("a `"), 1);
    assert_eq!(held_after("a ``"), 2);
    assert_eq!(held_after("a ` "), 0);
    assert_eq!(held_after("a ` b"), 0);
    assert_eq!(held_after("````"), 4, "a trailing run of backticks is held whole: its length decides code spans");
    assert_eq!(held_after("x ```tool_ca"), 10, "a run of three or more and the start of `tool_call`");
    assert_eq!(held_after("```tool_x"), 0);
    assert_eq!(held_after("{\"tool\": \"search\"}"), 0);
    assert_eq!(held_after("```tool_call"), OPENER.len(), "a call's bytes are held");
    assert_eq!(held_after("x```tool_call {\"tool\""), "```tool_call {\"tool\"".len());
}

#[test]
fn the_opener_counts_anywhere_and_a_fourth_backtick_is_prose() {
    let call = "```tool_call{\"tool\":\"search\"}```";
    assert_eq!(
        parse(&format!("see{call}`")),
        [text("see"), start(0, "search"), delta(0, "{}"), end(0, json!({}), call), text("`")]
    );
    let spaced = "```tool_call \r\n\t{ \"tool\" : \"search\" , \"arguments\" : { } }\r\n\t```";
    assert_eq!(parse(spaced)[2], end(0, json!({}), spaced));
}

#[test]
fn an_unknown_tool_is_invalid_without_a_start() {
    let call = "```tool_call\n{\"tool\": \"delete_everything\", \"arguments\": {\"path\": \"/\"}}\n```";
    assert_eq!(
        parse(&format!("{call}\nok")),
        [invalid(0, call, InvalidCall::UnknownTool("delete_everything".to_owned())), text("\nok")]
    );
}

#[test]
fn each_malformed_call_says_why() {
    let deep = format!("{{\"tool\": \"search\", \"arguments\": {{\"a\": {}1{}}}}}", "[".repeat(64), "]".repeat(64));
    let cases = [
        (r#"{"tool": "search", "arguments": {}, "extra": 1}"#, "unexpected key \"extra\""),
        (r#"{"tool": "search", "tool": "search"}"#, "the key \"tool\" appears twice"),
        (r#"{"arguments": {}, "tool": "search", "arguments": {}}"#, "the key \"arguments\" appears twice"),
        (r#"{"tool": "search", "arguments": [1, 2]}"#, "\"arguments\" is an array: arguments must be an object"),
        (r#"{"tool": "search", "arguments": "q"}"#, "\"arguments\" is a string that is not JSON: arguments must be"),
        (r#"{"tool": "search", "arguments": "Paris"}"#, "arguments must be an object"),
        (r#"{"tool": "search", "arguments": "[1]"}"#, "\"arguments\" is a string holding an array: arguments must"),
        (r#"{"tool": "search", "arguments": "\"x\""}"#, "\"arguments\" is a string holding a string"),
        (r#"{"tool": "search", "name": "search"}"#, "both \"tool\" and \"name\" are given"),
        (r#"{"name": "search", "tool": "search"}"#, "both \"tool\" and \"name\" are given"),
        (r#"{"name": "search", "name": "search"}"#, "the key \"name\" appears twice"),
        (r#"{"name": 7}"#, "\"name\" is a number, not a string"),
        (r#"{"tool": "search", "arguments": "{\"q\": tru}"}"#, "is a string that is not JSON"),
        (r#"{"tool": 7}"#, "\"tool\" is a number, not a string"),
        (r#"{"arguments": {}}"#, NO_TOOL),
        (r#"{}"#, NO_TOOL),
        (
            r#"{"tool": "search", "arguments": {"q": tru}}"#,
            "invalid JSON at byte 54 of the call: expected the rest of true, false or null, found '}'",
        ),
        (r#"{"tool": "search", "arguments": {"q": 01}}"#, "expected ',' or '}', found '1'"),
        (r#"{"tool": "search", "arguments": {"q": [1,]}}"#, "expected a value, found ']'"),
        (r#"{"tool": "search", "arguments": {'q': 1}}"#, "expected a key or '}', found '''"),
        (r#"{"tool": "search", "arguments": {"q": "\x"}}"#, "expected an escape"),
        (r#"{"tool": "search", "arguments": {"q": "\u12G4"}}"#, "expected a hex digit"),
        ("{\"tool\": \"search\", \"arguments\": {\"q\": \"a\tb\"}}", "control characters are written escaped"),
        (r#"tool: search"#, "expected '{' to begin the call, found 't'"),
        (r#"{"tool": "search"} and more"#, "expected the closing ``` after the object, found 'a'"),
        (r#"{"tool": "search"}{"tool": "search"}"#, "expected the closing ``` after the object, found '{'"),
        (&deep, "nest more than 64 levels deep"),
        (r#"{"tool": "\ud800"}"#, "the tool's name is not valid text"),
        (r#"{"tool\ud800": "search"}"#, "a key is not valid text"),
        (r#"{"tool": "search", "arguments": {"n": 1e400}}"#, "the arguments cannot be read"),
    ];
    for (body, why) in cases {
        let reason = malformed_reason(body);
        assert!(reason.contains(why), "{body}: {reason:?} does not say {why:?}");
    }
    // One level less is the deepest the arguments may go.
    let deepest = format!("{{\"tool\": \"search\", \"arguments\": {{\"a\": {}1{}}}}}", "[".repeat(63), "]".repeat(63));
    let call = format!("{OPENER}{deepest}{FENCE}");
    assert!(matches!(parse(&call).last(), Some(Parsed::CallEnd { .. })), "{call}");
}

#[test]
fn a_fault_after_the_start_ends_the_started_call_as_invalid() {
    let call = "```tool_call\n{\"tool\": \"search\", \"arguments\": {\"q\": 1}, \"extra\": true}\n```";
    let why = "unexpected key \"extra\": a call has only \"tool\" and \"arguments\"";
    assert_eq!(
        parse(call),
        [start(0, "search"), delta(0, "{\"q\": 1}"), invalid(0, call, InvalidCall::Malformed(why.to_owned()))]
    );
    // The deltas stop where the fault is, however the text is split.
    let broken = "```tool_call\n{\"tool\": \"search\", \"arguments\": {\"q\": [1 2]}}\n```";
    let events = parse(broken);
    assert_eq!(events[..2], [start(0, "search"), delta(0, "{\"q\": [1 ")]);
    assert!(matches!(&events[2], Parsed::Invalid { index: 0, raw, .. } if raw == broken), "{events:?}");
}

#[test]
fn a_broken_call_ends_at_the_first_fence_after_the_break_a_valid_one_after_its_object() {
    // Valid JSON with a wrong key: the fence inside the string does not end it.
    let call = "```tool_call\n{\"tool\": \"search\", \"note\": \"```\"}\n```";
    let events = parse(&format!("{call}."));
    assert!(
        matches!(&events[..], [Parsed::CallStart { .. }, Parsed::Invalid { raw, .. }, Parsed::Text(t)] if raw == call && t == "."),
        "{events:?}"
    );
    // Broken JSON: the first fence after the break ends it, inside what looks like a string.
    let broken = "```tool_call\n{\"tool\": search \"```";
    let events = parse(&format!("{broken} rest\"}}\n```"));
    assert!(matches!(&events[0], Parsed::Invalid { raw, .. } if raw == broken), "{events:?}");
    assert_eq!(events[1], text(" rest\"}\n```"));
    // A backtick outside strings breaks the JSON, and its fence closes the call.
    assert!(
        matches!(&parse("```tool_call {\"tool\": ```!")[..], [Parsed::Invalid { .. }, Parsed::Text(t)] if t == "!")
    );
}

#[test]
fn a_reply_that_ends_inside_a_call_leaves_it_unclosed() {
    // Inside the opener: still prose.
    assert_eq!(parse("Calling ```tool_"), [text("Calling ```tool_")]);
    // Inside a string of the object.
    let cut = "```tool_call\n{\"tool\": \"search\", \"arguments\": {\"q\": \"``";
    assert_eq!(
        parse(&format!("So: {cut}")),
        [text("So: "), start(0, "search"), delta(0, "{\"q\": \"``"), invalid(0, cut, InvalidCall::Unclosed)]
    );
    // After the object, before the fence (or part of it).
    for cut in ["```tool_call{\"tool\":\"search\"}", "```tool_call{\"tool\":\"search\"}\n``"] {
        assert_eq!(parse(cut), [start(0, "search"), invalid(0, cut, InvalidCall::Unclosed)]);
    }
    // Broken, with no fence after the break.
    assert_eq!(parse("```tool_call {oops"), [invalid(0, "```tool_call {oops", InvalidCall::Unclosed)]);
}

#[test]
fn format_call_writes_the_tool_first_in_one_block() {
    let arguments = object(json!({ "q": "a ``` b", "n": 1 }));
    assert_eq!(
        Json.format_call("search", &arguments),
        "```tool_call\n{\"tool\":\"search\",\"arguments\":{\"n\":1,\"q\":\"a ``` b\"}}\n```"
    );
    check::check_round_trip(&Json, &tool("search"), &arguments).unwrap();
}

#[test]
fn the_rules_teach_the_format_with_an_example_that_parses() {
    let rules = Json.rules();
    assert_eq!(Json.name(), "json");
    for needed in ["```tool_call", "\"tool\"", "\"arguments\"", "one call per block", "next user message", "stop"] {
        assert!(rules.contains(needed), "the rules do not say {needed:?}:\n{rules}");
    }
    let calls: Vec<Parsed> =
        parse(&rules).into_iter().filter(|e| matches!(e, Parsed::CallEnd { .. } | Parsed::Invalid { .. })).collect();
    assert!(
        matches!(&calls[..], [Parsed::CallEnd { arguments, .. }] if *arguments == object(json!({"city": "Paris", "days": 3}))),
        "the example is not one valid call: {calls:?}"
    );
}

#[test]
fn a_long_call_fed_one_byte_at_a_time_is_read_in_linear_time() {
    // Quadratic work (rescanning what is held) would take minutes here.
    let arguments = object(json!({ "text": "`{\\\"}".repeat(50_000) }));
    let call = Json.format_call("search", &arguments);
    let mut parser = Json.parser(&tools());
    let mut out = Vec::new();
    for piece in call.as_bytes().chunks(1) {
        parser.feed(std::str::from_utf8(piece).unwrap(), &mut out);
    }
    parser.finish(&mut out);
    assert!(matches!(out.last(), Some(Parsed::CallEnd { arguments: read, .. }) if *read == arguments));
}

/// `text` checked split in every two pieces (and one byte at a time): the merged events.
fn parse_every_split(text: &str) -> Vec<Parsed> {
    for cut in 0..=text.len() {
        if let Err(e) = check::check_parse(&Json, &tools(), text, &[cut], &reference::held) {
            panic!("cut at {cut}: {e}");
        }
    }
    parse(text)
}

const SEARCH: &str = "```tool_call\n{\"tool\": \"search\", \"arguments\": {\"q\": \"rust\"}}\n```";

/// `prose` then [`SEARCH`]: the prose is text, the call parses.
fn assert_mention_then_call(prose: &str) {
    assert_eq!(
        parse_every_split(&format!("{prose}{SEARCH}")),
        [text(prose), start(0, "search"), delta(0, "{\"q\": \"rust\"}"), end(0, json!({ "q": "rust" }), SEARCH)],
        "{prose:?}"
    );
}

#[test]
fn the_opener_in_inline_code_or_another_code_block_is_a_mention() {
    for prose in [
        "Use a `` ```tool_call `` block:\n",
        "Write ` ```tool_call ` then the JSON. ",
        "````markdown\n```tool_call\n{\"tool\": \"search\"}\n```\n````\n",
        "```markdown\nWrite ```tool_call then JSON.\n```\n",
        "```\n```tool_call {}\n``` \t\n",
        "~ `` ` ```tool_call ` `` ~\n",
    ] {
        assert_mention_then_call(prose);
    }
}

#[test]
fn the_opener_in_a_think_block_is_a_mention() {
    for prose in [
        "<think>\nI'll emit a ```tool_call block for search.\n```tool_call\n{\"tool\": \"search\"\n</think>\n\n",
        "<think>`` ```tool_call ``</think>",
    ] {
        assert_mention_then_call(prose);
    }
}

#[test]
fn an_unclosed_backtick_run_is_text_and_the_call_after_it_parses() {
    for prose in ["Use ` for code. ", "a `` b ` ", "`x", "`` `js "] {
        let events = parse_every_split(&format!("{prose}{SEARCH}"));
        assert_eq!(events[0], text(prose), "{prose:?}: {events:?}");
        assert_eq!(events.last(), Some(&end(0, json!({ "q": "rust" }), SEARCH)), "{prose:?}");
    }
    // A run of three closes a span of three: what follows it is not an opener.
    let reply = "```js ` ```tool_call x";
    assert_eq!(parse_every_split(reply), [text(reply)]);
}

#[test]
fn mentions_that_never_close_stay_text() {
    for reply in [
        "<think>I will call ```tool_call {\"tool\": \"search\"",
        "`` ```tool_call {\"tool\"",
        "```markdown\n```tool_call\n{\"tool\": \"search\"}\n",
        "<thin",
    ] {
        assert_eq!(parse_every_split(reply), [text(reply)], "{reply:?}");
    }
}

#[test]
fn a_mention_is_held_only_until_its_span_closes_or_its_line_ends() {
    for (fed, held) in [
        ("a `` ```tool_call x", "```tool_call x".len()),
        ("a `` ```tool_call `` b", 0),
        ("a ``", 2),
        ("<thi", 4),
        ("<think>x </thi", 5),
        ("```md\nx\n``", 2),
        ("```md\nx\n``` ", 4),
        ("```md\nx\n`` ", 0),
    ] {
        assert_eq!(held_after(fed), held, "{fed:?}");
        assert!(held <= reference::held(fed), "the reference allows {fed:?}");
    }
}

#[test]
fn name_is_read_for_tool_with_a_warning() {
    let call = "```tool_call\n{\"name\": \"search\", \"arguments\": {\"q\": \"x\"}}\n```";
    let warning = Parsed::Warning("tool call 0: \"name\" read as \"tool\"".to_owned());
    assert_eq!(
        parse_every_split(&format!("{call}.")),
        [start(0, "search"), delta(0, "{\"q\": \"x\"}"), warning, end(0, json!({ "q": "x" }), call), text(".")]
    );
}

#[test]
fn arguments_given_as_a_string_holding_an_object_are_that_object_with_a_warning() {
    let warning = Parsed::Warning(
        "tool call 0: \"arguments\" given as a string holding a JSON object, read as that object".to_owned(),
    );
    let call = r#"```tool_call {"tool": "search", "arguments": "{\"q\": \"a \\\"b\\\" ```\", \"n\": [1]}"} ```"#;
    let arguments = json!({ "q": "a \"b\" ```", "n": [1] });
    assert_eq!(
        parse_every_split(call),
        [start(0, "search"), delta(0, &arguments.to_string()), warning.clone(), end(0, arguments, call)]
    );
    // Before the name, and with the alias of the name: both warn, the delta comes after the start.
    let call = r#"```tool_call{"arguments": "{}", "name": "search"}```"#;
    let events = parse_every_split(call);
    assert_eq!(events[..2], [start(0, "search"), delta(0, "{}")]);
    assert_eq!(events.iter().filter(|e| matches!(e, Parsed::Warning(_))).count(), 2, "{events:?}");
    assert_eq!(events.last(), Some(&end(0, json!({}), call)));
    // An invalid call does not warn.
    let events = parse_every_split(r#"```tool_call{"name": "search", "extra": 1}```"#);
    assert!(!events.iter().any(|e| matches!(e, Parsed::Warning(_))), "{events:?}");
}
