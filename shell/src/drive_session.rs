//! A session's loop: its side of the drive loop ([`crate::drive`]), as an agent's is
//! (`drive_agent`), with the store's writes besides. The session machine says what to
//! write and when (one write at a time, in order); this side runs each write where it
//! holds up none of the runtime's tasks ([`off_executor`](crate::runtime::off_executor)) and feeds its result back.
//!
//! Once the last handle is gone the agent is stopped, but the loop goes on until the
//! store holds what the session committed (or a write failed) and the session's claim is
//! released: an application that drops its session right after a turn loses nothing, and
//! the next owner can take the session at once.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use async_channel::Receiver;
use omni_protocol::agent::AgentCallbacks;
use omni_protocol::agent::AgentEvent;
use omni_protocol::generate::{Effect, Report};
use omni_protocol::machine::Timer;
use omni_protocol::manager::TITLE_MESSAGES;
use omni_protocol::manager::{CloseReason, Started};
use omni_protocol::session::Tree;
use omni_protocol::session::{Claim, SessionState, Store, StoreError};
use omni_protocol::session::{
    Session as SessionMachine, SessionEffect, SessionError, SessionEvent, SessionInput, SessionSnapshot, StoreOp,
    WriteId,
};
use omni_protocol::Message;

use crate::drive::{drive, Notice, Side};
use crate::executor::Executor;
use crate::host::{EventSink, Reply, Subscribers};
use crate::machine::Machine;
use crate::manager_link::{Inbox, ManagerLink};
use crate::runtime::{store_call, Runtime, Task, Transport};
use crate::{AsyncTool, Error};

/// How a subscriber counts: a controller keeps the session in use (a manager stops idle
/// sessions by their controllers, never by observers); an observer only watches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubscriberRole {
    /// Drives the session.
    Controller,
    /// Watches it.
    Observer,
}

/// How many subscribers a session has, by role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SubscriberCount {
    /// Subscribers that drive the session.
    pub controllers: usize,
    /// Subscribers that only watch.
    pub observers: usize,
}

/// What a handle asks the session's loop.
pub(crate) enum SessionMessage<C> {
    /// An input (prompt, navigate, regenerate, edit, title, cancel, resume), with the
    /// span current where it was sent: a turn it starts is traced under it.
    Input(SessionInput<'static>, Reply<Result<(), SessionError>>, tracing::Span),
    /// The snapshot.
    Snapshot(Reply<SessionSnapshot>),
    /// A new subscriber; the snapshot goes with it.
    Subscribe(SubscriberRole, Box<dyn EventSink<SessionEvent>>, Reply<SessionSnapshot>),
    /// Subscribers by role.
    Subscribers(Reply<SubscriberCount>),
    /// Whether the store holds everything.
    Saved(Reply<bool>),
    /// The state map, as the store keeps it.
    State(Reply<SessionState>),
    /// Runs a closure on the callbacks (the application's private state).
    Inspect(Box<dyn FnOnce(&mut C) + Send>),
    /// Stops the session (as the last handle's drop does) and answers once the store
    /// holds what it committed and its claim is released.
    Close(Reply<()>),
    /// As `Close`, once the turn in flight (if any) has finished: a manager's close.
    CloseAfterTurn(Reply<()>),
    /// Puts the session under a manager: from now on it tells the manager's inbox what
    /// changes (status, controllers, its first commit, its title, its end), leaves its
    /// lease's renewal to the manager, and takes `controller` as a controller; answers
    /// what the manager starts from.
    Manage(Arc<Inbox>, Option<Box<dyn EventSink<SessionEvent>>>, Reply<(Started, SessionSnapshot)>),
}

/// What wakes a session's loop besides the work of its agent.
pub(crate) enum Wake<C> {
    /// A handle's message.
    Message(SessionMessage<C>),
    /// The store write in flight ended.
    Stored(WriteId, Result<(), StoreError>),
    /// A subscription was dropped: the subscribers are counted again.
    Unsubscribed,
    /// An MCP server's tool list changed.
    ToolsChanged,
}

/// The session machine as the drive loop sees it: the agent's effects go to the
/// executor; the store's are kept for the side, which runs them.
struct Hosted<C: AgentCallbacks> {
    session: SessionMachine<C>,
    writes: VecDeque<(WriteId, Claim, StoreOp)>,
}

impl<C: AgentCallbacks> Machine for Hosted<C> {
    type Event = SessionEvent;

