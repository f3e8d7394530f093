//! The PostgreSQL store against a real server: the URL in `OMNI_PG_URL` (a role that may
//! create databases; `eval "$(scripts/postgres.sh start)"` gives one). Without it each
//! test says it was skipped, except in CI (`CI=true`), where it fails. Each test works in
//! a database of its own, made for it and dropped after, so tests run in parallel.
#![cfg(feature = "postgres")]
#![allow(clippy::unwrap_used)]

use std::thread;
use std::time::{Duration, Instant, SystemTime};

use omni_protocol::agent::Status;
use omni_protocol::session::Tree;
use omni_protocol::session::{Change, Entry, Notice, Presence, Run};
use omni_protocol::Message;
use omni_store::postgres_testing::{password, with_database, Client, TestDatabase as Db};
use omni_store::{Claim, PgStore, SessionId, SessionState, Store, StoreErrorKind};

const LONG: Duration = Duration::from_secs(30);
const SHORT: Duration = Duration::from_millis(400);

fn id(name: &str) -> SessionId {
    SessionId::new(name).unwrap()
}

fn state(title: &str) -> SessionState {
    SessionState { title: Some(title.into()), ..SessionState::default() }
}

/// A turn of two nodes appended to `tree`, written with `claim`.
fn write_turn(store: &impl Store, claim: &Claim, tree: &mut Tree, text: &str) -> Result<(), omni_store::StoreError> {
    let saved = tree.len();
    let mut next = tree.clone();
    next.append(vec![Message::user(text), Message::assistant(text)], None);
    store.append_nodes(claim, &next.nodes()[saved..])?;
    store.save_state(claim, &SessionState { position: next.position(), nodes: next.len() as u64, ..state(text) })?;
    *tree = next;
    Ok(())
}

#[test]
fn the_pg_store_passes_the_suite() {
    let Some(db) = Db::new("suite") else { return };
    omni_store::suite::run(|| db.store("node-a", LONG));
}

#[test]
fn the_pg_store_passes_the_lease_checks() {
    let Some(db) = Db::new("leases") else { return };
    omni_store::suite::leases(&db.store("node-a", SHORT), SHORT);
}

/// Node A's lease lapses (a paused or cut-off node), node B claims the session: every
/// write of A's is refused from then on, B's go through, and A's release leaves B's
/// claim alone.
#[test]
fn a_takeover_fences_the_old_owner() {
    let Some(db) = Db::new("fencing") else { return };
    let (a, b) = (db.store("node-a", SHORT), db.store("node-b", LONG));
    let session = id("fenced");
    let mut tree = Tree::new();
    let old = a.create(&session, &state("a")).unwrap();
    assert_eq!(old.lease(), Some(SHORT));
    write_turn(&a, &old, &mut tree, "a's").unwrap();
    thread::sleep(SHORT * 2);
    let new = b.claim(&session).unwrap();
    assert!(new.token() > old.token(), "{new:?} after {old:?}");
    assert_eq!(new.lease(), Some(LONG));
    let mut late = tree.clone();
    assert_eq!(write_turn(&a, &old, &mut late, "late").unwrap_err().kind, StoreErrorKind::NotOwner);
    assert_eq!(a.save_tree(&old, &Tree::new()).unwrap_err().kind, StoreErrorKind::NotOwner);
    assert_eq!(a.renew(&old).unwrap_err().kind, StoreErrorKind::NotOwner);
    assert_eq!(a.announce(&old, Status::Busy, None, Change::Status).unwrap_err().kind, StoreErrorKind::NotOwner);
    a.release(&old).unwrap();
    write_turn(&b, &new, &mut tree, "b's").unwrap();
    b.renew(&new).unwrap();
    let loaded = a.load(&session).unwrap();
    assert_eq!(loaded.tree, tree, "a's first turn and b's, nothing of a's late one");
    assert_eq!(a.claim(&session).unwrap_err().owner.as_deref(), Some("node-b"), "b still owns it");
}

/// A lease that lapsed but was not taken over is still not a licence to write.
#[test]
fn an_expired_lease_writes_nothing_even_untaken() {
    let Some(db) = Db::new("expired") else { return };
    let a = db.store("node-a", SHORT);
    let session = id("expired");
    let claim = a.create(&session, &state("a")).unwrap();
    thread::sleep(SHORT * 2);
    let mut tree = Tree::new();
    let refused = write_turn(&a, &claim, &mut tree, "late").unwrap_err();
    assert_eq!(refused.kind, StoreErrorKind::NotOwner, "{refused}");
    assert!(a.load(&session).unwrap().tree.is_empty());
    assert!(a.delete(&session).unwrap(), "nobody holds a live lease: it may be deleted");
}

