//! The session manager's loop: its side of the drive loop ([`crate::drive`]). The core's
//! manager machine decides; this side carries out its effects (a session started on a
//! task of its own, a stop, a title asked of a model, a store call off the executor, a
//! batch of lease renewals), hands its feed to the subscribers, and feeds back what comes
//! of them and what the sessions tell (through their mailboxes, `manager_link`).
//!
//! Nothing here waits on a session: each start, stop and store call runs as a task of
//! its own and reports when done, so a slow store or a session busy with a turn never
//! holds up the others.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use async_channel::{Receiver, Sender};
use futures_lite::future;
use omni_protocol::agent::AgentCallbacks;
use omni_protocol::client::ModelRef;
use omni_protocol::generate::{Effect, Report};
use omni_protocol::machine::Timer;
use omni_protocol::manager::{
    FeedEvent, IdleShutdown, Manager, ManagerConfig, ManagerError, ManagerInput, OpenSession, RequestId, Started,
};
use omni_protocol::session::{SessionEvent, SessionSnapshot};
use omni_protocol::session::{SessionId, Store};

mod effects;
mod remote;

use crate::drive::{drive, Notice, Side};
use crate::executor::Executor;
use crate::host::{EventSink, Reply, Subscribers};
use crate::machine::{Machine, COMMAND_CAPACITY};
use crate::manager_link::Inbox;
use crate::manager_presence::{listen, Heard, PresenceSync};
use crate::runtime::{Runtime, Task, Transport};
use crate::{AgentBuilder, AsyncTool, Client, Driver, Error, Session, Subscription};
use omni_protocol::session::Presence;

/// How the manager builds a session's agent: called with the client and the session's
/// id each time a session starts (created or loaded), unless its `open` gives one.
pub type AgentFactory<D, C> =
    Arc<dyn Fn(&Client<D>, &SessionId) -> AgentBuilder<Client<D>, AsyncTool, C> + Send + Sync>;

/// An `open`'s answer from the loop.
pub(crate) enum OpenAnswer<C> {
    /// Started by this open: its first controller subscribed already (if asked).
    Started(Box<StartedSession<C>>),
    /// It ran already.
    Existing(Session<C>),
}

type Answered<T> = Reply<Result<T, ManagerError>>;

/// What a manager's handle asks its loop.
pub(crate) enum ManagerMessage<D: Driver, C> {
    Open {
        id: SessionId,
        create: bool,
        idle: IdleShutdown,
        agent: Option<Box<AgentBuilder<Client<D>, AsyncTool, C>>>,
        controller: bool,
        wait: Option<std::time::Duration>,
        reply: Answered<OpenAnswer<C>>,
    },
    Close {
        id: SessionId,
        reply: Answered<()>,
    },
    Delete {
        id: SessionId,
        reply: Answered<bool>,
    },
    Rename {
        id: SessionId,
        title: Option<String>,
        reply: Answered<()>,
    },
    Whereis {
        id: SessionId,
        reply: Reply<Option<Whereabouts<C>>>,
    },
    ListOpen(Reply<Vec<OpenSession>>),
    Subscribe(Box<dyn EventSink<FeedEvent>>, Reply<Vec<OpenSession>>),
    Shutdown(Reply<()>),
}

/// Where a session runs.
pub enum Whereabouts<C> {
    /// On this node: its handle.
    Here(Session<C>),
    /// On another node of a shared store: its name (as last heard).
    Elsewhere(String),
}

impl<C> std::fmt::Debug for Whereabouts<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Here(session) => f.debug_tuple("Here").field(session).finish(),
            Self::Elsewhere(node) => f.debug_tuple("Elsewhere").field(node).finish(),
        }
    }
}

/// What the manager's tasks report.
pub(crate) enum Done<C> {
    Started {
        request: RequestId,
        id: SessionId,
        result: Result<Box<StartedSession<C>>, ManagerError>,
    },
    Input(ManagerInput),
    /// Work done for its own sake.
    Nothing,
    /// A batch of presence writes ended.
    PresenceWritten,
    /// A read of the other nodes' entries ended (`None`: it failed).
    Remote(Option<crate::manager_presence::Read>),
}

type BoxedWork = std::pin::Pin<Box<dyn Future<Output = ()> + Send>>;

pub(crate) struct StartedSession<C> {
    pub(crate) session: Session<C>,
    started: Started,
    pub(crate) snapshot: SessionSnapshot,
    pub(crate) events: Option<Subscription<SessionEvent>>,
}

/// What wakes the loop besides its machine's deadlines.
pub(crate) enum Wake<D: Driver, C> {
    Message(ManagerMessage<D, C>),
    Done(Done<C>),
    News,
    Heard(Heard),
}

/// An `open` waiting for its answer, with what its start would use.
struct PendingOpen<D: Driver, C> {
    id: SessionId,
    reply: Answered<OpenAnswer<C>>,
    agent: Option<Box<AgentBuilder<Client<D>, AsyncTool, C>>>,
    controller: bool,
    /// How long its start waits for another owner to let go of the session.
    wait: Option<std::time::Duration>,
    /// The session it started, kept for the answer.
    started: Option<Box<StartedSession<C>>>,
}

