//! The `json` protocol: each call is one JSON object in a Markdown code block whose info
//! string is `tool_call`.
//!
//! ````text
//! ```tool_call
//! {"tool": "get_weather", "arguments": {"city": "Paris", "days": 3}}
//! ```
//! ````
//!
//! # The format
//!
//! - A call opens with the exact text ` ```tool_call `, wherever it appears (it need not
//!   begin a line), unless it is a *mention*: inside inline code, inside another fenced
//!   code block, or inside `<think>` … `</think>` (the rules are in the
//!   [parent module's doc](super)). Any other text is prose, code blocks of other
//!   languages included.
//! - After the opener: optional JSON whitespace (space, tab, line feed, carriage return),
//!   one JSON object, optional whitespace, and the closing ` ``` ` (which need not be on a
//!   line of its own). What follows the closing fence is prose again.
//! - The object is strict JSON (RFC 8259) with the keys `"tool"` (the tool's name, a
//!   string) and `"arguments"` (an object), in either order. Without `"arguments"` the
//!   arguments are `{}`. Arrays and objects nest at most 64 levels deep in the arguments
//!   (the arguments object is level 1), the bound of every tool input omni builds
//!   ([`MAX_DEPTH`](crate::data::depth::MAX_DEPTH)). In the arguments, a key repeated in
//!   one object keeps its last value (as serde_json reads it).
//! - **Aliases**, read where unambiguous, each with a [`Parsed::Warning`] before the
//!   call's end (when the call is valid): `"name"` for `"tool"` (one of the two: both is
//!   malformed), and `"arguments"` given as a JSON string that holds a JSON object (as
//!   OpenAI writes it), read as that object and streamed as one delta, its compact JSON,
//!   once decoded and the name known.
//! - Backticks, braces and ` ``` ` inside JSON strings are text: the tokenizer follows
//!   strings and escapes, so only a fence outside them ends the call.
//!
//! # Invalid calls
//!
//! A call is [`InvalidCall::Malformed`] when its object is not valid JSON, another key
//! than those two (or the alias `"name"`) appears, a key appears twice, both `"tool"`
//! and `"name"` appear, the name is not a string or is missing, `"arguments"` is neither
//! an object nor a string holding one (a string that is not JSON, or holds another kind
//! of value, or an object nested too deep, says so), a key, the name or the arguments are not valid text
//! (a lone surrogate escape) or a number does not fit a float, the nesting is too deep,
//! or anything but whitespace comes between the object and the closing fence (a second
//! object, a word). A call to a tool not among the parser's tools is
//! [`InvalidCall::UnknownTool`]. When a call has several faults, the first one met in
//! reading order is the reason.
//!
//! An invalid call's span runs from the opener through its closing fence. While the text
//! is JSON, strings are followed, so a fence inside one does not end the call: the span
//! ends at the fence after the object (a well-formed object with a wrong key ends where
//! it should), or, when something else follows the object, at the first ` ``` ` from
//! there. Once the text stops being JSON (nesting too deep counts), it ends at the first
//! ` ``` ` from the byte that broke it, strings or not. When the reply ends before the
//! closing fence, the call is [`InvalidCall::Unclosed`], whatever else is wrong with it.
//!
//! # Streaming
//!
//! - Prose comes out as soon as it cannot begin a delimiter: held back are at most a
//!   trailing run of backticks and a proper prefix of `tool_call` after it, a proper
//!   prefix of `<think>` or `</think>`, a last line of a fenced block that may close it,
//!   or an opener inside a code span not closed yet, until the span closes or the line
//!   ends (see the parent module's doc). A call's bytes are held until its span comes out
//!   whole.
//! - [`Parsed::CallStart`] comes as soon as the name's string closes, if the tool is known
//!   and nothing was wrong before it. Then the arguments' text comes in
//!   [`Parsed::CallDelta`] pieces as it is read (at the end of each piece fed, or at once
//!   when `"arguments"` came before `"tool"`); the pieces stop where a fault is found.
//!   Without `"arguments"`, one delta `{}` comes before the end.
//! - At the closing fence, [`Parsed::CallEnd`] with the arguments and the raw span, or
//!   [`Parsed::Invalid`] (with the same index, after a `CallStart` when the name was read
//!   first). Calls are numbered in the reply, valid or not, from 0.
//!
//! A call is read by `call`, its object by an incremental tokenizer (`tokenizer`) that
//! keeps its state across pieces: each byte is read once, however the reply is split.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use self::call::Call;
use super::mention::{Prose, Scan};
use super::{CallParser, InvalidCall, Parsed, TextProtocol};
use crate::data::message::ToolSpec;

