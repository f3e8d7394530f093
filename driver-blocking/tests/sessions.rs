//! Every session scenario through the blocking driver's session handle against the
//! replay server, with the file store and the SQLite store: the transcripts must equal the
//! simulation's (see `omni_conformance::session_drive`).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::sync::Arc;
use std::time::Duration;

use omni_blocking::{Client, Open, Session, SessionEvent, SessionSnapshot, SessionState, Store, Subscription};
use omni_conformance::session_drive::{replay_client, run_every_session_scenario, scenario_session};
use omni_conformance::session_scenarios::{Action, SessionDriver};
use omni_conformance::session_sim::session_config;
use omni_core::machines::session::store::SessionId;

/// The blocking session handle as a scenario drives it.
struct BlockingSession {
    client: Client,
    store: Arc<dyn Store>,
    session: Session,
    events: Subscription<SessionEvent>,
}

impl BlockingSession {
    fn open(
        client: &Client,
        store: &Arc<dyn Store>,
        open: Open,
    ) -> Result<(Session, Subscription<SessionEvent>), String> {
        let session = scenario_session(client.agent(session_config().model), store.clone()).open(open);
        let session = session.map_err(|e| e.to_string())?;
        let (_, events) = session.subscribe().map_err(|e| e.to_string())?;
        Ok((session, events))
    }
}

impl SessionDriver for BlockingSession {
    fn act(&mut self, action: Action) -> Result<(), String> {
        let session = &self.session;
        let done = match action {
            Action::Prompt(text) => session.prompt(text),
            Action::Regenerate(id) => session.regenerate(id),
            Action::Navigate(id) => session.navigate(id),
            Action::Edit(parent, text) => session.edit(parent, text),
            Action::Title(title) => session.set_title(title),
            Action::Cancel => session.cancel(),
        };
        done.map_err(|e| e.to_string())
    }

    fn next_event(&mut self, limit: Duration) -> Option<SessionEvent> {
        self.events.recv_timeout(limit).ok()
    }

    fn reload(&mut self) -> Result<(SessionSnapshot, SessionState), String> {
        let id = self.session.id().clone();
        let (session, events) = Self::open(&self.client, &self.store, Open::Load(id))?;
        (self.session, self.events) = (session, events);
        let snapshot = self.session.snapshot().map_err(|e| e.to_string())?;
        let state = self.session.state().map_err(|e| e.to_string())?;
        Ok((snapshot, state))
    }
}

#[test]
fn every_session_scenario_matches_the_simulation_with_both_stores() {
    let failures = run_every_session_scenario(
        |scenario, server, store| {
            let client: Client = replay_client::<Client>(server).map_err(|e| e.to_string())?;
            let id = SessionId::new(scenario.name).map_err(|e| e.to_string())?;
            let (session, events) = BlockingSession::open(&client, &store, Open::Create(Some(id)))?;
            Ok(Box::new(BlockingSession { client, store, session, events }))
        },
        "omni-blocking",
    );
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn a_session_handle_called_on_the_sessions_own_thread_refuses_instead_of_waiting_for_itself() {
    let server = omni_conformance::replay::ReplayServer::start(Vec::new()).expect("replay server");
    let client: Client = replay_client::<Client>(&server).expect("client");
    let store: Arc<dyn Store> = Arc::new(omni_store::MemoryStore::default());
    let session = scenario_session(client.agent(session_config().model), store).create().expect("created");
    let inner = session.clone();
    let answer = session.with_callbacks(move |_| inner.tree().map(|tree| tree.len())).expect("the closure ran");
    assert!(
        matches!(answer, Err(omni_blocking::Error::Agent(omni_blocking::AgentError::CalledFromAgent))),
        "{answer:?}"
    );
    assert_eq!(session.tree().expect("from the test's thread").len(), 0);
}
