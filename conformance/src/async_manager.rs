//! The session manager through an async driver (omni-shell's handle under omni-tokio and
//! omni-smol), written once, against the replay server, with the memory, file and SQLite
//! stores: create, open twice (started, then existing), the feed in order, titles, close
//! during a turn (the turn finishes first), idle shutdown armed and disarmed by
//! controllers (observers never keeping a session open), rename and delete of a session
//! that does not run, typed refusals, a prompt to one session never waiting for another's
//! turn, and shutdown giving every claim back. omni-blocking's tests make the same checks
//! through its blocking handle.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use omni_protocol::agent::Status;
use omni_protocol::manager::{CloseReason, FeedEvent, IdleShutdown, ManagerError, Opening};
use omni_protocol::session::SessionEvent;
use omni_protocol::session::{SessionId, Store, StoreErrorKind};
use omni_shell::{Client, Driver, Error, SessionManager, SessionOptions, Subscription};
use omni_store::{FileStore, MemoryStore, SqliteStore};

use crate::async_session::until_saved;
use crate::replay::ReplayServer;
use crate::scenarios::{paced, text_events};
use crate::session_drive::{replay_client, TempDir};
use crate::sim::Reply;

/// The model of these checks (the replay server answers as Anthropic).
pub const MODEL: &str = "anthropic:claude-sonnet-4-5";

/// The gap between the events of a slow reply: a turn of three events takes twice this.
pub const SLOW: Duration = Duration::from_millis(150);

/// The idle shutdown of the idle checks.
pub const IDLE: Duration = Duration::from_millis(300);

/// A quick reply: "Hello there."
pub fn quick() -> Reply {
    paced(&text_events(&["Hello", " there."]), Duration::from_millis(2))
}

/// A slow reply: "Slow reply."
pub fn slow() -> Reply {
    paced(&text_events(&["Slow", " reply."]), SLOW)
}

/// The stores every check runs with, each new and empty; the directory holds the file
/// and SQLite ones.
pub fn stores(dir: &TempDir) -> Vec<(&'static str, Arc<dyn Store>)> {
    vec![
        ("memory", Arc::new(MemoryStore::new())),
        ("file", Arc::new(FileStore::open(dir.0.join("files")).expect("the file store opens"))),
        ("sqlite", Arc::new(SqliteStore::open(dir.0.join("sessions.db")).expect("the SQLite store opens"))),
    ]
}

/// `future`'s output, or `None` when it takes longer than `limit` (a thread keeps the
/// time, so this works on any runtime).
pub async fn within<T>(limit: Duration, future: impl Future<Output = T>) -> Option<T> {
    let (tx, rx) = async_channel::bounded::<()>(1);
    std::thread::spawn(move || {
        #[allow(clippy::disallowed_methods)] // a test's timer thread
        std::thread::sleep(limit);
        let _ = tx.try_send(());
    });
    let done = async { Some(future.await) };
    let late = async {
        let _ = rx.recv().await;
        None
    };
    futures_lite::future::or(done, late).await
}

/// The next feed event, within a second.
async fn next(feed: &mut Subscription<FeedEvent>) -> FeedEvent {
    within(Duration::from_secs(5), feed.next_event()).await.flatten().expect("a feed event within 5 s")
}

/// Feed events until (and with) the first that `last` picks.
async fn feed_until(feed: &mut Subscription<FeedEvent>, last: impl Fn(&FeedEvent) -> bool) -> Vec<FeedEvent> {
    let mut seen = Vec::new();
    loop {
        let event = next(feed).await;
        let done = last(&event);
        seen.push(event);
        if done {
            return seen;
        }
    }
}

/// Waits for the session's writes until the store keeps `title` (a title is written with
/// the turn's state when it comes in time, else after it).
pub async fn saved_with_title(events: &mut Subscription<SessionEvent>, store: &dyn Store, id: &SessionId, title: &str) {
    while store.load(id).expect("kept").state.title.as_deref() != Some(title) {
        within(Duration::from_secs(5), until_saved(events)).await.expect("the title is written within 5 s");
    }
}

/// A client of `server`'s on driver `D`.
fn client<D: Driver>(server: &ReplayServer) -> Client<D> {
    replay_client::<Client<D>>(server).expect("client")
}

fn manager<D: Driver>(client: &Client<D>, store: Arc<dyn Store>, idle: Option<Duration>) -> SessionManager<D> {
    client.session_manager(store, |client, _id| client.agent(MODEL)).idle_after(idle).start().expect("manager starts")
}