/// Any other request waiting for its answer.
enum PendingReply {
    Close(Answered<()>),
    Delete(Answered<bool>),
    Rename(Answered<()>),
}

/// The machine as the drive loop sees it: its effects are the side's to carry out, none
/// the executor's.
struct Hosted(Manager);

impl Machine for Hosted {
    type Event = FeedEvent;
    fn poll_effect(&mut self) -> Option<Effect> {
        None
    }
    fn poll_event(&mut self) -> Option<FeedEvent> {
        self.0.poll_event()
    }
    fn poll_timeout(&self) -> Option<(Instant, Timer)> {
        self.0.poll_timeout()
    }
    fn handle_timeout(&mut self, now: Instant) {
        self.0.handle_timeout(now);
    }
    fn handle_report(&mut self, _report: Report<'_>, _now: Instant) {}
}

struct ManagerSide<D: Driver, C> {
    hosted: Hosted,
    client: Client<D>,
    store: Arc<dyn Store>,
    agent: AgentFactory<D, C>,
    title_model: Option<ModelRef>,
    messages: Receiver<ManagerMessage<D, C>>,
    done: (Sender<Done<C>>, Receiver<Done<C>>),
    inbox: Arc<Inbox>,
    pokes: Receiver<()>,
    running: BTreeMap<SessionId, Session<C>>,
    opens: BTreeMap<RequestId, PendingOpen<D, C>>,
    pending: BTreeMap<RequestId, PendingReply>,
    feed: Subscribers<FeedEvent>,
    next_request: u64,
    /// Every handle is gone: every session is closing.
    orphaned: bool,
    /// `shutdown` was asked: every session is closing, and handles are still answered.
    shutting_down: bool,
    /// `shutdown`s waiting for the end.
    shutting: Vec<Reply<()>>,
    /// The shared store's presence, when the manager has one.
    presence: Option<PresenceSync>,
    /// What its listener hears.
    heard: Option<Receiver<Heard>>,
    /// A read of the other nodes' entries is in flight.
    reading: bool,
    /// Sessions heard of, to read.
    to_read: BTreeSet<SessionId>,
    /// Every entry is to be read again (the listener reconnected, or a read failed).
    catch_up: bool,
}

impl<D: Driver, C: AgentCallbacks + Send + 'static> ManagerSide<D, C> {
    fn machine(&mut self) -> &mut Manager {
        &mut self.hosted.0
    }

    fn request(&mut self) -> RequestId {
        self.next_request += 1;
        RequestId(self.next_request)
    }

    fn now(&self) -> Instant {
        self.client.inner.runtime.now()
    }

    fn apply_message(&mut self, message: ManagerMessage<D, C>, now: Instant) {
        let request = self.request();
        let input = match message {
            ManagerMessage::Open { id, create, idle, agent, controller, wait, reply } => {
                let open = PendingOpen { id: id.clone(), reply, agent, controller, wait, started: None };
                self.opens.insert(request, open);
                ManagerInput::Open { request, id, create, idle }
            }
            ManagerMessage::Close { id, reply } => {
                self.pending.insert(request, PendingReply::Close(reply));
                ManagerInput::Close { request, id }
            }
            ManagerMessage::Delete { id, reply } => {
                self.pending.insert(request, PendingReply::Delete(reply));
                ManagerInput::Delete { request, id }
            }
            ManagerMessage::Rename { id, title, reply } => {
                self.pending.insert(request, PendingReply::Rename(reply));
                ManagerInput::Rename { request, id, title }
            }
            ManagerMessage::Whereis { id, reply } => {
                let running = self.machine().is_running(&id);
                let here = self.running.get(&id).filter(|_| running).cloned().map(Whereabouts::Here);
                let there = || self.presence.as_ref().and_then(|sync| sync.node_of(&id)).map(Whereabouts::Elsewhere);
                return reply(here.or_else(there));
            }
            ManagerMessage::ListOpen(reply) => {
                let mut open = self.machine().open_sessions();
                if let Some(sync) = &self.presence {
                    open.extend(sync.remote_open());
                    open.sort_by(|a, b| a.id.cmp(&b.id));
                }
                return reply(open);
            }
            ManagerMessage::Subscribe(sink, reply) => {
                // Earlier changes are out already: the list is current.
                self.deliver_feed();
                self.feed.add(sink);
                return reply(self.machine().open_sessions());
            }
            ManagerMessage::Shutdown(reply) => {
                self.shutting.push(reply);
                self.shutting_down = true;
                self.machine().shut_down(now);
                return;
            }
        };
        self.machine().handle_input(input, now);
    }