#[test]
fn owned_elsewhere_names_the_owner() {
    let Some(db) = Db::new("owner") else { return };
    let (a, b) = (db.store("node-a", LONG), db.store("node-b", LONG));
    let session = id("owned");
    let claim = a.create(&session, &state("a")).unwrap();
    for refused in [b.claim(&session).unwrap_err(), b.delete(&session).unwrap_err()] {
        assert_eq!(refused.kind, StoreErrorKind::OwnedElsewhere, "{refused}");
        assert_eq!(refused.owner.as_deref(), Some("node-a"));
        assert!(refused.to_string().contains("node-a"), "{refused}");
    }
    a.release(&claim).unwrap();
    let taken = b.claim(&session).unwrap();
    assert_eq!(a.claim(&session).unwrap_err().owner.as_deref(), Some("node-b"));
    b.release(&taken).unwrap();
}

/// `renew_many` renews every claim in one statement: the leases it renews all end at the
/// same instant (`now()` is the statement's transaction's start, so one-by-one renewals
/// would each get their own), and it answers per claim.
#[test]
fn renew_many_renews_in_one_statement_and_answers_per_claim() {
    let Some(db) = Db::new("renew_many") else { return };
    let (a, b) = (db.store("node-a", LONG), db.store("node-b", LONG));
    let mut claims: Vec<Claim> =
        (0..20).map(|n| a.create(&id(&format!("many-{n}")), &state("many")).unwrap()).collect();
    // Claim 3 goes stale: released, then taken by b. Claim 7 is forged. Claim 11's session
    // is gone.
    a.release(&claims[3]).unwrap();
    let bs = b.claim(claims[3].session()).unwrap();
    claims[7] = Claim::new(claims[7].session().clone(), claims[7].token() + 1000, Some(LONG));
    a.release(&claims[11]).unwrap();
    assert!(a.delete(claims[11].session()).unwrap());
    let mut client = db.client();
    let leases = |client: &mut Client| -> Vec<(String, Option<SystemTime>)> {
        client
            .query("SELECT id, lease_expires FROM omni_store_sessions ORDER BY id", &[])
            .unwrap()
            .iter()
            .map(|row| (row.get(0), row.get(1)))
            .collect()
    };
    let before = leases(&mut client);
    thread::sleep(Duration::from_millis(20));
    let answers = a.renew_many(&claims);
    assert_eq!(answers.len(), claims.len());
    for (n, answer) in answers.iter().enumerate() {
        match n {
            3 | 7 | 11 => assert_eq!(answer.as_ref().unwrap_err().kind, StoreErrorKind::NotOwner, "claim {n}"),
            _ => assert!(answer.is_ok(), "claim {n}: {answer:?}"),
        }
    }
    let after = leases(&mut client);
    let renewed: Vec<SystemTime> = after
        .iter()
        .filter(|(name, _)| {
            claims.iter().enumerate().any(|(n, c)| c.session().as_str() == name && ![3, 7, 11].contains(&n))
        })
        .map(|(_, lease)| lease.unwrap())
        .collect();
    assert_eq!(renewed.len(), 17);
    assert!(renewed.iter().all(|lease| *lease == renewed[0]), "one statement, one instant: {renewed:?}");
    let unchanged = |name: &str| {
        let find = |list: &[(String, Option<SystemTime>)]| list.iter().find(|(n, _)| n == name).unwrap().1;
        assert_eq!(find(&before), find(&after), "{name}: not renewed");
    };
    unchanged(claims[7].session().as_str());
    // b's lease on claim 3's session is b's: a's stale claim did not extend it.
    assert_ne!(after.iter().find(|(n, _)| n == bs.session().as_str()).unwrap().1.unwrap(), renewed[0]);
    assert!(a.renew_many(&[]).is_empty());
}

