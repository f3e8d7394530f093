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
use omni_protocol::session::SessionId;

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
        self.session.close().map_err(|e| format!("close: {e}"))?;
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

/// omni_conformance::async_session's checks, through the blocking handle.
mod handle {
    use std::sync::Arc;
    use std::time::Duration;

    use omni_blocking::{
        AgentEvent, Client, Error, NodeId, Session, SessionError, SessionEvent, Store, StoreErrorKind, StoreWarning,
        SubscriberCount, Subscription,
    };
    use omni_conformance::async_session::{handle_replies, image_prompt, tear_last_record, writes_done, MODEL};
    use omni_conformance::replay::ReplayServer;
    use omni_conformance::session_drive::{replay_client, TempDir};
    use omni_protocol::session::SessionId;
    use omni_store::{FileStore, MemoryStore};

    fn until_saved(events: &Subscription<SessionEvent>) {
        while let Ok(event) = events.recv_timeout(Duration::from_secs(20)) {
            if writes_done(&event) {
                return;
            }
        }
        panic!("the turn was not saved in time");
    }

    fn turn(session: &Session, events: &Subscription<SessionEvent>, text: &str) {
        session.prompt(text).expect("prompt taken");
        until_saved(events);
    }

    #[test]
    fn the_session_handle_through_blocking() {
        let server = ReplayServer::start(handle_replies()).expect("replay server");
        let client = replay_client::<Client>(&server).expect("client");
        let store: Arc<dyn Store> = Arc::new(MemoryStore::default());
        let open = |model: &str| client.agent(model).session(store.clone());

        // Ids taken and missing.
        let id = SessionId::new("taken").expect("an id");
        open(MODEL).create_with_id(id.clone()).expect("created");
        let again = open(MODEL).create_with_id(id);
        assert!(matches!(again, Err(Error::Store(ref e)) if e.kind == StoreErrorKind::Exists), "{again:?}");
        let missing = open(MODEL).load(SessionId::new("missing").expect("an id"));
        assert!(matches!(missing, Err(Error::Store(ref e)) if e.kind == StoreErrorKind::NotFound), "{missing:?}");

        // Refused while busy; subscribers by role.
        let session = open(MODEL).create().expect("created");
        let (_, events) = session.subscribe().expect("subscribe");
        let (_, _watching) = session.observe().expect("observe");
        assert_eq!(session.subscribers().expect("count"), SubscriberCount { controllers: 1, observers: 1 });
        turn(&session, &events, "Hi");
        session.prompt("Slowly, please").expect("prompt taken");
        let busy = |r: Result<(), Error>| matches!(r, Err(Error::Session(SessionError::Busy)));
        assert!(busy(session.prompt("again")));
        assert!(busy(session.regenerate(NodeId(0))));
        assert!(busy(session.navigate(None)));
        assert!(busy(session.edit(None, "new")));
        until_saved(&events);
        assert_eq!(session.tree().expect("tree").len(), 4);

        // Dropped right after a commit.
        let session = open(MODEL).create().expect("created");
        let (_, events) = session.subscribe().expect("subscribe");
        session.prompt("Hi").expect("prompt taken");
        while let Ok(event) = events.recv_timeout(Duration::from_secs(20)) {
            if matches!(event, SessionEvent::Agent(AgentEvent::Turn { .. })) {
                break;
            }
        }
        let id = session.id().clone();
        drop((session, events));
        let nodes = (0..200)
            .map(|_| {
                std::thread::sleep(Duration::from_millis(10));
                store.load(&id).map(|loaded| loaded.tree.len()).unwrap_or(0)
            })
            .find(|&n| n == 2);
        assert_eq!(nodes, Some(2), "the committed turn reached the store after the last handle went");
        // Its ownership goes with the loop's end, a moment after the write.
        let reloaded = (0..200).find_map(|_| match open(MODEL).load(id.clone()) {
            Ok(session) => Some(session),
            Err(Error::Store(e)) if e.kind == StoreErrorKind::OwnedElsewhere => {
                std::thread::sleep(Duration::from_millis(10));
                None
            }
            Err(e) => panic!("the session does not load: {e}"),
        });
        reloaded.expect("the dropped session's ownership was released").close().expect("closed");

        // The kept model, the builder's system prompt.
        let created =
            client.agent(MODEL).system("Kept system.").session(store.clone()).title("kept").create().expect("created");
        let (_, events) = created.subscribe().expect("subscribe");
        turn(&created, &events, "First");
        let id = created.id().clone();
        created.close().expect("closed");
        let loaded =
            client.agent("openai:gpt-4o").system("New system.").session(store.clone()).load(id).expect("loaded");
        let state = loaded.state().expect("state");
        assert_eq!(state.model.as_deref(), Some(MODEL));
        assert_eq!(state.system.as_deref(), Some("New system."));
        assert_eq!(state.title.as_deref(), Some("kept"));
        let (_, events) = loaded.subscribe().expect("subscribe");
        turn(&loaded, &events, "Second");
        let last = server.requests().pop().expect("a request");
        assert_eq!(last.path, "/v1/messages");
        let body: serde_json::Value = serde_json::from_slice(&last.body).expect("a JSON body");
        assert_eq!(body["system"], "New system.");
        assert_eq!(body["messages"].as_array().map_or(0, Vec::len), 3);

        // A torn record in a file store.
        let dir = TempDir::new("torn-session-blocking");
        let files: Arc<dyn Store> = Arc::new(FileStore::open(&dir.0).expect("the store opens"));
        let session = client.agent(MODEL).session(files.clone()).create().expect("created");
        let (_, events) = session.subscribe().expect("subscribe");
        turn(&session, &events, "Hi");
        let id = session.id().clone();
        session.close().expect("closed");
        tear_last_record(&dir, &id);
        let loaded = client.agent(MODEL).session(files).load(id).expect("loaded");
        assert!(matches!(loaded.load_warnings(), [StoreWarning::TornRecord { bytes: 10, .. }]));
        assert_eq!(loaded.tree().expect("tree").len(), 2);

        // A prompt of blocks joins the tree whole; a regenerate sends them again.
        let session = client.agent(MODEL).session(store.clone()).create().expect("created");
        let (_, events) = session.subscribe().expect("subscribe");
        session.prompt_with(image_prompt()).expect("prompt taken");
        until_saved(&events);
        let user = session.tree().expect("tree").message(NodeId(0)).cloned().expect("the user node");
        assert_eq!(user.content, image_prompt().content);
        session.regenerate(NodeId(0)).expect("regenerate taken");
        until_saved(&events);
        let last = server.requests().pop().expect("a request");
        let body: serde_json::Value = serde_json::from_slice(&last.body).expect("a JSON body");
        assert_eq!(body["messages"][0]["content"][1]["type"], "image", "{body}");
        assert_eq!(session.tree().expect("tree").children(NodeId(0)).len(), 2);

        one_owner_per_session(&client);
        a_lease_is_renewed_while_the_session_runs(&client);
        a_rejected_call_never_runs_in_a_session(&client, &server);
    }

