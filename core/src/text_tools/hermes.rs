//! The `hermes` protocol: the format open-weight models (Hermes 2 Pro / Hermes 3, Qwen2.5,
//! Qwen3 and their fine-tunes) are trained on. Each call is one JSON object between
//! `<tool_call>` tags, and each result goes back between `<tool_response>` tags.
//!
//! ```text
//! <tool_call>
//! {"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}
//! </tool_call>
//! ```
//!
//! The layouts follow the chat templates the models ship, as copied in llama.cpp's
//! template collection (read in `ye-NX/llama.cpp`, a fork of `ggml-org/llama.cpp`):
//! `models/templates/Qwen-Qwen3-0.6B.jinja` (Qwen3; Qwen2.5's `tokenizer_config.json`
//! `chat_template` writes calls and responses the same way) and
//! `models/templates/NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja` (Hermes 3). Both
//! write an assistant's call as `<tool_call>\n{"name": "<name>", "arguments": <args |
//! tojson>}\n</tool_call>` (calls of one turn separated by a line break) and each tool
//! message as `<tool_response>\n<content>\n</tool_response>`, consecutive ones in one turn,
//! separated by a line break (Qwen makes that turn a user turn, as omni does for every
//! text protocol). The templates list the tools as `<tools>` with one JSON function
//! signature per line; omni documents the tools the same way for every protocol (see
//! [`super::prompt`]), so only the instruction text is taken over here (in [`Hermes::rules`]).
//!
//! # The format
//!
//! - A call opens with the exact text `<tool_call>` followed, after optional JSON
//!   whitespace, by `{`. An opener followed by anything else is prose (a mention of the
//!   tag); an opener at the very end of the reply (whitespace at most after it) is an
//!   [`InvalidCall::Unclosed`] call.
//! - An opener inside inline code (a backtick span on one line) or inside a
//!   `<think>` … `</think>` block written in the text is a mention too, text, whatever
//!   follows it: the rules are the `xml` protocol's, in the
//!   [parent module's doc](super#what-counts-as-a-mention) (like `xml`, and unlike
//!   `json`, the parser is not fence-aware: an opener in a fenced code block is a call).
//!   An opener after a backtick run left open on its line is a call, once the line ends.
//! - The object is strict JSON (RFC 8259) with the keys `"name"` (the tool's name, a
//!   string) and `"arguments"` (an object), in either order; without `"arguments"` the
//!   arguments are `{}`. As OpenAI-style models write it, `"arguments"` may also be a
//!   string holding a JSON object: the object it holds is read (silently: [`Parsed`] has
//!   no place for a warning). Nesting is bounded as in the `json` protocol
//!   ([`MAX_DEPTH`](crate::data::depth::MAX_DEPTH) levels in the arguments).
//! - After the object: optional whitespace and the closing `</tool_call>`. What follows
//!   the closing tag is prose again. Tags inside JSON strings are text.
//!
//! # Invalid calls
//!
//! [`InvalidCall::Malformed`], with what was expected and at which byte of the call, when
//! the object is not valid JSON, has another key than those two or one of them twice,
//! has no `"name"`, `"name"` is not a string, `"arguments"` is neither an object nor a
//! string holding one, or anything but whitespace comes between the object and
//! `</tool_call>` (a second object, a word). [`InvalidCall::UnknownTool`] for a tool the
//! parser was not given. The first fault in reading order is the reason.
//!
//! An invalid call's span runs from the opener through the first `</tool_call>` after the
//! object (strings followed), or, once the text stopped being JSON or something else
//! followed the object, through the first `</tool_call>` from the byte that broke it.
//! When the reply ends first, the call is [`InvalidCall::Unclosed`].
//!
//! # Streaming
//!
//! As in the `xml` protocol: prose comes out as soon as it cannot begin `<tool_call>`,
//! `<think>` or `</think>` (at most 10 bytes held back) or be a trailing run of
//! backticks; an opener inside a code span not closed yet is held, with what follows
//! it, until the span closes (a mention) or its line ends (a call). A call's bytes are
//! held until its span comes out whole, [`Parsed::CallStart`] comes when the name's
//! string closes (if the tool is known and nothing was wrong before it), then the
//! arguments' text in [`Parsed::CallDelta`] pieces as it is read (arguments given as a
//! string come as one delta, the object they hold, once the string closes). Calls are
//! numbered in the reply, valid or not, from 0; a mention of the tag that turns out to
//! be prose takes no number.
//!
//! The prose is read by the scanner shared with the `xml` and `json` protocols, the
//! object by the `json` protocol's incremental tokenizer, each byte once (the bytes after
//! an opener held in an open code span are read again, once, as the call's).

