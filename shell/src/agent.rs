//! The async agent handle: methods that send the agent's task a command and await its
//! answer, subscriptions as streams. The task itself (executing effects, deadlines) is the
//! shell's agent loop (`drive_agent`), on the driver's runtime. Dropping the last handle closes the command channel, which
//! tells the task to terminate the agent.

use std::fmt;
use std::sync::Arc;

use crate::host::ask_loop;
use crate::AsyncTool;
use crate::{Command, Reply};
use async_channel::{Receiver, Sender};
use omni_protocol::agent::{
    AgentCallbacks, AgentError, AgentState, NoCallbacks, Prompt, Snapshot, StatePatch, Status, ToolDecision,
};
use omni_protocol::client::ClientConfig;
use omni_protocol::Message;

use crate::subscription::Subscription;
use crate::Error;

/// What `set_state` changes; see [`omni_protocol::agent::StateChange`].
pub type StateChange = omni_protocol::agent::StateChange<AsyncTool>;

/// What a handle sends to the agent's task.
pub(crate) enum LoopMessage<C> {
    /// A command, applied with [`Host::apply`](crate::Host::apply).
    Command(Command<C>),
    /// A prompt, with the span current where it was sent: the turn it starts is traced
    /// under it.
    Prompt(Command<C>, tracing::Span),
    /// `set_state`, whose new tools' handlers the task swaps in only if the machine
    /// accepts the patch.
    SetState {
        /// The machine's patch.
        patch: Box<StatePatch>,
        /// The new tools, if any.
        tools: Option<Vec<AsyncTool>>,
        /// Where the answer goes.
        reply: Reply<Result<(), AgentError>>,
    },
    /// An MCP server's tool list changed (made by the loop itself, never sent).
    ToolsChanged,
}

impl<C> fmt::Debug for LoopMessage<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Command(command) | Self::Prompt(command, _) => command.fmt(f),
            Self::SetState { .. } => f.write_str("SetState"),
            Self::ToolsChanged => f.write_str("ToolsChanged"),
        }
    }
}

struct Shared<C> {
    /// For `set_state`: a new model is resolved as the client resolves a call's.
    client: ClientConfig,
    commands: Sender<LoopMessage<C>>,
    capacity: usize,
}

/// A running agent. Clones are handles on the same agent; dropping the last one stops it.
pub struct Agent<C = NoCallbacks> {
    shared: Arc<Shared<C>>,
}

impl<C> Agent<C> {
    /// The channel between the handles and the agent's task. Bounded: a
    /// handle's method waits while the agent has [`COMMAND_CAPACITY`](crate::machine::COMMAND_CAPACITY) commands unread.
    pub(crate) fn channel() -> (Sender<LoopMessage<C>>, Receiver<LoopMessage<C>>) {
        async_channel::bounded(crate::machine::COMMAND_CAPACITY)
    }

    /// The first handle on an agent whose task reads `commands`' other end.
    /// `client` resolves `set_state`'s models; `capacity` bounds each subscriber's queue.
    pub(crate) fn new(client: ClientConfig, commands: Sender<LoopMessage<C>>, capacity: usize) -> Self {
        Self { shared: Arc::new(Shared { client, commands, capacity }) }
    }
}

impl<C> Clone for Agent<C> {
    fn clone(&self) -> Self {
        Self { shared: self.shared.clone() }
    }
}

impl<C> Agent<C> {
    /// A handle that does not keep the agent running: for a tool or a callback that
    /// must reach its own agent (a strong handle there would be a cycle, and the agent
    /// would outlive every handle of the application's).
    pub fn downgrade(&self) -> WeakAgent<C> {
        WeakAgent { shared: Arc::downgrade(&self.shared) }
    }
}

/// A handle on an agent that does not keep it running; see [`Agent::downgrade`].
pub struct WeakAgent<C = NoCallbacks> {
    shared: std::sync::Weak<Shared<C>>,
}

impl<C> WeakAgent<C> {
    /// The agent, while some [`Agent`] handle still keeps it running.
    pub fn upgrade(&self) -> Option<Agent<C>> {
        self.shared.upgrade().map(|shared| Agent { shared })
    }
}

