//! The async session handle's own behaviour (omni-shell's, under omni-tokio and
//! omni-smol), written once, beside the scenarios: ids taken and missing as typed store
//! errors, refusals while busy, a handle dropped right after a commit losing nothing, what
//! a load takes from the store and what from the builder, a torn record reported,
//! subscribers counted by role, and one owner per session (a second load refused at once,
//! a read-only load beside the owner, `close` handing the session on). omni-blocking's
//! tests make the same checks through its blocking handle.

use std::sync::Arc;
use std::time::Duration;

use omni_protocol::agent::{AgentEvent, NoCallbacks};
use omni_protocol::session::NodeId;
use omni_protocol::session::{SessionError, SessionEvent, Written};
use omni_protocol::session::{SessionId, Store, StoreErrorKind, StoreWarning};
use omni_shell::{AgentBuilder, AsyncTool, Error, Launch, Session, SubscriberCount, Subscription};
use omni_store::FileStore;

use crate::replay::ReplayServer;
use crate::scenarios::{paced, text_events};
use crate::session_drive::TempDir;
use crate::sim::Reply;

/// An async driver's client: its sessions open as omni-shell's futures.
pub trait AsyncSessionLaunch:
    Launch<AsyncTool, Opening<NoCallbacks> = omni_shell::Opening<NoCallbacks>> + Clone
{
}

impl<L: Launch<AsyncTool, Opening<NoCallbacks> = omni_shell::Opening<NoCallbacks>> + Clone> AsyncSessionLaunch for L {}

/// The model of these checks (the replay server answers as Anthropic).
pub const MODEL: &str = "anthropic:claude-sonnet-4-5";

/// The replies of the checks below, in the order they ask: quick ones, and one that takes
/// [`SLOW`] to finish, for the refusals while busy.
pub fn handle_replies() -> Vec<Reply> {
    let quick = || paced(&text_events(&["Hello", " there."]), Duration::from_millis(2));
    let mut replies = vec![quick(), paced(&text_events(&["Slow", " reply."]), SLOW)];
    // The other checks' turns, then two a store for `one_owner_per_session`.
    replies.extend((0..6 + 6).map(|_| quick()));
    // `a_rejected_call_never_runs_in_a_session`: a malformed `xml` call, then an answer.
    replies.push(paced(&text_events(&crate::scenarios::XML_MALFORMED_DELTAS), Duration::from_millis(2)));
    replies.push(quick());
    replies
}

/// The gap between the events of the slow reply.
pub const SLOW: Duration = Duration::from_millis(150);

fn builder<L: AsyncSessionLaunch>(client: &L, model: &str) -> AgentBuilder<L, AsyncTool> {
    AgentBuilder::new(client.clone(), model.into())
}

/// True for the event that ends a change's writes: the state map written (it goes last),
/// or a write that failed (no other follows it until the next change).
pub fn writes_done(event: &SessionEvent) -> bool {
    matches!(event, SessionEvent::Store { written: Written::State, .. } | SessionEvent::Store { result: Err(_), .. })
}

/// Reads events until the turn's writes are done ([`writes_done`]).
pub async fn until_saved(events: &mut Subscription<SessionEvent>) -> Vec<SessionEvent> {
    let mut seen = Vec::new();
    while let Some(event) = events.next_event().await {
        let done = writes_done(&event);
        seen.push(event);
        if done {
            break;
        }
    }
    seen
}

async fn turn(session: &Session, events: &mut Subscription<SessionEvent>, text: &str) {
    session.prompt(text).await.expect("prompt taken");
    until_saved(events).await;
}

/// Every check, in order, against `server` (started with [`handle_replies`]) with
/// `store` (empty).
pub async fn every_check<L: AsyncSessionLaunch>(client: L, server: &ReplayServer, store: Arc<dyn Store>) {
    ids_taken_and_missing(&client, store.clone()).await;
    refused_while_busy(&client, store.clone()).await;
    dropped_right_after_a_commit(&client, store.clone()).await;
    load_takes_the_kept_model_and_the_builders_system(&client, server, store).await;
    torn_record_reported(&client).await;
    blocks_join_the_tree_and_a_regenerate_sends_them_again(&client, server).await;
    one_owner_per_session(&client).await;
    a_lease_is_renewed_while_the_session_runs(&client).await;
    a_rejected_call_never_runs_in_a_session(&client, server).await;
}

