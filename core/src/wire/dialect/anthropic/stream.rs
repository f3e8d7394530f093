//! Parsing the Messages API event stream.
//!
//! ```text
//!  message_start ─► (content_block_start ─► content_block_delta* ─► content_block_stop)*
//!                ─► message_delta (stop_reason, cumulative usage) ─► message_stop
//!  ping: anywhere, nothing.   error: anywhere, terminal.
//! ```
//!
//! Blocks are keyed by Anthropic's content `index`, mapped through a [`BlockIndexer`]
//! so a second `message_start` in one stream (seen from gateways) starts fresh
//! indices instead of writing into the first message's blocks. Blocks this library
//! does not model (`server_tool_use`, `web_search_tool_result`, future types) are
//! remembered and their deltas skipped: they are run by the provider, not the caller.
//! The event kind comes from the payload's `type`, falling back to the SSE `event:`
//! name, so JSON-lines replays and servers that omit `message_start` (llama.cpp) decode.

use std::borrow::Cow;
use std::collections::BTreeSet;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use super::hot::{exact, BlockDeltaBody, DeltaEvent, DeltaKind};
use crate::data::error::StreamError;
use crate::data::response::StopReason;
use crate::wire::delta::{BlockDelta, BlockKind, Delta, MessageMeta, UsageUpdate};
use crate::wire::dialect::common::{parse_json, stream_error, BlockIndexer};
use crate::wire::dialect::DeltaSink;
use crate::wire::framing::Frame;

/// Per-stream state of the `anthropic_messages` dialect.
#[derive(Debug, Default)]
pub struct StreamState {
    blocks: BlockIndexer,
    /// Anthropic indices of the current message's blocks that are not forwarded.
    ignored: BTreeSet<u64>,
    /// A stop reason was reported for the current message.
    stopped: bool,
}

/// A string that borrows from the payload when it has no escapes.
#[derive(Deserialize)]
#[serde(transparent)]
pub(super) struct Str<'a>(#[serde(borrow)] pub(super) Cow<'a, str>);

impl Str<'_> {
    pub(super) fn as_str(&self) -> &str {
        &self.0
    }
}

fn owned(s: Option<Str<'_>>) -> Option<String> {
    s.map(|s| s.0.into_owned())
}

/// The hot event, `content_block_delta`, recognised by the prefix Anthropic always
/// writes, and decoded by hand into the little it carries ([`DeltaEvent`]).
const DELTA_PREFIX: &str = r#"{"type":"content_block_delta""#;

/// Every event type in one flat struct: one typed pass, no intermediate tree. The
/// rare, large parts are boxed so the common events stay small to build and move.
#[derive(Deserialize)]
struct RawEvent<'a> {
    #[serde(borrow, rename = "type")]
    kind: Option<Str<'a>>,
    index: Option<u64>,
    #[serde(borrow)]
    delta: Option<Box<RawDelta<'a>>>,
    #[serde(borrow)]
    content_block: Option<Box<RawBlock<'a>>>,
    #[serde(borrow)]
    message: Option<Box<RawMessage<'a>>>,
    usage: Option<Box<RawUsage>>,
}

/// `content_block_delta.delta` and `message_delta.delta`.
#[derive(Deserialize)]
struct RawDelta<'a> {
    #[serde(borrow, rename = "type")]
    kind: Option<Str<'a>>,
    #[serde(borrow)]
    text: Option<Str<'a>>,
    #[serde(borrow)]
    thinking: Option<Str<'a>>,
    #[serde(borrow)]
    signature: Option<Str<'a>>,
    #[serde(borrow)]
    partial_json: Option<Str<'a>>,
    #[serde(borrow)]
    stop_reason: Option<Str<'a>>,
}

