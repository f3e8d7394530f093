//! Tools for models without native tool calling: *text protocols*. The system prompt
//! teaches the model a text format for calling tools; past calls and results are written
//! back into the conversation as text; and a parser pulls the calls out of the model's
//! text as it streams, so the rest of omni (the tool loop, approvals, validation,
//! structured output) sees the same `tool_use` events as with native tools.
//!
//! - [`TextProtocol`]: one format, as a trait so that an application can add its own.
//!   Built in: [`xml::Xml`], [`json::Json`] and [`hermes::Hermes`] (the `<tool_call>` format
//!   Hermes and Qwen models are trained on).
//! - [`CallParser`]: the incremental parser of one reply's text, with the properties every
//!   protocol's parser must have (each is tested per protocol, with the checks written
//!   once in [`check`]):
//!   - **chunking invariance**: however the text is split (one byte at a time, inside a
//!     multi-byte character), the events, adjacent text and argument pieces merged, are
//!     those of the whole text fed at once;
//!   - **lossless**: the text events plus the raw span of every call (complete or not)
//!     are the input, byte for byte;
//!   - **bounded hold-back**: after each `feed`, the parser holds back at most the longest
//!     suffix of the text that could still begin a delimiter (or, inside a call, the call
//!     so far): a `<` or a brace in prose is let go as soon as it cannot start a call.
//!     For the built-in protocols the suffix is a proper prefix of the opener, of
//!     `<think>` or of `</think>` (at most 11 bytes), or a trailing run of backticks (for
//!     `json`, followed by a proper prefix of `tool_call`), or, in a `json` fenced block,
//!     a last line made only of backticks and blanks that may be its closing fence; and
//!     an opener whose mention is undecided (below) is held with what follows it, like a
//!     call's bytes, until it is decided, at the latest at the end of its line;
//!   - prose that mentions a tool or a tag outside the protocol's wrapper stays text;
//!     calls are numbered in order; an unknown tool, a malformed call and a call still open
//!     when the text ends are [`Parsed::Invalid`] events carrying the raw span.
//!
//! # What counts as a mention
//!
//! The built-in parsers read the prose between calls as Markdown enough to tell a
//! *mention* of the opener (text, given out as [`Parsed::Text`]) from a call (the same
//! rules for all three, `hermes` keeping its own besides: an opener not followed by `{`
//! is text; a reference reading of them, written apart, is [`check::next_call`]):
//!
//! - **Inline code.** On one line, a run of N backticks opens a code span that the next
//!   run of exactly N backticks on the same line closes (runs of other lengths are part
//!   of it). An opener inside a span that closes is a mention. A run with no closing run
//!   before the end of its line is literal text (CommonMark), and an opener after it on
//!   that line opens a call. Two simplifications of CommonMark: a span does not cross a
//!   line break, and once a run is left open no later run on the line opens a span. So
//!   an opener after an open run is undecided, and held, until a run of exactly N (a
//!   mention) or the end of the line (a call) comes.
//! - **Thinking written in the text.** From `<think>` (outside code) to the next
//!   `</think>`, everything is text, openers and backticks included; a `<think>` never
//!   closed makes the rest of the reply text. The block stays text: it is not made a
//!   thinking block. A `</think>` without its `<think>` (a template that opened it in the
//!   prompt) is not recognised.
//! - **Other code blocks** (`json` only, whose opener is itself a fence): a line that
//!   begins (no indentation) with a run of three backticks or more not followed by
//!   `tool_call`, and has no other backtick, opens a fenced block; the block ends at a
//!   line of as many backticks or more and blanks only. Openers inside it are mentions;
//!   a block never closed makes the rest of the reply text. Tilde fences are not
//!   recognised. A run of three backticks or more followed by `tool_call` outside code
//!   is the opener wherever it is (its last three backticks); inside a span of as many
//!   backticks it closes the span instead.
//!
//! Everything here is pure: strings in, events out.

use std::fmt;

use serde_json::{Map, Value};

use crate::data::message::{ToolResult, ToolSpec};

pub mod check;
pub(crate) mod correct;
pub(crate) mod hermes;
pub(crate) mod json;
pub(crate) mod mention;
pub(crate) mod prompt;
pub(crate) mod render;
pub(crate) mod stream;
pub(crate) mod xml;

