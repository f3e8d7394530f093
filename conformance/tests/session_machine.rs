//! The session machine driven by hand: a real agent whose requests are answered with
//! Anthropic Messages streams (the documented event shapes), and a store that is a list
//! of writes, answered as the test says. Kept out of `core/src` because the core reads no
//! clock, even in tests: each test reads it once.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

use std::time::Instant;

use omni_core::machines::agent::{Agent, AgentConfig, AgentEvent, NoCallbacks, Status};
use omni_core::machines::generate::{Effect, Report, RequestId};
use omni_core::machines::session::machine::{
    Session, SessionEffect, SessionError, SessionEvent, SessionInput, StoreOp, WriteId,
};
use omni_core::machines::session::store::{SessionId, SessionState, StoreError, StoreErrorKind};
use omni_core::machines::session::tree::{NodeId, Tree};
use omni_core::{Dialect, Message, Model, Provider};
use serde_json::json;

fn sse(event: &str, data: serde_json::Value) -> String {
    format!("event: {event}\ndata: {data}\n\n")
}

/// A whole streamed reply of `text`.
fn reply(text: &str) -> Vec<u8> {
    let start = json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant",
        "model": "claude-sonnet-4-5", "content": [], "stop_reason": null, "usage": {"input_tokens": 5, "output_tokens": 1}}});
    let mut body = sse("message_start", start);
    body += &sse(
        "content_block_start",
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
    );
    body += &sse(
        "content_block_delta",
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}),
    );
    body += &sse("content_block_stop", json!({"type": "content_block_stop", "index": 0}));
    body += &sse(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}}),
    );
    body += &sse("message_stop", json!({"type": "message_stop"}));
    body.into_bytes()
}

/// An agent answered by [`Harness::answer`] (its requests go nowhere).
fn agent(now: Instant) -> Agent<NoCallbacks> {
    let model = Model::new("anthropic", "claude-sonnet-4-5", Dialect::AnthropicMessages);
    let provider = Provider::openai_compatible("anthropic", "http://127.0.0.1:9", None);
    Agent::new(AgentConfig::new(model, provider), NoCallbacks, now).unwrap()
}

/// A session resumed from `tree` and `state` over a fresh agent.
fn resume(tree: Tree, state: SessionState, now: Instant) -> Session<NoCallbacks> {
    Session::resume(SessionId::new("test").unwrap(), agent(now), tree, state, now).unwrap()
}

struct Harness {
    session: Session<NoCallbacks>,
    now: Instant,
    /// Every event, as a line.
    lines: Vec<String>,
    /// Writes not yet answered.
    writes: Vec<(WriteId, StoreOp)>,
    /// Requests sent, not yet answered.
    requests: Vec<RequestId>,
}

impl Harness {
    fn new() -> Self {
        let now = Instant::now();
        let agent = agent(now);
        let id = SessionId::new("test").unwrap();
        let state = SessionState { title: Some("chat".into()), ..SessionState::default() };
        let mut harness =
            Self { session: Session::create(id, agent, state), now, lines: vec![], writes: vec![], requests: vec![] };
        harness.drain();
        harness
    }

    /// Events first, then effects: each line where the application would see it.
    /// A session created, with one turn committed and saved.
    fn after_a_turn(prompt: &str, answer: &str) -> Self {
        let mut h = Self::new();
        h.store(Ok(()));
        h.input(SessionInput::Prompt(prompt.into())).unwrap();
        h.answer(200, &reply(answer));
        h.store(Ok(()));
        h
    }

    fn drain(&mut self) {
        while let Some(event) = self.session.poll_event() {
            if let Some(line) = event_line(&event) {
                self.lines.push(line);
            }
        }
        while let Some(effect) = self.session.poll_effect() {
            match effect {
                SessionEffect::Agent(Effect::SendRequest { id, .. }) => self.requests.push(id),
                SessionEffect::Agent(Effect::CancelRequest { id }) => self.requests.retain(|&r| r != id),
                SessionEffect::Agent(_) => {}
                SessionEffect::Store { write, op } => {
                    self.lines.push(format!("write {}", op_line(&op)));
                    self.writes.push((write, op));
                }
            }
        }
    }

