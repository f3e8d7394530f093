//! Deltas: the small closed set of facts a dialect extracts from one stream event.
//!
//! Dialects turn provider events into deltas; the [`Accumulator`](crate::wire::accumulator::Accumulator)
//! turns deltas into consumer events and a growing response. Block indices are chosen
//! by the dialect and only need to be distinct per block within one message; the
//! accumulator maps them to positions in the message content.

use crate::data::error::ProviderError;
use crate::data::event::Fragment;
use crate::data::response::StopReason;

/// One fact from the stream.
#[derive(Debug, Clone, PartialEq)]
pub enum Delta {
    /// Message-level metadata: any field that is `Some` replaces what was known.
    Message(MessageMeta),
    /// A block begins.
    BlockStart {
        /// Dialect-chosen block key.
        index: u32,
        /// What kind of block.
        kind: BlockKind,
    },
    /// More content for a block (a missing start is filled in from the delta's kind).
    BlockDelta {
        /// Dialect-chosen block key.
        index: u32,
        /// The content.
        delta: BlockDelta,
    },
    /// A block is complete.
    BlockStop {
        /// Dialect-chosen block key.
        index: u32,
    },
    /// The provider reported an error inside the stream.
    Error(ProviderError),
}

/// The kind of a block, with what is known when it starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BlockKind {
    /// Text.
    Text,
    /// Reasoning; `id` is the provider item id where one exists (Responses).
    Thinking {
        /// Provider item id.
        id: Option<String>,
    },
    /// Reasoning the provider withheld; only opaque data.
    RedactedThinking {
        /// Opaque data to send back.
        data: String,
    },
    /// A tool call.
    ToolUse {
        /// Call id.
        id: String,
        /// Tool name.
        name: String,
    },
}

/// Content for a block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BlockDelta {
    /// Text for a text block.
    Text(Fragment),
    /// Reasoning text for a thinking block.
    Thinking(Fragment),
    /// Opaque signature for the block (appended: some providers stream it in pieces).
    Signature(Fragment),
    /// A fragment of a tool call's JSON input.
    ToolInput(Fragment),
    /// The tool call is not a valid one, whatever its input says (a text protocol's
    /// malformed call or unknown tool): it ends with this as its input error, so the tool
    /// loop answers the model with the error instead of running anything.
    ToolInputInvalid {
        /// What was wrong.
        reason: Fragment,
        /// The text the call was read from, as the model wrote it (a text protocol's span).
        raw: Option<Fragment>,
    },
}

/// Message-level metadata.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MessageMeta {
    /// Provider message or response id.
    pub id: Option<String>,
    /// Model id as the provider reports it.
    pub model: Option<String>,
    /// Why the model stopped.
    pub stop_reason: Option<StopReason>,
    /// Usage counters seen so far.
    pub usage: Option<UsageUpdate>,
}

/// Usage counters, already normalised to [`Usage`](crate::data::usage::Usage)'s meaning.
/// Each `Some` field replaces the previous value (providers report running totals).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct UsageUpdate {
    /// Uncached input tokens.
    pub input_tokens: Option<u64>,
    /// Output tokens, reasoning included.
    pub output_tokens: Option<u64>,
    /// Cache reads.
    pub cache_read_tokens: Option<u64>,
    /// Cache writes.
    pub cache_write_tokens: Option<u64>,
    /// Reasoning part of output.
    pub reasoning_tokens: Option<u64>,
}

impl UsageUpdate {
    /// Applies this update to a usage record.
    pub fn apply_to(&self, usage: &mut crate::data::usage::Usage) {
        let set = |dst: &mut u64, src: Option<u64>| {
            if let Some(v) = src {
                *dst = v;
            }
        };
        set(&mut usage.input_tokens, self.input_tokens);
        set(&mut usage.output_tokens, self.output_tokens);
        set(&mut usage.cache_read_tokens, self.cache_read_tokens);
        set(&mut usage.cache_write_tokens, self.cache_write_tokens);
        set(&mut usage.reasoning_tokens, self.reasoning_tokens);
    }
}

impl Delta {
    /// A metadata delta carrying only a stop reason.
    pub fn stop(reason: StopReason) -> Self {
        Self::Message(MessageMeta { stop_reason: Some(reason), ..MessageMeta::default() })
    }

    /// A metadata delta carrying only usage.
    pub fn usage(usage: UsageUpdate) -> Self {
        Self::Message(MessageMeta { usage: Some(usage), ..MessageMeta::default() })
    }
}