/// Every check, with every store.
pub async fn every_check<D: Driver>() {
    let dir = TempDir::new("manager");
    for (name, store) in stores(&dir) {
        eprintln!("manager checks with the {name} store");
        create_open_twice_and_the_feed::<D>(store.clone()).await;
        close_during_a_turn_finishes_it_first::<D>(store.clone()).await;
        idle_shutdown_by_controllers::<D>(store.clone()).await;
        rename_and_delete_of_a_stored_session::<D>(store.clone()).await;
        refusals_are_typed::<D>(store.clone()).await;
        a_prompt_never_waits_for_another_session::<D>(store.clone()).await;
        shutdown_gives_every_claim_back::<D>(store.clone()).await;
        a_slow_feed_subscriber_is_dropped_and_told::<D>(store).await;
    }
    model_titles_and_their_fallback::<D>().await;
}

/// Create, then open twice: `Started`, then `Existing` (options given for it ignored and
/// said so); the feed from the moment of its subscription, in order; the heuristic title
/// after the first turn, saved and listed; `whereis` and `list_open`.
pub async fn create_open_twice_and_the_feed<D: Driver>(store: Arc<dyn Store>) {
    let server = ReplayServer::start(vec![quick(), quick()]).expect("replay server");
    let client = client::<D>(&server);
    let manager = manager(&client, store.clone(), None);
    let (open, mut feed) = manager.subscribe().await.expect("subscribe");
    assert!(open.is_empty());
    let first = manager.create().await.expect("created");
    assert_eq!(first.opening, Opening::Started);
    let id = first.session.id().clone();
    let mut events = first.events.expect("the creator is a controller");
    let again = manager
        .open_with(id.clone(), SessionOptions::new().idle(IdleShutdown::Never).no_controller())
        .await
        .expect("open");
    assert_eq!((again.opening, again.options_ignored, again.events.is_none()), (Opening::Existing, true, true));
    let plain = manager.open(id.clone()).await.expect("open");
    assert_eq!((plain.opening, plain.options_ignored), (Opening::Existing, false));
    assert_eq!(first.session.subscribers().await.expect("count").controllers, 2, "creator and plain opener");

    first.session.prompt("Hi, how do I sort a Vec in Rust?").await.expect("prompt");
    until_saved(&mut events).await;
    // The turn's end (its agent idle) comes before its commit, which the title follows.
    let feed_seen = feed_until(&mut feed, |e| matches!(e, FeedEvent::Title { .. })).await;
    let title = Some("Hi, how do I sort a Vec in Rust?".to_owned());
    assert_eq!(
        feed_seen,
        vec![
            FeedEvent::Opened { id: id.clone(), title: None, status: Status::Idle },
            FeedEvent::Status { id: id.clone(), status: Status::Busy },
            FeedEvent::Status { id: id.clone(), status: Status::Idle },
            FeedEvent::Title { id: id.clone(), title: title.clone() },
        ]
    );
    let listed = manager.list_open().await.expect("list_open");
    assert_eq!((listed.len(), &listed[0].id, &listed[0].title), (1, &id, &title));
    assert!(manager.whereis(id.clone()).await.expect("whereis").is_some());
    assert!(manager.whereis(SessionId::new("elsewhere").expect("id")).await.expect("whereis").is_none());

    // A second turn makes no second title; a rename wins and is kept.
    first.session.prompt("And in reverse?").await.expect("prompt");
    until_saved(&mut events).await;
    manager.rename(id.clone(), Some("Sorting".into())).await.expect("rename");
    let renamed = feed_until(&mut feed, |e| matches!(e, FeedEvent::Title { .. })).await;
    assert_eq!(renamed.last(), Some(&FeedEvent::Title { id: id.clone(), title: Some("Sorting".into()) }));
    saved_with_title(&mut events, &*store, &id, "Sorting").await;
    let kept = manager.list(10, 0).await.expect("list");
    assert_eq!(kept.sessions.iter().find(|s| s.id == id).and_then(|s| s.title.clone()).as_deref(), Some("Sorting"));
    manager.close(id.clone()).await.expect("close");
    assert_eq!(
        feed_until(&mut feed, |e| matches!(e, FeedEvent::Closed { .. })).await.last(),
        Some(&FeedEvent::Closed { id: id.clone(), reason: CloseReason::Closed })
    );
    assert_eq!(store.load(&id).expect("kept").tree.len(), 4, "both turns kept");
    manager.shutdown().await.expect("shutdown");
}

