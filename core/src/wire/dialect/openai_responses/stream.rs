//! Stream parsing: Responses events into deltas.
//!
//! Each output item (`message`, `reasoning`, `function_call`) is found by its
//! `output_index`, or by `item_id` where a server sends no index (llama.cpp). Message
//! items get one text block per content part, reasoning items one thinking block (summary
//! parts joined by a blank line), function calls one tool block. Custom (freeform) tool
//! calls also become tool blocks, with their text input as a JSON string. Events are parsed once
//! into one borrowed envelope whose fields tolerate unexpected types, so an unknown
//! event can never fail the stream.
//!
//! Items are found through maps (output index and item id to position), a message's parts
//! and a reasoning item's parts likewise, so a stream with n items costs O(n log n).

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

use super::wire::{EventPayload, ItemPayload, ResponsePayload, TextDeltaPayload, UsagePayload, TEXT_DELTA_PREFIX};
use crate::data::error::{ProviderError, StreamError};
use crate::data::response::StopReason;
use crate::wire::delta::{BlockDelta, BlockKind, Delta, MessageMeta, UsageUpdate};
use crate::wire::dialect::DeltaSink;
use crate::wire::dialect::{common, in_place};
use crate::wire::framing::Frame;

/// Per-stream state: the output items seen so far and their blocks.
#[derive(Debug, Default)]
pub struct StreamState {
    items: Vec<OutputItem>,
    /// The latest item of each output index: its position in `items`.
    by_output_index: BTreeMap<u64, usize>,
    /// The output index and position of the item added last (the one the text path
    /// usually names), checked before the map.
    last_item: Option<(u64, usize)>,
    /// The latest item of each non-empty item id: its position in `items`.
    by_id: BTreeMap<String, usize>,
    next_block: u32,
    saw_tool_call: bool,
    saw_refusal: bool,
}

#[derive(Debug)]
struct OutputItem {
    /// Item id (`msg_…`, `rs_…`, `fc_…`); may be empty.
    id: String,
    kind: ItemKind,
}

#[derive(Debug)]
enum ItemKind {
    /// Content index -> block.
    Message {
        parts: MessageParts,
    },
    Reasoning(ReasoningItem),
    FunctionCall {
        block: u32,
        arguments_sent: bool,
    },
    /// A custom (freeform) tool call: its input is text, given whole at the end.
    CustomToolCall {
        block: u32,
    },
    /// Hosted tools and anything newer: no blocks.
    Other,
}

/// The text blocks of a message item's content parts.
#[derive(Debug, Default)]
struct MessageParts {
    /// The part started last, `(content index, its block)`: the one deltas go to, kept
    /// out of the map so the text path looks nothing up.
    current: Option<(u64, PartText)>,
    /// Content index -> block, for the parts started before it.
    earlier: BTreeMap<u64, PartText>,
    /// Blocks started since the item was last finished, to stop at `output_item.done`.
    unstopped: Vec<u32>,
}

impl MessageParts {
    fn get(&self, content_index: u64) -> Option<&PartText> {
        match &self.current {
            Some((ci, part)) if *ci == content_index => Some(part),
            _ => self.earlier.get(&content_index),
        }
    }

    fn get_mut(&mut self, content_index: u64) -> Option<&mut PartText> {
        match &mut self.current {
            Some((ci, part)) if *ci == content_index => Some(part),
            _ => self.earlier.get_mut(&content_index),
        }
    }

    fn insert(&mut self, content_index: u64, part: PartText) {
        if let Some((ci, previous)) = self.current.replace((content_index, part)) {
            self.earlier.insert(ci, previous);
        }
        self.unstopped.push(part.block);
    }
}

/// A content part's block and how much of its text was sent.
#[derive(Debug, Clone, Copy)]
struct PartText {
    block: u32,
    /// Bytes of text sent so far, from deltas or a final text.
    sent: usize,
}

