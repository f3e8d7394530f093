//! The session manager through the blocking driver, against the replay server, with the
//! memory, file and SQLite stores: the async drivers' checks
//! (`omni_conformance::async_manager`) made through the blocking handle.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::sync::Arc;
use std::time::Duration;

use omni_blocking::{
    AgentEvent, Client, CloseReason, Error, FeedEvent, IdleShutdown, ManagerError, Opening, SessionEvent,
    SessionManager, SessionOptions, Status, Store, StoreErrorKind, Subscription,
};
use omni_conformance::async_manager::{quick, slow, stores, IDLE, MODEL};
use omni_conformance::async_session::writes_done;
use omni_conformance::replay::ReplayServer;
use omni_conformance::session_drive::{replay_client, TempDir};
use omni_protocol::session::SessionId;

const WAIT: Duration = Duration::from_secs(5);

fn manager(server: &ReplayServer, store: Arc<dyn Store>, idle: Option<Duration>) -> SessionManager {
    let client = replay_client::<Client>(server).expect("client");
    client.session_manager(store, |client, _id| client.agent(MODEL)).idle_after(idle).start().expect("manager")
}

fn until_saved(events: &Subscription<SessionEvent>) {
    loop {
        let event = events.recv_timeout(WAIT).expect("an event");
        if writes_done(&event) {
            return;
        }
    }
}

fn feed_until(feed: &Subscription<FeedEvent>, last: impl Fn(&FeedEvent) -> bool) -> Vec<FeedEvent> {
    let mut seen = Vec::new();
    loop {
        let event = feed.recv_timeout(WAIT).expect("a feed event");
        let done = last(&event);
        seen.push(event);
        if done {
            return seen;
        }
    }
}

