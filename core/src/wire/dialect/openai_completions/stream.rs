//! Parsing a streamed Chat Completions body: one `chat.completion.chunk` per SSE event.
//!
//! ```text
//!  data: {"choices":[{"delta":{"reasoning_content":…}}]}   ─► thinking  (key 1)
//!  data: {"choices":[{"delta":{"content":…}}]}             ─► text      (key 0)
//!  data: {"choices":[{"delta":{"tool_calls":[{"index":i,…}]}}]} ─► tool call i (key 2, 3, …)
//!  data: {"choices":[{"delta":{},"finish_reason":"stop"}]} ─► block stops, stop reason
//!  data: {"choices":[],"usage":{…}}                        ─► usage
//!  data: [DONE]
//! ```
//!
//! Only choice 0 is read (`n > 1` streams interleave other choices). Tool calls are keyed
//! by their wire `index`, and a new `id` under an index already in use starts a new call
//! (some servers number every call 0). `id` and `function.name` are taken once per call:
//! llama-cpp-python repeats them on every delta, and they must not be concatenated.
//!
//! Every lookup is a map (wire index to call) or a list drained once (calls waiting for
//! their name, calls to stop), so a stream with n calls costs O(n log n) however its
//! chunks repeat `finish_reason`.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde_json::Value;

use super::wire::{Chunk, ChunkDelta};
use crate::data::error::{ProviderError, StreamError};
use crate::data::response::StopReason;
use crate::wire::delta::{BlockDelta, BlockKind, Delta, MessageMeta};
use crate::wire::dialect::common::{self, parse_json};
use crate::wire::dialect::in_place;
use crate::wire::dialect::DeltaSink;
use crate::wire::framing::Frame;

const TEXT_KEY: u32 = 0;
const THINKING_KEY: u32 = 1;
const FIRST_TOOL_KEY: u32 = 2;

/// Per-stream state of the `openai_completions` dialect.
#[derive(Debug, Default)]
pub struct StreamState {
    /// Provider response id, once seen (also used to build ids for calls that lack one).
    response_id: Option<String>,
    model_seen: bool,
    text_seen: bool,
    thinking_seen: bool,
    /// A refusal was streamed: a plain `stop` then means [`StopReason::Refusal`].
    refused: bool,
    /// `tool_calls` were seen, so the legacy `function_call` mirror is ignored.
    saw_tool_calls: bool,
    tools: Vec<ToolSlot>,
    /// The latest call of each wire `index`: its position in `tools`.
    by_wire: BTreeMap<u64, usize>,
    /// Calls not started yet (no name so far), in order; drained when they start at a finish.
    nameless: Vec<usize>,
    /// Calls that got a start or arguments since the last `finish_reason` (only these can
    /// have an open block to stop), in order.
    to_stop: Vec<usize>,
}

/// One tool call of the stream.
#[derive(Debug)]
struct ToolSlot {
    /// Our block key.
    key: u32,
    /// Provider call id (empty until seen).
    id: String,
    name: String,
    /// `BlockStart` was emitted.
    started: bool,
    /// Arguments received before the name, sent at the start.
    pending: String,
    /// Listed in `StreamState::to_stop`.
    to_stop: bool,
}

impl StreamState {
    #[cfg(test)]
    pub(crate) fn parse(&mut self, frame: &Frame<'_>, out: &mut Vec<Delta>) -> Result<(), StreamError> {
        self.parse_to(frame, out)
    }

    /// Parses one frame into `out` (a `Vec`, or the stream decoder's accumulator).
    pub(crate) fn parse_to(&mut self, frame: &Frame<'_>, out: &mut impl DeltaSink) -> Result<(), StreamError> {
        let (event, data) = match frame {
            Frame::Event { event, data, .. } => (*event, data.trim()),
            Frame::Comment(_) | Frame::Done => return Ok(()),
        };
        if data.is_empty() {
            return Ok(());
        }
        // The plain shape nearly every chunk has is read by its parts; any other is decoded.
        let mut chunk = match super::fast::chunk(data) {
            Some(chunk) => chunk,
            None => {
                let mut chunk = Chunk::default();
                in_place::parse_into(data, &mut chunk)?;
                chunk
            }
        };
        self.metadata(&chunk, out);
        let mut finish_error = false;
        let mut usage = chunk.usage.take().or(chunk.x_groq.take().and_then(|x| x.usage));
        // The chunk stays where it was decoded; its parts are taken out of it.
        if let Some(choice) = &mut chunk.choice {
            if let Some(delta) = &mut choice.delta {
                self.delta(delta, out);
            }
            usage = usage.or(choice.usage.take());
            if let Some(reason) = choice.finish_reason.0.take() {
                finish_error |= reason == "error";
                self.finish_reason(&reason, out);
            }
        }
        if let Some(usage) = usage {
            out.push(Delta::usage(usage.normalise()));
        }
        if let Some(error) = chunk.error {
            out.push(Delta::Error(in_stream_error(&error, data)));
        } else if event == "error" {
            let value: Value = parse_json(data)?;
            out.push(Delta::Error(in_stream_error(&value, data)));
        } else if finish_error {
            let message = "the provider ended the generation with finish_reason \"error\"";
            out.push(Delta::Error(ProviderError::new(None, Some("error".into()), message).with_body(data.as_bytes())));
        }
        Ok(())
    }

