//! The session manager's handle: many sessions of one store, each running on its own
//! loop, opened, closed, renamed and deleted by id, closed when unused, titled, and told
//! about on a live feed. Its bookkeeping is omni-protocol's manager machine, run by the
//! manager's loop (`drive_manager`); this handle sends that loop messages.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_channel::Sender;
use omni_protocol::agent::{AgentCallbacks, NoCallbacks};
use omni_protocol::manager::{FeedEvent, IdleShutdown, ManagerError, OpenSession, Opening};
use omni_protocol::session::{SessionEvent, SessionSnapshot};
use omni_protocol::session::{SessionId, SessionList, Store};

use crate::drive_manager::{ManagerMessage, OpenAnswer, StartedSession, Whereabouts};
use crate::host::ask_loop;
use crate::runtime::store_call;
use crate::session_builder::random_id;
use crate::{AgentBuilder, AsyncTool, Client, Driver, Error, Session, Subscription};

/// How one session is opened by the manager (every setting has a default: the manager's
/// agent, its idle shutdown, the caller subscribed as a controller).
///
/// The store, and whether the session is created or loaded, are the manager's: they are
/// not among these options, so they cannot be given twice.
pub struct SessionOptions<D: Driver, C = NoCallbacks> {
    agent: Option<AgentBuilder<Client<D>, AsyncTool, C>>,
    idle: IdleShutdown,
    controller: bool,
    wait: Option<Duration>,
}

impl<D: Driver, C> Default for SessionOptions<D, C> {
    fn default() -> Self {
        Self { agent: None, idle: IdleShutdown::Default, controller: true, wait: None }
    }
}

impl<D: Driver, C> fmt::Debug for SessionOptions<D, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SessionOptions")
            .field("agent", &self.agent.is_some())
            .field("idle", &self.idle)
            .field("controller", &self.controller)
            .field("wait", &self.wait)
            .finish()
    }
}

impl<D: Driver, C> SessionOptions<D, C> {
    /// The defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// This session's agent (model, system prompt, tools, options, callbacks) instead of
    /// the manager's. Used only when this open starts the session.
    pub fn agent(mut self, agent: AgentBuilder<Client<D>, AsyncTool, C>) -> Self {
        self.agent = Some(agent);
        self
    }

    /// This session's idle shutdown instead of the manager's.
    pub fn idle(mut self, idle: IdleShutdown) -> Self {
        self.idle = idle;
        self
    }

    /// Not subscribed as a controller: the session may be closed as unused while this
    /// caller holds it.
    pub fn no_controller(mut self) -> Self {
        self.controller = false;
        self
    }

    /// When another owner (another node of a shared store) holds the session, waits up
    /// to `limit` for it to let go (or for its lease to lapse) instead of failing at once
    /// with [`ManagerError::OwnedElsewhere`].
    pub fn wait_for_owner(mut self, limit: Duration) -> Self {
        self.wait = Some(limit);
        self
    }

    /// Whether any setting of the session itself was given (ignored for a running one).
    fn sets_the_session(&self) -> bool {
        self.agent.is_some() || self.idle != IdleShutdown::Default
    }
}

/// A session as `create` or `open` gives it.
pub struct Opened<C = NoCallbacks> {
    /// The session's handle.
    pub session: Session<C>,
    /// Whether it was started by this call or ran already.
    pub opening: Opening,
    /// The session when the subscription began.
    pub snapshot: SessionSnapshot,
    /// The caller's subscription as a controller (`None` when it asked for none): while
    /// it is held, the session is never closed as unused.
    pub events: Option<Subscription<SessionEvent>>,
    /// True when session options were given for a session that ran already: they were
    /// not used.
    pub options_ignored: bool,
}

impl<C> fmt::Debug for Opened<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Opened")
            .field("session", &self.session)
            .field("opening", &self.opening)
            .field("subscribed", &self.events.is_some())
            .field("options_ignored", &self.options_ignored)
            .finish_non_exhaustive()
    }
}

pub(crate) struct Shared<D: Driver, C> {
    pub(crate) messages: Sender<ManagerMessage<D, C>>,
    pub(crate) store: Arc<dyn Store>,
    pub(crate) client: Client<D>,
    pub(crate) capacity: usize,
}

/// The session manager (see the module's doc and [`ManagerBuilder`](crate::ManagerBuilder)).
/// Clones are handles on the same manager; dropping the last closes every session (a
/// turn in flight finishes first, then its session writes what it committed and gives
/// its claim back).
pub struct SessionManager<D: Driver, C = NoCallbacks> {
    pub(crate) shared: Arc<Shared<D, C>>,
}

impl<D: Driver, C> Clone for SessionManager<D, C> {
    fn clone(&self) -> Self {
        Self { shared: self.shared.clone() }
    }
}

impl<D: Driver, C> fmt::Debug for SessionManager<D, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SessionManager").field("running", &!self.shared.messages.is_closed()).finish_non_exhaustive()
    }
}

