//! What the session machine takes and gives: inputs, effects, events, refusals, and the
//! snapshot a subscriber starts from.

use std::fmt;

use super::writes::{StoreOp, WriteId};
use crate::machines::agent::{AgentError, AgentEvent, Prompt, Snapshot, ToolDecision};
use crate::machines::common::{Effect, Report};
use crate::machines::session::store::{Claim, StoreError};
use crate::machines::session::tree::{Node, NodeId, Tree, TreeError};

/// What the session asks its driver to do.
#[derive(Debug, Clone, PartialEq)]
pub enum SessionEffect {
    /// The agent's: send or cancel a request, run or cancel a tool.
    Agent(Effect),
    /// Write to the store as the owner of `claim`, then report [`SessionInput::Stored`]
    /// with `write`.
    Store {
        /// Which write.
        write: WriteId,
        /// The session's claim, which the write carries.
        claim: Claim,
        /// What to write.
        op: StoreOp,
    },
}

/// What was written, in a [`SessionEvent::Store`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    /// New nodes (this many).
    Nodes(usize),
    /// The state map.
    State,
    /// The lease was renewed.
    Renewed,
    /// The claim was released.
    Released,
}

/// What the application observes.
#[derive(Debug, Clone, PartialEq)]
pub enum SessionEvent {
    /// Every agent event, as the agent emits it.
    Agent(AgentEvent),
    /// The tree changed: nodes added (a committed turn) or the path moved.
    Tree {
        /// The new nodes, oldest first.
        added: Vec<Node>,
        /// The active path now.
        path: Vec<NodeId>,
    },
    /// The title changed.
    Title(Option<String>),
    /// A store write ended.
    Store {
        /// What it wrote.
        written: Written,
        /// Saved, or why not.
        result: Result<(), StoreError>,
    },
}

/// Something the application or the driver tells the session.
#[derive(Debug, Clone)]
pub enum SessionInput<'a> {
    /// A user message as a new turn under the head (idle only).
    Prompt(String),
    /// A user message of content blocks, with options for its turn (idle only).
    PromptWith(Box<Prompt>),
    /// Moves the path through this node and on to a tip; `None` clears it (idle only).
    Navigate(Option<NodeId>),
    /// Asks again for the reply to this user message: the new reply becomes another child
    /// of it (idle only).
    Regenerate(NodeId),
    /// A new user message under this assistant node (a new root without one), and its
    /// reply (idle only).
    Edit(Option<NodeId>, String),
    /// Sets the title.
    Title(Option<String>),
    /// Passed to the agent.
    Cancel,
    /// Passed to the agent.
    Resume(ToolDecision),
    /// Passed to the agent: the tools it offers from its next step (an MCP server's list
    /// changed); see [`AgentInput::ReplaceTools`](crate::machines::agent::AgentInput::ReplaceTools).
    ReplaceTools(Vec<crate::machines::tool_round::ToolDecl>),
    /// A request or tool run reported (passed to the agent).
    Report(Report<'a>),
    /// A store write ended.
    Stored {
        /// Which write.
        write: WriteId,
        /// Its result.
        result: Result<(), StoreError>,
    },
}

/// Why the session refused an input (nothing changed).
#[derive(Debug, Clone, PartialEq)]
pub enum SessionError {
    /// A turn is in flight.
    Busy,
    /// The agent waits for a decision about a tool call.
    Paused,
    /// No node has this id.
    NotFound(NodeId),
    /// Regenerate needs a user message (not a tool result).
    NotAUserNode(NodeId),
    /// Edit hangs the new message under an assistant message.
    NotAnAssistantNode(NodeId),
    /// A store result for a write that is not in flight.
    UnknownWrite(WriteId),
    /// The session was opened read-only: it changes nothing.
    ReadOnly,
    /// The session no longer owns its place in the store (why, in the error): it
    /// changes nothing more, so that nothing it shows is unsaved.
    NotOwner(StoreError),
    /// The agent refused.
    Agent(AgentError),
}

impl fmt::Display for SessionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Busy => f.write_str("the session is busy: a turn is in flight"),
            Self::Paused => f.write_str("the session is paused: a tool call waits for a decision"),
            Self::NotFound(id) => write!(f, "no node {id}"),
            Self::NotAUserNode(id) => write!(f, "node {id} is not a user message"),
            Self::NotAnAssistantNode(id) => write!(f, "node {id} is not an assistant message"),
            Self::UnknownWrite(id) => write!(f, "no store write {} is in flight", id.0),
            Self::ReadOnly => f.write_str("the session was opened read-only"),
            Self::NotOwner(e) => write!(f, "the session lost its ownership in the store ({e})"),
            Self::Agent(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for SessionError {}

impl From<TreeError> for SessionError {
    fn from(e: TreeError) -> Self {
        match e {
            TreeError::NotFound(id) => Self::NotFound(id),
            other => Self::Agent(AgentError::InvalidMessages(other.to_string())),
        }
    }
}

/// What a subscriber needs to catch up with a session: everything before the next event.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionSnapshot {
    /// The tree, with its path.
    pub tree: Tree,
    /// The agent's snapshot (status, committed history, the turn in flight).
    pub agent: Snapshot,
    /// The title.
    pub title: Option<String>,
}