    fn poll_effect(&mut self) -> Option<Effect> {
        loop {
            match self.session.poll_effect()? {
                SessionEffect::Agent(effect) => return Some(effect),
                SessionEffect::Store { write, claim, op } => self.writes.push_back((write, claim, op)),
            }
        }
    }

    fn poll_event(&mut self) -> Option<SessionEvent> {
        self.session.poll_event()
    }

    fn poll_timeout(&self) -> Option<(Instant, Timer)> {
        self.session.poll_timeout()
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.session.handle_timeout(now);
    }

    fn handle_report(&mut self, report: Report<'_>, now: Instant) {
        // Reports are never refused (unknown ids are ignored).
        let _ = self.session.handle_input(SessionInput::Report(report), now);
    }
}

type Write = Pin<Box<dyn Future<Output = (WriteId, Result<(), StoreError>)> + Send>>;

/// The application's end of a session and its store.
struct SessionSide<C: AgentCallbacks, R> {
    hosted: Hosted<C>,
    runtime: R,
    store: Arc<dyn Store>,
    controllers: Subscribers<SessionEvent>,
    observers: Subscribers<SessionEvent>,
    /// Closes when the last handle is dropped.
    messages: Receiver<SessionMessage<C>>,
    /// The store write in flight.
    write: Option<Write>,
    /// The last handle is gone (or a handle closed the session) and the agent stopped.
    orphaned: bool,
    /// Handles waiting for the session's end.
    closing: Vec<Reply<()>>,
    /// Pokes from dropped subscriptions.
    unsubscribed: Receiver<()>,
    /// The manager's link, for a managed session.
    link: Option<ManagerLink>,
    /// A handle asked to close the session.
    close_asked: bool,
    /// Asked to close once the turn in flight finishes.
    close_after_turn: bool,
    /// The MCP servers whose tools the session's agent offers.
    tool_sources: crate::mcp::ToolSources,
}

impl<C: AgentCallbacks, R: Runtime> SessionSide<C, R> {
    /// Offers the MCP servers' new lists from the agent's next step.
    fn tools_changed<RR: Runtime, T: Transport>(&mut self, executor: &mut Executor<RR, T>, now: Instant) {
        let offered = self.tool_sources.refresh(executor);
        // Refused only for a list the agent cannot offer: the tools stay.
        let _ = self.hosted.session.handle_input(SessionInput::ReplaceTools(offered), now);
    }

    fn publish(&mut self, event: SessionEvent) {
        match (self.controllers.len(), self.observers.len()) {
            (_, 0) => self.controllers.publish(event),
            (0, _) => self.observers.publish(event),
            _ => {
                self.controllers.publish(event.clone());
                self.observers.publish(event);
            }
        }
    }

    fn snapshot(&mut self) -> SessionSnapshot {
        // Events of earlier inputs are out already: the snapshot is current.
        self.deliver_events();
        self.hosted.session.snapshot()
    }

    fn deliver_events(&mut self) {
        while let Some(event) = self.hosted.session.poll_event() {
            if self.link.is_some() {
                self.tell_manager(&event);
            }
            self.publish(event);
        }
        if let Some(link) = &mut self.link {
            link.controllers(self.controllers.len());
        }
    }

    /// What a managed session's manager hears of an event.
    fn tell_manager(&mut self, event: &SessionEvent) {
        let Some(link) = &mut self.link else { return };
        match event {
            SessionEvent::Agent(AgentEvent::Status(status)) => link.status(*status),
            SessionEvent::Title(title) => link.title(title.clone()),
            SessionEvent::Tree { added, .. } if !added.is_empty() => {
                let tree = self.hosted.session.tree();
                link.committed(|| first_messages(tree));
            }
            _ => {}
        }
    }

    /// Puts the session under a manager (see [`SessionMessage::Manage`]).
    fn manage(
        &mut self,
        inbox: Arc<Inbox>,
        controller: Option<Box<dyn EventSink<SessionEvent>>>,
    ) -> (Started, SessionSnapshot) {
        self.deliver_events();
        if let Some(sink) = controller {
            self.controllers.add(sink);
        }
        let session = &mut self.hosted.session;
        if session.claim().and_then(Claim::lease).is_some() {
            session.leave_renewal();
        }
        let started = Started {
            title: session.title().map(str::to_owned),
            status: session.agent().status(),
            controllers: self.controllers.len(),
            claim: session.claim().cloned(),
            // Set by the manager's start, which knows when it claimed.
            claimed_at: None,
            first_messages: first_messages(session.tree()),
        };
        self.link = Some(ManagerLink::new(session.id().clone(), inbox, started.controllers));
        (started, self.hosted.session.snapshot())
    }

