//! The wire checks on a small format written here, sound and with one flaw at a time: the
//! sound one passes every check; each flawed one fails the check meant to catch it, with
//! a report naming the check, the format and the case.

use std::sync::atomic::{AtomicU32, Ordering};

use omni_protocol::dialect::{
    BlockDelta, BlockKind, Delta, DialectRequest, Frame, Framing, Header, MessageMeta, RequestSpec, WireFormat,
    WireStream,
};
use omni_protocol::{Dialect, RequestError, StopReason, StreamError, Warning};
use omni_testkit::check::wire::{self, Damage};
use omni_testkit::check::{Check, CheckFailure, Config, Ending, Sample};
use serde_json::{json, Value};

/// What is wrong with a [`Lines`] format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flaw {
    None,
    /// It makes up call ids from a counter kept on the format, shared by every stream, not
    /// on the stream. omni's framing hands a format whole frames however the bytes
    /// arrive, so state outside the stream is how a format's events come to depend on
    /// more than its bytes: fed whole, then in pieces, the second decode's ids go on from
    /// where the first's stopped.
    SharedCounter,
    /// It takes the `text` of a text line for granted (`expect`): damage panics it.
    PanicsOnDamage,
    /// It says the answer stopped as soon as the first line comes: a cut passes.
    StopsEarly,
    /// It sends the key in a header of its own, not marked sensitive.
    LeaksKey,
}

/// NDJSON: `{"say": "..."}` lines of text, `{"call": name, "args": {...}}` tool calls
/// (the format gives no ids: the stream makes them up), then `{"end": "stop"|"length"}`.
#[derive(Debug)]
struct Lines {
    name: &'static str,
    flaw: Flaw,
}

impl Lines {
    const fn new(name: &'static str, flaw: Flaw) -> Self {
        Self { name, flaw }
    }
}

/// The call counter of [`Flaw::SharedCounter`]: one for every stream.
static SHARED_CALLS: AtomicU32 = AtomicU32::new(0);

static SOUND: Lines = Lines::new("lines_sound", Flaw::None);
static SHARED_COUNTER: Lines = Lines::new("lines_shared_counter", Flaw::SharedCounter);
static PANICS_ON_DAMAGE: Lines = Lines::new("lines_panics_on_damage", Flaw::PanicsOnDamage);
static STOPS_EARLY: Lines = Lines::new("lines_stops_early", Flaw::StopsEarly);
static LEAKS_KEY: Lines = Lines::new("lines_leaks_key", Flaw::LeaksKey);

impl WireFormat for Lines {
    fn name(&self) -> &'static str {
        self.name
    }

    fn framing(&self) -> Framing {
        Framing::Ndjson
    }

    fn build_request(&self, spec: &RequestSpec<'_>, _: &mut Vec<Warning>) -> Result<DialectRequest, RequestError> {
        let turns: Vec<Value> = spec.context.messages.iter().map(|m| json!({"text": m.text()})).collect();
        let mut headers = Vec::new();
        if let (Flaw::LeaksKey, Some(key)) = (self.flaw, spec.api_key) {
            headers.push(Header { name: "x-ticket".into(), value: key.expose().into(), sensitive: false });
        }
        Ok(DialectRequest { path: "/lines".into(), headers, body: json!({"model": spec.model.id, "turns": turns}) })
    }

    fn new_stream(&self) -> Box<dyn WireStream> {
        Box::new(LinesStream { flaw: self.flaw, open: None, blocks: 0, calls: 0 })
    }
}

#[derive(Debug)]
struct LinesStream {
    flaw: Flaw,
    open: Option<u32>,
    blocks: u32,
    calls: u32,
}

impl LinesStream {
    fn next_block(&mut self) -> u32 {
        self.blocks += 1;
        self.blocks - 1
    }

    fn next_call_id(&mut self) -> String {
        let n = match self.flaw {
            Flaw::SharedCounter => SHARED_CALLS.fetch_add(1, Ordering::Relaxed),
            _ => {
                self.calls += 1;
                self.calls - 1
            }
        };
        format!("call_{n}")
    }

