//! The text protocol checks on omni's three protocols (`xml`, `json`, `hermes`), which
//! must pass them, and on two broken ones, which must fail them with a report naming the
//! case.

use omni_protocol::text_tools::{CallParser, Hermes, Json, Parsed, Xml};
use omni_protocol::{TextProtocol, ToolSpec};
use omni_testkit::check::text::{self, HoldBack};
use omni_testkit::check::{strategy, Check, CheckFailure, Config, Sample};
use serde_json::{json, Map, Value};

fn tools() -> Vec<ToolSpec> {
    let tool = |name: &str, input_schema: Value| ToolSpec {
        name: name.into(),
        description: format!("The {name} tool."),
        input_schema,
    };
    vec![
        tool(
            "get_weather",
            json!({"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}),
        ),
        tool("search", json!({"type": "object", "properties": {"q": {"type": "string"}}})),
    ]
}

/// Replies of each protocol: prose with look-alikes of its markup, calls, a cut call.
fn samples(protocol: &dyn TextProtocol) -> Vec<Sample> {
    let weather: Map<String, Value> =
        Map::from_iter([("city".to_owned(), json!("Zürich 😀")), ("days".to_owned(), json!(3))]);
    let call = protocol.format_call("get_weather", &weather);
    let search = protocol.format_call("search", &Map::from_iter([("q".to_owned(), json!("a \"quoted\" <tag> ```"))]));
    vec![
        Sample::new("prose", "No call here: a < b, `code`, <think>hm</think> and é.\r\n"),
        Sample::new("one call", format!("Let me look.\n{call}\nDone.")),
        Sample::new("two calls", format!("{call}{search}")),
        Sample::new("cut call", format!("Looking: {}", &call[..call.len() / 2])),
        Sample::new("mention", "Write `<tool_call>` or `` ```tool_call `` to call a tool.\n"),
    ]
}

fn config() -> Config {
    Config::new().cases(24)
}

fn check(protocol: &dyn TextProtocol, hold_back: HoldBack) {
    let samples = samples(protocol);
    if let Err(failure) = text::check_protocol(protocol, &tools(), &samples, &hold_back, &config()) {
        panic!("{failure}");
    }
}

#[test]
fn xml_passes() {
    check(&Xml, HoldBack::MentionRules { opener: "<tool_call>".into(), fenced: false });
}

#[test]
fn json_passes_with_hostile_argument_names_too() {
    check(&Json, HoldBack::MentionRules { opener: "```tool_call".into(), fenced: true });
    text::check_round_trips(&Json, strategy::hostile_arguments(), &config()).unwrap_or_else(|f| panic!("{f}"));
}

#[test]
fn hermes_passes_with_hostile_argument_names_too() {
    check(&Hermes, HoldBack::MentionRules { opener: "<tool_call>".into(), fenced: false });
    text::check_round_trips(&Hermes, strategy::hostile_arguments(), &config()).unwrap_or_else(|f| panic!("{f}"));
}

/// `[[name]]` calls with `key=value` arguments, broken on purpose in the ways below.
#[derive(Debug)]
struct Brackets {
    /// Gives out a held `[` as text only when the next piece does not start with `[`,
    /// and forgets it otherwise: what it says depends on the split.
    forgets_split_bracket: bool,
    /// Panics on a `!` in the text.
    panics_on_bang: bool,
}

impl TextProtocol for Brackets {
    fn name(&self) -> &str {
        "brackets"
    }

    fn rules(&self) -> String {
        "Call a tool as [[name key=value]].".into()
    }

    fn format_call(&self, name: &str, arguments: &Map<String, Value>) -> String {
        let arguments: Vec<String> = arguments.iter().map(|(k, v)| format!("{k}={v}")).collect();
        format!("[[{name} {}]]", arguments.join(" "))
    }

    fn parser(&self, _: &[ToolSpec]) -> Box<dyn CallParser> {
        Box::new(BracketParser {
            forgets: self.forgets_split_bracket,
            panics: self.panics_on_bang,
            held: String::new(),
        })
    }
}

/// Reads no calls at all (every reply is text): the calls `format_call` writes never read
/// back, and the in-pieces checks see only text.
struct BracketParser {
    forgets: bool,
    panics: bool,
    held: String,
}

impl CallParser for BracketParser {
    fn feed(&mut self, text: &str, out: &mut Vec<Parsed>) {
        assert!(!(self.panics && text.contains('!')), "a bang in {text:?}");
        let mut text = text.to_owned();
        if !self.held.is_empty() {
            if self.forgets && text.starts_with('[') {
                self.held.clear();
            }
            text.insert_str(0, &std::mem::take(&mut self.held));
        }
        if text.ends_with('[') {
            text.pop();
            self.held.push('[');
        }
        out.push(Parsed::Text(text));
    }

    fn finish(&mut self, out: &mut Vec<Parsed>) {
        out.push(Parsed::Text(std::mem::take(&mut self.held)));
    }

    fn held(&self) -> usize {
        self.held.len()
    }
}

fn failure(outcome: Result<(), CheckFailure>) -> CheckFailure {
    match outcome {
        Ok(()) => panic!("the check passed a broken protocol"),
        Err(failure) => {
            // The report as a user reads it (`--nocapture`).
            println!("{failure}\n");
            failure
        }
    }
}

const SOUND: Brackets = Brackets { forgets_split_bracket: false, panics_on_bang: false };

#[test]
fn text_that_depends_on_the_split_fails_with_the_cut_named() {
    let protocol = Brackets { forgets_split_bracket: true, ..SOUND };
    let samples = [Sample::new("brackets", "a [[b]] c")];
    let failure = failure(text::check_samples(&protocol, &[], &samples, &HoldBack::Unchecked, &config()));
    assert_eq!(failure.check, Check::TextPieces);
    let report = failure.to_string();
    assert!(report.starts_with("text in pieces check failed for `brackets`"), "{report}");
    assert!(report.contains("case: sample `brackets`, fed one byte at a time"), "{report}");
    assert!(report.contains("given out") && report.contains("do not add up"), "{report}");
}

#[test]
fn a_parser_that_panics_is_reported_not_unwound() {
    let protocol = Brackets { panics_on_bang: true, ..SOUND };
    let samples = [Sample::new("bang", "Hello!")];
    let failure = failure(text::check_samples(&protocol, &[], &samples, &HoldBack::Unchecked, &config()));
    let report = failure.to_string();
    assert!(report.contains("case: sample `bang`, fed one byte at a time"), "{report}");
    assert!(report.contains("panicked: a bang in \"Hello!\""), "{report}");
}

#[test]
fn a_call_that_does_not_read_back_fails_the_round_trip() {
    let failure = failure(text::check_round_trips(&SOUND, strategy::arguments(), &config()));
    assert_eq!(failure.check, Check::TextRoundTrip);
    let report = failure.to_string();
    assert!(report.starts_with("text round trip check failed for `brackets`"), "{report}");
    assert!(report.contains("case: a call to `"), "{report}");
    assert!(report.contains("no call start"), "{report}");
}

#[test]
fn holding_back_more_than_the_bound_fails() {
    // A parser that holds a trailing `[` while the bound allows nothing to be held.
    let bound = HoldBack::Custom(std::sync::Arc::new(|_: &str| 0));
    let samples = [Sample::new("open bracket", "see [")];
    let failure = failure(text::check_samples(&SOUND, &[], &samples, &bound, &config()));
    assert!(failure.detail.contains("1 bytes held back, at most 0 allowed"), "{failure}");
    text::check_samples(&SOUND, &[], &samples, &HoldBack::Unchecked, &config()).expect("within no bound");
}
