//! The async agent handle's own behaviour (omni-shell's, under omni-tokio and omni-smol),
//! written once: a chat turn through the public API, commands refused with typed errors,
//! dropping the last handle stopping the agent's work, a lagging subscriber dropped. Each
//! driver's test starts the replay server with the replies named here and calls these
//! with its client in its runtime.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;

use omni_protocol::agent::{AgentError, AgentEvent, NoCallbacks, Status, TurnEnd};
use omni_protocol::tool::ToolError;
use omni_protocol::Message;
use omni_shell::AsyncTool;
use omni_shell::Error;
use omni_shell::StateChange;
use omni_shell::{AgentBuilder, Launch};
use serde_json::json;

use crate::agent_sim::transcript_line;
use crate::replay::ReplayServer;
use crate::scenarios::{self, paced, text_events, tool_events};
use crate::sim::{BodyStep, Reply};

/// An async driver's client: it launches omni-shell's agent handle.
pub trait AsyncLaunch: Launch<AsyncTool, Handle<NoCallbacks> = omni_shell::Agent, Error = Error> {}

impl<L: Launch<AsyncTool, Handle<NoCallbacks> = omni_shell::Agent, Error = Error>> AsyncLaunch for L {}

/// The transcript of a plain chat turn (prompt "Hi", reply "Hello there."), streaming
/// lines left out: what every subscriber of [`chat_replies`]' turn sees.
pub const CHAT_TURN: [&str; 6] = [
    "status busy",
    r#"message user["Hi"]"#,
    r#"message assistant["Hello there."]"#,
    r#"step stop user=user["Hi"] assistant=assistant["Hello there."]"#,
    "status idle",
    "turn stop stop messages=2 usage=20/2",
];

/// The transcript lines of `events` without the streaming ones (indented).
pub fn skeleton(lines: &[String]) -> Vec<&str> {
    lines.iter().map(String::as_str).filter(|l| !l.starts_with("  ")).collect()
}

/// Adds `event`'s transcript line to `lines`; true once it was the turn's end.
pub fn record_until_turn(lines: &mut Vec<String>, event: &AgentEvent) -> bool {
    lines.push(transcript_line(event));
    matches!(event, AgentEvent::Turn { .. })
}

/// The transcript lines of a blocking subscription's events through the turn's end.
pub fn lines_until_turn(events: impl IntoIterator<Item = AgentEvent>) -> Vec<String> {
    let mut lines = Vec::new();
    for event in events {
        if record_until_turn(&mut lines, &event) {
            break;
        }
    }
    lines
}

/// A closure subscriber that records the transcript lines of the first `n` events, then
/// returns `false` (unsubscribes); and what it recorded.
pub fn first_events_subscriber(n: usize) -> (impl FnMut(&AgentEvent) -> bool + Send, Arc<Mutex<Vec<String>>>) {
    let recorded = Arc::new(Mutex::new(Vec::new()));
    let seen = recorded.clone();
    let subscriber = move |event: &AgentEvent| {
        let mut seen = seen.lock().expect("not poisoned");
        seen.push(transcript_line(event));
        seen.len() < n
    };
    (subscriber, recorded)
}

/// The replies of [`chat_turn`] and [`subscribers_from_the_start`].
pub fn chat_replies() -> Vec<Reply> {
    vec![paced(&text_events(&["Hello", " there."]), Duration::from_millis(5))]
}