    /// Starts the next write unless one is in flight.
    fn start_write(&mut self) {
        if self.write.is_some() {
            return;
        }
        let Some((write, claim, op)) = self.hosted.writes.pop_front() else { return };
        let store = self.store.clone();
        let done = store_call(&self.runtime, move || op.apply(&*store, &claim));
        self.write = Some(Box::pin(async move { (write, done.await) }));
    }

    /// Stops the session asked to close after its turn, once no turn is in flight.
    fn close_when_the_turn_is_over(&mut self, now: Instant) {
        let busy = self.hosted.session.agent().status() == omni_protocol::agent::Status::Busy;
        if self.close_after_turn && !busy && !self.orphaned {
            self.close_after_turn = false;
            self.stop(now);
        }
    }

    /// Stops the agent; the loop goes on until the store is written and the claim released.
    fn stop(&mut self, now: Instant) {
        self.hosted.session.terminate(now);
        self.orphaned = true;
    }

    fn apply_message(&mut self, message: SessionMessage<C>, now: Instant) {
        match message {
            SessionMessage::Input(input, reply, _) => reply(self.hosted.session.handle_input(input, now)),
            SessionMessage::Snapshot(reply) => reply(self.snapshot()),
            SessionMessage::Subscribe(role, sink, reply) => {
                let snapshot = self.snapshot();
                match role {
                    SubscriberRole::Controller => self.controllers.add(sink),
                    SubscriberRole::Observer => self.observers.add(sink),
                }
                reply(snapshot);
            }
            SessionMessage::Subscribers(reply) => {
                reply(SubscriberCount { controllers: self.controllers.len(), observers: self.observers.len() })
            }
            SessionMessage::Saved(reply) => reply(self.hosted.session.is_saved()),
            SessionMessage::State(reply) => reply(self.hosted.session.state()),
            SessionMessage::Inspect(f) => f(self.hosted.session.callbacks_mut()),
            SessionMessage::Manage(inbox, controller, reply) => reply(self.manage(inbox, controller)),
            SessionMessage::Close(reply) => {
                self.close_asked = true;
                self.closing.push(reply);
                if !self.orphaned {
                    self.stop(now);
                }
            }
            SessionMessage::CloseAfterTurn(reply) => {
                self.close_asked = true;
                self.closing.push(reply);
                self.close_after_turn = true;
                self.close_when_the_turn_is_over(now);
            }
        }
    }
}

impl<C: AgentCallbacks + Send + 'static, R: Runtime> Side for SessionSide<C, R> {
    type Machine = Hosted<C>;
    type Command = Wake<C>;

    fn machine(&mut self) -> &mut Hosted<C> {
        &mut self.hosted
    }

    fn deliver(&mut self) {
        self.deliver_events();
        if self.close_after_turn {
            let now = self.runtime.now();
            self.close_when_the_turn_is_over(now);
            self.deliver_events();
        }
        self.start_write();
    }

    async fn wait(&mut self) -> Notice<Wake<C>> {
        let write = &mut self.write;
        let stored = async {
            match write.as_mut() {
                Some(pending) => {
                    let (id, result) = pending.await;
                    *write = None;
                    Notice::Command(Wake::Stored(id, result))
                }
                None => std::future::pending().await,
            }
        };
        if self.orphaned {
            return stored.await;
        }
        let messages = &self.messages;
        let message = async {
            match messages.recv().await {
                Ok(message) => Notice::Command(Wake::Message(message)),
                Err(_) => Notice::Gone,
            }
        };
        let unsubscribed = async {
            match self.unsubscribed.recv().await {
                Ok(()) => Notice::Command(Wake::Unsubscribed),
                // Never closed while the session's handles hold its sender.
                Err(_) => std::future::pending().await,
            }
        };
        let tools_changed = async {
            self.tool_sources.changed().await;
            Notice::Command(Wake::ToolsChanged)
        };
        let others = futures_lite::future::or(stored, futures_lite::future::or(unsubscribed, tools_changed));
        futures_lite::future::or(message, others).await
    }

