//! The SQLite store: its contract on one database file, and what only it can get wrong
//! (its schema version, a corrupt row, a file that is not a database, the cascade).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Barrier;
use std::thread;
use std::time::{SystemTime, UNIX_EPOCH};

use omni_core::machines::session::tree::{NodeId, Tree};
use omni_core::{Message, Usage};
use omni_store::{Claim, SessionId, SessionState, SqliteStore, Store, StoreErrorKind};

/// A fresh folder under the system's temporary one, removed when dropped (even when the
/// test fails), so runs and parallel tests never share a database.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        static COUNT: AtomicUsize = AtomicUsize::new(0);
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let n = COUNT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("omni-sqlite-{name}-{}-{nanos}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temporary folder");
        Self(dir)
    }

    fn db(&self) -> PathBuf {
        self.0.join("sessions.db")
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn id(name: &str) -> SessionId {
    SessionId::new(name).expect("a valid id")
}

fn state(title: &str, tree: &Tree) -> SessionState {
    SessionState {
        model: Some("openai:gpt-5".into()),
        system: Some("Be brief.".into()),
        options: Some(serde_json::json!({"temperature": 0.5})),
        title: Some(title.into()),
        position: tree.position(),
        nodes: tree.len() as u64,
    }
}

fn raw(path: &Path) -> rusqlite::Connection {
    rusqlite::Connection::open(path).expect("a raw connection")
}

#[test]
fn a_branched_tree_round_trips_through_incremental_appends() {
    let dir = TempDir::new("round-trip");
    let store = SqliteStore::open(dir.db()).unwrap();
    let session = id("branched");
    let mut tree = Tree::new();
    let claim = store.create(&session, &state("branched", &tree)).unwrap();
    let usage = Usage { input_tokens: 10, output_tokens: 2, ..Usage::default() };
    let mut saved = 0;
    let mut commit = |tree: &Tree| {
        store.append_nodes(&claim, &tree.nodes()[saved..]).unwrap();
        saved = tree.len();
        store.save_state(&claim, &state("branched", tree)).unwrap();
    };
    tree.append(vec![Message::user("hi"), Message::assistant("hello")], Some(usage));
    commit(&tree);
    tree.append(vec![Message::user("more"), Message::assistant("sure")], Some(usage));
    commit(&tree);
    // Regenerate the first reply: a sibling of node 1.
    tree.truncate_to(NodeId(0)).unwrap();
    tree.append(vec![Message::assistant("hello again")], Some(usage));
    commit(&tree);
    // Back onto the first branch, down to its tip.
    tree.navigate(Some(NodeId(1))).unwrap();
    store.save_state(&claim, &state("branched", &tree)).unwrap();
    assert_eq!(tree.path(), [NodeId(0), NodeId(1), NodeId(2), NodeId(3)]);

    // A second handle (a new process, say) reads it all back.
    drop(store);
    let loaded = SqliteStore::open(dir.db()).unwrap().load(&session).unwrap();
    assert_eq!(loaded.tree, tree);
    assert_eq!(loaded.state, state("branched", &tree));
    assert!(loaded.warnings.is_empty());
    assert_eq!(loaded.tree.siblings(NodeId(1)).unwrap(), [NodeId(1), NodeId(4)]);
}

#[test]
fn appends_that_would_break_the_tree_are_refused_whole() {
    let dir = TempDir::new("refused");
    let store = SqliteStore::open(dir.db()).unwrap();
    let session = id("s");
    let mut tree = Tree::new();
    let claim = store.create(&session, &state("s", &tree)).unwrap();
    tree.append(vec![Message::user("a"), Message::assistant("b")], None);
    store.append_nodes(&claim, tree.nodes()).unwrap();
    // The same nodes again: node 0 is not the next one.
    let again = store.append_nodes(&claim, tree.nodes()).unwrap_err();
    assert_eq!(again.kind, StoreErrorKind::Conflict);
    assert!(again.location.ends_with("sessions.db:nodes(s)"), "{again}");
    // A gap: node 3 without node 2.
    tree.append(vec![Message::user("c"), Message::assistant("d")], None);
    assert_eq!(store.append_nodes(&claim, &tree.nodes()[3..]).unwrap_err().kind, StoreErrorKind::Conflict);
    // Nothing of a refused write was kept; the right append goes through.
    assert_eq!(store.load(&session).unwrap().tree.len(), 2);
    store.append_nodes(&claim, &tree.nodes()[2..]).unwrap();
    assert_eq!(store.load(&session).unwrap().tree.nodes(), tree.nodes());
}

#[test]
fn an_id_is_created_once_even_by_racing_handles() {
    let dir = TempDir::new("create");
    let store = SqliteStore::open(dir.db()).unwrap();
    let claim = store.create(&id("once"), &state("first", &Tree::new())).unwrap();
    store.release(&claim).unwrap();
    let again = store.create(&id("once"), &state("second", &Tree::new())).unwrap_err();
    assert_eq!(again.kind, StoreErrorKind::Exists);
    assert_eq!(store.load(&id("once")).unwrap().state.title.as_deref(), Some("first"));

    // Eight threads, each opening its own handle on the same (new) file at once: every
    // open succeeds (the schema is made once) and exactly one create wins.
    let fresh = TempDir::new("race");
    let start = Barrier::new(8);
    let won: usize = thread::scope(|scope| {
        let racers: Vec<_> = (0..8)
            .map(|n| {
                let (start, db) = (&start, fresh.db());
                scope.spawn(move || {
                    start.wait();
                    let handle = SqliteStore::open(db).unwrap();
                    match handle.create(&id("raced"), &state(&format!("racer {n}"), &Tree::new())) {
                        Ok(_) => 1,
                        Err(e) if e.kind == StoreErrorKind::Exists => 0,
                        Err(e) => panic!("{e}"),
                    }
                })
            })
            .collect();
        racers.into_iter().map(|racer| racer.join().unwrap()).sum()
    });
    assert_eq!(won, 1);
}

#[test]
fn two_handles_write_different_sessions_at_once() {
    const TURNS: usize = 30;
    let dir = TempDir::new("writers");
    let ids = [id("one"), id("two")];
    thread::scope(|scope| {
        for session in &ids {
            let db = dir.db();
            scope.spawn(move || {
                let handle = SqliteStore::open(db).unwrap();
                let mut tree = Tree::new();
                let claim = handle.create(session, &state(session.as_str(), &tree)).unwrap();
                for turn in 0..TURNS {
                    let saved = tree.len();
                    tree.append(vec![Message::user(format!("{turn}")), Message::assistant(format!("{turn}"))], None);
                    handle.append_nodes(&claim, &tree.nodes()[saved..]).unwrap();
                    handle.save_state(&claim, &state(session.as_str(), &tree)).unwrap();
                }
            });
        }
    });
    let store = SqliteStore::open(dir.db()).unwrap();
    for session in &ids {
        let loaded = store.load(session).unwrap();
        assert_eq!(loaded.tree.len(), 2 * TURNS, "{session}");
        assert_eq!(loaded.tree.path().len(), 2 * TURNS, "{session}: the state of the last turn");
    }
}

#[test]
fn a_corrupt_node_row_is_named() {
    let dir = TempDir::new("corrupt-row");
    let store = SqliteStore::open(dir.db()).unwrap();
    let session = id("damaged");
    let mut tree = Tree::new();
    let claim = store.create(&session, &state("d", &tree)).unwrap();
    tree.append(vec![Message::user("a"), Message::assistant("b")], None);
    store.append_nodes(&claim, tree.nodes()).unwrap();
    raw(&dir.db())
        .execute("UPDATE omni_store_nodes SET body = '{\"id\": 1, ' WHERE session = 'damaged' AND id = 1", [])
        .unwrap();
    let e = store.load(&session).unwrap_err();
    assert_eq!(e.kind, StoreErrorKind::Corrupt);
    assert_eq!(e.location, format!("{}:nodes(damaged,1)", dir.db().display()));
    // A row that parses but holds another node's id is no better.
    let node0 = serde_json::to_string(&tree.nodes()[0]).unwrap();
    raw(&dir.db())
        .execute("UPDATE omni_store_nodes SET body = ?1 WHERE session = 'damaged' AND id = 1", [node0])
        .unwrap();
    assert_eq!(store.load(&session).unwrap_err().location, format!("{}:nodes(damaged,1)", dir.db().display()));
    // A broken state map too, at its row.
    raw(&dir.db()).execute("UPDATE omni_store_sessions SET state = 'nope' WHERE id = 'damaged'", []).unwrap();
    let e = store.load(&session).unwrap_err();
    assert_eq!((e.kind, e.location), (StoreErrorKind::Corrupt, format!("{}:sessions(damaged)", dir.db().display())));
}

#[test]
fn a_file_that_is_not_a_database_is_a_typed_error() {
    let dir = TempDir::new("not-a-db");
    std::fs::write(dir.db(), "these are not the bytes of a SQLite database, ".repeat(100)).unwrap();
    let e = SqliteStore::open(dir.db()).unwrap_err();
    assert_eq!(e.kind, StoreErrorKind::Corrupt, "{e}");
    assert_eq!(e.location, dir.db().display().to_string());
}

#[test]
fn a_newer_schema_is_refused_not_downgraded() {
    let dir = TempDir::new("newer");
    drop(SqliteStore::open(dir.db()).unwrap());
    raw(&dir.db()).execute("UPDATE omni_store_schema SET version = 3", []).unwrap();
    let e = SqliteStore::open(dir.db()).unwrap_err();
    assert_eq!(e.kind, StoreErrorKind::Io, "{e}");
    assert!(e.message.contains("version 3"), "{e}");
    let version: i64 = raw(&dir.db()).query_row("SELECT version FROM omni_store_schema", [], |row| row.get(0)).unwrap();
    assert_eq!(version, 3, "left as it was");
}

#[test]
fn list_is_newest_write_first_and_pages() {
    let dir = TempDir::new("list");
    let store = SqliteStore::open(dir.db()).unwrap();
    // No sleeps: several writes land in one millisecond, and the write counter orders them.
    let claims: Vec<Claim> = ["a", "b", "c", "d"]
        .into_iter()
        .map(|name| store.create(&id(name), &state(name, &Tree::new())).unwrap())
        .collect();
    store.save_state(&claims[1], &state("b, renamed", &Tree::new())).unwrap();
    let mut tree = Tree::new();
    tree.append(vec![Message::user("x")], None);
    store.append_nodes(&claims[0], tree.nodes()).unwrap();
    let all = store.list(usize::MAX, 0).unwrap().sessions;
    let order: Vec<&str> = all.iter().map(|info| info.id.as_str()).collect();
    assert_eq!(order, ["a", "b", "d", "c"]);
    assert_eq!(all[1].title.as_deref(), Some("b, renamed"));
    assert!(all.iter().all(|info| info.created_ms <= info.updated_ms && info.created_ms > 0));
    let page: Vec<String> = store.list(2, 1).unwrap().sessions.into_iter().map(|info| info.id.to_string()).collect();
    assert_eq!(page, ["b", "d"]);
    assert!(store.list(0, 0).unwrap().sessions.is_empty());
    assert!(store.list(10, 4).unwrap().sessions.is_empty());
}

#[test]
fn delete_takes_the_nodes_with_it() {
    let dir = TempDir::new("delete");
    let store = SqliteStore::open(dir.db()).unwrap();
    let mut tree = Tree::new();
    tree.append(vec![Message::user("a"), Message::assistant("b")], None);
    for name in ["gone", "kept"] {
        let claim = store.create(&id(name), &state(name, &Tree::new())).unwrap();
        store.save_tree(&claim, &tree).unwrap();
        store.release(&claim).unwrap();
    }
    assert!(store.delete(&id("gone")).unwrap());
    assert!(!store.delete(&id("gone")).unwrap());
    assert!(!store.exists(&id("gone")).unwrap());
    assert!(store.exists(&id("kept")).unwrap());
    let count = |session: &str| -> i64 {
        raw(&dir.db())
            .query_row("SELECT COUNT(*) FROM omni_store_nodes WHERE session = ?1", [session], |row| row.get(0))
            .unwrap()
    };
    assert_eq!((count("gone"), count("kept")), (0, 2));
}

#[test]
fn missing_sessions_are_not_found_and_nothing_is_made() {
    let dir = TempDir::new("missing");
    let store = SqliteStore::open(dir.db()).unwrap();
    let missing = id("missing");
    let mut tree = Tree::new();
    tree.append(vec![Message::user("a")], None);
    assert_eq!(store.load(&missing).unwrap_err().kind, StoreErrorKind::NotFound);
    assert_eq!(store.claim(&missing).unwrap_err().kind, StoreErrorKind::NotFound);
    let forged = Claim::new(missing.clone(), 1, None);
    assert_eq!(store.append_nodes(&forged, tree.nodes()).unwrap_err().kind, StoreErrorKind::NotOwner);
    assert_eq!(store.save_tree(&forged, &tree).unwrap_err().kind, StoreErrorKind::NotOwner);
    assert_eq!(store.save_state(&forged, &state("x", &tree)).unwrap_err().kind, StoreErrorKind::NotOwner);
    assert!(!store.exists(&missing).unwrap());
    let rows: i64 = raw(&dir.db()).query_row("SELECT COUNT(*) FROM omni_store_nodes", [], |row| row.get(0)).unwrap();
    assert_eq!(rows, 0);
}

#[test]
fn a_writer_that_holds_the_lock_too_long_is_an_io_error_after_the_timeout() {
    let dir = TempDir::new("busy");
    let store = SqliteStore::open(dir.db()).unwrap();
    let blocker = raw(&dir.db());
    blocker.execute_batch("BEGIN IMMEDIATE").unwrap();
    let started = std::time::Instant::now();
    let e = store.create(&id("late"), &state("late", &Tree::new())).unwrap_err();
    assert_eq!(e.kind, StoreErrorKind::Io, "{e}");
    assert!(started.elapsed() >= std::time::Duration::from_secs(4), "it waited for the lock first");
    // Reads go on meanwhile (WAL: readers never wait for the writer), and once the lock
    // is let go the write goes through.
    assert!(store.list(10, 0).unwrap().sessions.is_empty());
    blocker.execute_batch("ROLLBACK").unwrap();
    store.create(&id("late"), &state("late", &Tree::new())).unwrap();
}

/// The conformance suite every store passes, each call a new handle on one database file.
#[test]
fn passes_the_store_suite() {
    let dir = TempDir::new("suite");
    let db = dir.db();
    omni_store::suite::run(|| SqliteStore::open(&db).unwrap());
}
