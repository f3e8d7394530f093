//! The crash test: a child process changes a session through a real [`Session`] machine
//! in every way an application can (prompt, regenerate, edit, navigate, title, and a tool
//! turn that ends at the step cap with its call open), writing to a store on disk, and is
//! killed (SIGKILL) at random moments, over and over. After every child's end the test
//! loads the session back, raw from the store and through omni-blocking's session handle
//! as an application would: zero refusals, zero saved nodes or titles lost, and a stored
//! position a turn can start from. Both on-disk stores, one `#[test]` each.
//!
//! The parent creates the session once (and releases it); each child claims it (the
//! previous child is dead, and the parent's handle closed, so the claim must succeed),
//! loads it, resumes it with [`Session::resume`], prints `ready`, and runs random
//! operations, drawn from a PRNG seeded by the parent for each run (so runs differ;
//! `OMNI_CRASH_SEED` changes the parent's seed). Its agent is offline: each request is
//! answered in-process with an Anthropic Messages stream (a text reply, or a `tool_use`
//! call for the step-cap turn, whose `max_steps: 1` ends the turn with the call open).
//! Every store write the session asks for is executed at once and its result fed back;
//! after each that succeeded the child prints what the store now holds
//! (`saved nodes=<n>` after an append, `saved title=<k>` after a state carrying the
//! title `title <k>`) and flushes, so the parent knows what was reported saved. A write
//! that fails is a failure of the test. After [`MAX_OPS`] operations it prints `done`.
//!
//! The parent kills it 2 to 60 ms after `ready`, or 0 to 3 ms in one run of four (to land
//! among the writes `resume` owes), until [`MIN_KILLS`] kills; after each it checks:
//! - the store loads (a raw `load`), and the handle loads the session (claim, load,
//!   resume: never refused) and closes it (so the next child can claim it);
//! - nothing reported saved is lost: at least as many nodes as any child reported, every
//!   node an earlier load saw still there with its parent and message (nodes are
//!   append-only), and a title numbered at least as high as the last reported;
//! - the stored path is empty or ends on an assistant message (never inside a turn),
//!   unless the store holds nodes beyond those its state counts (a kill between an append
//!   and its state write: counted as lagging, and taken onto the path by `resume`).
//!
//! The child is this test binary itself, run again with `crash_child` selected and its
//! store, session and seed in environment variables: no second program to build or find
//! (cargo gives a test no path to an example's binary), and the child runs exactly the
//! code the test was built from. Without those variables `crash_child` does nothing (and
//! it is `#[ignore]`d, so a plain `cargo test` does not even list it as run).
#![cfg(unix)] // SIGKILL, and the exit status that tells it
#![allow(clippy::unwrap_used, clippy::disallowed_methods)] // a test: assertions and a clock

use std::collections::BTreeMap;
use std::env;
use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use omni_blocking::Client;
use omni_conformance::replay::ReplayServer;
use omni_conformance::session_drive::{replay_client, TempDir};
use omni_protocol::agent::{Agent, AgentConfig, AgentEvent, NoCallbacks, Prompt};
use omni_protocol::generate::{Effect, Report};
use omni_protocol::session::{Node, NodeId, Tree};
use omni_protocol::session::{Session, SessionEffect, SessionEvent, SessionInput, StoreOp};
use omni_protocol::{Block, Dialect, Message, Model, Options, Provider, Role};
use omni_store::{FileStore, SessionId, SessionState, SqliteStore, Store, StoreWarning};
use serde_json::{json, Value};

/// Kills each store's test needs.
const MIN_KILLS: usize = 150;
/// Operations a child stops at (`done`), if it was not killed first.
const MAX_OPS: usize = 400;
/// A store's test fails after this long.
const TIMEOUT: Duration = Duration::from_secs(240);
/// How long a child may take to load the session and say `ready`.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// Kill delays after `ready`, in milliseconds.
const DELAY_MS: (u64, u64) = (2, 60);
/// The delays of one run in four: kills among the writes `resume` owes and the first op.
const SHORT_DELAY_MS: (u64, u64) = (0, 3);
/// The model the handle loads the session with (nothing is ever sent to it).
const MODEL: &str = "anthropic:claude-sonnet-4-5";

const CHILD_STORE: &str = "OMNI_CRASH_CHILD_STORE";
const CHILD_PATH: &str = "OMNI_CRASH_CHILD_PATH";
const CHILD_ID: &str = "OMNI_CRASH_CHILD_ID";
const CHILD_SEED: &str = "OMNI_CRASH_CHILD_SEED";