pub use hermes::Hermes;
pub use json::Json;
pub use xml::Xml;

/// A text format for tool calls (see the module's doc).
pub trait TextProtocol: fmt::Debug + Send + Sync {
    /// Its name (`"xml"`, `"json"`, `"hermes"`), for prompts and messages.
    fn name(&self) -> &str;

    /// The rules the system prompt gives the model: how to write a call, how values are
    /// escaped, that results come back in a user message.
    fn rules(&self) -> String;

    /// One call as the model must write it, raw span and all: used for the examples of the
    /// tool documentation and for the assistant's past calls in the history. Whatever the
    /// arguments, the protocol's parser reads this text back as one call to `name` with
    /// exactly `arguments` (the round trip is tested with hostile values).
    fn format_call(&self, name: &str, arguments: &Map<String, Value>) -> String;

    /// One tool result as the user message that answers the calls writes it. By default
    /// `format_result`'s `<tool_result>` element; a protocol whose models were
    /// trained on another layout (`hermes`: `<tool_response>`) writes its own.
    fn format_result(&self, result: &ToolResult) -> String {
        render::format_result(result)
    }

    /// A parser for one reply, which knows the tools the model was given: a call to any
    /// other is [`InvalidCall::UnknownTool`], and a protocol whose values are text reads
    /// each parameter as its schema's type says.
    fn parser(&self, tools: &[ToolSpec]) -> Box<dyn CallParser>;
}

/// The incremental parser of one reply's text (see the module's doc for its properties).
pub trait CallParser: Send {
    /// Reads the next piece of the reply; appends to `out` what can be said now.
    fn feed(&mut self, text: &str, out: &mut Vec<Parsed>);

    /// The reply ended: everything held back comes out, as text or as an
    /// [`InvalidCall::Unclosed`] call.
    fn finish(&mut self, out: &mut Vec<Parsed>);

    /// Bytes held back now (read, not yet given out as text or as a call's raw span).
    fn held(&self) -> usize;
}

/// What a parser reads out of a reply.
#[derive(Debug, Clone, PartialEq)]
pub enum Parsed {
    /// Text for the reader (outside any call).
    Text(String),
    /// A call began and its tool's name is known. `index` counts the reply's calls
    /// (valid or not) from 0.
    CallStart {
        /// Which call of the reply.
        index: usize,
        /// The tool's name.
        name: String,
    },
    /// A piece of the call's arguments as JSON text, as soon as it is known: the pieces
    /// of one call, joined, are the arguments object (for the `ToolUseDelta` events).
    CallDelta {
        /// Which call.
        index: usize,
        /// The piece.
        json: String,
    },
    /// The call is complete.
    CallEnd {
        /// Which call.
        index: usize,
        /// Its arguments.
        arguments: Map<String, Value>,
        /// The text it was read from, delimiters included.
        raw: String,
    },
    /// A span that began as a call but is not a valid one. A `CallStart` for the same
    /// index may have come before (the name was read), or not.
    Invalid {
        /// Which call.
        index: usize,
        /// The text of the span, delimiters included.
        raw: String,
        /// What is wrong.
        reason: InvalidCall,
    },
    /// Something the application should hear about a call that was read: an alias the
    /// protocol accepted in place of its own key (`json`: `"name"` for `"tool"`,
    /// `"arguments"` as a string holding the object). It comes before the call's
    /// [`Parsed::CallEnd`]; the stream makes it a warning on the response (code
    /// `tool_call_alias`). It is not text: it adds nothing to the reply's text.
    Warning(String),
}

/// Why a call's span is not a valid call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InvalidCall {
    /// A tool the model was not given.
    UnknownTool(String),
    /// The span breaks the protocol's grammar (what was expected, where).
    Malformed(String),
    /// The reply ended inside the call.
    Unclosed,
}

impl fmt::Display for InvalidCall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnknownTool(name) => write!(f, "no tool named {name:?}"),
            Self::Malformed(why) => write!(f, "malformed tool call: {why}"),
            Self::Unclosed => f.write_str("the reply ended inside a tool call"),
        }
    }
}

