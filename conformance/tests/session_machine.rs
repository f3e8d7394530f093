//! The session machine driven by hand: a real agent whose requests are answered with
//! Anthropic Messages streams (the documented event shapes), and a store that is a list
//! of writes, answered as the test says. Kept out of `core/src` because the core reads no
//! clock, even in tests: each test reads it once.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

use std::time::Instant;

use omni_protocol::agent::{Agent, AgentConfig, AgentEvent, NoCallbacks, Status};
use omni_protocol::generate::{Effect, Report, RequestId};
use omni_protocol::session::{Claim, SessionId, SessionState, StoreError, StoreErrorKind, StoreWarning};
use omni_protocol::session::{NodeId, Tree};
use omni_protocol::session::{Session, SessionEffect, SessionError, SessionEvent, SessionInput, StoreOp, WriteId};
use omni_protocol::{Dialect, Message, Model, Provider};
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

/// The claim the tests' sessions write with.
fn claim() -> Claim {
    Claim::new(SessionId::new("test").unwrap(), 1, None)
}

/// A session resumed from `tree` and `state` over a fresh agent, owned.
fn resume(tree: Tree, state: SessionState, now: Instant) -> Session<NoCallbacks> {
    Session::resume(SessionId::new("test").unwrap(), Some(claim()), agent(now), tree, state, now).unwrap()
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
    /// The body of every request sent.
    bodies: Vec<serde_json::Value>,
}

impl Harness {
    fn new() -> Self {
        let now = Instant::now();
        let agent = agent(now);
        let id = SessionId::new("test").unwrap();
        let state = SessionState { title: Some("chat".into()), ..SessionState::default() };
        Self::with(Session::resume(id, Some(claim()), agent, Tree::new(), state, now).unwrap(), now)
    }

    fn with(session: Session<NoCallbacks>, now: Instant) -> Self {
        let mut harness = Self { session, now, lines: vec![], writes: vec![], requests: vec![], bodies: vec![] };
        harness.drain();
        harness
    }

    /// A session created, with one turn committed and saved.
    fn after_a_turn(prompt: &str, answer: &str) -> Self {
        let mut h = Self::new();
        h.store(Ok(()));
        h.input(SessionInput::Prompt(prompt.into())).unwrap();
        h.answer(200, &reply(answer));
        h.store(Ok(()));
        h
    }

