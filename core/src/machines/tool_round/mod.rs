//! The tool round: the one sub-machine that answers the tool calls of a step, for the
//! generate machine and the agent alike.
//!
//! ```text
//!   new(calls) ─► decide: each call in order, through the policy ──┐ pause ─► (resume)
//!                   │ execute: known tool? input valid? ─ no ─► error result
//!                   │ a tool without handler ─► Unhandled (the caller's calls)
//!                   ▼ every call decided
//!                 runs start (parallel, each with its deadline)
//!                   │ finished / expired (cancelled) ─► result
//!                   ▼ every call has a result
//!                 results, in the order of the calls
//! ```
//!
//! One home for each decision of a round: which calls run and with what input
//! ([`decl::check_input`]), how long one may take ([`effective_tool_timeout`]), what a run's
//! outcome or its timeout tells the model, and the order of the results. The *policy*
//! ([`ToolPolicy`]) is the part that differs: the generate machine approves every call,
//! the agent asks its callbacks, which may pause the round until `resume`.
//!
//! Time is any [`Moment`]: the machines pass [`Instant`]s, the round's own tests a clock
//! of their own (the core reads none, even in tests).
#![warn(clippy::wildcard_enum_match_arm)]

mod decl;
#[cfg(test)]
mod tests;

pub(crate) use decl::{check_input, prepare_tools};
pub(crate) use decl::{duplicate_tool_name, effective_tool_timeout};
pub use decl::{ToolDecl, DEFAULT_TOOL_TIMEOUT};

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::data::message::{Block, ToolResult, ToolUse};
use crate::data::options::Options;
use crate::data::tool::{ToolError, ToolOutput};
use crate::machines::common::{Effect, ToolOutcome, ToolRunId};
use crate::machines::timer::Moment;

/// What happens with one tool call (also the answer to a pause, see
/// [`AgentInput::Resume`](crate::machines::agent::AgentInput::Resume)).
#[derive(Debug, Clone, PartialEq)]
pub enum ToolDecision {
    /// Run the tool's handler (after input validation). A tool without a handler ends the
    /// turn with stop reason `tool_use`, leaving the call to the application.
    Execute,
    /// Do not run it; the model sees this reason as an error result.
    Reject(String),
    /// Do not run it; the model sees this output (or error) instead.
    Result(Result<ToolOutput, ToolError>),
    /// Stop the agent until the application resumes with a decision for this call.
    Pause(String),
}

/// Who decides about each call of a round, and who sees each result.
pub(crate) trait ToolPolicy {
    /// Decides one call; calls are decided one at a time, in order.
    fn decide(&mut self, call: &ToolUse) -> ToolDecision;
    /// Sees a result as it becomes known (and may change it) before it is kept.
    fn seen(&mut self, result: ToolResult) -> ToolResult;
}

/// What the machine running a round has to offer it: the tools, the options (for time
/// limits), its id counter and effect queue, and the time.
pub(crate) struct Runner<'a, I = Instant> {
    pub(crate) tools: &'a [ToolDecl],
    pub(crate) options: &'a Options,
    pub(crate) next_id: &'a mut u64,
    pub(crate) effects: &'a mut VecDeque<Effect>,
    pub(crate) now: I,
}

/// Where deciding stopped.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Decided {
    /// Every call is decided and the approved ones run.
    All,
    /// The policy paused on this call (for this reason): the round waits for `resume`.
    Pause(ToolUse, String),
    /// `Execute` for a declared tool without a handler: the calls are the caller's.
    Unhandled,
}

#[derive(Debug)]
enum Slot<I> {
    Undecided,
    /// Approved with validated input; runs once every call is decided.
    Approved {
        call: ToolUse,
        limit: Duration,
    },
    Running {
        id: ToolRunId,
        deadline: I,
        limit: Duration,
    },
    Done(ToolResult),
}

/// The calls of one step and what became of them.
#[derive(Debug)]
pub(crate) struct ToolRound<I = Instant> {
    calls: Vec<ToolUse>,
    slots: Vec<Slot<I>>,
}

impl<I: Moment> ToolRound<I> {
    /// A round with every call undecided.
    pub(crate) fn new(calls: Vec<ToolUse>) -> Self {
        let slots = calls.iter().map(|_| Slot::Undecided).collect();
        Self { calls, slots }
    }

    /// Decides the calls still undecided, in order, until the policy pauses; once every
    /// call is decided, starts the approved runs (their effects, in call order).
    pub(crate) fn decide(&mut self, policy: &mut impl ToolPolicy, runner: &mut Runner<'_, I>) -> Decided {
        while let Some(index) = self.next_undecided() {
            let decision = policy.decide(&self.calls[index]);
            if let Some(stop) = self.apply(index, decision, policy, runner) {
                return stop;
            }
        }
        self.start_runs(runner);
        Decided::All
    }

    /// The decision for the call the round paused on, then the rest as in
    /// [`decide`](Self::decide).
    pub(crate) fn resume(
        &mut self,
        decision: ToolDecision,
        policy: &mut impl ToolPolicy,
        runner: &mut Runner<'_, I>,
    ) -> Decided {
        if let Some(index) = self.next_undecided() {
            if let Some(stop) = self.apply(index, decision, policy, runner) {
                return stop;
            }
        }
        self.decide(policy, runner)
    }

    fn next_undecided(&self) -> Option<usize> {
        self.slots.iter().position(|s| matches!(s, Slot::Undecided))
    }