/// Issue 23, A and B, in a session's turn: a call the `xml` parser rejects never reaches
/// its handler; the tree keeps the error result with the parser's reason, and the next
/// request sends the call back as the model wrote it.
pub async fn a_rejected_call_never_runs_in_a_session<L: AsyncSessionLaunch>(client: &L, server: &ReplayServer) {
    let runs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = runs.clone();
    let tool = AsyncTool::new("get_weather", "The weather in a city.", rejected_call_schema(), move |_input| {
        counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        async { Ok::<_, omni_protocol::tool::ToolError>("sunny") }
    });
    let store: Arc<dyn Store> = Arc::new(omni_store::MemoryStore::new());
    let options =
        omni_protocol::Options { tool_protocol: Some(omni_protocol::ToolProtocol::Xml), ..Default::default() };
    let session = builder(client, MODEL).tool(tool).options(options).session(store).create().await.expect("created");
    let (_, mut events) = session.subscribe().await.expect("subscribe");
    turn(&session, &mut events, "What is the weather in Paris?").await;
    assert_eq!(runs.load(std::sync::atomic::Ordering::SeqCst), 0, "the handler never ran");
    let tree = session.tree().await.expect("tree");
    let kept = serde_json::to_string(&tree.messages()).expect("JSON");
    assert!(kept.contains("was not run") && kept.contains("\"is_error\":true"), "the error result is kept: {kept}");
    let last = server.requests().pop().expect("a request");
    let body = String::from_utf8_lossy(&last.body).into_owned();
    assert!(body.contains(REJECTED_REASON), "{body}");
    assert!(body.matches("</get_weather>\\n</get_weather>").count() >= 2, "the call as written: {body}");
    session.close().await.expect("closed");
}

/// The parser's reason for [`crate::scenarios::XML_MALFORMED_DELTAS`].
pub const REJECTED_REASON: &str = "`</get_weather>` where `</tool_call>` was due";

/// The input schema of the tool of [`a_rejected_call_never_runs_in_a_session`].
pub fn rejected_call_schema() -> serde_json::Value {
    serde_json::json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})
}

/// The lease of a store whose ownership lapses ([`omni_store::MemoryStore::with_lease`]),
/// kept by the session's loop while it runs, idle (the renewal is a deadline of the
/// session machine's): long after the lease's length, another load is still refused, and
/// the owner still writes; once closed, the next load owns it.
pub async fn a_lease_is_renewed_while_the_session_runs<L: AsyncSessionLaunch>(client: &L) {
    let store: Arc<dyn Store> = Arc::new(omni_store::MemoryStore::with_lease(LEASE));
    let owner = builder(client, MODEL).session(store.clone()).create().await.expect("created");
    let (_, mut events) = owner.subscribe().await.expect("subscribe");
    let id = owner.id().clone();
    #[allow(clippy::disallowed_methods)] // a test's wait, on the test's own thread
    std::thread::sleep(LEASE * 4);
    let second = builder(client, MODEL).session(store.clone()).load(id.clone()).await;
    assert!(matches!(second, Err(Error::Store(ref e)) if e.kind == StoreErrorKind::OwnedElsewhere), "{second:?}");
    owner.set_title(Some("still mine".into())).await.expect("title");
    let written = until_saved(&mut events).await;
    assert!(
        written.iter().any(|e| matches!(e, SessionEvent::Store { written: Written::Renewed, result: Ok(()) })),
        "renewed while idle: {written:?}"
    );
    assert!(
        written.iter().any(|e| matches!(e, SessionEvent::Store { written: Written::State, result: Ok(()) })),
        "{written:?}"
    );
    owner.close().await.expect("closed");
    let next = builder(client, MODEL).session(store.clone()).load(id).await.expect("the next owner");
    assert_eq!(next.state().await.expect("state").title.as_deref(), Some("still mine"));
    next.close().await.expect("closed");
}