/// `content_block_start.content_block`.
#[derive(Deserialize)]
struct RawBlock<'a> {
    #[serde(borrow, rename = "type")]
    kind: Option<Str<'a>>,
    #[serde(borrow)]
    id: Option<Str<'a>>,
    #[serde(borrow)]
    name: Option<Str<'a>>,
    #[serde(borrow)]
    input: Option<&'a RawValue>,
    #[serde(borrow)]
    text: Option<Str<'a>>,
    #[serde(borrow)]
    thinking: Option<Str<'a>>,
    #[serde(borrow)]
    signature: Option<Str<'a>>,
    #[serde(borrow)]
    data: Option<Str<'a>>,
}

/// `message_start.message`.
#[derive(Deserialize)]
struct RawMessage<'a> {
    #[serde(borrow)]
    id: Option<Str<'a>>,
    #[serde(borrow)]
    model: Option<Str<'a>>,
    #[serde(borrow)]
    stop_reason: Option<Str<'a>>,
    usage: Option<RawUsage>,
}

/// Usage as Anthropic reports it: `input_tokens` already excludes cache reads and writes.
#[derive(Deserialize)]
struct RawUsage {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    cache_creation_input_tokens: Option<u64>,
    cache_read_input_tokens: Option<u64>,
    output_tokens_details: Option<RawOutputDetails>,
}

#[derive(Deserialize)]
struct RawOutputDetails {
    thinking_tokens: Option<u64>,
}

impl RawUsage {
    fn update(&self) -> UsageUpdate {
        UsageUpdate {
            input_tokens: self.input_tokens,
            output_tokens: self.output_tokens,
            cache_read_tokens: self.cache_read_input_tokens,
            cache_write_tokens: self.cache_creation_input_tokens,
            reasoning_tokens: self.output_tokens_details.as_ref().and_then(|d| d.thinking_tokens),
        }
    }
}