    fn close_text(&mut self, out: &mut Vec<Delta>) {
        if let Some(index) = self.open.take() {
            out.push(Delta::BlockStop { index });
        }
    }
}

impl WireStream for LinesStream {
    fn event(&mut self, frame: &Frame<'_>, out: &mut Vec<Delta>) -> Result<(), StreamError> {
        let Frame::Event { data, .. } = frame else { return Ok(()) };
        let line: Value = serde_json::from_str(data).map_err(|e| StreamError::decode(e, data))?;
        if self.flaw == Flaw::StopsEarly && self.open.is_none() {
            out.push(Delta::Message(MessageMeta { stop_reason: Some(StopReason::Stop), ..MessageMeta::default() }));
        }
        if line.get("say").is_some() {
            let text = match self.flaw {
                #[allow(clippy::expect_used)] // the flaw under test
                Flaw::PanicsOnDamage => line["say"].as_str().expect("a say line says a string"),
                _ => line["say"].as_str().unwrap_or_default(),
            };
            let index = match self.open {
                Some(index) => index,
                None => {
                    let index = self.next_block();
                    self.open = Some(index);
                    out.push(Delta::BlockStart { index, kind: BlockKind::Text });
                    index
                }
            };
            out.push(Delta::BlockDelta { index, delta: BlockDelta::Text(text.into()) });
        } else if let Some(name) = line["call"].as_str() {
            self.close_text(out);
            let (index, id) = (self.next_block(), self.next_call_id());
            out.push(Delta::BlockStart { index, kind: BlockKind::ToolUse { id, name: name.into() } });
            out.push(Delta::BlockDelta { index, delta: BlockDelta::ToolInput(line["args"].to_string().into()) });
            out.push(Delta::BlockStop { index });
        } else if let Some(end) = line.get("end") {
            self.close_text(out);
            let stop = if end == "length" { StopReason::Length } else { StopReason::Stop };
            out.push(Delta::Message(MessageMeta { stop_reason: Some(stop), ..MessageMeta::default() }));
        }
        Ok(())
    }
}

fn samples() -> Vec<Sample> {
    vec![
        Sample::new("hello", "{\"say\":\"Héllo, \"}\r\n{\"say\":\"wörld 😀\"}\n{\"end\":\"stop\"}\n"),
        Sample::new(
            "call",
            "{\"say\":\"Looking.\"}\n{\"call\":\"search\",\"args\":{\"q\":\"ü\"}}\n{\"end\":\"stop\"}\n",
        ),
        Sample::new("cut short", "{\"say\":\"It was\"}\n{\"say\":\" cut\"}\n"),
        Sample::new("capped", "{\"say\":\"a\"}\n\n{\"say\":\"b\"}\n{\"end\":\"length\"}"),
    ]
}

fn config() -> Config {
    Config::new().cases(48)
}

fn failure(outcome: Result<(), CheckFailure>) -> CheckFailure {
    match outcome {
        Ok(()) => panic!("the check passed a flawed format"),
        Err(failure) => {
            // The report as a user reads it (`--nocapture`).
            println!("{failure}\n");
            failure
        }
    }
}

#[test]
fn a_sound_format_passes_every_check() {
    if let Err(failure) = wire::check_format(&SOUND, &samples(), &config()) {
        panic!("{failure}");
    }
}

#[test]
fn events_that_depend_on_more_than_the_bytes_fail_split_invariance() {
    let failure = failure(wire::check_format(&SHARED_COUNTER, &samples(), &config()));
    assert_eq!(failure.check, Check::Splits, "{failure}");
    let report = failure.to_string();
    assert!(report.starts_with("split invariance check failed for `lines_shared_counter`"), "{report}");
    assert!(report.contains("case: sample `call`, fed one byte at a time"), "{report}");
    assert!(report.contains("differs:\n    whole:     ToolUseStart") && report.contains("call_0"), "{report}");
}