#[derive(Debug, Default)]
struct ReasoningItem {
    block: Option<u32>,
    /// The summary and reasoning-text parts that gave text.
    parts: BTreeSet<ReasoningPart>,
    /// The part that gave text last.
    last_part: Option<ReasoningPart>,
    /// `encrypted_content` as first announced; the final value comes with `output_item.done`.
    encrypted: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum ReasoningPart {
    Summary(u64),
    Text(u64),
}

/// Which item an event is about.
#[derive(Debug, Clone, Copy)]
struct Target<'e> {
    output_index: Option<u64>,
    item_id: &'e str,
}

impl Target<'_> {
    fn is_named(&self) -> bool {
        self.output_index.is_some() || !self.item_id.is_empty()
    }
}

impl StreamState {
    #[cfg(test)]
    pub(crate) fn parse(&mut self, frame: &Frame<'_>, out: &mut Vec<Delta>) -> Result<(), StreamError> {
        self.parse_to(frame, out)
    }

    /// Parses one frame into `out` (a `Vec`, or the stream decoder's accumulator).
    pub(crate) fn parse_to(&mut self, frame: &Frame<'_>, out: &mut impl DeltaSink) -> Result<(), StreamError> {
        let Frame::Event { event, data, .. } = *frame else {
            return Ok(()); // keep-alive comments; `[DONE]` from compatible servers
        };
        if data.starts_with(TEXT_DELTA_PREFIX) {
            let mut hot = TextDeltaPayload::default();
            in_place::parse_into(data, &mut hot)?;
            let target = Target { output_index: hot.output_index.0, item_id: hot.item_id.0.as_deref().unwrap_or("") };
            self.on_text(target, hot.content_index.0.unwrap_or(0), hot.delta.0, out);
            return Ok(());
        }
        if data.trim().is_empty() {
            return Ok(());
        }
        let payload: EventPayload<'_> = common::parse_json(data)?;
        let EventPayload {
            kind,
            delta,
            item_id,
            output_index,
            content_index,
            summary_index,
            item,
            response,
            text,
            arguments,
            refusal,
        } = payload;
        // The payload's `type` is authoritative; the SSE event name is a fallback.
        let kind = kind.0.as_deref().unwrap_or(event);
        let target = Target { output_index: output_index.0, item_id: item_id.0.as_deref().unwrap_or("") };
        let content_index = content_index.0.unwrap_or(0);
        match kind {
            "response.output_text.delta" => self.on_text(target, content_index, delta.0, out),
            "response.refusal.delta" => {
                self.saw_refusal = true;
                self.on_text(target, content_index, delta.0, out);
            }
            "response.reasoning_summary_text.delta" => {
                let part = ReasoningPart::Summary(summary_index.0.unwrap_or(0));
                self.on_reasoning_text(target, part, delta.0, false, out);
            }
            "response.reasoning_text.delta" => {
                self.on_reasoning_text(target, ReasoningPart::Text(content_index), delta.0, false, out)
            }
            "response.function_call_arguments.delta" => self.on_arguments(target, delta.0, false, out),
            "response.output_text.done" => self.on_text_done(target, content_index, text.0, out),
            "response.refusal.done" => {
                self.saw_refusal = true;
                self.on_text_done(target, content_index, refusal.0, out);
            }
            "response.reasoning_summary_text.done" => {
                let part = ReasoningPart::Summary(summary_index.0.unwrap_or(0));
                self.on_reasoning_text(target, part, text.0, true, out);
            }
            "response.reasoning_text.done" => {
                self.on_reasoning_text(target, ReasoningPart::Text(content_index), text.0, true, out)
            }
            "response.function_call_arguments.done" => self.on_arguments(target, arguments.0, true, out),
            "response.output_item.added" => {
                if let Some(item) = item {
                    self.on_item_added(target.output_index, &item, out);
                }
            }
            "response.output_item.done" => {
                if let Some(item) = item {
                    self.on_item_done(target.output_index, item, out)?;
                }
            }
            "response.created" | "response.in_progress" | "response.queued" => {
                if let Some(response) = response {
                    out.push(Delta::Message(MessageMeta {
                        id: response.id.0.map(Cow::into_owned),
                        model: response.model.0.map(Cow::into_owned).filter(|m| !m.is_empty()),
                        ..MessageMeta::default()
                    }));
                }
            }
            "response.completed" | "response.incomplete" | "response.failed" => self.on_end(kind, response, out)?,
            "error" => {
                let value: serde_json::Value = common::parse_json(data)?;
                out.push(Delta::Error(common::stream_error(&value)));
            }
            _ => {} // content_part.*, summary_part.*, annotations, hosted tools, custom tool input deltas …
        }
        Ok(())
    }