    fn apply<RR: Runtime, T: Transport>(&mut self, wake: Wake<C>, executor: &mut Executor<RR, T>, now: Instant) {
        match wake {
            Wake::Message(SessionMessage::Input(input, reply, parent)) => {
                executor.trace_under(parent);
                reply(self.hosted.session.handle_input(input, now))
            }
            Wake::Message(message) => self.apply_message(message, now),
            Wake::Stored(write, result) => {
                // A result always matches the write in flight: the machine sent it.
                let _ = self.hosted.session.handle_input(SessionInput::Stored { write, result }, now);
            }
            Wake::Unsubscribed => {
                self.controllers.prune();
                self.observers.prune();
            }
            Wake::ToolsChanged => self.tools_changed(executor, now),
        }
    }

    fn gone(&mut self, now: Instant) {
        self.stop(now);
    }

    fn before_input<RR: Runtime, T: Transport>(&mut self, executor: &mut Executor<RR, T>, now: Instant) {
        if self.tool_sources.has_changed() {
            self.tools_changed(executor, now);
        }
    }

    fn finished(&mut self) -> bool {
        let finished = self.orphaned && self.write.is_none() && self.hosted.writes.is_empty();
        if finished {
            for reply in self.closing.drain(..) {
                reply(());
            }
            if let Some(link) = &mut self.link {
                link.ended(self.close_asked.then_some(CloseReason::Closed));
            }
            // Messages sent as the loop ends would wait for an answer forever: the channel
            // is closed (later sends fail at once) and what is in it dropped, which ends
            // each waiting ask with `Terminated`.
            self.messages.close();
            while self.messages.try_recv().is_ok() {}
        }
        finished
    }
}

/// What a session's loop runs besides its machine: its tools (with their MCP servers)
/// and its telemetry.
pub(crate) struct SessionWork<'a> {
    pub(crate) tools: &'a [AsyncTool],
    pub(crate) sources: crate::mcp::ToolSources,
    pub(crate) observer: Option<Box<crate::telemetry::Observer>>,
}

/// Runs `session` as a task of `runtime`, its agent's tools run with `tools`' handlers and
/// its requests sent over `transport`, its writes going to `store`. Returns the sender its
/// handles talk through; dropping every clone of it stops the session.
pub(crate) fn spawn_session<C, R, T>(
    runtime: &R,
    transport: T,
    session: SessionMachine<C>,
    store: Arc<dyn Store>,
    work: SessionWork<'_>,
    subscribers: Vec<(SubscriberRole, Box<dyn EventSink<SessionEvent>>)>,
) -> Result<(async_channel::Sender<SessionMessage<C>>, async_channel::Sender<()>), Error>
where
    C: AgentCallbacks + Send + 'static,
    R: Runtime,
    T: Transport,
{
    let (sender, messages) = async_channel::bounded(crate::machine::SESSION_COMMAND_CAPACITY);
    // One poke waits at most: it says "count again", however many subscriptions went.
    let (unsubscribe, unsubscribed) = async_channel::bounded(1);
    let (mut controllers, mut observers) = (Vec::new(), Vec::new());
    for (role, sink) in subscribers {
        match role {
            SubscriberRole::Controller => controllers.push(sink),
            SubscriberRole::Observer => observers.push(sink),
        }
    }
    let side = SessionSide {
        hosted: Hosted { session, writes: VecDeque::new() },
        runtime: runtime.clone(),
        store,
        controllers: Subscribers::new(controllers),
        observers: Subscribers::new(observers),
        messages,
        write: None,
        orphaned: false,
        closing: Vec::new(),
        unsubscribed,
        link: None,
        close_asked: false,
        close_after_turn: false,
        tool_sources: work.sources,
    };
    let handlers = side.tool_sources.handlers(work.tools);
    let executor = Executor::new(runtime.clone(), transport, handlers).observed(work.observer);
    // Detached: the loop ends on its own once every handle is gone and the store is written.
    runtime.spawn(drive(side, executor))?.detach();
    Ok((sender, unsubscribe))
}

/// The first messages of the tree's active path, which a title is made from.
fn first_messages(tree: &Tree) -> Vec<Message> {
    tree.path().iter().take(TITLE_MESSAGES).filter_map(|&node| tree.message(node).cloned()).collect()
}
