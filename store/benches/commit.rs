//! The session stores: what a commit costs and what loading a long session costs, each
//! against the least any store must do, measured in the same run (issue 13).
//!
//! ## Commit
//!
//! What a session does when a turn commits: the turn's two messages (a user message and an
//! assistant reply of 200 bytes of text each) join the tree (`Tree::append`), then
//! `append_nodes` of the two new nodes and `save_state` (model, system, options, title and
//! the position: the path and the cursors, which grow with the tree). Each kind commits to
//! a session of its own that grows turn after turn (a new one after [`PER_SESSION`]
//! commits); only the turn's messages are made outside the timed part, so every kind,
//! the baselines included, pays for the tree's update.
//!
//! - `file`: [`FileStore`] (a folder per session).
//! - `sqlite`: [`SqliteStore`] (one database file, WAL, `synchronous = FULL`).
//! - `memory`: [`MemoryStore`].
//! - `baseline`: the same bytes written the plainest durable way: the two nodes' JSON lines
//!   appended to one file (`OpenOptions::append`, one `write_all`, `sync_data`), then the
//!   state's JSON (`{"created_ms":..,"state":..}`, as the file store writes it) written to
//!   a temporary file, `sync_all`, renamed over `session.json`. Serializing is included (a
//!   store is handed nodes, not bytes); the folder's fsync after the rename, which the file
//!   store does so that the rename lasts, is not.
//! - `append_only`: the nodes' append and `sync_data` alone: one sync per commit, the floor
//!   of any design that syncs once per commit.
//!
//! Every store commits as the owner of its session (issue 22): each write carries the
//! claim `create` gave, and the store checks it (a lock it holds, the lock file still in
//! place; for SQLite also the owner's token in the session's row).
//!
//! ## Ownership
//!
//! `claim` then `release` of an existing session, per store: what opening a session to
//! write (and closing it) adds. Reported in µs and as a fraction of the store's commit.
//!
//! ## Load
//!
//! `store.load(&id)` of a session of [`LOAD_NODES`] nodes (5,000 turns as above), written
//! with `save_tree` and `save_state`. `baseline`: reading the same `nodes.jsonl` bytes (a
//! file of its own) and `serde_json::from_str::<Node>` of each line, without building
//! the tree. Every run reads files the page cache holds.
//!
//! ## After divan's table
//!
//! Divan runs one benchmark after another, and fsync's cost on a shared machine drifts
//! between them. So the same measurements run again interleaved: [`COMMITS`] rounds (env
//! `COMMITS`, default 1,000), each one commit of every kind in an order rotated by one
//! each round, every session growing to 2,000 nodes; then [`LOADS`] rounds (env `LOADS`,
//! default 100) of one load of every kind. That prints medians and quartiles per kind and
//! the ratios to the baselines: of the medians, and in brackets the median of the ratios
//! within each round.
//!
//! Run: `cargo bench -p omni-store --bench commit`.
#![allow(clippy::disallowed_methods, clippy::disallowed_types, missing_docs)]

use std::cell::RefCell;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use divan::Bencher;
use omni_protocol::session::{Node, Tree};
use omni_protocol::{Message, Usage};
use omni_store::{Claim, FileStore, Loaded, MemoryStore, SessionId, SessionState, SqliteStore, Store};
use serde::Serialize;

const COMMIT_KINDS: [&str; 5] = ["file", "sqlite", "memory", "baseline", "append_only"];
const LOAD_KINDS: [&str; 4] = ["file", "sqlite", "memory", "baseline"];
/// Commits in a session before the next one starts.
const PER_SESSION: usize = 1_000;
/// The nodes of the session loaded.
const LOAD_NODES: usize = 10_000;
/// Interleaved rounds after divan's table, unless the environment says otherwise.
const COMMITS: usize = 1_000;
const LOADS: usize = 100;
const CLAIMS: usize = 1_000;
/// The text of each message, in bytes.
const TEXT_LEN: usize = 200;