    fn input(&mut self, input: SessionInput<'_>) -> Result<(), SessionError> {
        let result = self.session.handle_input(input, self.now);
        self.drain();
        result
    }

    /// Answers the oldest request with `body` (status 200) or an error page.
    fn answer(&mut self, status: u16, body: &[u8]) {
        let id = self.requests.remove(0);
        let headers = vec![("content-type".to_string(), "text/event-stream".to_string())];
        self.input(SessionInput::Report(Report::ResponseHead { id, status, headers })).unwrap();
        self.input(SessionInput::Report(Report::Body { id, bytes: body })).unwrap();
        self.input(SessionInput::Report(Report::BodyEnd { id })).unwrap();
    }

    /// Answers every write in flight (one at a time, as they come) with `result`.
    fn store(&mut self, result: Result<(), StoreError>) {
        while !self.writes.is_empty() {
            let (write, _) = self.writes.remove(0);
            self.input(SessionInput::Stored { write, result: result.clone() }).unwrap();
            if result.is_err() {
                break;
            }
        }
    }

    fn texts(&self) -> Vec<String> {
        self.session.tree().messages().iter().map(Message::text).collect()
    }

    fn take_lines(&mut self) -> Vec<String> {
        std::mem::take(&mut self.lines)
    }
}

fn op_line(op: &StoreOp) -> String {
    match op {
        StoreOp::Create(state) => format!("create path={:?}", state.position.path),
        StoreOp::Append(nodes) => format!("append {:?}", nodes.iter().map(|n| n.id.0).collect::<Vec<_>>()),
        StoreOp::SaveState(state) => {
            format!("state path={:?}", state.position.path.iter().map(|n| n.0).collect::<Vec<_>>())
        }
    }
}

/// The lines a session adds to the agent's: turn ends, rollbacks, tree, title, store.
fn event_line(event: &SessionEvent) -> Option<String> {
    Some(match event {
        SessionEvent::Agent(AgentEvent::Turn { messages, .. }) => format!("turn {} messages", messages.len()),
        SessionEvent::Agent(AgentEvent::Cancelled(_)) => "cancelled".into(),
        SessionEvent::Agent(AgentEvent::Error(_)) => "error".into(),
        SessionEvent::Agent(_) => return None,
        SessionEvent::Tree { added, path } => format!(
            "tree +{:?} path={:?}",
            added.iter().map(|n| n.id.0).collect::<Vec<_>>(),
            path.iter().map(|n| n.0).collect::<Vec<_>>()
        ),
        SessionEvent::Title(title) => format!("title {title:?}"),
        SessionEvent::Store { written, result } => {
            format!("store {written:?} {}", if result.is_ok() { "saved" } else { "failed" })
        }
    })
}

#[test]
fn a_turn_commits_to_the_tree_then_the_store_in_that_order() {
    let mut h = Harness::new();
    assert_eq!(h.take_lines(), ["write create path=[]"]);
    h.store(Ok(()));
    h.input(SessionInput::Prompt("hi".into())).unwrap();
    h.answer(200, &reply("hello"));
    assert_eq!(
        h.take_lines(),
        ["store Session saved", "turn 2 messages", "tree +[0, 1] path=[0, 1]", "write append [0, 1]"]
    );
    h.store(Ok(()));
    assert_eq!(h.take_lines(), ["store Nodes(2) saved", "write state path=[0, 1]", "store State saved"]);
    assert!(h.session.is_saved());
    assert_eq!(h.texts(), ["hi", "hello"]);
}

