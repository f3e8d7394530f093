//! The incremental parser of the `xml` protocol (the format is in the parent module's doc).
//!
//! Outside a call, prose is searched for `<tool_call>`; inside one, the call's bytes are
//! appended to its raw span and read from a cursor: a byte is read again only while a tag
//! or delimiter it may begin is cut by the end of a piece (a tag is at most 260 bytes), so
//! reading is linear however the text is split.

use std::collections::BTreeMap;
use std::mem;

use memchr::{memchr, memmem};
use serde_json::{Map, Value};

use super::super::mention::{Prose, Scan};
use super::super::{partial_suffix, CallParser, InvalidCall, Parsed};
use crate::data::message::ToolSpec;

/// Opens a call.
const OPEN: &str = "<tool_call>";
/// Closes a call.
const CLOSE: &str = "</tool_call>";
/// Opens a CDATA section in a value.
const CDATA_OPEN: &str = "<![CDATA[";
/// Closes a CDATA section.
const CDATA_CLOSE: &str = "]]>";
/// The longest tag name, in bytes: beyond it a tag is malformed rather than awaited.
const MAX_NAME: usize = 256;

/// How a parameter's value text is read (by its schema's `type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ValueKind {
    /// The text itself, as a JSON string.
    Text,
    /// The text, trimmed, parsed as JSON.
    Json,
}

/// The known tools: each tool's parameters that are not read as text.
type Tools = BTreeMap<String, BTreeMap<String, ValueKind>>;

/// The parser of one reply.
#[derive(Debug)]
pub(super) struct XmlParser {
    tools: Tools,
    /// The prose between calls (mentions of `<tool_call>` told apart from calls).
    prose: Prose,
    /// The call being read.
    call: Option<OpenCall>,
    /// The index the next call gets.
    next_index: usize,
}

impl XmlParser {
    pub(super) fn new(tools: &[ToolSpec]) -> Self {
        let tools = tools.iter().map(|tool| (tool.name.clone(), typed_parameters(&tool.input_schema))).collect();
        Self { tools, prose: Prose::new(OPEN, false), call: None, next_index: 0 }
    }

    /// Reads prose up to the next `<tool_call>` that opens a call (not a mention) or to
    /// the end of `text`; returns what follows the `<tool_call>`.
    fn feed_prose<'t>(&mut self, text: &'t str, out: &mut Vec<Parsed>) -> &'t str {
        match self.prose.feed(text, out) {
            Scan::Done => "",
            Scan::Call { held, rest } => {
                self.call = Some(OpenCall::new(self.next_index));
                self.next_index += 1;
                if !held.is_empty() {
                    // The call's beginning, held while it could have been a mention.
                    self.feed(&held, out);
                }
                rest
            }
        }
    }

    /// Reads `text` into the open call until it ends; returns what follows its end.
    fn feed_call<'t>(&mut self, mut text: &'t str, out: &mut Vec<Parsed>) -> &'t str {
        let Self { tools, call: slot, .. } = self;
        let Some(call) = slot else { return text };
        // A call ends only at the `>` of `</tool_call>`: appending up to each `>` at a time,
        // the call ends at the end of what was appended, and what follows its end is never
        // copied into (and out of) its span.
        while !text.is_empty() {
            let piece = memchr(b'>', text.as_bytes()).map_or(text.len(), |at| at + 1);
            call.raw.push_str(&text[..piece]);
            text = &text[piece..];
            if let Some(tail) = call.advance(tools, out) {
                *slot = None;
                if !tail.is_empty() {
                    // Not reached (see above); if it were, the bytes after the end are read
                    // again as what they are rather than lost.
                    let rest = tail + text;
                    self.feed(&rest, out);
                    return "";
                }
                return text;
            }
        }
        text
    }
}

impl CallParser for XmlParser {
    fn feed(&mut self, text: &str, out: &mut Vec<Parsed>) {
        let mut rest = text;
        while !rest.is_empty() {
            rest = if self.call.is_some() { self.feed_call(rest, out) } else { self.feed_prose(rest, out) };
        }
    }