impl<D: Driver, C: AgentCallbacks + Send + 'static> SessionManager<D, C> {
    /// Creates a session with a new random id.
    pub async fn create(&self) -> Result<Opened<C>, Error> {
        self.create_with(random_id::<D>(), SessionOptions::default()).await
    }

    /// Creates session `id` with `options`: refused
    /// ([`ManagerError::Exists`]) when the store has it or it runs.
    pub async fn create_with(&self, id: SessionId, options: SessionOptions<D, C>) -> Result<Opened<C>, Error> {
        self.start(id, true, options).await
    }

    /// The session `id`: the running one, or the store's, started.
    pub async fn open(&self, id: SessionId) -> Result<Opened<C>, Error> {
        self.start(id, false, SessionOptions::default()).await
    }

    /// As [`open`](Self::open), with `options` for a session this call starts (a running
    /// one ignores them, and [`Opened::options_ignored`] says so).
    pub async fn open_with(&self, id: SessionId, options: SessionOptions<D, C>) -> Result<Opened<C>, Error> {
        self.start(id, false, options).await
    }

    async fn start(&self, id: SessionId, create: bool, options: SessionOptions<D, C>) -> Result<Opened<C>, Error> {
        let sets_the_session = options.sets_the_session();
        let SessionOptions { agent, idle, controller, wait } = options;
        let agent = agent.map(Box::new);
        let answer =
            self.ask(|reply| ManagerMessage::Open { id, create, idle, agent, controller, wait, reply }).await??;
        match answer {
            OpenAnswer::Started(started) => {
                let StartedSession { session, snapshot, events, .. } = *started;
                Ok(Opened { session, opening: Opening::Started, snapshot, events, options_ignored: false })
            }
            OpenAnswer::Existing(session) => {
                let (snapshot, events) = if controller {
                    let (snapshot, events) = session.subscribe().await?;
                    (snapshot, Some(events))
                } else {
                    (session.snapshot().await?, None)
                };
                Ok(Opened { session, opening: Opening::Existing, snapshot, events, options_ignored: sets_the_session })
            }
        }
    }

    /// Closes session `id` (nothing to do when it does not run): a turn in flight
    /// finishes first; then it writes what it committed and gives its claim back. The
    /// store keeps it.
    pub async fn close(&self, id: SessionId) -> Result<(), Error> {
        Ok(self.ask(|reply| ManagerMessage::Close { id, reply }).await??)
    }

    /// Closes session `id`, then removes it from the store; whether the store had it.
    pub async fn delete(&self, id: SessionId) -> Result<bool, Error> {
        Ok(self.ask(|reply| ManagerMessage::Delete { id, reply }).await??)
    }

    /// Sets (or clears) session `id`'s title, whether it runs or is only kept.
    pub async fn rename(&self, id: SessionId, title: Option<String>) -> Result<(), Error> {
        Ok(self.ask(|reply| ManagerMessage::Rename { id, title, reply }).await??)
    }

    /// Where session `id` runs: here (its handle), on another node of a shared store
    /// (its name), or nowhere (`None`).
    pub async fn whereis(&self, id: SessionId) -> Result<Option<Whereabouts<C>>, Error> {
        self.ask(|reply| ManagerMessage::Whereis { id, reply }).await
    }

    /// The running sessions, with their status and title, by id.
    pub async fn list_open(&self) -> Result<Vec<OpenSession>, Error> {
        self.ask(|reply| ManagerMessage::ListOpen(reply)).await
    }

    /// Up to `limit` of the store's sessions after the first `offset`, the most recently
    /// written first, with their titles.
    pub async fn list(&self, limit: usize, offset: usize) -> Result<SessionList, Error> {
        let store = self.shared.store.clone();
        let runtime = self.shared.client.inner.runtime.clone();
        store_call(&runtime, move || store.list(limit, offset)).await.map_err(Error::Store)
    }

    /// The running sessions, and every later change to them, from the same moment: the
    /// feed (opened, status, title, closed). A subscriber that falls behind by more than
    /// the manager's subscriber capacity is dropped ([`Subscription::lagged`]). Dropping
    /// it unsubscribes.
    pub async fn subscribe(&self) -> Result<(Vec<OpenSession>, Subscription<FeedEvent>), Error> {
        let (sink, subscription) = Subscription::channel(self.shared.capacity);
        let open = self.ask(|reply| ManagerMessage::Subscribe(Box::new(sink), reply)).await?;
        Ok((open, subscription))
    }

    /// Closes every session (turns in flight finish first) and waits until each has
    /// written what it committed and given its claim back. Later requests are refused
    /// ([`ManagerError::ShuttingDown`]).
    pub async fn shutdown(&self) -> Result<(), Error> {
        match self.ask(|reply| ManagerMessage::Shutdown(reply)).await {
            // Over already.
            Err(Error::Agent(omni_protocol::agent::AgentError::Terminated)) => Ok(()),
            done => done,
        }
    }

    async fn ask<T: Send + 'static>(
        &self,
        message: impl FnOnce(crate::host::Reply<T>) -> ManagerMessage<D, C>,
    ) -> Result<T, Error> {
        ask_loop(&self.shared.messages, message).await
    }
}

impl From<ManagerError> for Error {
    fn from(e: ManagerError) -> Self {
        Self::Manager(e)
    }
}
