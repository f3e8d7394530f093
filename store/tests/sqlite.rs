//! The SQLite store: its contract on one database file, and what only it can get wrong
//! (its schema version, a corrupt row, a file that is not a database, the cascade).
// Test helpers fail the test on any unexpected error, as the tests themselves do.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Barrier;
use std::thread;
use std::time::{SystemTime, UNIX_EPOCH};

use omni_protocol::session::{NodeId, Tree};
use omni_protocol::{Message, Usage};
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

/// Version 1 of the store's schema, as its code made it.
const SCHEMA_V1: &str = "
    CREATE TABLE sessions (
        id TEXT PRIMARY KEY NOT NULL,
        state TEXT NOT NULL,
        title TEXT,
        created_ms INTEGER NOT NULL,
        updated_ms INTEGER NOT NULL,
        seq INTEGER NOT NULL
    );
    CREATE INDEX sessions_recent ON sessions (updated_ms DESC, seq DESC);
    CREATE INDEX sessions_seq ON sessions (seq);
    CREATE TABLE nodes (
        session TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
        id INTEGER NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (session, id)
    ) WITHOUT ROWID;
    PRAGMA user_version = 1;
";

fn tables(db: &Path) -> Vec<String> {
    let connection = raw(db);
    let mut select = connection.prepare("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name").unwrap();
    let names = select.query_map([], |row| row.get(0)).unwrap().collect::<Result<_, _>>().unwrap();
    names
}

#[test]
fn a_version_1_database_is_migrated_keeping_every_session() {
    let dir = TempDir::new("v1");
    let mut tree = Tree::new();
    tree.append(vec![Message::user("hi"), Message::assistant("hello")], None);
    {
        let old = raw(&dir.db());
        old.execute_batch("PRAGMA journal_mode = WAL;").unwrap();
        old.execute_batch(SCHEMA_V1).unwrap();
        for (n, name) in ["old-one", "old-two"].into_iter().enumerate() {
            let json = serde_json::to_string(&state(name, &tree)).unwrap();
            old.execute(
                "INSERT INTO sessions VALUES (?1, ?2, ?1, 1000, ?3, ?3)",
                rusqlite::params![name, json, 2000 + n as i64],
            )
            .unwrap();
            for node in tree.nodes() {
                let body = serde_json::to_string(node).unwrap();
                old.execute("INSERT INTO nodes VALUES (?1, ?2, ?3)", rusqlite::params![name, node.id.0 as i64, body])
                    .unwrap();
            }
        }
    }
    let store = SqliteStore::open(dir.db()).unwrap();
    assert_eq!(tables(&dir.db()), ["omni_store_nodes", "omni_store_schema", "omni_store_sessions"]);
    let version: i64 = raw(&dir.db()).pragma_query_value(None, "user_version", |row| row.get(0)).unwrap();
    assert_eq!(version, 0, "user_version is the application's again");
    let listed = store.list(usize::MAX, 0).unwrap();
    let ids: Vec<&str> = listed.sessions.iter().map(|info| info.id.as_str()).collect();
    assert_eq!(ids, ["old-two", "old-one"], "in the order they were written");
    assert_eq!((listed.sessions[1].created_ms, listed.sessions[1].updated_ms), (1000, 2000));
    for session in ["old-one", "old-two"] {
        let loaded = store.load(&id(session)).unwrap();
        assert_eq!((loaded.tree, loaded.state), (tree.clone(), state(session, &tree)));
    }
    // The migrated sessions are claimed and written as any.
    let claim = store.claim(&id("old-one")).unwrap();
    let mut more = tree.clone();
    more.append(vec![Message::user("again")], None);
    store.append_nodes(&claim, &more.nodes()[2..]).unwrap();
    assert_eq!(store.load(&id("old-one")).unwrap().tree.len(), 3);
    drop(store);
    SqliteStore::open(dir.db()).unwrap();
}

