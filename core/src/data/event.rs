//! Consumer events: what an application observes while a response streams in.

use serde::{Deserialize, Serialize};

use crate::data::error::StreamError;
use crate::data::message::ToolUse;
use crate::data::response::StopReason;
use crate::data::usage::Usage;

/// The text a delta carries: a streamed token, a piece of reasoning, a fragment of a tool
/// call's JSON input. It reads as a `str` (`Deref`, `Display`, comparisons with `str` and
/// `String`); `into_string()` gives a `String`.
///
/// Up to 24 bytes are stored inline, and a streamed token rarely is longer: a stream of
/// many small deltas costs no allocation per delta, and none is freed on the
/// application's thread after being allocated on the loop's.
pub type Fragment = compact_str::CompactString;

/// One streaming event. `index` is the block's position in the message content.
///
/// Serialised with a snake-case `type` tag, e.g. `{"type":"text_delta","index":0,"delta":"Hi"}`.
///
/// A stream is mostly deltas, and every event is moved several times on its way to the
/// application (from the decoder through the machine to the consumer): the rare large
/// payloads (a finished tool call, the final usage, an error) are boxed, so that an event
/// is a few words and a move costs a few instructions, not a `memcpy` call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum StreamEvent {
    /// A text block begins.
    TextStart {
        /// Block position.
        index: usize,
    },
    /// Text arrived.
    TextDelta {
        /// Block position.
        index: usize,
        /// The new text.
        delta: Fragment,
    },
    /// A text block is complete.
    TextEnd {
        /// Block position.
        index: usize,
        /// The whole text of the block.
        text: String,
    },
    /// A thinking block begins.
    ThinkingStart {
        /// Block position.
        index: usize,
    },
    /// Reasoning text arrived.
    ThinkingDelta {
        /// Block position.
        index: usize,
        /// The new text.
        delta: Fragment,
    },
    /// A thinking block is complete.
    ThinkingEnd {
        /// Block position.
        index: usize,
        /// The whole reasoning text.
        text: String,
        /// Opaque signature, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
        /// True for redacted thinking.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        redacted: bool,
    },
    /// A tool call begins.
    ToolUseStart {
        /// Block position.
        index: usize,
        /// Call id.
        id: String,
        /// Tool name.
        name: String,
    },
    /// A fragment of the tool call's JSON input.
    ToolUseDelta {
        /// Block position.
        index: usize,
        /// The fragment.
        delta: Fragment,
    },
    /// A tool call is complete and its input parsed.
    ToolUseEnd {
        /// Block position.
        index: usize,
        /// The complete call. When its input is not valid JSON, `input` holds the raw
        /// text as a JSON string and `input_error` says why. Boxed, as are the other rare
        /// large payloads, so that every event stays small to move (see the enum's doc).
        tool_use: Box<ToolUse>,
        /// The JSON parser's message for invalid input.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        input_error: Option<String>,
    },
    /// The message is complete.
    Done {
        /// Why it stopped.
        stop_reason: StopReason,
        /// Final usage (boxed: see the enum's doc).
        usage: Box<Usage>,
    },
    /// The stream failed; the partial response keeps everything received.
    Error {
        /// What went wrong (boxed: see the enum's doc).
        error: Box<StreamError>,
    },
}

impl StreamEvent {
    /// The new text of a text delta; `None` for any other event.
    pub fn text_delta(&self) -> Option<&str> {
        match self {
            Self::TextDelta { delta, .. } => Some(delta),
            _ => None,
        }
    }

    /// The new text of a thinking delta; `None` for any other event.
    pub fn thinking_delta(&self) -> Option<&str> {
        match self {
            Self::ThinkingDelta { delta, .. } => Some(delta),
            _ => None,
        }
    }
}