/// Merges adjacent [`Parsed::Text`] events, and adjacent [`Parsed::CallDelta`]s of one
/// call: the form in which two parses of the same text, split differently, are equal.
pub fn merged(events: impl IntoIterator<Item = Parsed>) -> Vec<Parsed> {
    let mut out: Vec<Parsed> = Vec::new();
    for event in events {
        match (out.last_mut(), event) {
            (_, Parsed::Text(t)) if t.is_empty() => {}
            (Some(Parsed::Text(last)), Parsed::Text(t)) => last.push_str(&t),
            (Some(Parsed::CallDelta { index: a, json: last }), Parsed::CallDelta { index: b, json }) if *a == b => {
                last.push_str(&json);
            }
            (_, Parsed::CallDelta { json, .. }) if json.is_empty() => {}
            (_, event) => out.push(event),
        }
    }
    out
}

/// The text a parse gave out, rebuilt: text events and the raw spans of calls, in order.
/// Equal to the input for every parser (the lossless property).
pub fn rebuilt(events: &[Parsed]) -> String {
    let mut text = String::new();
    for event in events {
        match event {
            Parsed::Text(t) => text.push_str(t),
            Parsed::CallEnd { raw, .. } | Parsed::Invalid { raw, .. } => text.push_str(raw),
            Parsed::CallStart { .. } | Parsed::CallDelta { .. } | Parsed::Warning(_) => {}
        }
    }
    text
}

/// The longest suffix of `text` that is a proper prefix of `delimiter`, in bytes: what a
/// parser may hold back while it cannot yet tell whether a delimiter begins.
pub fn partial_suffix(text: &str, delimiter: &str) -> usize {
    let max = delimiter.len().saturating_sub(1).min(text.len());
    (1..=max)
        .rev()
        .find(|&n| text.is_char_boundary(text.len() - n) && delimiter.starts_with(&text[text.len() - n..]))
        .unwrap_or(0)
}

/// A JSON Schema for a tool taking `arguments`: each property typed as its value is (for
/// round-trip tests of protocols that read values by their schema's type).
pub fn schema_for(arguments: &Map<String, Value>) -> Value {
    let properties: Map<String, Value> = arguments
        .iter()
        .map(|(key, value)| {
            let kind = match value {
                Value::Null => "null",
                Value::Bool(_) => "boolean",
                Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
                Value::Number(_) => "number",
                Value::String(_) => "string",
                Value::Array(_) => "array",
                Value::Object(_) => "object",
            };
            (key.clone(), serde_json::json!({ "type": kind }))
        })
        .collect();
    serde_json::json!({ "type": "object", "properties": properties })
}

// The choice of a protocol is data (options, catalogue models and providers hold it, by
// name); what a text protocol does is added here.
pub use crate::data::tool_protocol::{CustomProtocol, ToolProtocol};

impl ToolProtocol {
    /// An application's own protocol. Two are the same ([`PartialEq`]) only when they are
    /// the same object.
    pub fn custom(protocol: std::sync::Arc<dyn TextProtocol>) -> Self {
        let identity = std::sync::Arc::as_ptr(&protocol).cast::<()>() as usize;
        Self::Custom(CustomProtocol::new(protocol.name(), identity, std::sync::Arc::new(protocol.clone())))
    }

    /// The text protocol, or `None` for native tool calls.
    pub fn text(&self) -> Option<std::sync::Arc<dyn TextProtocol>> {
        match self {
            Self::Native => None,
            Self::Xml => Some(std::sync::Arc::new(xml::Xml)),
            Self::Json => Some(std::sync::Arc::new(json::Json)),
            Self::Hermes => Some(std::sync::Arc::new(hermes::Hermes)),
            Self::Custom(custom) => Some(custom.protocol()),
        }
    }
}

impl CustomProtocol {
    /// The protocol.
    pub fn protocol(&self) -> std::sync::Arc<dyn TextProtocol> {
        // Only `ToolProtocol::custom` makes one, from an `Arc<dyn TextProtocol>`.
        match self.object().downcast_ref::<std::sync::Arc<dyn TextProtocol>>() {
            Some(protocol) => protocol.clone(),
            None => unreachable!("a custom tool protocol holds a text protocol"),
        }
    }
}

#[cfg(test)]
mod tests;
