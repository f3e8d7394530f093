//! The session scenarios every driver must pass, defined once: the simulation runs them
//! on a virtual clock with a store in memory (`tests/session_sim.rs`), each driver against
//! the replay server with the file store and the SQLite store, and all must produce
//! `conformance/transcripts/session/<name>.txt`.
//!
//! A scenario is a list of [`Step`]s. [`run_session_scenario`] performs each one through
//! a [`SessionDriver`] and records what the application sees until the step has settled:
//! a turn's end (`turn`, `cancelled` or `error`), the tree's change, and the store's
//! writes up to the state map's (or the first failed write). Streaming events are left
//! out: the agent's own scenarios check those.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use omni_protocol::agent::AgentEvent;
use omni_protocol::session::{Claim, Loaded, SessionId, SessionList, SessionState, Store, StoreError, StoreErrorKind};
use omni_protocol::session::{Node, NodeId, Tree};
use omni_protocol::session::{SessionEvent, SessionSnapshot, Written};
use omni_protocol::StreamEvent;

use crate::agent_sim::{message_line, transcript_line};
use crate::scenarios::{paced, text_events};
use crate::sim::Reply;

/// What a scenario does next.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// `prompt(text)`.
    Prompt(&'static str),
    /// `regenerate(node)`.
    Regenerate(u64),
    /// `regenerate(node)`, cancelled at the reply's first text delta.
    RegenerateCancelled(u64),
    /// `navigate(node)`.
    Navigate(Option<u64>),
    /// `edit(parent, text)`.
    Edit(Option<u64>, &'static str),
    /// `set_title(title)`.
    Title(Option<&'static str>),
    /// The store refuses every write from now on (`true`) or takes them again.
    StoreFails(bool),
    /// The application stops and starts again: the session is loaded back from its store.
    Reload,
}

impl Step {
    fn line(&self) -> String {
        match self {
            Self::Prompt(text) => format!("> prompt {text:?}"),
            Self::Regenerate(id) => format!("> regenerate {id}"),
            Self::RegenerateCancelled(id) => format!("> regenerate {id}, cancelled at its first delta"),
            Self::Navigate(Some(id)) => format!("> navigate {id}"),
            Self::Navigate(None) => "> navigate none".into(),
            Self::Edit(Some(id), text) => format!("> edit under {id}: {text:?}"),
            Self::Edit(None, text) => format!("> edit as a new root: {text:?}"),
            Self::Title(title) => format!("> title {title:?}"),
            Self::StoreFails(true) => "> the store starts failing".into(),
            Self::StoreFails(false) => "> the store works again".into(),
            Self::Reload => "> reload".into(),
        }
    }

    /// Whether the step starts a turn.
    fn starts_a_turn(&self) -> bool {
        matches!(self, Self::Prompt(_) | Self::Regenerate(_) | Self::RegenerateCancelled(_) | Self::Edit(..))
    }
}

/// What a driver is asked to do to its session.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// `prompt(text)`.
    Prompt(String),
    /// `regenerate(node)`.
    Regenerate(NodeId),
    /// `navigate(node)`.
    Navigate(Option<NodeId>),
    /// `edit(parent, text)`.
    Edit(Option<NodeId>, String),
    /// `set_title(title)`.
    Title(Option<String>),
    /// `cancel()`.
    Cancel,
}

/// A session as a scenario drives it: through a driver's handle, or the simulation.
pub trait SessionDriver {
    /// Performs `action`; `Err` with the refusal's text.
    fn act(&mut self, action: Action) -> Result<(), String>;
    /// The next event, waiting at most `limit`.
    fn next_event(&mut self, limit: Duration) -> Option<SessionEvent>;
    /// Stops the session (once the store holds what it committed) and loads it back from
    /// the same store: the loaded session's snapshot and state map.
    fn reload(&mut self) -> Result<(SessionSnapshot, SessionState), String>;
}

/// One session scenario.
#[derive(Debug, Clone)]
pub struct SessionScenario {
    /// Short name; also the transcript's file name.
    pub name: &'static str,
    /// The provider's replies, one per turn, in order.
    pub replies: Vec<Reply>,
    /// What the application does.
    pub steps: Vec<Step>,
}

/// The title every scenario's session is created with.
pub const TITLE: &str = "chat";

/// Longest a driver waits for the next event of a step before the scenario fails.
pub const STEP_LIMIT: Duration = Duration::from_secs(20);

/// Gap between a reply's events; a cancelled reply's is [`HOLD`].
const GAP: Duration = Duration::from_millis(5);

/// Gap in the reply a step cancels at its first delta: time enough for the cancel to
/// come before the next event, however slow the machine.
pub const HOLD: Duration = Duration::from_millis(400);

fn reply(words: &[&str]) -> Reply {
    paced(&text_events(words), GAP)
}

fn slow_reply(words: &[&str]) -> Reply {
    paced(&text_events(words), HOLD)
}

fn bad_request() -> Reply {
    let body = r#"{"type":"error","error":{"type":"invalid_request_error","message":"messages: too long"}}"#;
    Reply::error(400, &[("content-type", "application/json")], body)
}

/// Every scenario.
pub fn all() -> Vec<SessionScenario> {
    use Step::*;
    vec![
        SessionScenario {
            name: "chat_turn",
            replies: vec![reply(&["Hello", " there."]), reply(&["Fine,", " thanks."])],
            steps: vec![Prompt("Hi"), Prompt("How are you?"), Reload],
        },
        SessionScenario {
            name: "regenerate_and_navigate",
            replies: vec![reply(&["First."]), reply(&["Second."]), reply(&["Third."])],
            steps: vec![
                Prompt("Tell me a fact"),
                Regenerate(0),
                Regenerate(0),
                Navigate(Some(1)),
                Navigate(Some(2)),
                Navigate(Some(3)),
                Navigate(Some(2)),
                Reload,
            ],
        },
        SessionScenario {
            name: "edit_into_a_branch",
            replies: vec![reply(&["Hello."]), reply(&["A story."]), reply(&["A joke."])],
            steps: vec![
                Prompt("Hi"),
                Prompt("Tell me a story"),
                Regenerate(1),
                Edit(Some(0), "x"),
                Navigate(Some(99)),
                Edit(Some(1), "Tell me a joke instead"),
                Navigate(Some(2)),
                Reload,
            ],
        },
        SessionScenario {
            name: "new_roots",
            replies: vec![reply(&["Hello."]), reply(&["Starting over."]), reply(&["Third root."])],
            steps: vec![
                Prompt("Hi"),
                Edit(None, "Start over"),
                Navigate(None),
                Prompt("Again"),
                Navigate(Some(0)),
                Reload,
            ],
        },
        SessionScenario {
            name: "cancelled_regenerate_rolls_back",
            replies: vec![reply(&["Kept."]), slow_reply(&["Never", " kept."]), reply(&["Kept too."])],
            steps: vec![Prompt("Hi"), RegenerateCancelled(0), Prompt("Still here?"), Reload],
        },
        SessionScenario {
            name: "failed_regenerate_rolls_back",
            replies: vec![reply(&["Kept."]), bad_request(), reply(&["Later."])],
            steps: vec![Prompt("Hi"), Regenerate(0), Regenerate(0), Reload],
        },
        SessionScenario {
            name: "failing_store",
            replies: vec![reply(&["Saved."]), reply(&["Not saved yet."]), reply(&["Saved too."])],
            steps: vec![
                Prompt("One"),
                StoreFails(true),
                Prompt("Two"),
                Title(Some("renamed")),
                StoreFails(false),
                Prompt("Three"),
                Reload,
            ],
        },
        SessionScenario {
            name: "title_and_reload",
            replies: vec![reply(&["Hello."]), reply(&["Again."])],
            steps: vec![
                Prompt("Hi"),
                Title(Some("greetings")),
                Regenerate(0),
                Navigate(Some(1)),
                Reload,
                Title(None),
                Reload,
            ],
        },
    ]
}

/// Runs `scenario` through `driver` (whose store fails while `failing` is set) and
/// returns its transcript.
pub fn run_session_scenario(
    scenario: &SessionScenario,
    driver: &mut dyn SessionDriver,
    failing: &AtomicBool,
) -> Result<Vec<String>, String> {
    let mut lines = Vec::new();
    for step in &scenario.steps {
        lines.push(step.line());
        let action = match step {
            Step::StoreFails(fails) => {
                failing.store(*fails, Ordering::SeqCst);
                continue;
            }
            Step::Reload => {
                let (snapshot, state) = driver.reload()?;
                lines.push(loaded_line(&snapshot, &state));
                continue;
            }
            Step::Prompt(text) => Action::Prompt(text.to_string()),
            Step::Regenerate(id) | Step::RegenerateCancelled(id) => Action::Regenerate(NodeId(*id)),
            Step::Navigate(id) => Action::Navigate(id.map(NodeId)),
            Step::Edit(parent, text) => Action::Edit(parent.map(NodeId), text.to_string()),
            Step::Title(title) => Action::Title(title.map(str::to_string)),
        };
        if let Err(refused) = driver.act(action) {
            lines.push(format!("refused: {refused}"));
            continue;
        }
        settle(step, driver, &mut lines).map_err(|e| format!("{}: {e} after {:?}", scenario.name, lines))?;
    }
    Ok(lines)
}

/// Records the step's events until it has settled.
fn settle(step: &Step, driver: &mut dyn SessionDriver, lines: &mut Vec<String>) -> Result<(), String> {
    let mut turn_over = !step.starts_a_turn();
    let mut cancel_pending = matches!(step, Step::RegenerateCancelled(_));
    loop {
        let event = driver.next_event(STEP_LIMIT).ok_or("no event in time")?;
        if cancel_pending && matches!(event, SessionEvent::Agent(AgentEvent::Stream(StreamEvent::TextDelta { .. }))) {
            cancel_pending = false;
            driver.act(Action::Cancel).map_err(|e| format!("cancel refused: {e}"))?;
        }
        let Some(line) = event_line(&event) else { continue };
        lines.push(line);
        match event {
            SessionEvent::Agent(AgentEvent::Turn { .. } | AgentEvent::Cancelled(_) | AgentEvent::Error(_)) => {
                turn_over = true
            }
            SessionEvent::Store { written: Written::State, result: Ok(()) } if turn_over => return Ok(()),
            SessionEvent::Store { result: Err(_), .. } if turn_over => return Ok(()),
            _ => {}
        }
    }
}

/// The transcript line of an event, or `None` for those left out (streaming, status,
/// messages and steps: the agent's scenarios check them).
pub fn event_line(event: &SessionEvent) -> Option<String> {
    match event {
        SessionEvent::Agent(agent @ (AgentEvent::Turn { .. } | AgentEvent::Cancelled(_) | AgentEvent::Error(_))) => {
            Some(transcript_line(agent))
        }
        SessionEvent::Agent(_) => None,
        SessionEvent::Tree { added, path } => Some(format!("tree +[{}] path={}", nodes_line(added), path_line(path))),
        SessionEvent::Title(title) => Some(format!("title {title:?}")),
        SessionEvent::Store { written, result } => Some(format!(
            "store {} {}",
            match written {
                Written::Nodes(n) => format!("nodes({n})"),
                Written::State => "state".to_string(),
                Written::Renewed => "lease".to_string(),
                Written::Released => "claim".to_string(),
            },
            match result {
                Ok(()) => "saved".to_string(),
                Err(e) => format!("failed ({:?})", e.kind),
            }
        )),
    }
}

fn nodes_line(nodes: &[Node]) -> String {
    let parts: Vec<String> = nodes
        .iter()
        .map(|n| match n.parent {
            Some(parent) => format!("{}<{} {}", n.id, parent, message_line(&n.message)),
            None => format!("{} {}", n.id, message_line(&n.message)),
        })
        .collect();
    parts.join(", ")
}

fn path_line(path: &[NodeId]) -> String {
    if path.is_empty() {
        return "-".into();
    }
    path.iter().map(ToString::to_string).collect::<Vec<_>>().join("/")
}

/// What a reload gave: the path with its messages, the title, the model, the tree's size.
pub fn loaded_line(snapshot: &SessionSnapshot, state: &SessionState) -> String {
    let tree: &Tree = &snapshot.tree;
    let history: Vec<String> = snapshot.agent.committed.iter().map(message_line).collect();
    format!(
        "loaded nodes={} path={} title={:?} model={} history=[{}]",
        tree.len(),
        path_line(tree.path()),
        snapshot.title,
        state.model.as_deref().unwrap_or("-"),
        history.join(", ")
    )
}

/// A store that refuses every write while its flag is set (a full disk, a database gone
/// read-only), and otherwise hands on to the real one. Reads always go through.
#[derive(Clone)]
pub struct FlakyStore {
    inner: Arc<dyn Store>,
    failing: Arc<AtomicBool>,
}

impl std::fmt::Debug for FlakyStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlakyStore").field("failing", &self.failing.load(Ordering::SeqCst)).finish_non_exhaustive()
    }
}