fn main() {
    divan::main();
    if under_cargo_bench() {
        let started = Instant::now();
        let commits = paired_commits(from_env("COMMITS", COMMITS));
        paired_claims(from_env("CLAIMS", CLAIMS), &commits);
        paired_loads(from_env("LOADS", LOADS));
        println!("(interleaved part: {:.1} s)", started.elapsed().as_secs_f64());
    }
}

/// True under `cargo bench`; under `cargo test`, divan runs each benchmark once, and the
/// interleaved part is skipped.
fn under_cargo_bench() -> bool {
    let args: Vec<String> = std::env::args().collect();
    args.iter().any(|a| a == "--bench") && !args.iter().any(|a| a == "--test" || a == "--list")
}

fn from_env(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).filter(|&n| n > 0).unwrap_or(default)
}

#[divan::bench(args = COMMIT_KINDS, sample_count = 100, sample_size = 1)]
fn commit(bencher: Bencher, kind: &str) {
    let committer = RefCell::new(Committer::new(Kind::named(kind)));
    bencher
        .with_inputs(|| committer.borrow_mut().next())
        .bench_local_values(|turn| committer.borrow_mut().commit(turn));
}

#[divan::bench(args = LOAD_KINDS, sample_count = 20, sample_size = 1)]
fn load(bencher: Bencher, kind: &str) {
    let loader = Loader::new(Kind::named(kind));
    bencher.bench_local(|| loader.load());
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    File,
    Sqlite,
    Memory,
    Baseline,
    AppendOnly,
}

impl Kind {
    fn named(name: &str) -> Self {
        match name {
            "file" => Self::File,
            "sqlite" => Self::Sqlite,
            "memory" => Self::Memory,
            "baseline" => Self::Baseline,
            "append_only" => Self::AppendOnly,
            _ => panic!("no kind {name}"),
        }
    }

    /// The store of this kind in `dir`; none for the baselines.
    fn open(self, dir: &Path) -> Option<Box<dyn Store>> {
        match self {
            Self::File => Some(Box::new(FileStore::open(dir.join("sessions")).expect("file store"))),
            Self::Sqlite => Some(Box::new(SqliteStore::open(dir.join("sessions.db")).expect("sqlite store"))),
            Self::Memory => Some(Box::new(MemoryStore::new())),
            Self::Baseline | Self::AppendOnly => None,
        }
    }
}

/// A folder under the system's temporary directory, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        static COUNT: AtomicU64 = AtomicU64::new(0);
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        let unique =
            format!("omni-store-bench-{}-{}-{nanos}-{name}", std::process::id(), COUNT.fetch_add(1, Ordering::Relaxed));
        let path = std::env::temp_dir().join(unique);
        fs::create_dir(&path).expect("scratch folder");
        Self(path)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// 200 bytes of text, numbered.
fn text(what: &str, n: usize) -> String {
    let mut text = format!("{what} {n}: ");
    while text.len() < TEXT_LEN {
        text.push_str("the quick brown fox jumps over the lazy dog, ");
    }
    text.truncate(TEXT_LEN);
    text
}

/// Turn `n`: a user message and the assistant's reply.
fn turn(n: usize) -> Turn {
    let usage = Usage { input_tokens: 1_000 + n as u64, output_tokens: 60, ..Usage::default() };
    Turn { messages: vec![Message::user(text("question", n)), Message::assistant(text("answer", n))], usage }
}

/// Commits turn `n` to the tree, under the head.
fn append_turn(tree: &mut Tree, n: usize) {
    let Turn { messages, usage } = turn(n);
    tree.append(messages, Some(usage));
}

fn state(tree: &Tree) -> SessionState {
    SessionState {
        model: Some("anthropic:claude-sonnet-4-5".into()),
        system: Some("Be brief.".into()),
        options: Some(serde_json::json!({"max_tokens": 1024})),
        title: Some("A long session".into()),
        position: tree.position(),
        nodes: tree.len() as u64,
    }
}

