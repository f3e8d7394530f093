//! The blocking agent handle's own behaviour: a chat turn through the public API,
//! commands refused with typed errors, dropping the last handle stopping the agent's
//! work, and a subscriber that falls behind being dropped and told.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)] // a driver test: threads, sockets, clocks

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use omni_blocking::{
    AgentCallbacks, AgentError, AgentEvent, CancelToken, Client, Error, Message, StateChange, Status, Subscription,
    Tool, ToolError, TurnEnd, WeakAgent,
};
use omni_conformance::async_agent::{chat_replies, first_events_subscriber, lines_until_turn, skeleton, CHAT_TURN};
use omni_conformance::replay::ReplayServer;
use omni_conformance::scenarios::{self, paced, text_events, tool_events};
use omni_conformance::sim::{BodyStep, Reply};
use serde_json::json;

fn client(server: &ReplayServer) -> Client {
    Client::builder()
        .base_url("anthropic", format!("{}/v1", server.base_url()))
        .api_key("anthropic", "sk-replay")
        .build()
        .expect("client")
}

/// Waits until `done` holds, for at most 5 s.
fn eventually(done: impl Fn() -> bool) -> bool {
    let start = Instant::now();
    while !done() {
        if start.elapsed() > Duration::from_secs(5) {
            return false;
        }
        thread::sleep(Duration::from_millis(5));
    }
    true
}

/// Callbacks that count turns (private state read through `with_callbacks`) and say
/// when the agent was terminated.
#[derive(Default)]
struct Watch {
    turns: u32,
    terminated: Arc<AtomicBool>,
}

impl AgentCallbacks for Watch {
    fn handle_turn(&mut self, _response: &omni_blocking::Response) -> omni_blocking::TurnDecision {
        self.turns += 1;
        omni_blocking::TurnDecision::Stop
    }
    fn terminate(&mut self) {
        self.terminated.store(true, Ordering::SeqCst);
    }
}

#[test]
fn a_chat_turn_through_the_handle() {
    let server = ReplayServer::start(chat_replies()).expect("replay server");
    let agent = client(&server)
        .agent(scenarios::model())
        .system("Be brief.")
        .callbacks(Watch::default())
        .start()
        .expect("agent starts");
    let (snapshot, events) = agent.subscribe().expect("subscribe");
    assert_eq!(snapshot.status, Status::Idle);
    assert!(snapshot.committed.is_empty());
    // A second subscriber, to see the state events after the turn.
    let (_, later) = agent.subscribe().expect("subscribe");
    agent.prompt("Hi").expect("prompt accepted");
    let lines = lines_until_turn(events);
    assert_eq!(skeleton(&lines), CHAT_TURN);
    assert_eq!(agent.messages().expect("state").len(), 2);
    assert_eq!(agent.with_callbacks(|watch| watch.turns).expect("callbacks"), 1);
    assert!(matches!(agent.cancel(), Err(Error::Agent(AgentError::Idle))));
    assert!(matches!(agent.resume(omni_blocking::ToolDecision::Execute), Err(Error::Agent(AgentError::NotPaused))));
    // Refused while idle-only rules hold: a history ending with a user message.
    let bad = StateChange::new().messages(vec![Message::user("dangling")]);
    assert!(matches!(agent.set_state(bad), Err(Error::Agent(AgentError::InvalidMessages(_)))));
    let state = agent.state().expect("state");
    assert_eq!(state.system.as_deref(), Some("Be brief."));
    assert_eq!(state.messages.len(), 2, "a refused change changes nothing");
    // A change as a function of the value the agent holds when it applies.
    let longer = StateChange::new().system_with(|current| Some(format!("{} Really.", current.unwrap_or_default())));
    agent.set_state(longer).expect("an idle agent takes a change");
    let state = agent.state().expect("state");
    assert_eq!(state.system.as_deref(), Some("Be brief. Really."));
    agent.set_state(StateChange::new().no_system()).expect("an idle agent takes a change");
    assert_eq!(agent.state().expect("state").system, None);
    // The subscriber was told of each accepted change, with the new state.
    let told: Vec<omni_blocking::AgentState> = std::iter::from_fn(|| later.try_recv().ok())
        .filter_map(|event| match event {
            AgentEvent::State(state) => Some(*state),
            _ => None,
        })
        .collect();
    assert_eq!(told.len(), 2, "one event per accepted change, none for the refused one");
    assert_eq!(told[0], state);
}

