//! The session manager on plain threads: omni-shell's manager, its methods waiting for
//! the answer on the caller's thread, its feed a blocking [`Iterator`]
//! ([`Subscription`]). The manager's loop, each session's loop and the store's calls run
//! on threads of their own.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures_lite::future::block_on;
use omni_protocol::agent::{AgentCallbacks, NoCallbacks};
use omni_protocol::client::ModelRef;
use omni_protocol::manager::{FeedEvent, IdleShutdown, OpenSession, Opening, TitleMode};
use omni_protocol::session::Presence;
use omni_protocol::session::{SessionEvent, SessionSnapshot};
use omni_protocol::session::{SessionId, SessionList, Store};

use crate::blocking_client::Blocking;
use crate::{AgentBuilder, Client, Error, Session, Subscription};

impl Client {
    /// Starts setting up a session manager over `store`: `agent` builds each session's
    /// agent (it is given this client and the session's id); `start()` runs the manager.
    /// See [`omni_shell::ManagerBuilder`].
    pub fn session_manager<C: AgentCallbacks + Send + 'static>(
        &self,
        store: Arc<dyn Store>,
        agent: impl Fn(&Self, &SessionId) -> AgentBuilder<C> + Send + Sync + 'static,
    ) -> ManagerBuilder<C> {
        let inner = self.0.session_manager(store, move |shell, id| {
            agent(&Self(shell.clone()), id).with_launcher(shell.clone(), Into::into)
        });
        ManagerBuilder { inner }
    }
}

/// Sets up a [`SessionManager`]; see [`omni_shell::ManagerBuilder`], whose setters these
/// are.
pub struct ManagerBuilder<C = NoCallbacks> {
    inner: omni_shell::ManagerBuilder<Blocking, C>,
}

impl<C> fmt::Debug for ManagerBuilder<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.fmt(f)
    }
}

impl<C: AgentCallbacks + Send + 'static> ManagerBuilder<C> {
    /// How long a session with no controller and an idle agent stays open (`None`: until
    /// closed); five minutes by default.
    pub fn idle_after(self, idle_after: Option<Duration>) -> Self {
        Self { inner: self.inner.idle_after(idle_after) }
    }

    /// How titles are made.
    pub fn titles(self, titles: TitleMode) -> Self {
        Self { inner: self.inner.titles(titles) }
    }

    /// Titles made by this model (a failure falls back to the first message's text).
    pub fn title_model(self, model: impl Into<ModelRef>) -> Self {
        Self { inner: self.inner.title_model(model) }
    }

    /// The most sessions running at once.
    pub fn max_sessions(self, max: usize) -> Self {
        Self { inner: self.inner.max_sessions(max) }
    }

    /// Events a feed subscriber may leave unread before it is dropped as lagging.
    pub fn subscriber_capacity(self, capacity: usize) -> Self {
        Self { inner: self.inner.subscriber_capacity(capacity) }
    }

    /// Shares the running sessions with the other nodes of a store shared by machines.
    pub fn presence(self, presence: Arc<dyn Presence>) -> Self {
        Self { inner: self.inner.presence(presence) }
    }

    /// Starts the manager.
    pub fn start(self) -> Result<SessionManager<C>, Error> {
        Ok(SessionManager { inner: self.inner.start()? })
    }
}

/// How one session is opened by the manager; see [`omni_shell::SessionOptions`].
pub struct SessionOptions<C = NoCallbacks> {
    inner: omni_shell::SessionOptions<Blocking, C>,
}

impl<C> Default for SessionOptions<C> {
    fn default() -> Self {
        Self { inner: omni_shell::SessionOptions::default() }
    }
}

impl<C> fmt::Debug for SessionOptions<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.fmt(f)
    }
}

impl<C: AgentCallbacks + Send + 'static> SessionOptions<C> {
    /// The defaults: the manager's agent and idle shutdown, the caller a controller.
    pub fn new() -> Self {
        Self::default()
    }

    /// This session's agent instead of the manager's (used only when this open starts it).
    pub fn agent(self, agent: AgentBuilder<C>) -> Self {
        let shell = agent.client().0.clone();
        Self { inner: self.inner.agent(agent.with_launcher(shell, Into::into)) }
    }

    /// This session's idle shutdown instead of the manager's.
    pub fn idle(self, idle: IdleShutdown) -> Self {
        Self { inner: self.inner.idle(idle) }
    }

    /// Not subscribed as a controller.
    pub fn no_controller(self) -> Self {
        Self { inner: self.inner.no_controller() }
    }

    /// Waits up to `limit` for another owner to let go of the session.
    pub fn wait_for_owner(self, limit: Duration) -> Self {
        Self { inner: self.inner.wait_for_owner(limit) }
    }
}