/// `nodes` as JSON lines, as the file store writes them.
fn json_lines(nodes: &[Node]) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    for node in nodes {
        serde_json::to_writer(&mut bytes, node)?;
        bytes.push(b'\n');
    }
    Ok(bytes)
}

/// What the file store's `session.json` holds.
#[derive(Serialize)]
struct SessionFile<'a> {
    created_ms: u64,
    state: &'a SessionState,
}

const NODES_FILE: &str = "nodes.jsonl";
const SESSION_FILE: &str = "session.json";

/// The baselines' append: `nodes`' JSON lines in one write, then `sync_data`.
fn append_synced(folder: &Path, nodes: &[Node]) -> io::Result<()> {
    let bytes = json_lines(nodes)?;
    let mut file = OpenOptions::new().append(true).open(folder.join(NODES_FILE))?;
    file.write_all(&bytes)?;
    file.sync_data()
}

/// The baseline's state: a temporary file, written, `sync_all`, renamed over the old one.
fn replace_state(folder: &Path, state: &SessionState) -> io::Result<()> {
    let bytes = serde_json::to_vec(&SessionFile { created_ms: 1_764_000_000_000, state })?;
    let temp = folder.join("session.json.tmp");
    let mut file = OpenOptions::new().write(true).create_new(true).open(&temp)?;
    file.write_all(&bytes)?;
    file.sync_all()?;
    drop(file);
    fs::rename(&temp, folder.join(SESSION_FILE))
}

/// A turn's messages, ready to commit.
struct Turn {
    messages: Vec<Message>,
    usage: Usage,
}

/// One kind's growing session, committed to turn after turn.
struct Committer {
    kind: Kind,
    store: Option<Box<dyn Store>>,
    sessions: usize,
    id: SessionId,
    /// The store's claim on the session.
    claim: Option<Claim>,
    /// The baselines' session folder.
    folder: PathBuf,
    tree: Tree,
    /// The nodes written so far.
    saved: usize,
    /// Last, so that it goes after the store is closed.
    scratch: Scratch,
}

impl Committer {
    fn new(kind: Kind) -> Self {
        let scratch = Scratch::new("commit");
        let mut committer = Self {
            kind,
            store: kind.open(&scratch.0),
            sessions: 0,
            id: SessionId::new("unused").expect("id"),
            claim: None,
            folder: PathBuf::new(),
            tree: Tree::new(),
            saved: 0,
            scratch,
        };
        committer.begin();
        committer
    }

    /// Starts a new, empty session (outside the timed part).
    fn begin(&mut self) {
        self.sessions += 1;
        self.id = SessionId::new(format!("bench-{}", self.sessions)).expect("id");
        self.tree = Tree::new();
        self.saved = 0;
        match &self.store {
            Some(store) => {
                if let Some(claim) = self.claim.take() {
                    store.release(&claim).expect("release");
                }
                self.claim = Some(store.create(&self.id, &state(&self.tree)).expect("create"));
            }
            None => {
                self.folder = self.scratch.0.join(self.id.as_str());
                fs::create_dir(&self.folder).expect("session folder");
                File::create(self.folder.join(NODES_FILE)).expect("nodes file");
            }
        }
    }

    /// The next turn's messages (outside the timed part).
    fn next(&mut self) -> Turn {
        if self.tree.len() >= 2 * PER_SESSION {
            self.begin();
        }
        turn(self.tree.len() / 2)
    }