/// `close` while a turn is in flight: the turn finishes and is saved, then the session
/// stops; closing again (or a session that never ran) is fine.
pub async fn close_during_a_turn_finishes_it_first<D: Driver>(store: Arc<dyn Store>) {
    let server = ReplayServer::start(vec![slow()]).expect("replay server");
    let client = client::<D>(&server);
    let manager = manager(&client, store.clone(), None);
    let opened = manager.create().await.expect("created");
    let id = opened.session.id().clone();
    opened.session.prompt("Take your time").await.expect("prompt");
    manager.close(id.clone()).await.expect("close");
    assert!(manager.whereis(id.clone()).await.expect("whereis").is_none());
    let kept = store.load(&id).expect("kept");
    assert_eq!(kept.tree.len(), 2, "the turn in flight finished and was saved");
    assert_eq!(kept.tree.messages()[1].text(), "Slow reply.");
    manager.close(id.clone()).await.expect("closing again is fine");
    manager.close(SessionId::new("never-ran").expect("id")).await.expect("nothing to close");
    // The claim was given back: the session loads elsewhere at once.
    let claim = store.claim(&id).expect("free");
    store.release(&claim).expect("released");
    manager.shutdown().await.expect("shutdown");
}

/// Idle shutdown: armed when the last controller leaves an idle session, disarmed by a
/// controller coming back; an observer never keeps a session open.
pub async fn idle_shutdown_by_controllers<D: Driver>(store: Arc<dyn Store>) {
    let server = ReplayServer::start(Vec::new()).expect("replay server");
    let client = client::<D>(&server);
    let manager = manager(&client, store.clone(), Some(IDLE));
    let (_, mut feed) = manager.subscribe().await.expect("subscribe");
    let opened = manager.create().await.expect("created");
    let id = opened.session.id().clone();
    let controller = opened.events.expect("controller");
    // Held: nothing closes it.
    let quiet = within(IDLE * 2, feed_until(&mut feed, |e| matches!(e, FeedEvent::Closed { .. }))).await;
    assert!(quiet.is_none_or(|seen| !seen.iter().any(|e| matches!(e, FeedEvent::Closed { .. }))), "held open");
    // An observer does not hold it; the controller leaving arms the shutdown.
    let (_, observer) = opened.session.observe().await.expect("observe");
    drop(controller);
    let closed = feed_until(&mut feed, |e| matches!(e, FeedEvent::Closed { .. })).await;
    assert_eq!(closed.last(), Some(&FeedEvent::Closed { id: id.clone(), reason: CloseReason::Idle }));
    drop(observer);
    // Opened again with a controller that comes back before the deadline: kept open.
    let reopened = manager.open(id.clone()).await.expect("open");
    assert_eq!(reopened.opening, Opening::Started);
    drop(reopened.events);
    let (_, back) = reopened.session.subscribe().await.expect("a controller again");
    let quiet = within(IDLE * 2, feed_until(&mut feed, |e| matches!(e, FeedEvent::Closed { .. }))).await;
    assert!(quiet.is_none_or(|seen| !seen.iter().any(|e| matches!(e, FeedEvent::Closed { .. }))), "disarmed");
    drop(back);
    let closed = feed_until(&mut feed, |e| matches!(e, FeedEvent::Closed { .. })).await;
    assert_eq!(closed.last(), Some(&FeedEvent::Closed { id, reason: CloseReason::Idle }));
    manager.shutdown().await.expect("shutdown");
}

