//! The file store: the conformance suite, then what only files can do (torn and corrupt
//! lines, damaged or unreadable files, half-made sessions) and the checks the store's
//! brief names, each in a temporary directory of its own.
// Test helpers fail the test on any unexpected error, as the tests themselves do.
#![allow(clippy::unwrap_used)]

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Barrier;
use std::thread;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use omni_protocol::session::{NodeId, Tree};
use omni_protocol::Message;
use omni_store::{Claim, FileStore, SessionId, SessionState, Store, StoreErrorKind, StoreWarning};

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

/// A session of two nodes, u0 ─ a1, and the claim that wrote it (still held).
fn two_nodes(store: &FileStore, session: &SessionId) -> (Tree, Claim) {
    let mut tree = Tree::new();
    let claim = store.create(session, &state(&tree)).expect("created");
    tree.append(vec![Message::user("hi"), Message::assistant("hello")], None);
    store.append_nodes(&claim, tree.nodes()).expect("appended");
    store.save_state(&claim, &state(&tree)).expect("saved");
    (tree, claim)
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
    let claim = store.create(&session, &state(&tree)).unwrap();
    let mut saved = 0;
    let mut commit = |tree: &Tree| {
        store.append_nodes(&claim, &tree.nodes()[saved..]).unwrap();
        saved = tree.len();
        store.save_state(&claim, &state(tree)).unwrap();
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
    let (mut tree, claim) = two_nodes(&store, &session);
    let nodes = dir.file(&session, "nodes.jsonl");
    let fragment = br#"{"id":2,"message":{"ro"#;
    append_raw(&nodes, fragment);
    let loaded = store.load(&session).unwrap();
    assert_eq!(loaded.tree, tree);
    let torn = StoreWarning::TornRecord { location: nodes.display().to_string(), bytes: fragment.len() };
    assert_eq!(loaded.warnings, [torn]);
    // The next append cuts the fragment off (else it would be a corrupt middle line).
    tree.append(vec![Message::user("after the tear")], None);
    store.append_nodes(&claim, &tree.nodes()[2..]).unwrap();
    store.save_state(&claim, &state(&tree)).unwrap();
    let loaded = store.load(&session).unwrap();
    assert_eq!((loaded.tree, loaded.warnings), (tree.clone(), vec![]));

    // A whole last line that is not a node is torn too, and cut likewise.
    append_raw(&nodes, b"{\"id\":3,\"garbage\n");
    let loaded = store.load(&session).unwrap();
    let torn = StoreWarning::TornRecord { location: nodes.display().to_string(), bytes: 17 };
    assert_eq!((loaded.tree, loaded.warnings), (tree.clone(), vec![torn]));
    tree.append(vec![Message::assistant("and on")], None);
    store.append_nodes(&claim, &tree.nodes()[3..]).unwrap();
    store.save_state(&claim, &state(&tree)).unwrap();
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
    let (_, claim) = two_nodes(&store, &session);
    let path = dir.file(&session, "session.json");
    fs::write(&path, "{\"created_ms\": 1, \"state\": ").unwrap();
    let error = store.load(&session).unwrap_err();
    assert_eq!((error.kind, error.location), (StoreErrorKind::Corrupt, path.display().to_string()));
    let listed = store.list(10, 0).unwrap();
    assert!(listed.sessions.iter().all(|info| info.id != session), "list leaves it out");
    assert_eq!(listed.unreadable.len(), 1, "and reports it: {:?}", listed.unreadable);
    assert_eq!(listed.unreadable[0].location, path.display().to_string());
    // Saving the state whole repairs it (the creation time is then lost: now).
    store.save_state(&claim, &SessionState::default()).unwrap();
    assert_eq!(store.load(&session).unwrap().tree.len(), 2);
}

#[test]
fn a_missing_session_is_not_found_and_a_bad_batch_is_refused() {
    let dir = TempDir::new("missing");
    let store = dir.store();
    let session = id("nobody");
    let error = store.load(&session).unwrap_err();
    assert_eq!((error.kind, error.location), (StoreErrorKind::NotFound, dir.0.join("nobody").display().to_string()));
    assert_eq!(store.claim(&session).unwrap_err().kind, StoreErrorKind::NotFound);
    let forged = Claim::new(session.clone(), 1, None);
    assert_eq!(store.save_tree(&forged, &Tree::new()).unwrap_err().kind, StoreErrorKind::NotOwner);
    assert!(!store.delete(&session).unwrap());
    assert!(!store.exists(&session).unwrap(), "no write made it");

    // Nodes that do not follow the file are refused before anything is written.
    let session = id("batch");
    let (tree, claim) = two_nodes(&store, &session);
    let before = fs::read(dir.file(&session, "nodes.jsonl")).unwrap();
    let error = store.append_nodes(&claim, tree.nodes()).unwrap_err();
    assert_eq!(error.kind, StoreErrorKind::Conflict, "{error}");
    assert_eq!(fs::read(dir.file(&session, "nodes.jsonl")).unwrap(), before);
    store.append_nodes(&claim, &[]).unwrap();
}

#[cfg(unix)]
#[test]
fn an_unreadable_file_is_denied() {
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new("denied");
    let store = dir.store();
    let session = id("locked");
    let (_, claim) = two_nodes(&store, &session);
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
    assert_eq!(store.append_nodes(&claim, more.nodes()).unwrap_err().kind, StoreErrorKind::Denied);
    fs::set_permissions(&nodes, fs::Permissions::from_mode(0o600)).unwrap();
    assert!(store.load(&session).is_ok());
}

#[test]
fn an_id_is_created_once_even_racing() {
    let dir = TempDir::new("create");
    let store = dir.store();
    let session = id("once");
    let claim = store.create(&session, &SessionState::default()).unwrap();
    store.release(&claim).unwrap();
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
                    handle.create(&raced, &SessionState::default()).map(|_| ()).map_err(|e| e.kind)
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
fn a_half_made_session_exists_and_is_listed_as_unreadable() {
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
    // Not a session to own (nothing in it was ever reported saved), and claiming it
    // holds no lock a creator could wait on.
    let refused = store.claim(&session).unwrap_err();
    assert_eq!(refused.kind, StoreErrorKind::Corrupt, "{refused}");
    assert_eq!(store.claim(&session).unwrap_err().kind, StoreErrorKind::Corrupt, "not owned elsewhere");
    let listed = store.list(10, 0).unwrap();
    assert!(listed.sessions.is_empty());
    let unreadable: Vec<_> = listed.unreadable.iter().map(|e| (e.kind, e.location.clone())).collect();
    assert_eq!(unreadable, [(StoreErrorKind::Corrupt, dir.file(&session, "session.json").display().to_string())]);
    assert!(store.delete(&session).unwrap());
    let claim = store.create(&session, &SessionState::default()).unwrap();
    store.release(&claim).unwrap();
    let listed = store.list(10, 0).unwrap();
    assert_eq!((listed.sessions.len(), listed.unreadable.len()), (1, 0));
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
    let mut claims = Vec::new();
    for name in names {
        claims.push(
            store.create(&id(name), &SessionState { title: Some(name.into()), ..SessionState::default() }).unwrap(),
        );
        pause();
    }
    let order = |store: &FileStore| -> Vec<String> {
        store.list(usize::MAX, 0).unwrap().sessions.into_iter().map(|info| info.id.to_string()).collect()
    };
    assert_eq!(order(&store), ["s4", "s3", "s2", "s1", "s0"]);
    // Each kind of write moves its session to the front.
    let mut tree = Tree::new();
    tree.append(vec![Message::user("x")], None);
    store.append_nodes(&claims[1], tree.nodes()).unwrap();
    assert_eq!(order(&store)[0], "s1");
    pause();
    store.save_tree(&claims[2], &tree).unwrap();
    assert_eq!(order(&store)[0], "s2");
    pause();
    store.save_state(&claims[0], &SessionState::default()).unwrap();
    assert_eq!(order(&store), ["s0", "s2", "s1", "s4", "s3"]);
    let all = store.list(usize::MAX, 0).unwrap().sessions;
    assert!(all.windows(2).all(|w| w[0].updated_ms > w[1].updated_ms));
    assert!(all.iter().all(|info| info.created_ms <= info.updated_ms));
    assert_eq!(all[1].title.as_deref(), Some("s2"));
    assert_eq!(all[0].title, None, "s0's state was replaced");
    let page: Vec<String> = store.list(2, 1).unwrap().sessions.into_iter().map(|info| info.id.to_string()).collect();
    assert_eq!(page, ["s2", "s1"]);
    assert_eq!(store.list(10, 4).unwrap().sessions.len(), 1);
    assert!(store.list(10, 5).unwrap().sessions.is_empty());
    assert!(store.list(0, 0).unwrap().sessions.is_empty());
}

/// `call` run on a thread of its own: its result, or a failed test if it has not returned
/// within a few seconds (a store that opened a FIFO for reading would wait forever).
fn within<T: Send + 'static>(what: &str, call: impl FnOnce() -> T + Send + 'static) -> T {
    let (send, receive) = std::sync::mpsc::channel();
    thread::spawn(move || {
        let _ = send.send(call());
    });
    receive.recv_timeout(Duration::from_secs(5)).unwrap_or_else(|_| panic!("{what} hung"))
}

/// A FIFO at `path` (whatever was there removed first).
#[cfg(unix)]
fn mkfifo(path: &Path) {
    if path.is_dir() {
        fs::remove_dir_all(path).unwrap();
    } else {
        let _ = fs::remove_file(path);
    }
    let status = std::process::Command::new("mkfifo").arg(path).status().expect("mkfifo runs");
    assert!(status.success(), "mkfifo {}", path.display());
}

/// The kind and location of `result`'s error.
fn failure<T: std::fmt::Debug>(result: Result<T, omni_store::StoreError>) -> (StoreErrorKind, String) {
    let error = result.expect_err("an error");
    (error.kind, error.location)
}

#[cfg(unix)]
#[test]
fn a_fifo_in_place_of_a_store_file_is_corrupt_and_never_blocks() {
    let dir = TempDir::new("fifo");
    let store = dir.store();
    for name in ["nodes.jsonl", "session.json", "lock"] {
        let session = id(&format!("fifo-{}", name.replace('.', "-")));
        let (mut more, claim) = two_nodes(&store, &session);
        store.release(&claim).unwrap();
        let good = id(&format!("good-{}", name.replace('.', "-")));
        let (_, claim) = two_nodes(&store, &good);
        store.release(&claim).unwrap();
        let path = dir.file(&session, name);
        mkfifo(&path);
        let corrupt = (StoreErrorKind::Corrupt, path.display().to_string());

        let (handle, s) = (store.clone(), session.clone());
        let loaded = within("load", move || handle.load(&s));
        let (handle, s) = (store.clone(), session.clone());
        let claimed = within("claim", move || handle.claim(&s));
        let handle = store.clone();
        let listed = within("list", move || handle.list(usize::MAX, 0)).unwrap();
        let listed_ids: Vec<_> = listed.sessions.iter().map(|info| info.id.clone()).collect();
        assert!(listed_ids.contains(&good), "{name}: the rest are listed: {listed_ids:?}");
        match name {
            "lock" => {
                // Reading needs no lock: the session reads, but nobody can own it.
                assert!(loaded.is_ok(), "{name}: {loaded:?}");
                assert_eq!(failure(claimed), corrupt, "{name}: claim");
                assert!(listed_ids.contains(&session), "{name}");
                let (handle, s) = (store.clone(), session.clone());
                assert_eq!(failure(within("delete", move || handle.delete(&s))), corrupt, "{name}: delete");
            }
            _ => {
                assert_eq!(failure(loaded), corrupt, "{name}: load");
                assert!(!listed_ids.contains(&session), "{name}");
                let reported: Vec<_> = listed.unreadable.iter().map(|e| (e.kind, e.location.clone())).collect();
                assert!(reported.contains(&corrupt), "{name}: {reported:?}");
                if name == "session.json" {
                    // Not a session to own: claiming says why, without reading the FIFO.
                    assert_eq!(failure(claimed), corrupt, "{name}: claim");
                } else {
                    let claim = claimed.expect("the lock is sound: the session can be owned");
                    let (handle, c) = (store.clone(), claim.clone());
                    let saved = within("save_state", move || handle.save_state(&c, &SessionState::default()));
                    more.append(vec![Message::user("x")], None);
                    let (handle, c) = (store.clone(), claim.clone());
                    let appended = within("append_nodes", move || handle.append_nodes(&c, &more.nodes()[2..]));
                    assert!(saved.is_ok(), "{name}: {saved:?}");
                    assert_eq!(failure(appended), corrupt, "{name}: append_nodes");
                    store.release(&claim).unwrap();
                }
                // A deletion removes what is there without reading it.
                let (handle, s) = (store.clone(), session.clone());
                assert!(within("delete", move || handle.delete(&s)).unwrap(), "{name}");
                assert!(!store.exists(&session).unwrap());
            }
        }
    }
}

#[cfg(unix)]
#[test]
fn something_else_in_place_of_a_session_folder_is_corrupt_and_never_blocks() {
    let dir = TempDir::new("not-a-folder");
    let store = dir.store();
    let (_, claim) = two_nodes(&store, &id("good"));
    store.release(&claim).unwrap();
    let fifo = id("fifo");
    mkfifo(&dir.0.join("fifo"));
    let file = id("file");
    fs::write(dir.0.join("file"), "not a folder").unwrap();
    // A folder where session.json should be.
    let folder = id("folder");
    let (_, claim) = two_nodes(&store, &folder);
    store.release(&claim).unwrap();
    mkfifo(&dir.file(&folder, "session.json"));
    fs::remove_file(dir.file(&folder, "session.json")).unwrap();
    fs::create_dir(dir.file(&folder, "session.json")).unwrap();

    for session in [&fifo, &file] {
        let path = dir.0.join(session.as_str()).display().to_string();
        let corrupt = (StoreErrorKind::Corrupt, path);
        let (handle, s) = (store.clone(), session.clone());
        assert_eq!(failure(within("load", move || handle.load(&s))), corrupt, "{session}: load");
        let (handle, s) = (store.clone(), session.clone());
        assert_eq!(failure(within("claim", move || handle.claim(&s))), corrupt, "{session}: claim");
        let (handle, s) = (store.clone(), session.clone());
        assert_eq!(failure(within("delete", move || handle.delete(&s))), corrupt, "{session}: delete");
        assert!(store.exists(session).unwrap(), "{session}: its id is taken");
        let created = store.create(session, &SessionState::default()).map(|_| ());
        assert_eq!(failure(created).0, StoreErrorKind::Exists);
    }
    let session_json = dir.file(&folder, "session.json").display().to_string();
    assert_eq!(failure(store.load(&folder)), (StoreErrorKind::Corrupt, session_json.clone()));

    let handle = store.clone();
    let listed = within("list", move || handle.list(usize::MAX, 0)).unwrap();
    let ids: Vec<&str> = listed.sessions.iter().map(|info| info.id.as_str()).collect();
    assert_eq!(ids, ["good"]);
    // Reported in the order of their locations.
    let reported: Vec<_> = listed.unreadable.iter().map(|e| (e.kind, e.location.clone())).collect();
    let expected = [
        (StoreErrorKind::Corrupt, dir.0.join("fifo").display().to_string()),
        (StoreErrorKind::Corrupt, dir.0.join("file").display().to_string()),
        (StoreErrorKind::Corrupt, session_json),
    ];
    assert_eq!(reported, expected);
    // Paging pages the sessions; every page reports every unreadable entry.
    let page = store.list(1, 1).unwrap();
    assert!(page.sessions.is_empty());
    assert_eq!(page.unreadable.len(), 3);
}

#[test]
fn list_reports_each_bad_entry_and_lists_the_rest() {
    let dir = TempDir::new("unreadable");
    let store = dir.store();
    for name in ["one", "two", "damaged", "no-nodes"] {
        let (_, claim) = two_nodes(&store, &id(name));
        store.release(&claim).unwrap();
    }
    fs::write(dir.file(&id("damaged"), "session.json"), "{").unwrap();
    fs::remove_file(dir.file(&id("no-nodes"), "nodes.jsonl")).unwrap();
    fs::create_dir(dir.0.join("half")).unwrap(); // a crash right after create's mkdir
                                                 // Not ids: skipped without a word.
    fs::write(dir.0.join(".DS_Store"), "").unwrap();
    fs::create_dir(dir.0.join(".deleted-x-1")).unwrap();
    fs::write(dir.0.join("notes.txt"), "").unwrap();
    let listed = store.list(usize::MAX, 0).unwrap();
    let mut ids: Vec<&str> = listed.sessions.iter().map(|info| info.id.as_str()).collect();
    ids.sort_unstable();
    assert_eq!(ids, ["one", "two"]);
    let reported: Vec<_> = listed.unreadable.iter().map(|e| (e.kind, e.location.clone())).collect();
    let corrupt =
        |session: &str, file: &str| (StoreErrorKind::Corrupt, dir.file(&id(session), file).display().to_string());
    assert_eq!(
        reported,
        [corrupt("damaged", "session.json"), corrupt("half", "session.json"), corrupt("no-nodes", "nodes.jsonl")]
    );
}

#[test]
fn leftover_temporary_files_are_removed_at_open_unless_their_session_is_owned() {
    let dir = TempDir::new("leftovers");
    let store = dir.store();
    let (_, claim) = two_nodes(&store, &id("idle"));
    store.release(&claim).unwrap();
    // Owned by another handle (a lock held on another open file, as another process's).
    let writer = dir.store();
    let (_, owned) = two_nodes(&writer, &id("owned"));
    let temps = ["session.json.tmp-4242-0-1", "nodes.jsonl.tmp-4242-1-2"];
    for session in ["idle", "owned"] {
        for temp in temps {
            fs::write(dir.file(&id(session), temp), "half a write").unwrap();
        }
        fs::write(dir.file(&id(session), "notes.txt"), "not the store's").unwrap();
    }
    fs::create_dir_all(dir.0.join(".deleted-gone-1-2-3").join("inside")).unwrap();

    let reopened = dir.store();
    let names = |session: &str| -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir.0.join(session))
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    assert_eq!(names("idle"), ["lock", "nodes.jsonl", "notes.txt", "session.json"], "the leftovers are gone");
    let mut kept = vec!["lock", "nodes.jsonl", "notes.txt", "session.json"];
    kept.extend(temps);
    kept.sort_unstable();
    assert_eq!(names("owned"), kept, "an owner's files are never touched");
    assert!(!dir.0.join(".deleted-gone-1-2-3").exists());
    // Nothing the cleanup did took anything from the owner, and the sessions still load.
    let mut tree = reopened.load(&id("owned")).unwrap().tree;
    tree.append(vec![Message::user("still mine")], None);
    writer.append_nodes(&owned, &tree.nodes()[2..]).unwrap();
    assert_eq!(reopened.load(&id("owned")).unwrap().tree.len(), 3);
    assert_eq!(reopened.load(&id("idle")).unwrap().tree.len(), 2);
    // Once the owner is gone, the next open removes them.
    writer.release(&owned).unwrap();
    drop(dir.store());
    assert_eq!(names("owned"), ["lock", "nodes.jsonl", "notes.txt", "session.json"]);
}
