//! The agent's configuration, inputs, events, errors and snapshot.

use std::fmt;
use std::time::Duration;

use crate::data::event::StreamEvent;
use crate::data::message::{Block, Message, Role, ToolResult, ToolSpec, ToolUse};
use crate::data::model::Model;
use crate::data::options::{Options, OptionsError};
use crate::data::provider::{ApiKey, Provider};
use crate::data::response::{Response, StopReason};
use crate::data::usage::Usage;
use crate::machines::common::{GenerateError, Report};
use crate::machines::generate::{ToolDecl, DEFAULT_STALL_TIMEOUT};
use crate::machines::request::RetryPolicy;

use crate::machines::tool_round::ToolDecision;

/// Everything an agent starts with.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// The model.
    pub model: Model,
    /// Its provider.
    pub provider: Provider,
    /// The resolved key.
    pub api_key: Option<ApiKey>,
    /// System prompt.
    pub system: Option<String>,
    /// Initial (committed) history: empty, or ending with an assistant message without
    /// tool calls.
    pub messages: Vec<Message>,
    /// Tools; `executable` says whether the driver has a handler.
    pub tools: Vec<ToolDecl>,
    /// Options of every step. `max_steps` caps the requests of one turn; `tool_timeout`
    /// limits one tool call unless the tool says otherwise (the rule is
    /// `effective_tool_timeout`, as in a call).
    pub options: Options,
    /// HTTP retries inside one step (the generate machine's policy).
    pub retry: RetryPolicy,
    /// Waits between step retries decided by [`AgentCallbacks::handle_error`](super::AgentCallbacks::handle_error)
    /// (only `delay` is used: the callback decides how many).
    pub error_backoff: RetryPolicy,
    /// No-progress limit of a stream.
    pub stall_timeout: Duration,
    /// Largest response body of one step, in bytes (see
    /// [`GenerateConfig::max_response_bytes`](crate::machines::generate::GenerateConfig::max_response_bytes)).
    pub max_response_bytes: u64,
    /// Corrections asked for in a turn whose final reply is not valid structured output
    /// (with `options.output`).
    pub output_retries: u32,
    /// Tools whose handlers the driver has but the model is not offered: `init` (or a
    /// later change) may move any of them into `tools`, a tool with its handler added by
    /// the application's own code (the builder's `handler`).
    pub available_tools: Vec<ToolDecl>,
    /// Checks the final reply's structured output instead of `options.output`'s schema
    /// (whose schema, if `options.output` is unset, is the one sent), as a call's does.
    pub output_validator: Option<std::sync::Arc<dyn crate::data::schema::Validator>>,
    /// What the agent tells the application's telemetry (turns and inferences, as
    /// [`Effect::Observe`](crate::machines::common::Effect::Observe)); off by default.
    pub observe: crate::machines::observe::Observe,
}

impl AgentConfig {
    /// A configuration with no history, no tools and default limits.
    pub fn new(model: Model, provider: Provider) -> Self {
        Self {
            model,
            provider,
            api_key: None,
            system: None,
            messages: Vec::new(),
            tools: Vec::new(),
            options: Options::default(),
            retry: RetryPolicy::default(),
            error_backoff: RetryPolicy::default(),
            stall_timeout: DEFAULT_STALL_TIMEOUT,
            max_response_bytes: crate::machines::generate::DEFAULT_MAX_RESPONSE_BYTES,
            output_retries: crate::machines::generate::DEFAULT_OUTPUT_RETRIES,
            output_validator: None,
            available_tools: Vec::new(),
            observe: crate::machines::observe::Observe::Off,
        }
    }
}

/// A user message with more than text (attachments, results of tools the application ran
/// itself) and options for its turn only.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Prompt {
    /// The message's content. `ToolResult` blocks answer calls the last turn left open
    /// (a tool without a handler, `max_steps`); calls they do not answer get an error
    /// result, as with a text prompt.
    pub content: Vec<Block>,
    /// Options over the agent's for this turn only (`max_steps`, `temperature`, …).
    pub options: Option<Options>,
}

impl Prompt {
    /// A prompt of these blocks.
    pub fn new(content: Vec<Block>) -> Self {
        Self { content, options: None }
    }

    /// A text prompt.
    pub fn text(text: impl Into<String>) -> Self {
        Self::new(vec![Block::text(text)])
    }

    /// Options for this turn only, over the agent's.
    pub fn options(mut self, options: Options) -> Self {
        self.options = Some(options);
        self
    }
}

impl From<String> for Prompt {
    fn from(text: String) -> Self {
        Self::text(text)
    }
}

impl From<&str> for Prompt {
    fn from(text: &str) -> Self {
        Self::text(text)
    }
}

impl From<Vec<Block>> for Prompt {
    fn from(content: Vec<Block>) -> Self {
        Self::new(content)
    }
}

