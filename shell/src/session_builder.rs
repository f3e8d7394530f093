//! The session builder every driver hands out (`client.agent(model)….session(store)`),
//! and how a session is created or loaded, decided once: the store is read or written
//! off the executor, the model, system prompt and options are chosen between what the
//! store kept and what the application starts with, and the session's loop is spawned.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use omni_protocol::agent::{Agent, AgentCallbacks, AgentConfig, AgentEvent};
use omni_protocol::client::ModelRef;
#[cfg(doc)]
use omni_protocol::session::StoreErrorKind;
use omni_protocol::session::Tree;
use omni_protocol::session::{Claim, SessionId, SessionState, Store, StoreError};
use omni_protocol::session::{Session as SessionMachine, SessionEvent};
use omni_protocol::Options;

use crate::drive_session::{spawn_session, SessionWork, SubscriberRole};
use crate::host::EventSink;
use crate::runtime::store_call;
use crate::{AgentBuilder, AsyncTool, Client, Driver, Error, Launch, Session};
use omni_protocol::observe::Observe;

/// Whether a session is made or read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Open {
    /// A new session: this id (refused if the store has it), or a random one.
    Create(Option<SessionId>),
    /// The session the store keeps under this id, owned by this handle: refused
    /// ([`StoreErrorKind::OwnedElsewhere`]) while another owns it.
    Load(SessionId),
    /// The session the store keeps under this id, read-only: it shows what was saved and
    /// changes nothing (every change is refused with `SessionError::ReadOnly`), whoever
    /// owns it.
    ReadOnly(SessionId),
}

/// Sets up a session: the agent's builder (its model, system prompt, tools and options
/// are the session's start options), the store, a title, subscribers. Then
/// [`create`](Self::create), [`create_with_id`](Self::create_with_id) or
/// [`load`](Self::load): a future of the session in the async drivers, the session itself
/// in omni-blocking.
///
/// On load, the model the session was using is used again (the builder's is the fallback,
/// for a model this client cannot resolve by name); the builder's system prompt and
/// options win over those kept, when it sets them; tools always come from the builder
/// (they are code, never kept); the title is the one kept; and the agent's history is
/// the tree's active path. Options are kept without their headers, which may carry
/// credentials.
pub struct SessionBuilder<L, T, C> {
    agent: AgentBuilder<L, T, C>,
    store: Arc<dyn Store>,
    title: Option<String>,
    subscribers: Vec<(SubscriberRole, Box<dyn EventSink<SessionEvent>>)>,
}

impl<L, T: fmt::Debug, C> fmt::Debug for SessionBuilder<L, T, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SessionBuilder")
            .field("agent", &self.agent)
            .field("title", &self.title)
            .field("subscribers", &self.subscribers.len())
            .finish_non_exhaustive()
    }
}

