//! Sessions shared by machines: two session managers as two OS processes (the
//! `manager-node` program) on one PostgreSQL database. The second `open` is refused while
//! the first node owns the session, and names it; once the first is killed (SIGKILL), the
//! second opens the session when the lease lapses and finds every committed turn; a node
//! frozen (SIGSTOP) past its lease cannot write when it wakes, and stops the session with
//! the reason; the feed crosses nodes, and catches up after its listener was cut off.
//!
//! The server is `OMNI_PG_URL`'s (`eval "$(scripts/postgres.sh start)"`); without it each
//! test says it was skipped, except in CI, where it fails.
#![cfg(feature = "postgres")]
#![allow(clippy::disallowed_methods, clippy::disallowed_types, clippy::unwrap_used)]

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant};

use omni_protocol::session::{SessionId, Store};
use omni_store::postgres_testing::TestDatabase;

/// The nodes' lease.
const LEASE_MS: u64 = 1_000;
/// The longest a node may take to answer a command, or a feed event to come.
const ANSWER: Duration = Duration::from_secs(20);

/// One node: its process, its commands in, its answers and feed out.
struct Node {
    name: &'static str,
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
    /// Feed lines read while waiting for an answer.
    feed: Vec<String>,
}

impl Node {
    fn start(db: &TestDatabase, name: &'static str) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_manager-node"))
            .args([db.url(), name, &LEASE_MS.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("the node starts");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let mut node = Self { name, child, stdin, lines, feed: Vec::new() };
        assert_eq!(node.line(), "ready", "node {name}");
        node
    }

    fn line(&mut self) -> String {
        match self.lines.recv_timeout(ANSWER) {
            Ok(line) => line,
            Err(RecvTimeoutError::Timeout) => panic!("node {} said nothing for {ANSWER:?}", self.name),
            Err(RecvTimeoutError::Disconnected) => panic!("node {} ended", self.name),
        }
    }

    /// Sends a command and returns its answer (`ok ...` or `err ...`).
    fn ask(&mut self, command: &str) -> String {
        writeln!(self.stdin, "{command}").unwrap();
        self.stdin.flush().unwrap();
        loop {
            let line = self.line();
            if line.starts_with("feed ") {
                self.feed.push(line);
            } else {
                return line;
            }
        }
    }

    /// Feed lines until one contains `what` (those seen already first).
    fn feed_until(&mut self, what: &str) -> Vec<String> {
        let deadline = Instant::now() + ANSWER;
        let mut seen = Vec::new();
        loop {
            if let Some(at) = self.feed.iter().position(|line| line.contains(what)) {
                seen.extend(self.feed.drain(..=at));
                return seen;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => self.feed.push(line),
                Err(_) => panic!("node {}: no feed line with {what:?}; seen {:?} {:?}", self.name, seen, self.feed),
            }
        }
    }

    fn signal(&self, signal: &str) {
        let status = Command::new("kill").args([signal, &self.child.id().to_string()]).status().unwrap();
        assert!(status.success(), "kill {signal}");
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn id(name: &str) -> SessionId {
    SessionId::new(name).unwrap()
}

#[test]
fn a_second_node_is_refused_and_takes_over_after_the_first_is_killed() {
    let Some(db) = TestDatabase::new("nodes_kill") else { return };
    let mut b = Node::start(&db, "b");
    let mut a = Node::start(&db, "a");
    assert_eq!(a.ask("create s1"), "ok created");
    assert_eq!(a.ask("prompt s1 Hi"), "ok saved");
    b.feed_until("opened s1");
    let refused = b.ask("open s1");
    assert!(refused.contains("OwnedElsewhere { node: Some(\"a\") }"), "{refused}");
    assert_eq!(b.ask("whereis s1"), "ok elsewhere a");
    assert_eq!(b.ask("list-open"), "ok open s1@a");

    a.child.kill().unwrap();
    a.child.wait().unwrap();
    let started = Instant::now();
    let opened = b.ask("open s1 10000");
    assert_eq!(opened, "ok opened Started nodes=2", "every committed turn is there");
    assert!(started.elapsed() < Duration::from_millis(LEASE_MS * 5), "taken soon after the lease lapsed");
    assert_eq!(b.ask("prompt s1 Again"), "ok saved");
    assert_eq!(b.ask("whereis s1"), "ok here");
    let store = db.store("check", Duration::from_secs(30));
    assert_eq!(store.load(&id("s1")).unwrap().tree.len(), 4, "both nodes' turns");
}

#[test]
fn a_frozen_node_cannot_write_after_its_lease_was_taken_over() {
    let Some(db) = TestDatabase::new("nodes_freeze") else { return };
    let mut a = Node::start(&db, "a");
    let mut b = Node::start(&db, "b");
    assert_eq!(a.ask("create s2"), "ok created");
    assert_eq!(a.ask("prompt s2 First"), "ok saved");

    a.signal("-STOP");
    thread::sleep(Duration::from_millis(LEASE_MS * 2));
    assert_eq!(b.ask("open s2"), "ok opened Started nodes=2");
    assert_eq!(b.ask("prompt s2 Second"), "ok saved");
    a.signal("-CONT");

    // Awake, the frozen node learns its lease is gone; whatever it tries is not written.
    let late = a.ask("prompt s2 Late");
    assert!(late.starts_with("err"), "{late}");
    let closed = a.feed_until("closed s2");
    assert!(closed.last().unwrap().contains("lease lost"), "{closed:?}");
    let store = db.store("check", Duration::from_secs(30));
    let kept = store.load(&id("s2")).unwrap();
    let texts: Vec<String> = kept.tree.messages().iter().map(omni_protocol::Message::text).collect();
    assert_eq!(kept.tree.len(), 4, "{texts:?}");
    assert!(!texts.iter().any(|text| text == "Late"), "{texts:?}");
    assert_eq!(texts[2], "Second");
}

#[test]
fn the_feed_crosses_nodes_and_catches_up_after_its_listener_is_cut_off() {
    let Some(db) = TestDatabase::new("nodes_feed") else { return };
    let mut b = Node::start(&db, "b");
    let mut a = Node::start(&db, "a");
    assert_eq!(a.ask("create s3"), "ok created");
    b.feed_until("opened s3 Idle None");
    assert_eq!(a.ask("prompt s3 How do I sort a Vec?"), "ok saved");
    b.feed_until("title s3 Some(\"How do I sort a Vec?\")");

    // Cut off b's listener (its connection is the one that last ran LISTEN): the rename
    // comes while it is away, and the catch-up when it listens again tells it.
    assert!(db.kill_connections_running("LISTEN") >= 1, "a listener was connected");
    assert_eq!(a.ask("rename s3 Renamed"), "ok renamed");
    b.feed_until("title s3 Some(\"Renamed\")");
    assert_eq!(a.ask("close s3"), "ok closed");
    let closed = b.feed_until("closed s3");
    assert_eq!(closed.last().unwrap(), "feed closed s3 closed");
    assert_eq!(b.ask("whereis s3"), "ok nowhere");
}