/// A session as `create` or `open` gives it; see [`omni_shell::Opened`].
#[derive(Debug)]
pub struct Opened<C = NoCallbacks> {
    /// The session's handle.
    pub session: Session<C>,
    /// Whether it was started by this call or ran already.
    pub opening: Opening,
    /// The session when the subscription began.
    pub snapshot: SessionSnapshot,
    /// The caller's subscription as a controller (`None` when it asked for none).
    pub events: Option<Subscription<SessionEvent>>,
    /// True when session options were given for a session that ran already.
    pub options_ignored: bool,
}

/// Where a session runs.
#[derive(Debug)]
pub enum Whereabouts<C = NoCallbacks> {
    /// On this node: its handle.
    Here(Session<C>),
    /// On another node of a shared store: its name (as last heard).
    Elsewhere(String),
}

/// Many sessions of one store, each on its own thread; see [`omni_shell::SessionManager`],
/// whose methods these are, waiting on the caller's thread.
pub struct SessionManager<C = NoCallbacks> {
    inner: omni_shell::SessionManager<Blocking, C>,
}

impl<C> Clone for SessionManager<C> {
    fn clone(&self) -> Self {
        Self { inner: self.inner.clone() }
    }
}

impl<C> fmt::Debug for SessionManager<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.fmt(f)
    }
}

impl<C: AgentCallbacks + Send + 'static> SessionManager<C> {
    /// Creates a session with a new random id.
    pub fn create(&self) -> Result<Opened<C>, Error> {
        opened(block_on(self.inner.create()))
    }

    /// Creates session `id` with `options`.
    pub fn create_with(&self, id: SessionId, options: SessionOptions<C>) -> Result<Opened<C>, Error> {
        opened(block_on(self.inner.create_with(id, options.inner)))
    }

    /// The session `id`: the running one, or the store's, started.
    pub fn open(&self, id: SessionId) -> Result<Opened<C>, Error> {
        opened(block_on(self.inner.open(id)))
    }

    /// As [`open`](Self::open), with options for a session this call starts.
    pub fn open_with(&self, id: SessionId, options: SessionOptions<C>) -> Result<Opened<C>, Error> {
        opened(block_on(self.inner.open_with(id, options.inner)))
    }

    /// Closes session `id` (a turn in flight finishes first); the store keeps it.
    pub fn close(&self, id: SessionId) -> Result<(), Error> {
        block_on(self.inner.close(id))
    }

    /// Closes session `id`, then removes it from the store; whether the store had it.
    pub fn delete(&self, id: SessionId) -> Result<bool, Error> {
        block_on(self.inner.delete(id))
    }

    /// Sets (or clears) session `id`'s title, whether it runs or is only kept.
    pub fn rename(&self, id: SessionId, title: Option<String>) -> Result<(), Error> {
        block_on(self.inner.rename(id, title))
    }

    /// Where session `id` runs: here, on another node, or nowhere (`None`).
    pub fn whereis(&self, id: SessionId) -> Result<Option<Whereabouts<C>>, Error> {
        Ok(match block_on(self.inner.whereis(id))? {
            Some(omni_shell::Whereabouts::Here(session)) => Some(Whereabouts::Here(Session::new(session)?)),
            Some(omni_shell::Whereabouts::Elsewhere(node)) => Some(Whereabouts::Elsewhere(node)),
            None => None,
        })
    }

    /// The running sessions, with their status and title.
    pub fn list_open(&self) -> Result<Vec<OpenSession>, Error> {
        block_on(self.inner.list_open())
    }

    /// A page of the store's sessions, the most recently written first, with titles.
    pub fn list(&self, limit: usize, offset: usize) -> Result<SessionList, Error> {
        block_on(self.inner.list(limit, offset))
    }

    /// The running sessions and every later change to them (the feed), from one moment.
    pub fn subscribe(&self) -> Result<(Vec<OpenSession>, Subscription<FeedEvent>), Error> {
        block_on(self.inner.subscribe()).map(Subscription::with_snapshot)
    }

    /// Closes every session and waits until each gave its claim back.
    pub fn shutdown(&self) -> Result<(), Error> {
        block_on(self.inner.shutdown())
    }
}

fn opened<C: AgentCallbacks + Send + 'static>(
    opened: Result<omni_shell::Opened<C>, Error>,
) -> Result<Opened<C>, Error> {
    let omni_shell::Opened { session, opening, snapshot, events, options_ignored } = opened?;
    Ok(Opened { session: Session::new(session)?, opening, snapshot, events: events.map(Into::into), options_ignored })
}