#[test]
fn the_schema_is_made_once_and_a_newer_one_is_refused() {
    let Some(db) = Db::new("schema") else { return };
    // Four processes' worth of handles connect to the fresh database at once.
    let handles: Vec<PgStore> = thread::scope(|scope| {
        let racers: Vec<_> = (0..4)
            .map(|n| {
                scope.spawn({
                    let db = &db;
                    move || db.store(&format!("node-{n}"), LONG)
                })
            })
            .collect();
        racers.into_iter().map(|r| r.join().unwrap()).collect()
    });
    let claim = handles[0].create(&id("kept"), &state("kept")).unwrap();
    handles[0].release(&claim).unwrap();
    // Again, on a database at the current version: nothing changes.
    drop(db.store("node-a", LONG));
    let mut client = db.client();
    let versions: Vec<i64> =
        client.query("SELECT version FROM omni_store_meta", &[]).unwrap().iter().map(|row| row.get(0)).collect();
    assert_eq!(versions, [1]);
    assert!(handles[1].exists(&id("kept")).unwrap());
    // A newer version than this code knows: refused, untouched.
    client.execute("UPDATE omni_store_meta SET version = 999", &[]).unwrap();
    let refused = PgStore::connect(db.url(), "node-a", LONG).unwrap_err();
    assert_eq!(refused.kind, StoreErrorKind::Io, "{refused}");
    assert!(refused.message.contains("999"), "{refused}");
    let version: i64 = client.query_one("SELECT version FROM omni_store_meta", &[]).unwrap().get(0);
    assert_eq!(version, 999, "left as it was");
    // No version at all: damaged.
    client.execute("DELETE FROM omni_store_meta", &[]).unwrap();
    assert_eq!(PgStore::connect(db.url(), "node-a", LONG).unwrap_err().kind, StoreErrorKind::Corrupt);
}

#[test]
fn presence_shows_what_runs_where() {
    let Some(db) = Db::new("presence") else { return };
    let (a, b, c) = (db.store("node-a", LONG), db.store("node-b", LONG), db.store("node-c", SHORT));
    let (one, two, three, quiet) = (id("one"), id("two"), id("three"), id("quiet"));
    let first = a.create(&one, &state("stored title")).unwrap();
    let second = b.create(&two, &state("two")).unwrap();
    let third = c.create(&three, &state("three")).unwrap();
    let _quiet = a.create(&quiet, &state("never announced")).unwrap();
    a.announce(&first, Status::Busy, Some("first"), Change::Opened).unwrap();
    b.announce(&second, Status::Idle, None, Change::Opened).unwrap();
    c.announce(&third, Status::Paused, None, Change::Opened).unwrap();
    let running = |name: &str, node: &str, status: Status, title: &str| Entry {
        id: id(name),
        title: Some(title.into()),
        run: Run::Running { node: node.into(), status },
    };
    assert_eq!(
        b.running().unwrap(),
        [
            running("one", "node-a", Status::Busy, "first"),
            running("three", "node-c", Status::Paused, "three"),
            running("two", "node-b", Status::Idle, "two"),
        ],
        "every node's, by id; the announced title over the stored one; none never announced"
    );
    assert_eq!(Presence::node(&a), "node-a");
    // Node c stops renewing: its session drops out of the running ones, and reads as stopped.
    thread::sleep(SHORT * 2);
    a.withdraw(&first, "closed by the user").unwrap();
    assert_eq!(a.running().unwrap(), [running("two", "node-b", Status::Idle, "two")]);
    let stopped = |name: &str, title: &str, reason: &str| Entry {
        id: id(name),
        title: Some(title.into()),
        run: Run::Stopped { reason: reason.into() },
    };
    assert_eq!(
        c.entries(&[three.clone(), id("missing"), quiet.clone(), one.clone(), two.clone()]).unwrap(),
        [
            stopped("three", "three", "the lease expired"),
            stopped("one", "first", "closed by the user"),
            running("two", "node-b", Status::Idle, "two"),
        ],
        "in the order asked; none for an id without a session or never announced"
    );
    // A withdrawn session's claim is still the owner's: it may announce again.
    a.announce(&first, Status::Idle, Some("back"), Change::Status).unwrap();
    assert_eq!(a.entries(std::slice::from_ref(&one)).unwrap(), [running("one", "node-a", Status::Idle, "back")]);
    // The expired claim announces nothing; a new owner's session is unannounced until it says so.
    assert_eq!(c.announce(&third, Status::Busy, None, Change::Status).unwrap_err().kind, StoreErrorKind::NotOwner);
    let taken = b.claim(&three).unwrap();
    assert!(b.entries(std::slice::from_ref(&three)).unwrap().is_empty());
    b.announce(&taken, Status::Busy, None, Change::Opened).unwrap();
    assert_eq!(b.entries(&[three]).unwrap(), [running("three", "node-b", Status::Busy, "three")]);
    // Released without a withdrawal: stopped.
    b.release(&second).unwrap();
    assert_eq!(b.entries(std::slice::from_ref(&two)).unwrap(), [stopped("two", "two", "the session was released")]);
    // A session withdraws after its loop released its claim (its last write), with the
    // reason; a claim another owner took over since withdraws nothing.
    b.withdraw(&second, "idle").unwrap();
    assert_eq!(b.entries(&[two]).unwrap(), [stopped("two", "two", "idle")]);
    assert_eq!(c.withdraw(&third, "late").unwrap_err().kind, StoreErrorKind::NotOwner);
}

