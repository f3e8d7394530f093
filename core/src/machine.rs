//! What a driver needs from a machine: the generate machine and the agent are driven by
//! the same loop (execute effects, feed what the requests and tools report, wake at the
//! deadline), so drivers write that loop once for both.

use std::time::Instant;

use crate::agent::{Agent, AgentCallbacks, AgentInput};
use crate::generate::{Effect, Generate, Input, RequestId, ToolOutcome, ToolRunId, TransportError};

/// What a request or a tool run reports to the machine that started it.
#[derive(Debug, Clone, PartialEq)]
pub enum Report<'a> {
    /// The response status and headers arrived.
    ResponseHead {
        /// Which request.
        id: RequestId,
        /// HTTP status.
        status: u16,
        /// Headers.
        headers: Vec<(String, String)>,
    },
    /// Body bytes arrived.
    Body {
        /// Which request.
        id: RequestId,
        /// The bytes.
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

/// A machine a driver loop can run: effects out, reports and deadlines in.
pub trait Machine {
    /// The next effect to execute.
    fn poll_effect(&mut self) -> Option<Effect>;
    /// The next deadline, if any.
    fn poll_timeout(&self) -> Option<Instant>;
    /// Acts on deadlines that have passed.
    fn handle_timeout(&mut self, now: Instant);
    /// Feeds what a request or tool run reported. Reports for unknown ids are ignored.
    fn handle_report(&mut self, report: Report<'_>, now: Instant);
}

impl Machine for Generate {
    fn poll_effect(&mut self) -> Option<Effect> {
        Generate::poll_effect(self)
    }
    fn poll_timeout(&self) -> Option<Instant> {
        Generate::poll_timeout(self)
    }
    fn handle_timeout(&mut self, now: Instant) {
        Generate::handle_timeout(self, now)
    }
    fn handle_report(&mut self, report: Report<'_>, now: Instant) {
        let input = match report {
            Report::ResponseHead { id, status, headers } => Input::ResponseHead { id, status, headers },
            Report::Body { id, bytes } => Input::Body { id, bytes },
            Report::BodyEnd { id } => Input::BodyEnd { id },
            Report::TransportFailed { id, error } => Input::TransportFailed { id, error },
            Report::ToolFinished { id, outcome } => Input::ToolFinished { id, outcome },
        };
        self.handle_input(input, now)
    }
}

impl<C: AgentCallbacks> Machine for Agent<C> {
    fn poll_effect(&mut self) -> Option<Effect> {
        Agent::poll_effect(self)
    }
    fn poll_timeout(&self) -> Option<Instant> {
        Agent::poll_timeout(self)
    }
    fn handle_timeout(&mut self, now: Instant) {
        Agent::handle_timeout(self, now)
    }
    fn handle_report(&mut self, report: Report<'_>, now: Instant) {
        let input = match report {
            Report::ResponseHead { id, status, headers } => AgentInput::ResponseHead { id, status, headers },
            Report::Body { id, bytes } => AgentInput::Body { id, bytes },
            Report::BodyEnd { id } => AgentInput::BodyEnd { id },
            Report::TransportFailed { id, error } => AgentInput::TransportFailed { id, error },
            Report::ToolFinished { id, outcome } => AgentInput::ToolFinished { id, outcome },
        };
        // Driver inputs are never refused (unknown ids are ignored).
        let _ = self.handle_input(input, now);
    }
}