/// A change of the agent's state, applied atomically while idle. `None` keeps a field.
#[derive(Debug, Clone, Default)]
pub struct StatePatch {
    /// New model.
    pub model: Option<Model>,
    /// New provider.
    pub provider: Option<Provider>,
    /// New key (`Some(None)` removes it). Set it with every provider change: a key is
    /// never sent to another provider than the one it was given for.
    pub api_key: Option<Option<ApiKey>>,
    /// New system prompt (`Some(None)` removes it).
    pub system: Option<Option<String>>,
    /// New committed history (same rule as the initial messages).
    pub messages: Option<Vec<Message>>,
    /// New tools.
    pub tools: Option<Vec<ToolDecl>>,
    /// New options.
    pub options: Option<Options>,
    /// The new system prompt as a function of the current one, applied when the patch is
    /// (after `system`, if both are set).
    pub system_with: Option<Update<Option<String>>>,
    /// The new history as a function of the current one.
    pub messages_with: Option<Update<Vec<Message>>>,
    /// The new options as a function of the current ones.
    pub options_with: Option<Update<Options>>,
}

/// A field's new value as a function of its current one (`set_state`'s functional form:
/// the value it sees is the one the agent holds when the change applies, not the one a
/// handle read earlier).
#[derive(Clone)]
pub struct Update<T>(std::sync::Arc<dyn Fn(&T) -> T + Send + Sync>);

impl<T> Update<T> {
    /// `f` of the current value.
    pub fn new(f: impl Fn(&T) -> T + Send + Sync + 'static) -> Self {
        Self(std::sync::Arc::new(f))
    }

    /// The new value.
    pub fn apply(&self, current: &T) -> T {
        (self.0)(current)
    }
}

impl<T> fmt::Debug for Update<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Update(..)")
    }
}

/// Something the application or the driver tells the agent.
#[derive(Debug, Clone)]
pub enum AgentInput<'a> {
    /// A user message: starts a turn when idle, else is staged for the next turn
    /// boundary (the last staged prompt wins and overrides `handle_turn`).
    Prompt(String),
    /// [`AgentInput::Prompt`] with content blocks and options for its turn.
    PromptWith(Box<Prompt>),
    /// The decision for the paused tool call.
    Resume(ToolDecision),
    /// Stops the turn in flight and discards it.
    Cancel,
    /// Changes the state (idle only).
    SetState(Box<StatePatch>),
    /// Replaces the tools offered, checked as `set_state` checks tools: at once while
    /// idle, else from the next step of the turn in flight (the steps already sent keep
    /// theirs). For tools whose list changes on its own (an MCP server's): a later
    /// replacement staged before that step wins.
    ReplaceTools(Vec<ToolDecl>),
    /// A request or a tool run reported progress.
    Report(Report<'a>),
}

/// Why an input or a configuration was refused.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum AgentError {
    /// `cancel` while idle.
    Idle,
    /// `set_state` (or a prompt carrying tool results) while a turn is in flight.
    Busy,
    /// `set_state` while a tool call waits for a decision.
    Paused,
    /// `resume` while not paused.
    NotPaused,
    /// Messages that cannot start or continue a conversation.
    InvalidMessages(String),
    /// Options out of range.
    InvalidOptions(OptionsError),
    /// A tool whose schema does not compile.
    InvalidTool(String),
    /// [`AgentCallbacks::init`](super::AgentCallbacks::init) refused to start.
    Init(String),
    /// The agent was terminated.
    Terminated,
    /// A handle was called on the agent's own thread (from a callback, or a closure run
    /// by `with_callbacks`), where the agent could never answer: refused, not a deadlock.
    CalledFromAgent,
}

impl fmt::Display for AgentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Idle => f.write_str("the agent is idle: nothing to cancel"),
            Self::Busy => f.write_str("the agent is busy: its state can change only while idle"),
            Self::Paused => {
                f.write_str("the agent is paused: a tool call waits for a decision (resume or cancel first)")
            }
            Self::NotPaused => f.write_str("the agent is not paused: nothing to resume"),
            Self::InvalidMessages(why) => write!(f, "invalid messages: {why}"),
            Self::InvalidOptions(e) => write!(f, "{e}"),
            Self::InvalidTool(why) => write!(f, "invalid tool: {why}"),
            Self::Init(why) => write!(f, "the agent refused to start: {why}"),
            Self::Terminated => f.write_str("the agent was terminated"),
            Self::CalledFromAgent => {
                f.write_str("an agent handle was called from the agent's own callbacks, which would wait for itself")
            }
        }
    }
}

impl std::error::Error for AgentError {}

/// What the agent is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// No turn in flight.
    Idle,
    /// A turn is in flight.
    Busy,
    /// Waiting for a decision about a tool call.
    Paused,
}

/// How a turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnEnd {
    /// The agent goes idle.
    Stop,
    /// A new turn follows at once (from `handle_turn` or a staged prompt).
    Continue,
}

