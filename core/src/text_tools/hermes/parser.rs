//! One call of a reply, from `<tool_call>` to `</tool_call>`: the members of its object as
//! the `json` protocol's tokenizer reports them, the events given out, the fault that
//! makes it invalid.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use super::{CLOSER, OPENER};
use crate::data::depth::MAX_DEPTH;
use crate::text_tools::json::call::described;
use crate::text_tools::json::tokenizer::{Event, Fault, Kind, Tokenizer};
use crate::text_tools::{InvalidCall, Parsed};

/// Why a call whose object has no `"name"` key is malformed.
const NO_NAME: &str = "the object has no \"name\" key";

/// Which part of the call is being read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Reading the object (or the whitespace before it).
    Object,
    /// The object closed: whitespace, then `</tool_call>`; `matched` bytes of it read.
    AfterObject { matched: usize },
    /// The text stopped being JSON, or more than whitespace followed the object: the
    /// first `</tool_call>` from there ends the call; `matched` bytes of it read.
    Broken { matched: usize },
}

/// Which of the object's members is being read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Member {
    Name,
    Arguments,
    Other,
}

/// What a piece did to the call.
pub(super) enum Outcome {
    /// The call goes on past the piece.
    Reading,
    /// The call closed after this many bytes of the piece (its end was given out).
    Closed(usize),
    /// No object followed the opener: the opener and the whitespace read (the call's
    /// `raw`) are prose; the piece goes on as prose from this many bytes.
    Prose(usize),
}

/// One call being read: its span so far and what is known of it.
#[derive(Debug)]
pub(super) struct Call {
    /// Which call of the reply.
    pub(super) index: usize,
    /// The span so far, from the opener on.
    pub(super) raw: String,
    phase: Phase,
    tokenizer: Tokenizer,
    /// The member whose key was read last.
    member: Member,
    /// Where the last key or value of the object began, in `raw`.
    started_at: usize,
    /// The kind of the member's value being read.
    kind: Option<Kind>,
    seen_name: bool,
    seen_arguments: bool,
    /// Where the arguments' object text begins and ends in `raw`, as far as it is known.
    arguments_from: Option<usize>,
    arguments_to: Option<usize>,
    /// Arguments given as a string: the object it holds, as JSON, until given out.
    unquoted: Option<String>,
    /// The arguments came as a string holding the object: said in a warning at the end.
    quoted_arguments: bool,
    arguments: Option<Map<String, Value>>,
    /// The `CallStart` was given out.
    started: bool,
    /// How far the arguments' text was given out as deltas, in `raw`.
    streamed: usize,
    /// The first fault found: the call is invalid.
    fault: Option<InvalidCall>,
}

impl Call {
    pub(super) fn new(index: usize) -> Self {
        Self {
            index,
            raw: OPENER.to_owned(),
            phase: Phase::Object,
            // The call's object is one level more than the arguments' bound.
            tokenizer: Tokenizer::new(MAX_DEPTH + 1),
            member: Member::Other,
            started_at: 0,
            kind: None,
            seen_name: false,
            seen_arguments: false,
            arguments_from: None,
            arguments_to: None,
            unquoted: None,
            quoted_arguments: false,
            arguments: None,
            started: false,
            streamed: 0,
            fault: None,
        }
    }

    /// Reads the next piece of the call.
    pub(super) fn feed(&mut self, text: &str, tools: &BTreeSet<String>, out: &mut Vec<Parsed>) -> Outcome {
        let bytes = text.as_bytes();
        let mut at = 0;
        while at < bytes.len() {
            if self.phase == Phase::Object {
                let (used, event) = self.tokenizer.advance(&bytes[at..]);
                self.raw.push_str(&text[at..at + used]);
                at += used;
                match event {
                    // Only whitespace came after the opener, then not a `{`: a mention.
                    Some(Event::Error(_)) if self.raw[OPENER.len()..].bytes().all(|b| b" \t\n\r".contains(&b)) => {
                        return Outcome::Prose(at);
                    }
                    Some(event) => self.on_event(event, bytes.get(at).copied(), tools, out),
                    None => {}
                }
                continue;
            }
            let (used, closed) = self.read_to_closer(&bytes[at..], out);
            self.raw.push_str(&text[at..at + used]);
            at += used;
            if closed {
                self.close(out);
                return Outcome::Closed(at);
            }
        }
        self.stream(out);
        Outcome::Reading
    }

