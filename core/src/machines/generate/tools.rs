//! The generate machine's tool policy: every call is approved (the application decides
//! nothing between steps), so a step's calls go to the tool round
//! ([`crate::machines::tool_round`]) only when every one can be answered here.

use std::collections::VecDeque;

use super::GenerateEvent;
use crate::data::message::{ToolResult, ToolSpec, ToolUse};
use crate::machines::tool_round::{ToolDecision, ToolDecl, ToolPolicy};

/// Approves every call; each result becomes a [`GenerateEvent::ToolResult`] of `step`.
pub(super) struct AutoApprove<'a> {
    pub(super) events: &'a mut VecDeque<GenerateEvent>,
    pub(super) step: u32,
}

impl ToolPolicy for AutoApprove<'_> {
    fn decide(&mut self, _call: &ToolUse) -> ToolDecision {
        ToolDecision::Execute
    }

    fn seen(&mut self, result: ToolResult) -> ToolResult {
        self.events.push_back(GenerateEvent::ToolResult { step: self.step, result: Box::new(result.clone()) });
        result
    }
}

/// True when every call can be answered here: by a handler, or by an error result for
/// an unknown tool. A call to a known tool without a handler belongs to the caller, and
/// with it the whole step's calls (no tool runs).
pub(super) fn all_runnable(decls: &[ToolDecl], context_tools: &[ToolSpec], calls: &[ToolUse]) -> bool {
    calls.iter().all(|call| match decls.iter().find(|d| d.spec.name == call.name) {
        Some(decl) => decl.executable,
        None => !context_tools.iter().any(|t| t.name == call.name),
    })
}