/// Which store.
#[derive(Debug, Clone, Copy)]
enum Kind {
    File,
    Sqlite,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Self::File => "file",
            Self::Sqlite => "sqlite",
        }
    }

    /// The store at `path` (see [`Kind::path`]).
    fn open(self, path: &Path) -> Arc<dyn Store> {
        match self {
            Self::File => Arc::new(FileStore::open(path).expect("the file store opens")),
            Self::Sqlite => Arc::new(SqliteStore::open(path).expect("the SQLite store opens")),
        }
    }

    /// Where the store lives inside the test's folder.
    fn path(self, dir: &Path) -> PathBuf {
        match self {
            Self::File => dir.join("sessions"),
            Self::Sqlite => dir.join("sessions.db"),
        }
    }
}

#[test]
fn the_file_store_keeps_every_saved_change_through_kills() {
    crash_test(Kind::File);
}

#[test]
fn the_sqlite_store_keeps_every_saved_change_through_kills() {
    crash_test(Kind::Sqlite);
}

/// SplitMix64: a small deterministic PRNG.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n`.
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// A number in `low..=high`.
    fn between(&mut self, (low, high): (u64, u64)) -> u64 {
        low + self.below(high - low + 1)
    }

    /// One of `items`, `None` when there is none.
    fn pick<T: Copy>(&mut self, items: &[T]) -> Option<T> {
        let len = u64::try_from(items.len()).ok().filter(|&len| len > 0)?;
        items.get(usize::try_from(self.below(len)).ok()?).copied()
    }
}

/// `title`'s k, for a title `title <k>`.
fn title_number(title: &str) -> Option<u64> {
    title.strip_prefix("title ")?.parse().ok()
}

/// The number after `key` in a line the child printed (libtest may put its own
/// `test crash_child ... ` before the first one).
fn field(line: &str, key: &str) -> Option<u64> {
    let (_, rest) = line.split_once(key)?;
    rest.split_whitespace().next()?.parse().ok()
}

// ---------------------------------------------------------------------------------------
// The child.

#[test]
#[ignore = "the crash tests' child process: they run it, with its store in the environment"]
fn crash_child() {
    let Ok(kind) = env::var(CHILD_STORE) else { return };
    let var = |name: &str| env::var(name).unwrap_or_else(|_| panic!("{name} is set"));
    let id = SessionId::new(var(CHILD_ID)).expect("a valid id");
    let seed = var(CHILD_SEED).parse().expect("a seed");
    let kind = if kind == Kind::File.name() { Kind::File } else { Kind::Sqlite };
    ChildRun::start(kind, Path::new(&var(CHILD_PATH)), id, seed).run();
}

fn sse(event: &str, data: &Value) -> String {
    format!("event: {event}\ndata: {data}\n\n")
}

/// A whole streamed Anthropic Messages reply, in the documented event shapes: content
/// blocks (each its start, deltas and stop), then `message_delta` with `stop_reason`.
fn anthropic_stream(blocks: &[(Value, Vec<Value>)], stop_reason: &str) -> Vec<u8> {
    let start = json!({"type": "message_start", "message": {"id": "msg_crash", "type": "message",
        "role": "assistant", "model": "claude-sonnet-4-5", "content": [], "stop_reason": null,
        "stop_sequence": null, "usage": {"input_tokens": 5, "output_tokens": 1}}});
    let mut body = sse("message_start", &start);
    for (index, (block, deltas)) in blocks.iter().enumerate() {
        let start = json!({"type": "content_block_start", "index": index, "content_block": block});
        body += &sse("content_block_start", &start);
        for delta in deltas {
            let delta = json!({"type": "content_block_delta", "index": index, "delta": delta});
            body += &sse("content_block_delta", &delta);
        }
        body += &sse("content_block_stop", &json!({"type": "content_block_stop", "index": index}));
    }
    let end = json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null},
        "usage": {"output_tokens": 2}});
    body += &sse("message_delta", &end);
    body += &sse("message_stop", &json!({"type": "message_stop"}));
    body.into_bytes()
}

/// A text reply.
fn text_reply(text: &str) -> Vec<u8> {
    let block = json!({"type": "text", "text": ""});
    anthropic_stream(&[(block, vec![json!({"type": "text_delta", "text": text})])], "end_turn")
}