    /// Applies one decision to call `index`: `Some` when deciding stops there.
    fn apply(
        &mut self,
        index: usize,
        decision: ToolDecision,
        policy: &mut impl ToolPolicy,
        runner: &Runner<'_, I>,
    ) -> Option<Decided> {
        let call = &self.calls[index];
        // A call that cannot run (its arguments were not JSON, or a text protocol's parser
        // found it malformed) never reaches a handler, nor an approval: the model is told
        // why. An application's own answer (a result, a rejection) stands.
        if let (Some(invalid), ToolDecision::Execute | ToolDecision::Pause(_)) = (&call.invalid, &decision) {
            let result = ToolResult::error(&call.id, &call.name, decl::invalid_call_message(call, invalid));
            self.record(index, result, policy);
            return None;
        }
        let result = match decision {
            ToolDecision::Pause(reason) => return Some(Decided::Pause(call.clone(), reason)),
            ToolDecision::Reject(reason) => ToolResult::error(&call.id, &call.name, reason),
            ToolDecision::Result(Ok(ToolOutput(content))) => {
                ToolResult { tool_use_id: call.id.clone(), name: call.name.clone(), content, is_error: false }
            }
            ToolDecision::Result(Err(ToolError(message))) => ToolResult::error(&call.id, &call.name, message),
            ToolDecision::Execute => match runner.tools.iter().find(|t| t.spec.name == call.name) {
                None => ToolResult::error(&call.id, &call.name, format!("unknown tool {:?}", call.name)),
                Some(decl) if !decl.executable => return Some(Decided::Unhandled),
                Some(decl) => match check_input(decl, call) {
                    Err(message) => ToolResult::error(&call.id, &call.name, message),
                    Ok(input) => {
                        let limit = effective_tool_timeout(Some(decl), runner.options);
                        self.slots[index] = Slot::Approved { call: ToolUse { input, ..call.clone() }, limit };
                        return None;
                    }
                },
            },
        };
        self.record(index, result, policy);
        None
    }

    /// A result is known: the policy sees it, then it is kept.
    fn record(&mut self, index: usize, result: ToolResult, policy: &mut impl ToolPolicy) {
        self.slots[index] = Slot::Done(policy.seen(result));
    }

    fn start_runs(&mut self, runner: &mut Runner<'_, I>) {
        for slot in &mut self.slots {
            if let Slot::Approved { call, limit } = slot {
                let id = ToolRunId(*runner.next_id);
                *runner.next_id += 1;
                let limit = *limit;
                runner.effects.push_back(Effect::RunTool { id, call: call.clone() });
                *slot = Slot::Running { id, deadline: runner.now + limit, limit };
            }
        }
    }

    /// A run ended: its result, from its outcome. False for unknown or answered runs.
    pub(crate) fn finish(&mut self, id: ToolRunId, outcome: ToolOutcome, policy: &mut impl ToolPolicy) -> bool {
        let Some(index) = self.slots.iter().position(|s| matches!(s, Slot::Running { id: r, .. } if *r == id)) else {
            return false;
        };
        let call = &self.calls[index];
        let result = match outcome {
            ToolOutcome::Ok(content) => {
                ToolResult { tool_use_id: call.id.clone(), name: call.name.clone(), content, is_error: false }
            }
            ToolOutcome::Err(message) => ToolResult::error(&call.id, &call.name, message),
            ToolOutcome::Panicked(message) => {
                ToolResult::error(&call.id, &call.name, format!("the tool failed unexpectedly: {message}"))
            }
        };
        self.record(index, result, policy);
        true
    }

    /// Ends every run whose deadline passed: it is cancelled and the model is told it
    /// timed out. False when none had.
    pub(crate) fn expire(&mut self, now: I, policy: &mut impl ToolPolicy, effects: &mut VecDeque<Effect>) -> bool {
        let mut any = false;
        for index in 0..self.slots.len() {
            let Slot::Running { id, deadline, limit } = self.slots[index] else { continue };
            if now < deadline {
                continue;
            }
            any = true;
            effects.push_back(Effect::CancelTool { id });
            let call = &self.calls[index];
            let result = ToolResult::error(&call.id, &call.name, format!("the tool timed out after {limit:?}"));
            self.record(index, result, policy);
        }
        any
    }

    /// The earliest deadline of a run still going.
    pub(crate) fn next_deadline(&self) -> Option<I> {
        self.slots
            .iter()
            .filter_map(|s| match s {
                Slot::Running { deadline, .. } => Some(*deadline),
                Slot::Undecided | Slot::Approved { .. } | Slot::Done(_) => None,
            })
            .min()
    }

    /// True when every call has a result.
    pub(crate) fn is_complete(&self) -> bool {
        self.slots.iter().all(|s| matches!(s, Slot::Done(_)))
    }

    /// Stops the round: the runs still going, to cancel.
    pub(crate) fn cancel(self) -> impl Iterator<Item = ToolRunId> {
        self.slots.into_iter().filter_map(|s| match s {
            Slot::Running { id, .. } => Some(id),
            Slot::Undecided | Slot::Approved { .. } | Slot::Done(_) => None,
        })
    }

    /// The results as content blocks, in the order of the calls (of a complete round).
    pub(crate) fn into_results(self) -> Vec<Block> {
        debug_assert!(self.is_complete(), "a round's results are taken once every call has one");
        self.slots
            .into_iter()
            .filter_map(|s| match s {
                Slot::Done(result) => Some(Block::ToolResult(result)),
                Slot::Undecided | Slot::Approved { .. } | Slot::Running { .. } => None,
            })
            .collect()
    }
}