/// Notices until `count` came or two seconds passed.
fn collect(listener: &mut dyn omni_protocol::session::Listener, count: usize) -> Vec<Notice> {
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut notices = Vec::new();
    while notices.len() < count && Instant::now() < deadline {
        notices.extend(listener.wait(Duration::from_millis(200)).unwrap());
    }
    notices
}

#[test]
fn a_listener_hears_every_handles_notices() {
    let Some(db) = Db::new("listen") else { return };
    let (a, b) = (db.store("node-a", LONG), db.store("node-b", LONG));
    let mut listener = b.listen().unwrap();
    let started = Instant::now();
    assert!(listener.wait(Duration::from_millis(300)).unwrap().is_empty(), "nothing happened yet");
    assert!(started.elapsed() >= Duration::from_millis(250), "it waited");
    let session = id("heard");
    let claim = a.create(&session, &state("heard")).unwrap();
    a.announce(&claim, Status::Idle, None, Change::Opened).unwrap();
    // Another application's notices on the channel, and malformed ones: skipped.
    db.client()
        .batch_execute("NOTIFY omni_store_feed, 'garbage'; NOTIFY omni_store_feed, 'bad/id opened'; NOTIFY omni_store_feed, 'heard renamed'")
        .unwrap();
    a.announce(&claim, Status::Busy, Some("renamed"), Change::Title).unwrap();
    // A refused announcement notifies nothing.
    let forged = Claim::new(session.clone(), claim.token() + 1, Some(LONG));
    assert!(a.announce(&forged, Status::Busy, None, Change::Status).is_err());
    a.withdraw(&claim, "done").unwrap();
    let notice = |change| Notice { id: session.clone(), change };
    assert_eq!(collect(listener.as_mut(), 3), [notice(Change::Opened), notice(Change::Title), notice(Change::Closed)]);
    assert!(listener.wait(Duration::from_millis(200)).unwrap().is_empty(), "nothing more");
}

#[test]
fn a_killed_listener_fails_and_listening_again_works() {
    let Some(db) = Db::new("killed") else { return };
    let (a, b) = (db.store("node-a", LONG), db.store("node-b", LONG));
    let mut listener = b.listen().unwrap();
    assert!(listener.wait(Duration::from_millis(50)).unwrap().is_empty());
    assert!(db.kill_connections() >= 1);
    let failed = listener.wait(Duration::from_secs(2)).unwrap_err();
    assert_eq!(failed.kind, StoreErrorKind::Io, "{failed}");
    assert_eq!(listener.wait(Duration::from_millis(10)).unwrap_err().kind, StoreErrorKind::Io, "and stays failed");
    let mut again = b.listen().unwrap();
    // a's own connection was killed too: its next call reconnects (or reports the loss once).
    let session = id("after");
    let claim = match a.create(&session, &state("after")) {
        Ok(claim) => claim,
        Err(e) => {
            assert_eq!(e.kind, StoreErrorKind::Io, "{e}");
            a.create(&session, &state("after")).unwrap()
        }
    };
    a.announce(&claim, Status::Idle, None, Change::Opened).unwrap();
    assert_eq!(collect(again.as_mut(), 1), [Notice { id: session, change: Change::Opened }]);
}

#[test]
fn a_lost_connection_is_io_and_the_next_call_connects_again() {
    let Some(db) = Db::new("reconnect") else { return };
    let a = db.store("node-a", LONG);
    let session = id("kept");
    let claim = a.create(&session, &state("kept")).unwrap();
    assert!(db.kill_connections() >= 1);
    let lost = a.exists(&session).unwrap_err();
    assert_eq!(lost.kind, StoreErrorKind::Io, "{lost}");
    assert!(a.exists(&session).unwrap(), "connected again");
    let mut tree = Tree::new();
    write_turn(&a, &claim, &mut tree, "after").unwrap();
    assert_eq!(a.load(&session).unwrap().tree, tree, "the lease outlived the connection");
}