impl FlakyStore {
    /// `inner`, failing while `failing` is set.
    pub fn new(inner: Arc<dyn Store>, failing: Arc<AtomicBool>) -> Self {
        Self { inner, failing }
    }

    fn write<T>(&self, id: &SessionId, write: impl FnOnce() -> Result<T, StoreError>) -> Result<T, StoreError> {
        if self.failing.load(Ordering::SeqCst) {
            return Err(StoreError::new(StoreErrorKind::Io, id.as_str(), "no space left on device (scripted)"));
        }
        write()
    }
}

impl Store for FlakyStore {
    fn create(&self, id: &SessionId, state: &SessionState) -> Result<Claim, StoreError> {
        self.write(id, || self.inner.create(id, state))
    }
    // Ownership is not writing: it goes through, so a failing store keeps its owner.
    fn claim(&self, id: &SessionId) -> Result<Claim, StoreError> {
        self.inner.claim(id)
    }
    fn renew(&self, claim: &Claim) -> Result<(), StoreError> {
        self.inner.renew(claim)
    }
    fn release(&self, claim: &Claim) -> Result<(), StoreError> {
        self.inner.release(claim)
    }
    fn append_nodes(&self, claim: &Claim, nodes: &[Node]) -> Result<(), StoreError> {
        self.write(claim.session(), || self.inner.append_nodes(claim, nodes))
    }
    fn save_tree(&self, claim: &Claim, tree: &Tree) -> Result<(), StoreError> {
        self.write(claim.session(), || self.inner.save_tree(claim, tree))
    }
    fn save_state(&self, claim: &Claim, state: &SessionState) -> Result<(), StoreError> {
        self.write(claim.session(), || self.inner.save_state(claim, state))
    }
    fn load(&self, id: &SessionId) -> Result<Loaded, StoreError> {
        self.inner.load(id)
    }
    fn list(&self, limit: usize, offset: usize) -> Result<SessionList, StoreError> {
        self.inner.list(limit, offset)
    }
    fn delete(&self, id: &SessionId) -> Result<bool, StoreError> {
        self.inner.delete(id)
    }
    fn exists(&self, id: &SessionId) -> Result<bool, StoreError> {
        self.inner.exists(id)
    }
}

/// Where the simulation's transcript of `name` is kept.
pub fn transcript_path(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("transcripts/session").join(format!("{name}.txt"))
}

/// Checks a driver's transcript of `name` against the simulation's file (which only the
/// simulation's test writes); `run` says which driver and store, for the message.
pub fn check_driver_transcript(name: &str, run: &str, lines: &[String]) -> Result<(), String> {
    let path = transcript_path(name);
    let expected = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let actual = lines.join("\n") + "\n";
    if expected == actual {
        return Ok(());
    }
    Err(format!("{name} through {run} differs from the simulation:\n--- expected\n{expected}--- actual\n{actual}"))
}