#[test]
fn a_panic_on_a_damaged_frame_is_reported_with_its_damage() {
    let dialect = omni_protocol::dialect::register(&PANICS_ON_DAMAGE).expect("registered");
    // Its samples decode, split and cut, soundly: only damage finds the panic.
    wire::check_splits(dialect, &samples(), &config()).expect("splits");
    wire::check_cuts(dialect, &samples(), &config()).expect("cuts");
    let failure = failure(wire::check_damage(dialect, &samples(), &config().cases(256)));
    assert_eq!(failure.check, Check::Damage, "{failure}");
    let report = failure.to_string();
    assert!(report.starts_with("damaged input check failed for `lines_panics_on_damage`"), "{report}");
    assert!(report.contains("panicked: a say line says a string"), "{report}");
    // The case names the sample and the damage, as applied.
    assert!(report.contains("case: sample `"), "{report}");
    assert!(failure.case.contains("line ") || failure.case.contains("byte"), "{report}");
}

#[test]
fn a_stream_that_passes_a_cut_for_complete_fails_the_cut_check() {
    let dialect = omni_protocol::dialect::register(&STOPS_EARLY).expect("registered");
    let failure = failure(wire::check_cuts(dialect, &samples(), &config()));
    assert_eq!(failure.check, Check::Cuts, "{failure}");
    let report = failure.to_string();
    assert!(report.contains("case: sample `hello` cut after"), "{report}");
    assert!(report.contains("passed for complete"), "{report}");
    // Told that the format has no end marker, the check asks only for a prefix of the
    // content, which this one gives.
    wire::check_cuts(dialect, &samples(), &config().ending(Ending::Unmarked)).expect("a prefix");
}

#[test]
fn a_key_in_a_header_not_marked_sensitive_fails_request_building() {
    let failure = failure(wire::check_format(&LEAKS_KEY, &samples(), &config()));
    assert_eq!(failure.check, Check::Requests, "{failure}");
    assert!(
        failure.detail.contains("header \"x-ticket\" carries the API key but is not marked sensitive"),
        "{failure}"
    );
    assert!(failure.case.starts_with("model "), "{failure}");
}

#[test]
fn the_built_in_dialects_pass_request_building() {
    for dialect in Dialect::ALL {
        if let Err(failure) = wire::check_requests(dialect, &config()) {
            panic!("{failure}");
        }
    }
}

#[test]
fn damages_name_what_they_did() {
    let body = b"data: {\"a\":{\"b\":1}}\r\n\r\n";
    let (damaged, what) = Damage::RemoveValue { line: 0, path: 2 }.apply(body).expect("a JSON line");
    assert_eq!(String::from_utf8_lossy(&damaged), "data: {\"a\":{}}\r\n\r\n");
    assert_eq!(what, "line 1: the value at `/a/b` removed");
    let (damaged, what) = Damage::FlipBit { at: 6, bit: 1 }.apply(body).expect("a byte");
    assert_eq!(damaged[6], b'y');
    assert_eq!(what, "bit 1 of byte 6 flipped ('{' to 'y')");
    assert_eq!(Damage::DropEvent { line: 0 }.apply(b"not json"), None);
    assert_eq!(Damage::DropByte { at: 3 }.apply(b""), None);
}

#[test]
fn awkward_cuts_fall_inside_characters_and_line_ends() {
    // "é" is two bytes (1, 2), then CR LF (3, 4), then "x".
    assert_eq!(wire::awkward_cuts("aé\r\nx".as_bytes()), vec![2, 4, 5]);
}

#[test]
fn a_name_taken_by_a_built_in_fails_registration() {
    static IMPOSTOR: Lines = Lines::new("ollama_chat", Flaw::None);
    let failure = failure(wire::check_format(&IMPOSTOR, &samples(), &config()));
    assert_eq!(failure.check, Check::Register);
    assert!(failure.to_string().starts_with("registration check failed for `ollama_chat`"), "{failure}");
}