    fn finish(&mut self, out: &mut Vec<Parsed>) {
        if let Some(call) = self.call.take() {
            out.push(Parsed::Invalid { index: call.index, raw: call.raw, reason: InvalidCall::Unclosed });
        }
        self.prose.finish(out);
    }

    fn held(&self) -> usize {
        self.prose.held() + self.call.as_ref().map_or(0, |call| call.raw.len())
    }
}

/// The parameters of a tool whose schema types them as something other than a string.
fn typed_parameters(schema: &Value) -> BTreeMap<String, ValueKind> {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else { return BTreeMap::new() };
    properties
        .iter()
        .filter(|(_, property)| match property.get("type") {
            Some(Value::String(kind)) => kind != "string",
            Some(Value::Array(kinds)) => !kinds.is_empty() && !kinds.iter().any(|kind| kind == "string"),
            _ => false,
        })
        .map(|(name, _)| (name.clone(), ValueKind::Json))
        .collect()
}

/// A call being read.
#[derive(Debug)]
struct OpenCall {
    index: usize,
    /// Its text so far, from `<tool_call>`.
    raw: String,
    /// How far `raw` has been read.
    pos: usize,
    state: State,
    /// The tool's name, once read.
    tool: String,
    /// The parameters read so far.
    arguments: Map<String, Value>,
}

/// Where a call's reading is.
#[derive(Debug)]
enum State {
    /// Between tags.
    Between(Due),
    /// Inside a parameter's value.
    Value(OpenValue),
    /// Not a valid call (for this reason): looking for `</tool_call>`.
    Skipping(InvalidCall),
}

/// What is due between tags.
#[derive(Debug, Clone, Copy)]
enum Due {
    /// After `<tool_call>`: the tool's tag.
    Tool,
    /// Inside the tool's tag: a parameter or the tool's closing tag.
    Parameter,
    /// After the tool's closing tag: `</tool_call>`.
    Close,
}

/// A parameter's value being read.
#[derive(Debug)]
struct OpenValue {
    name: String,
    kind: ValueKind,
    in_cdata: bool,
    /// Its text so far (escapes resolved).
    text: String,
}

/// What reading a state did.
enum Flow {
    /// It moved on to this state: read on.
    Next(State),
    /// It needs more text, in this state.
    Wait(State),
    /// The call's span is `raw[..pos]`: a valid call, or not for this reason.
    End(Option<InvalidCall>),
}

/// A tag.
enum Tag {
    Open(String),
    Close(String),
}

impl OpenCall {
    fn new(index: usize) -> Self {
        Self {
            index,
            raw: OPEN.to_owned(),
            pos: OPEN.len(),
            state: State::Between(Due::Tool),
            tool: String::new(),
            arguments: Map::new(),
        }
    }

    /// Reads `raw` from `pos` as far as it can be read now. Once the call has ended (its
    /// last event out), returns the bytes after its end.
    fn advance(&mut self, tools: &Tools, out: &mut Vec<Parsed>) -> Option<String> {
        loop {
            // Each state's reader takes it by value and gives back the next (the placeholder
            // is never read).
            let flow = match mem::replace(&mut self.state, State::Between(Due::Close)) {
                State::Between(due) => self.tag(due, tools, out),
                State::Value(value) => self.value(value, out),
                State::Skipping(reason) => self.skip(reason),
            };
            match flow {
                Flow::Next(state) => self.state = state,
                Flow::Wait(state) => {
                    self.state = state;
                    return None;
                }
                Flow::End(invalid) => {
                    let tail = self.raw.split_off(self.pos);
                    let (index, raw) = (self.index, mem::take(&mut self.raw));
                    out.push(match invalid {
                        None => Parsed::CallEnd { index, arguments: mem::take(&mut self.arguments), raw },
                        Some(reason) => Parsed::Invalid { index, raw, reason },
                    });
                    return Some(tail);
                }
            }
        }
    }

