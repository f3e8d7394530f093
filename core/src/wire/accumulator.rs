//! The accumulator: deltas in, consumer events and a growing response out.
//!
//! ```text
//!   Delta ──► Accumulator ──► StreamEvent (text_start, text_delta, …, done | error)
//!                  │
//!                  └──► Response (complete and consistent after every delta)
//! ```
//!
//! Rules:
//! - blocks are keyed by the dialect's index, mapped to positions in the message
//!   content in order of first sight; a delta for an unknown block fills in its start;
//! - a text, thinking or redacted block ends when any other block starts; tool calls
//!   end when a non-tool block starts, at their explicit stop, or at the end of the
//!   stream, so parallel tool calls may interleave their argument fragments;
//! - text and tool arguments are appended in place (amortised linear time), and every
//!   lookup (a block by its dialect index, the open blocks, the ids in use) is a map, so a
//!   response with n blocks costs O(n log n), never O(n²);
//! - tool call ids are unique within a response: a later call repeating an earlier call's
//!   id gets the id with a suffix (`call_1` → `call_1_2`) and a `duplicate_tool_call_id`
//!   warning, so every tool result can be matched to its call when the conversation goes
//!   back to the provider (which rejects repeated ids in a message);
//! - tool input JSON is parsed once, at the block's end; invalid JSON keeps the raw text
//!   as a JSON string, marks the end event with the parser's message and adds a warning;
//! - an error (in-stream provider error, decode failure, incomplete stream) is terminal:
//!   later deltas are ignored and the response keeps everything received.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::data::error::StreamError;
use crate::data::event::StreamEvent;
use crate::data::message::{Block, InvalidCallInput, Origin, Text, Thinking, ToolUse};
use crate::data::model::Prices;
use crate::data::response::{Response, StopReason, Warning};
use crate::wire::delta::{BlockDelta, BlockKind, Delta, MessageMeta};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SlotKind {
    Text,
    Thinking,
    ToolUse,
}

/// One block of the response (same position in the message content).
#[derive(Debug)]
struct Slot {
    /// The dialect's block index.
    key: u32,
    kind: SlotKind,
    open: bool,
    /// Raw JSON input of a tool call, parsed at the end.
    tool_json: String,
    /// Why the tool call is invalid whatever its input (`BlockDelta::ToolInputInvalid`).
    tool_invalid: Option<InvalidCallInput>,
}

/// Turns deltas into events and a response.
#[derive(Debug)]
pub struct Accumulator {
    response: Response,
    slots: Vec<Slot>,
    /// The open block of each dialect index: its position in `slots`.
    open_by_key: BTreeMap<u32, usize>,
    /// Positions of the open blocks, in content order (the order they are closed in).
    open: BTreeSet<usize>,
    /// The last block a delta went to, `(key, position)`, while it is open: the text
    /// path looks nothing up.
    last: Option<(u32, usize)>,
    /// Tool call ids handed out in this response.
    tool_ids: BTreeSet<String>,
    prices: Option<Prices>,
    terminated: bool,
}

impl Accumulator {
    /// Starts an empty response for `model`, recording `origin` on the message.
    pub fn new(model: impl Into<String>, origin: Option<Origin>) -> Self {
        let mut response = Response::empty(model);
        response.message.origin = origin.map(Box::new);
        Self {
            response,
            slots: Vec::new(),
            open_by_key: BTreeMap::new(),
            open: BTreeSet::new(),
            last: None,
            tool_ids: BTreeSet::new(),
            prices: None,
            terminated: false,
        }
    }

    /// Prices used to compute the cost at the end.
    pub fn with_prices(mut self, prices: Prices) -> Self {
        self.prices = Some(prices);
        self
    }

    /// The response so far.
    pub fn response(&self) -> &Response {
        &self.response
    }

    /// The response, consuming the accumulator.
    pub fn into_response(self) -> Response {
        self.response
    }

    /// True once `done` or `error` was emitted.
    pub fn is_terminated(&self) -> bool {
        self.terminated
    }

