//! What the generate machine is told (inputs) and what the application observes
//! (events). The effects, reports and errors it shares with every machine are in
//! [`crate::machines::common`].

use std::fmt;
use std::time::Duration;

use crate::data::event::StreamEvent;
use crate::data::message::ToolResult;
use crate::data::response::Response;
use crate::machines::common::{GenerateError, Report};

/// Something the driver tells the generate machine.
#[derive(Debug, Clone, PartialEq)]
pub enum Input<'a> {
    /// A request or a tool run reported progress.
    Report(Report<'a>),
    /// The caller cancels the whole call.
    Cancel,
}

/// Why the generate machine refused an input; nothing changed. (The agent's refusals
/// are its [`AgentError`](crate::machines::agent::AgentError)s: every machine refuses with a typed
/// error from `handle_input`.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum InputError {
    /// `Cancel` after the call ended: nothing to cancel.
    Finished,
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Finished => f.write_str("the call has ended: nothing to cancel"),
        }
    }
}

impl std::error::Error for InputError {}

impl GenerateEvent {
    /// The new text of a streamed text delta (of any step); `None` for any other event:
    /// `if let Some(text) = event.text_delta() { print!("{text}") }`.
    pub fn text_delta(&self) -> Option<&str> {
        self.stream_event().and_then(StreamEvent::text_delta)
    }

    /// The streamed event, for an event of a step's stream.
    pub fn stream_event(&self) -> Option<&StreamEvent> {
        if let Self::Stream { event, .. } = self {
            Some(event)
        } else {
            None
        }
    }

    /// Whether this event ends the call (`Finished` or `Failed`).
    pub fn is_terminal(&self) -> bool {
        matches!(self, Self::Finished(_) | Self::Failed { .. })
    }
}

/// What the application observes.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum GenerateEvent {
    /// A streaming event of step `step` (0-based). Each step ends with `Done`.
    Stream {
        /// Step number.
        step: u32,
        /// The event.
        event: StreamEvent,
    },
    /// A request failed and will be sent again after `delay`.
    Retry {
        /// Step number.
        step: u32,
        /// Retry number, 1-based.
        attempt: u32,
        /// Wait before sending.
        delay: Duration,
        /// What failed (boxed, as every rare large payload: an event stays small to move).
        error: Box<GenerateError>,
    },
    /// The reply is not valid structured output; the model is asked for a correction.
    OutputRetry {
        /// Step of the invalid reply.
        step: u32,
        /// Correction number, 1-based.
        attempt: u32,
        /// What is wrong with the reply (the message the model sees).
        error: String,
    },
    /// A tool call finished (or was refused); this is what the model will see.
    ToolResult {
        /// Step number of the call.
        step: u32,
        /// The result (boxed: see `Retry`).
        result: Box<ToolResult>,
    },
    /// The call finished: the final response (stop reason `cancelled` after a cancel).
    Finished(Box<Response>),
    /// The call failed; `partial` keeps everything received.
    Failed {
        /// What went wrong (boxed: see `Retry`).
        error: Box<GenerateError>,
        /// Everything received until then.
        partial: Box<Response>,
    },
}
