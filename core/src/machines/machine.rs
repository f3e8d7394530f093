//! The one contract of the machines a driver loop runs, as a trait: a loop (omni-shell's)
//! drives the generate machine and the agent alike through it, and the machine contract
//! test holds every implementation to it.

use std::time::Instant;

use crate::machines::agent::{Agent, AgentCallbacks, AgentEvent, AgentInput};
use crate::machines::common::{Effect, Report};
use crate::machines::generate::{Generate, GenerateEvent, Input};
use crate::machines::timer::Timer;

/// A machine a driver loop can run, and the one contract of every machine: built with
/// `new(.., now)`; `handle_input(input, now)` answers `Ok` or refuses with a typed error
/// (nothing changes); effects out ([`poll_effect`](Self::poll_effect), every one executed
/// before the next input: debug builds assert it), events out
/// ([`poll_event`](Self::poll_event)), and the next deadline with its reason
/// ([`poll_timeout`](Self::poll_timeout), from the machine's one timer table) for
/// [`handle_timeout`](Self::handle_timeout). Time is a value passed in: a machine never
/// reads the clock.
///
/// Implemented by [`Generate`] and [`Agent`]. The others keep the contract's shape but are
/// driven otherwise: the session machine's effects are the agent's and its store's
/// writes, and the manager's are the manager's own, so the shell hosts each in an adapter
/// that hands the loop only the [`Effect`]s it executes; the request and the tool round are
/// sub-machines, driven by the machine that owns them (they write into its effect and
/// event queues), never by a loop.
pub trait Machine {
    /// What the application observes.
    type Event;
    /// The next effect to execute.
    fn poll_effect(&mut self) -> Option<Effect>;
    /// The next event for the application.
    fn poll_event(&mut self) -> Option<Self::Event>;
    /// The next deadline and why, if any.
    fn poll_timeout(&self) -> Option<(Instant, Timer)>;
    /// Acts on deadlines that have passed.
    fn handle_timeout(&mut self, now: Instant);
    /// Feeds what a request or tool run reported. Reports for unknown ids are ignored
    /// (never refused).
    fn handle_report(&mut self, report: Report<'_>, now: Instant);
}

/// The contract written once for a machine whose own methods have the trait's names and
/// whose reports come as one of its inputs (`$report`).
macro_rules! machine_by_its_own_methods {
    ($machine:ty, $event:ty, $report:path $(, $generic:ident: $bound:path)?) => {
        impl$(<$generic: $bound>)? Machine for $machine {
            type Event = $event;
            fn poll_effect(&mut self) -> Option<Effect> {
                Self::poll_effect(self)
            }
            fn poll_event(&mut self) -> Option<$event> {
                Self::poll_event(self)
            }
            fn poll_timeout(&self) -> Option<(Instant, Timer)> {
                Self::poll_timeout(self)
            }
            fn handle_timeout(&mut self, now: Instant) {
                Self::handle_timeout(self, now)
            }
            fn handle_report(&mut self, report: Report<'_>, now: Instant) {
                // Reports are never refused (unknown ids are ignored).
                let _ = self.handle_input($report(report), now);
            }
        }
    };
}

machine_by_its_own_methods!(Generate, GenerateEvent, Input::Report);
machine_by_its_own_methods!(Agent<C>, AgentEvent, AgentInput::Report, C: AgentCallbacks);