use std::collections::BTreeSet;

use serde::Serialize;
use serde_json::{Map, Value};

use self::parser::{Call, Outcome};
use super::mention::{Prose, Scan};
use super::{CallParser, InvalidCall, Parsed, TextProtocol};
use crate::data::message::{ToolResult, ToolResultContent, ToolSpec};

mod parser;

#[cfg(test)]
mod tests;

/// The tag that opens a call.
const OPENER: &str = "<tool_call>";

/// The tag that closes a call.
const CLOSER: &str = "</tool_call>";

/// The `hermes` protocol (see the module's doc).
#[derive(Debug, Clone, Copy, Default)]
pub struct Hermes;

impl TextProtocol for Hermes {
    fn name(&self) -> &str {
        "hermes"
    }

    fn rules(&self) -> String {
        // The first paragraph and the layout are the templates' own words, which these
        // models were trained to follow; the rest says what omni's parser holds to.
        format!(
            "You may call one or more functions to assist with the user query. Don't make assumptions \
             about what values to plug into functions.\n\
             \n\
             For each function call, return a json object with function name and arguments within \
             {OPENER}{CLOSER} XML tags:\n\
             {OPENER}\n\
             {{\"name\": <function-name>, \"arguments\": <args-json-object>}}\n\
             {CLOSER}\n\
             \n\
             For example, a call to a tool named get_weather (use the tools you are given):\n\
             {}\n\
             \n\
             - Write one JSON object per {OPENER} block; to call several functions, write several blocks \
             one after the other.\n\
             - The object is strict JSON: strings in double quotes, with quotes, backslashes and control \
             characters escaped as JSON requires; \"arguments\" is an object, not a string.\n\
             - After your calls, stop and wait: each result comes back in the next user message, \
             within <tool_response></tool_response> XML tags, in the order of your calls.\n",
            self.format_call("get_weather", &example_arguments())
        )
    }

    fn format_call(&self, name: &str, arguments: &Map<String, Value>) -> String {
        // The templates write `{"name": "<name>", "arguments": <tojson>}`: name first (so
        // it is known before the arguments stream), and Jinja's `tojson` separators `, `
        // and `: `, so a past call reads exactly as the model was trained to write it.
        let name = Value::from(name);
        format!("{OPENER}\n{{\"name\": {name}, \"arguments\": {}}}\n{CLOSER}", tojson(arguments))
    }

    fn format_result(&self, result: &ToolResult) -> String {
        // The templates' layout, with no attribute: the results come in the order of the
        // calls, which is how the model pairs them. A failure says so in words.
        let mut body = String::from(if result.is_error { "Error: " } else { "" });
        for (n, part) in result.content.iter().enumerate() {
            if n > 0 {
                body.push('\n');
            }
            match part {
                ToolResultContent::Text { text } => body.push_str(text),
                ToolResultContent::Attachment(attachment) => {
                    body.push_str(&format!("[attachment: {}]", attachment.media_type));
                }
            }
        }
        format!("<tool_response>\n{body}\n</tool_response>")
    }

    fn parser(&self, tools: &[ToolSpec]) -> Box<dyn CallParser> {
        Box::new(HermesParser {
            tools: tools.iter().map(|tool| tool.name.clone()).collect(),
            prose: Prose::new(OPENER, false),
            call: None,
            calls: 0,
        })
    }
}