/// The lease of [`a_lease_is_renewed_while_the_session_runs`].
pub const LEASE: Duration = Duration::from_millis(400);

/// One owner per session, through the handle, with each store: a second load (a second
/// handle in this process, as one in another process) is refused at once as
/// `OwnedElsewhere`; a read-only load shows what was saved beside the owner and changes
/// nothing; `close` writes, releases, and the next load owns the session.
pub async fn one_owner_per_session<L: AsyncSessionLaunch>(client: &L) {
    let dir = TempDir::new("one-owner");
    let stores: [Arc<dyn Store>; 3] = [
        Arc::new(omni_store::MemoryStore::new()),
        Arc::new(FileStore::open(dir.0.join("files")).expect("the file store opens")),
        Arc::new(omni_store::SqliteStore::open(dir.0.join("sessions.db")).expect("the SQLite store opens")),
    ];
    for store in stores {
        let owner = builder(client, MODEL).session(store.clone()).create().await.expect("created");
        let (_, mut events) = owner.subscribe().await.expect("subscribe");
        turn(&owner, &mut events, "Hi").await;
        let id = owner.id().clone();
        let second = builder(client, MODEL).session(store.clone()).load(id.clone()).await;
        assert!(matches!(second, Err(Error::Store(ref e)) if e.kind == StoreErrorKind::OwnedElsewhere), "{second:?}");
        let taken = builder(client, MODEL).session(store.clone()).create_with_id(id.clone()).await;
        assert!(matches!(taken, Err(Error::Store(ref e)) if e.kind == StoreErrorKind::Exists), "{taken:?}");
        let viewer = builder(client, MODEL).session(store.clone()).load_read_only(id.clone()).await.expect("read-only");
        assert_eq!(viewer.tree().await.expect("tree").len(), 2, "what was saved");
        let refused = |r: Result<(), Error>| matches!(r, Err(Error::Session(SessionError::ReadOnly)));
        assert!(refused(viewer.prompt("mine now").await));
        assert!(refused(viewer.set_title(Some("mine".into())).await));
        assert!(refused(viewer.navigate(None).await));
        viewer.close().await.expect("a read-only session closes");
        // The owner goes on, then hands the session over.
        owner.set_title(Some("renamed".into())).await.expect("title");
        until_saved(&mut events).await;
        owner.close().await.expect("closed");
        owner.close().await.expect("closing twice is fine");
        assert!(owner.prompt("after close").await.is_err(), "a closed session takes nothing");
        let next = builder(client, MODEL).session(store.clone()).load(id.clone()).await.expect("the next owner");
        assert_eq!(next.state().await.expect("state").title.as_deref(), Some("renamed"));
        let (_, mut events) = next.subscribe().await.expect("subscribe");
        turn(&next, &mut events, "Again").await;
        next.close().await.expect("closed");
        assert_eq!(store.load(&id).expect("loads").tree.len(), 4, "both owners' turns");
    }
}

/// A prompt of blocks (text and an image) joins the tree whole, and regenerating its
/// reply sends the same blocks again.
pub async fn blocks_join_the_tree_and_a_regenerate_sends_them_again<L: AsyncSessionLaunch>(
    client: &L,
    server: &ReplayServer,
) {
    let store: Arc<dyn Store> = Arc::new(omni_store::MemoryStore::default());
    let session = builder(client, MODEL).session(store).create().await.expect("created");
    let (_, mut events) = session.subscribe().await.expect("subscribe");
    session.prompt_with(image_prompt()).await.expect("prompt taken");
    until_saved(&mut events).await;
    let tree = session.tree().await.expect("tree");
    let user = tree.message(NodeId(0)).expect("the user node");
    assert_eq!(user.content, image_prompt().content, "the blocks joined the tree whole");
    session.regenerate(NodeId(0)).await.expect("regenerate taken");
    until_saved(&mut events).await;
    let last = server.requests().pop().expect("a request");
    let body: serde_json::Value = serde_json::from_slice(&last.body).expect("a JSON body");
    let content = &body["messages"][0]["content"];
    assert_eq!(content[1]["type"], "image", "the image went again: {body}");
    assert_eq!(session.tree().await.expect("tree").children(NodeId(0)).len(), 2, "two replies to one message");
}