    pub(crate) fn finish(&mut self, out: &mut impl DeltaSink) {
        // Arguments of a call whose name never came are still worth keeping.
        self.start_nameless_tools(out);
    }

    fn metadata(&mut self, chunk: &Chunk<'_>, out: &mut impl DeltaSink) {
        let mut meta = MessageMeta::default();
        if let (None, Some(id)) = (&self.response_id, chunk.id.0.as_deref().filter(|s| !s.is_empty())) {
            self.response_id = Some(id.to_string());
            meta.id = Some(id.to_string());
        }
        if let (false, Some(model)) = (self.model_seen, chunk.model.0.as_deref().filter(|s| !s.is_empty())) {
            self.model_seen = true;
            meta.model = Some(model.to_string());
        }
        if meta.id.is_some() || meta.model.is_some() {
            out.push(Delta::Message(meta));
        }
    }

    fn delta(&mut self, delta: &mut ChunkDelta<'_>, out: &mut impl DeltaSink) {
        // `reasoning_content`: DeepSeek, Moonshot, Z.ai, Qwen, llama.cpp; `reasoning`:
        // OpenRouter, Groq, vLLM. A server sending both sends the same text twice.
        let reasoning = delta.reasoning_content.0.take().filter(|s| !s.is_empty()).or(delta.reasoning.0.take());
        if let Some(text) = reasoning.filter(|s| !s.is_empty()) {
            self.thinking_seen = true;
            out.push(Delta::BlockDelta { index: THINKING_KEY, delta: BlockDelta::Thinking(text.into()) });
        }
        if let Some(text) = delta.content.0.take().filter(|s| !s.is_empty()) {
            self.text_seen = true;
            out.push(Delta::BlockDelta { index: TEXT_KEY, delta: BlockDelta::Text(text.into()) });
        }
        if let Some(text) = delta.refusal.0.take().filter(|s| !s.is_empty()) {
            self.text_seen = true;
            self.refused = true;
            out.push(Delta::BlockDelta { index: TEXT_KEY, delta: BlockDelta::Text(text.into()) });
        }
        if let Some(calls) = delta.tool_calls.take() {
            self.saw_tool_calls = true;
            for (position, call) in calls.into_iter().enumerate() {
                let wire = call.index.unwrap_or(position as u64);
                let (name, arguments) = call.function.map(|f| (f.name.0, f.arguments.0)).unwrap_or_default();
                self.tool_delta(wire, call.id.0.as_deref(), name.as_deref(), arguments, out);
            }
        } else if let (false, Some(f)) = (self.saw_tool_calls, delta.function_call.take()) {
            // The deprecated `function_call` delta: one call, no id.
            self.tool_delta(0, None, f.name.0.as_deref(), f.arguments.0, out);
        }
    }