    /// Events first, then effects: each line where the application would see it.
    fn drain(&mut self) {
        while let Some(event) = self.session.poll_event() {
            if let Some(line) = event_line(&event) {
                self.lines.push(line);
            }
        }
        while let Some(effect) = self.session.poll_effect() {
            match effect {
                SessionEffect::Agent(Effect::SendRequest { id, request }) => {
                    self.requests.push(id);
                    self.bodies.push(serde_json::from_slice(&request.body).unwrap());
                }
                SessionEffect::Agent(Effect::CancelRequest { id }) => self.requests.retain(|&r| r != id),
                SessionEffect::Agent(_) => {}
                SessionEffect::Store { write, op, .. } => {
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
        StoreOp::Append(nodes) => format!("append {:?}", nodes.iter().map(|n| n.id.0).collect::<Vec<_>>()),
        StoreOp::SaveState(state) => {
            format!("state path={:?}", state.position.path.iter().map(|n| n.0).collect::<Vec<_>>())
        }
        StoreOp::Renew => "renew".into(),
        StoreOp::Release => "release".into(),
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
    assert!(h.take_lines().is_empty(), "a session made in the store has nothing to write");
    h.input(SessionInput::Prompt("hi".into())).unwrap();
    h.answer(200, &reply("hello"));
    assert_eq!(h.take_lines(), ["turn 2 messages", "tree +[0, 1] path=[0, 1]", "write append [0, 1]"]);
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

// ---------------------------------------------------------------------------------------
// Issue 22: what is written is always a state a session resumes from; one writer.

/// The path of the state the store was last asked to save.
fn last_state_path(lines: &[String]) -> Option<String> {
    lines.iter().rev().find_map(|line| line.strip_prefix("write state path=").map(str::to_string))
}

#[test]
fn a_state_written_while_a_regenerate_streams_is_the_committed_path() {
    let mut h = Harness::after_a_turn("hi", "hello");
    h.take_lines();
    h.input(SessionInput::Regenerate(NodeId(0))).unwrap();
    assert_eq!(h.session.tree().path(), [NodeId(0)], "the live path stops at the user message");
    h.input(SessionInput::Title(Some("renamed".into()))).unwrap();
    assert_eq!(last_state_path(&h.take_lines()).as_deref(), Some("[0, 1]"), "not the cut path [0]");
    assert_eq!(h.session.state().position.path, [NodeId(0), NodeId(1)]);
    // The same for an edit, which moves the path to the assistant node it hangs under.
    h.store(Ok(()));
    h.answer(200, &reply("again"));
    h.store(Ok(()));
    h.input(SessionInput::Edit(None, "new root".into())).unwrap();
    h.input(SessionInput::Title(Some("again".into()))).unwrap();
    assert_eq!(last_state_path(&h.take_lines()).as_deref(), Some("[0, 2]"));
}

#[test]
fn the_last_turns_own_write_made_after_a_regenerate_began_is_the_committed_path() {
    let mut h = Harness::new();
    h.input(SessionInput::Prompt("hi".into())).unwrap();
    h.answer(200, &reply("hello"));
    // The turn's append is in flight when the regenerate begins: its state write follows
    // the append's answer, during the regenerate.
    h.input(SessionInput::Regenerate(NodeId(0))).unwrap();
    h.store(Ok(()));
    let lines = h.take_lines();
    assert_eq!(last_state_path(&lines).as_deref(), Some("[0, 1]"), "{lines:?}");
    // Killed here: the store holds [0, 1] with the committed path, which resumes.
    let (mut tree, state) = (h.session.tree().clone(), h.session.state());
    tree.restore(&state.position).unwrap();
    let resumed = resume(tree, state, h.now);
    assert_eq!(resumed.tree().path(), [NodeId(0), NodeId(1)]);
    assert!(resumed.repairs().is_empty());
}

/// The tree `u0 ─ a1 ─ u2 ─ a3` with the path and node count given.
fn four_nodes(path: &[u64]) -> (Tree, SessionState) {
    let mut tree = Tree::new();
    tree.append(
        vec![Message::user("u0"), Message::assistant("a1"), Message::user("u2"), Message::assistant("a3")],
        None,
    );
    let path: Vec<NodeId> = path.iter().copied().map(NodeId).collect();
    let mut position = tree.position();
    position.path = path;
    let state = SessionState { title: Some("chat".into()), position, nodes: 4, ..SessionState::default() };
    tree.restore(&state.position).unwrap();
    (tree, state)
}

#[test]
fn a_path_saved_inside_a_turn_is_repaired_on_resume_and_said() {
    let now = Instant::now();
    // Ending on a user message with a reply under it: on down to the reply last used.
    let (tree, state) = four_nodes(&[0, 1, 2]);
    let resumed = resume(tree, state, now);
    assert_eq!(resumed.tree().path(), [NodeId(0), NodeId(1), NodeId(2), NodeId(3)]);
    assert_eq!(
        resumed.repairs(),
        [StoreWarning::PathRepaired {
            saved: vec![NodeId(0), NodeId(1), NodeId(2)],
            now: resumed.tree().path().to_vec()
        }]
    );
    assert!(!resumed.is_saved(), "the repaired state is written");
    // A user node whose reply never reached the store (a batch torn between its nodes,
    // counted beyond the state): back to the last reply.
    let mut tree = Tree::new();
    tree.append(vec![Message::user("u0"), Message::assistant("a1")], None);
    let state = SessionState { position: tree.position(), nodes: 2, ..SessionState::default() };
    tree.append(vec![Message::user("u2")], None);
    tree.restore(&state.position).unwrap();
    let resumed = resume(tree, state, now);
    assert_eq!(resumed.tree().path(), [NodeId(0), NodeId(1)]);
    assert_eq!(resumed.agent().messages().len(), 2);
    assert_eq!(resumed.repairs().len(), 1);
    // A cut path whose branch leads down to a user message without a reply: back to
    // the last reply on the way, below the cut.
    let mut tree = Tree::new();
    tree.append(vec![Message::user("u0"), Message::assistant("a1"), Message::user("u2")], None);
    let mut state = SessionState { position: tree.position(), nodes: 3, ..SessionState::default() };
    state.position.path.truncate(1);
    tree.restore(&state.position).unwrap();
    let resumed = resume(tree, state, now);
    assert_eq!(resumed.tree().path(), [NodeId(0), NodeId(1)]);
    // Nothing but a user message: an empty path (the next prompt starts a new root).
    let mut tree = Tree::new();
    tree.append(vec![Message::user("alone")], None);
    let state = SessionState { position: tree.position(), nodes: 1, ..SessionState::default() };
    let resumed = resume(tree, state, now);
    assert!(resumed.tree().path().is_empty());
    assert_eq!(resumed.tree().len(), 1, "the node stays in the tree");
    // A path that is fine is left alone.
    let (tree, state) = four_nodes(&[0, 1]);
    let resumed = resume(tree, state, now);
    assert!(resumed.repairs().is_empty());
    assert!(resumed.is_saved());
}

#[test]
fn a_turn_ended_on_open_tool_calls_resumes_and_the_next_request_answers_them() {
    let now = Instant::now();
    let mut tree = Tree::new();
    let call = omni_protocol::ToolUse {
        invalid: None,
        id: "toolu_1".into(),
        name: "lookup".into(),
        input: json!({"q": "x"}),
        signature: None,
    };
    let calling = Message::new(omni_protocol::Role::Assistant, vec![omni_protocol::Block::ToolUse(call)]);
    tree.append(vec![Message::user("look it up"), calling], None);
    let state = SessionState { position: tree.position(), nodes: 2, ..SessionState::default() };
    let session = Session::resume(SessionId::new("test").unwrap(), Some(claim()), agent(now), tree, state, now)
        .expect("a saved step-cap turn loads");
    let mut h = Harness::with(session, now);
    h.input(SessionInput::Prompt("go on".into())).unwrap();
    let body = h.bodies.last().unwrap();
    let last = &body["messages"].as_array().unwrap().last().unwrap()["content"];
    assert_eq!(last[0]["type"], "tool_result", "{body}");
    assert_eq!(last[0]["tool_use_id"], "toolu_1");
    assert_eq!(last[0]["is_error"], true);
    assert_eq!(last[1]["text"], "go on");
}

#[test]
fn a_read_only_session_changes_nothing() {
    let now = Instant::now();
    let (tree, state) = four_nodes(&[0, 1]);
    let session = Session::resume(SessionId::new("test").unwrap(), None, agent(now), tree, state, now).unwrap();
    let mut h = Harness::with(session, now);
    for input in [
        SessionInput::Prompt("x".into()),
        SessionInput::Navigate(Some(NodeId(3))),
        SessionInput::Regenerate(NodeId(0)),
        SessionInput::Edit(None, "x".into()),
        SessionInput::Title(Some("x".into())),
    ] {
        assert_eq!(h.input(input), Err(SessionError::ReadOnly));
    }
    h.session.terminate(now);
    h.drain();
    assert!(h.take_lines().is_empty(), "no write, no release");
    assert!(h.session.claim().is_none());
}

#[test]
fn a_lost_claim_or_a_conflict_stops_the_writing_and_every_later_change_says_why() {
    for kind in [StoreErrorKind::NotOwner, StoreErrorKind::Conflict, StoreErrorKind::OwnedElsewhere] {
        let mut h = Harness::new();
        h.input(SessionInput::Prompt("hi".into())).unwrap();
        h.answer(200, &reply("hello"));
        let lost = StoreError::new(kind, "test", "another owner took the session");
        h.store(Err(lost.clone()));
        assert_eq!(h.session.lost(), Some(&lost));
        assert_eq!(h.input(SessionInput::Prompt("again".into())), Err(SessionError::NotOwner(lost.clone())));
        assert_eq!(h.input(SessionInput::Title(None)), Err(SessionError::NotOwner(lost.clone())));
        h.take_lines();
        h.session.terminate(h.now);
        h.drain();
        assert!(h.take_lines().iter().all(|line| !line.starts_with("write")), "{kind:?}: never written again");
        assert!(!h.session.is_saved());
    }
    // A failure that may pass (a full disk) is not final: the next change writes again.
    let mut h = Harness::new();
    h.input(SessionInput::Prompt("hi".into())).unwrap();
    h.answer(200, &reply("hello"));
    h.store(Err(StoreError::new(StoreErrorKind::Io, "test", "disk full")));
    assert!(h.session.lost().is_none());
    h.input(SessionInput::Title(Some("t".into()))).unwrap();
    assert!(h.take_lines().iter().any(|line| line == "write append [0, 1]"));
}

#[test]
fn stopping_writes_what_is_owed_then_releases_the_claim() {
    let mut h = Harness::new();
    h.input(SessionInput::Prompt("hi".into())).unwrap();
    h.answer(200, &reply("hello"));
    h.session.terminate(h.now);
    h.drain();
    h.store(Ok(()));
    let lines = h.take_lines();
    let writes: Vec<&String> = lines.iter().filter(|line| line.starts_with("write")).collect();
    assert_eq!(writes, ["write append [0, 1]", "write state path=[0, 1]", "write release"], "{lines:?}");
    assert!(h.session.is_saved());
    assert!(h.session.is_released());
    // A write that fails while stopping does not hold the release back.
    let mut h = Harness::new();
    h.input(SessionInput::Prompt("hi".into())).unwrap();
    h.answer(200, &reply("hello"));
    h.session.terminate(h.now);
    h.drain();
    h.store(Err(StoreError::new(StoreErrorKind::Io, "test", "disk full")));
    h.store(Ok(()));
    assert!(h.session.is_released());
}

#[test]
fn a_lease_is_renewed_at_a_third_of_its_length_and_sooner_after_a_failure() {
    use std::time::Duration;
    let now = Instant::now();
    let lease = Duration::from_secs(30);
    let claim = Claim::new(SessionId::new("test").unwrap(), 7, Some(lease));
    let state = SessionState::default();
    let session =
        Session::resume(SessionId::new("test").unwrap(), Some(claim), agent(now), Tree::new(), state, now).unwrap();
    let mut h = Harness::with(session, now);
    let (at, timer) = h.session.poll_timeout().expect("a renewal deadline");
    assert_eq!((at, timer), (now + Duration::from_secs(10), omni_protocol::machine::Timer::LeaseRenewal));
    h.now = at;
    h.session.handle_timeout(at);
    h.drain();
    assert_eq!(h.take_lines(), ["write renew"]);
    assert_eq!(h.session.poll_timeout(), None, "none while the renewal is in flight");
    h.store(Ok(()));
    assert_eq!(h.session.poll_timeout().map(|t| t.0), Some(at + Duration::from_secs(10)));
    let at = at + Duration::from_secs(10);
    h.now = at;
    h.session.handle_timeout(at);
    h.drain();
    h.store(Err(StoreError::new(StoreErrorKind::Io, "test", "connection reset")));
    assert_eq!(h.session.poll_timeout().map(|t| t.0), Some(at + Duration::from_secs(3)), "tried again soon");
    // A renewal refused for good: the session stops writing, and has no deadline left.
    let at = at + Duration::from_secs(3);
    h.now = at;
    h.session.handle_timeout(at);
    h.drain();
    h.store(Err(StoreError::new(StoreErrorKind::NotOwner, "test", "the lease lapsed")));
    assert_eq!(h.session.poll_timeout(), None);
    assert!(matches!(h.input(SessionInput::Prompt("x".into())), Err(SessionError::NotOwner(_))));
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(300))]

    /// Anything a store can hold loads (issue 22): any tree (any roles, user messages
    /// carrying tool results, assistant messages with open calls), any path from a root
    /// saved with it, any node count, resumes without a refusal onto a path a turn can
    /// start from, and says so when it moved the path.
    #[test]
    fn whatever_a_store_holds_resumes(
        shape in proptest::collection::vec((0u8..4, 0usize..1000), 1..40),
        pick in 0usize..1000,
        cut in 0usize..40,
        counted in 0usize..50,
    ) {
        let now = Instant::now();
        let mut tree = Tree::new();
        for (i, (kind, parent)) in shape.iter().enumerate() {
            let parent = (i > 0 && parent % 5 != 0).then(|| NodeId((parent % i) as u64));
            let message = match kind {
                0 => Message::user(format!("u{i}")),
                1 => Message::assistant(format!("a{i}")),
                2 => {
                    let call = omni_protocol::ToolUse { invalid: None, id: format!("c{i}"), name: "t".into(), input: json!({}), signature: None };
                    Message::new(omni_protocol::Role::Assistant, vec![omni_protocol::Block::ToolUse(call)])
                }
                _ => Message::new(
                    omni_protocol::Role::User,
                    vec![omni_protocol::Block::ToolResult(omni_protocol::ToolResult::error(format!("c{i}"), "t", "no"))],
                ),
            };
            tree.add(parent, message, None).unwrap();
        }
        let target = NodeId((pick % tree.len()) as u64);
        let mut path = tree.path_to(target).unwrap();
        path.truncate(path.len().min(cut.max(1)));
        let mut position = tree.position();
        position.path = path.clone();
        tree.restore(&position).unwrap();
        let state = SessionState { position, nodes: counted as u64, ..SessionState::default() };
        let session = Session::resume(SessionId::new("p").unwrap(), Some(claim()), agent(now), tree, state, now);
        let session = session.expect("never refused");
        let tree = session.tree();
        let head = tree.head().and_then(|head| tree.message(head));
        proptest::prop_assert!(head.is_none_or(|m| m.role == omni_protocol::Role::Assistant), "a path a turn starts from");
        proptest::prop_assert_eq!(session.agent().messages(), tree.messages());
        let behind = tree.len() as u64 > counted as u64;
        if !behind && tree.path() != path.as_slice() {
            proptest::prop_assert!(!session.repairs().is_empty(), "a moved path is reported");
        }
    }
}
