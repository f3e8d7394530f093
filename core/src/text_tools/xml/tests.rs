use proptest::prelude::*;
use proptest::sample::Index;
use serde_json::{json, Map, Value};

use super::Xml;
use crate::data::message::ToolSpec;
use crate::text_tools::check::expect::{delta, end, invalid, object, start, text};
use crate::text_tools::check::{
    check_parse, check_round_trip, floor_boundary, next_call, parse_in_pieces, parse_whole, Prose,
};
use crate::text_tools::{schema_for, CallParser, InvalidCall, Parsed, TextProtocol};

// ---------------------------------------------------------------------------------------
// Fixtures

fn tool(name: &str, input_schema: Value) -> ToolSpec {
    ToolSpec { name: name.to_owned(), description: format!("The {name} tool."), input_schema }
}

/// The tools of every test: typed parameters, a list of types, and a tool without schema.
fn tools() -> Vec<ToolSpec> {
    vec![
        tool(
            "get_weather",
            json!({"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}),
        ),
        tool(
            "search",
            json!({"type": "object", "properties": {
                "query": {"type": "string"},
                "limit": {"type": "integer"},
                "exact": {"type": "boolean"},
                "filters": {"type": "object"},
                "tags": {"type": "array"},
                "ratio": {"type": "number"},
                "nothing": {"type": "null"},
                "maybe": {"type": ["integer", "null"]},
                "note": {"type": ["string", "null"]},
                "free": {"description": "no type"},
            }}),
        ),
        tool("ping", Value::Null),
    ]
}

/// What a parser may hold back once `fed` is read, from a reference scan that shares
/// nothing with the parser: everything since the `<tool_call>` of a call still open, else
/// the longest suffix of the prose since the last call that may begin `<tool_call>`.
///
/// The reference call ends at the first `</tool_call>` outside a `<![CDATA[` … `]]>`
/// section, sections being recognised anywhere in the call. The parser recognises them
/// only inside values (and not once a call is malformed), so its calls end no later than
/// the reference's; a parser that holds back prose after a call's end, or more of it than
/// a partial `<tool_call>`, fails the check.
fn allowed_hold(fed: &str) -> usize {
    let mut prose = 0;
    loop {
        let start = match next_call(fed, prose, "<tool_call>", false) {
            Prose::Call(start) => start,
            Prose::End { hold } => return hold,
        };
        match reference_call_end(fed, start + "<tool_call>".len()) {
            Some(end) => prose = end,
            None => return fed.len() - start,
        }
    }
}

/// Where the reference call whose content begins at `at` ends, if it does in `text`.
fn reference_call_end(text: &str, mut at: usize) -> Option<usize> {
    loop {
        let rest = &text[at..];
        let close = rest.find("</tool_call>")?;
        match rest.find("<![CDATA[") {
            Some(section) if section < close => {
                let content = at + section + "<![CDATA[".len();
                at = content + text[content..].find("]]>")? + "]]>".len();
            }
            _ => return Some(at + close + "</tool_call>".len()),
        }
    }
}

/// `text` parsed with the checks of every split one byte at a time (same events as whole,
/// lossless, held back within [`allowed_hold`], numbered): the merged events.
fn parse(text: &str) -> Vec<Parsed> {
    let cuts: Vec<usize> = (0..text.len()).collect();
    match check_parse(&Xml, &tools(), text, &cuts, &allowed_hold) {
        Ok(events) => events,
        Err(e) => panic!("{e}"),
    }
}

/// The arguments of the one valid call `call` (text around it allowed).
fn arguments_of(call: &str) -> Map<String, Value> {
    let events = parse(call);
    let ends: Vec<&Map<String, Value>> = events
        .iter()
        .filter_map(|e| if let Parsed::CallEnd { arguments, .. } = e { Some(arguments) } else { None })
        .collect();
    match ends.as_slice() {
        [arguments] => (*arguments).clone(),
        _ => panic!("not one valid call in {call:?}: {events:?}"),
    }
}

const WEATHER: &str = "<tool_call>\n<get_weather>\n<city>Paris</city>\n<days>3</days>\n</get_weather>\n</tool_call>";

// ---------------------------------------------------------------------------------------
// Valid calls

#[test]
fn a_simple_call_streams_its_arguments_as_they_are_read() {
    let events = parse_whole(&Xml, &tools(), WEATHER);
    assert_eq!(
        events,
        vec![
            start(0, "get_weather"),
            delta(0, "{"),
            delta(0, "\"city\":\""),
            delta(0, "Paris"),
            delta(0, "\""),
            delta(0, ",\"days\":"),
            delta(0, "3"),
            delta(0, "}"),
            end(0, json!({"city": "Paris", "days": 3}), WEATHER),
        ]
    );
    assert_eq!(
        parse(WEATHER),
        vec![
            start(0, "get_weather"),
            delta(0, r#"{"city":"Paris","days":3}"#),
            end(0, json!({"city": "Paris", "days": 3}), WEATHER)
        ]
    );
}

#[test]
fn a_string_value_streams_before_its_closing_tag() {
    let mut parser = Xml.parser(&tools());
    let mut out = Vec::new();
    parser.feed("<tool_call><get_weather><city>Par", &mut out);
    assert_eq!(out, vec![start(0, "get_weather"), delta(0, "{"), delta(0, "\"city\":\""), delta(0, "Par")]);
    assert_eq!(parser.held(), "<tool_call><get_weather><city>Par".len());
}

#[test]
fn two_calls_in_one_reply_are_numbered_in_order() {
    let second = "<tool_call>\n<ping>\n</ping>\n</tool_call>";
    let reply = format!("Checking.\n{WEATHER}\nand\n{second}\nDone.");
    assert_eq!(
        parse(&reply),
        vec![
            text("Checking.\n"),
            start(0, "get_weather"),
            delta(0, r#"{"city":"Paris","days":3}"#),
            end(0, json!({"city": "Paris", "days": 3}), WEATHER),
            text("\nand\n"),
            start(1, "ping"),
            delta(1, "{}"),
            end(1, json!({}), second),
            text("\nDone."),
        ]
    );
}

#[test]
fn typed_parameters_are_read_as_json_and_the_rest_as_text() {
    let call = "<tool_call><search>\
        <query>rust</query>\
        <limit> 10\n</limit>\
        <exact>true</exact>\
        <filters>{\"lang\": \"en\", \"min\": 2}</filters>\
        <tags>[\"a\", 2, null]</tags>\
        <ratio>0.25</ratio>\
        <nothing>null</nothing>\
        <maybe>7</maybe>\
        <note>null</note>\
        <free>42</free>\
        <unlisted>true</unlisted>\
        </search></tool_call>";
    let expected = json!({
        "query": "rust", "limit": 10, "exact": true, "filters": {"lang": "en", "min": 2},
        "tags": ["a", 2, null], "ratio": 0.25, "nothing": null, "maybe": 7,
        "note": "null", "free": "42", "unlisted": "true",
    });
    let events = parse(call);
    assert_eq!(
        events,
        vec![
            start(0, "search"),
            delta(
                0,
                r#"{"query":"rust","limit":10,"exact":true,"filters":{"lang":"en","min":2},"tags":["a",2,null],"ratio":0.25,"nothing":null,"maybe":7,"note":"null","free":"42","unlisted":"true"}"#
            ),
            end(0, expected, call),
        ]
    );
}

#[test]
fn a_tool_without_schema_reads_every_value_as_text() {
    let call = "<tool_call><ping><count>3</count><flag>[1]</flag></ping></tool_call>";
    assert_eq!(arguments_of(call), object(json!({"count": "3", "flag": "[1]"})));
}

#[test]
fn values_are_not_trimmed_and_entities_are_not_decoded() {
    let call = "<tool_call><get_weather><city>  Paris \n</city></get_weather></tool_call>";
    assert_eq!(arguments_of(call), object(json!({"city": "  Paris \n"})));
    let call = "<tool_call><get_weather><city> </city></get_weather></tool_call>";
    assert_eq!(arguments_of(call), object(json!({"city": " "})));
    let call = "<tool_call><get_weather><city></city></get_weather></tool_call>";
    assert_eq!(arguments_of(call), object(json!({"city": ""})));
    let call = "<tool_call><get_weather><city>a &amp; b &lt; c > d]]>e</city></get_weather></tool_call>";
    assert_eq!(arguments_of(call), object(json!({"city": "a &amp; b &lt; c > d]]>e"})));
}

#[test]
fn cdata_sections_are_taken_literally() {
    let call = "<tool_call><get_weather><city><![CDATA[a]]]]><![CDATA[>b]]></city></get_weather></tool_call>";
    assert_eq!(arguments_of(call), object(json!({"city": "a]]>b"})));
    let call =
        "<tool_call><get_weather><city><![CDATA[</city></tool_call><tool_call>]]></city></get_weather></tool_call>";
    assert_eq!(arguments_of(call), object(json!({"city": "</city></tool_call><tool_call>"})));
    let call = "<tool_call><get_weather><city>x <![CDATA[<y>]]> z<![CDATA[]]></city></get_weather></tool_call>";
    assert_eq!(arguments_of(call), object(json!({"city": "x <y> z"})));
    let call = "<tool_call><get_weather><days><![CDATA[ 4 ]]></days></get_weather></tool_call>";
    assert_eq!(arguments_of(call), object(json!({"days": 4})));
    let call = r#"<tool_call><search><filters><![CDATA[{"html": "<b>]]>"}]]></filters></search></tool_call>"#;
    let events = parse(call);
    assert!(
        matches!(&events[2], Parsed::Invalid { reason: InvalidCall::Malformed(why), .. } if why.contains("not JSON"))
    );
    let call =
        r#"<tool_call><search><filters><![CDATA[{"html": "<b>]]]]><![CDATA[>"}]]></filters></search></tool_call>"#;
    assert_eq!(arguments_of(call), object(json!({"filters": {"html": "<b>]]>"}})));
}

#[test]
fn cdata_content_streams_without_a_possible_end_of_section() {
    let mut parser = Xml.parser(&tools());
    let mut out = Vec::new();
    parser.feed("<tool_call><get_weather><city><![CDATA[a]]", &mut out);
    let deltas: String = out
        .iter()
        .filter_map(|e| if let Parsed::CallDelta { json, .. } = e { Some(json.as_str()) } else { None })
        .collect();
    assert_eq!(deltas, r#"{"city":"a"#);
    parser.feed("x]]>", &mut out);
    let deltas: String = out
        .iter()
        .filter_map(|e| if let Parsed::CallDelta { json, .. } = e { Some(json.as_str()) } else { None })
        .collect();
    assert_eq!(deltas, r#"{"city":"a]]x"#);
}

#[test]
fn string_values_are_escaped_in_the_deltas() {
    let call = "<tool_call><get_weather><city>\"q\" \\ \n\t\u{1}é</city></get_weather></tool_call>";
    let events = parse(call);
    assert_eq!(events[1], delta(0, "{\"city\":\"\\\"q\\\" \\\\ \\n\\t\\u0001é\"}"));
    assert_eq!(arguments_of(call), object(json!({"city": "\"q\" \\ \n\t\u{1}é"})));
}

// ---------------------------------------------------------------------------------------
// Prose

#[test]
fn prose_that_mentions_tags_outside_a_wrapper_stays_text() {
    for prose in [
        "Call <get_weather> with a <city> tag: <city>Paris</city>.",
        "It closes with </tool_call> and <tool_call > is not a call.",
        "A lone < and a > and <tool_cal.",
        "a < b",
        "<",
        "<tool_call",
        "]]> <![CDATA[ x",
        "é<€<😀<tool",
    ] {
        assert_eq!(parse(prose), vec![text(prose)], "{prose:?}");
    }
}

#[test]
fn prose_is_held_back_only_while_it_may_begin_a_call() {
    for (fed, held) in [
        ("Hello <tool", 5),
        ("a < b", 0),
        ("a <", 1),
        ("<tool_call", 10),
        ("x </tool_call>", 0),
        ("<tool_c<", 1),
        ("<tool_call><get_weather><city>Par", 33),
        (WEATHER, 0),
    ] {
        let mut parser = Xml.parser(&tools());
        let mut out = Vec::new();
        parser.feed(fed, &mut out);
        assert_eq!(parser.held(), held, "{fed:?}");
        assert_eq!(allowed_hold(fed), held, "the reference allows exactly this for {fed:?}");
    }
}

#[test]
fn a_lone_angle_bracket_is_given_out_as_soon_as_it_cannot_begin_a_call() {
    let mut parser = Xml.parser(&tools());
    let mut out = Vec::new();
    parser.feed("a <", &mut out);
    assert_eq!(out, vec![text("a ")]);
    parser.feed(" b", &mut out);
    assert_eq!(out, vec![text("a "), text("< b")]);
    assert_eq!(parser.held(), 0);
}

// ---------------------------------------------------------------------------------------
// Invalid calls

#[test]
fn an_unknown_tool_is_invalid_without_a_start() {
    let call = "<tool_call>\n<get_time>\n<zone>UTC</zone>\n</get_time>\n</tool_call>";
    assert_eq!(
        parse(&format!("Now: {call} then")),
        vec![text("Now: "), invalid(0, call, InvalidCall::UnknownTool("get_time".to_owned())), text(" then")]
    );
}

/// Malformed calls: the call, whether its tool was read (a `CallStart` came), and a piece
/// of the reason.
const MALFORMED: &[(&str, bool, &str)] = &[
    ("<tool_call>\n<get_weather>\nParis\n</get_weather>\n</tool_call>", true, "text between tags"),
    ("<tool_call>get_weather</tool_call>", false, "text between tags"),
    ("<tool_call><get_weather></get_weather>done</tool_call>", true, "text between tags"),
    ("<tool_call><get_weather><city>Paris</town></get_weather></tool_call>", true, "in the value of `city`"),
    ("<tool_call><get_weather><city>a < b</city></get_weather></tool_call>", true, "in the value of `city`"),
    ("<tool_call><get_weather><city><b>Paris</b></city></get_weather></tool_call>", true, "in the value of `city`"),
    ("<tool_call><get_weather><city>Paris</tool_call>", true, "in the value of `city`"),
    ("<tool_call><get_weather><city>Paris</city></get_wether></tool_call>", true, "`</get_wether>` inside"),
    (
        "<tool_call><get_weather><city>Paris</city><city>Lyon</city></get_weather></tool_call>",
        true,
        "a second `<city>`",
    ),
    ("<tool_call><get_weather><days>three</days></get_weather></tool_call>", true, "`days` is not JSON"),
    ("<tool_call><get_weather><days></days></get_weather></tool_call>", true, "`days` is not JSON"),
    ("<tool_call><get_weather></get_weather><ping></ping></tool_call>", true, "one tool per call"),
    ("<tool_call><get_weather></get_weather></get_weather></tool_call>", true, "where `</tool_call>` was due"),
    ("<tool_call>\n</tool_call>", false, "no tool in the call"),
    ("<tool_call></get_weather></tool_call>", false, "where the tool's tag was due"),
    ("<tool_call><tool_call><get_weather></get_weather></tool_call>", false, "`<tool_call>` inside a call"),
    ("<tool_call><get_weather><city id=\"1\">Paris</city></get_weather></tool_call>", true, "' ' in a tag name"),
    ("<tool_call><get_weather/></tool_call>", false, "'/' in a tag name"),
    ("<tool_call><get_weather><></get_weather></tool_call>", true, "an empty tag"),
    ("<tool_call><get_weather><![CDATA[x]]></get_weather></tool_call>", true, "'!' in a tag name"),
    ("<tool_call><get_weather><city>Paris</city></tool_call>", true, "`</tool_call>` inside `<get_weather>`"),
];

#[test]
fn each_malformed_call_is_invalid_up_to_its_wrapper_end() {
    let overlong = format!("<tool_call><get_weather><{0}>x</{0}></get_weather></tool_call>", "a".repeat(257));
    let longest = format!("<tool_call><get_weather><{0}>x</{0}></get_weather></tool_call>", "a".repeat(256));
    let expected: Map<String, Value> = [("a".repeat(256), Value::from("x"))].into_iter().collect();
    assert_eq!(arguments_of(&longest), expected);
    let cases = MALFORMED.iter().copied().chain([(overlong.as_str(), true, "a tag name longer than 256 bytes")]);
    for (call, started, reason) in cases {
        let events = parse(&format!("Before {call} after"));
        let (first, rest) = events.split_first().expect("events");
        let (last, rest) = rest.split_last().expect("events");
        assert_eq!((first, last), (&text("Before "), &text(" after")), "{call:?}: {events:?}");
        let rest = if started {
            let [Parsed::CallStart { index: 0, name }, Parsed::CallDelta { index: 0, .. }, rest @ ..] = rest else {
                panic!("{call:?} does not start: {events:?}")
            };
            assert_eq!(name, "get_weather");
            rest
        } else {
            rest
        };
        let [Parsed::Invalid { index: 0, raw, reason: InvalidCall::Malformed(why) }] = rest else {
            panic!("{call:?} is not one malformed call: {events:?}")
        };
        assert_eq!(raw, call);
        assert!(why.contains(reason), "{call:?}: {why:?} does not say {reason:?}");
    }
}

#[test]
fn a_malformed_call_ends_at_the_first_wrapper_end_even_in_a_section() {
    let call = "<tool_call><get_weather>oops<city><![CDATA[</tool_call>";
    let events = parse(&format!("{call}]]></city></get_weather></tool_call>"));
    assert!(
        matches!(&events[..], [Parsed::CallStart { .. }, Parsed::CallDelta { .. }, Parsed::Invalid { raw, reason: InvalidCall::Malformed(_), .. }, Parsed::Text(after)]
            if raw == call && after == "]]></city></get_weather></tool_call>"),
        "{events:?}"
    );
}

#[test]
fn a_reply_that_ends_inside_a_call_leaves_it_unclosed() {
    for (reply, before) in [
        ("<tool_call><get_wea", ""),
        ("Sure: <tool_call>\n<get_weather>\n<city>Par", "Sure: "),
        ("<tool_call><get_weather><city>Paris</ci", ""),
        ("<tool_call><get_weather><city><![CDATA[a]]", ""),
        ("<tool_call><get_weather><city>Paris</city></get_weather></tool_ca", ""),
        ("<tool_call>oops</tool_cal", ""),
        ("x <tool_call><get_time></get_time>", "x "),
        ("<tool_call>", ""),
    ] {
        let events = parse(reply);
        let Some(Parsed::Invalid { index: 0, raw, reason: InvalidCall::Unclosed }) = events.last() else {
            panic!("{reply:?} is not unclosed: {events:?}")
        };
        assert_eq!(format!("{before}{raw}"), reply);
        let texts: String =
            events.iter().filter_map(|e| if let Parsed::Text(t) = e { Some(t.as_str()) } else { None }).collect();
        assert_eq!(texts, before);
    }
    let events = parse_whole(&Xml, &tools(), "Sure: <tool_call>\n<get_weather>\n<city>Par");
    let deltas: String = events
        .iter()
        .filter_map(|e| if let Parsed::CallDelta { json, .. } = e { Some(json.as_str()) } else { None })
        .collect();
    assert_eq!(deltas, r#"{"city":"Par"#, "what was read is out before the end");
}

#[test]
fn a_reply_that_ends_inside_the_wrapper_tag_is_text() {
    assert_eq!(parse("Sure: <tool_"), vec![text("Sure: <tool_")]);
    let mut parser = Xml.parser(&tools());
    let mut out = Vec::new();
    parser.feed("Sure: <tool_", &mut out);
    assert_eq!((out, parser.held()), (vec![text("Sure: ")], 6));
}

// ---------------------------------------------------------------------------------------
// Writing calls, and the rules

#[test]
fn calls_are_written_in_the_documented_layout() {
    let arguments = object(json!({"city": "Paris", "days": 3}));
    assert_eq!(Xml.format_call("get_weather", &arguments), WEATHER);
    let arguments = object(json!({"city": "a<b]]>c", "days": {"html": "<i>"}, "free": "x]]>y & z"}));
    assert_eq!(
        Xml.format_call("search", &arguments),
        "<tool_call>\n<search>\n\
         <city><![CDATA[a<b]]]]><![CDATA[>c]]></city>\n\
         <days><![CDATA[{\"html\":\"<i>\"}]]></days>\n\
         <free>x]]>y & z</free>\n\
         </search>\n</tool_call>"
    );
    assert_eq!(Xml.format_call("ping", &Map::new()), "<tool_call>\n<ping>\n</ping>\n</tool_call>");
}

#[test]
fn the_rules_teach_the_format_with_an_example_that_parses() {
    assert_eq!(Xml.name(), "xml");
    let rules = Xml.rules();
    for needed in ["<tool_call>", "</tool_call>", "CDATA", "]]]]><![CDATA[>", "JSON", "next user message", "stop"] {
        assert!(rules.contains(needed), "the rules do not mention {needed:?}");
    }
    let example = rules.split("Example:").nth(1).expect("an example").trim();
    let tool = tool(
        "search_files",
        json!({"type": "object", "properties": {"pattern": {"type": "string"}, "max_results": {"type": "integer"}}}),
    );
    let events = crate::text_tools::merged(parse_whole(&Xml, &[tool], example));
    assert!(
        matches!(&events[..], [Parsed::CallStart { .. }, Parsed::CallDelta { .. }, Parsed::CallEnd { arguments, .. }]
            if *arguments == object(json!({"pattern": "TODO", "max_results": 10}))),
        "{events:?}"
    );
}

// ---------------------------------------------------------------------------------------
// The reference bound, and linear time

#[test]
fn the_reference_bound_follows_calls_and_sections() {
    assert_eq!(allowed_hold("Hello <tool"), 5);
    assert_eq!(allowed_hold("<tool_call><a></a></tool_call> then"), 0);
    assert_eq!(allowed_hold("<tool_call><a></a></tool_call> <tool_c"), 7);
    let open = "x <tool_call><a><b><![CDATA[</tool_call>";
    assert_eq!(allowed_hold(open), open.len() - 2);
    assert_eq!(allowed_hold("<tool_call><a><b><![CDATA[</tool_call>]]></b></a></tool_call>."), 0);
}

/// A parser that gives nothing out before the end: the bound check must catch it.
#[derive(Debug)]
struct Hoarder;

#[derive(Debug, Default)]
struct HoardingParser(String);

impl TextProtocol for Hoarder {
    fn name(&self) -> &str {
        "hoarder"
    }
    fn rules(&self) -> String {
        String::new()
    }
    fn format_call(&self, _: &str, _: &Map<String, Value>) -> String {
        String::new()
    }
    fn parser(&self, _: &[ToolSpec]) -> Box<dyn CallParser> {
        Box::new(HoardingParser::default())
    }
}

impl CallParser for HoardingParser {
    fn feed(&mut self, text: &str, _: &mut Vec<Parsed>) {
        self.0.push_str(text);
    }
    fn finish(&mut self, out: &mut Vec<Parsed>) {
        out.push(Parsed::Text(std::mem::take(&mut self.0)));
    }
    fn held(&self) -> usize {
        self.0.len()
    }
}

#[test]
fn the_reference_bound_catches_a_parser_that_holds_prose_back() {
    let reply = format!("{WEATHER} and then some prose");
    let cuts: Vec<usize> = (0..reply.len()).collect();
    assert!(parse_in_pieces(&Hoarder, &tools(), &reply, &cuts, &allowed_hold).is_err());
    assert!(parse_in_pieces(&Xml, &tools(), &reply, &cuts, &allowed_hold).is_ok());
}

#[test]
fn a_large_call_fed_one_byte_at_a_time_is_read_in_linear_time() {
    // Quadratic reading (the call's held bytes scanned again on each feed) would take
    // minutes here; the cursor makes it milliseconds.
    let value = "a>b]".repeat(50_000);
    let call = Xml.format_call("get_weather", &object(json!({ "city": value })));
    let mut parser = Xml.parser(&tools());
    let mut out = Vec::new();
    for (at, c) in call.char_indices() {
        parser.feed(&call[at..at + c.len_utf8()], &mut out);
    }
    parser.finish(&mut out);
    assert!(matches!(out.last(), Some(Parsed::CallEnd { arguments, .. }) if arguments["city"] == value));
}

#[test]
fn many_calls_fed_at_once_are_read_in_linear_time() {
    // Copying what follows each call into its span and back would be quadratic here.
    let reply: String = (0..20_000).map(|day| format!("Day {day}: {WEATHER}\n")).collect();
    let events = parse_whole(&Xml, &tools(), &reply);
    assert_eq!(events.iter().filter(|e| matches!(e, Parsed::CallEnd { .. })).count(), 20_000);
}

// ---------------------------------------------------------------------------------------
// Properties

/// Pieces that break naive escaping or delimiting.
const TRICKY: &[&str] = &[
    "<",
    ">",
    "</city>",
    "<city>",
    "</tool_call>",
    "<tool_call>",
    "]]>",
    "]]",
    "]",
    "<![CDATA[",
    "<![CDATA",
    "]]]]><![CDATA[>",
    "\"",
    "{",
    "}",
    "\\",
    "\n",
    " ",
    "\t",
    "\r",
    "\u{0}",
    "\u{1b}",
    "&amp;",
    "&",
    "é",
    "€",
    "😀",
];

fn hostile_string() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        2 => "\\PC{0,6}",
        2 => prop::sample::select(TRICKY).prop_map(str::to_owned),
        1 => "[ \t\n]{1,3}",
    ];
    prop::collection::vec(piece, 0..6).prop_map(|pieces| pieces.concat())
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        1 => Just(Value::Null),
        1 => any::<bool>().prop_map(Value::Bool),
        1 => any::<i64>().prop_map(Value::from),
        1 => any::<u64>().prop_map(Value::from),
        // Finite floats with a short decimal form: serde_json reads them back exactly.
        1 => any::<i32>().prop_map(|n| Value::from(f64::from(n) / 1000.0)),
        3 => hostile_string().prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(hostile_string(), inner, 0..4)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

const NAME: &str = "[a-z_][a-z0-9_]{0,15}";

fn arguments() -> impl Strategy<Value = Map<String, Value>> {
    prop::collection::btree_map(NAME, json_value(), 0..6).prop_map(|map| map.into_iter().collect())
}

fn weather_arguments() -> impl Strategy<Value = Map<String, Value>> {
    (proptest::option::of(hostile_string()), proptest::option::of(any::<i64>())).prop_map(|(city, days)| {
        let mut arguments = Map::new();
        if let Some(city) = city {
            arguments.insert("city".to_owned(), Value::String(city));
        }
        if let Some(days) = days {
            arguments.insert("days".to_owned(), Value::from(days));
        }
        arguments
    })
}

/// Prose that looks like markup.
const PROSE: &[&str] = &[
    "`<tool_call>`",
    "``<tool_call>``",
    "`<tool_call> a",
    "`",
    "``",
    "<think>",
    "</think>",
    "<think>see <tool_call> here</think>",
    "<thi",
    "<",
    "a < b",
    ">",
    "<tool",
    "<tool_call",
    "</tool_call>",
    "<get_weather>",
    "<city>",
    "</city>",
    "<![CDATA[",
    "]]>",
    "\n",
    "é€😀",
    "<tool_call >",
];

fn segment() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => "[a-z <>/!=`\\[\\]\n\"é€]{0,12}",
        3 => prop::sample::select(PROSE).prop_map(str::to_owned),
        3 => weather_arguments().prop_map(|arguments| Xml.format_call("get_weather", &arguments)),
        1 => arguments().prop_map(|arguments| Xml.format_call("ping", &arguments)),
        1 => arguments().prop_map(|arguments| Xml.format_call("launch_rocket", &arguments)),
        2 => prop::sample::select(MALFORMED).prop_map(|(call, _, _)| call.to_owned()),
    ]
}

/// A reply: prose, calls (valid, unknown, malformed), perhaps cut anywhere.
fn reply() -> impl Strategy<Value = String> {
    (prop::collection::vec(segment(), 0..8), any::<Index>(), any::<bool>()).prop_map(|(segments, cut, truncate)| {
        let reply = segments.concat();
        if truncate {
            let end = floor_boundary(&reply, cut.index(reply.len() + 1));
            reply[..end].to_owned()
        } else {
            reply
        }
    })
}

proptest! {
    /// Split anywhere, a reply gives the same events as whole, loses nothing, holds back
    /// no more than the reference allows, and numbers its calls.
    #[test]
    fn any_split_gives_the_same_events(reply in reply(), cuts in prop::collection::vec(any::<Index>(), 0..12)) {
        let cuts: Vec<usize> = cuts.iter().map(|cut| cut.index(reply.len() + 1)).collect();
        check_parse(&Xml, &tools(), &reply, &cuts, &allowed_hold).map_err(TestCaseError::fail)?;
    }

    /// The same, fed one byte at a time (each cut inside a character falls back to its
    /// start).
    #[test]
    fn one_byte_at_a_time_gives_the_same_events(reply in reply()) {
        let cuts: Vec<usize> = (0..reply.len()).collect();
        check_parse(&Xml, &tools(), &reply, &cuts, &allowed_hold).map_err(TestCaseError::fail)?;
    }

    /// Any arguments, written by `format_call`, read back exactly.
    #[test]
    fn every_call_round_trips(name in NAME, arguments in arguments()) {
        let tool = ToolSpec { name, description: String::new(), input_schema: schema_for(&arguments) };
        check_round_trip(&Xml, &tool, &arguments).map_err(TestCaseError::fail)?;
    }

    /// A valid call written among prose reads back as the call written.
    #[test]
    fn weather_calls_read_back(arguments in weather_arguments(), before in "[a-z <>\n]{0,8}", after in "[a-z <>\n]{0,8}") {
        let call = Xml.format_call("get_weather", &arguments);
        let events = check_parse(&Xml, &tools(), &format!("{before}{call}{after}"), &[], &allowed_hold)
            .map_err(TestCaseError::fail)?;
        let read: Vec<&Map<String, Value>> =
            events.iter().filter_map(|e| if let Parsed::CallEnd { arguments, .. } = e { Some(arguments) } else { None }).collect();
        prop_assert_eq!(read, vec![&arguments]);
    }
}

// ---------------------------------------------------------------------------------------
// Mentions

/// `text` checked split in every two pieces and one byte at a time: the merged events.
fn parse_every_split(text: &str) -> Vec<Parsed> {
    for cut in 0..=text.len() {
        if let Err(e) = check_parse(&Xml, &tools(), text, &[cut], &allowed_hold) {
            panic!("cut at {cut}: {e}");
        }
    }
    parse(text)
}

/// The events of `prose` then [`WEATHER`]: the prose is text, the call parses.
fn assert_mention_then_call(prose: &str) {
    let events = parse_every_split(&format!("{prose}{WEATHER}"));
    assert_eq!(
        events,
        vec![
            text(prose),
            start(0, "get_weather"),
            delta(0, r#"{"city":"Paris","days":3}"#),
            end(0, json!({"city": "Paris", "days": 3}), WEATHER)
        ],
        "{prose:?}"
    );
}

#[test]
fn the_opener_in_inline_code_is_a_mention() {
    for prose in [
        "I'll emit a `<tool_call>` block.\n",
        "I'll emit a `<tool_call>` block: ",
        "Wrap it as ``<tool_call>`` then `</tool_call>`.\n",
        "Write `<tool_call> … </tool_call>` around each call.\n",
        "Nested: `` a ` <tool_call> ` b `` ok\n",
        "Two: `<tool_call>` and `<tool_call>`\n",
        "`<think>` is how I think; ",
    ] {
        assert_mention_then_call(prose);
    }
}

#[test]
fn the_opener_in_a_think_block_is_a_mention() {
    for prose in [
        "<think>\nThe user wants the weather. I'll emit a <tool_call> block for get_weather.\n</think>\n\n",
        "<think>maybe `<tool_call>` or <tool_call><get_weather></get_weather></tool_call></think>",
        "Sure. <think>a </tool_call> <tool_call></think> ",
    ] {
        assert_mention_then_call(prose);
    }
}

#[test]
fn an_unclosed_backtick_run_is_text_and_the_call_after_it_parses() {
    // The run does not close on the opener's line: it was literal, the opener opens a call.
    for prose in ["Use ` for code. ", "a `` b ` ", "`"] {
        assert_mention_then_call(&format!("{prose}\n"));
        let events = parse_every_split(&format!("{prose}{WEATHER}"));
        assert_eq!(events[0], text(prose), "{prose:?}: {events:?}");
        assert!(matches!(events.last(), Some(Parsed::CallEnd { .. })), "{prose:?}: {events:?}");
    }
}

#[test]
fn mentions_that_never_close_stay_text() {
    for reply in ["<think>I will call <tool_call><get_weather>", "`<tool_call>", "a `<tool_call> b ``", "<thi"] {
        assert_eq!(parse_every_split(reply), vec![text(reply)], "{reply:?}");
    }
    // A span left open at the end of its line: the opener is a call (unclosed here).
    let events = parse_every_split("`<tool_call>\n<get_weather>");
    assert!(
        matches!(&events[..], [Parsed::Text(t), Parsed::CallStart { .. }, Parsed::CallDelta { .. }, Parsed::Invalid { reason: InvalidCall::Unclosed, .. }] if t == "`"),
        "{events:?}"
    );
}

#[test]
fn a_mention_is_held_only_until_its_span_closes_or_its_line_ends() {
    for (fed, held) in [
        ("a `<tool_call> x", "<tool_call> x".len()),
        ("a `<tool_call>` b", 0),
        ("a `", 1),
        ("a `` b", 0),
        ("a <thi", 4),
        ("<think>x </thi", 5),
        ("<think>x <tool_call", 0),
        ("`x` <tool_c", 7),
    ] {
        let mut parser = Xml.parser(&tools());
        parser.feed(fed, &mut Vec::new());
        assert_eq!(parser.held(), held, "{fed:?}");
        assert!(held <= allowed_hold(fed), "the reference allows {fed:?}");
    }
}

/// Prose that mentions the opener (each piece leaves no code span or think block open).
const MENTIONS: &[&str] = &[
    "I'll emit a `<tool_call>` block. ",
    "``<tool_call>``",
    "` <tool_call> `\n",
    "<think>I need <tool_call> now</think>\n",
    "<think>`<tool_call>`</think>",
    "`<think>` ",
    "a ` b\n",
    "Use `` ` `` and `<tool_call>`.\n",
];

proptest! {
    /// A valid call right after mentions (in inline code, in a think block) reads back as
    /// the call written, however the reply is split; the mentions are text.
    #[test]
    fn a_call_after_mentions_reads_back(
        mentions in prop::collection::vec(prop::sample::select(MENTIONS), 1..4),
        arguments in weather_arguments(),
        cuts in prop::collection::vec(any::<Index>(), 0..6),
    ) {
        let prose = mentions.join("\n");
        let call = Xml.format_call("get_weather", &arguments);
        let reply = format!("{prose}{call}");
        let cuts: Vec<usize> = cuts.iter().map(|cut| cut.index(reply.len() + 1)).collect();
        let events = check_parse(&Xml, &tools(), &reply, &cuts, &allowed_hold).map_err(TestCaseError::fail)?;
        prop_assert_eq!(&events[0], &text(&prose));
        prop_assert_eq!(events.last(), Some(&end(0, Value::Object(arguments), &call)));
    }
}