    fn tool_delta(
        &mut self,
        wire: u64,
        id: Option<&str>,
        name: Option<&str>,
        arguments: Option<Cow<'_, str>>,
        out: &mut impl DeltaSink,
    ) {
        let id = id.filter(|s| !s.is_empty());
        let existing = self.by_wire.get(&wire).copied();
        let pos = match existing {
            Some(pos) if !id.is_some_and(|id| !self.tools[pos].id.is_empty() && self.tools[pos].id != id) => pos,
            _ => {
                let key = FIRST_TOOL_KEY.saturating_add(u32::try_from(self.tools.len()).unwrap_or(u32::MAX));
                let slot = ToolSlot {
                    key,
                    id: String::new(),
                    name: String::new(),
                    started: false,
                    pending: String::new(),
                    to_stop: false,
                };
                self.tools.push(slot);
                let pos = self.tools.len() - 1;
                self.by_wire.insert(wire, pos);
                self.nameless.push(pos);
                pos
            }
        };
        let response_id = self.response_id.as_deref();
        let Some(slot) = self.tools.get_mut(pos) else { return };
        let arguments = arguments.filter(|a| !a.is_empty());
        if slot.started {
            if let Some(args) = arguments {
                if !slot.to_stop {
                    slot.to_stop = true;
                    self.to_stop.push(pos);
                }
                out.push(Delta::BlockDelta { index: slot.key, delta: BlockDelta::ToolInput(args.into()) });
            }
            return;
        }
        if let (true, Some(id)) = (slot.id.is_empty(), id) {
            slot.id = id.to_string();
        }
        if let Some(name) = name.filter(|n| !n.is_empty()) {
            slot.name = name.to_string();
        }
        if let Some(args) = arguments {
            slot.pending.push_str(&args);
        }
        if !slot.name.is_empty() {
            slot.start(response_id, out);
            slot.to_stop = true;
            self.to_stop.push(pos);
        }
    }

    fn start_nameless_tools(&mut self, out: &mut impl DeltaSink) {
        let response_id = self.response_id.as_deref();
        for pos in self.nameless.drain(..) {
            let Some(slot) = self.tools.get_mut(pos).filter(|t| !t.started) else { continue };
            slot.start(response_id, out);
            if !slot.to_stop {
                slot.to_stop = true;
                self.to_stop.push(pos);
            }
        }
    }

    fn finish_reason(&mut self, reason: &str, out: &mut impl DeltaSink) {
        self.start_nameless_tools(out);
        let keys = [(self.thinking_seen, THINKING_KEY), (self.text_seen, TEXT_KEY)];
        for (_, index) in keys.into_iter().filter(|(seen, _)| *seen) {
            out.push(Delta::BlockStop { index });
        }
        // Calls in the order they started or continued; sorted, they stop in call order.
        self.to_stop.sort_unstable();
        for pos in self.to_stop.drain(..) {
            if let Some(slot) = self.tools.get_mut(pos) {
                slot.to_stop = false;
                out.push(Delta::BlockStop { index: slot.key });
            }
        }
        let stop = match reason {
            "error" => return, // reported as an error by the caller
            "length" | "max_tokens" | "model_length" => StopReason::Length,
            // Only with a call to answer: a tool stop without one would leave a loop waiting.
            "tool_calls" | "function_call" | "tool_use" if !self.tools.is_empty() => StopReason::ToolUse,
            "content_filter" | "refusal" | "safety" => StopReason::Refusal,
            _ if self.refused => StopReason::Refusal,
            _ => StopReason::Stop,
        };
        out.push(Delta::stop(stop));
    }
}

impl ToolSlot {
    fn start(&mut self, response_id: Option<&str>, out: &mut impl DeltaSink) {
        self.started = true;
        if self.id.is_empty() {
            let n = self.key - FIRST_TOOL_KEY;
            self.id = match response_id {
                Some(r) => format!("call_{r}_{n}"),
                None => format!("call_{n}"),
            };
        }
        let kind = BlockKind::ToolUse { id: self.id.clone(), name: self.name.clone() };
        out.push(Delta::BlockStart { index: self.key, kind });
        if !self.pending.is_empty() {
            let args = std::mem::take(&mut self.pending);
            out.push(Delta::BlockDelta { index: self.key, delta: BlockDelta::ToolInput(args.into()) });
        }
    }
}

/// An in-stream error object: `{"error":{"message","type","code"}}` (OpenAI; Groq adds
/// `status_code`), or OpenRouter's `{"error":{"code":400,"message"}}` whose numeric code
/// is an HTTP status, used here to classify the error.
fn in_stream_error(value: &Value, raw: &str) -> ProviderError {
    let mut e = common::stream_error(value);
    let error = value.get("error").unwrap_or(value);
    let status = ["status_code", "code", "status"]
        .into_iter()
        .find_map(|k| error.get(k).and_then(Value::as_u64))
        .and_then(|s| u16::try_from(s).ok())
        .filter(|s| (400..600).contains(s));
    if let Some(status) = status {
        if e.code.is_none() {
            e.code = Some(status.to_string());
        }
        e.kind = ProviderError::classify(Some(status), e.code.as_deref(), &e.message);
    }
    e.with_body(raw.as_bytes())
}