#[test]
fn another_applications_database_is_refused_unless_shared() {
    let dir = TempDir::new("foreign");
    raw(&dir.db()).execute_batch("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total INTEGER);").unwrap();
    let bytes = std::fs::read(dir.db()).unwrap();
    let e = SqliteStore::open(dir.db()).unwrap_err();
    assert_eq!(e.kind, StoreErrorKind::Denied, "{e}");
    assert!(e.message.contains("invoices") && e.message.contains("open_shared"), "{e}");
    assert_eq!(std::fs::read(dir.db()).unwrap(), bytes, "nothing added, not even WAL mode");
    assert_eq!(tables(&dir.db()), ["invoices"]);

    // Shared: the store's tables beside the application's, which stay as they were.
    let store = SqliteStore::open_shared(dir.db()).unwrap();
    let claim = store.create(&id("beside"), &state("beside", &Tree::new())).unwrap();
    store.release(&claim).unwrap();
    assert_eq!(tables(&dir.db()), ["invoices", "omni_store_nodes", "omni_store_schema", "omni_store_sessions"]);
    assert_eq!(SqliteStore::open(dir.db()).unwrap_err().kind, StoreErrorKind::Denied, "still refused unshared");
    assert!(SqliteStore::open_shared(dir.db()).unwrap().exists(&id("beside")).unwrap());
    let version: i64 = raw(&dir.db()).pragma_query_value(None, "user_version", |row| row.get(0)).unwrap();
    assert_eq!(version, 0);

    // A fresh empty file, or one with only the store's tables, opens plainly.
    let empty = TempDir::new("empty");
    std::fs::write(empty.db(), b"").unwrap();
    drop(SqliteStore::open(empty.db()).unwrap());
    SqliteStore::open(empty.db()).unwrap();
}

#[test]
fn opening_does_not_wait_for_a_writer() {
    let dir = TempDir::new("open-busy");
    drop(SqliteStore::open(dir.db()).unwrap());
    let blocker = raw(&dir.db());
    blocker.execute_batch("BEGIN IMMEDIATE; INSERT INTO omni_store_schema (version) VALUES (2);").unwrap();
    let started = std::time::Instant::now();
    let store = SqliteStore::open(dir.db()).unwrap();
    assert!(started.elapsed() < std::time::Duration::from_secs(2), "{:?}", started.elapsed());
    assert!(store.list(10, 0).unwrap().sessions.is_empty());
    blocker.execute_batch("ROLLBACK").unwrap();
}

#[test]
fn list_reports_bad_rows_and_lists_the_rest() {
    let dir = TempDir::new("bad-rows");
    let store = SqliteStore::open(dir.db()).unwrap();
    for name in ["a", "b", "c", "d"] {
        let claim = store.create(&id(name), &state(name, &Tree::new())).unwrap();
        store.release(&claim).unwrap();
    }
    let db = raw(&dir.db());
    db.execute("UPDATE omni_store_sessions SET id = 'not an id' WHERE id = 'b'", []).unwrap();
    db.execute("UPDATE omni_store_sessions SET state = '{' WHERE id = 'c'", []).unwrap();
    let listed = store.list(usize::MAX, 0).unwrap();
    let ids: Vec<&str> = listed.sessions.iter().map(|info| info.id.as_str()).collect();
    assert_eq!(ids, ["d", "a"]);
    let reported: Vec<_> = listed.unreadable.iter().map(|e| (e.kind, e.location.clone())).collect();
    let at = |row: &str| (StoreErrorKind::Corrupt, format!("{}:sessions({row})", dir.db().display()));
    assert_eq!(reported, [at("c"), at("not an id")]);
    // Bad rows shift no page, and every page reports them.
    let page = store.list(1, 1).unwrap();
    assert_eq!(page.sessions.iter().map(|info| info.id.as_str()).collect::<Vec<_>>(), ["a"]);
    assert_eq!(page.unreadable.len(), 2);
}

#[test]
fn the_database_fences_writes_by_the_owner_token_in_the_row() {
    let dir = TempDir::new("fenced-row");
    let store = SqliteStore::open(dir.db()).unwrap();
    let session = id("s");
    let created = store.create(&session, &state("s", &Tree::new())).unwrap();
    let owner = || -> i64 {
        raw(&dir.db()).query_row("SELECT owner FROM omni_store_sessions WHERE id = 's'", [], |row| row.get(0)).unwrap()
    };
    assert_eq!(owner(), created.token() as i64);
    store.release(&created).unwrap();
    let claim = store.claim(&session).unwrap();
    assert_eq!(owner(), claim.token() as i64, "a claim writes its token into the row");
    // Another machine claims the session through a lock that lied to both: its token is
    // in the row now, and this owner's writes are refused by the database itself.
    raw(&dir.db()).execute("UPDATE omni_store_sessions SET owner = owner + 7 WHERE id = 's'", []).unwrap();
    let mut tree = Tree::new();
    tree.append(vec![Message::user("late")], None);
    let e = store.append_nodes(&claim, tree.nodes()).unwrap_err();
    assert_eq!(e.kind, StoreErrorKind::NotOwner, "{e}");
    assert_eq!(store.save_state(&claim, &state("late", &tree)).unwrap_err().kind, StoreErrorKind::NotOwner);
    assert_eq!(store.save_tree(&claim, &tree).unwrap_err().kind, StoreErrorKind::NotOwner);
    let loaded = store.load(&session).unwrap();
    assert!(loaded.tree.is_empty() && loaded.state == state("s", &Tree::new()), "nothing written");
}