    /// Adds a warning to the response.
    pub fn warn(&mut self, warning: Warning) {
        self.response.warnings.push(warning);
    }

    /// Applies one delta.
    pub fn push(&mut self, delta: Delta, out: &mut Vec<StreamEvent>) {
        if self.terminated {
            return;
        }
        match delta {
            Delta::Message(meta) => self.apply_meta(meta),
            Delta::BlockStart { index, kind } => self.start_block(index, kind, out),
            Delta::BlockDelta { index, delta } => self.block_delta(index, delta, out),
            Delta::BlockStop { index } => {
                if let Some(pos) = self.open_position(index) {
                    self.close(pos, out);
                }
            }
            Delta::Error(e) => self.fail(StreamError::Provider(e), out),
        }
    }

    /// Ends the stream with an error; the response keeps what was received.
    pub fn fail(&mut self, error: StreamError, out: &mut Vec<StreamEvent>) {
        if self.terminated {
            return;
        }
        self.close_all(out);
        self.response.stop_reason = Some(StopReason::Error);
        self.finalize_usage();
        self.terminated = true;
        out.push(StreamEvent::Error { error: Box::new(error) });
    }

    /// The body ended: closes open blocks and emits `done`, or `error` when the
    /// provider never said the message was finished.
    pub fn finish(&mut self, out: &mut Vec<StreamEvent>) {
        if self.terminated {
            return;
        }
        let Some(reason) = self.response.stop_reason else {
            self.fail(StreamError::Incomplete, out);
            return;
        };
        self.close_all(out);
        let has_tools = self.response.message.content.iter().any(|b| matches!(b, Block::ToolUse(_)));
        let reason = if reason == StopReason::Stop && has_tools { StopReason::ToolUse } else { reason };
        self.response.stop_reason = Some(reason);
        self.finalize_usage();
        self.terminated = true;
        out.push(StreamEvent::Done { stop_reason: reason, usage: Box::new(self.response.usage) });
    }

    fn finalize_usage(&mut self) {
        if let Some(prices) = &self.prices {
            self.response.usage = self.response.usage.with_cost(prices);
        }
    }

    fn apply_meta(&mut self, meta: MessageMeta) {
        if let Some(model) = meta.model.filter(|m| !m.is_empty()) {
            if let Some(origin) = &mut self.response.message.origin {
                origin.model.clone_from(&model);
            }
            self.response.model = model;
        }
        if let Some(id) = meta.id {
            self.response.id = Some(id);
        }
        if let Some(reason) = meta.stop_reason {
            self.response.stop_reason = Some(reason);
        }
        if let Some(usage) = meta.usage {
            usage.apply_to(&mut self.response.usage);
        }
    }

    #[inline]
    fn open_position(&self, key: u32) -> Option<usize> {
        match self.last {
            Some((k, pos)) if k == key => Some(pos),
            _ => self.open_by_key.get(&key).copied(),
        }
    }

    fn start_block(&mut self, key: u32, kind: BlockKind, out: &mut Vec<StreamEvent>) {
        if let Some(pos) = self.open_position(key) {
            if self.slots[pos].kind == slot_kind(&kind) {
                return; // a repeated start for an open block adds nothing
            }
            self.close(pos, out);
        }
        self.open_block(key, kind, out);
    }