/// `rename` and `delete` of a session that does not run go to the store; a deleted
/// session is gone; a second delete finds nothing.
pub async fn rename_and_delete_of_a_stored_session<D: Driver>(store: Arc<dyn Store>) {
    let server = ReplayServer::start(Vec::new()).expect("replay server");
    let client = client::<D>(&server);
    let manager = manager(&client, store.clone(), None);
    let opened = manager.create().await.expect("created");
    let id = opened.session.id().clone();
    manager.close(id.clone()).await.expect("close");
    manager.rename(id.clone(), Some("Kept title".into())).await.expect("rename a stored session");
    assert_eq!(store.load(&id).expect("kept").state.title.as_deref(), Some("Kept title"));
    let listed = manager.list(100, 0).await.expect("list");
    assert!(listed.sessions.iter().any(|s| s.id == id && s.title.as_deref() == Some("Kept title")));
    // Running: delete closes it first.
    let running = manager.open(id.clone()).await.expect("open");
    assert_eq!(running.snapshot.title.as_deref(), Some("Kept title"));
    assert!(manager.delete(id.clone()).await.expect("delete"));
    assert!(!store.exists(&id).expect("exists"));
    assert!(!manager.delete(id.clone()).await.expect("delete again"));
    let gone = manager.open(id).await;
    assert!(
        matches!(gone, Err(Error::Manager(ManagerError::Store(ref e))) if e.kind == StoreErrorKind::NotFound),
        "{gone:?}"
    );
    manager.shutdown().await.expect("shutdown");
}

/// Typed refusals: an id that exists, the limit of sessions, after shutdown.
pub async fn refusals_are_typed<D: Driver>(store: Arc<dyn Store>) {
    let server = ReplayServer::start(Vec::new()).expect("replay server");
    let client = client::<D>(&server);
    let manager = client
        .session_manager(store.clone(), |client, _id| client.agent(MODEL))
        .max_sessions(1)
        .start()
        .expect("manager starts");
    let opened = manager.create().await.expect("created");
    let id = opened.session.id().clone();
    let twice = manager.create_with(id.clone(), SessionOptions::new()).await;
    assert!(matches!(twice, Err(Error::Manager(ManagerError::Exists(ref e))) if *e == id), "{twice:?}");
    let more = manager.create().await;
    assert!(matches!(more, Err(Error::Manager(ManagerError::TooMany { limit: 1 }))), "{more:?}");
    manager.close(id.clone()).await.expect("close");
    // A history is the store's: given in a session's options, it is refused by name.
    let history = vec![omni_protocol::Message::user("Hi"), omni_protocol::Message::assistant("Hello")];
    let options = SessionOptions::new().agent(client.agent(MODEL).messages(history));
    let owned = manager.open_with(id.clone(), options).await;
    assert!(matches!(owned, Err(Error::Manager(ManagerError::OwnedOption { option: "messages" }))), "{owned:?}");
    let kept = manager.create_with(id.clone(), SessionOptions::new()).await;
    assert!(matches!(kept, Err(Error::Manager(ManagerError::Exists(_)))), "kept in the store: {kept:?}");
    manager.shutdown().await.expect("shutdown");
    let late = manager.open(id).await;
    assert!(matches!(late, Err(Error::Manager(ManagerError::ShuttingDown)) | Err(Error::Agent(_))), "{late:?}");
}

/// One session's slow turn holds up no other: a quick turn on a second session ends
/// while the first is still streaming.
pub async fn a_prompt_never_waits_for_another_session<D: Driver>(store: Arc<dyn Store>) {
    let server = ReplayServer::start(vec![slow(), quick()]).expect("replay server");
    let client = client::<D>(&server);
    let manager = manager(&client, store, None);
    let busy = manager.create().await.expect("created");
    let quick_one = manager.create().await.expect("created");
    let (mut busy_events, mut quick_events) = (busy.events.expect("events"), quick_one.events.expect("events"));
    busy.session.prompt("Slow, please").await.expect("prompt");
    wait_for(&mut busy_events, |e| matches!(e, SessionEvent::Agent(omni_protocol::agent::AgentEvent::Stream(_)))).await;
    quick_one.session.prompt("Quick, please").await.expect("prompt");
    until_saved(&mut quick_events).await;
    let first = busy.session.snapshot().await.expect("snapshot");
    assert_eq!(first.agent.status, Status::Busy, "the slow turn is still in flight");
    until_saved(&mut busy_events).await;
    manager.shutdown().await.expect("shutdown");
}

async fn wait_for(events: &mut Subscription<SessionEvent>, what: impl Fn(&SessionEvent) -> bool) {
    while let Some(event) = within(Duration::from_secs(5), events.next_event()).await.flatten() {
        if what(&event) {
            return;
        }
    }
    panic!("the event never came");
}