    /// Nothing is held back: every event is complete in itself.
    pub(crate) fn finish(&mut self, _out: &mut impl DeltaSink) {}

    fn position(&self, target: Target<'_>) -> Option<usize> {
        if let Some(index) = target.output_index {
            if let Some((last, pos)) = self.last_item {
                if last == index {
                    return Some(pos);
                }
            }
            if let Some(&pos) = self.by_output_index.get(&index) {
                return Some(pos);
            }
        }
        if target.item_id.is_empty() {
            // An event that names no item at all can only be about the latest one.
            return if target.output_index.is_none() { self.items.len().checked_sub(1) } else { None };
        }
        self.by_id.get(target.item_id).copied()
    }

    /// Adds an item, indexed by its output index and id; returns its position.
    fn push_item(&mut self, output_index: Option<u64>, id: &str, kind: ItemKind) -> usize {
        let pos = self.items.len();
        if let Some(index) = output_index {
            self.by_output_index.insert(index, pos);
            self.last_item = Some((index, pos));
        }
        if !id.is_empty() {
            self.by_id.insert(id.to_string(), pos);
        }
        self.items.push(OutputItem { id: id.to_string(), kind });
        pos
    }

    /// The item an event is about; an item the stream never announced is created from
    /// the event (`make` gives its kind), so content is not lost.
    fn item_for(&mut self, target: Target<'_>, make: fn() -> ItemKind) -> usize {
        let wanted = make();
        if let Some(pos) = self.position(target) {
            let same_kind =
                self.items.get(pos).is_some_and(|i| std::mem::discriminant(&i.kind) == std::mem::discriminant(&wanted));
            // A named item of another kind keeps the event (its handler ignores it); an
            // unnamed event only means the latest item when the kinds agree.
            if same_kind || target.is_named() {
                return pos;
            }
        }
        self.push_item(target.output_index, target.item_id, wanted)
    }

    fn new_block(&mut self) -> u32 {
        let block = self.next_block;
        self.next_block += 1;
        block
    }

    /// The text block of a message content part, started on first use, that `text`
    /// goes to. The message item id travels as the block's signature, to be sent back
    /// with the text.
    fn text_block(&mut self, pos: usize, content_index: u64, text: &str, out: &mut impl DeltaSink) -> Option<u32> {
        let next = self.next_block;
        let item = self.items.get_mut(pos)?;
        let ItemKind::Message { parts } = &mut item.kind else { return None };
        if let Some(part) = parts.get_mut(content_index) {
            part.sent += text.len();
            return Some(part.block);
        }
        parts.insert(content_index, PartText { block: next, sent: text.len() });
        self.next_block += 1;
        out.push(Delta::BlockStart { index: next, kind: BlockKind::Text });
        if !item.id.is_empty() {
            out.push(Delta::BlockDelta { index: next, delta: BlockDelta::Signature(item.id.as_str().into()) });
        }
        Some(next)
    }

    fn on_text(
        &mut self,
        target: Target<'_>,
        content_index: u64,
        delta: Option<Cow<'_, str>>,
        out: &mut impl DeltaSink,
    ) {
        let Some(delta) = delta.filter(|d| !d.is_empty()) else { return };
        let pos = self.item_for(target, || ItemKind::Message { parts: MessageParts::default() });
        if let Some(index) = self.text_block(pos, content_index, &delta, out) {
            out.push(Delta::BlockDelta { index, delta: BlockDelta::Text(delta.into()) });
        }
    }

    /// `output_text.done` / `refusal.done`: the part's whole, final text. What the deltas
    /// did not bring (all of it when none came) is sent now.
    fn on_text_done(
        &mut self,
        target: Target<'_>,
        content_index: u64,
        text: Option<Cow<'_, str>>,
        out: &mut impl DeltaSink,
    ) {
        if text.as_deref().is_some_and(|t| !t.is_empty()) {
            let pos = self.item_for(target, || ItemKind::Message { parts: MessageParts::default() });
            self.text_done_at(pos, content_index, text, out);
        }
    }

