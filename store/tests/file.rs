//! The file store: the conformance suite, then what only files can do (torn and corrupt
//! lines, damaged or unreadable files, half-made sessions) and the checks the store's
//! brief names, each in a temporary directory of its own.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Barrier;
use std::thread;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use omni_core::machines::session::tree::{NodeId, Tree};
use omni_core::Message;
use omni_store::{FileStore, SessionId, SessionState, Store, StoreErrorKind, StoreWarning};

/// A directory under the system's temporary one, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let path = std::env::temp_dir().join(format!("omni-file-store-{name}-{}-{nanos}", std::process::id()));
        Self(path)
    }

    fn store(&self) -> FileStore {
        FileStore::open(&self.0).expect("the store opens")
    }

    fn file(&self, id: &SessionId, name: &str) -> PathBuf {
        self.0.join(id.as_str()).join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn id(name: &str) -> SessionId {
    SessionId::new(name).expect("a valid id")
}

fn state(tree: &Tree) -> SessionState {
    SessionState { title: Some("t".into()), position: tree.position(), ..SessionState::default() }
}

fn append_raw(path: &Path, bytes: &[u8]) {
    OpenOptions::new().append(true).open(path).expect("opens").write_all(bytes).expect("appends");
}

/// A session of two nodes, u0 ─ a1.
fn two_nodes(store: &FileStore, session: &SessionId) -> Tree {
    let mut tree = Tree::new();
    store.create(session, &state(&tree)).expect("created");
    tree.append(vec![Message::user("hi"), Message::assistant("hello")], None);
    store.append_nodes(session, tree.nodes()).expect("appended");
    store.save_state(session, &state(&tree)).expect("saved");
    tree
}

#[test]
fn the_file_store_passes_the_suite() {
    let dir = TempDir::new("suite");
    omni_store::suite::run(|| dir.store());
}

#[test]
fn a_branched_tree_round_trips_through_appends() {
    let dir = TempDir::new("branched");
    let store = dir.store();
    let session = id("branched");
    let mut tree = Tree::new();
    store.create(&session, &state(&tree)).unwrap();
    let mut saved = 0;
    let mut commit = |tree: &Tree| {
        store.append_nodes(&session, &tree.nodes()[saved..]).unwrap();
        saved = tree.len();
        store.save_state(&session, &state(tree)).unwrap();
    };
    tree.append(vec![Message::user("a"), Message::assistant("b")], None);
    commit(&tree);
    tree.append(vec![Message::user("c"), Message::assistant("d")], None);
    commit(&tree);
    tree.truncate_to(NodeId(2)).unwrap();
    tree.append(vec![Message::assistant("d again")], None);
    commit(&tree);
    tree.navigate(Some(NodeId(3))).unwrap();
    commit(&tree);
    let loaded = store.load(&session).unwrap();
    assert_eq!(loaded.tree, tree);
    assert_eq!(loaded.state, state(&tree));
    assert!(loaded.warnings.is_empty());
    assert_eq!(loaded.tree.messages().last().map(Message::text).as_deref(), Some("d"));
    // Another handle on the directory reads the same.
    assert_eq!(dir.store().load(&session).unwrap().tree, tree);
}

#[test]
fn a_torn_last_line_is_left_out_and_cut_before_the_next_append() {
    let dir = TempDir::new("torn");
    let store = dir.store();
    let session = id("torn");
    let mut tree = two_nodes(&store, &session);
    let nodes = dir.file(&session, "nodes.jsonl");
    let fragment = br#"{"id":2,"message":{"ro"#;
    append_raw(&nodes, fragment);
    let loaded = store.load(&session).unwrap();
    assert_eq!(loaded.tree, tree);
    let torn = StoreWarning::TornRecord { location: nodes.display().to_string(), bytes: fragment.len() };
    assert_eq!(loaded.warnings, [torn]);
    // The next append cuts the fragment off (else it would be a corrupt middle line).
    tree.append(vec![Message::user("after the tear")], None);
    store.append_nodes(&session, &tree.nodes()[2..]).unwrap();
    store.save_state(&session, &state(&tree)).unwrap();
    let loaded = store.load(&session).unwrap();
    assert_eq!((loaded.tree, loaded.warnings), (tree.clone(), vec![]));

    // A whole last line that is not a node is torn too, and cut likewise.
    append_raw(&nodes, b"{\"id\":3,\"garbage\n");
    let loaded = store.load(&session).unwrap();
    let torn = StoreWarning::TornRecord { location: nodes.display().to_string(), bytes: 17 };
    assert_eq!((loaded.tree, loaded.warnings), (tree.clone(), vec![torn]));
    tree.append(vec![Message::assistant("and on")], None);
    store.append_nodes(&session, &tree.nodes()[3..]).unwrap();
    store.save_state(&session, &state(&tree)).unwrap();
    assert_eq!(store.load(&session).unwrap().tree, tree);
}

#[test]
fn damaged_files_are_corrupt_where_they_are_damaged() {
    let dir = TempDir::new("corrupt");
    let store = dir.store();
    let session = id("middle");
    two_nodes(&store, &session);
    let nodes = dir.file(&session, "nodes.jsonl");
    let text = fs::read_to_string(&nodes).unwrap();
    let (first, rest) = text.split_once('\n').unwrap();
    fs::write(&nodes, format!("{first}\nnot json\n{rest}")).unwrap();
    let error = store.load(&session).unwrap_err();
    assert_eq!(error.kind, StoreErrorKind::Corrupt);
    assert_eq!(error.location, format!("{}:2", nodes.display()), "{error}");
    assert!(error.location.ends_with("nodes.jsonl:2"));

    let session = id("state");
    two_nodes(&store, &session);
    let path = dir.file(&session, "session.json");
    fs::write(&path, "{\"created_ms\": 1, \"state\": ").unwrap();
    let error = store.load(&session).unwrap_err();
    assert_eq!((error.kind, error.location), (StoreErrorKind::Corrupt, path.display().to_string()));
    assert!(store.list(10, 0).unwrap().iter().all(|info| info.id != session), "list leaves it out");
    // Saving the state whole repairs it (the creation time is then lost: now).
    store.save_state(&session, &SessionState::default()).unwrap();
    assert_eq!(store.load(&session).unwrap().tree.len(), 2);
}

#[test]
fn a_missing_session_is_not_found_and_a_bad_batch_is_refused() {
    let dir = TempDir::new("missing");
    let store = dir.store();
    let session = id("nobody");
    let error = store.load(&session).unwrap_err();
    assert_eq!((error.kind, error.location), (StoreErrorKind::NotFound, dir.0.join("nobody").display().to_string()));
    assert_eq!(store.save_tree(&session, &Tree::new()).unwrap_err().kind, StoreErrorKind::NotFound);
    assert!(!store.delete(&session).unwrap());
    assert!(!store.exists(&session).unwrap(), "no write made it");

    // Nodes that do not follow the file are refused before anything is written.
    let session = id("batch");
    let tree = two_nodes(&store, &session);
    let before = fs::read(dir.file(&session, "nodes.jsonl")).unwrap();
    let error = store.append_nodes(&session, tree.nodes()).unwrap_err();
    assert_eq!(error.kind, StoreErrorKind::Corrupt, "{error}");
    assert_eq!(fs::read(dir.file(&session, "nodes.jsonl")).unwrap(), before);
    store.append_nodes(&session, &[]).unwrap();
}

#[cfg(unix)]
#[test]
fn an_unreadable_file_is_denied() {
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new("denied");
    let store = dir.store();
    let session = id("locked");
    two_nodes(&store, &session);
    let nodes = dir.file(&session, "nodes.jsonl");
    fs::set_permissions(&nodes, fs::Permissions::from_mode(0o000)).unwrap();
    if fs::read(&nodes).is_ok() {
        eprintln!("skipped: permissions are not enforced here (running as root?)");
        return;
    }
    let error = store.load(&session).unwrap_err();
    assert_eq!((error.kind, error.location), (StoreErrorKind::Denied, nodes.display().to_string()));
    let mut more = Tree::new();
    more.append(vec![Message::user("x")], None);
    assert_eq!(store.append_nodes(&session, more.nodes()).unwrap_err().kind, StoreErrorKind::Denied);
    fs::set_permissions(&nodes, fs::Permissions::from_mode(0o600)).unwrap();
    assert!(store.load(&session).is_ok());
}

#[test]
fn an_id_is_created_once_even_racing() {
    let dir = TempDir::new("create");
    let store = dir.store();
    let session = id("once");
    store.create(&session, &SessionState::default()).unwrap();
    let error = store.create(&session, &SessionState::default()).unwrap_err();
    assert_eq!(error.kind, StoreErrorKind::Exists);
    let raced = id("raced");
    let start = Barrier::new(8);
    let won = thread::scope(|scope| {
        let racers: Vec<_> = (0..8)
            .map(|_| {
                scope.spawn(|| {
                    let handle = dir.store();
                    start.wait();
                    handle.create(&raced, &SessionState::default()).map_err(|e| e.kind)
                })
            })
            .collect();
        racers.into_iter().map(|racer| racer.join().unwrap()).collect::<Vec<_>>()
    });
    assert_eq!(won.iter().filter(|result| result.is_ok()).count(), 1, "{won:?}");
    assert!(won.iter().all(|result| matches!(result, Ok(()) | Err(StoreErrorKind::Exists))));
    assert!(store.load(&raced).unwrap().tree.is_empty());
}

#[test]
fn a_half_made_session_exists_but_is_not_listed() {
    let dir = TempDir::new("half");
    let store = dir.store();
    let session = id("half");
    fs::create_dir(dir.0.join("half")).unwrap(); // a crash right after create's mkdir
    fs::create_dir(dir.0.join("not an id")).unwrap();
    assert!(store.exists(&session).unwrap());
    assert_eq!(store.create(&session, &SessionState::default()).unwrap_err().kind, StoreErrorKind::Exists);
    let error = store.load(&session).unwrap_err();
    assert_eq!(
        (error.kind, error.location),
        (StoreErrorKind::Corrupt, dir.file(&session, "session.json").display().to_string())
    );
    assert!(store.list(10, 0).unwrap().is_empty());
    assert!(store.delete(&session).unwrap());
    store.create(&session, &SessionState::default()).unwrap();
    assert_eq!(store.list(10, 0).unwrap().len(), 1);
    // Deleting leaves nothing behind.
    assert!(store.delete(&session).unwrap());
    let left: Vec<_> = fs::read_dir(&dir.0).unwrap().map(|entry| entry.unwrap().file_name()).collect();
    assert_eq!(left, ["not an id"]);
}

#[test]
fn list_is_newest_first_and_every_write_counts() {
    let dir = TempDir::new("list");
    let store = dir.store();
    let pause = || thread::sleep(Duration::from_millis(5));
    let names = ["s0", "s1", "s2", "s3", "s4"];
    for name in names {
        store.create(&id(name), &SessionState { title: Some(name.into()), ..SessionState::default() }).unwrap();
        pause();
    }
    let order = |store: &FileStore| -> Vec<String> {
        store.list(usize::MAX, 0).unwrap().into_iter().map(|info| info.id.to_string()).collect()
    };
    assert_eq!(order(&store), ["s4", "s3", "s2", "s1", "s0"]);
    // Each kind of write moves its session to the front.
    let mut tree = Tree::new();
    tree.append(vec![Message::user("x")], None);
    store.append_nodes(&id("s1"), tree.nodes()).unwrap();
    assert_eq!(order(&store)[0], "s1");
    pause();
    store.save_tree(&id("s2"), &tree).unwrap();
    assert_eq!(order(&store)[0], "s2");
    pause();
    store.save_state(&id("s0"), &SessionState::default()).unwrap();
    assert_eq!(order(&store), ["s0", "s2", "s1", "s4", "s3"]);
    let all = store.list(usize::MAX, 0).unwrap();
    assert!(all.windows(2).all(|w| w[0].updated_ms > w[1].updated_ms));
    assert!(all.iter().all(|info| info.created_ms <= info.updated_ms));
    assert_eq!(all[1].title.as_deref(), Some("s2"));
    assert_eq!(all[0].title, None, "s0's state was replaced");
    let page: Vec<String> = store.list(2, 1).unwrap().into_iter().map(|info| info.id.to_string()).collect();
    assert_eq!(page, ["s2", "s1"]);
    assert_eq!(store.list(10, 4).unwrap().len(), 1);
    assert!(store.list(10, 5).unwrap().is_empty());
    assert!(store.list(0, 0).unwrap().is_empty());
}
