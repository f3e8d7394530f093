//! A terminal chat with branching, kept in SQLite: every message is a node of a tree, so a
//! reply can be asked for again and a message edited without losing the old branch.
//!
//! ```sh
//! cargo run -p omni-blocking --example chat                       # a new chat
//! cargo run -p omni-blocking --example chat -- --resume <id>      # go on with one
//! cargo run -p omni-blocking --example chat -- --list             # the chats kept
//! ```
//!
//! Commands: `/regen` asks again for the last reply, `/edit N text` replaces message N
//! with `text` on a new branch, `/nav N` moves to node N (and on to the tip of its
//! branch), `/tree` shows the tree (`*` marks the active path), `/title text`, `/quit`.
//! Anything else is a message to the model.
//!
//! The database is `omni-chat.db` (`--db PATH` for another). With `OMNI_CHAT_MODEL`
//! (`provider:model`) and that provider's key in the environment it talks to the
//! provider; without, it says so on stderr and plays canned answers from omni-testkit's
//! mock provider on loopback, through the real HTTP stack.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::io::{BufRead, Write};
use std::sync::Arc;
use std::time::Duration;

use omni_blocking::{
    AgentEvent, Client, NodeId, Role, Session, SessionEvent, SessionId, Store, StreamEvent, Subscription, Tree,
};
use omni_store::SqliteStore;
use omni_testkit::{MockProvider, Turn};

/// What the replayed model says, in turn.
const CANNED: [&str; 6] = [
    "Hello! I am a replayed model: every answer comes from a script.",
    "Here is another answer, so that the branches differ.",
    "A third reply. Try /tree to see where it hangs.",
    "Branches are never lost: /nav N walks back to any of them.",
    "Everything is in SQLite, so --resume brings this chat back.",
    "That is all the script has to say; it starts over now.",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    let db = flag("--db").unwrap_or_else(|| "omni-chat.db".into());
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&db)?);
    if args.iter().any(|a| a == "--list") {
        let listed = store.list(50, 0)?;
        for info in listed.sessions {
            println!("{}  {}", info.id, info.title.as_deref().unwrap_or("(untitled)"));
        }
        for bad in listed.unreadable {
            eprintln!("chat: not readable: {bad}");
        }
        return Ok(());
    }

    let (client, model, _server) = match std::env::var("OMNI_CHAT_MODEL").ok().filter(|m| !m.is_empty()) {
        Some(model) => (Client::new()?, model, None),
        None => {
            eprintln!("chat: OMNI_CHAT_MODEL is not set: playing canned answers from a mock provider");
            let mock = MockProvider::start(omni_blocking::Dialect::AnthropicMessages)?;
            for i in 0..200 {
                let turn = words(CANNED[i % CANNED.len()]).into_iter().fold(Turn::reply(), Turn::then_text);
                mock.push(turn.gap(Duration::from_millis(15)));
            }
            let client = Client::builder().provider(mock.provider()).build()?;
            (client, "mock:mock-model".to_string(), Some(mock))
        }
    };
    let builder = client.agent(model).system("You are a concise, friendly assistant.").session(store);
    let session = match flag("--resume") {
        Some(id) => builder.load(SessionId::new(id)?)?,
        None => builder.title("terminal chat").create()?,
    };
    let (snapshot, events) = session.subscribe()?;
    println!("chat {} (resume with --resume {})", snapshot.title.as_deref().unwrap_or(""), session.id());
    print_path(&snapshot.tree);

    let stdin = std::io::stdin();
    prompt_mark();
    for line in stdin.lock().lines() {
        let line = line?;
        let line = line.trim();
        if line == "/quit" {
            break;
        }
        match command(&session, line) {
            Ok(true) => follow_turn(&events),
            Ok(false) => {}
            Err(e) => eprintln!("! {e}"),
        }
        prompt_mark();
    }
    println!();
    // Everything written and the session's ownership released before the process ends.
    session.close()?;
    Ok(())
}