    /// A part's final text (a `.done` event or the finished item). The API documents it
    /// as the finalized text, which the deltas add up to; when they did not bring all of
    /// it (a delta lost on the way, a server that streams only part of it) the rest is
    /// sent, so the response holds the text the SDKs report. Text that does not extend
    /// what was streamed cannot be reconciled without taking back deltas already
    /// delivered: the streamed text stands.
    fn text_done_at(&mut self, pos: usize, content_index: u64, text: Option<Cow<'_, str>>, out: &mut impl DeltaSink) {
        let Some(text) = text.filter(|t| !t.is_empty()) else { return };
        let sent = match self.items.get(pos).map(|i| &i.kind) {
            Some(ItemKind::Message { parts }) => parts.get(content_index).map_or(0, |p| p.sent),
            _ => return,
        };
        let Some(rest) = text.get(sent..).filter(|rest| !rest.is_empty()) else { return };
        if let Some(index) = self.text_block(pos, content_index, rest, out) {
            out.push(Delta::BlockDelta { index, delta: BlockDelta::Text(rest.into()) });
        }
    }

    fn on_reasoning_text(
        &mut self,
        target: Target<'_>,
        part: ReasoningPart,
        text: Option<Cow<'_, str>>,
        whole: bool,
        out: &mut impl DeltaSink,
    ) {
        if text.as_deref().is_some_and(|t| !t.is_empty()) {
            let pos = self.item_for(target, || ItemKind::Reasoning(ReasoningItem::default()));
            self.reasoning_text_at(pos, part, text, whole, out);
        }
    }

    /// Reasoning text from a summary part or a reasoning-text part. With `whole` set the
    /// text is a part's complete text (a `.done` event or a finished item), used only
    /// when that part did not stream.
    fn reasoning_text_at(
        &mut self,
        pos: usize,
        part: ReasoningPart,
        text: Option<Cow<'_, str>>,
        whole: bool,
        out: &mut impl DeltaSink,
    ) {
        let Some(text) = text.filter(|t| !t.is_empty()) else { return };
        let Some(reasoning) = self.reasoning_at(pos) else { return };
        if whole && reasoning.parts.contains(&part) {
            return;
        }
        let separate = reasoning.last_part.is_some_and(|last| last != part);
        let Some(index) = self.thinking_block(pos, out) else { return };
        if separate {
            out.push(Delta::BlockDelta { index, delta: BlockDelta::Thinking("\n\n".into()) });
        }
        if let Some(reasoning) = self.reasoning_at(pos) {
            reasoning.parts.insert(part);
            reasoning.last_part = Some(part);
        }
        out.push(Delta::BlockDelta { index, delta: BlockDelta::Thinking(text.into()) });
    }

    fn reasoning_at(&mut self, pos: usize) -> Option<&mut ReasoningItem> {
        match self.items.get_mut(pos).map(|i| &mut i.kind) {
            Some(ItemKind::Reasoning(reasoning)) => Some(reasoning),
            _ => None,
        }
    }

    /// The thinking block of a reasoning item, started on first use with the item id.
    fn thinking_block(&mut self, pos: usize, out: &mut impl DeltaSink) -> Option<u32> {
        let next = self.next_block;
        let item = self.items.get_mut(pos)?;
        let ItemKind::Reasoning(reasoning) = &mut item.kind else { return None };
        if let Some(block) = reasoning.block {
            return Some(block);
        }
        reasoning.block = Some(next);
        self.next_block += 1;
        let id = Some(item.id.clone()).filter(|id| !id.is_empty());
        out.push(Delta::BlockStart { index: next, kind: BlockKind::Thinking { id } });
        Some(next)
    }

