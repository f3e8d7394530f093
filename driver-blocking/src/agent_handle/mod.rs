//! The agent on plain threads: an [`Agent`] handle whose methods block until the agent
//! answers, with events to any number of subscribers as blocking [`Iterator`]s.
//!
//! The core machine ([`omni_core::agent`]) takes every decision; a thread owns it inside
//! a [`Host`] and executes its effects (one thread per request and per tool run, as for a
//! call). Handles send it commands on the same channel its request and tool threads
//! report on, so one `recv_timeout` waits for everything. Dropping the last handle stops
//! the agent: the request in flight is closed, running tools see their
//! [`CancelToken`](crate::CancelToken) tripped, `terminate` is called and every
//! subscription ends.
//!
//! The callbacks run on the agent's thread. Do not call a handle's methods from them (or
//! from a [`Agent::with_callbacks`] closure): the agent would wait for itself.
//!
//! ```no_run
//! use omni_blocking::{AgentEvent, Client, StreamEvent};
//!
//! let client = Client::new()?; // keys from ANTHROPIC_API_KEY, OPENAI_API_KEY, ...
//! let agent = client.agent("anthropic:claude-sonnet-4-5").system("Be brief.").start()?;
//! let (_snapshot, events) = agent.subscribe()?;
//! agent.prompt("Hi!")?;
//! for event in events {
//!     match event {
//!         AgentEvent::Stream(StreamEvent::TextDelta { delta, .. }) => print!("{delta}"),
//!         AgentEvent::Turn { .. } => break,
//!         _ => {}
//!     }
//! }
//! println!("\n{} messages so far", agent.messages()?.len());
//! # Ok::<(), omni_blocking::Error>(())
//! ```

mod run;
mod subscription;

use std::fmt;
use std::hash::{BuildHasher, RandomState};
use std::sync::mpsc::{self, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use omni_core::agent::{
    Agent as Machine, AgentCallbacks, AgentError, AgentState, Command, Host, NoCallbacks, Reply, Snapshot, Status,
    ToolDecision,
};
use omni_core::client::ModelRef;
use omni_core::generate::RetryPolicy;
use omni_core::{ApiKey, Message, Options};

use crate::blocking_client::Client;
use crate::tools::Tool;
use crate::Error;
use run::LoopInput;

pub use subscription::Subscription;

/// What [`Agent::set_state`] changes; see [`omni_core::agent::StateChange`].
pub type StateChange = omni_core::agent::StateChange<Tool>;

/// Events a subscriber may have queued before it is dropped as lagging.
pub const DEFAULT_SUBSCRIBER_CAPACITY: usize = 10_000;

/// Sets up an agent; see [`Client::agent`]. Nothing runs until [`AgentBuilder::start`].
#[must_use = "an agent does nothing until .start()"]
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
    /// Starts setting up an agent on this client's configuration (catalogue, keys,
    /// default options, retry policy, stall limit).
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

    /// Adds a tool; a tool with the same name as an earlier one replaces it.
    pub fn tool(mut self, tool: Tool) -> Self {
        match self.tools.iter_mut().find(|t| t.name() == tool.name()) {
            Some(existing) => *existing = tool,
            None => self.tools.push(tool),
        }
        self
    }

    /// Adds tools.
    pub fn tools(self, tools: impl IntoIterator<Item = Tool>) -> Self {
        tools.into_iter().fold(self, AgentBuilder::tool)
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

    /// A key for this agent only (wins over the client's and the environment's).
    pub fn api_key(mut self, key: impl Into<ApiKey>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// How many events a subscriber may leave unread before it is dropped (its iterator
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

    /// Starts the agent on its own thread (its `init` runs here, on the caller's).
    pub fn start(self) -> Result<Agent<C>, Error> {
        let inner = &self.client.inner;
        let env = |name: &str| std::env::var(name).ok();
        let mut config = inner.config.agent(&self.model, self.api_key.as_ref(), &env)?;
        if inner.random_retry_seed {
            // As for calls: agents failing together must not retry together.
            config.retry.seed = RandomState::new().hash_one(Instant::now());
        }
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
        let commands = run::spawn(Host::new(machine), inner.http.clone(), self.tools)
            .map_err(|e| Error::Setup(format!("could not start the agent thread: {e}")))?;
        Ok(Agent { shared: Arc::new(Shared { client: self.client, commands, capacity: self.capacity }) })
    }
}

/// What every handle of one agent shares; dropped with the last handle.
struct Shared<C> {
    client: Client,
    commands: Sender<LoopInput<C>>,
    capacity: usize,
}

impl<C> Drop for Shared<C> {
    /// The last handle is gone: the agent stops. (The loop keeps a sender of its own for
    /// its threads, so it needs this message to know.)
    fn drop(&mut self) {
        let _ = self.commands.send(LoopInput::HandlesGone);
    }
}

/// A running agent. Clones are handles on the same agent (`Send + Sync`, usable from any
/// thread); dropping the last one stops it. Every method blocks until the agent's
/// thread answers, which it does between inputs, never waiting on the network or a tool.
/// A stopped agent answers [`AgentError::Terminated`].
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
        f.debug_struct("Agent").field("handles", &Arc::strong_count(&self.shared)).finish_non_exhaustive()
    }
}

