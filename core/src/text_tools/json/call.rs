//! One call of a reply, from its opener to its closing fence: the members of its object
//! as the tokenizer reports them, the events given out, the fault that makes it invalid.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use super::tokenizer::{Event, Fault, Kind, Tokenizer};
use super::{FENCE, NO_TOOL, OPENER};
use crate::data::depth::{self, MAX_DEPTH};
use crate::text_tools::{InvalidCall, Parsed};

/// Which part of the call is being read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Reading the object.
    Object,
    /// The object closed: whitespace, then the closing fence; `ticks` of it read.
    AfterObject { ticks: u8 },
    /// The text stopped being JSON, or more than whitespace followed the object: the
    /// first fence from there ends the call; `ticks` of it read.
    Broken { ticks: u8 },
}

/// Which of the object's members is being read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Member {
    Tool,
    Arguments,
    Other,
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
    /// The key that named the tool (`"tool"`, or its alias `"name"`), once read.
    tool_key: Option<&'static str>,
    seen_arguments: bool,
    /// `"arguments"` is a string holding the object (as OpenAI writes it): it comes out in
    /// one delta once decoded, not as its text.
    string_arguments: bool,
    /// The aliases read, for a warning when the call ends valid.
    aliases: Vec<String>,
    /// Where the arguments' text begins and ends in `raw`, as far as it is known.
    arguments_from: Option<usize>,
    arguments_to: Option<usize>,
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
            tool_key: None,
            seen_arguments: false,
            string_arguments: false,
            aliases: Vec::new(),
            arguments_from: None,
            arguments_to: None,
            arguments: None,
            started: false,
            streamed: 0,
            fault: None,
        }
    }

    /// Reads the next piece of the call; when its closing fence is in `text`, gives out
    /// its end and returns how many bytes of `text` it took.
    pub(super) fn feed(&mut self, text: &str, tools: &BTreeSet<String>, out: &mut Vec<Parsed>) -> Option<usize> {
        let bytes = text.as_bytes();
        let mut at = 0;
        while at < bytes.len() {
            if self.phase == Phase::Object {
                let (used, event) = self.tokenizer.advance(&bytes[at..]);
                self.raw.push_str(&text[at..at + used]);
                at += used;
                if let Some(event) = event {
                    self.on_event(event, bytes.get(at).copied(), tools, out);
                }
                continue;
            }
            let (used, closed) = self.read_to_fence(&bytes[at..], out);
            self.raw.push_str(&text[at..at + used]);
            at += used;
            if closed {
                self.close(out);
                return Some(at);
            }
        }
        self.stream(out);
        None
    }

    /// Reads up to the closing fence, after the object or after a fault: how many bytes
    /// were read and whether the last one closed the call.
    fn read_to_fence(&mut self, bytes: &[u8], out: &mut Vec<Parsed>) -> (usize, bool) {
        for (at, &byte) in bytes.iter().enumerate() {
            self.phase = match (self.phase, byte) {
                (Phase::AfterObject { ticks } | Phase::Broken { ticks }, b'`') if ticks == 2 => return (at + 1, true),
                (Phase::AfterObject { ticks }, b'`') => Phase::AfterObject { ticks: ticks + 1 },
                (Phase::AfterObject { ticks: 0 }, b' ' | b'\t' | b'\n' | b'\r') => Phase::AfterObject { ticks: 0 },
                (Phase::AfterObject { .. }, _) => {
                    let found = described(Some(byte));
                    self.fail(format!("expected the closing {FENCE} after the object, found {found}"), out);
                    Phase::Broken { ticks: 0 }
                }
                (Phase::Broken { ticks }, b'`') => Phase::Broken { ticks: ticks + 1 },
                (Phase::Broken { .. }, _) => Phase::Broken { ticks: 0 },
                (Phase::Object, _) => return (at, false),
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
                    (Member::Tool, Kind::String) | (Member::Other, _) => {}
                    (Member::Arguments, Kind::Object) => self.arguments_from = Some(here),
                    (Member::Arguments, Kind::String) => self.string_arguments = true,
                    (Member::Tool, _) => {
                        let key = self.tool_key.unwrap_or("tool");
                        self.fail(format!("{key:?} is {}, not a string", kind.described()), out);
                    }
                    (Member::Arguments, _) => {
                        let why = format!(
                            "\"arguments\" is {}: arguments must be an object (or a string holding one)",
                            kind.described()
                        );
                        self.fail(why, out);
                    }
                }
            }
            Event::ValueEnd => match (self.member, self.kind) {
                (Member::Tool, Some(Kind::String)) => self.on_name(tools, out),
                (Member::Arguments, Some(Kind::Object)) => self.on_arguments(out),
                (Member::Arguments, Some(Kind::String)) => self.on_string_arguments(out),
                _ => {}
            },
            Event::ObjectEnd => {
                if self.tool_key.is_none() {
                    self.fail(NO_TOOL.to_owned(), out);
                }
                self.phase = Phase::AfterObject { ticks: 0 };
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
                self.phase = Phase::Broken { ticks: 0 };
            }
        }
    }

    fn on_key(&mut self, out: &mut Vec<Parsed>) {
        self.member = Member::Other;
        let key = match serde_json::from_str::<String>(&self.raw[self.started_at..]) {
            Ok(key) => key,
            Err(error) => return self.fail(format!("a key is not valid text: {error}"), out),
        };
        match key.as_str() {
            "tool" | "name" => {
                let key: &'static str = if key == "tool" { "tool" } else { "name" };
                match self.tool_key.replace(key) {
                    Some(earlier) if earlier == key => {
                        return self.fail(format!("the key {key:?} appears twice"), out);
                    }
                    Some(_) => {
                        let why = "both \"tool\" and \"name\" are given: the tool is named by one of them";
                        return self.fail(why.to_owned(), out);
                    }
                    None => {}
                }
                if key == "name" {
                    self.aliases.push("\"name\" read as \"tool\"".to_owned());
                }
                self.member = Member::Tool;
            }
            "arguments" => {
                if std::mem::replace(&mut self.seen_arguments, true) {
                    return self.fail("the key \"arguments\" appears twice".to_owned(), out);
                }
                self.member = Member::Arguments;
            }
            other => {
                let why = format!("unexpected key {other:?}: a call has only \"tool\" and \"arguments\"");
                self.fail(why, out);
            }
        }
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

    /// `"arguments"` was a string: it must hold a JSON object, which is the arguments.
    fn on_string_arguments(&mut self, out: &mut Vec<Parsed>) {
        if self.fault.is_some() {
            return;
        }
        let text = match serde_json::from_str::<String>(&self.raw[self.started_at..]) {
            Ok(text) => text,
            Err(error) => return self.fail(format!("the arguments cannot be read: {error}"), out),
        };
        let why = match serde_json::from_str::<Value>(&text) {
            Ok(value) if value.is_object() && !depth::exceeds(&value, MAX_DEPTH) => {
                if let Value::Object(arguments) = value {
                    self.arguments = Some(arguments);
                }
                self.aliases
                    .push("\"arguments\" given as a string holding a JSON object, read as that object".to_owned());
                return self.stream(out);
            }
            Ok(value) if value.is_object() => {
                format!("the object in the \"arguments\" string nests more than {MAX_DEPTH} levels deep")
            }
            Ok(other) => format!(
                "\"arguments\" is a string holding {}: arguments must be an object (or a string holding one)",
                described_value(&other)
            ),
            Err(_) => {
                "\"arguments\" is a string that is not JSON: arguments must be an object (or a string holding one)"
                    .to_owned()
            }
        };
        self.fail(why, out);
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

    /// Gives out the arguments' text read since the last delta, while the call is valid
    /// (arguments given as a string: the object they hold, once, when decoded).
    fn stream(&mut self, out: &mut Vec<Parsed>) {
        if !self.started || self.fault.is_some() {
            return;
        }
        if self.string_arguments {
            if let (Some(arguments), 0) = (&self.arguments, self.streamed) {
                out.push(Parsed::CallDelta { index: self.index, json: Value::Object(arguments.clone()).to_string() });
                self.streamed = 1;
            }
            return;
        }
        let Some(from) = self.arguments_from else {
            return;
        };
        let from = from.max(self.streamed);
        let to = self.arguments_to.unwrap_or(self.raw.len());
        if to > from {
            out.push(Parsed::CallDelta { index: self.index, json: self.raw[from..to].to_owned() });
            self.streamed = to;
        }
    }

    /// The closing fence was read (it ends `raw`): the call's last event.
    fn close(&mut self, out: &mut Vec<Parsed>) {
        self.stream(out);
        let raw = std::mem::take(&mut self.raw);
        let index = self.index;
        if let (None, true) = (&self.fault, self.started) {
            if self.arguments_from.is_none() && !self.string_arguments {
                out.push(Parsed::CallDelta { index, json: "{}".to_owned() });
            }
            for alias in self.aliases.drain(..) {
                out.push(Parsed::Warning(format!("tool call {index}: {alias}")));
            }
            let arguments = self.arguments.take().unwrap_or_default();
            out.push(Parsed::CallEnd { index, arguments, raw });
        } else {
            // A call without a fault was started: its object closed, so its name was
            // read, and a name is known or a fault. The stand-in only spares a panic.
            let reason = self.fault.take().unwrap_or_else(|| InvalidCall::Malformed(NO_TOOL.to_owned()));
            out.push(Parsed::Invalid { index, raw, reason });
        }
    }
}

/// A value's kind with its article, for a message.
fn described_value(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A byte of the text, for a message: the character if it is printable ASCII.
pub(in crate::text_tools) fn described(byte: Option<u8>) -> String {
    match byte {
        Some(byte) if byte.is_ascii_graphic() => format!("'{}'", char::from(byte)),
        Some(b' ') => "a space".to_owned(),
        Some(b'\n' | b'\r') => "a line break".to_owned(),
        Some(byte) if byte.is_ascii_control() => format!("the control character U+{byte:04X}"),
        Some(_) => "a non-ASCII character".to_owned(),
        None => "the end of the text".to_owned(),
    }
}
