//! The session on plain threads: omni-shell's session handle, its methods waiting for the
//! session's answer on the caller's thread, with events to any number of subscribers as
//! blocking [`Iterator`]s ([`Subscription`]). The session's loop runs on a thread of its
//! own and its store's writes on others, so a slow disk never holds up the agent's
//! requests or deadlines.

use std::fmt;
use std::future::Future;
use std::thread::{self, ThreadId};

use futures_lite::future::block_on;
use omni_protocol::agent::{AgentCallbacks, NoCallbacks, Prompt, ToolDecision};
use omni_protocol::session::{NodeId, Tree};
use omni_protocol::session::{SessionEvent, SessionSnapshot};
use omni_protocol::session::{SessionId, SessionState, StoreWarning};
use omni_shell::SubscriberCount;

use crate::{Client, Error, Subscription, Tool};

/// Sets up a session (`client.agent(model)….session(store)`); see
/// [`omni_shell::SessionBuilder`]. Its `create`, `create_with_id` and `load` return the
/// [`Session`] itself.
pub type SessionBuilder<C = NoCallbacks> = omni_shell::SessionBuilder<Client, Tool, C>;

/// A running session: an agent with a branching message tree, kept in a store; see
/// [`omni_shell::Session`], whose methods these are, waiting on the caller's thread.
/// Clones are handles on the same session; dropping the last one stops it once the store
/// holds every committed turn. The agent's callbacks run on the session's thread; a
/// handle's method called there answers [`AgentError::CalledFromAgent`](crate::AgentError::CalledFromAgent) instead of waiting
/// for itself.
///
/// ```no_run
/// use std::sync::Arc;
/// use omni_blocking::{AgentEvent, Client, SessionEvent};
///
/// # fn store() -> Arc<dyn omni_blocking::Store> { unimplemented!() }
/// let client = Client::new()?;
/// let session = client.agent("anthropic:claude-sonnet-4-5").session(store()).create()?;
/// let (_snapshot, events) = session.subscribe()?;
/// session.prompt("Hi!")?;
/// for event in events {
///     if let SessionEvent::Store { .. } = event {
///         break; // the turn is committed and saved
///     }
/// }
/// println!("{} nodes, session {}", session.tree()?.len(), session.id());
/// # Ok::<(), omni_blocking::Error>(())
/// ```
pub struct Session<C = NoCallbacks> {
    inner: omni_shell::Session<C>,
    /// The thread the session (and its agent's callbacks) run on.
    thread: ThreadId,
}

impl<C: AgentCallbacks + Send + 'static> Session<C> {
    /// Wraps the shell's handle, learning the thread its loop runs on.
    pub(crate) fn new(inner: omni_shell::Session<C>) -> Result<Self, Error> {
        let thread = block_on(inner.with_callbacks(|_| thread::current().id()))?;
        Ok(Self { inner, thread })
    }
}

impl<C> Session<C> {
    /// The session's id, for loading it again.
    pub fn id(&self) -> &SessionId {
        self.inner.id()
    }

    /// What the store said while loading the session; empty for a new one.
    pub fn load_warnings(&self) -> &[StoreWarning] {
        self.inner.load_warnings()
    }
}

impl<C> Clone for Session<C> {
    fn clone(&self) -> Self {
        Self { inner: self.inner.clone(), thread: self.thread }
    }
}

impl<C> fmt::Debug for Session<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.fmt(f)
    }
}

impl<C: AgentCallbacks + Send + 'static> Session<C> {
    waiting! {
        /// Sends a user message as a new turn under the head of the active path.
        fn prompt(text: impl Into<String>) -> ();
        /// A user message of content blocks, with options for its turn only.
        fn prompt_with(prompt: impl Into<Prompt>) -> ();
        /// Moves the active path through `node` and on to a tip; `None` clears it.
        fn navigate(node: Option<NodeId>) -> ();
        /// Asks again for the reply to the user message `node`.
        fn regenerate(node: NodeId) -> ();
        /// A new user message under the assistant message `parent` (a new root with `None`).
        fn edit(parent: Option<NodeId>, text: impl Into<String>) -> ();
        /// Sets (or clears) the title.
        fn set_title(title: Option<String>) -> ();
        /// Stops the turn in flight; the tree goes back to where the turn found it.
        fn cancel() -> ();
        /// Answers the paused tool call.
        fn resume(decision: ToolDecision) -> ();
        /// Stops the session and waits until everything committed is written and its
        /// ownership in the store released (every handle on it is closed with it).
        fn close() -> ();
        /// The tree, the agent's snapshot and the title.
        fn snapshot() -> SessionSnapshot;
        /// The message tree, with its active path.
        fn tree() -> Tree;
        /// Whether the store holds everything the session does.
        fn is_saved() -> bool;
        /// The state map as the store keeps it (model, system prompt, options, title, position).
        fn state() -> SessionState;
        /// The session's subscribers, by role.
        fn subscribers() -> SubscriberCount;
    }

    /// Subscribes as a controller to every later event, with the snapshot taken at the
    /// same moment. Dropping the subscription unsubscribes.
    pub fn subscribe(&self) -> Result<(SessionSnapshot, Subscription<SessionEvent>), Error> {
        self.wait(self.inner.subscribe()).map(Subscription::with_snapshot)
    }

    /// Subscribes as an observer (not counted as using the session).
    pub fn observe(&self) -> Result<(SessionSnapshot, Subscription<SessionEvent>), Error> {
        self.wait(self.inner.observe()).map(Subscription::with_snapshot)
    }

    /// Runs `f` on the agent's callbacks (the application's private state) on the
    /// session's thread, between inputs, and returns what it returns.
    pub fn with_callbacks<R: Send + 'static>(&self, f: impl FnOnce(&mut C) -> R + Send + 'static) -> Result<R, Error> {
        self.wait(self.inner.with_callbacks(f))
    }

    /// Waits for the session's answer on this thread; refused on the session's own thread
    /// (from a callback), where waiting for the session would wait for itself.
    fn wait<T>(&self, answer: impl Future<Output = Result<T, Error>>) -> Result<T, Error> {
        crate::wait_unless_on(self.thread, answer)
    }
}