impl<C: AgentCallbacks + Send + 'static> Agent<C> {
    /// Sends a user message: starts a turn when idle; while busy or paused, stages it for
    /// the next turn boundary (the last one wins, over `handle_turn`'s decision).
    pub fn prompt(&self, text: impl Into<String>) -> Result<(), Error> {
        let text = text.into();
        Ok(self.ask(|reply| Command::Prompt(text, reply))??)
    }

    /// Answers the paused tool call.
    pub fn resume(&self, decision: ToolDecision) -> Result<(), Error> {
        Ok(self.ask(|reply| Command::Resume(decision, reply))??)
    }

    /// Stops the turn in flight and discards it (an error when idle).
    pub fn cancel(&self) -> Result<(), Error> {
        Ok(self.ask(Command::Cancel)??)
    }

    /// Changes model, key, system prompt, history, tools or options, all or nothing;
    /// only while idle.
    pub fn set_state(&self, change: StateChange) -> Result<(), Error> {
        let env = |name: &str| std::env::var(name).ok();
        let (patch, tools) = change.into_patch(&self.shared.client.inner.config, &env, Tool::decl)?;
        Ok(self.request(|reply| LoopInput::SetState { patch: Box::new(patch), tools, reply })??)
    }

    /// Status, model, system prompt, committed history, tools and options.
    pub fn state(&self) -> Result<AgentState, Error> {
        self.ask(Command::State)
    }

    /// What the agent is doing.
    pub fn status(&self) -> Result<Status, Error> {
        Ok(self.state()?.status)
    }

    /// The committed history.
    pub fn messages(&self) -> Result<Vec<Message>, Error> {
        Ok(self.state()?.messages)
    }

    /// Committed, pending and partial messages.
    pub fn snapshot(&self) -> Result<Snapshot, Error> {
        self.ask(Command::Snapshot)
    }

    /// Subscribes to every later event. The snapshot is taken at the same moment, so
    /// together they miss nothing. Dropping the subscription unsubscribes.
    pub fn subscribe(&self) -> Result<(Snapshot, Subscription), Error> {
        let (sink, subscription) = subscription::channel(self.shared.capacity);
        let snapshot = self.ask(|reply| Command::Subscribe(Box::new(sink), reply))?;
        Ok((snapshot, subscription))
    }

    /// Runs `f` on the callbacks (the application's private state) on the agent's
    /// thread, between inputs, and returns what it returns.
    pub fn with_callbacks<R: Send + 'static>(&self, f: impl FnOnce(&mut C) -> R + Send + 'static) -> Result<R, Error> {
        self.request(|reply| {
            LoopInput::Command(Command::Inspect(Box::new(move |callbacks: &mut C| reply(f(callbacks)))))
        })
    }

    /// Sends a command and waits for its answer.
    fn ask<T: Send + 'static>(&self, command: impl FnOnce(Reply<T>) -> Command<C>) -> Result<T, Error> {
        self.request(|reply| LoopInput::Command(command(reply)))
    }

    /// Sends a message carrying a reply and waits for the reply. A loop that is gone
    /// (stopped, or a callback panicked) drops the message or the reply unanswered.
    fn request<T: Send + 'static>(&self, message: impl FnOnce(Reply<T>) -> LoopInput<C>) -> Result<T, Error> {
        let (tx, answer) = mpsc::sync_channel(1);
        let reply: Reply<T> = Box::new(move |value| {
            let _ = tx.send(value);
        });
        let terminated = || Error::Agent(AgentError::Terminated);
        self.shared.commands.send(message(reply)).map_err(|_| terminated())?;
        answer.recv().map_err(|_| terminated())
    }
}