#[test]
fn regenerating_twice_and_navigating_between_the_three_replies() {
    let mut h = Harness::new();
    h.store(Ok(()));
    h.input(SessionInput::Prompt("hi".into())).unwrap();
    h.answer(200, &reply("one"));
    for text in ["two", "three"] {
        h.input(SessionInput::Regenerate(NodeId(0))).unwrap();
        h.answer(200, &reply(text));
    }
    h.store(Ok(()));
    assert_eq!(h.session.tree().len(), 4, "one user node, three replies");
    assert_eq!(h.session.tree().children(NodeId(0)), [NodeId(1), NodeId(2), NodeId(3)]);
    assert_eq!(h.texts(), ["hi", "three"]);
    h.input(SessionInput::Navigate(Some(NodeId(1)))).unwrap();
    assert_eq!(h.texts(), ["hi", "one"]);
    assert_eq!(h.session.agent().messages().len(), 2, "the agent's history follows the path");
    h.input(SessionInput::Navigate(Some(NodeId(2)))).unwrap();
    assert_eq!(h.texts(), ["hi", "two"]);
    h.store(Ok(()));
    assert!(h.session.is_saved());
}

#[test]
fn editing_makes_a_branch_and_a_new_root() {
    let mut h = Harness::new();
    h.store(Ok(()));
    h.input(SessionInput::Prompt("hi".into())).unwrap();
    h.answer(200, &reply("hello"));
    h.input(SessionInput::Edit(Some(NodeId(1)), "tell me more".into())).unwrap();
    h.answer(200, &reply("more"));
    assert_eq!(h.texts(), ["hi", "hello", "tell me more", "more"]);
    h.input(SessionInput::Edit(None, "new topic".into())).unwrap();
    h.answer(200, &reply("sure"));
    assert_eq!(h.texts(), ["new topic", "sure"]);
    assert_eq!(h.session.tree().roots(), [NodeId(0), NodeId(4)]);
    assert_eq!(
        h.input(SessionInput::Edit(Some(NodeId(0)), "x".into())),
        Err(SessionError::NotAnAssistantNode(NodeId(0)))
    );
    assert_eq!(h.input(SessionInput::Regenerate(NodeId(1))), Err(SessionError::NotAUserNode(NodeId(1))));
    assert_eq!(h.input(SessionInput::Regenerate(NodeId(40))), Err(SessionError::NotFound(NodeId(40))));
}

#[test]
fn a_cancelled_or_failed_regenerate_rolls_the_tree_and_history_back() {
    let mut h = Harness::after_a_turn("hi", "hello");
    h.input(SessionInput::Regenerate(NodeId(0))).unwrap();
    assert_eq!(h.input(SessionInput::Navigate(None)), Err(SessionError::Busy), "idle only");
    h.input(SessionInput::Cancel).unwrap();
    assert_eq!(h.texts(), ["hi", "hello"], "back where it was");
    assert_eq!(h.session.agent().messages().len(), 2);
    assert_eq!(h.session.tree().len(), 2, "nothing joined the tree");
    h.input(SessionInput::Regenerate(NodeId(0))).unwrap();
    let error = json!({"type": "error", "error": {"type": "invalid_request_error", "message": "no"}}).to_string();
    h.answer(400, error.as_bytes());
    assert!(h.take_lines().contains(&"error".to_string()));
    assert_eq!(h.texts(), ["hi", "hello"]);
    assert_eq!(h.session.tree().len(), 2);
}

#[test]
fn a_failing_store_is_reported_and_the_next_write_carries_everything_unsaved() {
    let mut h = Harness::new();
    h.store(Ok(()));
    h.input(SessionInput::Prompt("one".into())).unwrap();
    h.answer(200, &reply("1"));
    let refused = StoreError::new(StoreErrorKind::Io, "test", "disk full");
    h.store(Err(refused.clone()));
    h.input(SessionInput::Prompt("two".into())).unwrap();
    h.answer(200, &reply("2"));
    let lines = h.take_lines();
    assert!(lines.contains(&"store Nodes(2) failed".to_string()));
    assert_eq!(h.texts(), ["one", "1", "two", "2"], "the session goes on");
    // The next change (this commit) writes every node still unsaved, in one append.
    assert_eq!(lines.last().map(String::as_str), Some("write append [0, 1, 2, 3]"));
    assert!(!h.session.is_saved());
    h.store(Ok(()));
    assert!(h.session.is_saved());
    // A failed state write is carried by the next change too.
    h.input(SessionInput::Title(Some("renamed".into()))).unwrap();
    h.store(Err(refused));
    h.input(SessionInput::Navigate(Some(NodeId(1)))).unwrap();
    h.store(Ok(()));
    assert!(h.session.is_saved());
    assert_eq!(h.session.title(), Some("renamed"));
    assert_eq!(
        h.input(SessionInput::Stored { write: WriteId(99), result: Ok(()) }),
        Err(SessionError::UnknownWrite(WriteId(99)))
    );
}