impl<C> Clone for WeakAgent<C> {
    fn clone(&self) -> Self {
        Self { shared: self.shared.clone() }
    }
}

impl<C> fmt::Debug for WeakAgent<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WeakAgent").field("running", &(self.shared.strong_count() > 0)).finish()
    }
}

impl<C> fmt::Debug for Agent<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Agent").field("running", &!self.shared.commands.is_closed()).finish()
    }
}

impl<C: AgentCallbacks + Send + 'static> Agent<C> {
    /// Sends a user message: starts a turn when idle; while busy or paused, stages it for
    /// the next turn boundary (the last one wins, over `handle_turn`'s decision).
    pub async fn prompt(&self, text: impl Into<String>) -> Result<(), Error> {
        let (text, parent) = (text.into(), tracing::Span::current());
        let message = |reply| LoopMessage::Prompt(Command::Prompt(text, reply), parent);
        Ok(ask_loop(&self.shared.commands, message).await??)
    }

    /// Sends a user message of content blocks (text, attachments, results of tools the
    /// application ran itself for calls the last turn left open), with options over the
    /// agent's for that turn only; started or staged as [`prompt`](Self::prompt) is.
    pub async fn prompt_with(&self, prompt: impl Into<Prompt>) -> Result<(), Error> {
        let (prompt, parent) = (Box::new(prompt.into()), tracing::Span::current());
        let message = |reply| LoopMessage::Prompt(Command::PromptWith(prompt, reply), parent);
        Ok(ask_loop(&self.shared.commands, message).await??)
    }

    /// Answers the paused tool call.
    pub async fn resume(&self, decision: ToolDecision) -> Result<(), Error> {
        Ok(self.ask(|reply| Command::Resume(decision, reply)).await??)
    }

    /// Stops the turn in flight and discards it (an error when idle).
    pub async fn cancel(&self) -> Result<(), Error> {
        Ok(self.ask(Command::Cancel).await??)
    }

    /// Changes model, system prompt, history, tools or options, all or nothing; only
    /// while idle.
    pub async fn set_state(&self, change: StateChange) -> Result<(), Error> {
        let env = crate::client::environment;
        let (patch, tools) = change.into_patch(&self.shared.client, &env, AsyncTool::decl)?;
        let patch = Box::new(patch);
        Ok(ask_loop(&self.shared.commands, |reply| LoopMessage::SetState { patch, tools, reply }).await??)
    }

    /// Status, model, system prompt, committed history, tools and options.
    pub async fn state(&self) -> Result<AgentState, Error> {
        self.ask(Command::State).await
    }

    /// What the agent is doing.
    pub async fn status(&self) -> Result<Status, Error> {
        Ok(self.state().await?.status)
    }

    /// The committed history.
    pub async fn messages(&self) -> Result<Vec<Message>, Error> {
        Ok(self.state().await?.messages)
    }

    /// Committed, pending and partial messages.
    pub async fn snapshot(&self) -> Result<Snapshot, Error> {
        self.ask(Command::Snapshot).await
    }

    /// Subscribes to every later event. The snapshot is taken at the same moment, so
    /// together they miss nothing. Dropping the subscription unsubscribes.
    pub async fn subscribe(&self) -> Result<(Snapshot, Subscription), Error> {
        let (sink, subscription) = Subscription::channel(self.shared.capacity);
        let snapshot = self.ask(|reply| Command::Subscribe(Box::new(sink), reply)).await?;
        Ok((snapshot, subscription))
    }

    /// Runs `f` on the callbacks (the application's private state) inside the agent.
    pub async fn with_callbacks<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut C) -> R + Send + 'static,
    ) -> Result<R, Error> {
        self.ask(|reply| Command::Inspect(Box::new(move |callbacks: &mut C| reply(f(callbacks))))).await
    }

    /// Sends a command and waits for its answer.
    async fn ask<T: Send + 'static>(&self, command: impl FnOnce(Reply<T>) -> Command<C>) -> Result<T, Error> {
        ask_loop(&self.shared.commands, |reply| LoopMessage::Command(command(reply))).await
    }
}
