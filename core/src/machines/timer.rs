//! The machines' deadlines, named: one table per machine, built from its state, from
//! which `poll_timeout` takes the earliest
//! deadline with its reason and `handle_timeout` learns which ones passed (quinn-proto's
//! `connection/timer.rs` pattern; firezone's connlib answers `(Instant, &'static str)`).
#![warn(clippy::wildcard_enum_match_arm)]

use std::fmt;
use std::ops::Add;
use std::time::Duration;

/// A point in time as the sub-machines need it: ordered, and moved by a duration. The
/// machines pass [`Instant`](std::time::Instant)s; the sub-machines' own tests a clock of
/// their own (the core reads none, even in tests).
pub(crate) trait Moment: Copy + Ord + Add<Duration, Output = Self> {}

impl<T: Copy + Ord + Add<Duration, Output = T>> Moment for T {}

/// Why a machine wants to be woken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Timer {
    /// The request's total time (the `timeout` option) runs out.
    RequestTimeout,
    /// The stream made no progress for the stall timeout.
    Stall,
    /// A failed request is sent again (the retry policy's backoff).
    RetryBackoff,
    /// A tool run's time limit passes.
    ToolDeadline,
    /// A step that `handle_error` asked to retry is sent again (the agent's error backoff).
    StepBackoff,
    /// A session's lease on its place in the store is due for renewal.
    LeaseRenewal,
    /// An unused session's idle shutdown (the session manager's).
    IdleShutdown,
    /// A lease may have lapsed unrenewed (the session manager's).
    LeaseLapse,
    /// An MCP request's time limit: its timeout (which progress on a tool call restarts)
    /// or its hard maximum, whichever comes first.
    McpRequest,
}

impl Timer {
    /// Every timer, in the table's order (the earliest deadline wins; on a tie, the first).
    pub const ALL: [Self; 9] = [
        Self::RequestTimeout,
        Self::Stall,
        Self::RetryBackoff,
        Self::ToolDeadline,
        Self::StepBackoff,
        Self::LeaseRenewal,
        Self::IdleShutdown,
        Self::LeaseLapse,
        Self::McpRequest,
    ];

    /// A short name for logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::RequestTimeout => "request timeout",
            Self::Stall => "stall",
            Self::RetryBackoff => "retry backoff",
            Self::ToolDeadline => "tool deadline",
            Self::StepBackoff => "step backoff",
            Self::LeaseRenewal => "lease renewal",
            Self::IdleShutdown => "idle shutdown",
            Self::LeaseLapse => "lease lapse",
            Self::McpRequest => "mcp request",
        }
    }

    fn index(self) -> usize {
        match self {
            Self::RequestTimeout => 0,
            Self::Stall => 1,
            Self::RetryBackoff => 2,
            Self::ToolDeadline => 3,
            Self::StepBackoff => 4,
            Self::LeaseRenewal => 5,
            Self::IdleShutdown => 6,
            Self::LeaseLapse => 7,
            Self::McpRequest => 8,
        }
    }
}

impl fmt::Display for Timer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A deadline per timer (or none). `I` is the machines' instant (tests use their own).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TimerTable<I> {
    at: [Option<I>; Timer::ALL.len()],
}

impl<I: Copy + Ord> Default for TimerTable<I> {
    fn default() -> Self {
        Self { at: [None; Timer::ALL.len()] }
    }
}

impl<I: Copy + Ord> TimerTable<I> {
    /// Sets `timer`'s deadline (`None` clears it).
    pub(crate) fn set(&mut self, timer: Timer, at: Option<I>) {
        self.at[timer.index()] = at;
    }

    /// `timer`'s deadline.
    pub(crate) fn get(&self, timer: Timer) -> Option<I> {
        self.at[timer.index()]
    }

    /// True when `timer` is set and its deadline is at or before `now`.
    pub(crate) fn expired(&self, timer: Timer, now: I) -> bool {
        self.get(timer).is_some_and(|at| at <= now)
    }

    /// The earliest deadline and its timer.
    pub(crate) fn next(&self) -> Option<(I, Timer)> {
        Timer::ALL.iter().filter_map(|&t| self.get(t).map(|at| (at, t))).min_by_key(|&(at, _)| at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_earliest_deadline_comes_with_its_reason() {
        let mut table = TimerTable::<u32>::default();
        assert_eq!(table.next(), None);
        table.set(Timer::Stall, Some(120));
        table.set(Timer::RequestTimeout, Some(30));
        assert_eq!(table.next(), Some((30, Timer::RequestTimeout)));
        assert!(!table.expired(Timer::RequestTimeout, 29));
        assert!(table.expired(Timer::RequestTimeout, 30));
        assert!(!table.expired(Timer::ToolDeadline, 1_000), "an unset timer never expires");
        table.set(Timer::RequestTimeout, None);
        assert_eq!(table.next(), Some((120, Timer::Stall)));
        table.set(Timer::RetryBackoff, Some(120));
        assert_eq!(table.next(), Some((120, Timer::Stall)), "a tie goes to the table's first");
        assert_eq!(Timer::ToolDeadline.to_string(), "tool deadline");
    }
}