/// Which retry an [`AgentEvent::Retry`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryKind {
    /// The generate machine resends a failed request on its own (nothing was delivered).
    Request,
    /// `handle_error` decided to send the step again.
    Step,
}

/// What the application observes, in this order within a turn: status, message (user),
/// streaming deltas, message (assistant), step, then tool results and the tool-results
/// message, ... and finally status and turn. A status change always comes before the
/// event that caused it.
///
/// Most events are streaming deltas, moved several times on their way to every
/// subscriber: the rare large payloads are boxed, so that an event is a few words to move
/// (as [`StreamEvent`] and `GenerateEvent` are).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum AgentEvent {
    /// A streaming delta (text, thinking or tool-use start, delta, end).
    Stream(StreamEvent),
    /// A message was appended to the pending turn.
    Message(Box<Message>),
    /// A tool result is known (what the model will see).
    ToolResult(Box<ToolResult>),
    /// A step finished: exactly its user message (prompt or tool results) and its answer.
    Step {
        /// The step's user message.
        user: Box<Message>,
        /// The model's answer.
        assistant: Box<Message>,
        /// Why the model stopped.
        stop_reason: StopReason,
        /// The step's usage.
        usage: Box<Usage>,
    },
    /// A turn ended and was committed.
    Turn {
        /// Stop or continue.
        end: TurnEnd,
        /// The last step's stop reason (`tool_use` for calls left to the application).
        stop_reason: StopReason,
        /// The turn's messages.
        messages: Vec<Message>,
        /// The turn's usage.
        usage: Box<Usage>,
        /// With `options.output`: the final reply's value, or why it is not valid after
        /// every correction. `None` without structured output.
        output: Option<Box<Result<serde_json::Value, String>>>,
    },
    /// The final reply is not valid structured output: a correction (the next `message`)
    /// asks the model again, as a call does.
    OutputRetry {
        /// Correction number, 1-based.
        attempt: u32,
        /// What was wrong with the reply.
        error: String,
    },
    /// The agent waits for a decision about this call.
    Pause {
        /// The call.
        tool_use: Box<ToolUse>,
        /// Why.
        reason: String,
    },
    /// A failed request or step is sent again after `delay`.
    Retry {
        /// Which retry.
        kind: RetryKind,
        /// Retry number, 1-based.
        attempt: u32,
        /// Wait before sending.
        delay: Duration,
        /// What failed.
        error: Box<GenerateError>,
    },
    /// The turn failed for good and was discarded.
    Error(Box<GenerateError>),
    /// The turn was cancelled and discarded: what it had produced (its messages, the
    /// reply being streamed included, and its usage).
    Cancelled(Box<Response>),
    /// `set_state` changed the state: the new one.
    State(Box<AgentState>),
    /// The status changed.
    Status(Status),
}

/// What a late subscriber needs to catch up: everything before the next event.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    /// Current status.
    pub status: Status,
    /// The committed history.
    pub committed: Vec<Message>,
    /// Messages of the turn in flight.
    pub pending: Vec<Message>,
    /// The assistant message being streamed, if any.
    pub partial: Option<Message>,
}

/// Checks a history the agent may start from or be given. It may end with tool calls
/// nobody answered (a turn that ended at `max_steps`, or on a tool without handler, and
/// was kept so): the next prompt answers each ahead of its text, as it does in the turn
/// after such a turn, so a history saved there loads and goes on as it would have.
pub(super) fn validate_history(messages: &[Message]) -> Result<(), AgentError> {
    let Some(last) = messages.last() else { return Ok(()) };
    if last.role != Role::Assistant {
        return Err(AgentError::InvalidMessages("the history must end with an assistant message".into()));
    }
    Ok(())
}

/// Checks options and compiles tool validators.
pub(super) fn validate_setup(options: &Options, tools: &mut [ToolDecl]) -> Result<(), AgentError> {
    options.validate().map_err(AgentError::InvalidOptions)?;
    if let Some(output) = &options.output {
        // Compiled again by each step's machine; checked here so a bad schema is refused
        // up front rather than failing every step.
        crate::data::schema::JsonSchemaValidator::new(output.schema.clone()).map_err(|e| {
            AgentError::InvalidOptions(OptionsError::Invalid { option: "output", reason: format!("schema: {e}") })
        })?;
    }
    crate::machines::tool_round::prepare_tools(tools).map_err(AgentError::InvalidTool)
}

/// The agent's state as [`Agent::state`](super::Agent::state) reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentState {
    /// What the agent is doing.
    pub status: Status,
    /// The model.
    pub model: Model,
    /// The system prompt.
    pub system: Option<String>,
    /// The committed history.
    pub messages: Vec<Message>,
    /// What the model is told about the tools.
    pub tools: Vec<ToolSpec>,
    /// Options of every step.
    pub options: Options,
}