/// Runs one line; `true` when it started a turn.
fn command(session: &Session, line: &str) -> Result<bool, Box<dyn std::error::Error>> {
    let (name, rest) = line.split_once(' ').unwrap_or((line, ""));
    let node = |text: &str| -> Result<NodeId, Box<dyn std::error::Error>> { Ok(NodeId(text.trim().parse()?)) };
    match name {
        "" => Ok(false),
        "/regen" => {
            let tree = session.tree()?;
            let last_user = tree.path().iter().rev().find(|id| is_user_prompt(&tree, **id));
            session.regenerate(*last_user.ok_or("nothing to regenerate yet")?)?;
            Ok(true)
        }
        "/edit" => {
            let (id, text) = rest.split_once(' ').ok_or("usage: /edit N text")?;
            let tree = session.tree()?;
            let edited = tree.node(node(id)?).ok_or("no such node")?;
            if !is_user_prompt(&tree, edited.id) {
                return Err("only a message of yours can be edited".into());
            }
            // The new message becomes a sibling of the old one: a child of the same reply.
            session.edit(edited.parent, text)?;
            Ok(true)
        }
        "/nav" => {
            session.navigate(Some(node(rest)?))?;
            print_path(&session.tree()?);
            Ok(false)
        }
        "/tree" => {
            print_tree(&session.tree()?);
            Ok(false)
        }
        "/title" => {
            session.set_title(Some(rest.to_string()).filter(|t| !t.is_empty()))?;
            Ok(false)
        }
        _ if name.starts_with('/') => Err(format!("unknown command {name}").into()),
        _ => {
            session.prompt(line)?;
            Ok(true)
        }
    }
}

/// Streams the reply to the terminal until the turn is committed and saved.
fn follow_turn(events: &Subscription<SessionEvent>) {
    let mut turn_over = false;
    while let Ok(event) = events.recv_timeout(Duration::from_secs(300)) {
        match event {
            SessionEvent::Agent(AgentEvent::Stream(StreamEvent::TextDelta { delta, .. })) => {
                print!("{delta}");
                let _ = std::io::stdout().flush();
            }
            SessionEvent::Agent(AgentEvent::Turn { .. }) => {
                println!();
                turn_over = true;
            }
            SessionEvent::Agent(AgentEvent::Error(e)) => {
                eprintln!("\n! the turn failed: {e}");
                turn_over = true;
            }
            SessionEvent::Agent(AgentEvent::Cancelled(_)) => turn_over = true,
            SessionEvent::Tree { added, .. } if !added.is_empty() => {
                let ids: Vec<String> = added.iter().map(|n| n.id.to_string()).collect();
                println!("  (nodes {})", ids.join(", "));
            }
            SessionEvent::Store { result: Err(e), .. } => {
                eprintln!("! not saved: {e} (kept in memory; the next change tries again)");
                return;
            }
            SessionEvent::Store { written: omni_blocking::Written::State, .. } if turn_over => return,
            _ => {}
        }
    }
}

/// A user message typed by the user (not a tool result).
fn is_user_prompt(tree: &Tree, id: NodeId) -> bool {
    tree.message(id).is_some_and(|m| m.role == Role::User && !m.text().is_empty())
}

fn print_path(tree: &Tree) {
    for id in tree.path() {
        if let Some(node) = tree.node(*id) {
            println!("[{id}] {}: {}", role(node.message.role), node.message.text());
        }
    }
}

fn print_tree(tree: &Tree) {
    fn walk(tree: &Tree, id: NodeId, depth: usize) {
        let Some(node) = tree.node(id) else { return };
        let mark = if tree.path().contains(&id) { '*' } else { ' ' };
        let text: String = node.message.text().chars().take(60).collect();
        println!("{mark} {}[{id}] {}: {text}", "  ".repeat(depth), role(node.message.role));
        for child in tree.children(id) {
            walk(tree, *child, depth + 1);
        }
    }
    for root in tree.roots() {
        walk(tree, *root, 0);
    }
}

fn role(role: Role) -> &'static str {
    match role {
        Role::User => "you",
        Role::Assistant => "model",
    }
}

fn prompt_mark() {
    print!("> ");
    let _ = std::io::stdout().flush();
}

/// `text` as streamed words (each but the first with its leading space).
fn words(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, _) in text.match_indices(' ') {
        out.push(&text[start..i]);
        start = i;
    }
    out.push(&text[start..]);
    out
}
