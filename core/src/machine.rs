//! What a driver needs from a machine: the generate machine and the agent are driven by
//! the same loop (execute effects, feed what the requests and tools report, wake at the
//! deadline), so drivers write that loop once for both.

use std::time::Instant;

use crate::agent::{Agent, AgentCallbacks, AgentInput};
pub use crate::generate::Report;
use crate::generate::{Effect, Generate, Input};

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
        self.handle_input(Input::Report(report), now)
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
        // Reports are never refused (unknown ids are ignored).
        let _ = self.handle_input(AgentInput::Report(report), now);
    }
}
