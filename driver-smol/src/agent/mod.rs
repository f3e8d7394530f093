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
use std::time::Duration;

use omni_core::agent::{
    Agent as Machine, AgentCallbacks, AgentError, AgentState, Command, Host, NoCallbacks, Reply, Snapshot, Status,
    ToolDecision,
};
use omni_core::client::ModelRef;
use omni_core::generate::RetryPolicy;
use omni_core::{ApiKey, Message, Options};
use smol::channel::{self, Sender};

use crate::client::Client;
use crate::error::Error;
use crate::tools::Tool;
use run::Message as LoopMessage;

/// What [`Agent::set_state`] changes; see [`omni_core::agent::StateChange`].
pub type StateChange = omni_core::agent::StateChange<Tool>;
pub use subscription::Subscription;

/// Events a subscriber may have queued before it is dropped as lagging.
pub const DEFAULT_SUBSCRIBER_CAPACITY: usize = 10_000;

/// Sets up an agent; see [`Client::agent`].
pub struct AgentBuilder<C = NoCallbacks> {
    client: Client,
    model: ModelRef,
    api_key: Option<ApiKey>,
    system: Option<String>,
    messages: Vec<Message>,
    tools: Vec<Tool>,
    options: Options,
    tool_timeout: Option<Duration>,
    error_backoff: Option<RetryPolicy>,
    capacity: usize,
    callbacks: C,
}

impl<C> fmt::Debug for AgentBuilder<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgentBuilder")
            .field("model", &self.model)
            .field("tools", &self.tools)
            .field("messages", &self.messages.len())
            .finish_non_exhaustive()
    }
}

impl Client {
    /// Starts setting up an agent on this client's configuration.
    pub fn agent(&self, model: impl Into<ModelRef>) -> AgentBuilder {
        AgentBuilder {
            client: self.clone(),
            model: model.into(),
            api_key: None,
            system: None,
            messages: Vec::new(),
            tools: Vec::new(),
            options: Options::default(),
            tool_timeout: None,
            error_backoff: None,
            capacity: DEFAULT_SUBSCRIBER_CAPACITY,
            callbacks: NoCallbacks,
        }
    }
}

impl<C: AgentCallbacks + Send + 'static> AgentBuilder<C> {
    /// The system prompt.
    pub fn system(mut self, system: impl Into<String>) -> Self {
        self.system = Some(system.into());
        self
    }

    /// The initial history: empty, or ending with an assistant message without tool calls.
    pub fn messages(mut self, messages: Vec<Message>) -> Self {
        self.messages = messages;
        self
    }

    /// Adds a tool.
    pub fn tool(mut self, tool: Tool) -> Self {
        self.tools.push(tool);
        self
    }

    /// Adds tools.
    pub fn tools(mut self, tools: impl IntoIterator<Item = Tool>) -> Self {
        self.tools.extend(tools);
        self
    }

    /// Options of every step, over the client's defaults (`max_steps` caps a turn's requests).
    pub fn options(mut self, options: Options) -> Self {
        self.options = options;
        self
    }

    /// Time one tool call may take (default 5 s) unless the tool says otherwise.
    pub fn tool_timeout(mut self, limit: Duration) -> Self {
        self.tool_timeout = Some(limit);
        self
    }

    /// Waits between the step retries that `handle_error` asks for.
    pub fn error_backoff(mut self, policy: RetryPolicy) -> Self {
        self.error_backoff = Some(policy);
        self
    }

    /// A key for this agent only.
    pub fn api_key(mut self, key: impl Into<ApiKey>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// How many events a subscriber may leave unread before it is dropped (its stream
    /// then ends and [`Subscription::lagged`] says so). Default 10,000.
    pub fn subscriber_capacity(mut self, events: usize) -> Self {
        self.capacity = events.max(1);
        self
    }

    /// The callbacks, which also hold the application's private state.
    pub fn callbacks<D: AgentCallbacks + Send + 'static>(self, callbacks: D) -> AgentBuilder<D> {
        AgentBuilder {
            client: self.client,
            model: self.model,
            api_key: self.api_key,
            system: self.system,
            messages: self.messages,
            tools: self.tools,
            options: self.options,
            tool_timeout: self.tool_timeout,
            error_backoff: self.error_backoff,
            capacity: self.capacity,
            callbacks,
        }
    }

    /// Starts the agent (its `init` runs here) on the client's executor.
    pub fn start(self) -> Result<Agent<C>, Error> {
        let inner = &self.client.inner;
        let env = |name: &str| std::env::var(name).ok();
        let mut config = inner.config.agent(&self.model, self.api_key.as_ref(), &env)?;
        config.system = self.system;
        config.messages = self.messages;
        config.tools = self.tools.iter().map(Tool::decl).collect();
        config.options = self.options.merged_over(&config.options);
        if let Some(limit) = self.tool_timeout {
            config.tool_timeout = limit;
        }
        if let Some(policy) = self.error_backoff {
            config.error_backoff = policy;
        }
        let machine = Machine::new(config, self.callbacks)?;
        let (commands, rx) = channel::unbounded();
        let task =
            run::run(Host::new(machine), inner.tls.clone(), inner.spawner.clone(), run::handlers(&self.tools), rx);
        // Detached: the task ends on its own once every handle is gone.
        inner.spawner.spawn(task).detach();
        Ok(Agent { shared: Arc::new(Shared { client: self.client, commands, capacity: self.capacity }) })
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
