//! The agent on plain threads: an [`Agent`] handle whose methods block until the agent
//! answers, with events to any number of subscribers as blocking [`Iterator`]s.
//!
//! The core machine ([`omni_core::agent`]) takes every decision; omni-shell's agent loop
//! owns it inside a [`Host`] on a thread of its own and executes its effects (as for a
//! call). Handles send it commands on a bounded channel (a handle's method waits while
//! the agent has many commands unread). Dropping the last handle stops
//! the agent: the request in flight is closed, running tools see their
//! [`CancelToken`](crate::CancelToken) tripped, `terminate` is called and every
//! subscription ends.
//!
//! The callbacks run on the agent's thread. A handle's methods called from them (or from
//! an [`Agent::with_callbacks`] closure) would wait for the agent, which waits for them:
//! they return [`AgentError::CalledFromAgent`] instead.

mod subscription;

use std::fmt;
use std::sync::{Arc, OnceLock};
use std::thread;

use async_channel::Sender;
use omni_core::agent::{AgentCallbacks, AgentError, AgentState, NoCallbacks, Snapshot, Status, ToolDecision};
use omni_core::client::{ClientConfig, ModelRef};
use omni_core::generate::ToolDecl;
use omni_core::Message;
use omni_shell::{AsyncTool, Command, Host, Launch, LoopMessage, Reply};

use crate::blocking_client::Client;
use crate::runtime::Threads;
use crate::tools::Tool;
use crate::Error;

pub use subscription::{Subscriber, Subscription};

/// What [`Agent::set_state`] changes; see [`omni_core::agent::StateChange`].
pub type StateChange = omni_core::agent::StateChange<Tool>;

/// Sets up an agent; see [`Client::agent`] and [`omni_shell::AgentBuilder`] (its
/// setters: `system`, `messages`, `tool`, `tools`, `options`, `tool_timeout`,
/// `error_backoff`, `output_retries`, `api_key`, `subscriber_capacity`, `subscriber`, `callbacks`; then
/// `start`).
pub type AgentBuilder<C = NoCallbacks> = omni_shell::AgentBuilder<Client, Tool, C>;

impl Client {
    /// Starts setting up an agent on this client's configuration (catalogue, keys,
    /// default options, retry policy, stall limit). `start()` runs it on its own thread.
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

    fn now(&self) -> std::time::Instant {
        std::time::Instant::now()
    }

    fn describe(tool: &Tool) -> ToolDecl {
        tool.decl()
    }

    fn launch<C: AgentCallbacks + Send + 'static>(
        &self,
        host: Host<C>,
        tools: Vec<Tool>,
        capacity: usize,
    ) -> Result<Agent<C>, Error> {
        // The loop is the first task of this runtime: its thread is recorded.
        let first = Arc::new(OnceLock::new());
        let tools = async_tools(&tools);
        let commands =
            omni_shell::spawn_agent_loop(&Threads::recording(first.clone()), self.inner.http.clone(), host, &tools)?;
        let agent_thread = first.get().copied().ok_or_else(|| Error::Setup("the agent loop did not start".into()))?;
        Ok(Agent { shared: Arc::new(Shared { client: self.clone(), commands, agent_thread, capacity }) })
    }
}

/// The tools as the shell's executor runs them.
fn async_tools(tools: &[Tool]) -> Vec<AsyncTool> {
    tools.iter().map(|tool| tool.as_async().clone()).collect()
}

/// What every handle of one agent shares; dropped with the last handle, which closes
/// the commands channel: that tells the loop to stop.
struct Shared<C> {
    client: Client,
    commands: Sender<LoopMessage<C>>,
    /// The thread the agent (and its callbacks) run on.
    agent_thread: thread::ThreadId,
    capacity: usize,
}

/// A running agent. Clones are handles on the same agent (`Send + Sync`, usable from any
/// thread); dropping the last one stops it. Every method blocks until the agent's
/// thread answers, which it does between inputs, never waiting on the network or a tool.
/// A stopped agent answers [`AgentError::Terminated`].
///
/// ```no_run
/// use omni_blocking::{AgentEvent, Client, StreamEvent};
///
/// let client = Client::new()?; // keys from ANTHROPIC_API_KEY, OPENAI_API_KEY, ...
/// let agent = client.agent("anthropic:claude-sonnet-4-5").system("Be brief.").start()?;
/// let (_snapshot, events) = agent.subscribe()?;
/// agent.prompt("Hi!")?;
/// for event in events {
///     match event {
///         AgentEvent::Stream(StreamEvent::TextDelta { delta, .. }) => print!("{delta}"),
///         AgentEvent::Turn { .. } => break,
///         _ => {}
///     }
/// }
/// println!("\n{} messages so far", agent.messages()?.len());
/// # Ok::<(), omni_blocking::Error>(())
/// ```
pub struct Agent<C = NoCallbacks> {
    shared: Arc<Shared<C>>,
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
        let tools = tools.as_deref().map(async_tools);
        let (reply, answer) = async_channel::bounded(1);
        self.send(LoopMessage::SetState { patch: Box::new(patch), tools, reply })?;
        Ok(answer.recv_blocking().map_err(|_| Error::Agent(AgentError::Terminated))??)
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
        let (sink, subscription) = Subscription::channel(self.shared.capacity);
        let snapshot = self.ask(|reply| Command::Subscribe(Box::new(sink), reply))?;
        Ok((snapshot, subscription))
    }

    /// Runs `f` on the callbacks (the application's private state) on the agent's
    /// thread, between inputs, and returns what it returns.
    pub fn with_callbacks<R: Send + 'static>(&self, f: impl FnOnce(&mut C) -> R + Send + 'static) -> Result<R, Error> {
        self.request(|reply| {
            LoopMessage::Command(Command::Inspect(Box::new(move |callbacks: &mut C| reply(f(callbacks)))))
        })
    }

    /// Sends a command and waits for its answer.
    fn ask<T: Send + 'static>(&self, command: impl FnOnce(Reply<T>) -> Command<C>) -> Result<T, Error> {
        self.request(|reply| LoopMessage::Command(command(reply)))
    }

    /// Sends a message carrying a reply and waits for the reply. A loop that is gone
    /// (stopped, or a callback panicked) drops the message or the reply unanswered.
    fn request<T: Send + 'static>(&self, message: impl FnOnce(Reply<T>) -> LoopMessage<C>) -> Result<T, Error> {
        let (tx, answer) = async_channel::bounded(1);
        let reply: Reply<T> = Box::new(move |value| {
            let _ = tx.try_send(value);
        });
        self.send(message(reply))?;
        answer.recv_blocking().map_err(|_| Error::Agent(AgentError::Terminated))
    }

    /// Sends a message to the loop, waiting while its queue is full; refused on the
    /// agent's own thread, where waiting for the loop would wait for itself.
    fn send(&self, message: LoopMessage<C>) -> Result<(), Error> {
        if thread::current().id() == self.shared.agent_thread {
            return Err(Error::Agent(AgentError::CalledFromAgent));
        }
        self.shared.commands.send_blocking(message).map_err(|_| Error::Agent(AgentError::Terminated))
    }
}