    /// Reads the next tag between tags.
    fn tag(&mut self, due: Due, tools: &Tools, out: &mut Vec<Parsed>) -> Flow {
        let bytes = self.raw.as_bytes();
        self.pos += bytes[self.pos..].iter().take_while(|byte| byte.is_ascii_whitespace()).count();
        let Some(&first) = bytes.get(self.pos) else { return Flow::Wait(State::Between(due)) };
        if first != b'<' {
            return malformed("text between tags".to_owned());
        }
        let (tag, length) = match read_tag(&self.raw[self.pos..]) {
            Ok(Some(read)) => read,
            Ok(None) => return Flow::Wait(State::Between(due)),
            Err(why) => return malformed(why),
        };
        let tool = self.tool.as_str();
        let next = match (due, tag) {
            (Due::Tool, Tag::Open(name)) => match tools.get(&name) {
                Some(_) => {
                    out.push(Parsed::CallStart { index: self.index, name: name.clone() });
                    self.delta(out, "{".to_owned());
                    self.tool = name;
                    State::Between(Due::Parameter)
                }
                None if name == "tool_call" => return malformed("`<tool_call>` inside a call".to_owned()),
                None => State::Skipping(InvalidCall::UnknownTool(name)),
            },
            (Due::Tool, Tag::Close(name)) if name == "tool_call" => return malformed("no tool in the call".to_owned()),
            (Due::Tool, Tag::Close(name)) => return malformed(format!("`</{name}>` where the tool's tag was due")),
            (Due::Parameter, Tag::Open(name)) => {
                if self.arguments.contains_key(&name) {
                    return malformed(format!("a second `<{name}>`"));
                }
                let kind = tools.get(tool).and_then(|typed| typed.get(&name)).copied().unwrap_or(ValueKind::Text);
                let comma = if self.arguments.is_empty() { "" } else { "," };
                let quote = if kind == ValueKind::Text { "\"" } else { "" };
                self.delta(out, format!("{comma}{}:{quote}", json_string(&name)));
                State::Value(OpenValue { name, kind, in_cdata: false, text: String::new() })
            }
            (Due::Parameter, Tag::Close(name)) if name == tool => {
                self.delta(out, "}".to_owned());
                State::Between(Due::Close)
            }
            (Due::Parameter, Tag::Close(name)) => return malformed(format!("`</{name}>` inside `<{tool}>`")),
            (Due::Close, Tag::Close(name)) if name == "tool_call" => {
                self.pos += length;
                return Flow::End(None);
            }
            (Due::Close, Tag::Open(name)) => {
                return malformed(format!("`<{name}>` after `</{tool}>`: one tool per call"))
            }
            (Due::Close, Tag::Close(name)) => return malformed(format!("`</{name}>` where `</tool_call>` was due")),
        };
        self.pos += length;
        Flow::Next(next)
    }

    /// Reads a value's text: plain text up to a `<`, a CDATA section's content up to
    /// `]]>`; given out (for a string) as it is known.
    fn value(&mut self, mut value: OpenValue, out: &mut Vec<Parsed>) -> Flow {
        loop {
            let rest = &self.raw[self.pos..];
            if value.in_cdata {
                let Some(at) = memmem::find(rest.as_bytes(), CDATA_CLOSE.as_bytes()) else {
                    // All but what may begin `]]>` is content.
                    let known = rest.len() - partial_suffix(rest, CDATA_CLOSE);
                    self.content(&mut value, known, out);
                    return Flow::Wait(State::Value(value));
                };
                self.content(&mut value, at, out);
                self.pos += CDATA_CLOSE.len();
                value.in_cdata = false;
                continue;
            }
            let Some(at) = memchr(b'<', rest.as_bytes()) else {
                self.content(&mut value, rest.len(), out);
                return Flow::Wait(State::Value(value));
            };
            self.content(&mut value, at, out);
            let rest = &self.raw[self.pos..];
            let close = format!("</{}>", value.name);
            if rest.starts_with(CDATA_OPEN) {
                self.pos += CDATA_OPEN.len();
                value.in_cdata = true;
            } else if rest.starts_with(&close) {
                self.pos += close.len();
                return self.close_value(value, out);
            } else if CDATA_OPEN.starts_with(rest) || close.starts_with(rest) {
                return Flow::Wait(State::Value(value));
            } else {
                let name = &value.name;
                return malformed(format!("a `<` in the value of `{name}` begins neither `<![CDATA[` nor `</{name}>`"));
            }
        }
    }

