//! `manager-node`: one node of a session manager on PostgreSQL, driven line by line, for
//! the tests of sessions shared by processes (`tests/pg_nodes.rs`). Its model is an
//! embedded replay server answering every prompt with "Hello there.".
//!
//! ```text
//! manager-node <database url> <node name> <lease in ms>
//! ```
//!
//! Commands on stdin, one per line; each is answered by one line, `ok ...` or
//! `err <error>`; the manager's feed comes as `feed <event>` lines between them.
//!
//! ```text
//! create ID             open ID [WAIT_MS]        prompt ID TEXT (answered once saved)
//! rename ID TITLE       close ID                 whereis ID
//! list-open             quit
//! ```
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::collections::HashMap;
use std::io::{self, BufRead, Write};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use omni_blocking::{
    Client, FeedEvent, Session, SessionEvent, SessionManager, SessionOptions, Subscription, Whereabouts, Written,
};
use omni_conformance::async_manager::{quick, MODEL};
use omni_conformance::replay::ReplayServer;
use omni_conformance::session_drive::replay_client;
use omni_protocol::session::SessionId;
use omni_store::PgStore;

/// The longest a prompt's turn and writes may take.
const TURN: Duration = Duration::from_secs(20);

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [url, node, lease] = args.as_slice() else {
        eprintln!("usage: manager-node <database url> <node name> <lease in ms>");
        return ExitCode::from(2);
    };
    let Ok(lease) = lease.parse::<u64>().map(Duration::from_millis) else {
        eprintln!("the lease is a number of milliseconds");
        return ExitCode::from(2);
    };
    match run(url, node, lease) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("manager-node: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(url: &str, node: &str, lease: Duration) -> Result<(), String> {
    let server = ReplayServer::start((0..64).map(|_| quick()).collect()).map_err(|e| e.to_string())?;
    let client = replay_client::<Client>(&server).map_err(|e| e.to_string())?;
    let store = Arc::new(PgStore::connect(url, node, lease).map_err(|e| e.to_string())?);
    let manager = client
        .session_manager(store.clone(), |client, _id| client.agent(MODEL))
        .idle_after(None)
        .presence(store)
        .start()
        .map_err(|e| e.to_string())?;
    let (_, feed) = manager.subscribe().map_err(|e| e.to_string())?;
    std::thread::spawn(move || {
        for event in feed {
            say(&format!("feed {}", describe(&event)));
        }
    });
    say("ready");
    let mut node = Node { manager, sessions: HashMap::new() };
    for line in io::stdin().lock().lines() {
        let line = line.map_err(|e| e.to_string())?;
        if line.trim() == "quit" {
            break;
        }
        let answer = node.command(&line).unwrap_or_else(|e| format!("err {e}"));
        say(&answer);
    }
    node.manager.shutdown().map_err(|e| e.to_string())
}

fn say(line: &str) {
    let mut out = io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// A feed event in one line: `<kind> <id> <detail>`.
fn describe(event: &FeedEvent) -> String {
    match event {
        FeedEvent::Opened { id, title, status } => format!("opened {id} {status:?} {title:?}"),
        FeedEvent::Status { id, status } => format!("status {id} {status:?}"),
        FeedEvent::Title { id, title } => format!("title {id} {title:?}"),
        FeedEvent::TitleFailed { id, error } => format!("title-failed {id} {error}"),
        FeedEvent::Closed { id, reason } => format!("closed {id} {reason}"),
    }
}

struct Node {
    manager: SessionManager,
    sessions: HashMap<SessionId, (Session, Subscription<SessionEvent>)>,
}

impl Node {
    fn command(&mut self, line: &str) -> Result<String, String> {
        let mut words = line.splitn(3, ' ');
        let verb = words.next().unwrap_or_default();
        let id = || -> Result<SessionId, String> {
            SessionId::new(words.clone().next().unwrap_or_default()).map_err(|e| e.to_string())
        };
        let rest = line.splitn(3, ' ').nth(2).unwrap_or_default().to_owned();
        let fail = |e: omni_blocking::Error| format!("{e:?}");
        match verb {
            "create" => {
                let opened = self.manager.create_with(id()?, SessionOptions::new()).map_err(fail)?;
                let events = opened.events.ok_or("no subscription")?;
                self.sessions.insert(opened.session.id().clone(), (opened.session, events));
                Ok("ok created".into())
            }
            "open" => {
                let mut options = SessionOptions::new();
                if let Ok(wait) = rest.parse::<u64>() {
                    options = options.wait_for_owner(Duration::from_millis(wait));
                }
                let opened = self.manager.open_with(id()?, options).map_err(fail)?;
                let nodes = opened.snapshot.tree.len();
                let events = opened.events.ok_or("no subscription")?;
                self.sessions.insert(opened.session.id().clone(), (opened.session, events));
                Ok(format!("ok opened {:?} nodes={nodes}", opened.opening))
            }
            "prompt" => {
                let (session, events) = self.sessions.get(&id()?).ok_or("not opened here")?;
                session.prompt(rest).map_err(fail)?;
                saved(events)
            }
            "rename" => self.manager.rename(id()?, Some(rest)).map(|()| "ok renamed".into()).map_err(fail),
            "close" => self.manager.close(id()?).map(|()| "ok closed".into()).map_err(fail),
            "whereis" => Ok(match self.manager.whereis(id()?).map_err(fail)? {
                Some(Whereabouts::Here(_)) => "ok here".into(),
                Some(Whereabouts::Elsewhere(node)) => format!("ok elsewhere {node}"),
                None => "ok nowhere".into(),
            }),
            "list-open" => {
                let open = self.manager.list_open().map_err(fail)?;
                let open: Vec<String> =
                    open.iter().map(|s| format!("{}@{}", s.id, s.node.as_deref().unwrap_or("here"))).collect();
                Ok(format!("ok open {}", open.join(",")))
            }
            other => Err(format!("unknown command {other:?}")),
        }
    }
}

/// Waits for the turn's writes: `ok saved` once the state is written, `err` with the
/// store's refusal when a write fails.
fn saved(events: &Subscription<SessionEvent>) -> Result<String, String> {
    loop {
        match events.recv_timeout(TURN) {
            Ok(SessionEvent::Store { written: Written::State, result: Ok(()) }) => return Ok("ok saved".into()),
            Ok(SessionEvent::Store { result: Err(e), .. }) => return Err(format!("write {:?}: {e}", e.kind)),
            Ok(_) => {}
            Err(e) => return Err(format!("no write within {TURN:?}: {e:?}")),
        }
    }
}