/// A prompt of text and a small PNG.
pub fn image_prompt() -> omni_protocol::agent::Prompt {
    let png = omni_protocol::Attachment {
        source: omni_protocol::Source::Base64 { data: "iVBORw0KGgo=".into() },
        media_type: "image/png".into(),
        name: None,
    };
    omni_protocol::agent::Prompt::new(vec![
        omni_protocol::Block::text("What is this?"),
        omni_protocol::Block::Attachment(png),
    ])
}

/// A file store whose last line was cut by a crash: the session loads without it, and the
/// handle says so.
pub async fn torn_record_reported<L: AsyncSessionLaunch>(client: &L) {
    let dir = TempDir::new("torn-session");
    let store: Arc<dyn Store> = Arc::new(FileStore::open(&dir.0).expect("the store opens"));
    let session = builder(client, MODEL).session(store.clone()).create().await.expect("created");
    let (_, mut events) = session.subscribe().await.expect("subscribe");
    turn(&session, &mut events, "Hi").await;
    let id = session.id().clone();
    session.close().await.expect("closed");
    tear_last_record(&dir, &id);
    let loaded = builder(client, MODEL).session(store).load(id).await.expect("loaded");
    assert!(
        matches!(loaded.load_warnings(), [StoreWarning::TornRecord { bytes: 10, .. }]),
        "{:?}",
        loaded.load_warnings()
    );
    assert_eq!(loaded.tree().await.expect("tree").len(), 2, "the good lines are all kept");
}