    fn apply_done(&mut self, done: Done<C>, now: Instant) {
        match done {
            Done::Started { request, id, result } => {
                let result = result.map(|started| {
                    self.running.insert(id.clone(), started.session.clone());
                    if let Some(sync) = &mut self.presence {
                        sync.started(&id, started.started.claim.clone());
                    }
                    let report = started.started.clone();
                    if let Some(open) = self.opens.get_mut(&request) {
                        open.started = Some(started);
                    }
                    report
                });
                self.machine().handle_input(ManagerInput::Started { id, result }, now);
            }
            Done::Input(input) => {
                if let ManagerInput::Ended { id, .. } = &input {
                    self.running.remove(id);
                }
                self.machine().handle_input(input, now);
            }
            Done::Nothing => {}
            Done::PresenceWritten => {
                if let Some(sync) = &mut self.presence {
                    sync.writing = false;
                }
                self.write_presence();
            }
            Done::Remote(read) => {
                self.remote_read(read);
                self.read_remote();
            }
        }
    }

    fn deliver_feed(&mut self) {
        while let Some(event) = self.hosted.0.poll_event() {
            if let Some(sync) = &mut self.presence {
                sync.local_event(&event);
            }
            self.feed.publish(event);
        }
        self.write_presence();
    }
}

impl<D: Driver, C: AgentCallbacks + Send + 'static> Side for ManagerSide<D, C> {
    type Machine = Hosted;
    type Command = Wake<D, C>;

    fn machine(&mut self) -> &mut Hosted {
        &mut self.hosted
    }

    fn deliver(&mut self) {
        while let Some(effect) = self.hosted.0.poll_effect() {
            self.carry_out(effect);
        }
        self.deliver_feed();
    }

    async fn wait(&mut self) -> Notice<Wake<D, C>> {
        let done = async {
            match self.done.1.recv().await {
                Ok(done) => Notice::Command(Wake::Done(done)),
                // The loop holds a sender: never closed.
                Err(_) => future::pending().await,
            }
        };
        let news = async {
            match self.pokes.recv().await {
                Ok(()) => Notice::Command(Wake::News),
                Err(_) => future::pending().await,
            }
        };
        let orphaned = self.orphaned;
        let messages = &self.messages;
        let application = async {
            if orphaned {
                return future::pending().await;
            }
            match messages.recv().await {
                Ok(message) => Notice::Command(Wake::Message(message)),
                Err(_) => Notice::Gone,
            }
        };
        let heard = async {
            match &self.heard {
                Some(heard) => match heard.recv().await {
                    Ok(heard) => Notice::Command(Wake::Heard(heard)),
                    Err(_) => future::pending().await,
                },
                None => future::pending().await,
            }
        };
        future::or(application, future::or(done, future::or(news, heard))).await
    }

    fn apply<RR: Runtime, T: Transport>(&mut self, wake: Wake<D, C>, _executor: &mut Executor<RR, T>, now: Instant) {
        match wake {
            Wake::Message(message) => self.apply_message(message, now),
            Wake::Done(done) => self.apply_done(done, now),
            Wake::News => self.news(now),
            Wake::Heard(heard) => self.heard(heard),
        }
    }

    fn gone(&mut self, now: Instant) {
        self.orphaned = true;
        self.machine().shut_down(now);
    }

    fn finished(&mut self) -> bool {
        let finished = (self.orphaned || self.shutting_down) && self.hosted.0.is_empty();
        if finished {
            for reply in self.shutting.drain(..) {
                reply(());
            }
            // As a session's loop does: later asks fail at once (`Terminated`).
            self.messages.close();
            while self.messages.try_recv().is_ok() {}
        }
        finished
    }
}

/// Runs the manager's loop as a task of `client`'s runtime; returns the sender its
/// handles talk through (every clone dropped, it closes every session and ends).
pub(crate) fn spawn_manager<D: Driver, C: AgentCallbacks + Send + 'static>(
    client: Client<D>,
    store: Arc<dyn Store>,
    agent: AgentFactory<D, C>,
    config: ManagerConfig,
    title_model: Option<ModelRef>,
    presence: Option<Arc<dyn Presence>>,
) -> Result<Sender<ManagerMessage<D, C>>, Error> {
    let (sender, messages) = async_channel::bounded(COMMAND_CAPACITY);
    let (inbox, pokes) = Inbox::new();
    let runtime = client.inner.runtime.clone();
    let executor = Executor::new(runtime.clone(), client.inner.transport.clone(), crate::handlers_by_name(&[]));
    // The listener runs as long as the loop holds its receiver.
    let heard = match &presence {
        Some(presence) => {
            let (tell, heard) = async_channel::bounded(16);
            runtime.spawn(listen(presence.clone(), runtime.clone(), tell))?.detach();
            Some(heard)
        }
        None => None,
    };
    let side = ManagerSide {
        hosted: Hosted(Manager::new(config)),
        client,
        store,
        agent,
        title_model,
        messages,
        done: async_channel::bounded(COMMAND_CAPACITY),
        inbox,
        pokes,
        running: BTreeMap::new(),
        opens: BTreeMap::new(),
        pending: BTreeMap::new(),
        feed: Subscribers::new(Vec::new()),
        next_request: 0,
        orphaned: false,
        shutting_down: false,
        shutting: Vec::new(),
        presence: presence.map(PresenceSync::new),
        heard,
        reading: false,
        to_read: BTreeSet::new(),
        catch_up: false,
    };
    runtime.spawn(drive(side, executor))?.detach();
    Ok(sender)
}