    /// The timed part: the turn joins the tree, its new nodes and the state are written.
    fn commit(&mut self, turn: Turn) {
        self.tree.append(turn.messages, Some(turn.usage));
        let nodes = &self.tree.nodes()[self.saved..];
        let state = state(&self.tree);
        match (&self.store, &self.claim, self.kind) {
            (Some(store), Some(claim), _) => {
                store.append_nodes(claim, nodes).expect("append_nodes");
                store.save_state(claim, &state).expect("save_state");
            }
            (Some(_), None, _) => unreachable!("a store's session is created with its claim"),
            (None, _, Kind::AppendOnly) => append_synced(&self.folder, nodes).expect("append"),
            (None, _, _) => {
                append_synced(&self.folder, nodes).expect("append");
                replace_state(&self.folder, &state).expect("state");
            }
        }
        self.saved = self.tree.len();
    }
}

/// One kind's session of [`LOAD_NODES`] nodes, loaded again and again.
struct Loader {
    store: Option<Box<dyn Store>>,
    id: SessionId,
    /// The baseline's copy of the nodes' JSON lines.
    nodes_file: PathBuf,
    /// Last, so that it goes after the store is closed.
    _scratch: Scratch,
}

/// What a load returns, dropped after the timed part.
enum Output {
    Loaded(Box<Loaded>),
    Nodes(Vec<Node>),
}

impl Loader {
    fn new(kind: Kind) -> Self {
        let scratch = Scratch::new("load");
        let mut tree = Tree::new();
        for n in 0..LOAD_NODES / 2 {
            append_turn(&mut tree, n);
        }
        let id = SessionId::new("long").expect("id");
        let store = kind.open(&scratch.0);
        let nodes_file = scratch.0.join(NODES_FILE);
        match &store {
            Some(store) => {
                let claim = store.create(&id, &state(&Tree::new())).expect("create");
                store.save_tree(&claim, &tree).expect("save_tree");
                store.save_state(&claim, &state(&tree)).expect("save_state");
                store.release(&claim).expect("release");
            }
            None => fs::write(&nodes_file, json_lines(tree.nodes()).expect("json")).expect("nodes file"),
        }
        let loader = Self { store, id, nodes_file, _scratch: scratch };
        match loader.load() {
            Output::Loaded(loaded) => assert!(loaded.tree == tree, "the session loads whole"),
            Output::Nodes(nodes) => assert_eq!(nodes.len(), LOAD_NODES),
        }
        loader
    }

    /// The timed part: the session read.
    fn load(&self) -> Output {
        match &self.store {
            Some(store) => Output::Loaded(Box::new(store.load(&self.id).expect("load"))),
            None => {
                let text = fs::read_to_string(&self.nodes_file).expect("nodes file");
                Output::Nodes(text.lines().map(|line| serde_json::from_str::<Node>(line).expect("a node")).collect())
            }
        }
    }
}

/// Commits interleaved: `rounds` rounds of one commit of every kind, order rotated. The
/// median commit of every kind, in µs.
fn paired_commits(rounds: usize) -> Vec<f64> {
    let mut committers: Vec<Committer> = COMMIT_KINDS.iter().map(|&name| Committer::new(Kind::named(name))).collect();
    let mut times = vec![Vec::with_capacity(rounds); committers.len()];
    for round in 0..rounds {
        for i in 0..committers.len() {
            let k = (round + i) % committers.len();
            let turn = committers[k].next();
            let started = Instant::now();
            committers[k].commit(turn);
            times[k].push(started.elapsed());
        }
    }
    let grown = committers.iter().map(|c| c.tree.len()).max().unwrap_or(0);
    println!(
        "\ncommit (the turn joined to the tree, append_nodes of its 2 nodes, save_state), interleaved: {rounds} rounds, sessions grown to {grown} nodes"
    );
    report(&COMMIT_KINDS, &times, &["baseline", "append_only"]);
    times.iter().map(|t| quartiles(t)[1]).collect()
}

