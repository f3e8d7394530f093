//! A text protocol inside the stream decoder, between the dialect and the accumulator:
//!
//! ```text
//!  dialect ─► Delta ─► TextCalls ─► Delta ─► Accumulator ─► StreamEvent
//!                      (text through the protocol's parser: text stays text,
//!                       a call becomes a tool_use block)
//! ```
//!
//! So the accumulator, the events and the response are those of a native tool call: a
//! `ToolUseStart` when the call's name is read (its id from a counter: the request's
//! prefix and the call's number), `ToolUseDelta`s with the arguments' JSON as it becomes
//! known, a `ToolUseEnd` with the input. A call that began but is malformed, and a call to
//! a tool the model was not given, end as tool calls with an input error (the tool loop
//! answers the model with the error, as it does for a native call with a bad input); a
//! span that never got as far as a name (malformed, or cut by the end of the reply) stays
//! text, with a warning on the response.

use std::collections::{BTreeMap, BTreeSet};

use super::{CallParser, InvalidCall, Parsed};
use crate::data::event::StreamEvent;
use crate::data::response::Warning;
use crate::wire::accumulator::Accumulator;
use crate::wire::decoder::TextCallFilter;
use crate::wire::delta::{BlockDelta, BlockKind, Delta};

/// The accumulator keys of the blocks this filter makes: far above any dialect's, so
/// they never meet (dialects number blocks from 0).
const KEY_BASE: u32 = 0xF000_0000;

/// One reply's text calls (see the module's doc).
pub(crate) struct TextCalls {
    parser: Box<dyn CallParser>,
    /// The prefix of the ids of this reply's calls (unique per request).
    id_prefix: String,
    next_key: u32,
    /// The key of the text block this filter has open, if any.
    text_key: Option<u32>,
    /// The block key of each call that has started.
    calls: BTreeMap<usize, u32>,
    /// The dialect's text blocks (their stops are the dialect's business, not the
    /// accumulator's: the text went into this filter's blocks).
    dialect_text: BTreeSet<u32>,
    parsed: Vec<Parsed>,
    finished: bool,
}

impl std::fmt::Debug for TextCalls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TextCalls").field("id_prefix", &self.id_prefix).field("calls", &self.calls.len()).finish()
    }
}

impl TextCalls {
    /// The filter of one reply: `parser` reads its text; call ids are `id_prefix` and
    /// the call's number.
    pub(crate) fn new(parser: Box<dyn CallParser>, id_prefix: impl Into<String>) -> Self {
        Self {
            parser,
            id_prefix: id_prefix.into(),
            next_key: KEY_BASE,
            text_key: None,
            calls: BTreeMap::new(),
            dialect_text: BTreeSet::new(),
            parsed: Vec::new(),
            finished: false,
        }
    }

    fn key(&mut self) -> u32 {
        let key = self.next_key;
        self.next_key = self.next_key.wrapping_add(1).max(KEY_BASE);
        key
    }

    fn text(&mut self, text: &str, acc: &mut Accumulator, out: &mut Vec<StreamEvent>) {
        if text.is_empty() {
            return;
        }
        let key = match self.text_key {
            Some(key) => key,
            None => {
                let key = self.key();
                self.text_key = Some(key);
                key
            }
        };
        acc.push(Delta::BlockDelta { index: key, delta: BlockDelta::Text(text.into()) }, out);
    }

    /// Opens call `index`'s tool_use block; returns its key.
    fn start_call(&mut self, index: usize, name: String, acc: &mut Accumulator, out: &mut Vec<StreamEvent>) -> u32 {
        self.text_key = None;
        let key = self.key();
        let id = format!("{}{index}", self.id_prefix);
        acc.push(Delta::BlockStart { index: key, kind: BlockKind::ToolUse { id, name } }, out);
        key
    }

    fn drain(&mut self, acc: &mut Accumulator, out: &mut Vec<StreamEvent>) {
        let mut parsed = std::mem::take(&mut self.parsed);
        for event in parsed.drain(..) {
            match event {
                Parsed::Text(text) => self.text(&text, acc, out),
                Parsed::Warning(message) => acc.warn(Warning { code: "tool_call_alias".into(), message }),
                Parsed::CallStart { index, name } => {
                    let key = self.start_call(index, name, acc, out);
                    self.calls.insert(index, key);
                }
                Parsed::CallDelta { index, json } => {
                    if let Some(&key) = self.calls.get(&index) {
                        acc.push(Delta::BlockDelta { index: key, delta: BlockDelta::ToolInput(json.into()) }, out);
                    }
                }
                Parsed::CallEnd { index, .. } => {
                    if let Some(key) = self.calls.remove(&index) {
                        acc.push(Delta::BlockStop { index: key }, out);
                    }
                }
                Parsed::Invalid { index, raw, reason } => {
                    let key = match (self.calls.remove(&index), &reason) {
                        (Some(key), _) => Some(key),
                        (None, InvalidCall::UnknownTool(name)) => Some(self.start_call(index, name.clone(), acc, out)),
                        (None, _) => None,
                    };
                    match key {
                        Some(key) => {
                            let why = BlockDelta::ToolInputInvalid {
                                reason: reason.to_string().into(),
                                raw: Some(raw.as_str().into()),
                            };
                            acc.push(Delta::BlockDelta { index: key, delta: why }, out);
                            acc.push(Delta::BlockStop { index: key }, out);
                        }
                        None => {
                            acc.warn(Warning {
                                code: super::correct::UNREAD_CALL.into(),
                                message: format!("{reason}; kept as text: {}", abbreviated(&raw)),
                            });
                            self.text(&raw, acc, out);
                        }
                    }
                }
            }
        }
        self.parsed = parsed;
    }
}

/// The decoder's hook for a text protocol: the wire asks for this trait, the text tools
/// give it.
impl TextCallFilter for TextCalls {
    /// One delta from the dialect: text goes through the parser, the rest through as is.
    fn push(&mut self, delta: Delta, acc: &mut Accumulator, out: &mut Vec<StreamEvent>) {
        match delta {
            Delta::BlockDelta { index, delta: BlockDelta::Text(text) } => {
                self.dialect_text.insert(index);
                self.parser.feed(&text, &mut self.parsed);
                self.drain(acc, out);
            }
            // The dialect's text blocks are replaced by this filter's.
            Delta::BlockStart { index, kind: BlockKind::Text } => {
                self.dialect_text.insert(index);
            }
            Delta::BlockStop { index } if self.dialect_text.remove(&index) => {}
            other => {
                // Another block begins (reasoning, a native call): the text before it ends.
                if matches!(other, Delta::BlockStart { .. }) {
                    self.text_key = None;
                }
                acc.push(other, out);
            }
        }
    }

    /// The reply ended: what the parser held back comes out (text, or an unclosed call).
    fn finish(&mut self, acc: &mut Accumulator, out: &mut Vec<StreamEvent>) {
        if self.finished {
            return;
        }
        self.finished = true;
        self.parser.finish(&mut self.parsed);
        self.drain(acc, out);
    }
}

/// At most 200 characters of `raw`, for a warning.
fn abbreviated(raw: &str) -> String {
    let mut cut: String = raw.chars().take(200).collect();
    if cut.len() < raw.len() {
        cut.push('…');
    }
    format!("{cut:?}")
}