/// A reply that calls tool `lookup` (call `id`) with `{"q": query}`, its input streamed in
/// two pieces as Anthropic does.
fn tool_call_reply(id: &str, query: &str) -> Vec<u8> {
    let input = json!({"q": query}).to_string();
    let (first, rest) = input.split_at(input.len() / 2);
    let block = json!({"type": "tool_use", "id": id, "name": "lookup", "input": {}});
    let deltas = [first, rest].map(|piece| json!({"type": "input_json_delta", "partial_json": piece}));
    anthropic_stream(&[(block, deltas.to_vec())], "tool_use")
}

/// A child process's session and store.
struct ChildRun {
    store: Arc<dyn Store>,
    session: Session<NoCallbacks>,
    rng: Rng,
    /// This run's seed: in every text it makes, so that texts differ from run to run.
    seed: u64,
    /// Texts made this run.
    made: u64,
    /// How many nodes the store holds, as far as its answers say.
    held: usize,
    /// The number of the last title set (`title <k>`): it only grows, across runs too.
    title: u64,
    /// The request in flight is answered with a tool call (the step-cap turn).
    tool_turn: bool,
}

impl ChildRun {
    /// Claims the session, loads it and resumes it.
    fn start(kind: Kind, path: &Path, id: SessionId, seed: u64) -> Self {
        let store = kind.open(path);
        let claim =
            store.claim(&id).unwrap_or_else(|e| panic!("the child cannot claim the session ({:?}): {e}", e.kind));
        let loaded =
            store.load(&id).unwrap_or_else(|e| panic!("the child cannot load the session ({:?}): {e}", e.kind));
        let held = loaded.tree.len();
        let now = Instant::now();
        let model = Model::new("anthropic", "claude-sonnet-4-5", Dialect::AnthropicMessages);
        let provider = Provider::openai_compatible("anthropic", "http://127.0.0.1:9", None);
        let agent = Agent::new(AgentConfig::new(model, provider), NoCallbacks, now).expect("the agent");
        let session = Session::resume(id, Some(claim), agent, loaded.tree, loaded.state, now).expect("it resumes");
        let title = session.title().and_then(title_number).unwrap_or(0);
        let child = Self { store, session, rng: Rng(seed), seed, made: 0, held, title, tool_turn: false };
        say(&format!("ready nodes={held}"));
        child
    }

    fn run(mut self) {
        // What `resume` owes first: the state of a lagging or repaired position.
        self.drive();
        for _ in 0..MAX_OPS {
            let op = self.step();
            self.drive();
            assert!(self.session.is_saved(), "everything written after {op}");
            say(&format!("did {op}"));
        }
        say("done");
    }

