//! The session scenarios through a driver, written once: each scenario against the replay
//! server with the file store and with the SQLite store (each wrapped in a
//! [`FlakyStore`]), its transcript held to the simulation's. The async drivers share
//! [`ShellSessionDriver`] (omni-shell's handle, run by the driver's runtime); omni-blocking
//! brings its own [`SessionDriver`].

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use omni_protocol::agent::NoCallbacks;
use omni_protocol::session::{SessionEvent, SessionSnapshot};
use omni_protocol::session::{SessionId, SessionState, Store};
use omni_shell::{AgentBuilder, Error, Launch, Open, SessionBuilder, Subscription};
use omni_store::{FileStore, SqliteStore};

use crate::replay::ReplayServer;
use crate::session_scenarios::{
    check_driver_transcript, run_session_scenario, Action, FlakyStore, SessionDriver, SessionScenario, TITLE,
};
use crate::session_sim::session_config;

/// The stores every driver runs the scenarios with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreKind {
    /// [`FileStore`] in a fresh directory.
    File,
    /// [`SqliteStore`] in a fresh database file.
    Sqlite,
}

impl StoreKind {
    /// Both.
    pub const ALL: [Self; 2] = [Self::File, Self::Sqlite];

    /// Its name, in messages.
    pub fn name(self) -> &'static str {
        match self {
            Self::File => "file store",
            Self::Sqlite => "SQLite store",
        }
    }
}

/// A directory under the system's temporary one, removed when dropped.
#[derive(Debug)]
pub struct TempDir(pub PathBuf);

impl TempDir {
    /// A fresh directory named after `name`, this process and the time.
    #[allow(clippy::disallowed_methods)] // a unique name, not a measurement
    pub fn new(name: &str) -> Self {
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        Self(std::env::temp_dir().join(format!("omni-{name}-{}-{nanos}", std::process::id())))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A scenario's store of `kind` in `dir`, failing while `failing` is set.
pub fn scenario_store(kind: StoreKind, dir: &TempDir, failing: Arc<AtomicBool>) -> Result<Arc<dyn Store>, String> {
    let inner: Arc<dyn Store> = match kind {
        StoreKind::File => Arc::new(FileStore::open(dir.0.join("sessions")).map_err(|e| e.to_string())?),
        StoreKind::Sqlite => {
            std::fs::create_dir_all(&dir.0).map_err(|e| e.to_string())?;
            Arc::new(SqliteStore::open(dir.0.join("sessions.db")).map_err(|e| e.to_string())?)
        }
    };
    Ok(Arc::new(FlakyStore::new(inner, failing)))
}

/// The client builder of a driver, pointed at the replay server with a key.
pub fn replay_client<L: omni_shell::Connect>(server: &ReplayServer) -> Result<L::Client, Error> {
    omni_shell::ClientBuilder::<L>::default()
        .base_url("anthropic", format!("{}/v1", server.base_url()))
        .api_key("anthropic", "sk-replay")
        .build()
}

/// The session builder of every scenario: the scenario model and system prompt, `store`.
pub fn scenario_session<L: Launch<T>, T>(
    agent: AgentBuilder<L, T>,
    store: Arc<dyn Store>,
) -> SessionBuilder<L, T, NoCallbacks> {
    let config = session_config();
    let agent = match config.system {
        Some(system) => agent.system(system),
        None => agent,
    };
    agent.session(store).title(TITLE)
}

/// Runs a future to its end on a driver's runtime, and sleeps there.
pub trait BlockOn {
    /// Runs `future` to its end.
    fn block_on<F: Future>(&self, future: F) -> F::Output;
    /// Resolves after `limit`.
    fn sleep(&self, limit: Duration) -> Pin<Box<dyn Future<Output = ()> + Send>>;
}

/// Opens a scenario's session: `Open::Create` first, `Open::Load` on every reload.
pub type Opener = Box<dyn Fn(Open) -> omni_shell::Opening<NoCallbacks>>;

/// omni-shell's session handle as a [`SessionDriver`], on an async driver's runtime.
pub struct ShellSessionDriver<B: BlockOn> {
    runtime: B,
    open: Opener,
    session: omni_shell::Session,
    events: Subscription<SessionEvent>,
}

impl<B: BlockOn> std::fmt::Debug for ShellSessionDriver<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShellSessionDriver").field("session", &self.session).finish_non_exhaustive()
    }
}