    fn open_block(&mut self, key: u32, kind: BlockKind, out: &mut Vec<StreamEvent>) -> usize {
        let slot_kind = slot_kind(&kind);
        // Non-tool blocks never interleave; tool calls interleave only with each other. So
        // the open blocks are one non-tool block or some tool calls: a tool call closes
        // the first, anything else closes all (each block closes once: linear overall).
        while let Some(&pos) = self.open.first() {
            if slot_kind == SlotKind::ToolUse && self.slots[pos].kind == SlotKind::ToolUse {
                break;
            }
            self.close(pos, out);
        }
        let index = self.response.message.content.len();
        let (block, event) = match kind {
            BlockKind::Text => (Block::Text(Text::default()), StreamEvent::TextStart { index }),
            BlockKind::Thinking { id } => {
                (Block::Thinking(Thinking { id, ..Thinking::default() }), StreamEvent::ThinkingStart { index })
            }
            BlockKind::RedactedThinking { data } => (
                Block::Thinking(Thinking { redacted: Some(data), ..Thinking::default() }),
                StreamEvent::ThinkingStart { index },
            ),
            BlockKind::ToolUse { id, name } => {
                let id = self.unique_tool_id(id, &name);
                let event = StreamEvent::ToolUseStart { index, id: id.clone(), name: name.clone() };
                (Block::ToolUse(ToolUse { invalid: None, id, name, input: Value::Null, signature: None }), event)
            }
        };
        self.response.message.content.push(block);
        self.slots.push(Slot { key, kind: slot_kind, open: true, tool_json: String::new(), tool_invalid: None });
        if let Some(previous) = self.open_by_key.insert(key, index) {
            // Only reachable if a block under this key is still open: close bookkeeping.
            self.open.remove(&previous);
        }
        self.open.insert(index);
        self.last = Some((key, index));
        out.push(event);
        index
    }

    /// The id a new tool call gets: its own, unless an earlier call of this response has
    /// it; then the id with the first free suffix `_2`, `_3`, … and a warning. An empty id
    /// (a call the provider sent without one) is left as it is: there is nothing to match.
    fn unique_tool_id(&mut self, id: String, name: &str) -> String {
        if id.is_empty() {
            return id;
        }
        if !self.tool_ids.contains(&id) {
            self.tool_ids.insert(id.clone());
            return id;
        }
        let mut n = 2u64;
        let unique = loop {
            let candidate = format!("{id}_{n}");
            if !self.tool_ids.contains(&candidate) {
                break candidate;
            }
            n += 1;
        };
        self.response.warnings.push(Warning {
            code: "duplicate_tool_call_id".into(),
            message: format!(
                "tool call {name} repeats the id {id} of an earlier call in this response; renamed {unique}"
            ),
        });
        self.tool_ids.insert(unique.clone());
        unique
    }

    fn block_delta(&mut self, key: u32, delta: BlockDelta, out: &mut Vec<StreamEvent>) {
        let pos = match self.open_position(key) {
            Some(pos) => pos,
            None => {
                let kind = match &delta {
                    BlockDelta::Text(_) => BlockKind::Text,
                    BlockDelta::Thinking(_) | BlockDelta::Signature(_) => BlockKind::Thinking { id: None },
                    BlockDelta::ToolInput(_) | BlockDelta::ToolInputInvalid { .. } => {
                        BlockKind::ToolUse { id: String::new(), name: String::new() }
                    }
                };
                self.open_block(key, kind, out)
            }
        };
        self.last = Some((key, pos));
        let index = pos;
        let slot = &mut self.slots[pos];
        let block = &mut self.response.message.content[pos];
        match (delta, block) {
            (BlockDelta::Text(text), Block::Text(t)) => {
                if !text.is_empty() {
                    t.text.push_str(&text);
                    out.push(StreamEvent::TextDelta { index, delta: text });
                }
            }
            (BlockDelta::Thinking(text), Block::Thinking(t)) => {
                if !text.is_empty() {
                    t.text.push_str(&text);
                    out.push(StreamEvent::ThinkingDelta { index, delta: text });
                }
            }
            (BlockDelta::ToolInput(json), Block::ToolUse(_)) => {
                if !json.is_empty() {
                    slot.tool_json.push_str(&json);
                    out.push(StreamEvent::ToolUseDelta { index, delta: json });
                }
            }
            (BlockDelta::ToolInputInvalid { reason, raw }, Block::ToolUse(_)) => {
                slot.tool_invalid = Some(InvalidCallInput { reason: reason.into(), raw: raw.map(Into::into) });
            }
            (BlockDelta::Signature(sig), block) => append_signature(block, &sig),
            // A delta of another kind than its open block: the provider switched kinds
            // under one index. Close this block and start the right one.
            (delta, _) => {
                self.close(pos, out);
                self.block_delta(key, delta, out);
            }
        }
    }