    /// `async_session::a_rejected_call_never_runs_in_a_session`, through the blocking handle.
    fn a_rejected_call_never_runs_in_a_session(client: &Client, server: &ReplayServer) {
        use omni_conformance::async_session::{rejected_call_schema, REJECTED_REASON};
        use std::sync::atomic::{AtomicUsize, Ordering};
        let runs = Arc::new(AtomicUsize::new(0));
        let counted = runs.clone();
        let tool =
            omni_blocking::Tool::new("get_weather", "The weather in a city.", rejected_call_schema(), move |_| {
                counted.fetch_add(1, Ordering::SeqCst);
                Ok("sunny")
            });
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let options =
            omni_protocol::Options { tool_protocol: Some(omni_protocol::ToolProtocol::Xml), ..Default::default() };
        let session = client.agent(MODEL).tool(tool).options(options).session(store).create().expect("created");
        let (_, events) = session.subscribe().expect("subscribe");
        turn(&session, &events, "What is the weather in Paris?");
        assert_eq!(runs.load(Ordering::SeqCst), 0, "the handler never ran");
        let kept = serde_json::to_string(&session.tree().expect("tree").messages()).expect("JSON");
        assert!(kept.contains("was not run") && kept.contains("\"is_error\":true"), "{kept}");
        let body = String::from_utf8_lossy(&server.requests().pop().expect("a request").body).into_owned();
        assert!(body.contains(REJECTED_REASON), "{body}");
        assert!(body.matches("</get_weather>\\n</get_weather>").count() >= 2, "the call as written: {body}");
        session.close().expect("closed");
    }