/// The replies of [`dropping_the_last_handle`]: a tool call (the tool hangs), then a
/// stream that hangs after one delta.
pub fn drop_replies() -> Vec<Reply> {
    vec![
        paced(&tool_events(&[("toolu_1", "slow", r#"{}"#)]), Duration::from_millis(1)),
        Reply::Http {
            status: 200,
            headers: vec![("content-type".into(), "text/event-stream".into())],
            // message_start, content_block_start, one delta, then nothing.
            body: vec![BodyStep::Bytes(text_events(&["Hel"])[..3].concat().into_bytes()), BodyStep::Hang],
        },
    ]
}

/// The replies of [`lagging_subscriber`]: 50 words, one event per chunk, so a reader that
/// keeps up never has more than a few queued.
pub fn lagging_replies() -> Vec<Reply> {
    let words: Vec<String> = (0..50).map(|i| format!("w{i} ")).collect();
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    vec![paced(&text_events(&words), Duration::from_millis(1))]
}

/// Lets other tasks run once, in any runtime.
async fn yield_now() {
    let mut yielded = false;
    std::future::poll_fn(|cx| {
        if yielded {
            Poll::Ready(())
        } else {
            yielded = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    })
    .await
}

/// A chat turn through the handle, then commands refused with typed errors that change
/// nothing. `client` talks to `server`, which must have been started with [`chat_replies`].
pub async fn chat_turn<L: AsyncLaunch>(client: L) {
    let agent = AgentBuilder::new(client, scenarios::model().into()).system("Be brief.").start().expect("agent starts");
    let (snapshot, mut events) = agent.subscribe().await.expect("subscribe");
    assert_eq!(snapshot.status, Status::Idle);
    assert!(snapshot.committed.is_empty());
    agent.prompt("Hi").await.expect("prompt accepted");
    let mut lines = Vec::new();
    while let Some(event) = events.next_event().await {
        if record_until_turn(&mut lines, &event) {
            break;
        }
    }
    assert_eq!(skeleton(&lines), CHAT_TURN);
    assert_eq!(agent.messages().await.expect("state").len(), 2);
    assert!(matches!(agent.cancel().await, Err(Error::Agent(AgentError::Idle))));
    // Refused while idle-only rules hold: a history ending with a user message.
    let bad = StateChange::new().messages(vec![Message::user("dangling")]);
    assert!(matches!(agent.set_state(bad).await, Err(Error::Agent(AgentError::InvalidMessages(_)))));
    let state = agent.state().await.expect("state");
    assert_eq!(state.system.as_deref(), Some("Be brief."));
    assert_eq!(state.messages.len(), 2, "a refused change changes nothing");
    // A change as a function of the value the agent holds when it applies.
    let longer = StateChange::new()
        .system_with(|current| Some(format!("{} Really.", current.unwrap_or_default())))
        .messages_with(|current| current[..0].to_vec());
    agent.set_state(longer).await.expect("an idle agent takes a change");
    let state = agent.state().await.expect("state");
    assert_eq!(state.system.as_deref(), Some("Be brief. Really."));
    assert!(state.messages.is_empty(), "the history as a function of itself");
    // The subscriber is told of the accepted change, with the new state (the refused one
    // said nothing).
    match events.next_event().await {
        Some(AgentEvent::State(told)) => assert_eq!(*told, state),
        other => panic!("a state event: {other:?}"),
    }
}

/// Subscribers given to the builder see the agent's events from the first one on: a
/// driver's subscription channel gets the whole chat turn; a closure runs on every event
/// until it returns `false`, and is then dropped. `client` talks to a server started with
/// [`chat_replies`].
pub async fn subscribers_from_the_start<L: AsyncLaunch>(client: L) {
    let (subscriber, mut events) = omni_shell::Subscription::channel(100);
    let (first_two_only, first_two) = first_events_subscriber(2);
    let agent = AgentBuilder::new(client, scenarios::model().into())
        .subscriber(subscriber)
        .subscriber(first_two_only)
        .start()
        .expect("agent starts");
    agent.prompt("Hi").await.expect("prompt accepted");
    let mut lines = Vec::new();
    while let Some(event) = events.next_event().await {
        if record_until_turn(&mut lines, &event) {
            break;
        }
    }
    assert_eq!(skeleton(&lines), CHAT_TURN, "the channel subscriber saw the whole turn");
    assert_eq!(*first_two.lock().expect("not poisoned"), lines[..2], "the closure saw two events, then left");
}

/// A weak handle reaches the agent while a handle keeps it running, and does not keep it
/// running itself: when the last handle goes, the agent stops (its subscriptions end)
/// and the weak handle no longer upgrades.
pub async fn weak_handles<L: AsyncLaunch>(client: L) {
    let agent = AgentBuilder::new(client, scenarios::model().into()).start().expect("agent starts");
    let weak = agent.downgrade();
    let upgraded = weak.upgrade().expect("the agent runs");
    assert_eq!(upgraded.status().await.expect("status"), Status::Idle);
    drop(upgraded);
    let (_, mut events) = agent.subscribe().await.expect("subscribe");
    drop(agent);
    assert!(events.next_event().await.is_none(), "the agent stopped, its subscription ended");
    assert!(weak.upgrade().is_none());
}

/// Dropping the last handle stops a tool run and closes a request in flight. `client`
/// talks to `server`, started with [`drop_replies`]; `sleep` is the runtime's timer. The
/// disconnect check blocks its thread: the agents must run elsewhere (a multi-threaded
/// runtime, smol's global executor).
pub async fn dropping_the_last_handle<L, F, Fut>(client: L, server: &ReplayServer, sleep: F)
where
    L: AsyncLaunch + Clone,
    F: Fn(Duration) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let started = Arc::new(AtomicBool::new(false));
    let finished = Arc::new(AtomicBool::new(false));
    let (s, f) = (started.clone(), finished.clone());
    let nap = sleep.clone();
    let slow = AsyncTool::new("slow", "Takes forever", json!({"type": "object"}), move |_| {
        let (s, f, nap) = (s.clone(), f.clone(), nap.clone());
        async move {
            s.store(true, Ordering::SeqCst);
            nap(Duration::from_secs(30)).await;
            f.store(true, Ordering::SeqCst);
            Ok::<_, ToolError>("done")
        }
    });
    let agent = AgentBuilder::new(client.clone(), scenarios::model().into()).tool(slow).start().expect("agent starts");
    let (_, mut events) = agent.subscribe().await.expect("subscribe");
    let second = agent.clone();
    agent.prompt("Go").await.expect("prompt");
    while !started.load(Ordering::SeqCst) {
        sleep(Duration::from_millis(5)).await;
    }
    drop(agent);
    assert_eq!(second.status().await.expect("a clone keeps it alive"), Status::Busy);
    drop(second);
    // The subscription ends without a turn: the agent stopped.
    let mut ended_with_turn = false;
    while let Some(event) = events.next_event().await {
        ended_with_turn |= matches!(event, AgentEvent::Turn { end: TurnEnd::Stop, .. });
    }

    assert!(!ended_with_turn);
    assert!(!events.lagged());
    sleep(Duration::from_millis(50)).await;
    assert!(!finished.load(Ordering::SeqCst), "the tool run was aborted");

    // A request in flight is closed when the agent goes.
    let agent = AgentBuilder::new(client, scenarios::model().into()).start().expect("agent starts");
    let (_, mut events) = agent.subscribe().await.expect("subscribe");
    agent.prompt("Hi").await.expect("prompt");
    while let Some(event) = events.next_event().await {
        if matches!(event, AgentEvent::Stream(_)) {
            break;
        }
    }
    drop(agent);
    assert!(server.wait_for_disconnects(1, Duration::from_secs(5)), "the connection was closed");
}

/// A subscriber that never reads is dropped and told; one that keeps up is not. `client`
/// talks to `server`, started with [`lagging_replies`].
pub async fn lagging_subscriber<L: AsyncLaunch>(client: L) {
    let agent =
        AgentBuilder::new(client, scenarios::model().into()).subscriber_capacity(32).start().expect("agent starts");
    let (_, slow) = agent.subscribe().await.expect("subscribe");
    let (_, mut reader) = agent.subscribe().await.expect("subscribe");
    agent.prompt("Count").await.expect("prompt");
    let mut seen = 0;
    while let Some(event) = reader.next_event().await {
        seen += 1;
        if matches!(event, AgentEvent::Turn { .. }) {
            break;
        }
        yield_now().await;
    }
    assert!(!reader.lagged(), "a reader that keeps up is not dropped ({seen} events)");
    assert!(slow.lagged(), "the subscriber that never read was dropped");
}

/// The replies of [`init_adds_a_tool_with_its_handler`]: a call of `secret`, then an answer.
pub fn init_tool_replies() -> Vec<Reply> {
    vec![
        paced(&tool_events(&[("toolu_1", "secret", "{}")]), Duration::from_millis(1)),
        paced(&text_events(&["The secret is kept."]), Duration::from_millis(1)),
    ]
}

/// Callbacks whose `init` offers the model the registered-but-unoffered tool `secret`.
#[derive(Debug, Default)]
pub struct OffersSecret;

impl omni_protocol::agent::AgentCallbacks for OffersSecret {
    fn init(&mut self, config: &mut omni_protocol::agent::AgentConfig) -> Result<(), String> {
        let secret = config.available_tools.iter().find(|t| t.spec.name == "secret").cloned();
        config.tools.push(secret.ok_or("no secret tool registered")?);
        Ok(())
    }
}

/// A tool registered with its handler but not offered (`handler`): `init` adds it, the
/// model calls it, its handler runs. Returns whether the handler ran. `client` talks to a
/// server started with [`init_tool_replies`].
pub async fn init_adds_a_tool_with_its_handler<L>(client: L) -> bool
where
    L: Launch<AsyncTool, Handle<OffersSecret> = omni_shell::Agent<OffersSecret>, Error = Error>,
{
    let ran = Arc::new(AtomicBool::new(false));
    let flag = ran.clone();
    let secret = AsyncTool::new("secret", "Keeps a secret.", serde_json::json!({"type": "object"}), move |_| {
        flag.store(true, Ordering::SeqCst);
        async { Ok::<_, ToolError>("kept") }
    });
    let agent = AgentBuilder::new(client, scenarios::model().into())
        .handler(secret)
        .callbacks(OffersSecret)
        .start()
        .expect("agent starts");
    let offered: Vec<String> = agent.state().await.expect("state").tools.into_iter().map(|t| t.name).collect();
    assert_eq!(offered, ["secret"], "init offered the registered tool");
    let (_, mut events) = agent.subscribe().await.expect("subscribe");
    agent.prompt("Keep it.").await.expect("prompt accepted");
    let mut lines = Vec::new();
    while let Some(event) = events.next_event().await {
        if record_until_turn(&mut lines, &event) {
            break;
        }
    }
    assert!(lines.iter().any(|l| l == r#"tool_result toolu_1 "kept""#), "{lines:#?}");
    ran.load(Ordering::SeqCst)
}
