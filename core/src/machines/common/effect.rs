//! What every machine asks of its driver ([`Effect`]) and what the driver reports back
//! ([`Report`]), with the ids that tie the two.

use crate::data::message::ToolUse;
// How a tool run ended is data (a handler's output); it comes back in a `Report`.
pub use crate::data::tool::ToolOutcome;
use crate::machines::common::TransportError;
use crate::wire::http::HttpRequest;

/// Identifies one HTTP request; answers for other ids are ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RequestId(pub u64);

/// Identifies one tool run; answers for other ids are ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ToolRunId(pub u64);

/// Something the driver must do.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Send this request and feed back its head, body and end (or a transport failure).
    SendRequest {
        /// Id to answer with.
        id: RequestId,
        /// The request.
        request: HttpRequest,
    },
    /// Abort this request and drop its connection; send no more input for it.
    CancelRequest {
        /// Which request.
        id: RequestId,
    },
    /// Run this tool's handler on the call's input and answer with [`Report::ToolFinished`].
    RunTool {
        /// Id to answer with.
        id: ToolRunId,
        /// The call (name and validated input).
        call: ToolUse,
    },
    /// Stop this tool run; its answer, if any, will be ignored.
    CancelTool {
        /// Which run.
        id: ToolRunId,
    },
    /// Tell the application's telemetry (spans, metrics): nothing to run, nothing to
    /// answer. Only from a machine configured to observe
    /// ([`Observe`](crate::machines::observe::Observe)).
    Observe(crate::machines::observe::Observation),
}

/// What a request or a tool run reports to the machine that started it: the part of
/// every machine's input that drivers produce (fed by the drivers' shell, omni-shell).
#[derive(Debug, Clone, PartialEq)]
pub enum Report<'a> {
    /// The response status and headers arrived.
    ResponseHead {
        /// Which request.
        id: RequestId,
        /// HTTP status.
        status: u16,
        /// Headers (names in any case).
        headers: Vec<(String, String)>,
    },
    /// Body bytes arrived.
    Body {
        /// Which request.
        id: RequestId,
        /// The bytes (borrowed: the machine copies only what it must keep).
        bytes: &'a [u8],
    },
    /// The body ended.
    BodyEnd {
        /// Which request.
        id: RequestId,
    },
    /// The request failed below HTTP.
    TransportFailed {
        /// Which request.
        id: RequestId,
        /// What happened.
        error: TransportError,
    },
    /// A tool run ended.
    ToolFinished {
        /// Which run.
        id: ToolRunId,
        /// Its outcome.
        outcome: ToolOutcome,
    },
}

impl Report<'_> {
    /// The request this report is about (none for a tool run).
    pub fn request(&self) -> Option<RequestId> {
        match self {
            Report::ResponseHead { id, .. }
            | Report::Body { id, .. }
            | Report::BodyEnd { id }
            | Report::TransportFailed { id, .. } => Some(*id),
            Report::ToolFinished { .. } => None,
        }
    }
}
