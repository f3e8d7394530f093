//! The agent on plain threads: omni-shell's agent handle, its methods waiting for the
//! agent's answer on the caller's thread, with events to any number of subscribers as
//! blocking [`Iterator`]s ([`Subscription`]).
//!
//! The core machine ([`omni_protocol::agent`]) takes every decision; omni-shell's agent loop
//! runs it on a thread of its own and executes its effects (as for a call). Dropping the
//! last handle stops the agent: the request in flight is closed, running tools see their
//! [`CancelToken`](crate::CancelToken) tripped, `terminate` is called and every
//! subscription ends.
//!
//! The callbacks run on the agent's thread. A handle's methods called from them (or from
//! an [`Agent::with_callbacks`] closure) would wait for the agent, which waits for them:
//! they return [`AgentError::CalledFromAgent`](crate::AgentError::CalledFromAgent) instead.

use std::fmt;
use std::future::Future;
use std::thread::ThreadId;

use omni_protocol::agent::{AgentCallbacks, AgentState, NoCallbacks, Prompt, Snapshot, Status, ToolDecision};
use omni_protocol::Message;

use crate::{Client, Error, Subscription, Tool};

/// What [`Agent::set_state`] changes; see [`omni_protocol::agent::StateChange`].
pub type StateChange = omni_protocol::agent::StateChange<Tool>;

/// Sets up an agent; see [`Client::agent`] and [`omni_shell::AgentBuilder`] (its
/// setters: `system`, `messages`, `tool`, `tools`, `options`, `tool_timeout`,
/// `error_backoff`, `output_retries`, `api_key`, `subscriber_capacity`, `subscriber`,
/// `callbacks`; then `start`).
pub type AgentBuilder<C = NoCallbacks> = omni_shell::AgentBuilder<Client, Tool, C>;

/// A running agent. Clones are handles on the same agent (`Send + Sync`, usable from any
/// thread); dropping the last one stops it. Every method blocks until the agent's
/// thread answers, which it does between inputs, never waiting on the network or a tool.
/// A stopped agent answers [`AgentError::Terminated`](crate::AgentError::Terminated).
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
    inner: omni_shell::Agent<C>,
    /// The thread the agent (and its callbacks) run on.
    thread: ThreadId,
}

impl<C> Agent<C> {
    pub(crate) fn new(inner: omni_shell::Agent<C>, thread: ThreadId) -> Self {
        Self { inner, thread }
    }

    /// A handle that does not keep the agent running: for a tool or a callback that
    /// must reach its own agent (a strong handle there would be a cycle, and the agent
    /// would outlive every handle of the application's).
    pub fn downgrade(&self) -> WeakAgent<C> {
        WeakAgent { inner: self.inner.downgrade(), thread: self.thread }
    }
}

impl<C> Clone for Agent<C> {
    fn clone(&self) -> Self {
        Self { inner: self.inner.clone(), thread: self.thread }
    }
}

impl<C> fmt::Debug for Agent<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.fmt(f)
    }
}

/// A handle on an agent that does not keep it running; see [`Agent::downgrade`].
pub struct WeakAgent<C = NoCallbacks> {
    inner: omni_shell::WeakAgent<C>,
    thread: ThreadId,
}

impl<C> WeakAgent<C> {
    /// The agent, while some [`Agent`] handle still keeps it running.
    pub fn upgrade(&self) -> Option<Agent<C>> {
        Some(Agent { inner: self.inner.upgrade()?, thread: self.thread })
    }
}

impl<C> Clone for WeakAgent<C> {
    fn clone(&self) -> Self {
        Self { inner: self.inner.clone(), thread: self.thread }
    }
}

impl<C> fmt::Debug for WeakAgent<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.fmt(f)
    }
}

impl<C: AgentCallbacks + Send + 'static> Agent<C> {
    waiting! {
        /// Sends a user message: starts a turn when idle; while busy or paused, stages it for
        /// the next turn boundary (the last one wins, over `handle_turn`'s decision).
        fn prompt(text: impl Into<String>) -> ();
        /// Sends a user message of content blocks (text, attachments, results of tools the
        /// application ran itself), with options over the agent's for that turn only.
        fn prompt_with(prompt: impl Into<Prompt>) -> ();
        /// Answers the paused tool call.
        fn resume(decision: ToolDecision) -> ();
        /// Stops the turn in flight and discards it (an error when idle).
        fn cancel() -> ();
        /// Status, model, system prompt, committed history, tools and options.
        fn state() -> AgentState;
        /// What the agent is doing.
        fn status() -> Status;
        /// The committed history.
        fn messages() -> Vec<Message>;
        /// Committed, pending and partial messages.
        fn snapshot() -> Snapshot;
    }

    /// Changes model, key, system prompt, history, tools or options, all or nothing;
    /// only while idle.
    pub fn set_state(&self, change: StateChange) -> Result<(), Error> {
        self.wait(self.inner.set_state(change.map_tools(Into::into)))
    }

    /// Subscribes to every later event. The snapshot is taken at the same moment, so
    /// together they miss nothing. Dropping the subscription unsubscribes.
    pub fn subscribe(&self) -> Result<(Snapshot, Subscription), Error> {
        self.wait(self.inner.subscribe()).map(Subscription::with_snapshot)
    }

    /// Runs `f` on the callbacks (the application's private state) on the agent's
    /// thread, between inputs, and returns what it returns.
    pub fn with_callbacks<R: Send + 'static>(&self, f: impl FnOnce(&mut C) -> R + Send + 'static) -> Result<R, Error> {
        self.wait(self.inner.with_callbacks(f))
    }

    /// Waits for the agent's answer on this thread; refused on the agent's own thread,
    /// where waiting for the agent would wait for itself.
    fn wait<T>(&self, answer: impl Future<Output = Result<T, Error>>) -> Result<T, Error> {
        crate::wait_unless_on(self.thread, answer)
    }
}