impl<B: BlockOn> ShellSessionDriver<B> {
    /// Creates the session `id` with `open` and subscribes to it.
    pub fn create(runtime: B, open: Opener, id: SessionId) -> Result<Self, String> {
        let session = runtime.block_on(open(Open::Create(Some(id)))).map_err(|e| format!("create: {e}"))?;
        let (_, events) = runtime.block_on(session.subscribe()).map_err(|e| e.to_string())?;
        Ok(Self { runtime, open, session, events })
    }
}

impl<B: BlockOn> SessionDriver for ShellSessionDriver<B> {
    fn act(&mut self, action: Action) -> Result<(), String> {
        let session = &self.session;
        let done = self.runtime.block_on(async {
            match action {
                Action::Prompt(text) => session.prompt(text).await,
                Action::Regenerate(id) => session.regenerate(id).await,
                Action::Navigate(id) => session.navigate(id).await,
                Action::Edit(parent, text) => session.edit(parent, text).await,
                Action::Title(title) => session.set_title(title).await,
                Action::Cancel => session.cancel().await,
            }
        });
        done.map_err(|e| e.to_string())
    }

    fn next_event(&mut self, limit: Duration) -> Option<SessionEvent> {
        let timeout = self.runtime.sleep(limit);
        let events = &mut self.events;
        self.runtime.block_on(futures_lite::future::or(events.next_event(), async {
            timeout.await;
            None
        }))
    }

    fn reload(&mut self) -> Result<(SessionSnapshot, SessionState), String> {
        let id = self.session.id().clone();
        // The old session ends, having written everything and released its ownership.
        self.runtime.block_on(self.session.close()).map_err(|e| format!("close: {e}"))?;
        let session = self.runtime.block_on((self.open)(Open::Load(id))).map_err(|e| format!("load: {e}"))?;
        let (snapshot, events) = self.runtime.block_on(session.subscribe()).map_err(|e| e.to_string())?;
        let state = self.runtime.block_on(session.state()).map_err(|e| e.to_string())?;
        self.session = session;
        self.events = events;
        Ok((snapshot, state))
    }
}

/// A scenario's session through an async driver's client `L` (omni-tokio's or
/// omni-smol's) on `runtime`: the `make` of [`run_every_session_scenario`] for both.
pub fn shell_session_driver<L, B>(
    runtime: B,
    scenario: &SessionScenario,
    server: &ReplayServer,
    store: Arc<dyn Store>,
) -> Result<Box<dyn SessionDriver>, String>
where
    L: omni_shell::Connect<Client = L>
        + Launch<omni_shell::AsyncTool, Opening<NoCallbacks> = omni_shell::Opening<NoCallbacks>>
        + Clone
        + 'static,
    B: BlockOn + 'static,
{
    let client = replay_client::<L>(server).map_err(|e| e.to_string())?;
    let model = session_config().model;
    let open: Opener = Box::new(move |open| {
        scenario_session(AgentBuilder::new(client.clone(), model.clone().into()), store.clone()).open(open)
    });
    let id = SessionId::new(scenario.name).map_err(|e| e.to_string())?;
    Ok(Box::new(ShellSessionDriver::create(runtime, open, id)?))
}

/// Runs every scenario with both stores through the driver `make` builds for a scenario,
/// its replay server, its store and its failure flag; returns the failures.
pub fn run_every_session_scenario(
    make: impl Fn(&SessionScenario, &ReplayServer, Arc<dyn Store>) -> Result<Box<dyn SessionDriver>, String>,
    driver: &str,
) -> Vec<String> {
    let mut failures = Vec::new();
    for scenario in crate::session_scenarios::all() {
        for kind in StoreKind::ALL {
            let run = || -> Result<(), String> {
                let server = ReplayServer::start(scenario.replies.clone()).map_err(|e| e.to_string())?;
                let dir = TempDir::new(&format!("session-{}", scenario.name));
                let failing = Arc::new(AtomicBool::new(false));
                let store = scenario_store(kind, &dir, failing.clone())?;
                let mut session = make(&scenario, &server, store)?;
                let lines = run_session_scenario(&scenario, session.as_mut(), &failing)?;
                check_driver_transcript(scenario.name, &format!("{driver} with the {}", kind.name()), &lines)
            };
            if let Err(e) = run() {
                failures.push(e);
            }
        }
    }
    failures
}