    /// Argument fragments, or with `whole` set the complete arguments (`.done`), used only
    /// when no fragment came (LM Studio sends only `.done`).
    fn on_arguments(
        &mut self,
        target: Target<'_>,
        arguments: Option<Cow<'_, str>>,
        whole: bool,
        out: &mut impl DeltaSink,
    ) {
        let Some(arguments) = arguments.filter(|a| !a.is_empty()) else { return };
        // Arguments for a call that was never announced have no id or name to go with.
        let Some(pos) = self.position(target) else { return };
        let Some(ItemKind::FunctionCall { block, arguments_sent }) = self.items.get_mut(pos).map(|i| &mut i.kind)
        else {
            return;
        };
        if whole && *arguments_sent {
            return;
        }
        *arguments_sent = true;
        out.push(Delta::BlockDelta { index: *block, delta: BlockDelta::ToolInput(arguments.into()) });
    }

    fn on_item_added(&mut self, output_index: Option<u64>, item: &ItemPayload<'_>, out: &mut impl DeltaSink) -> usize {
        let id = item.id.0.as_deref().unwrap_or("");
        let target = Target { output_index, item_id: id };
        if let Some(pos) = self.position(target).filter(|_| target.is_named()) {
            return pos; // announced twice
        }
        let kind = match item.kind.0.as_deref().unwrap_or("") {
            "message" => ItemKind::Message { parts: MessageParts::default() },
            "reasoning" => ItemKind::Reasoning(ReasoningItem {
                encrypted: item.encrypted_content.0.as_deref().map(str::to_string),
                ..ReasoningItem::default()
            }),
            "function_call" => {
                let block = self.new_block();
                // `call_id` is what tool results answer; the item id is the fallback.
                let call_id = item.call_id.0.as_deref().filter(|c| !c.is_empty()).unwrap_or(id);
                let name = item.name.0.as_deref().unwrap_or("");
                out.push(Delta::BlockStart {
                    index: block,
                    kind: BlockKind::ToolUse { id: call_id.to_string(), name: name.to_string() },
                });
                if !id.is_empty() {
                    out.push(Delta::BlockDelta { index: block, delta: BlockDelta::Signature(id.into()) });
                }
                self.saw_tool_call = true;
                ItemKind::FunctionCall { block, arguments_sent: false }
            }
            "custom_tool_call" => {
                let block = self.new_block();
                let call_id = item.call_id.0.as_deref().filter(|c| !c.is_empty()).unwrap_or(id);
                let name = item.name.0.as_deref().unwrap_or("");
                out.push(Delta::BlockStart {
                    index: block,
                    kind: BlockKind::ToolUse { id: call_id.to_string(), name: name.to_string() },
                });
                self.saw_tool_call = true;
                ItemKind::CustomToolCall { block }
            }
            _ => ItemKind::Other,
        };
        self.push_item(output_index, id, kind)
    }