/// A feed subscriber that reads nothing is dropped once its queue (the manager's
/// subscriber capacity) is full, and told so; the others go on.
pub async fn a_slow_feed_subscriber_is_dropped_and_told<D: Driver>(store: Arc<dyn Store>) {
    let server = ReplayServer::start(Vec::new()).expect("replay server");
    let client = client::<D>(&server);
    let manager = client
        .session_manager(store, |client, _id| client.agent(MODEL))
        .subscriber_capacity(2)
        .start()
        .expect("manager starts");
    let (_, mut slow) = manager.subscribe().await.expect("subscribe");
    let (_, mut reader) = manager.subscribe().await.expect("subscribe");
    for _ in 0..3 {
        manager.create().await.expect("created");
        assert!(matches!(next(&mut reader).await, FeedEvent::Opened { .. }));
    }
    let mut kept = 0;
    while within(Duration::from_secs(5), slow.next_event()).await.expect("ends").is_some() {
        kept += 1;
    }
    assert_eq!((kept, slow.lagged(), reader.lagged()), (2, true, false));
    manager.shutdown().await.expect("shutdown");
}

/// `shutdown` closes every session and gives every claim back; later requests are
/// refused.
pub async fn shutdown_gives_every_claim_back<D: Driver>(store: Arc<dyn Store>) {
    let server = ReplayServer::start(Vec::new()).expect("replay server");
    let client = client::<D>(&server);
    let manager = manager(&client, store.clone(), None);
    let mut ids = Vec::new();
    for _ in 0..3 {
        ids.push(manager.create().await.expect("created").session.id().clone());
    }
    manager.shutdown().await.expect("shutdown");
    for id in ids {
        let claim = store.claim(&id).expect("released by the shutdown");
        store.release(&claim).expect("released");
    }
}

/// Titles by a model: its answer cleaned and kept; a failed title call falls back to
/// the first message's text and the feed says why.
pub async fn model_titles_and_their_fallback<D: Driver>() {
    let failed = Reply::error(400, &[("content-type", "application/json")], FAILED_TITLE);
    let replies = vec![quick(), paced(&text_events(&["\"Sorting", " a Vec.\""]), Duration::ZERO), quick(), failed];
    let server = ReplayServer::start(replies).expect("replay server");
    let client = client::<D>(&server);
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let manager = client
        .session_manager(store.clone(), |client, _id| client.agent(MODEL))
        .title_model(MODEL)
        .start()
        .expect("manager starts");
    let (_, mut feed) = manager.subscribe().await.expect("subscribe");
    for expected in [Ok("Sorting a Vec"), Err("How do I sort a Vec?")] {
        let opened = manager.create().await.expect("created");
        let id = opened.session.id().clone();
        let mut events = opened.events.expect("events");
        opened.session.prompt("How do I sort a Vec?").await.expect("prompt");
        until_saved(&mut events).await;
        let seen = feed_until(&mut feed, |e| matches!(e, FeedEvent::Title { .. })).await;
        let title = expected.unwrap_or_else(|fallback| fallback);
        assert_eq!(seen.last(), Some(&FeedEvent::Title { id: id.clone(), title: Some(title.into()) }));
        assert_eq!(seen.iter().any(|e| matches!(e, FeedEvent::TitleFailed { .. })), expected.is_err(), "{seen:?}");
        saved_with_title(&mut events, &*store, &id, title).await;
    }
    let asked = server.requests();
    let title_call = String::from_utf8_lossy(&asked[1].body).into_owned();
    assert!(
        title_call.contains("\"max_tokens\":50") && title_call.contains("User: How do I sort a Vec?"),
        "{title_call}"
    );
    assert!(title_call.contains("3 to 6 words"), "{title_call}");
    manager.shutdown().await.expect("shutdown");
}

/// The body of the failed title call.
pub const FAILED_TITLE: &str =
    r#"{"type":"error","error":{"type":"invalid_request_error","message":"no titles today"}}"#;

/// A stream read as text (`TextStream::next_text`) gives the reply's pieces and passes
/// over every other event; the outcome is then `response()`'s. (Here with the manager's
/// checks, as the async drivers' other checks of the public API.)
pub async fn a_stream_read_as_text<D: Driver>() {
    let server = ReplayServer::start(vec![quick()]).expect("replay server");
    let client = client::<D>(&server);
    let mut stream = client.call(MODEL, "hi").stream().expect("stream");
    let mut text = String::new();
    while let Some(piece) = stream.next_text().await {
        text.push_str(&piece);
    }
    assert_eq!(text, "Hello there.");
    let response = stream.response().await.expect("finished");
    assert_eq!(response.text(), "Hello there.");
}
