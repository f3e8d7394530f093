//! The agent on smol: an [`Agent`] handle whose methods are async, with events to any
//! number of subscribers as [`Stream`](futures_core::Stream)s.
//!
//! The core machine ([`omni_core::agent`]) takes every decision; a task owns it inside a
//! [`Host`] and executes its effects. Handles send it commands. Dropping the last handle
//! stops the agent: the request in flight is closed, tool runs are aborted, `terminate`
//! is called and every subscription ends.

mod run;
mod subscription;

use std::fmt;
use std::sync::Arc;

use omni_core::agent::{
    Agent as Machine, AgentCallbacks, AgentError, AgentState, Command, Host, Launch, NoCallbacks, Reply, Snapshot,
    Status, ToolDecision,
};
use omni_core::async_tool::handlers_by_name;
use omni_core::client::{ClientConfig, ModelRef};
use omni_core::generate::ToolDecl;
use omni_core::Message;
use smol::channel::{self, Sender};

use crate::client::Client;
use crate::error::Error;
use crate::tools::Tool;
use run::Message as LoopMessage;

/// What [`Agent::set_state`] changes; see [`omni_core::agent::StateChange`].
pub type StateChange = omni_core::agent::StateChange<Tool>;
pub use subscription::Subscription;

/// Sets up an agent; see [`Client::agent`] and [`omni_core::agent::AgentBuilder`].
pub type AgentBuilder<C = NoCallbacks> = omni_core::agent::AgentBuilder<Client, Tool, C>;

impl Client {
    /// Starts setting up an agent on this client's configuration (it runs on the
    /// client's executor).
    pub fn agent(&self, model: impl Into<ModelRef>) -> AgentBuilder {
        AgentBuilder::new(self.clone(), model.into())
    }
}

impl Launch<Tool> for Client {
    type Handle<C: AgentCallbacks + Send + 'static> = Agent<C>;
    type Error = Error;

    fn client_config(&self) -> &ClientConfig {
        &self.inner.config
    }

    fn env(&self, name: &str) -> Option<String> {
        std::env::var(name).ok()
    }

    fn describe(tool: &Tool) -> ToolDecl {
        tool.decl()
    }

    fn launch<C: AgentCallbacks + Send + 'static>(
        &self,
        agent: Machine<C>,
        tools: Vec<Tool>,
        capacity: usize,
    ) -> Result<Agent<C>, Error> {
        let (commands, rx) = channel::unbounded();
        let inner = &self.inner;
        let task = run::run(Host::new(agent), inner.tls.clone(), inner.spawner.clone(), handlers_by_name(&tools), rx);
        // Detached: the task ends on its own once every handle is gone.
        inner.spawner.spawn(task).detach();
        Ok(Agent { shared: Arc::new(Shared { client: self.clone(), commands, capacity }) })
    }
}

struct Shared<C> {
    client: Client,
    commands: Sender<LoopMessage<C>>,
    capacity: usize,
}

/// A running agent. Clones are handles on the same agent; dropping the last one stops it.
pub struct Agent<C = NoCallbacks> {
    shared: Arc<Shared<C>>,
}

impl<C> Clone for Agent<C> {
    fn clone(&self) -> Self {
        Agent { shared: self.shared.clone() }
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
        let text = text.into();
        Ok(self.ask(|reply| Command::Prompt(text, reply)).await??)
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
        let env = |name: &str| std::env::var(name).ok();
        let (patch, tools) = change.into_patch(&self.shared.client.inner.config, &env, Tool::decl)?;
        let (reply, answer) = channel::bounded(1);
        let message = LoopMessage::SetState { patch: Box::new(patch), tools, reply };
        self.shared.commands.send(message).await.map_err(|_| Error::Agent(AgentError::Terminated))?;
        Ok(answer.recv().await.map_err(|_| Error::Agent(AgentError::Terminated))??)
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
        let (sink, subscription) = subscription::channel(self.shared.capacity);
        let snapshot = self.ask(|reply| Command::Subscribe(Box::new(sink), reply)).await?;
        Ok((snapshot, subscription))
    }

    /// Runs `f` on the callbacks (the application's private state) inside the agent.
    pub async fn with_callbacks<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut C) -> R + Send + 'static,
    ) -> Result<R, Error> {
        let (reply, answer) = channel::bounded(1);
        let command = Command::Inspect(Box::new(move |callbacks: &mut C| {
            let _ = reply.try_send(f(callbacks));
        }));
        self.shared
            .commands
            .send(LoopMessage::Command(command))
            .await
            .map_err(|_| Error::Agent(AgentError::Terminated))?;
        answer.recv().await.map_err(|_| Error::Agent(AgentError::Terminated))
    }

    /// Sends a command and waits for its answer.
    async fn ask<T: Send + 'static>(&self, command: impl FnOnce(Reply<T>) -> Command<C>) -> Result<T, Error> {
        let (reply, answer) = channel::bounded(1);
        let reply: Reply<T> = Box::new(move |value| {
            let _ = reply.try_send(value);
        });
        self.shared
            .commands
            .send(LoopMessage::Command(command(reply)))
            .await
            .map_err(|_| Error::Agent(AgentError::Terminated))?;
        answer.recv().await.map_err(|_| Error::Agent(AgentError::Terminated))
    }
}
