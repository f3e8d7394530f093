//! The application's hooks into the agent: every method has a default, so an agent
//! with [`NoCallbacks`] is a plain chat with tools.
//!
//! Private application state lives in the callbacks value itself (its fields): the
//! machine owns it, hands it `&mut self` on every hook, and gives it back through
//! [`Agent::callbacks`](super::Agent::callbacks) / [`Agent::callbacks_mut`](super::Agent::callbacks_mut).
//! With a concrete type parameter that access is typed; drivers that need one agent type
//! use the default `Box<dyn AgentCallbacks + Send>`.

use crate::data::message::{ToolResult, ToolUse};
use crate::data::response::Response;
use crate::machines::common::GenerateError;

use super::io::{AgentConfig, AgentState, StatePatch};

/// What happens when the model answers without tools to run.
#[derive(Debug, Clone, PartialEq)]
pub enum TurnDecision {
    /// The turn ends; the agent goes idle.
    Stop,
    /// The turn is committed and a new one starts with this user message.
    Continue(String),
    /// The turn is committed and a new one starts with this prompt (content blocks, and
    /// options for that turn).
    ContinueWith(Box<super::io::Prompt>),
}

pub use crate::machines::tool_round::ToolDecision;

/// What happens after a step failed for good (the generate machine's own HTTP retries
/// are exhausted or the error is not retryable).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorDecision {
    /// Discard the turn; the agent goes idle and reports the error.
    Stop,
    /// Send the step again after a backoff (see [`AgentConfig::error_backoff`]).
    Retry,
}

/// Hooks the agent calls at its decision points. All optional.
pub trait AgentCallbacks {
    /// Called once by [`Agent::new`](super::Agent::new): may adjust the configuration
    /// (system prompt, options, history, tools: moving any of `config.available_tools`,
    /// whose handlers the driver holds, into `config.tools` adds that tool with its
    /// handler), or refuse to start with a message.
    fn init(&mut self, config: &mut AgentConfig) -> Result<(), String> {
        let _ = config;
        Ok(())
    }

    /// The model answered without tools to run. `response` covers the whole turn: its
    /// `messages` are the turn's messages, `usage` the turn's usage, `message` the answer.
    fn handle_turn(&mut self, response: &Response) -> TurnDecision {
        let _ = response;
        TurnDecision::Stop
    }

    /// Decides about one tool call; calls are decided one at a time, in order.
    fn handle_tool_use(&mut self, tool_use: &ToolUse) -> ToolDecision {
        let _ = tool_use;
        ToolDecision::Execute
    }

    /// Before each step of a turn (`step` 1 for its first request, 2 after the first
    /// tool round, …), with the agent's state: may change the system prompt, the tools
    /// and the options for this step and the following ones. The change is checked as
    /// `set_state` checks one; an invalid one (or one touching the model, key or history)
    /// fails the turn with the reason. Default: no change.
    fn handle_step(&mut self, step: u32, state: &AgentState) -> Option<StatePatch> {
        let _ = (step, state);
        None
    }

    /// Sees every result (executed, rejected or provided) before the model does.
    fn handle_tool_result(&mut self, result: ToolResult) -> ToolResult {
        result
    }

    /// A step failed for good; `attempt` counts this step's failures (1-based).
    fn handle_error(&mut self, error: &GenerateError, attempt: u32) -> ErrorDecision {
        let _ = (error, attempt);
        ErrorDecision::Stop
    }

    /// The agent is shutting down ([`Agent::terminate`](super::Agent::terminate)).
    fn terminate(&mut self) {}
}

impl<C: AgentCallbacks + ?Sized> AgentCallbacks for Box<C> {
    fn init(&mut self, config: &mut AgentConfig) -> Result<(), String> {
        (**self).init(config)
    }
    fn handle_turn(&mut self, response: &Response) -> TurnDecision {
        (**self).handle_turn(response)
    }
    fn handle_tool_use(&mut self, tool_use: &ToolUse) -> ToolDecision {
        (**self).handle_tool_use(tool_use)
    }
    fn handle_step(&mut self, step: u32, state: &AgentState) -> Option<StatePatch> {
        (**self).handle_step(step, state)
    }
    fn handle_tool_result(&mut self, result: ToolResult) -> ToolResult {
        (**self).handle_tool_result(result)
    }
    fn handle_error(&mut self, error: &GenerateError, attempt: u32) -> ErrorDecision {
        (**self).handle_error(error, attempt)
    }
    fn terminate(&mut self) {
        (**self).terminate()
    }
}

/// Callbacks that keep every default.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoCallbacks;

impl AgentCallbacks for NoCallbacks {}