    /// Starts a random operation; its name.
    fn step(&mut self) -> &'static str {
        self.made += 1;
        let text = format!("{:x}.{}", self.seed, self.made);
        let tree = self.session.tree();
        // A random node whose message `keep` takes; `None` one time in eight when
        // `or_none` (a new root, a cleared path), or when there is none.
        let pick = |rng: &mut Rng, or_none: bool, keep: fn(&Message) -> bool| {
            let ids: Vec<NodeId> = tree.nodes().iter().filter(|node| keep(&node.message)).map(|node| node.id).collect();
            if or_none && rng.below(8) == 0 {
                None
            } else {
                rng.pick(&ids)
            }
        };
        let (op, input) = match self.rng.below(20) {
            0..=5 => ("prompt", SessionInput::Prompt(format!("user {text}"))),
            // A user message that opened a turn: a tool-result message cannot be asked again.
            6..=8 => match pick(&mut self.rng, false, |m| m.role == Role::User && !has_tool_result(m)) {
                Some(user) => ("regenerate", SessionInput::Regenerate(user)),
                None => ("prompt", SessionInput::Prompt(format!("user {text}"))),
            },
            9..=11 => {
                let parent = pick(&mut self.rng, true, |m| m.role == Role::Assistant);
                ("edit", SessionInput::Edit(parent, format!("edit {text}")))
            }
            12..=14 => ("navigate", SessionInput::Navigate(pick(&mut self.rng, true, |_| true))),
            15..=16 => {
                self.title += 1;
                ("title", SessionInput::Title(Some(format!("title {}", self.title))))
            }
            _ => {
                self.tool_turn = true;
                let options = Options { max_steps: Some(1), ..Options::default() };
                let prompt = Prompt::text(format!("look up {text}")).options(options);
                ("tool turn", SessionInput::PromptWith(Box::new(prompt)))
            }
        };
        self.input(input);
        op
    }

    fn input(&mut self, input: SessionInput<'_>) {
        self.session.handle_input(input, Instant::now()).expect("the session takes it");
    }

    /// Executes effects (answering requests, writing to the store) until there are none.
    fn drive(&mut self) {
        loop {
            while let Some(event) = self.session.poll_event() {
                if let SessionEvent::Agent(AgentEvent::Error(e)) = event {
                    panic!("the turn failed: {e:?}");
                }
            }
            let Some(effect) = self.session.poll_effect() else { break };
            match effect {
                SessionEffect::Agent(Effect::SendRequest { id, .. }) => {
                    let text = format!("{:x}.{}", self.seed, self.made);
                    let tool_turn = std::mem::take(&mut self.tool_turn);
                    let body =
                        if tool_turn { tool_call_reply(&format!("toolu_{text}"), &text) } else { text_reply(&text) };
                    let headers = vec![("content-type".to_string(), "text/event-stream".to_string())];
                    self.input(SessionInput::Report(Report::ResponseHead { id, status: 200, headers }));
                    self.input(SessionInput::Report(Report::Body { id, bytes: &body }));
                    self.input(SessionInput::Report(Report::BodyEnd { id }));
                    if tool_turn {
                        let head = self.session.tree().head().and_then(|head| self.session.tree().message(head));
                        let open = head.is_some_and(|message| message.tool_uses().next().is_some());
                        assert!(open, "the tool turn ended at the step cap with its call open: {head:?}");
                    }
                }
                SessionEffect::Agent(other) => panic!("an effect the child does not expect: {other:?}"),
                SessionEffect::Store { write, claim, op } => {
                    let result = op.apply(&*self.store, &claim);
                    if let Err(e) = &result {
                        panic!("the store refused a write ({:?}): {e}", e.kind);
                    }
                    match &op {
                        StoreOp::Append(nodes) => {
                            self.held += nodes.len();
                            say(&format!("saved nodes={}", self.held));
                        }
                        StoreOp::SaveState(state) => {
                            if let Some(k) = state.title.as_deref().and_then(title_number) {
                                say(&format!("saved title={k}"));
                            }
                        }
                        StoreOp::Renew | StoreOp::Release => {}
                    }
                    self.input(SessionInput::Stored { write, result });
                }
            }
        }
    }
}

/// Whether `message` carries a tool result.
fn has_tool_result(message: &Message) -> bool {
    message.content.iter().any(|block| matches!(block, Block::ToolResult(_)))
}

/// Prints `line` and flushes: once printed, the parent may count on it.
fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").expect("stdout");
    out.flush().expect("stdout flushed");
}

// ---------------------------------------------------------------------------------------
// The parent.

/// What the test saw.
#[derive(Debug, Default)]
struct Counts {
    /// Children started.
    runs: usize,
    /// Children killed by the test (the others reached [`MAX_OPS`]).
    kills: usize,
    /// Loads that reported a torn record (a kill inside an append).
    torn: usize,
    /// Loads whose position the handle repaired (it ended inside a turn).
    repaired: usize,
    /// Loads whose store held nodes beyond its state's count (a kill between an append
    /// and its state write).
    lagging: usize,
    /// Loads that found more nodes than any child had reported saved (a kill after an
    /// append, before its `saved` line).
    unreported: usize,
    /// Operations the children completed, by kind.
    ops: BTreeMap<String, usize>,
    /// Nodes in the tree at the last load.
    nodes: usize,
}

/// What the children reported saved, and what the last load held.
#[derive(Debug, Default)]
struct Saved {
    /// The most nodes a child reported the store holds.
    nodes: usize,
    /// The highest title number a child reported saved.
    title: u64,
    /// Every node the last load found: each must stay, unchanged.
    seen: Vec<Node>,
}

/// Held while this process owns the session (the creation, a check) and while it spawns
/// a child: a spawned process gets a copy of every open file, the lock file's too, and
/// keeps it until it execs, so a child of the other store's test, spawned while a check's
/// handle owns the session, could hold the lock a moment past `close()` and have the next
/// child's claim refused. (Every process that spawns while it owns a session can make
/// another's claim wait that moment.)
static OWNING: Mutex<()> = Mutex::new(());

fn owning() -> MutexGuard<'static, ()> {
    OWNING.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A child run to its end: the complete lines it printed, and how it ended.