#[test]
fn a_new_owners_token_is_above_the_rows_even_when_the_lock_files_are_gone() {
    let dir = TempDir::new("token-rises");
    let store = SqliteStore::open(dir.db()).unwrap();
    let session = id("s");
    let created = store.create(&session, &state("s", &Tree::new())).unwrap();
    store.release(&created).unwrap();
    drop(store);
    let mut last = created.token();
    for _ in 0..3 {
        // The lock files' counts lost (removed by hand, or another machine's folder): the
        // row still knows the last owner, and the next one goes above it.
        let mut locks = dir.db().into_os_string();
        locks.push(".omni-locks");
        std::fs::remove_dir_all(&locks).unwrap();
        let store = SqliteStore::open(dir.db()).unwrap();
        let claim = store.claim(&session).unwrap();
        assert!(claim.token() > last, "{} after {last}", claim.token());
        last = claim.token();
        store.release(&claim).unwrap();
        let again = store.claim(&session).unwrap();
        assert!(again.token() > last, "and the lock file counts on from it");
        last = again.token();
        store.release(&again).unwrap();
    }
}

/// Whether this process can write a file whose permissions say it cannot (root can).
#[cfg(unix)]
fn permissions_are_enforced(dir: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let probe = dir.join("probe");
    std::fs::write(&probe, "x").unwrap();
    std::fs::set_permissions(&probe, std::fs::Permissions::from_mode(0o444)).unwrap();
    let enforced = std::fs::OpenOptions::new().write(true).open(&probe).is_err();
    std::fs::remove_file(&probe).unwrap();
    enforced
}

/// What a read-only handle on a database holding session `kept` can and cannot do.
fn reads_but_never_writes(store: &SqliteStore, kept: &SessionId) {
    assert!(!store.is_writable());
    assert_eq!(store.load(kept).unwrap().tree.len(), 2);
    assert!(store.exists(kept).unwrap());
    assert_eq!(store.list(10, 0).unwrap().sessions.len(), 1);
    let denied = |result: Result<(), omni_store::StoreError>| {
        assert_eq!(result.unwrap_err().kind, StoreErrorKind::Denied);
    };
    denied(store.create(&id("new"), &state("new", &Tree::new())).map(drop));
    denied(store.claim(kept).map(drop));
    denied(store.delete(kept).map(drop));
    let forged = Claim::new(kept.clone(), 1, None);
    denied(store.save_state(&forged, &state("x", &Tree::new())));
    denied(store.save_tree(&forged, &Tree::new()));
}

fn with_one_session(dir: &TempDir) -> SessionId {
    let store = SqliteStore::open(dir.db()).unwrap();
    let kept = id("kept");
    let mut tree = Tree::new();
    let claim = store.create(&kept, &state("kept", &tree)).unwrap();
    tree.append(vec![Message::user("a"), Message::assistant("b")], None);
    store.append_nodes(&claim, tree.nodes()).unwrap();
    kept
}

#[test]
fn a_read_only_handle_reads_and_is_denied_writes() {
    let dir = TempDir::new("read-only-handle");
    let kept = with_one_session(&dir);
    reads_but_never_writes(&SqliteStore::open_read_only(dir.db()).unwrap(), &kept);
    // Nothing to read is nothing to open read-only.
    let empty = TempDir::new("read-only-empty");
    assert!(SqliteStore::open_read_only(empty.db()).is_err());
}

#[cfg(unix)]
#[test]
fn a_read_only_database_or_folder_is_opened_read_only() {
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new("read-only-file");
    if !permissions_are_enforced(&dir.0) {
        eprintln!("skipped: file permissions are not enforced for this user (root); open_read_only is tested instead");
        return;
    }
    let set = |path: &Path, mode: u32| std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    let kept = with_one_session(&dir);
    set(&dir.db(), 0o444);
    reads_but_never_writes(&SqliteStore::open(dir.db()).unwrap(), &kept);
    set(&dir.db(), 0o644);

    let folder = TempDir::new("read-only-folder");
    let kept = with_one_session(&folder);
    set(&folder.0, 0o555);
    let opened = SqliteStore::open(folder.db());
    set(&folder.0, 0o755);
    let store = opened.unwrap();
    set(&folder.0, 0o555);
    reads_but_never_writes(&store, &kept);
    set(&folder.0, 0o755);
}
