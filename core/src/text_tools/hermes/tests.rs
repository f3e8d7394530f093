//! The hermes protocol's tests: exact events for each case of the format here, the shared
//! property checks with generated replies in `properties`, both held to a reference
//! reading of the spans (`reference`, over the json protocol's reference JSON reader).

use serde_json::json;

use super::{Hermes, CLOSER, OPENER};
use crate::data::message::{Block, Message, Role, ToolResult, ToolSpec};
use crate::text_tools::check::expect::{delta, end, invalid, object, start, text};
use crate::text_tools::render::render_message;
use crate::text_tools::{check, InvalidCall, Parsed, TextProtocol, ToolProtocol};

mod properties;
mod reference;

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
    check::check_parse(&Hermes, &tools(), text, &cuts, &reference::held).unwrap()
}

/// The one malformed call of `body` between two pieces of prose: its reason, after
/// checking the span is the whole block.
fn malformed_reason(body: &str) -> String {
    let call = format!("{OPENER}\n{body}\n{CLOSER}");
    let events = parse(&format!("Before.\n{call}\nAfter."));
    assert_eq!(events.last(), Some(&text("\nAfter.")), "{body}: {events:?}");
    events
        .iter()
        .find_map(|e| match e {
            Parsed::Invalid { raw, reason: InvalidCall::Malformed(why), .. } if *raw == call => Some(why.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("{body}: not one malformed call spanning the block: {events:?}"))
}

#[test]
fn a_call_between_prose() {
    let call =
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}\n</tool_call>";
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
    let mut parser = Hermes.parser(&tools());
    let mut out = Vec::new();
    parser.feed("Hi <tool_call>\n{\"name\": \"sea", &mut out);
    assert_eq!(out, [text("Hi ")]);
    parser.feed("rch\", \"arguments\": {\"q\": \"ru", &mut out);
    assert_eq!(out[1..], [start(0, "search"), delta(0, "{\"q\": \"ru")]);
    parser.feed("st\"}}\n</tool_", &mut out);
    assert_eq!(out[3..], [delta(0, "st\"}")]);
    parser.feed("call> ok", &mut out);
    assert!(matches!(&out[4..], [Parsed::CallEnd { index: 0, .. }, Parsed::Text(t)] if t == " ok"), "{out:?}");
}

#[test]
fn arguments_before_the_name_and_without_arguments() {
    let call = "<tool_call>{\"arguments\": {\"q\": 1}, \"name\": \"search\"}</tool_call>";
    assert_eq!(parse(call), [start(0, "search"), delta(0, "{\"q\": 1}"), end(0, json!({ "q": 1 }), call)]);
    let bare = "<tool_call>{\"name\": \"search\"}</tool_call>";
    assert_eq!(parse(bare), [start(0, "search"), delta(0, "{}"), end(0, json!({}), bare)]);
}

#[test]
fn arguments_written_as_a_string_holding_an_object_are_read_as_the_object() {
    let call = r#"<tool_call>{"name": "search", "arguments": "{\"q\": \"a \\\"b\\\"\", \"n\": 2}"}</tool_call>"#;
    // Read, and said in a warning (the application sees the model bend the format).
    let warning = || {
        Parsed::Warning(
            "tool call 0: \"arguments\" given as a string holding the object, read as the object".to_owned(),
        )
    };
    assert_eq!(
        parse(call),
        [
            start(0, "search"),
            delta(0, r#"{"n":2,"q":"a \"b\""}"#),
            warning(),
            end(0, json!({ "q": "a \"b\"", "n": 2 }), call)
        ]
    );
    // Before the name: the object comes out with the start.
    let first = r#"<tool_call>{"arguments": "{}", "name": "search"}</tool_call>"#;
    assert_eq!(parse(first), [start(0, "search"), delta(0, "{}"), warning(), end(0, json!({}), first)]);
}

#[test]
fn each_malformed_call_says_what_was_expected_and_where() {
    let cases = [
        (r#"{"arguments": {"q": 1}}"#, "the object has no \"name\" key"),
        (
            r#"{"name": "search", "arguments": [1]}"#,
            "\"arguments\" is an array, not an object (or a string holding one)",
        ),
        (r#"{"name": "search", "arguments": 3}"#, "\"arguments\" is a number, not an object (or a string holding one)"),
        (r#"{"name": 7}"#, "\"name\" is a number, not a string"),
        (
            r#"{"name": "search", "tool": "search"}"#,
            "unexpected key \"tool\": a call has only \"name\" and \"arguments\"",
        ),
        (r#"{"name": "search", "name": "search"}"#, "the key \"name\" appears twice"),
        (r#"{"name": "search"} done"#, "expected </tool_call> after the object at byte 31 of the call, found 'd'"),
        (
            r#"{"name": "search"}{"name": "search"}"#,
            "expected </tool_call> after the object at byte 30 of the call, found '{'",
        ),
        (
            r#"{"name": "search"} </tool_cal>"#,
            "expected </tool_call> after the object at byte 41 of the call, found '>'",
        ),
        (
            r#"{"name": "search", "arguments": {"q": tru}}"#,
            "invalid JSON at byte 53 of the call: expected the rest of true, false or null, found '}'",
        ),
        (r#"{name: "search"}"#, "invalid JSON at byte 13 of the call: expected a key or '}', found 'n'"),
    ];
    for (body, why) in cases {
        assert_eq!(malformed_reason(body), why, "{body}");
    }
    let quoted = malformed_reason(r#"{"name": "search", "arguments": "[1, 2]"}"#);
    assert!(quoted.starts_with("\"arguments\" is a string that does not hold a JSON object ("), "{quoted}");
    let unknown = "<tool_call>\n{\"name\": \"nope\", \"arguments\": {}}\n</tool_call>";
    assert_eq!(parse(unknown), [invalid(0, unknown, InvalidCall::UnknownTool("nope".to_owned()))]);
}

#[test]
fn a_closing_tag_inside_a_string_does_not_end_the_call() {
    let call = "<tool_call>{\"name\": \"search\", \"arguments\": {\"q\": \"</tool_call>\"}}</tool_call>";
    assert_eq!(
        parse(&format!("{call}!")),
        [
            start(0, "search"),
            delta(0, "{\"q\": \"</tool_call>\"}"),
            end(0, json!({ "q": "</tool_call>" }), call),
            text("!")
        ]
    );
    // Once the JSON is broken, the first closing tag ends the call, strings or not.
    let broken = "<tool_call>{\"name\": search \"</tool_call>";
    let events = parse(&format!("{broken} rest\"}}</tool_call>"));
    assert!(matches!(&events[0], Parsed::Invalid { raw, .. } if raw == broken), "{events:?}");
    assert_eq!(events[1], text(" rest\"}</tool_call>"));
}

#[test]
fn a_mention_of_the_tag_in_prose_stays_prose() {
    // Not followed by an object: text, taking no number from the calls after it.
    let call = "<tool_call>\n{\"name\": \"search\"}\n</tool_call>";
    let reply = format!("I will write a <tool_call> block, then <tool_call></tool_call>:\n{call}");
    assert_eq!(
        parse(&reply),
        [
            text("I will write a <tool_call> block, then <tool_call></tool_call>:\n"),
            start(0, "search"),
            delta(0, "{}"),
            end(0, json!({}), call),
        ]
    );
    // A tag run into the next: the second one opens the call.
    let doubled = format!("<tool_call>{call}");
    assert!(matches!(&parse(&doubled)[..], [Parsed::Text(t), _, _, Parsed::CallEnd { .. }] if t == OPENER));
    // At the very end of the reply it could still have been a call: unclosed.
    assert_eq!(parse("Calling <tool_call>\n"), [text("Calling "), invalid(0, "<tool_call>\n", InvalidCall::Unclosed)]);
    assert_eq!(parse("Calling <tool_ca"), [text("Calling <tool_ca")]);
}

#[test]
fn a_tag_in_inline_code_or_in_a_think_block_is_a_mention() {
    let call = "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"q\": 1}}\n</tool_call>";
    let code = "Write `<tool_call>{\"name\": \"search\"}</tool_call>` blocks, or `` <tool_call> ``.\n";
    let think = "<think>I'll call <tool_call>{\"name\": \"search\"}</tool_call> now.</think>\n";
    let reply = format!("{code}{think}{call}");
    let expected =
        [text(&format!("{code}{think}")), start(0, "search"), delta(0, "{\"q\": 1}"), end(0, json!({ "q": 1 }), call)];
    assert_eq!(parse(&reply), expected);
    // Every split in two pieces reads the same, holding back no more than the reference.
    for cut in 0..=reply.len() {
        let events = check::check_parse(&Hermes, &tools(), &reply, &[cut], &reference::held).unwrap();
        assert_eq!(events, expected, "split at {cut}");
    }
}

#[test]
fn a_tag_after_a_code_span_left_open_is_a_call_once_the_line_ends() {
    // A run with no closing run on its line is text: the tag after it opens a call, held
    // until the line ends.
    let call = "<tool_call>{\"name\": \"search\"}</tool_call>";
    let reply = format!("a ` b {call}\nc");
    assert_eq!(
        parse(&reply),
        [text("a ` b "), start(0, "search"), delta(0, "{}"), end(0, json!({}), call), text("\nc")]
    );
    let mut parser = Hermes.parser(&tools());
    let mut out = Vec::new();
    parser.feed(&format!("a ` b {call}"), &mut out);
    assert_eq!((out.as_slice(), parser.held()), ([text("a ` b ")].as_slice(), call.len()));
    // Closed by a run of as many backticks, it was a mention.
    parser.feed(" ` ok", &mut out);
    assert_eq!((&out[1..], parser.held()), ([text(&format!("{call} `")), text(" ok")].as_slice(), 0));
    // Not followed by an object, it stays prose, and what follows is prose again.
    let reply = "a `` <tool_call> `x` y\nz <tool_call>{\"name\": \"nope\"}</tool_call>";
    let events = parse(reply);
    assert_eq!(events[0], text("a `` <tool_call> `x` y\nz "));
    assert!(matches!(&events[1], Parsed::Invalid { index: 0, reason: InvalidCall::UnknownTool(_), .. }), "{events:?}");
    // A think block never closed makes the rest of the reply text.
    assert_eq!(
        parse("<think>so <tool_call>{\"name\": \"search\"}"),
        [text("<think>so <tool_call>{\"name\": \"search\"}")]
    );
}

#[test]
fn a_reply_that_ends_inside_a_call_leaves_it_unclosed() {
    let cut = "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"q\": \"</tool";
    assert_eq!(
        parse(&format!("So: {cut}")),
        [text("So: "), start(0, "search"), delta(0, "{\"q\": \"</tool"), invalid(0, cut, InvalidCall::Unclosed)]
    );
    for cut in ["<tool_call>{\"name\":\"search\"}", "<tool_call>{\"name\":\"search\"}\n</tool_cal"] {
        assert_eq!(parse(cut), [start(0, "search"), invalid(0, cut, InvalidCall::Unclosed)]);
    }
    assert_eq!(parse("<tool_call> {oops"), [invalid(0, "<tool_call> {oops", InvalidCall::Unclosed)]);
}

#[test]
fn every_two_piece_split_of_some_replies_reads_the_same() {
    let replies = [
        "Sure.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Zürich 日本\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"search\", \"arguments\": \"{\\\"q\\\": 1}\"}\n</tool_call>",
        "a <tool_call> b <tool_call>{\"name\": \"nope\"}</tool_call> c <tool_call>{\"name\": \"search\"} x </tool_call>",
        "<<tool_call>{\"name\":\"search\",\"arguments\":{\"a\":[1,{\"b\":\"\\u00e9\\\\\"}]}}\r\n</tool_call></tool_call><tool_call>",
        "`` `<tool_call>{\"name\": \"search\"}</tool_call>` ``<think>`<tool_call>`</think>`<tool_call> x\n<tool_call>{\"name\": \"search\"}</tool_call>",
    ];
    for reply in replies {
        for cut in 0..=reply.len() {
            check::check_parse(&Hermes, &tools(), reply, &[cut], &reference::held).unwrap();
        }
        parse(reply);
    }
}

#[test]
fn format_call_writes_the_templates_layout() {
    let arguments = object(json!({ "q": "a </tool_call> \"b\" \\ é\r\n", "n": [1, {"x": null}] }));
    assert_eq!(
        Hermes.format_call("search", &arguments),
        "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"n\": [1, {\"x\": null}], \"q\": \"a </tool_call> \\\"b\\\" \\\\ é\\r\\n\"}}\n</tool_call>"
    );
    check::check_round_trip(&Hermes, &tool("search"), &arguments).unwrap();
}

#[test]
fn the_rules_teach_the_templates_format_with_an_example_that_parses() {
    let rules = Hermes.rules();
    assert_eq!(Hermes.name(), "hermes");
    for needed in [
        "within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>",
        "<tool_response></tool_response>",
        "stop and wait",
    ] {
        assert!(rules.contains(needed), "the rules do not say {needed:?}:\n{rules}");
    }
    let calls: Vec<Parsed> =
        parse(&rules).into_iter().filter(|e| matches!(e, Parsed::CallEnd { .. } | Parsed::Invalid { .. })).collect();
    // The template's placeholder line is not JSON; the example is one valid call.
    assert!(
        matches!(&calls[..], [Parsed::Invalid { .. }, Parsed::CallEnd { arguments, .. }] if *arguments == object(json!({"city": "Paris", "days": 3}))),
        "{calls:?}"
    );
}

#[test]
fn results_go_back_as_tool_responses_grouped_in_one_user_message() {
    let result = |id: &str, text: &str, is_error: bool| {
        Block::ToolResult(ToolResult { is_error, ..ToolResult::text(id, "get_weather", text) })
    };
    let message = Message::new(Role::User, vec![result("a", "Sunny", false), result("b", "no such city", true)]);
    let rendered = render_message(&Hermes, &message);
    assert_eq!(rendered.role, Role::User);
    assert_eq!(
        rendered.content,
        [Block::text(
            "<tool_response>\nSunny\n</tool_response>\n<tool_response>\nError: no such city\n</tool_response>"
        )]
    );
}

#[test]
fn the_protocol_is_named_hermes_everywhere() {
    assert_eq!(ToolProtocol::Hermes.name(), "hermes");
    assert_eq!(ToolProtocol::Hermes.text().map(|p| p.name().to_owned()).as_deref(), Some("hermes"));
    assert_eq!(serde_json::to_string(&ToolProtocol::Hermes).unwrap(), "\"hermes\"");
    assert_eq!(serde_json::from_str::<ToolProtocol>("\"hermes\"").unwrap(), ToolProtocol::Hermes);
}

#[test]
fn a_long_call_fed_one_byte_at_a_time_is_read_in_linear_time() {
    let arguments = object(json!({ "text": "</tool_call>{\\\"}".repeat(40_000) }));
    let call = Hermes.format_call("search", &arguments);
    let mut parser = Hermes.parser(&tools());
    let mut out = Vec::new();
    for piece in call.as_bytes().chunks(1) {
        parser.feed(std::str::from_utf8(piece).unwrap(), &mut out);
    }
    parser.finish(&mut out);
    assert!(matches!(out.last(), Some(Parsed::CallEnd { arguments: read, .. }) if *read == arguments));
}
