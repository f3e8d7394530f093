//! The crash test (issue 13): a child process commits turns through a real [`Session`]
//! into a store on disk and is killed (SIGKILL) at random moments, over and over; after
//! every kill the test loads the session and checks that nothing reported saved is lost
//! and that what is there is a consistent tree with a valid position.
//!
//! The child is this test binary itself, run again with `crash_child` selected and the
//! store, folder and session id in environment variables: no second program to build or
//! find (cargo gives a test no path to an example's binary), and the child runs exactly
//! the code the test was built from. Without those variables `crash_child` does nothing
//! (and it is `#[ignore]`d, so a plain `cargo test` does not even list it as run).
//!
//! The child is offline: the agent's requests are answered in-process with an Anthropic
//! Messages stream of `reply <n>` for the prompt `user <n>`, and every store write the
//! session asks for is executed at once against the store; after each one that returned
//! `Ok` it prints `saved nodes=<nodes the store holds>` and flushes. The parent kills it
//! 2 to 60 ms (drawn from a PRNG with a fixed seed, `OMNI_CRASH_SEED` to change it) after
//! it printed `ready`, i.e. after it loaded the session, so kills land among the writes
//! (0 to 3 ms while the session's creation has not been reported, so they land inside it
//! too). It runs until the child reports 1,000 turns done; with fewer than 20 kills by
//! then it would start over with a new session in the same store.
//!
//! A kill between a turn's append and its state write leaves the stored position one turn
//! behind the nodes (valid, and nothing reported saved is lost); `Session::resume` takes
//! that turn onto the path, which the next child checks, so the turns stay one chain:
//! `user 0`, `reply 0`, `user 1`, ...
#![cfg(unix)] // SIGKILL, and the exit status that tells it
#![allow(clippy::unwrap_used, clippy::disallowed_methods)] // a test: assertions and a clock

use std::env;
use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use omni_core::machines::agent::{Agent, AgentConfig, AgentEvent, NoCallbacks};
use omni_core::machines::generate::{Effect, Report};
use omni_core::machines::session::machine::{Session, SessionEffect, SessionEvent, SessionInput, StoreOp};
use omni_core::machines::session::tree::{NodeId, Tree};
use omni_core::{Dialect, Model, Provider, Role};
use omni_store::{FileStore, SessionId, SessionState, SqliteStore, Store, StoreErrorKind, StoreWarning};

/// Committed turns the child stops at.
const TURNS: usize = 1000;
/// Kills a test needs; with fewer when the child reaches [`TURNS`], it starts over with a
/// new session in the same store.
const MIN_KILLS: usize = 20;
/// The whole test fails after this long.
const TIMEOUT: Duration = Duration::from_secs(300);
/// How long a child may take to load the session and say `ready`.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// Kill delays after `ready`, in milliseconds.
const DELAY_MS: (u64, u64) = (2, 60);
/// The delays of a session's first run, so that kills land inside its creation too.
const FIRST_DELAY_MS: (u64, u64) = (0, 3);
const TITLE: &str = "crash";

const CHILD_STORE: &str = "OMNI_CRASH_CHILD_STORE";
const CHILD_PATH: &str = "OMNI_CRASH_CHILD_PATH";
const CHILD_ID: &str = "OMNI_CRASH_CHILD_ID";

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

    fn parse(name: &str) -> Self {
        match name {
            "file" => Self::File,
            "sqlite" => Self::Sqlite,
            other => panic!("no store {other:?}"),
        }
    }

    /// The store at `path` (a folder).
    fn open(self, path: &Path) -> Box<dyn Store> {
        match self {
            Self::File => Box::new(FileStore::open(path).expect("the file store opens")),
            Self::Sqlite => Box::new(SqliteStore::open(path).expect("the SQLite store opens")),
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
fn the_file_store_keeps_every_saved_turn_through_kills() {
    crash_test(Kind::File);
}

#[test]
fn the_sqlite_store_keeps_every_saved_turn_through_kills() {
    crash_test(Kind::Sqlite);
}

// ---------------------------------------------------------------------------------------
// The child.

#[test]
#[ignore = "the crash tests' child process: they run it, with its store in the environment"]
fn crash_child() {
    let Ok(kind) = env::var(CHILD_STORE) else { return };
    let path = PathBuf::from(env::var(CHILD_PATH).expect("the store's path"));
    let id = SessionId::new(env::var(CHILD_ID).expect("the session id")).expect("a valid id");
    ChildRun::start(Kind::parse(&kind), &path, id).run();
}

fn sse(event: &str, data: &serde_json::Value) -> String {
    format!("event: {event}\ndata: {data}\n\n")
}

/// A whole streamed Anthropic reply of `text`.
fn reply(text: &str) -> Vec<u8> {
    use serde_json::json;
    let start = json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant",
        "model": "claude-sonnet-4-5", "content": [], "stop_reason": null, "usage": {"input_tokens": 5, "output_tokens": 1}}});
    let mut body = sse("message_start", &start);
    body += &sse(
        "content_block_start",
        &json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
    );
    body += &sse(
        "content_block_delta",
        &json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}),
    );
    body += &sse("content_block_stop", &json!({"type": "content_block_stop", "index": 0}));
    body += &sse(
        "message_delta",
        &json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}}),
    );
    body += &sse("message_stop", &json!({"type": "message_stop"}));
    body.into_bytes()
}