fn example_arguments() -> Map<String, Value> {
    let mut arguments = Map::new();
    arguments.insert("city".to_owned(), Value::from("Paris"));
    arguments.insert("days".to_owned(), Value::from(3));
    arguments
}

/// `value` as Jinja's `tojson` writes it (Python's `json.dumps`): `, ` and `: ` between
/// items, non-ASCII text as it is.
fn tojson(value: &impl Serialize) -> String {
    let mut out = Vec::new();
    let mut serializer = serde_json::Serializer::with_formatter(&mut out, Spaced);
    // Serializing a JSON value into a Vec cannot fail.
    if value.serialize(&mut serializer).is_err() {
        return "{}".to_owned();
    }
    String::from_utf8(out).unwrap_or_default()
}

/// The formatter of [`tojson`].
struct Spaced;

impl serde_json::ser::Formatter for Spaced {
    fn begin_array_value<W: ?Sized + std::io::Write>(&mut self, writer: &mut W, first: bool) -> std::io::Result<()> {
        if first {
            Ok(())
        } else {
            writer.write_all(b", ")
        }
    }

    fn begin_object_key<W: ?Sized + std::io::Write>(&mut self, writer: &mut W, first: bool) -> std::io::Result<()> {
        if first {
            Ok(())
        } else {
            writer.write_all(b", ")
        }
    }

    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, writer: &mut W) -> std::io::Result<()> {
        writer.write_all(b": ")
    }
}

/// The parser of one reply.
#[derive(Debug)]
struct HermesParser {
    /// The names of the tools the model was given.
    tools: BTreeSet<String>,
    /// The prose between calls (mentions of `<tool_call>` told apart from calls).
    prose: Prose,
    /// The call being read.
    call: Option<Call>,
    /// Calls met so far, valid or not: the next call's index.
    calls: usize,
}

impl CallParser for HermesParser {
    fn feed(&mut self, text: &str, out: &mut Vec<Parsed>) {
        let mut rest = text;
        while !rest.is_empty() {
            rest = match &mut self.call {
                None => self.prose(rest, out),
                Some(call) => match call.feed(rest, &self.tools, out) {
                    Outcome::Reading => "",
                    Outcome::Closed(used) => {
                        self.call = None;
                        self.calls += 1;
                        &rest[used..]
                    }
                    Outcome::Prose(used) => {
                        // A mention of the tag: its text is prose, and it takes no number.
                        if let Some(call) = self.call.take() {
                            push_text(&call.raw, out);
                        }
                        &rest[used..]
                    }
                },
            };
        }
    }

    fn finish(&mut self, out: &mut Vec<Parsed>) {
        if let Some(call) = self.call.take() {
            self.calls += 1;
            out.push(Parsed::Invalid { index: call.index, raw: call.raw, reason: InvalidCall::Unclosed });
        }
        self.prose.finish(out);
    }

    fn held(&self) -> usize {
        self.prose.held() + self.call.as_ref().map_or(0, |call| call.raw.len())
    }
}

impl HermesParser {
    /// Reads prose up to the next opener that is not a mention (by the parent module's
    /// rules), which starts a call; returns the text after the opener, or nothing when
    /// the prose runs to the end of `rest`.
    fn prose<'a>(&mut self, rest: &'a str, out: &mut Vec<Parsed>) -> &'a str {
        match self.prose.feed(rest, out) {
            Scan::Done => "",
            Scan::Call { held, rest } => {
                self.call = Some(Call::new(self.calls));
                if !held.is_empty() {
                    // The call's beginning, held while it could have been a mention (an
                    // opener in a code span left open): read now as the call's (or, not
                    // followed by an object, as prose again).
                    self.feed(&held, out);
                }
                rest
            }
        }
    }
}

fn push_text(text: &str, out: &mut Vec<Parsed>) {
    if !text.is_empty() {
        out.push(Parsed::Text(text.to_owned()));
    }
}