/// Maps every documented `stop_reason`; an unknown one is a normal stop.
fn stop_reason(reason: &str) -> StopReason {
    match reason {
        "max_tokens" | "model_context_window_exceeded" => StopReason::Length,
        "tool_use" => StopReason::ToolUse,
        "refusal" => StopReason::Refusal,
        // `end_turn`, `stop_sequence`; `pause_turn` (a server tool loop paused: the caller
        // may send the turn back to continue) and `pause_run` also end this response.
        _ => StopReason::Stop,
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
            return Ok(()); // comments and `[DONE]` carry nothing here
        };
        if data.starts_with(DELTA_PREFIX) {
            let hot: DeltaEvent<'_> = match exact(data) {
                Some(hot) => hot,
                None => parse_json(data)?,
            };
            self.block_delta(hot.index, hot.delta, out);
            return Ok(());
        }
        if data.trim().is_empty() {
            return Ok(());
        }
        let raw: RawEvent<'_> = parse_json(data)?;
        let kind = raw.kind.as_ref().map_or(event, Str::as_str);
        match kind {
            "content_block_delta" => self.block_delta(raw.index, raw.delta.map(|d| d.into_body()), out),
            "content_block_start" => self.block_start(raw, out),
            "content_block_stop" => {
                let key = raw.index.unwrap_or(0);
                if let Some(index) = self.blocks.get(key).filter(|_| !self.ignored.contains(&key)) {
                    out.push(Delta::BlockStop { index });
                }
            }
            "message_start" => self.message_start(raw, out),
            "message_delta" => {
                let reason = raw.delta.and_then(|d| d.stop_reason).map(|r| stop_reason(r.as_str()));
                self.stopped |= reason.is_some();
                let usage = raw.usage.as_deref().map(RawUsage::update);
                if reason.is_some() || usage.is_some() {
                    out.push(Delta::Message(MessageMeta { stop_reason: reason, usage, ..MessageMeta::default() }));
                }
            }
            // The message is complete even if no `message_delta` said why.
            "message_stop" if !self.stopped => {
                self.stopped = true;
                out.push(Delta::stop(StopReason::Stop));
            }
            "error" => {
                let value: Value = parse_json(data)?;
                out.push(Delta::Error(stream_error(&value)));
            }
            _ => {} // `ping` and event types added after this was written
        }
        Ok(())
    }

    pub(crate) fn finish(&mut self, _out: &mut impl DeltaSink) {
        // Nothing is held back: every event is forwarded as it arrives.
    }

    fn message_start(&mut self, raw: RawEvent<'_>, out: &mut impl DeltaSink) {
        self.blocks.reset_keys();
        self.ignored.clear();
        self.stopped = false;
        let Some(message) = raw.message else { return };
        let stop = message.stop_reason.map(|r| stop_reason(r.as_str()));
        self.stopped = stop.is_some();
        out.push(Delta::Message(MessageMeta {
            id: owned(message.id),
            model: owned(message.model),
            stop_reason: stop,
            usage: message.usage.as_ref().map(RawUsage::update),
        }));
    }

    fn block_start(&mut self, raw: RawEvent<'_>, out: &mut impl DeltaSink) {
        let key = raw.index.unwrap_or(0);
        let Some(block) = raw.content_block else { return };
        let kind = match block.kind.as_ref().map(Str::as_str) {
            Some("text") => BlockKind::Text,
            Some("thinking") => BlockKind::Thinking { id: None },
            Some("redacted_thinking") => BlockKind::RedactedThinking { data: owned(block.data).unwrap_or_default() },
            Some("tool_use") => BlockKind::ToolUse {
                id: owned(block.id).unwrap_or_default(),
                name: owned(block.name).unwrap_or_default(),
            },
            _ => {
                self.ignored.insert(key);
                return;
            }
        };
        self.ignored.remove(&key);
        let (index, _) = self.blocks.index(key);
        out.push(Delta::BlockStart { index, kind });
        // The start normally carries empty content; forward any that a server put there.
        let mut initial = |delta: BlockDelta| out.push(Delta::BlockDelta { index, delta });
        if let Some(text) = block.text.filter(|t| !t.0.is_empty()) {
            initial(BlockDelta::Text(text.0.into()));
        }
        if let Some(thinking) = block.thinking.filter(|t| !t.0.is_empty()) {
            initial(BlockDelta::Thinking(thinking.0.into()));
        }
        if let Some(signature) = block.signature.filter(|s| !s.0.is_empty()) {
            initial(BlockDelta::Signature(signature.0.into()));
        }
        if let Some(input) = block.input.map(RawValue::get).filter(|i| !is_empty_input(i)) {
            initial(BlockDelta::ToolInput(input.into()));
        }
    }

    fn block_delta(&mut self, index: Option<u64>, delta: Option<BlockDeltaBody<'_>>, out: &mut impl DeltaSink) {
        let key = index.unwrap_or(0);
        let Some(d) = delta else { return };
        if self.ignored.contains(&key) {
            return;
        }
        let content = d.content.map(crate::data::event::Fragment::from).unwrap_or_default();
        let delta = match d.kind {
            DeltaKind::Text => BlockDelta::Text(content),
            DeltaKind::Thinking => BlockDelta::Thinking(content),
            DeltaKind::Signature => BlockDelta::Signature(content),
            DeltaKind::InputJson => BlockDelta::ToolInput(content),
            DeltaKind::Other => return, // `citations_delta` and later kinds
        };
        let (index, _) = self.blocks.index(key);
        out.push(Delta::BlockDelta { index, delta });
    }
}

impl<'a> RawDelta<'a> {
    /// The content block delta this is, in the hot path's shape.
    fn into_body(self) -> BlockDeltaBody<'a> {
        let kind = DeltaKind::from_type(self.kind.as_ref().map(Str::as_str));
        let content = match kind {
            DeltaKind::Text => self.text,
            DeltaKind::Thinking => self.thinking,
            DeltaKind::Signature => self.signature,
            DeltaKind::InputJson => self.partial_json,
            DeltaKind::Other => None,
        };
        BlockDeltaBody { kind, content: content.map(|s| s.0) }
    }
}

/// `{}` (with any whitespace inside) or `null`: a start without input.
fn is_empty_input(json: &str) -> bool {
    let json = json.trim();
    json == "null" || json.strip_prefix('{').and_then(|s| s.strip_suffix('}')).is_some_and(|s| s.trim().is_empty())
}