    fn close_all(&mut self, out: &mut Vec<StreamEvent>) {
        while let Some(&pos) = self.open.first() {
            self.close(pos, out);
        }
    }

    fn close(&mut self, pos: usize, out: &mut Vec<StreamEvent>) {
        let slot = &mut self.slots[pos];
        if !slot.open {
            return;
        }
        slot.open = false;
        let key = slot.key;
        let raw = std::mem::take(&mut slot.tool_json);
        let invalid = slot.tool_invalid.take();
        self.open.remove(&pos);
        if self.open_by_key.get(&key) == Some(&pos) {
            self.open_by_key.remove(&key);
        }
        if self.last.is_some_and(|(_, p)| p == pos) {
            self.last = None;
        }
        let index = pos;
        match &mut self.response.message.content[pos] {
            Block::Text(t) => out.push(StreamEvent::TextEnd { index, text: t.text.clone() }),
            Block::Thinking(t) => out.push(StreamEvent::ThinkingEnd {
                index,
                text: t.text.clone(),
                signature: t.signature.clone(),
                redacted: t.redacted.is_some(),
            }),
            Block::ToolUse(tool) => {
                let (input, parse_error) = parse_tool_input(raw);
                // A call declared invalid (a text protocol's parser) or whose arguments are
                // not JSON carries why: no handler ever sees it (the tool round's rule).
                let invalid = invalid.or_else(|| parse_error.map(|reason| InvalidCallInput { reason, raw: None }));
                let error = invalid.as_ref().map(|invalid| invalid.reason.clone());
                tool.input = input;
                tool.invalid = invalid.map(Box::new);
                let tool_use = tool.clone();
                if let Some(message) = &error {
                    self.response.warnings.push(Warning {
                        code: "invalid_tool_input".into(),
                        message: format!("tool call {} ({}): {message}", tool_use.id, tool_use.name),
                    });
                }
                out.push(StreamEvent::ToolUseEnd { index, tool_use: Box::new(tool_use), input_error: error });
            }
            Block::Attachment(_) | Block::ToolResult(_) => {}
        }
    }
}

fn slot_kind(kind: &BlockKind) -> SlotKind {
    match kind {
        BlockKind::Text => SlotKind::Text,
        BlockKind::Thinking { .. } | BlockKind::RedactedThinking { .. } => SlotKind::Thinking,
        BlockKind::ToolUse { .. } => SlotKind::ToolUse,
    }
}

fn append_signature(block: &mut Block, sig: &str) {
    let slot = match block {
        Block::Text(t) => &mut t.signature,
        Block::Thinking(t) => &mut t.signature,
        Block::ToolUse(t) => &mut t.signature,
        Block::Attachment(_) | Block::ToolResult(_) => return,
    };
    slot.get_or_insert_with(String::new).push_str(sig);
}