/// Appends the first 10 bytes of a node's line to the session's `nodes.jsonl`, as a crash
/// in the middle of an append leaves it.
pub fn tear_last_record(dir: &TempDir, id: &SessionId) {
    use std::io::Write;
    let path = dir.0.join(id.as_str()).join("nodes.jsonl");
    let mut file = std::fs::OpenOptions::new().append(true).open(&path).expect("the nodes file");
    file.write_all(br#"{"id":2,"p"#).expect("appended");
}

/// An id the store has is refused at creation, atomically, and a missing one at loading:
/// both as typed store errors.
pub async fn ids_taken_and_missing<L: AsyncSessionLaunch>(client: &L, store: Arc<dyn Store>) {
    let id = SessionId::new("taken").expect("an id");
    let first = builder(client, MODEL).session(store.clone()).create_with_id(id.clone()).await.expect("created");
    let again = builder(client, MODEL).session(store.clone()).create_with_id(id.clone()).await;
    assert!(matches!(again, Err(Error::Store(ref e)) if e.kind == StoreErrorKind::Exists), "{again:?}");
    let missing = builder(client, MODEL).session(store.clone()).load(SessionId::new("missing").expect("an id")).await;
    assert!(matches!(missing, Err(Error::Store(ref e)) if e.kind == StoreErrorKind::NotFound), "{missing:?}");
    let random = builder(client, MODEL).session(store).create().await.expect("created with a random id");
    assert_eq!(random.id().as_str().len(), 22, "16 bytes in URL-safe base64: {}", random.id());
    assert_ne!(random.id(), first.id());
}

/// While a turn is in flight, every tree-changing command is refused as busy, and the
/// subscribers are counted by role.
pub async fn refused_while_busy<L: AsyncSessionLaunch>(client: &L, store: Arc<dyn Store>) {
    let session = builder(client, MODEL).session(store).create().await.expect("created");
    let (_, mut events) = session.subscribe().await.expect("subscribe");
    let (_, _watching) = session.observe().await.expect("observe");
    assert_eq!(session.subscribers().await.expect("count"), SubscriberCount { controllers: 1, observers: 1 });
    turn(&session, &mut events, "Hi").await;
    session.prompt("Slowly, please").await.expect("prompt taken");
    let busy = |r: Result<(), Error>| matches!(r, Err(Error::Session(SessionError::Busy)));
    assert!(busy(session.prompt("again").await));
    assert!(busy(session.regenerate(NodeId(0)).await));
    assert!(busy(session.navigate(None).await));
    assert!(busy(session.edit(None, "new").await));
    until_saved(&mut events).await;
    assert_eq!(session.tree().await.expect("tree").len(), 4, "the slow turn committed");
    assert!(session.is_saved().await.expect("saved"));
}

/// The last handle dropped right after the turn commits: the session's loop writes the
/// turn before it ends, so loading the session again finds it.
pub async fn dropped_right_after_a_commit<L: AsyncSessionLaunch>(client: &L, store: Arc<dyn Store>) {
    let session = builder(client, MODEL).session(store.clone()).create().await.expect("created");
    let (_, mut events) = session.subscribe().await.expect("subscribe");
    session.prompt("Hi").await.expect("prompt taken");
    while let Some(event) = events.next_event().await {
        if matches!(event, SessionEvent::Agent(AgentEvent::Turn { .. })) {
            break;
        }
    }
    let id = session.id().clone();
    drop(session);
    drop(events);
    // The old loop may still be writing: the load waits for nothing, so try until it is
    // there (a few milliseconds at most), never longer than a generous limit.
    let mut nodes = 0;
    for _ in 0..200 {
        nodes = store.load(&id).map(|loaded| loaded.tree.len()).unwrap_or(0);
        if nodes == 2 {
            break;
        }
        #[allow(clippy::disallowed_methods)] // a test's wait, on the test's own thread
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(nodes, 2, "the committed turn reached the store after the last handle went");
    // Its ownership goes with the loop's end, a moment after the write.
    let mut loaded = None;
    for _ in 0..200 {
        match builder(client, MODEL).session(store.clone()).load(id.clone()).await {
            Ok(session) => {
                loaded = Some(session);
                break;
            }
            Err(Error::Store(e)) if e.kind == StoreErrorKind::OwnedElsewhere => {
                #[allow(clippy::disallowed_methods)] // a test's wait, on the test's own thread
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => panic!("the session does not load: {e}"),
        }
    }
    let loaded = loaded.expect("the dropped session's ownership was released");
    assert_eq!(loaded.tree().await.expect("tree").path().len(), 2);
}

/// On load, the kept model is used (the builder's is only a fallback), the builder's
/// system prompt wins over the kept one, and the agent's history is the kept path: the
/// next request says so.
pub async fn load_takes_the_kept_model_and_the_builders_system<L: AsyncSessionLaunch>(
    client: &L,
    server: &ReplayServer,
    store: Arc<dyn Store>,
) {
    let created = builder(client, MODEL)
        .system("Kept system.")
        .session(store.clone())
        .title("kept")
        .create()
        .await
        .expect("created");
    let (_, mut events) = created.subscribe().await.expect("subscribe");
    turn(&created, &mut events, "First").await;
    let id = created.id().clone();
    created.close().await.expect("closed");
    let loaded = builder(client, "openai:gpt-4o").system("New system.").session(store).load(id).await.expect("loaded");
    let state = loaded.state().await.expect("state");
    assert_eq!(state.model.as_deref(), Some(MODEL));
    assert_eq!(state.system.as_deref(), Some("New system."));
    assert_eq!(state.title.as_deref(), Some("kept"));
    let (_, mut events) = loaded.subscribe().await.expect("subscribe");
    turn(&loaded, &mut events, "Second").await;
    let last = server.requests().pop().expect("a request");
    assert_eq!(last.path, "/v1/messages", "the kept model's provider");
    let body: serde_json::Value = serde_json::from_slice(&last.body).expect("a JSON body");
    assert_eq!(body["system"], "New system.", "{body}");
    let messages = body["messages"].as_array().map_or(0, Vec::len);
    assert_eq!(messages, 3, "the kept path (two messages) and the new prompt: {body}");
}