    /// The next `length` bytes are content of `value`.
    fn content(&mut self, value: &mut OpenValue, length: usize, out: &mut Vec<Parsed>) {
        if length == 0 {
            return;
        }
        let piece = &self.raw[self.pos..self.pos + length];
        value.text.push_str(piece);
        if value.kind == ValueKind::Text {
            let escaped = json_string_content(piece);
            self.delta(out, escaped);
        }
        self.pos += length;
    }

    /// The value's closing tag was read.
    fn close_value(&mut self, value: OpenValue, out: &mut Vec<Parsed>) -> Flow {
        let OpenValue { name, kind, text, .. } = value;
        let parsed = match kind {
            ValueKind::Text => {
                self.delta(out, "\"".to_owned());
                Value::String(text)
            }
            ValueKind::Json => match serde_json::from_str::<Value>(text.trim()) {
                Ok(parsed) => {
                    self.delta(out, parsed.to_string());
                    parsed
                }
                Err(e) => return malformed(format!("the value of `{name}` is not JSON: {e}")),
            },
        };
        self.arguments.insert(name, parsed);
        Flow::Next(State::Between(Due::Parameter))
    }

    /// Looks for the `</tool_call>` that ends an invalid call.
    fn skip(&mut self, reason: InvalidCall) -> Flow {
        let rest = &self.raw[self.pos..];
        let Some(at) = memmem::find(rest.as_bytes(), CLOSE.as_bytes()) else {
            self.pos = self.raw.len() - partial_suffix(rest, CLOSE);
            return Flow::Wait(State::Skipping(reason));
        };
        self.pos += at + CLOSE.len();
        Flow::End(Some(reason))
    }

    fn delta(&self, out: &mut Vec<Parsed>, json: String) {
        out.push(Parsed::CallDelta { index: self.index, json });
    }
}

/// The call broke the grammar where it is read now.
fn malformed(why: String) -> Flow {
    Flow::Next(State::Skipping(InvalidCall::Malformed(why)))
}

/// Reads the tag `text` begins with (its `<`): the tag and its length, `None` if `text`
/// ends before it does, or what is wrong with it.
fn read_tag(text: &str) -> Result<Option<(Tag, usize)>, String> {
    let bytes = text.as_bytes();
    let Some(&second) = bytes.get(1) else { return Ok(None) };
    let start = if second == b'/' { 2 } else { 1 };
    for (length, &byte) in bytes[start..].iter().enumerate() {
        if byte == b'>' {
            if length == 0 {
                return Err("an empty tag".to_owned());
            }
            let name = text[start..start + length].to_owned();
            let tag = if start == 2 { Tag::Close(name) } else { Tag::Open(name) };
            return Ok(Some((tag, start + length + 1)));
        }
        if length == MAX_NAME {
            return Err(format!("a tag name longer than {MAX_NAME} bytes"));
        }
        if byte.is_ascii_whitespace() || b"</!?=\"'&".contains(&byte) {
            return Err(format!("{:?} in a tag name", char::from(byte)));
        }
    }
    Ok(None)
}

/// `text` as a JSON string, quotes included.
fn json_string(text: &str) -> String {
    format!("\"{}\"", json_string_content(text))
}

/// `text` escaped as the content of a JSON string (as `serde_json` writes it).
fn json_string_content(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '"' => escaped.push_str("\\\""),
            '\\' => escaped.push_str("\\\\"),
            '\n' => escaped.push_str("\\n"),
            '\r' => escaped.push_str("\\r"),
            '\t' => escaped.push_str("\\t"),
            '\u{8}' => escaped.push_str("\\b"),
            '\u{c}' => escaped.push_str("\\f"),
            c if u32::from(c) < 0x20 => escaped.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => escaped.push(c),
        }
    }
    escaped
}
