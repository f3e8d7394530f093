//! The agent's tool phase: one slot per call of a step. Calls are decided one at a
//! time (the machine asks the callbacks), approved ones then run in parallel with
//! their own deadlines, and the results go back in the order of the calls.

use std::time::{Duration, Instant};

use crate::generate::{Effect, ToolOutcome, ToolRunId};
use crate::message::{Block, Message, Role, ToolResult, ToolUse};

#[derive(Debug)]
enum Slot {
    Undecided,
    /// Approved with validated input; runs once every call is decided.
    Approved {
        call: ToolUse,
        limit: Duration,
    },
    Running {
        id: ToolRunId,
        deadline: Instant,
        limit: Duration,
    },
    Done(ToolResult),
}

/// The calls of one step and what became of them.
#[derive(Debug)]
pub(super) struct ToolRound {
    calls: Vec<ToolUse>,
    slots: Vec<Slot>,
}

impl ToolRound {
    pub(super) fn new(calls: Vec<ToolUse>) -> Self {
        let slots = calls.iter().map(|_| Slot::Undecided).collect();
        ToolRound { calls, slots }
    }

    /// The first call still waiting for a decision.
    pub(super) fn next_undecided(&self) -> Option<(usize, &ToolUse)> {
        let index = self.slots.iter().position(|s| matches!(s, Slot::Undecided))?;
        self.calls.get(index).map(|call| (index, call))
    }

    pub(super) fn approve(&mut self, index: usize, call: ToolUse, limit: Duration) {
        if let Some(slot) = self.slots.get_mut(index) {
            *slot = Slot::Approved { call, limit };
        }
    }

    pub(super) fn set_result(&mut self, index: usize, result: ToolResult) {
        if let Some(slot) = self.slots.get_mut(index) {
            *slot = Slot::Done(result);
        }
    }

    /// Starts every approved call: the run effects, in call order.
    pub(super) fn start_runs(&mut self, next_id: &mut u64, now: Instant) -> Vec<Effect> {
        let mut effects = Vec::new();
        for slot in &mut self.slots {
            if let Slot::Approved { call, limit } = slot {
                let id = ToolRunId(*next_id);
                *next_id += 1;
                let limit = *limit;
                effects.push(Effect::RunTool { id, call: call.clone() });
                *slot = Slot::Running { id, deadline: now + limit, limit };
            }
        }
        effects
    }

    /// A run's raw result, with its call index; `None` for unknown or answered runs.
    pub(super) fn finish(&self, id: ToolRunId, outcome: ToolOutcome) -> Option<(usize, ToolResult)> {
        let index = self.slots.iter().position(|s| matches!(s, Slot::Running { id: r, .. } if *r == id))?;
        let call = self.calls.get(index)?;
        let result = match outcome {
            ToolOutcome::Ok(content) => {
                ToolResult { tool_use_id: call.id.clone(), name: call.name.clone(), content, is_error: false }
            }
            ToolOutcome::Err(message) => ToolResult::error(&call.id, &call.name, message),
            ToolOutcome::Panicked(message) => {
                ToolResult::error(&call.id, &call.name, format!("the tool failed unexpectedly: {message}"))
            }
        };
        Some((index, result))
    }

    /// Runs whose deadline passed: id to cancel, call index and timeout result.
    pub(super) fn expired(&self, now: Instant) -> Vec<(ToolRunId, usize, ToolResult)> {
        let mut out = Vec::new();
        for (index, (slot, call)) in self.slots.iter().zip(&self.calls).enumerate() {
            if let Slot::Running { id, deadline, limit } = slot {
                if now >= *deadline {
                    let result = ToolResult::error(&call.id, &call.name, format!("the tool timed out after {limit:?}"));
                    out.push((*id, index, result));
                }
            }
        }
        out
    }

    pub(super) fn next_deadline(&self) -> Option<Instant> {
        self.slots
            .iter()
            .filter_map(|s| match s {
                Slot::Running { deadline, .. } => Some(*deadline),
                _ => None,
            })
            .min()
    }

    pub(super) fn is_complete(&self) -> bool {
        self.slots.iter().all(|s| matches!(s, Slot::Done(_)))
    }

    /// Runs still going, to cancel.
    pub(super) fn running(&self) -> Vec<ToolRunId> {
        self.slots
            .iter()
            .filter_map(|s| match s {
                Slot::Running { id, .. } => Some(*id),
                _ => None,
            })
            .collect()
    }

    /// The user message carrying every result, in call order.
    pub(super) fn into_message(self) -> Message {
        let blocks = self
            .slots
            .into_iter()
            .filter_map(|s| match s {
                Slot::Done(result) => Some(Block::ToolResult(result)),
                _ => None,
            })
            .collect();
        Message::new(Role::User, blocks)
    }
}