impl<L: Launch<T>, T, C: AgentCallbacks + Send + 'static> SessionBuilder<L, T, C> {
    pub(crate) fn new(agent: AgentBuilder<L, T, C>, store: Arc<dyn Store>) -> Self {
        Self { agent, store, title: None, subscribers: Vec::new() }
    }

    /// The title of a new session (a loaded one keeps its own).
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }

    /// A controller from the start: it sees every event of the session. Any
    /// [`EventSink`] of session events: a driver's `Subscription::channel`, or a closure
    /// `|event: &SessionEvent| -> bool` (run on the session's task, so quick).
    pub fn subscriber(mut self, sink: impl EventSink<SessionEvent> + 'static) -> Self {
        self.subscribers.push((SubscriberRole::Controller, Box::new(sink)));
        self
    }

    /// An observer from the start: as [`subscriber`](Self::subscriber), not counted as
    /// using the session.
    pub fn observer(mut self, sink: impl EventSink<SessionEvent> + 'static) -> Self {
        self.subscribers.push((SubscriberRole::Observer, Box::new(sink)));
        self
    }

    /// Creates or loads the session, as `open` says: [`create`](Self::create),
    /// [`create_with_id`](Self::create_with_id) and [`load`](Self::load) in one.
    pub fn open(self, open: Open) -> L::Opening<C> {
        L::open(self, open)
    }

    /// Creates a session with a new random id (16 random bytes, URL-safe base64).
    pub fn create(self) -> L::Opening<C> {
        L::open(self, Open::Create(None))
    }

    /// Creates a session with this id; refused ([`Error::Store`] of kind
    /// [`StoreErrorKind::Exists`]) if the store has one, atomically.
    pub fn create_with_id(self, id: SessionId) -> L::Opening<C> {
        L::open(self, Open::Create(Some(id)))
    }

    /// Loads the session the store keeps under `id`, and owns it until the session's
    /// last handle is dropped: refused ([`Error::Store`] of kind
    /// [`StoreErrorKind::OwnedElsewhere`], at once) while another handle, in this process
    /// or another, owns it.
    pub fn load(self, id: SessionId) -> L::Opening<C> {
        L::open(self, Open::Load(id))
    }

    /// Loads the session the store keeps under `id` read-only: its saved state, whoever
    /// owns it; every change is refused.
    pub fn load_read_only(self, id: SessionId) -> L::Opening<C> {
        L::open(self, Open::ReadOnly(id))
    }

    /// The store the session is kept in.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// The client the session will run on.
    pub fn client(&self) -> &L {
        &self.agent.launcher
    }

    /// The same builder on another driver's client, its tools converted: for a driver
    /// whose handles wrap the shell's (omni-blocking).
    pub fn with_launcher<M: Launch<U>, U>(self, launcher: M, tool: impl FnMut(T) -> U) -> SessionBuilder<M, U, C> {
        SessionBuilder {
            agent: self.agent.with_launcher(launcher, tool),
            store: self.store,
            title: self.title,
            subscribers: self.subscribers,
        }
    }
}

/// A session's opening on an async driver.
pub type Opening<C> = Pin<Box<dyn Future<Output = Result<Session<C>, Error>> + Send>>;

/// An agent's subscriber set on the agent builder, given the session's agent events.
struct AgentEventsOnly(Box<dyn EventSink<AgentEvent>>);

impl EventSink<SessionEvent> for AgentEventsOnly {
    fn offer(&mut self, event: SessionEvent) -> bool {
        match event {
            SessionEvent::Agent(event) => self.0.offer(event),
            _ => true,
        }
    }
}

/// Creates or loads the session and spawns its loop on `builder`'s client.
pub(crate) async fn open<D: Driver, C: AgentCallbacks + Send + 'static>(
    builder: SessionBuilder<Client<D>, AsyncTool, C>,
    open: Open,
) -> Result<Session<C>, Error> {
    let SessionBuilder { agent: mut start, store, title, mut subscribers } = builder;
    let client = start.launcher.clone();
    let runtime = client.inner.runtime.clone();
    let now = || client.now();
    let owned = !matches!(open, Open::ReadOnly(_));
    let (id, claim, tree, state, warnings, config) = match open {
        Open::Create(id) => {
            let id = id.unwrap_or_else(|| random_id::<D>());
            let config = start.configure(&start.model)?;
            let state = SessionState {
                model: Some(model_name(&config)),
                system: config.system.clone(),
                options: kept_options(&start.options),
                title,
                ..SessionState::default()
            };
            let written = (store.clone(), id.clone(), state.clone());
            let claim = store_call(&runtime, move || written.0.create(&written.1, &written.2)).await?;
            (id, Some(claim), Tree::new(), state, Vec::new(), config)
        }
        Open::Load(id) | Open::ReadOnly(id) => {
            // Claimed before it is read: what an owner reads is what the last owner left,
            // and nobody writes after it.
            let read = (store.clone(), id.clone());
            let (claim, loaded) = store_call(&runtime, move || {
                let (store, id) = read;
                let claim = if owned { Some(store.claim(&id)?) } else { None };
                match store.load(&id) {
                    Ok(loaded) => Ok((claim, loaded)),
                    Err(e) => Err(release_after(&*store, claim.as_ref(), e)),
                }
            })
            .await?;
            let mut state = loaded.state;
            let config = match loaded_config(&start, &state) {
                Ok(config) => config,
                Err(e) => return Err(release_on_error(&runtime, &store, claim, e).await),
            };
            state.model = Some(model_name(&config));
            state.system.clone_from(&config.system);
            if start.options != Options::default() {
                state.options = kept_options(&start.options);
            }
            (id, claim, loaded.tree, state, loaded.warnings, config)
        }
    };
    let mut config = config;
    // Spans go under the span current where the session is opened, with its id as the
    // conversation's.
    let observer = client.inner.telemetry.observer(Some(id.to_string()));
    config.observe = observer.as_ref().map_or(Observe::Off, |observer| observer.level());
    let sources = start.mcp_sources(&mut config);
    let tools = start.take_handlers();
    subscribers.extend(start.subscribers.drain(..).map(|sink| {
        let sink: Box<dyn EventSink<SessionEvent>> = Box::new(AgentEventsOnly(sink));
        (SubscriberRole::Controller, sink)
    }));
    let session = Agent::new(config, start.callbacks, now())
        .map_err(Error::from)
        .and_then(|agent| Ok(SessionMachine::resume(id.clone(), claim.clone(), agent, tree, state, now())?));
    let session = match session {
        Ok(session) => session,
        Err(e) => return Err(release_on_error(&runtime, &store, claim, e).await),
    };
    let mut warnings = warnings;
    warnings.extend(session.repairs().iter().cloned());
    let inner = &client.inner;
    let work = SessionWork { tools: &tools, sources, observer };
    let spawned = spawn_session(&runtime, inner.transport.clone(), session, store.clone(), work, subscribers);
    match spawned {
        Ok((messages, unsubscribe)) => Ok(Session::new(id, messages, unsubscribe, start.capacity, warnings)),
        // No loop to release it: the claim is given back here.
        Err(e) => Err(release_on_error(&runtime, &store, claim, e).await),
    }
}