    /// `async_session::a_lease_is_renewed_while_the_session_runs`, through the blocking handle.
    fn a_lease_is_renewed_while_the_session_runs(client: &Client) {
        use omni_conformance::async_session::LEASE;
        let store: Arc<dyn Store> = Arc::new(MemoryStore::with_lease(LEASE));
        let owner = client.agent(MODEL).session(store.clone()).create().expect("created");
        let (_, events) = owner.subscribe().expect("subscribe");
        let id = owner.id().clone();
        std::thread::sleep(LEASE * 4);
        let second = client.agent(MODEL).session(store.clone()).load(id.clone());
        assert!(matches!(second, Err(Error::Store(ref e)) if e.kind == StoreErrorKind::OwnedElsewhere), "{second:?}");
        owner.set_title(Some("still mine".into())).expect("title");
        until_saved(&events);
        owner.close().expect("closed");
        let next = client.agent(MODEL).session(store).load(id).expect("the next owner");
        assert_eq!(next.state().expect("state").title.as_deref(), Some("still mine"));
        next.close().expect("closed");
    }

    /// One owner per session through the blocking handle, with each store (the async
    /// drivers' `async_session::one_owner_per_session`).
    fn one_owner_per_session(client: &Client) {
        let dir = TempDir::new("one-owner-blocking");
        let stores: [Arc<dyn Store>; 3] = [
            Arc::new(MemoryStore::new()),
            Arc::new(FileStore::open(dir.0.join("files")).expect("the file store opens")),
            Arc::new(omni_store::SqliteStore::open(dir.0.join("sessions.db")).expect("the SQLite store opens")),
        ];
        for store in stores {
            let open = || client.agent(MODEL).session(store.clone());
            let owner = open().create().expect("created");
            let (_, events) = owner.subscribe().expect("subscribe");
            turn(&owner, &events, "Hi");
            let id = owner.id().clone();
            let second = open().load(id.clone());
            assert!(
                matches!(second, Err(Error::Store(ref e)) if e.kind == StoreErrorKind::OwnedElsewhere),
                "{second:?}"
            );
            let viewer = open().load_read_only(id.clone()).expect("read-only");
            assert_eq!(viewer.tree().expect("tree").len(), 2);
            let refused = |r: Result<(), Error>| matches!(r, Err(Error::Session(SessionError::ReadOnly)));
            assert!(refused(viewer.prompt("mine now")));
            assert!(refused(viewer.set_title(Some("mine".into()))));
            viewer.close().expect("closed");
            owner.set_title(Some("renamed".into())).expect("title");
            until_saved(&events);
            owner.close().expect("closed");
            owner.close().expect("closing twice is fine");
            let next = open().load(id.clone()).expect("the next owner");
            assert_eq!(next.state().expect("state").title.as_deref(), Some("renamed"));
            let (_, events) = next.subscribe().expect("subscribe");
            turn(&next, &events, "Again");
            next.close().expect("closed");
            assert_eq!(store.load(&id).expect("loads").tree.len(), 4, "both owners' turns");
        }
    }
}