#[test]
fn a_resumed_session_gives_the_agent_its_path() {
    let h = Harness::after_a_turn("hi", "hello");
    let (tree, state) = (h.session.tree().clone(), h.session.state());
    let resumed = resume(tree.clone(), state, h.now);
    assert_eq!(resumed.agent().messages(), tree.messages());
    assert!(resumed.is_saved());
    assert_eq!(resumed.title(), Some("chat"));
}

#[test]
fn a_resumed_session_whose_state_lags_its_nodes_takes_the_last_turn_onto_its_path() {
    let mut h = Harness::after_a_turn("one", "1");
    let saved = h.session.state();
    // The next turn's nodes reach the store, then the process stops before the state does.
    h.input(SessionInput::Prompt("two".into())).unwrap();
    h.answer(200, &reply("2"));
    let mut tree = h.session.tree().clone();
    tree.restore(&saved.position).unwrap();
    let mut resumed = resume(tree, saved, h.now);
    let texts: Vec<String> = resumed.tree().messages().iter().map(Message::text).collect();
    assert_eq!(texts, ["one", "1", "two", "2"]);
    assert_eq!(resumed.agent().messages().len(), 4);
    let write = resumed.poll_effect();
    assert!(matches!(write, Some(SessionEffect::Store { op: StoreOp::SaveState(_), .. })), "{write:?}");
}

#[test]
fn resuming_tells_a_lost_state_write_from_a_path_cleared_on_purpose() {
    let mut h = Harness::new();
    h.store(Ok(()));
    let created = h.session.state();
    h.input(SessionInput::Prompt("first".into())).unwrap();
    h.answer(200, &reply("turn"));
    // The first turn's nodes were written, its state not: the path the creation saved is
    // empty, and the turn goes onto it.
    let mut tree = h.session.tree().clone();
    tree.restore(&created.position).unwrap();
    let resumed = resume(tree, created, h.now);
    assert_eq!(resumed.tree().path(), [NodeId(0), NodeId(1)]);
    // A path cleared and saved stays cleared: the next prompt starts a new root.
    h.store(Ok(()));
    h.input(SessionInput::Navigate(None)).unwrap();
    h.store(Ok(()));
    let cleared = h.session.state();
    let mut tree = h.session.tree().clone();
    tree.restore(&cleared.position).unwrap();
    let resumed = resume(tree, cleared, h.now);
    assert!(resumed.tree().path().is_empty());
    assert!(resumed.is_saved());
}

#[test]
fn a_snapshot_is_everything_before_the_next_event() {
    let mut h = Harness::after_a_turn("hi", "hello");
    h.input(SessionInput::Prompt("and then".into())).unwrap();
    let snapshot = h.session.snapshot();
    assert_eq!(snapshot.tree.messages().len(), 2, "the committed path");
    assert_eq!(snapshot.agent.status, Status::Busy);
    assert_eq!(snapshot.agent.committed.len(), 2);
    assert_eq!(snapshot.agent.pending.len(), 1, "the prompt of the turn in flight");
    assert_eq!(snapshot.title.as_deref(), Some("chat"));
    // What follows is the turn's commit: the snapshot's tree plus its nodes is the tree.
    h.answer(200, &reply("more"));
    assert_eq!(h.session.tree().len(), snapshot.tree.len() + 2);
}
