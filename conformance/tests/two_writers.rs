//! Two processes on one session, through omni-blocking's handle (issue 22): each loads the
//! session, prompts, waits until the turn is saved and closes it, over and over, both at
//! once. Exactly one owns the session at a time: the other's `load` is refused with
//! `OwnedElsewhere` (a lock it does not wait for) and tries again. No turn a process was
//! told is saved may be missing, and the session loads after every round.
//!
//! The children are this test binary, run again with `two_writers_child` selected and the
//! store, session and name in environment variables; each starts its own replay server on
//! loopback, so the requests are real HTTP through the driver. They start together: each
//! waits for a start file the parent writes once both are running.
#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::disallowed_methods)] // a test: assertions, sleeps

use std::collections::BTreeMap;
use std::env;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use omni_blocking::{Client, Error, SessionEvent, Store, StoreErrorKind};
use omni_conformance::async_session::{writes_done, MODEL};
use omni_conformance::replay::ReplayServer;
use omni_conformance::scenarios::{paced, text_events};
use omni_conformance::session_drive::{replay_client, TempDir};
use omni_protocol::session::{SessionId, SessionState};
use omni_protocol::Role;
use omni_store::{FileStore, SqliteStore};

/// Turns each process saves.
const TURNS: usize = 25;
const CHILD_STORE: &str = "OMNI_TWO_WRITERS_STORE";
const CHILD_PATH: &str = "OMNI_TWO_WRITERS_PATH";
const CHILD_NAME: &str = "OMNI_TWO_WRITERS_NAME";
const CHILD_START: &str = "OMNI_TWO_WRITERS_START";
const SESSION: &str = "shared";

fn open_store(kind: &str, path: &Path) -> Arc<dyn Store> {
    match kind {
        "file" => Arc::new(FileStore::open(path).unwrap()),
        "sqlite" => Arc::new(SqliteStore::open(path).unwrap()),
        other => panic!("no store {other:?}"),
    }
}

#[test]
#[ignore = "the two-writers test's child process: the test runs it, with its store in the environment"]
fn two_writers_child() {
    let Ok(kind) = env::var(CHILD_STORE) else { return };
    let path = PathBuf::from(env::var(CHILD_PATH).unwrap());
    let name = env::var(CHILD_NAME).unwrap();
    let start = PathBuf::from(env::var(CHILD_START).unwrap());
    let store = open_store(&kind, &path);
    let replies = (0..TURNS).map(|_| paced(&text_events(&["Noted", "."]), Duration::ZERO)).collect();
    let server = ReplayServer::start(replies).unwrap();
    let client: Client = replay_client::<Client>(&server).unwrap();
    let id = SessionId::new(SESSION).unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    while !start.exists() {
        assert!(Instant::now() < deadline, "never started");
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut out = std::io::stdout();
    let (mut saved, mut refused) = (0, 0);
    while saved < TURNS {
        assert!(Instant::now() < deadline, "{name}: {saved} turns saved, {refused} refusals, out of time");
        let session = match client.agent(MODEL).session(store.clone()).load(id.clone()) {
            Ok(session) => session,
            Err(Error::Store(e)) if e.kind == StoreErrorKind::OwnedElsewhere => {
                refused += 1;
                writeln!(out, "refused").unwrap();
                std::thread::yield_now();
                continue;
            }
            Err(e) => panic!("{name}: the session does not load: {e}"),
        };
        let (_, events) = session.subscribe().unwrap();
        let text = format!("{name} turn {saved}");
        session.prompt(text.clone()).unwrap();
        loop {
            let event = events.recv_timeout(Duration::from_secs(30)).expect("the turn's events");
            if let SessionEvent::Store { result: Err(e), .. } = &event {
                panic!("{name}: a write of the owner failed: {e}");
            }
            if writes_done(&event) {
                break;
            }
        }
        assert!(session.is_saved().unwrap());
        writeln!(out, "saved {text}").unwrap();
        out.flush().unwrap();
        session.close().unwrap();
        saved += 1;
    }
    writeln!(out, "done refused={refused}").unwrap();
}

/// Runs both children on a store of `kind` and checks the session they shared.
fn two_writers(kind: &str) {
    let dir = TempDir::new(&format!("two-writers-{kind}"));
    std::fs::create_dir_all(&dir.0).unwrap();
    let path = match kind {
        "file" => dir.0.join("sessions"),
        _ => dir.0.join("sessions.db"),
    };
    let store = open_store(kind, &path);
    let id = SessionId::new(SESSION).unwrap();
    let state = SessionState { model: Some(MODEL.into()), ..SessionState::default() };
    let claim = store.create(&id, &state).unwrap();
    store.release(&claim).unwrap();
    let start = dir.0.join("start");
    let exe = env::current_exe().unwrap();
    let children: Vec<_> = ["one", "two"]
        .into_iter()
        .map(|name| {
            Command::new(&exe)
                .args(["two_writers_child", "--exact", "--ignored", "--nocapture", "--test-threads=1"])
                .env(CHILD_STORE, kind)
                .env(CHILD_PATH, &path)
                .env(CHILD_NAME, name)
                .env(CHILD_START, &start)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    std::fs::write(&start, b"go").unwrap();
    let mut saved = Vec::new();
    let mut refusals = 0;
    for child in children {
        let output = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "a child failed ({}):\n{stdout}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        // libtest may print `test two_writers_child ... ` ahead of the first line.
        saved.extend(stdout.lines().filter_map(|line| line.split_once("saved ")).map(|(_, text)| text.to_string()));
        refusals += stdout.lines().filter(|line| line.ends_with("refused")).count();
    }
    assert_eq!(saved.len(), 2 * TURNS);
    // Every turn reported saved is there, once, with its reply under it; the turns form
    // one chain, each owner going on from where the last one left the session.
    let loaded = store.load(&id).unwrap();
    let tree = &loaded.tree;
    let mut users: BTreeMap<String, usize> = BTreeMap::new();
    for node in tree.nodes().iter().filter(|node| node.message.role == Role::User) {
        *users.entry(node.message.text()).or_default() += 1;
        let replies = tree.children(node.id);
        assert_eq!(replies.len(), 1, "{:?} has one reply", node.message.text());
    }
    for text in &saved {
        assert_eq!(users.get(text), Some(&1), "{text}: reported saved, stored once");
    }
    assert_eq!(tree.len(), 4 * TURNS, "nothing but the saved turns");
    assert_eq!(tree.path().len(), tree.len(), "one chain: every owner resumed the last one's path");
    // The session loads through the handle.
    let server = ReplayServer::start(Vec::new()).unwrap();
    let client: Client = replay_client::<Client>(&server).unwrap();
    let session = client.agent(MODEL).session(store).load(id).unwrap();
    assert_eq!(session.tree().unwrap().len(), 4 * TURNS);
    session.close().unwrap();
    eprintln!("two writers, {kind} store: {} turns saved, {refusals} loads refused as owned elsewhere", saved.len());
    // Without refusals the two never overlapped, and the test proved nothing.
    assert!(refusals > 0, "the two processes never wanted the session at the same time");
}

#[test]
fn two_processes_share_a_file_session_one_writer_at_a_time() {
    two_writers("file");
}

#[test]
fn two_processes_share_a_sqlite_session_one_writer_at_a_time() {
    two_writers("sqlite");
}