struct Ended {
    lines: Vec<String>,
    status: ExitStatus,
    stderr: String,
}

impl Ended {
    fn killed(&self) -> bool {
        self.status.signal() == Some(9)
    }
}

/// A child process, killed and reaped when dropped (a failing test leaves none behind).
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts a child on session `id` with `seed`, kills it `delay` after it says `ready`
/// (unless it ended first), and collects what it printed.
fn run_child(kind: Kind, store: &Path, id: &SessionId, seed: u64, delay: Duration, deadline: Instant) -> Ended {
    let exe = env::current_exe().expect("the test binary's path");
    let spawning = owning();
    let child = Command::new(exe)
        .args(["crash_child", "--exact", "--ignored", "--nocapture", "--test-threads=1"])
        .env(CHILD_STORE, kind.name())
        .env(CHILD_PATH, store)
        .env(CHILD_ID, id.as_str())
        .env(CHILD_SEED, seed.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the child starts");
    drop(spawning);
    let mut child = Running(child);
    let stdout = child.0.stdout.take().expect("the child's stdout");
    let mut stderr = child.0.stderr.take().expect("the child's stderr");
    let (lines_tx, lines_rx) = mpsc::channel();
    let reader = thread::spawn(move || {
        let mut stdout = BufReader::new(stdout);
        loop {
            let mut line = Vec::new();
            match stdout.read_until(b'\n', &mut line) {
                // Only whole lines: one cut by the kill was never said.
                Ok(_) if line.ends_with(b"\n") => {
                    let _ = lines_tx.send(String::from_utf8_lossy(&line).trim_end().to_string());
                }
                _ => break,
            }
        }
    });
    let errors = thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let mut lines = Vec::new();
    let ready_by = (Instant::now() + READY_TIMEOUT).min(deadline);
    let mut kill_at = None;
    loop {
        let until = kill_at.unwrap_or(ready_by);
        match lines_rx.recv_timeout(until.saturating_duration_since(Instant::now())) {
            Ok(line) => {
                if kill_at.is_none() && line.contains("ready nodes=") {
                    kill_at = Some(Instant::now() + delay);
                }
                lines.push(line);
            }
            // Time to kill it (or it is stuck before `ready`: said below), or it ended.
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => break,
        }
    }
    let _ = child.0.kill();
    let status = child.0.wait().expect("the child is reaped");
    reader.join().expect("the reader");
    lines.extend(lines_rx.try_iter());
    let stderr = errors.join().expect("the stderr reader");
    let ended = Ended { lines, status, stderr };
    if kill_at.is_none() && ended.killed() {
        panic!(
            "the child was not ready within {READY_TIMEOUT:?} (or the test's time ran out); it said:\n{}",
            ended.stderr
        );
    }
    ended
}

/// Loads session `id` raw and through the handle, and checks it against what the
/// children reported saved (see the module's doc).
fn check(store: Arc<dyn Store>, id: &SessionId, client: &Client, saved: &mut Saved, counts: &mut Counts) {
    let kills = counts.kills;
    let loaded =
        store.load(id).unwrap_or_else(|e| panic!("after {kills} kills the store does not load ({:?}): {e}", e.kind));
    counts.torn += loaded.warnings.iter().filter(|w| matches!(w, StoreWarning::TornRecord { .. })).count();
    let (tree, state) = (&loaded.tree, &loaded.state);

    // Nothing reported saved is lost; nodes are append-only.
    let (len, seen) = (tree.len(), saved.seen.len());
    assert!(len >= saved.nodes.max(seen), "after {kills} kills: {len} nodes, {} saved, {seen} seen", saved.nodes);
    for (before, now) in saved.seen.iter().zip(tree.nodes()) {
        assert!(
            before.id == now.id && before.parent == now.parent && before.message == now.message,
            "after {kills} kills node {} changed:\nbefore: {before:?}\nnow: {now:?}",
            before.id
        );
    }
    counts.unreported += usize::from(len > saved.nodes);
    let title = state.title.as_deref().and_then(title_number).unwrap_or(0);
    assert!(title >= saved.title, "after {kills} kills: {:?}, `title {}` was saved", state.title, saved.title);

    // The stored position is one a turn can start from, unless the state lags the nodes.
    let counted = usize::try_from(state.nodes).expect("a node count");
    assert!(counted <= len, "after {kills} kills the state counts {counted} nodes, the store holds {len}");
    if counted < len {
        counts.lagging += 1;
    } else {
        assert!(ends_a_turn(tree), "after {kills} kills the stored path ends inside a turn: {}", path_text(tree));
    }

    // Through the handle, as an application opens it: never refused.
    let session = client
        .agent(MODEL)
        .session(store)
        .load(id.clone())
        .unwrap_or_else(|e| panic!("after {kills} kills the handle refuses the session: {e:?}"));
    for warning in session.load_warnings() {
        match warning {
            StoreWarning::PathRepaired { .. } => counts.repaired += 1,
            // Counted from the raw load.
            StoreWarning::TornRecord { .. } => {}
            other => panic!("an unknown warning: {other}"),
        }
    }
    let handled = session.tree().expect("the handle's tree");
    assert_eq!(handled.nodes(), tree.nodes(), "the handle loaded the nodes the store holds");
    assert!(ends_a_turn(&handled), "the handle resumed inside a turn: {}", path_text(&handled));
    session.close().expect("the handle closes, releasing the session");

    counts.nodes = len;
    saved.seen = tree.nodes().to_vec();
}

/// Whether the path is empty or ends on an assistant message.
fn ends_a_turn(tree: &Tree) -> bool {
    tree.head().and_then(|head| tree.message(head)).is_none_or(|message| message.role == Role::Assistant)
}

/// A path with each node's role, for a failure's message.
fn path_text(tree: &Tree) -> String {
    let roles = tree.path().iter().filter_map(|&id| Some(format!("{id}:{:?}", tree.message(id)?.role)));
    format!("[{}]", roles.collect::<Vec<_>>().join(", "))
}

fn crash_test(kind: Kind) {
    let started = Instant::now();
    let deadline = started + TIMEOUT;
    let seed = env::var("OMNI_CRASH_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x0c0a_5e13_u64);
    let mut rng = Rng(seed.wrapping_add(kind as u64));
    let dir = TempDir::new(&format!("crash-{}", kind.name()));
    fs::create_dir_all(&dir.0).expect("the test's folder");
    let path = kind.path(&dir.0);
    let id = SessionId::new("crash").expect("a valid id");
    {
        let _owning = owning();
        let store = kind.open(&path);
        let claim = store.create(&id, &SessionState::default()).expect("the session is created");
        store.release(&claim).expect("and released");
    }
    // The handle's client: nothing is sent (the parent only loads and closes).
    let server = ReplayServer::start(Vec::new()).expect("the replay server");
    let client = replay_client::<Client>(&server).expect("the client");

    let mut counts = Counts::default();
    let mut saved = Saved::default();
    while counts.kills < MIN_KILLS {
        assert!(Instant::now() < deadline, "not done after {TIMEOUT:?}: {counts:?}");
        let delays = if rng.below(4) == 0 { SHORT_DELAY_MS } else { DELAY_MS };
        let delay = Duration::from_millis(rng.between(delays));
        let child_seed = rng.next();
        counts.runs += 1;
        let ended = run_child(kind, &path, &id, child_seed, delay, deadline);
        for line in &ended.lines {
            if let Some(n) = field(line, "saved nodes=") {
                saved.nodes = saved.nodes.max(usize::try_from(n).expect("a node count"));
            } else if let Some(k) = field(line, "saved title=") {
                saved.title = saved.title.max(k);
            } else if let Some((_, op)) = line.split_once("did ") {
                *counts.ops.entry(op.to_string()).or_default() += 1;
            }
        }
        if ended.killed() {
            counts.kills += 1;
        } else {
            assert!(
                ended.status.success() && ended.lines.iter().any(|line| line == "done"),
                "the child (seed {child_seed}) failed ({}); it said:\n{}\n{}",
                ended.status,
                ended.lines.join("\n"),
                ended.stderr
            );
        }
        {
            // Opening the file store may take the lock too (to remove a crash's temporary files).
            let _owning = owning();
            check(kind.open(&path), &id, &client, &mut saved, &mut counts);
        }
        if counts.runs.is_multiple_of(50) {
            eprintln!("{}: {counts:?} after {:.1} s", kind.name(), started.elapsed().as_secs_f64());
        }
    }
    let (ops, seconds) = (counts.ops.values().sum::<usize>(), started.elapsed().as_secs_f64());
    eprintln!("crash test, {} store (seed {seed:#x}): {ops} ops done, {counts:?}, {seconds:.1} s", kind.name());
}