/// Subscribers given to the builder see the agent's events from the first one on: a
/// subscription channel gets the whole turn; a closure runs on every event until it
/// returns `false`, and is then dropped.
#[test]
fn subscribers_given_to_the_builder_see_every_event() {
    let server = ReplayServer::start(chat_replies()).expect("replay server");
    let (subscriber, events) = Subscription::channel(100);
    let (first_two_only, first_two) = first_events_subscriber(2);
    let agent = client(&server)
        .agent(scenarios::model())
        .subscriber(subscriber)
        .subscriber(first_two_only)
        .start()
        .expect("agent starts");
    agent.prompt("Hi").expect("prompt accepted");
    let lines = lines_until_turn(events);
    assert_eq!(skeleton(&lines), CHAT_TURN, "the channel subscriber saw the whole turn");
    assert_eq!(*first_two.lock().expect("not poisoned"), lines[..2], "the closure saw two events, then left");
}

/// Callbacks that call the agent's own handle from `handle_turn`.
struct CallsItself {
    handle: Arc<std::sync::Mutex<Option<omni_blocking::Agent<Self>>>>,
    answer: Arc<std::sync::Mutex<Option<Result<Status, Error>>>>,
}

impl AgentCallbacks for CallsItself {
    fn handle_turn(&mut self, _response: &omni_blocking::Response) -> omni_blocking::TurnDecision {
        let agent = self.handle.lock().expect("not poisoned").clone();
        if let Some(agent) = agent {
            *self.answer.lock().expect("not poisoned") = Some(agent.status());
        }
        omni_blocking::TurnDecision::Stop
    }
}

/// A handle called from the agent's own callbacks (or a `with_callbacks` closure) would
/// wait for itself: it answers a typed error at once and the turn goes on.
#[test]
fn a_handle_called_from_the_agents_callbacks_refuses_instead_of_deadlocking() {
    let server = ReplayServer::start(chat_replies()).expect("replay server");
    let handle = Arc::new(std::sync::Mutex::new(None));
    let answer = Arc::new(std::sync::Mutex::new(None));
    let callbacks = CallsItself { handle: handle.clone(), answer: answer.clone() };
    let agent = client(&server).agent(scenarios::model()).callbacks(callbacks).start().expect("agent starts");
    *handle.lock().expect("not poisoned") = Some(agent.clone());
    let (_, events) = agent.subscribe().expect("subscribe");
    agent.prompt("Hi").expect("prompt");
    assert_eq!(skeleton(&lines_until_turn(events)), CHAT_TURN, "the turn completed");
    let answer = answer.lock().expect("not poisoned").take().expect("handle_turn ran");
    assert!(matches!(answer, Err(Error::Agent(AgentError::CalledFromAgent))), "{answer:?}");
    let inner = agent.clone();
    let from_closure = agent.with_callbacks(move |_| inner.messages()).expect("with_callbacks");
    assert!(matches!(from_closure, Err(Error::Agent(AgentError::CalledFromAgent))));
    assert_eq!(agent.messages().expect("from another thread").len(), 2);
    // A handle inside the callbacks is a cycle that would keep the agent alive: break it.
    handle.lock().expect("not poisoned").take();
}