#[test]
fn no_password_in_debug_or_errors() {
    let Some(db) = Db::new("secret") else { return };
    let store = db.store("node-a", LONG);
    let shown = format!("{store:?}");
    assert!(shown.contains("node-a") && shown.contains(db.name()), "{shown}");
    if let Some(password) = password(db.url()) {
        assert!(!shown.contains(&password), "{shown}");
        // A wrong password is refused, and not repeated.
        let wrong = db.url().replacen(&format!(":{password}@"), ":Wr0ngPassw0rdXyz@", 1);
        let refused = PgStore::connect(&wrong, "node-a", LONG).unwrap_err();
        assert_eq!(refused.kind, StoreErrorKind::Denied, "{refused}");
        let said = format!("{refused} {refused:?}");
        assert!(!said.contains("Wr0ngPassw0rdXyz") && !said.contains(&password), "{said}");
    } else {
        eprintln!("no password in OMNI_PG_URL: only Debug checked");
    }
    // Nobody listening: the connection is refused, as Io, naming no password.
    let nowhere = PgStore::connect("postgres://omni:S3cretNowhere@127.0.0.1:1/omni", "node-a", LONG).unwrap_err();
    assert_eq!(nowhere.kind, StoreErrorKind::Io);
    assert!(!format!("{nowhere} {nowhere:?}").contains("S3cretNowhere"), "{nowhere:?}");
}

/// Rows damaged behind the store's back are typed errors that say where, never panics.
#[test]
fn damaged_rows_are_corrupt_with_their_location() {
    let Some(db) = Db::new("corrupt") else { return };
    let a = db.store("node-a", LONG);
    let good = id("good");
    let claim = a.create(&good, &state("good")).unwrap();
    let mut tree = Tree::new();
    write_turn(&a, &claim, &mut tree, "fine").unwrap();
    let mut client = db.client();
    client
        .batch_execute(
            "INSERT INTO omni_store_sessions (id, state, epoch) VALUES ('bad/id', '{}', 0), ('badstate', 'not json', 0);
             UPDATE omni_store_nodes SET body = '{\"broken\": true}' WHERE session = 'good' AND id = 1;",
        )
        .unwrap();
    let listed = a.list(10, 0).unwrap();
    assert_eq!(listed.sessions.len(), 1);
    assert_eq!(listed.unreadable.len(), 2, "{:?}", listed.unreadable);
    assert!(listed.unreadable.iter().all(|e| e.kind == StoreErrorKind::Corrupt));
    assert!(listed.unreadable.iter().any(|e| e.location.contains("omni_store_sessions(bad/id)")), "{listed:?}");
    assert_eq!(a.load(&id("badstate")).unwrap_err().kind, StoreErrorKind::Corrupt);
    let broken = a.load(&good).unwrap_err();
    assert_eq!(broken.kind, StoreErrorKind::Corrupt, "{broken}");
    assert!(broken.location.ends_with("omni_store_nodes(good,1)"), "{broken}");
}

/// A search path in the connection string (`options=-csearch_path%3D...`): the store's
/// tables are made in that schema, and stores in two schemas of one database are apart.
#[test]
fn a_search_path_in_the_url_puts_the_tables_in_that_schema() {
    let Some(db) = Db::new("schemas") else { return };
    let mut client = db.client();
    client.batch_execute("CREATE SCHEMA app_one; CREATE SCHEMA app_two").unwrap();
    let in_schema = |schema: &str| {
        let joiner = if db.url().contains('?') { '&' } else { '?' };
        PgStore::connect(&format!("{}{joiner}options=-csearch_path%3D{schema}", db.url()), "node-a", LONG).unwrap()
    };
    let (one, two) = (in_schema("app_one"), in_schema("app_two"));
    let claim = one.create(&id("only-in-one"), &state("one")).unwrap();
    assert!(one.exists(claim.session()).unwrap());
    assert!(!two.exists(claim.session()).unwrap());
    let mut tables = |schema: &str| -> i64 {
        client
            .query_one(
                "SELECT count(*) FROM pg_tables WHERE schemaname = $1 AND tablename LIKE 'omni_store_%'",
                &[&schema],
            )
            .unwrap()
            .get(0)
    };
    assert_eq!((tables("app_one"), tables("app_two"), tables("public")), (3, 3, 0));
}

#[test]
fn urls_get_the_test_database() {
    assert_eq!(with_database("postgres://u:p@h:5/db?x=1", "t"), "postgres://u:p@h:5/t?x=1");
    assert_eq!(with_database("postgres://u@h", "t"), "postgres://u@h/t");
    assert_eq!(with_database("host=h user=u", "t"), "host=h user=u dbname=t");
    assert_eq!(password("postgres://u:p@h/db").as_deref(), Some("p"));
    assert_eq!(password("postgres://u@h/db"), None);
}