    /// Reads up to `</tool_call>`, after the object or after a fault: how many bytes
    /// were read and whether the last one closed the call.
    fn read_to_closer(&mut self, bytes: &[u8], out: &mut Vec<Parsed>) -> (usize, bool) {
        let closer = CLOSER.as_bytes();
        for (at, &byte) in bytes.iter().enumerate() {
            // No proper prefix of the closer is also a suffix of it, so a byte that does
            // not continue the match starts over (a `<` starts a new one).
            let advance = |matched: usize| {
                if byte == closer[matched] {
                    matched + 1
                } else {
                    usize::from(byte == b'<')
                }
            };
            self.phase = match self.phase {
                Phase::AfterObject { matched } | Phase::Broken { matched } if advance(matched) == closer.len() => {
                    return (at + 1, true);
                }
                Phase::AfterObject { matched: 0 } if matches!(byte, b' ' | b'\t' | b'\n' | b'\r') => {
                    Phase::AfterObject { matched: 0 }
                }
                Phase::AfterObject { matched } if byte == closer[matched] => {
                    Phase::AfterObject { matched: matched + 1 }
                }
                Phase::AfterObject { .. } => {
                    let found = described(Some(byte));
                    let offset = self.raw.len() + at;
                    self.fail(
                        format!("expected {CLOSER} after the object at byte {offset} of the call, found {found}"),
                        out,
                    );
                    Phase::Broken { matched: usize::from(byte == b'<') }
                }
                Phase::Broken { matched } => Phase::Broken { matched: advance(matched) },
                Phase::Object => return (at, false),
            };
        }
        (bytes.len(), false)
    }

    fn on_event(&mut self, event: Event, next: Option<u8>, tools: &BTreeSet<String>, out: &mut Vec<Parsed>) {
        // Each event's byte is the last one in `raw`.
        let here = self.raw.len() - 1;
        match event {
            Event::KeyStart => self.started_at = here,
            Event::KeyEnd => self.on_key(out),
            Event::ValueStart(kind) => {
                self.started_at = here;
                self.kind = Some(kind);
                match (self.member, kind) {
                    (Member::Name | Member::Arguments, Kind::String) | (Member::Other, _) => {}
                    (Member::Arguments, Kind::Object) => self.arguments_from = Some(here),
                    (Member::Name, _) => self.fail(format!("\"name\" is {}, not a string", kind.described()), out),
                    (Member::Arguments, _) => self.fail(
                        format!("\"arguments\" is {}, not an object (or a string holding one)", kind.described()),
                        out,
                    ),
                }
            }
            Event::ValueEnd => match (self.member, self.kind) {
                (Member::Name, Some(Kind::String)) => self.on_name(tools, out),
                (Member::Arguments, Some(Kind::Object)) => self.on_arguments(out),
                (Member::Arguments, Some(Kind::String)) => self.on_quoted_arguments(out),
                _ => {}
            },
            Event::ObjectEnd => {
                if !self.seen_name {
                    self.fail(NO_NAME.to_owned(), out);
                }
                self.phase = Phase::AfterObject { matched: 0 };
            }
            Event::Error(fault) => {
                // The rejected byte is the next one: its offset in the call is `raw`'s length.
                let at = self.raw.len();
                let why = match fault {
                    Fault::Expected(expected) => format!("expected {expected}, found {}", described(next)),
                    Fault::TooDeep => {
                        format!("arrays and objects nest more than {MAX_DEPTH} levels deep inside the call's object")
                    }
                };
                self.fail(format!("invalid JSON at byte {at} of the call: {why}"), out);
                self.phase = Phase::Broken { matched: 0 };
            }
        }
    }

    fn on_key(&mut self, out: &mut Vec<Parsed>) {
        self.member = Member::Other;
        let (member, seen) = match serde_json::from_str::<String>(&self.raw[self.started_at..]) {
            Ok(key) if key == "name" => (Member::Name, &mut self.seen_name),
            Ok(key) if key == "arguments" => (Member::Arguments, &mut self.seen_arguments),
            Ok(other) => {
                let why = format!("unexpected key {other:?}: a call has only \"name\" and \"arguments\"");
                return self.fail(why, out);
            }
            Err(error) => return self.fail(format!("a key is not valid text: {error}"), out),
        };
        if std::mem::replace(seen, true) {
            let key = &self.raw[self.started_at..];
            return self.fail(format!("the key {key} appears twice"), out);
        }
        self.member = member;
    }