/// The newest assistant node: the end of the last turn the store holds whole.
fn newest_reply(tree: &Tree) -> Option<NodeId> {
    tree.nodes().iter().rev().find(|node| node.message.role == Role::Assistant).map(|node| node.id)
}

/// A child process's session and store.
struct ChildRun {
    store: Box<dyn Store>,
    session: Session<NoCallbacks>,
    /// How many nodes the store holds, as far as its answers say.
    held: usize,
    /// The turn in flight, or the next.
    turn: usize,
    out: std::io::Stdout,
}

impl ChildRun {
    /// Resumes the session if the store has it, else creates it.
    fn start(kind: Kind, path: &Path, id: SessionId) -> Self {
        let store = kind.open(path);
        let now = Instant::now();
        let model = Model::new("anthropic", "claude-sonnet-4-5", Dialect::AnthropicMessages);
        let provider = Provider::openai_compatible("anthropic", "http://127.0.0.1:9", None);
        let agent = Agent::new(AgentConfig::new(model, provider), NoCallbacks, now).expect("the agent");
        let (session, held) = match store.load(&id) {
            Ok(loaded) => {
                let held = loaded.tree.len();
                let session = Session::resume(id, agent, loaded.tree, loaded.state, now).expect("the session resumes");
                (session, held)
            }
            Err(e) if e.kind == StoreErrorKind::NotFound => {
                let state = SessionState { title: Some(TITLE.into()), ..SessionState::default() };
                (Session::create(id, agent, state), 0)
            }
            Err(e) => panic!("the child cannot load the session: {e}"),
        };
        let mut child = Self { store, session, held, turn: 0, out: std::io::stdout() };
        child.say(&format!("ready nodes={held}"));
        child
    }

    fn say(&mut self, line: &str) {
        let mut out = self.out.lock();
        writeln!(out, "{line}").expect("stdout");
        out.flush().expect("stdout flushed");
    }

    fn run(mut self) {
        // The creation, if this run makes the session.
        self.drive();
        // A kill between a turn's append and its state leaves the stored position one turn
        // behind the nodes: `Session::resume` takes that turn onto the path (and saves the
        // position), so the head is the newest reply. What may remain is a user node
        // without its reply (a batch torn between its lines): the first turn is then an
        // edit under the newest reply (or a new root).
        let tree = self.session.tree();
        let newest = newest_reply(tree);
        let mut first = None;
        if tree.head() != newest {
            let whole = newest.filter(|&reply| tree.children(reply).is_empty());
            assert!(whole.is_none(), "resume left the path behind the newest turn, reply node {whole:?}");
            first = Some(newest);
        }
        self.turn = match first {
            Some(Some(reply)) => self.session.tree().path_to(reply).expect("a path").len() / 2,
            Some(None) => 0,
            None => self.session.tree().path().len() / 2,
        };
        while self.turn < TURNS {
            let text = format!("user {}", self.turn);
            match first.take() {
                Some(parent) => self.input(SessionInput::Edit(parent, text)),
                None => self.input(SessionInput::Prompt(text)),
            }
            self.drive();
            let path = self.session.tree().path().len();
            assert_eq!(path, 2 * (self.turn + 1), "turn {} committed", self.turn);
            self.turn += 1;
        }
        assert!(self.session.is_saved(), "everything written");
        self.say(&format!("done turns={} nodes={}", self.turn, self.held));
    }

    fn input(&mut self, input: SessionInput<'_>) {
        self.session.handle_input(input, Instant::now()).expect("the session takes it");
    }