    fn on_item_done(
        &mut self,
        output_index: Option<u64>,
        item: ItemPayload<'_>,
        out: &mut impl DeltaSink,
    ) -> Result<(), StreamError> {
        // An item finished without being announced is announced now.
        let pos = self.on_item_added(output_index, &item, out);
        match self.items.get(pos).map(|i| &i.kind) {
            Some(ItemKind::Message { .. }) => {
                // Text that never streamed (only `.done` events) comes from the finished item.
                for (content_index, part) in (0u64..).zip(item.content_parts()?) {
                    if part.kind.0.as_deref() == Some("refusal") {
                        self.saw_refusal = true;
                    }
                    self.text_done_at(pos, content_index, part.text.0.or(part.refusal.0), out);
                }
                if let Some(ItemKind::Message { parts }) = self.items.get_mut(pos).map(|i| &mut i.kind) {
                    for index in parts.unstopped.drain(..) {
                        out.push(Delta::BlockStop { index });
                    }
                }
            }
            Some(ItemKind::Reasoning(_)) => {
                for (i, part) in (0u64..).zip(item.summary_parts()?) {
                    self.reasoning_text_at(pos, ReasoningPart::Summary(i), part.text.0, true, out);
                }
                for (i, part) in (0u64..).zip(item.content_parts()?) {
                    self.reasoning_text_at(pos, ReasoningPart::Text(i), part.text.0, true, out);
                }
                // The finished item's ciphertext wins: it differs from the announced one.
                let announced = self.reasoning_at(pos).and_then(|r| r.encrypted.take());
                let encrypted = item.encrypted_content.0.map(Cow::into_owned).or(announced);
                if let Some(encrypted) = encrypted.filter(|e| !e.is_empty()) {
                    if let Some(index) = self.thinking_block(pos, out) {
                        out.push(Delta::BlockDelta { index, delta: BlockDelta::Signature(encrypted.into()) });
                    }
                }
                if let Some(index) = self.reasoning_at(pos).and_then(|r| r.block) {
                    out.push(Delta::BlockStop { index });
                }
            }
            Some(&ItemKind::FunctionCall { block, .. }) => {
                let target = Target { output_index, item_id: item.id.0.as_deref().unwrap_or("") };
                self.on_arguments(target, item.arguments.0, true, out);
                out.push(Delta::BlockStop { index: block });
            }
            Some(&ItemKind::CustomToolCall { block }) => {
                // Freeform input is not JSON: it becomes the tool input as a JSON string.
                if let Some(input) = item.input.0.filter(|i| !i.is_empty()) {
                    let json = serde_json::Value::String(input.into_owned()).to_string();
                    out.push(Delta::BlockDelta { index: block, delta: BlockDelta::ToolInput(json.into()) });
                }
                out.push(Delta::BlockStop { index: block });
            }
            Some(ItemKind::Other) | None => {}
        }
        Ok(())
    }

    /// `response.completed` / `incomplete` / `failed`: metadata, usage and the stop reason.
    fn on_end(
        &mut self,
        kind: &str,
        response: Option<ResponsePayload<'_>>,
        out: &mut impl DeltaSink,
    ) -> Result<(), StreamError> {
        let response = response.unwrap_or_default();
        let status = match kind {
            "response.failed" => "failed",
            "response.incomplete" => response.status.0.as_deref().unwrap_or("incomplete"),
            _ => response.status.0.as_deref().unwrap_or("completed"),
        };
        let stop_reason = match status {
            "failed" => None,
            // llama.cpp reports `completed` even at the output limit; nothing tells them apart.
            "incomplete" => Some(match response.incomplete_details.as_ref().and_then(|d| d.reason.0.as_deref()) {
                Some("max_output_tokens") => StopReason::Length,
                Some("content_filter") => StopReason::Refusal,
                _ => StopReason::Stop,
            }),
            "cancelled" => Some(StopReason::Cancelled),
            _ if self.saw_tool_call => Some(StopReason::ToolUse),
            _ if self.saw_refusal => Some(StopReason::Refusal),
            _ => Some(StopReason::Stop),
        };
        out.push(Delta::Message(MessageMeta {
            id: response.id.0.map(Cow::into_owned),
            model: response.model.0.map(Cow::into_owned).filter(|m| !m.is_empty()),
            stop_reason,
            usage: response.usage.as_ref().map(normalise_usage),
        }));
        if status == "failed" {
            let error = match response.error {
                Some(raw) => {
                    let value: serde_json::Value = common::parse_json(raw.get())?;
                    common::stream_error(&value)
                }
                None => ProviderError::new(None, None, "the response failed without an error message"),
            };
            out.push(Delta::Error(error));
        }
        Ok(())
    }
}

/// Responses counts cached tokens inside `input_tokens` and reasoning tokens inside
/// `output_tokens`; omni's input excludes the cached part.
fn normalise_usage(usage: &UsagePayload) -> UsageUpdate {
    let cached = usage.input_tokens_details.as_ref().and_then(|d| d.cached_tokens.0);
    let reasoning = usage.output_tokens_details.as_ref().and_then(|d| d.reasoning_tokens.0);
    UsageUpdate {
        input_tokens: usage.input_tokens.0.map(|input| input.saturating_sub(cached.unwrap_or(0))),
        output_tokens: usage.output_tokens.0,
        cache_read_tokens: cached.or(usage.input_tokens.0.map(|_| 0)),
        cache_write_tokens: None,
        reasoning_tokens: reasoning.or(usage.output_tokens.0.map(|_| 0)),
    }
}
