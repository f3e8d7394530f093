//! One call of a reply, from its opener to its closing fence: the members of its object
//! as the tokenizer reports them, the events given out, the fault that makes it invalid.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use super::tokenizer::{Event, Fault, Kind, Tokenizer};
use super::{FENCE, NO_TOOL, OPENER};
use crate::data::depth::MAX_DEPTH;
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
    seen_tool: bool,
    seen_arguments: bool,
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
            seen_tool: false,
            seen_arguments: false,
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
                    (Member::Tool, _) => self.fail(format!("\"tool\" is {}, not a string", kind.described()), out),
                    (Member::Arguments, _) => {
                        self.fail(format!("\"arguments\" is {}, not an object", kind.described()), out);
                    }
                }
            }
            Event::ValueEnd => match (self.member, self.kind) {
                (Member::Tool, Some(Kind::String)) => self.on_name(tools, out),
                (Member::Arguments, Some(Kind::Object)) => self.on_arguments(out),
                _ => {}
            },
            Event::ObjectEnd => {
                if !self.seen_tool {
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
        let (member, seen) = match serde_json::from_str::<String>(&self.raw[self.started_at..]) {
            Ok(key) if key == "tool" => (Member::Tool, &mut self.seen_tool),
            Ok(key) if key == "arguments" => (Member::Arguments, &mut self.seen_arguments),
            Ok(other) => {
                let why = format!("unexpected key {other:?}: a call has only \"tool\" and \"arguments\"");
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
        let Some(from) = self.arguments_from.filter(|_| self.started && self.fault.is_none()) else {
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
            if self.arguments_from.is_none() {
                out.push(Parsed::CallDelta { index, json: "{}".to_owned() });
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