pub(super) mod call;
pub(super) mod tokenizer;

#[cfg(test)]
pub(super) mod tests;

/// The text that opens a call: a code fence with the info string `tool_call`.
const OPENER: &str = "```tool_call";

/// The fence that closes a call.
const FENCE: &str = "```";

/// Why a call whose object has no `"tool"` key is malformed.
const NO_TOOL: &str = "the object has no \"tool\" key";

/// The `json` protocol (see the module's doc).
#[derive(Debug, Clone, Copy, Default)]
pub struct Json;

impl TextProtocol for Json {
    fn name(&self) -> &str {
        "json"
    }

    fn rules(&self) -> String {
        format!(
            "To call a tool, write a fenced code block whose info string is `tool_call`, holding one JSON \
             object with two keys: \"tool\", the tool's name, and \"arguments\", an object with the tool's \
             parameters. For example, a call to a tool named get_weather (use the tools you are given):\n\
             \n\
             {OPENER}\n\
             {{\"tool\": \"get_weather\", \"arguments\": {{\"city\": \"Paris\", \"days\": 3}}}}\n\
             {FENCE}\n\
             \n\
             - Write one call per block; to call several tools, write several blocks one after the other.\n\
             - The block holds strict JSON and nothing else: strings in double quotes, with quotes, \
             backslashes and control characters escaped as JSON requires; no comments, no trailing commas.\n\
             - Use a tool_call block only to call a tool; other code blocks are shown as they are.\n\
             - After your calls, stop and wait: the results come back in the next user message.\n"
        )
    }

    fn format_call(&self, name: &str, arguments: &Map<String, Value>) -> String {
        // Written by hand to put "tool" first (a Map would sort "arguments" before it):
        // the name is then known before the arguments stream, and the model, copying the
        // examples, writes its calls that way too.
        let name = Value::from(name);
        let arguments = Value::Object(arguments.clone());
        format!("{OPENER}\n{{\"tool\":{name},\"arguments\":{arguments}}}\n{FENCE}")
    }

    fn parser(&self, tools: &[ToolSpec]) -> Box<dyn CallParser> {
        Box::new(JsonParser {
            tools: tools.iter().map(|tool| tool.name.clone()).collect(),
            prose: Prose::new(OPENER, true),
            call: None,
            calls: 0,
        })
    }
}

/// The parser of one reply.
#[derive(Debug)]
struct JsonParser {
    /// The names of the tools the model was given.
    tools: BTreeSet<String>,
    /// The prose between calls (mentions of the opener told apart from calls).
    prose: Prose,
    /// The call being read.
    call: Option<Call>,
    /// Calls met so far, valid or not: the next call's index.
    calls: usize,
}

impl CallParser for JsonParser {
    fn feed(&mut self, text: &str, out: &mut Vec<Parsed>) {
        let mut rest = text;
        while !rest.is_empty() {
            rest = match &mut self.call {
                None => self.prose(rest, out),
                Some(call) => match call.feed(rest, &self.tools, out) {
                    Some(used) => {
                        self.call = None;
                        &rest[used..]
                    }
                    None => "",
                },
            };
        }
    }

    fn finish(&mut self, out: &mut Vec<Parsed>) {
        self.prose.finish(out);
        if let Some(call) = self.call.take() {
            out.push(Parsed::Invalid { index: call.index, raw: call.raw, reason: InvalidCall::Unclosed });
        }
    }

    fn held(&self) -> usize {
        self.prose.held() + self.call.as_ref().map_or(0, |call| call.raw.len())
    }
}

impl JsonParser {
    /// Reads prose up to the next opener that opens a call (not a mention); returns the
    /// text after the opener, or nothing when the prose runs to the end.
    fn prose<'a>(&mut self, rest: &'a str, out: &mut Vec<Parsed>) -> &'a str {
        match self.prose.feed(rest, out) {
            Scan::Done => "",
            Scan::Call { held, rest } => {
                self.call = Some(Call::new(self.calls));
                self.calls += 1;
                if !held.is_empty() {
                    // The call's beginning, held while it could have been a mention.
                    self.feed(&held, out);
                }
                rest
            }
        }
    }
}