    fn on_name(&mut self, tools: &BTreeSet<String>, out: &mut Vec<Parsed>) {
        if self.fault.is_some() {
            return;
        }
        let name = match serde_json::from_str::<String>(&self.raw[self.started_at..]) {
            Ok(name) => name,
            Err(error) => return self.fail(format!("the tool's name is not valid text: {error}"), out),
        };
        if !tools.contains(&name) {
            self.fault = Some(InvalidCall::UnknownTool(name));
            return;
        }
        self.started = true;
        out.push(Parsed::CallStart { index: self.index, name });
        // Arguments read before the name come out now.
        self.stream(out);
    }

    fn on_arguments(&mut self, out: &mut Vec<Parsed>) {
        self.arguments_to = Some(self.raw.len());
        if self.fault.is_some() {
            return;
        }
        match serde_json::from_str(&self.raw[self.started_at..]) {
            Ok(arguments) => self.arguments = Some(arguments),
            Err(error) => self.fail(format!("the arguments cannot be read: {error}"), out),
        }
    }

    /// `"arguments"` as a string (OpenAI's wire form): read the object it holds.
    fn on_quoted_arguments(&mut self, out: &mut Vec<Parsed>) {
        if self.fault.is_some() {
            return;
        }
        let held = serde_json::from_str::<String>(&self.raw[self.started_at..])
            .map_err(|error| error.to_string())
            .and_then(|text| serde_json::from_str::<Map<String, Value>>(&text).map_err(|error| error.to_string()));
        match held {
            Ok(arguments) => {
                self.unquoted = Some(Value::Object(arguments.clone()).to_string());
                self.quoted_arguments = true;
                self.arguments = Some(arguments);
                self.stream(out);
            }
            Err(error) => self.fail(
                format!(
                    "\"arguments\" is a string that does not hold a JSON object ({error}); write the object itself"
                ),
                out,
            ),
        }
    }

    /// The call is invalid for `why`, unless an earlier fault was found. The arguments
    /// read up to the fault are given out first, so that the deltas do not depend on how
    /// the reply was split.
    fn fail(&mut self, why: String, out: &mut Vec<Parsed>) {
        if self.fault.is_none() {
            self.stream(out);
            self.fault = Some(InvalidCall::Malformed(why));
        }
    }

    /// Gives out the arguments' text read since the last delta, while the call is valid.
    fn stream(&mut self, out: &mut Vec<Parsed>) {
        if !self.started || self.fault.is_some() {
            return;
        }
        if let Some(json) = self.unquoted.take() {
            out.push(Parsed::CallDelta { index: self.index, json });
            return;
        }
        let Some(from) = self.arguments_from else { return };
        let from = from.max(self.streamed);
        let to = self.arguments_to.unwrap_or(self.raw.len());
        if to > from {
            out.push(Parsed::CallDelta { index: self.index, json: self.raw[from..to].to_owned() });
            self.streamed = to;
        }
    }

    /// `</tool_call>` was read (it ends `raw`): the call's last event.
    fn close(&mut self, out: &mut Vec<Parsed>) {
        self.stream(out);
        let raw = std::mem::take(&mut self.raw);
        let index = self.index;
        if let (None, true) = (&self.fault, self.started) {
            if self.arguments.is_none() {
                out.push(Parsed::CallDelta { index, json: "{}".to_owned() });
            }
            if self.quoted_arguments {
                let alias = "\"arguments\" given as a string holding the object, read as the object";
                out.push(Parsed::Warning(format!("tool call {index}: {alias}")));
            }
            let arguments = self.arguments.take().unwrap_or_default();
            out.push(Parsed::CallEnd { index, arguments, raw });
        } else {
            // A started call without a fault read its name; the stand-in spares a panic.
            let reason = self.fault.take().unwrap_or_else(|| InvalidCall::Malformed(NO_NAME.to_owned()));
            out.push(Parsed::Invalid { index, raw, reason });
        }
    }
}