    /// Executes effects (answering requests, writing to the store) until there are none.
    fn drive(&mut self) {
        loop {
            while let Some(event) = self.session.poll_event() {
                match event {
                    SessionEvent::Store { result: Err(e), .. } => panic!("a store write failed: {e}"),
                    SessionEvent::Agent(AgentEvent::Error(e)) => panic!("the turn failed: {e:?}"),
                    _ => {}
                }
            }
            let Some(effect) = self.session.poll_effect() else { break };
            match effect {
                SessionEffect::Agent(Effect::SendRequest { id, .. }) => {
                    let body = reply(&format!("reply {}", self.turn));
                    let headers = vec![("content-type".to_string(), "text/event-stream".to_string())];
                    self.input(SessionInput::Report(Report::ResponseHead { id, status: 200, headers }));
                    self.input(SessionInput::Report(Report::Body { id, bytes: &body }));
                    self.input(SessionInput::Report(Report::BodyEnd { id }));
                }
                SessionEffect::Agent(other) => panic!("an effect the child does not expect: {other:?}"),
                SessionEffect::Store { write, op } => {
                    let result = op.apply(&*self.store, self.session.id());
                    let added = if let StoreOp::Append(nodes) = &op { nodes.len() } else { 0 };
                    if let Err(e) = &result {
                        panic!("the store refused {op:?}: {e}");
                    }
                    self.held += added;
                    let held = self.held;
                    self.say(&format!("saved nodes={held}"));
                    self.input(SessionInput::Stored { write, result });
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// The parent.

/// A folder under the system's temporary one, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let path = env::temp_dir().join(format!("omni-crash-{name}-{}-{nanos}", std::process::id()));
        fs::create_dir_all(&path).expect("the test's folder");
        Self(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
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

    /// A number in `low..=high`.
    fn between(&mut self, low: u64, high: u64) -> u64 {
        low + self.next() % (high - low + 1)
    }
}

/// What the test saw.
#[derive(Debug, Default)]
struct Counts {
    /// Children started.
    runs: usize,
    /// Children killed by the test.
    kills: usize,
    /// Sessions started over because one reached its turns with too few kills.
    rounds: usize,
    /// Loads that reported a torn record.
    torn: usize,
    /// Loads that found more nodes than the child had reported saved (a kill after the
    /// append reached the file, before its `Ok` was printed).
    unreported: usize,
    /// Loads whose position was behind the newest turn (a kill between a turn's append
    /// and its state).
    lagging: usize,
    /// Loads that found no session before its creation was reported saved.
    missing: usize,
    /// Loads that found a half-made session (a kill inside `create`), likewise.
    half_made: usize,
    /// Turns on the active path at the last load, and nodes in the tree.
    turns: usize,
    nodes: usize,
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

/// Starts a child on session `id`, kills it `delay` after it says `ready` (unless it ended
/// first), and collects what it printed.
fn run_child(kind: Kind, store: &Path, id: &str, delay: Duration, deadline: Instant) -> Ended {
    let exe = env::current_exe().expect("the test binary's path");
    let child = Command::new(exe)
        .args(["crash_child", "--exact", "--ignored", "--nocapture", "--test-threads=1"])
        .env(CHILD_STORE, kind.name())
        .env(CHILD_PATH, store)
        .env(CHILD_ID, id)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the child starts");
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
                // libtest may print `test crash_child ... ` before the first line.
                if kill_at.is_none() && line.contains("ready nodes=") {
                    kill_at = Some(Instant::now() + delay);
                }
                lines.push(line);
            }
            // Time to kill it, or it is stuck before `ready` (the kill, then the check
            // below, says so).
            Err(RecvTimeoutError::Timeout) => break,
            // It ended by itself.
            Err(RecvTimeoutError::Disconnected) => break,
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

/// The last `saved nodes=N` among `lines`.
fn last_saved(lines: &[String]) -> Option<usize> {
    lines
        .iter()
        .filter_map(|line| line.strip_prefix("saved nodes="))
        .next_back()
        .map(|n| n.parse().expect("a node count"))
}

/// `text` as `<prefix> <n>`: its n.
fn numbered(text: &str, prefix: &str) -> Option<usize> {
    text.strip_prefix(prefix)?.strip_prefix(' ')?.parse().ok()
}

/// Loads session `id` and checks it against what the child reported saved (`saved`: the
/// most nodes it ever reported in this session, `None` before its creation was reported).
fn check(store: &dyn Store, id: &SessionId, saved: Option<usize>, counts: &mut Counts) {
    let loaded = match store.load(id) {
        Ok(loaded) => loaded,
        // Before the creation was reported saved, the session may be missing, or half made
        // (a kill inside `create`): nothing in it was reported saved, so it is removed and
        // the next child creates it.
        Err(e) if saved.is_none() && matches!(e.kind, StoreErrorKind::NotFound | StoreErrorKind::Corrupt) => {
            if e.kind == StoreErrorKind::Corrupt {
                counts.half_made += 1;
                assert!(store.delete(id).expect("the half-made session is deleted"));
            } else {
                counts.missing += 1;
            }
            return;
        }
        Err(e) => panic!("after {} kills the session does not load ({:?}): {e}", counts.kills, e.kind),
    };
    for warning in &loaded.warnings {
        match warning {
            StoreWarning::TornRecord { .. } => counts.torn += 1,
        }
    }
    let tree = &loaded.tree;
    let saved = saved.unwrap_or(0);
    assert!(tree.len() >= saved, "{} nodes loaded, {saved} reported saved", tree.len());
    if tree.len() > saved {
        counts.unreported += 1;
    }
    assert_eq!(loaded.state.title.as_deref(), Some(TITLE), "the state map");
    assert_eq!(loaded.state.position.path, tree.path(), "the position restored");
    // Every node: `user k` under `reply k-1` (a root for k = 0), `reply k` under `user k`.
    for node in tree.nodes() {
        let text = node.message.text();
        let parent = node.parent.and_then(|parent| tree.message(parent));
        let fits = match node.message.role {
            Role::User => numbered(&text, "user").is_some_and(|k| match parent {
                None => k == 0,
                Some(p) => {
                    p.role == Role::Assistant
                        && k.checked_sub(1).is_some_and(|j| numbered(&p.text(), "reply") == Some(j))
                }
            }),
            Role::Assistant => numbered(&text, "reply").is_some_and(|k| {
                parent.is_some_and(|p| p.role == Role::User && numbered(&p.text(), "user") == Some(k))
            }),
        };
        assert!(
            fits,
            "node {} ({:?} {text:?}) under {:?} does not fit the turns",
            node.id, node.message.role, node.parent
        );
    }
    // The active path: user 0, reply 0, user 1, ... ending on a reply.
    let path = tree.path();
    assert!(path.len() % 2 == 0, "the path ends on a reply: {} nodes", path.len());
    for (i, &node) in path.iter().enumerate() {
        let message = tree.message(node).expect("a node of the path");
        let (role, text) = if i % 2 == 0 {
            (Role::User, format!("user {}", i / 2))
        } else {
            (Role::Assistant, format!("reply {}", i / 2))
        };
        assert_eq!((message.role, message.text()), (role, text), "node {node} at {i} on the path");
    }
    // Behind the newest turn by one at most: the state is written after each append.
    let newest = newest_reply(tree).map_or(0, |reply| tree.path_to(reply).expect("a path").len());
    assert!(newest <= path.len() + 2, "the position is {} nodes long, the newest turn ends at {newest}", path.len());
    if newest > path.len() {
        counts.lagging += 1;
    }
    counts.turns = path.len() / 2;
    counts.nodes = tree.len();
}

fn crash_test(kind: Kind) {
    let started = Instant::now();
    let deadline = started + TIMEOUT;
    let seed = env::var("OMNI_CRASH_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x0c0a_5e13_u64);
    let mut rng = Rng(seed.wrapping_add(kind as u64));
    let dir = TempDir::new(kind.name());
    let path = kind.path(&dir.0);
    let mut counts = Counts::default();
    loop {
        counts.rounds += 1;
        let name = format!("crash-{}", counts.rounds);
        let id = SessionId::new(name.clone()).expect("a valid id");
        let mut saved = None;
        loop {
            assert!(Instant::now() < deadline, "not done after {TIMEOUT:?}: {counts:?}");
            let (low, high) = if saved.is_none() { FIRST_DELAY_MS } else { DELAY_MS };
            let delay = Duration::from_millis(rng.between(low, high));
            counts.runs += 1;
            let ended = run_child(kind, &path, &name, delay, deadline);
            if let Some(n) = last_saved(&ended.lines) {
                saved = Some(saved.map_or(n, |s: usize| s.max(n)));
            }
            let killed = ended.killed();
            if counts.runs % 100 == 0 {
                eprintln!("{}: {counts:?} after {:.1} s", kind.name(), started.elapsed().as_secs_f64());
            }
            if !killed {
                assert!(
                    ended.status.success(),
                    "the child failed ({}); it said:\n{}\n{}",
                    ended.status,
                    ended.lines.join("\n"),
                    ended.stderr
                );
                assert!(ended.lines.iter().any(|l| l.contains("done turns=")), "the child ended without finishing");
            } else {
                counts.kills += 1;
            }
            let store = kind.open(&path);
            check(store.as_ref(), &id, saved, &mut counts);
            if !killed {
                assert_eq!(counts.turns, TURNS, "the child said done");
                break;
            }
        }
        if counts.kills >= MIN_KILLS {
            break;
        }
        eprintln!("{}: {} kills when session {name} was done: again with a new session", kind.name(), counts.kills);
    }
    eprintln!(
        "crash test, {} store (seed {seed:#x}): {} runs, {} kills, {} torn records, {} loads with unreported nodes, \
         {} positions a turn behind, {} loads without the session and {} of it half made (before its creation was \
         reported), {} turns and {} nodes at the end, \
         {} session(s), {:.1} s",
        kind.name(),
        counts.runs,
        counts.kills,
        counts.torn,
        counts.unreported,
        counts.lagging,
        counts.missing,
        counts.half_made,
        counts.turns,
        counts.nodes,
        counts.rounds,
        started.elapsed().as_secs_f64()
    );
}