/// Claims interleaved: `rounds` rounds of one claim and release of every store's session,
/// order rotated; each against the store's median commit (`commits`, by
/// [`COMMIT_KINDS`]).
fn paired_claims(rounds: usize, commits: &[f64]) {
    let kinds = ["file", "sqlite", "memory"];
    let scratch = Scratch::new("claim");
    let id = SessionId::new("claimed").expect("id");
    let stores: Vec<Box<dyn Store>> = kinds
        .iter()
        .map(|&name| {
            let folder = scratch.0.join(name);
            fs::create_dir_all(&folder).expect("folder");
            let store = Kind::named(name).open(&folder).expect("a store");
            let claim = store.create(&id, &state(&Tree::new())).expect("create");
            store.release(&claim).expect("release");
            store
        })
        .collect();
    let mut times = vec![Vec::with_capacity(rounds); kinds.len()];
    for round in 0..rounds {
        for i in 0..kinds.len() {
            let k = (round + i) % kinds.len();
            let started = Instant::now();
            let claim = stores[k].claim(&id).expect("claim");
            stores[k].release(&claim).expect("release");
            times[k].push(started.elapsed());
        }
    }
    println!(
        "
claim + release of a session, interleaved: {rounds} rounds"
    );
    println!("{:<12} {:>11} {:>11} {:>11} {:>16}", "kind", "median µs", "p25 µs", "p75 µs", "× its commit");
    for (k, name) in kinds.iter().enumerate() {
        let q = quartiles(&times[k]);
        let commit = COMMIT_KINDS.iter().position(|n| n == name).map_or(f64::NAN, |c| commits[c]);
        println!("{name:<12} {:>11.1} {:>11.1} {:>11.1} {:>16.3}", q[1], q[0], q[2], q[1] / commit);
    }
}

/// Loads interleaved: `rounds` rounds of one load of every kind, order rotated.
fn paired_loads(rounds: usize) {
    let loaders: Vec<Loader> = LOAD_KINDS.iter().map(|&name| Loader::new(Kind::named(name))).collect();
    let mut times = vec![Vec::with_capacity(rounds); loaders.len()];
    for round in 0..rounds {
        for i in 0..loaders.len() {
            let k = (round + i) % loaders.len();
            let started = Instant::now();
            let output = loaders[k].load();
            times[k].push(started.elapsed());
            drop(output);
        }
    }
    println!("\nload of a {LOAD_NODES}-node session, interleaved: {rounds} rounds");
    report(&LOAD_KINDS, &times, &["baseline"]);
}

/// Per kind: median and quartiles, and the ratio of its median to each baseline's (in
/// brackets: the median of the ratios within each round).
fn report(names: &[&str], times: &[Vec<Duration>], baselines: &[&str]) {
    let index = |name: &str| names.iter().position(|n| *n == name).expect("a baseline");
    let mut header = format!("{:<12} {:>11} {:>11} {:>11}", "kind", "median µs", "p25 µs", "p75 µs");
    for base in baselines {
        header.push_str(&format!(" {:>20}", format!("× {base}")));
    }
    println!("{header}");
    for (k, name) in names.iter().enumerate() {
        let q = quartiles(&times[k]);
        let mut line = format!("{name:<12} {:>11.1} {:>11.1} {:>11.1}", q[1], q[0], q[2]);
        for base in baselines {
            let b = index(base);
            let of_medians = q[1] / quartiles(&times[b])[1];
            let mut per_round: Vec<f64> =
                times[k].iter().zip(&times[b]).map(|(t, u)| t.as_secs_f64() / u.as_secs_f64()).collect();
            per_round.sort_by(f64::total_cmp);
            let within = per_round[per_round.len() / 2];
            line.push_str(&format!(" {:>20}", format!("{of_medians:.3} ({within:.3})")));
        }
        println!("{line}");
    }
}

/// p25, median, p75, in µs.
fn quartiles(times: &[Duration]) -> [f64; 3] {
    let mut sorted = times.to_vec();
    sorted.sort();
    let at = |q: usize| sorted[(sorted.len() - 1) * q / 4].as_secs_f64() * 1e6;
    [at(1), at(2), at(3)]
}