/// Parses accumulated tool arguments. No arguments at all means an empty object (the
/// providers stream `""` for a call without parameters); anything else must be JSON.
fn parse_tool_input(raw: String) -> (Value, Option<String>) {
    if raw.trim().is_empty() {
        return (Value::Object(Default::default()), None);
    }
    match serde_json::from_str::<Value>(&raw) {
        // Kept as text like bad JSON: deeper values are not validated or sent (crate::data::depth).
        Ok(v) if crate::data::depth::exceeds(&v, crate::data::depth::MAX_DEPTH) => (
            Value::String(raw),
            Some(format!("the input is nested deeper than {} levels", crate::data::depth::MAX_DEPTH)),
        ),
        Ok(v) => (v, None),
        Err(e) => (Value::String(raw), Some(e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::delta::UsageUpdate;

    fn run(deltas: Vec<Delta>) -> (Vec<StreamEvent>, Response) {
        let mut acc = Accumulator::new("m", None);
        let mut out = Vec::new();
        for d in deltas {
            acc.push(d, &mut out);
        }
        acc.finish(&mut out);
        (out, acc.into_response())
    }

    fn text(i: u32, s: &str) -> Delta {
        Delta::BlockDelta { index: i, delta: BlockDelta::Text(s.into()) }
    }

    fn tool(i: u32, id: &str) -> Delta {
        Delta::BlockStart { index: i, kind: BlockKind::ToolUse { id: id.into(), name: "f".into() } }
    }

    fn args(i: u32, s: &str) -> Delta {
        Delta::BlockDelta { index: i, delta: BlockDelta::ToolInput(s.into()) }
    }

    #[test]
    fn fills_missing_start_and_closes_on_next_block() {
        let (events, resp) = run(vec![text(0, "Hi"), tool(1, "a"), args(1, "{}"), Delta::stop(StopReason::Stop)]);
        let kinds: Vec<String> =
            events.iter().map(|e| serde_json::to_value(e).unwrap()["type"].as_str().unwrap().to_string()).collect();
        assert_eq!(
            kinds,
            ["text_start", "text_delta", "text_end", "tool_use_start", "tool_use_delta", "tool_use_end", "done"]
        );
        assert_eq!(resp.stop_reason, Some(StopReason::ToolUse));
        assert_eq!(resp.text(), "Hi");
    }

    #[test]
    fn parallel_tool_calls_interleave_by_index() {
        let (_, resp) = run(vec![
            tool(0, "a"),
            tool(1, "b"),
            args(0, r#"{"x":"#),
            args(1, r#"{"y":"#),
            args(1, "2}"),
            args(0, "1}"),
            Delta::stop(StopReason::ToolUse),
        ]);
        let calls: Vec<_> = resp.message.tool_uses().map(|t| (t.id.clone(), t.input.clone())).collect();
        assert_eq!(calls, [("a".into(), serde_json::json!({"x":1})), ("b".into(), serde_json::json!({"y":2}))]);
    }

    #[test]
    fn invalid_tool_json_is_kept_and_reported() {
        let (events, resp) = run(vec![tool(0, "a"), args(0, r#"{"x":"#), Delta::stop(StopReason::Length)]);
        let end = events.iter().find(|e| matches!(e, StreamEvent::ToolUseEnd { .. })).unwrap();
        let StreamEvent::ToolUseEnd { tool_use, input_error, .. } = end else { unreachable!() };
        assert_eq!(tool_use.input, Value::String(r#"{"x":"#.into()));
        assert!(input_error.is_some());
        assert_eq!(resp.stop_reason, Some(StopReason::Length));
        assert_eq!(resp.warnings[0].code, "invalid_tool_input");
    }

    #[test]
    fn no_arguments_is_an_empty_object() {
        let (_, resp) = run(vec![tool(0, "a"), args(0, ""), Delta::stop(StopReason::ToolUse)]);
        assert_eq!(resp.message.tool_uses().next().unwrap().input, serde_json::json!({}));
    }

    #[test]
    fn stream_without_stop_is_incomplete_but_keeps_content() {
        let (events, resp) = run(vec![text(0, "partial")]);
        assert!(
            matches!(events.last(), Some(StreamEvent::Error { error}) if matches!(**error, StreamError::Incomplete))
        );
        assert_eq!(resp.text(), "partial");
        assert_eq!(resp.stop_reason, Some(StopReason::Error));
    }

    #[test]
    fn usage_updates_replace_fields() {
        let up = |i: Option<u64>, o: Option<u64>| {
            Delta::usage(UsageUpdate { input_tokens: i, output_tokens: o, ..UsageUpdate::default() })
        };
        let (_, resp) = run(vec![up(Some(10), Some(1)), up(None, Some(5)), Delta::stop(StopReason::Stop)]);
        assert_eq!((resp.usage.input_tokens, resp.usage.output_tokens), (10, 5));
    }

    fn tool_ids(resp: &Response) -> Vec<String> {
        resp.message.tool_uses().map(|t| t.id.clone()).collect()
    }

    #[test]
    fn a_repeated_tool_call_id_gets_a_free_suffix_and_a_warning() {
        let (events, resp) = run(vec![
            tool(0, "a"),
            tool(1, "a_2"),
            tool(2, "a"),
            tool(3, "a"),
            tool(4, ""),
            tool(5, ""),
            Delta::stop(StopReason::ToolUse),
        ]);
        // `a_2` is taken by the provider's own second call, so the first repeat is `a_3`.
        assert_eq!(tool_ids(&resp), ["a", "a_2", "a_3", "a_4", "", ""]);
        let starts: Vec<&str> = events
            .iter()
            .filter_map(|e| match e {
                StreamEvent::ToolUseStart { id, .. } => Some(id.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(starts, ["a", "a_2", "a_3", "a_4", "", ""], "events carry the ids the response has");
        let warnings: Vec<_> = resp.warnings.iter().filter(|w| w.code == "duplicate_tool_call_id").collect();
        assert_eq!(warnings.len(), 2, "{:?}", resp.warnings);
        assert!(warnings[0].message.contains("a_3"), "{}", warnings[0].message);
    }

    #[test]
    fn a_block_reopened_under_a_used_index_is_a_new_block() {
        // Index 0 is reused after its stop (a second message in one stream): the later
        // deltas go to the new block, and closing is by position, once each.
        let (events, resp) = run(vec![
            text(0, "one"),
            Delta::BlockStop { index: 0 },
            text(0, "two"),
            tool(1, "x"),
            args(1, "{}"),
            text(0, "three"),
            Delta::stop(StopReason::Stop),
        ]);
        let texts: Vec<String> = resp
            .message
            .content
            .iter()
            .filter_map(|b| match b {
                Block::Text(t) => Some(t.text.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(texts, ["one", "two", "three"]);
        let ends = events.iter().filter(|e| matches!(e, StreamEvent::TextEnd { .. })).count();
        assert_eq!(ends, 3);
    }

    #[test]
    fn many_interleaved_tool_calls_close_in_order() {
        let n = 50_000u32;
        let mut deltas: Vec<Delta> = (0..n).map(|i| tool(i, &format!("c{i}"))).collect();
        deltas.extend((0..n).rev().map(|i| args(i, &format!("{{\"n\":{i}}}"))));
        deltas.push(text(n, "after"));
        deltas.push(Delta::stop(StopReason::ToolUse));
        let (events, resp) = run(deltas);
        let ends: Vec<usize> = events
            .iter()
            .filter_map(|e| match e {
                StreamEvent::ToolUseEnd { index, .. } => Some(*index),
                _ => None,
            })
            .collect();
        assert_eq!(ends, (0..n as usize).collect::<Vec<_>>(), "closed by the text block, in content order");
        let inputs: Vec<Value> = resp.message.tool_uses().map(|t| t.input.clone()).collect();
        assert_eq!(inputs.len(), n as usize);
        assert!(inputs.iter().enumerate().all(|(i, v)| v["n"] == i));
        assert_eq!(resp.text(), "after");
    }

    #[test]
    fn appending_large_tool_input_is_linear() {
        // 1 MB in 4-byte fragments: quadratic appends would take minutes here.
        let mut acc = Accumulator::new("m", None);
        let mut out = Vec::new();
        acc.push(tool(0, "a"), &mut out);
        acc.push(args(0, "[\"\""), &mut out);
        for _ in 0..250_000 {
            acc.push(args(0, ",\"\""), &mut out);
            out.clear();
        }
        acc.push(args(0, "]"), &mut out);
        acc.push(Delta::stop(StopReason::ToolUse), &mut out);
        acc.finish(&mut out);
        let input = &acc.response().message.tool_uses().next().unwrap().input;
        assert_eq!(input.as_array().map(Vec::len), Some(250_001));
    }
}