/// Waits (up to [`WAIT`]) until `done` holds.
fn eventually(done: impl Fn() -> bool) {
    let start = std::time::Instant::now();
    while !done() {
        assert!(start.elapsed() < WAIT, "never came true");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn closed(event: &FeedEvent) -> bool {
    matches!(event, FeedEvent::Closed { .. })
}

#[test]
fn the_session_manager_through_the_blocking_driver() {
    let dir = TempDir::new("blocking-manager");
    for (name, store) in stores(&dir) {
        eprintln!("manager checks with the {name} store");
        create_open_twice_and_the_feed(store.clone());
        close_during_a_turn_finishes_it_first(store.clone());
        idle_shutdown_by_controllers(store.clone());
        rename_delete_and_refusals(store);
    }
}

fn create_open_twice_and_the_feed(store: Arc<dyn Store>) {
    let server = ReplayServer::start(vec![quick()]).expect("replay server");
    let manager = manager(&server, store.clone(), None);
    let (open, feed) = manager.subscribe().expect("subscribe");
    assert!(open.is_empty());
    let first = manager.create().expect("created");
    let id = first.session.id().clone();
    let events = first.events.expect("the creator is a controller");
    let again = manager.open_with(id.clone(), SessionOptions::new().idle(IdleShutdown::Never)).expect("open");
    assert_eq!((again.opening, again.options_ignored), (Opening::Existing, true));
    first.session.prompt("Hi, how do I sort a Vec in Rust?").expect("prompt");
    until_saved(&events);
    let title = Some("Hi, how do I sort a Vec in Rust?".to_owned());
    assert_eq!(
        feed_until(&feed, |e| matches!(e, FeedEvent::Title { .. })),
        vec![
            FeedEvent::Opened { id: id.clone(), title: None, status: Status::Idle },
            FeedEvent::Status { id: id.clone(), status: Status::Busy },
            FeedEvent::Status { id: id.clone(), status: Status::Idle },
            FeedEvent::Title { id: id.clone(), title: title.clone() },
        ]
    );
    assert_eq!(manager.list_open().expect("list_open")[0].title, title);
    assert!(manager.whereis(id.clone()).expect("whereis").is_some());
    // The title is written by the session (with the turn's state, or after it).
    eventually(|| store.load(&id).expect("kept").state.title == title);
    let listed = manager.list(10, 0).expect("list");
    assert!(listed.sessions.iter().any(|s| s.id == id && s.title == title), "{listed:?}");
    manager.shutdown().expect("shutdown");
    assert_eq!(feed_until(&feed, closed).last(), Some(&FeedEvent::Closed { id, reason: CloseReason::Closed }));
}

fn close_during_a_turn_finishes_it_first(store: Arc<dyn Store>) {
    let server = ReplayServer::start(vec![slow()]).expect("replay server");
    let manager = manager(&server, store.clone(), None);
    let opened = manager.create().expect("created");
    let id = opened.session.id().clone();
    let events = opened.events.expect("events");
    opened.session.prompt("Take your time").expect("prompt");
    // The turn is streaming when the close comes.
    while !matches!(events.recv_timeout(WAIT).expect("event"), SessionEvent::Agent(AgentEvent::Stream(_))) {}
    manager.close(id.clone()).expect("close");
    let kept = store.load(&id).expect("kept");
    assert_eq!(kept.tree.len(), 2, "the turn in flight finished and was saved");
    manager.close(id).expect("closing again is fine");
    manager.shutdown().expect("shutdown");
}

fn idle_shutdown_by_controllers(store: Arc<dyn Store>) {
    let server = ReplayServer::start(Vec::new()).expect("replay server");
    let manager = manager(&server, store, Some(IDLE));
    let (_, feed) = manager.subscribe().expect("subscribe");
    let opened = manager.create().expect("created");
    let id = opened.session.id().clone();
    let controller = opened.events.expect("controller");
    feed.recv_timeout(WAIT).expect("opened");
    assert!(feed.recv_timeout(IDLE * 2).is_err(), "held open by its controller");
    let (_, observer) = opened.session.observe().expect("observe");
    drop(controller);
    assert_eq!(feed_until(&feed, closed).last(), Some(&FeedEvent::Closed { id, reason: CloseReason::Idle }));
    drop(observer);
    manager.shutdown().expect("shutdown");
}

fn rename_delete_and_refusals(store: Arc<dyn Store>) {
    let server = ReplayServer::start(Vec::new()).expect("replay server");
    let client = replay_client::<Client>(&server).expect("client");
    let manager = client
        .session_manager(store.clone(), |client, _id| client.agent(MODEL))
        .max_sessions(1)
        .start()
        .expect("manager");
    let id = manager.create().expect("created").session.id().clone();
    let twice = manager.create_with(id.clone(), SessionOptions::new());
    assert!(matches!(twice, Err(Error::Manager(ManagerError::Exists(_)))), "{twice:?}");
    let more = manager.create();
    assert!(matches!(more, Err(Error::Manager(ManagerError::TooMany { limit: 1 }))), "{more:?}");
    manager.close(id.clone()).expect("close");
    let history = vec![omni_blocking::Message::user("Hi"), omni_blocking::Message::assistant("Hello")];
    let owned = manager.open_with(id.clone(), SessionOptions::new().agent(client.agent(MODEL).messages(history)));
    assert!(matches!(owned, Err(Error::Manager(ManagerError::OwnedOption { option: "messages" }))), "{owned:?}");
    manager.rename(id.clone(), Some("Kept".into())).expect("rename a stored session");
    assert_eq!(store.load(&id).expect("kept").state.title.as_deref(), Some("Kept"));
    assert!(manager.delete(id.clone()).expect("delete"));
    assert!(!manager.delete(id.clone()).expect("delete again"));
    let gone = manager.open(id);
    assert!(matches!(gone, Err(Error::Manager(ManagerError::Store(ref e))) if e.kind == StoreErrorKind::NotFound));
    let unknown = manager.open(SessionId::new("nobody").expect("id"));
    assert!(unknown.is_err());
    manager.shutdown().expect("shutdown");
}

/// A stream read as text (`TextStream::next_text`): the reply's pieces, then the response.
#[test]
fn a_stream_read_as_text() {
    let server = ReplayServer::start(vec![quick()]).expect("replay server");
    let client = replay_client::<Client>(&server).expect("client");
    let mut stream = client.call(MODEL, "hi").stream().expect("stream");
    let text: String = std::iter::from_fn(|| stream.next_text()).collect();
    assert_eq!(text, "Hello there.");
    assert_eq!(stream.response().expect("finished").text(), "Hello there.");
}