/// `error`, after giving up `claim` (a session that could not be opened is not kept
/// owned); a failed release is left to the lock's end with the process.
fn release_after(store: &dyn Store, claim: Option<&Claim>, error: StoreError) -> StoreError {
    if let Some(claim) = claim {
        let _ = store.release(claim);
    }
    error
}

/// `error`, after giving up `claim` off the executor.
async fn release_on_error<R: crate::Runtime>(
    runtime: &R,
    store: &Arc<dyn Store>,
    claim: Option<Claim>,
    error: Error,
) -> Error {
    if let Some(claim) = claim {
        let store = store.clone();
        let _ = store_call(runtime, move || store.release(&claim)).await;
    }
    error
}

/// The agent's configuration for a loaded session: the model it kept (else the
/// builder's), the builder's system prompt and options when it sets them (else those
/// kept).
fn loaded_config<L: Launch<T>, T, C: AgentCallbacks + Send + 'static>(
    start: &AgentBuilder<L, T, C>,
    state: &SessionState,
) -> Result<AgentConfig, L::Error> {
    let kept = state.model.as_ref().map(|name| start.configure(&ModelRef::Name(name.clone())));
    let mut config = match kept {
        Some(Ok(config)) => config,
        // A model this client cannot name (built by hand): the builder's.
        Some(Err(_)) | None => start.configure(&start.model)?,
    };
    if start.system.is_none() {
        config.system.clone_from(&state.system);
    }
    if start.options == Options::default() {
        if let Some(kept) = state.options.as_ref().and_then(|v| serde_json::from_value::<Options>(v.clone()).ok()) {
            config.options = kept.merged_over(&config.options);
        }
    }
    Ok(config)
}

/// `provider:id`, the name a client resolves the model by.
fn model_name(config: &AgentConfig) -> String {
    format!("{}:{}", config.model.provider, config.model.id)
}

/// The options a store keeps: without headers, which may carry credentials (and are the
/// process's business, not the conversation's).
fn kept_options(options: &Options) -> Option<serde_json::Value> {
    if *options == Options::default() {
        return None;
    }
    let kept = Options { headers: Vec::new(), secret_headers: Vec::new(), ..options.clone() };
    serde_json::to_value(kept).ok()
}

/// 16 random bytes from the driver's randomness (the core has none).
pub(crate) fn random_id<D: Driver>() -> SessionId {
    let (a, b) = (<Client<D> as crate::Connect>::random_seed(), <Client<D> as crate::Connect>::random_seed());
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&a.to_le_bytes());
    bytes[8..].copy_from_slice(&b.to_le_bytes());
    SessionId::from_random(bytes)
}