/// A tool that reaches its own agent through a weak handle: it can use it while the
/// application holds the agent, and it does not keep the agent running after that.
#[test]
fn a_weak_handle_reaches_the_agent_without_keeping_it_alive() {
    let server = ReplayServer::start(vec![
        paced(&tool_events(&[("toolu_1", "peek", r#"{}"#)]), Duration::from_millis(1)),
        paced(&text_events(&["Done."]), Duration::from_millis(1)),
    ])
    .expect("replay server");
    let slot: Arc<std::sync::OnceLock<WeakAgent<Watch>>> = Arc::default();
    let seen = Arc::new(std::sync::Mutex::new(None));
    let (from_tool, saw) = (slot.clone(), seen.clone());
    let peek = Tool::new("peek", "Looks at its own agent", json!({"type": "object"}), move |_| {
        let status = from_tool.get().and_then(WeakAgent::upgrade).map(|agent| agent.status());
        *saw.lock().expect("not poisoned") = status;
        Ok::<_, ToolError>("looked")
    });
    let watch = Watch::default();
    let terminated = watch.terminated.clone();
    let agent = client(&server).agent(scenarios::model()).tool(peek).callbacks(watch).start().expect("agent starts");
    let weak = agent.downgrade();
    let _ = slot.set(weak.clone());
    let (_, events) = agent.subscribe().expect("subscribe");
    agent.prompt("Look").expect("prompt");
    let lines = lines_until_turn(events);
    assert!(lines.last().is_some_and(|l| l.starts_with("turn stop")), "{lines:?}");
    let seen = seen.lock().expect("not poisoned").take();
    assert!(matches!(seen, Some(Ok(Status::Busy))), "the tool reached its agent: {seen:?}");
    drop(agent);
    assert!(eventually(|| terminated.load(Ordering::SeqCst)), "the weak handle in the tool did not keep it alive");
    assert!(weak.upgrade().is_none());
}

#[test]
fn the_handle_is_shared_across_threads() {
    let server = ReplayServer::start(vec![]).expect("replay server");
    let agent = client(&server).agent(scenarios::model()).start().expect("agent starts");
    let clone = agent.clone();
    let status = thread::spawn(move || clone.status().expect("status")).join().expect("no panic");
    assert_eq!(status, Status::Idle);
    assert_eq!(agent.snapshot().expect("snapshot").status, Status::Idle);
}

#[test]
fn dropping_the_last_handle_stops_the_request_and_the_tools() {
    // First request: a tool call; the tool hangs. Second agent: a stream that hangs.
    let server = ReplayServer::start(vec![
        paced(&tool_events(&[("toolu_1", "slow", r#"{}"#)]), Duration::from_millis(1)),
        Reply::Http {
            status: 200,
            headers: vec![("content-type".into(), "text/event-stream".into())],
            // message_start, content_block_start, one delta, then nothing.
            body: vec![BodyStep::Bytes(text_events(&["Hel"])[..3].concat().into_bytes()), BodyStep::Hang],
        },
    ])
    .expect("replay server");
    let started = Arc::new(AtomicBool::new(false));
    let cancelled = Arc::new(AtomicBool::new(false));
    let (s, c) = (started.clone(), cancelled.clone());
    let slow = Tool::new("slow", "Takes forever", json!({"type": "object"}), move |_| {
        s.store(true, Ordering::SeqCst);
        let was_cancelled = CancelToken::current().sleep(Duration::from_secs(30));
        c.store(was_cancelled, Ordering::SeqCst);
        Ok::<_, ToolError>("done")
    });
    let watch = Watch::default();
    let terminated = watch.terminated.clone();
    let client = client(&server);
    let agent = client.agent(scenarios::model()).tool(slow).callbacks(watch).start().expect("agent starts");
    let (_, events) = agent.subscribe().expect("subscribe");
    let second = agent.clone();
    agent.prompt("Go").expect("prompt");
    assert!(eventually(|| started.load(Ordering::SeqCst)), "the tool runs");
    drop(agent);
    assert_eq!(second.status().expect("a clone keeps it alive"), Status::Busy);
    assert!(!terminated.load(Ordering::SeqCst));
    drop(second);
    // The subscription ends without a turn: the agent stopped.
    let mut ended_with_turn = false;
    let mut events = events;
    for event in events.by_ref() {
        ended_with_turn |= matches!(event, AgentEvent::Turn { end: TurnEnd::Stop, .. });
    }
    assert!(!ended_with_turn);
    assert!(!events.lagged());
    assert!(terminated.load(Ordering::SeqCst), "terminate ran before the subscribers were let go");
    assert!(eventually(|| cancelled.load(Ordering::SeqCst)), "the tool run's token was tripped");

    // A request in flight is closed when the agent goes.
    let agent = client.agent(scenarios::model()).start().expect("agent starts");
    let (_, events) = agent.subscribe().expect("subscribe");
    agent.prompt("Hi").expect("prompt");
    for event in events {
        if matches!(event, AgentEvent::Stream(_)) {
            break;
        }
    }
    drop(agent);
    assert!(server.wait_for_disconnects(1, Duration::from_secs(5)), "the connection was closed");
}

#[test]
fn a_subscriber_that_falls_behind_is_dropped_and_told() {
    let words: Vec<String> = (0..50).map(|i| format!("w{i} ")).collect();
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    // One event per chunk, 3 ms apart: a reader that keeps up never has more than a few
    // queued (it would have to stall for ~100 ms to fall 32 behind).
    let server =
        ReplayServer::start(vec![paced(&text_events(&words), Duration::from_millis(3))]).expect("replay server");
    let agent = client(&server).agent(scenarios::model()).subscriber_capacity(32).start().expect("agent starts");
    let (_, slow) = agent.subscribe().expect("subscribe");
    let (_, mut reader) = agent.subscribe().expect("subscribe");
    agent.prompt("Count").expect("prompt");
    let mut seen = 0;
    for event in reader.by_ref() {
        seen += 1;
        if matches!(event, AgentEvent::Turn { .. }) {
            break;
        }
    }
    assert!(seen > 32, "the turn has more events than the capacity ({seen})");
    assert!(!reader.lagged(), "a reader that keeps up is not dropped");
    assert!(slow.lagged(), "the subscriber that never read was dropped");
    // It still gets what was queued before, then its iterator ends.
    assert_eq!(slow.count(), 32);
}

/// omni_conformance::async_agent::init_adds_a_tool_with_its_handler, through the blocking
/// handle: a tool registered with `handler` is not offered until `init` adds it; the model
/// then calls it and its handler runs.
#[test]
fn init_adds_a_registered_tool_with_its_handler() {
    let server = ReplayServer::start(omni_conformance::async_agent::init_tool_replies()).expect("replay server");
    let ran = Arc::new(AtomicBool::new(false));
    let flag = ran.clone();
    let secret = Tool::new("secret", "Keeps a secret.", json!({"type": "object"}), move |_| {
        flag.store(true, Ordering::SeqCst);
        Ok::<_, ToolError>("kept")
    });
    let agent = client(&server)
        .agent(scenarios::model())
        .handler(secret)
        .callbacks(omni_conformance::async_agent::OffersSecret)
        .start()
        .expect("agent starts");
    let offered: Vec<String> = agent.state().expect("state").tools.into_iter().map(|t| t.name).collect();
    assert_eq!(offered, ["secret"], "init offered the registered tool");
    let (_, events) = agent.subscribe().expect("subscribe");
    agent.prompt("Keep it.").expect("prompt accepted");
    let lines = lines_until_turn(events);
    assert!(lines.iter().any(|l| l == r#"tool_result toolu_1 "kept""#), "{lines:#?}");
    assert!(ran.load(Ordering::SeqCst), "the handler ran");
}

/// What each of an agent's requests carried (per-prompt options, `max_steps` with a
/// prompt, `handle_step`'s system prompt, `set_state` of model, tools and options, an event
/// hook's change in the reply), against the mock provider: the turns of
/// omni_conformance::agent_requests through the blocking handle, the same check.
#[test]
fn an_agents_requests_carry_its_prompts_steps_and_state() {
    use omni_conformance::agent_requests as script;
    let mock = script::mock();
    let client = Client::builder().provider(script::hooked_provider(&mock)).build().expect("client");
    let [lookup, search] = script::tool_specs().map(|(name, description, schema)| {
        Tool::new(name, description, schema, |_| Ok::<_, omni_blocking::ToolError>("found"))
    });
    let agent = client
        .agent(mock.model())
        .system(script::SYSTEM)
        .tool(lookup)
        .options(script::agent_options())
        .callbacks(script::StepSystem)
        .start()
        .expect("the agent starts");
    let (_, events) = agent.subscribe().expect("subscribe");
    let turn_ends = || loop {
        match events.recv_timeout(Duration::from_secs(10)) {
            Ok(omni_blocking::AgentEvent::Turn { .. }) => break,
            Ok(_) => {}
            Err(e) => panic!("the turn did not end: {e:?}"),
        }
    };
    agent.prompt_with(script::first_prompt()).expect("turn 1");
    turn_ends();
    agent.prompt_with(script::second_prompt()).expect("turn 2");
    turn_ends();
    let change = StateChange::new().model(script::second_model()).tools([search]).options(script::third_options());
    agent.set_state(change).expect("an idle agent takes the change");
    agent.prompt("third").expect("turn 3");
    turn_ends();
    assert_eq!(script::last_reply(&agent.messages().expect("history")), script::HOOKED_REPLY);
    script::check(&mock.requests()).unwrap_or_else(|failures| panic!("{failures}"));
}
