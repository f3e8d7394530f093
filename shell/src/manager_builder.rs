//! Sets up a session manager (`client.session_manager(store, agent)`): the store, how
//! each session's agent is built, the idle shutdown, titles, limits. `start` runs the
//! manager's loop.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use omni_protocol::agent::AgentCallbacks;
use omni_protocol::client::ModelRef;
use omni_protocol::manager::{ManagerConfig, TitleMode};
use omni_protocol::session::Presence;
use omni_protocol::session::Store;

use crate::drive_manager::{spawn_manager, AgentFactory};
use crate::manager::{SessionManager, Shared};
use crate::{Client, Driver, Error, DEFAULT_SUBSCRIBER_CAPACITY};

/// Sets up a [`SessionManager`].
///
/// ```text
/// let manager = client
///     .session_manager(store, |client, _id| client.agent("anthropic:claude-sonnet-4-5"))
///     .idle_after(Some(Duration::from_secs(600)))
///     .title_model("anthropic:claude-haiku-4-5")
///     .start()?;
/// ```
pub struct ManagerBuilder<D: Driver, C> {
    client: Client<D>,
    store: Arc<dyn Store>,
    agent: AgentFactory<D, C>,
    config: ManagerConfig,
    title_model: Option<ModelRef>,
    capacity: usize,
    presence: Option<Arc<dyn Presence>>,
}

impl<D: Driver, C> fmt::Debug for ManagerBuilder<D, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ManagerBuilder")
            .field("config", &self.config)
            .field("title_model", &self.title_model)
            .field("capacity", &self.capacity)
            .finish_non_exhaustive()
    }
}

impl<D: Driver, C: AgentCallbacks + Send + 'static> ManagerBuilder<D, C> {
    pub(crate) fn new(client: Client<D>, store: Arc<dyn Store>, agent: AgentFactory<D, C>) -> Self {
        Self {
            client,
            store,
            agent,
            config: ManagerConfig::default(),
            title_model: None,
            capacity: DEFAULT_SUBSCRIBER_CAPACITY,
            presence: None,
        }
    }

    /// How long a session with no controller and an idle agent stays open (`None`:
    /// until closed). Five minutes by default; a session's options may say otherwise.
    pub fn idle_after(mut self, idle_after: Option<Duration>) -> Self {
        self.config.idle_after = idle_after;
        self
    }

    /// How titles are made (the first message's text by default). [`TitleMode::Model`]
    /// needs a [`title_model`](Self::title_model).
    pub fn titles(mut self, titles: TitleMode) -> Self {
        self.config.titles = titles;
        self
    }

    /// Titles made by this model: a short call over each session's first messages (a
    /// failure falls back to the first message's text, and the feed says why).
    pub fn title_model(mut self, model: impl Into<ModelRef>) -> Self {
        self.title_model = Some(model.into());
        self.config.titles = TitleMode::Model;
        self
    }

    /// The most sessions running at once (100,000 by default): an open beyond it is
    /// refused.
    pub fn max_sessions(mut self, max: usize) -> Self {
        self.config.max_sessions = max;
        self
    }

    /// Events a feed subscriber may leave unread before it is dropped as lagging.
    pub fn subscriber_capacity(mut self, capacity: usize) -> Self {
        self.capacity = capacity.max(1);
        self
    }

    /// Shares the running sessions with the other nodes of a store shared by machines
    /// (omni-store's `PgStore`, which is both the store and its presence): this node's
    /// sessions are announced there, the others' show in `list_open`, `whereis` and the
    /// feed.
    pub fn presence(mut self, presence: Arc<dyn Presence>) -> Self {
        self.presence = Some(presence);
        self
    }

    /// Starts the manager's loop.
    pub fn start(self) -> Result<SessionManager<D, C>, Error> {
        let Self { client, store, agent, config, title_model, capacity, presence } = self;
        let messages = spawn_manager(client.clone(), store.clone(), agent, config, title_model, presence)?;
        Ok(SessionManager { shared: Arc::new(Shared { messages, store, client, capacity }) })
    }
}
