//! The session manager's loop: its side of the drive loop ([`crate::drive`]). The core's
//! manager machine decides; this side carries out its effects (a session started on a
//! task of its own, a stop, a title asked of a model, a store call off the executor, a
//! batch of lease renewals), hands its feed to the subscribers, and feeds back what comes
//! of them and what the sessions tell (through their mailboxes, `manager_link`).
//!
//! Nothing here waits on a session: each start, stop and store call runs as a task of
//! its own and reports when done, so a slow store or a session busy with a turn never
//! holds up the others.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use async_channel::{Receiver, Sender};
use futures_lite::future;
use omni_core::machines::agent::AgentCallbacks;
use omni_core::machines::client::ModelRef;
use omni_core::machines::generate::{Effect, Report};
use omni_core::machines::manager::{
    Answer, CloseReason, FeedEvent, IdleShutdown, Manager, ManagerConfig, ManagerEffect, ManagerError, ManagerInput,
    OpenSession, Opening, RequestId, Started,
};
use omni_core::machines::session::machine::{SessionEvent, SessionSnapshot};
use omni_core::machines::session::store::{SessionId, Store, StoreError, StoreErrorKind};
use omni_core::machines::timer::Timer;
use omni_core::{Context, Options};

use crate::drive::{drive, Notice, Side};
use crate::executor::Executor;
use crate::host::{EventSink, Reply, Subscribers};
use crate::machine::{Machine, COMMAND_CAPACITY};
use crate::manager_builder::AgentFactory;
use crate::manager_link::Inbox;
use crate::runtime::{off_executor, Runtime, Task, Transport};
use crate::session_builder::{open as open_session, Open};
use crate::{AgentBuilder, AsyncTool, Client, Driver, Error, Session, SessionBuilder, Subscription};

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
        reply: Reply<Option<Session<C>>>,
    },
    ListOpen(Reply<Vec<OpenSession>>),
    Subscribe(Box<dyn EventSink<FeedEvent>>, Reply<Vec<OpenSession>>),
    Shutdown(Reply<()>),
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
}

/// An `open` waiting for its answer, with what its start would use.
struct PendingOpen<D: Driver, C> {
    id: SessionId,
    reply: Answered<OpenAnswer<C>>,
    agent: Option<Box<AgentBuilder<Client<D>, AsyncTool, C>>>,
    controller: bool,
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

    /// Runs `work` as a task; what it reports comes back as [`Done`]. `Err` when the
    /// runtime could not take it (it is shutting down): the caller reports the failure.
    fn spawn(&self, work: impl Future<Output = Done<C>> + Send + 'static) -> Result<(), String> {
        let done = self.done.0.clone();
        let task = self.client.inner.runtime.spawn(async move {
            let _ = done.send(work.await).await;
        });
        task.map(Task::detach).map_err(|e| e.to_string())
    }

    /// Runs a store call off the executor; its result comes back as a manager input.
    fn store_call<T: Send + 'static>(
        &mut self,
        call: impl FnOnce(&dyn Store) -> Result<T, StoreError> + Send + 'static,
        input: impl Fn(Result<T, StoreError>) -> ManagerInput + Send + Sync + 'static,
    ) {
        let store = self.store.clone();
        let runtime = self.client.inner.runtime.clone();
        let input = Arc::new(input);
        let report = input.clone();
        let work = async move {
            let result =
                off_executor(&runtime, move || call(&*store)).await.unwrap_or_else(|panic| Err(panicked(&panic)));
            Done::Input(report(result))
        };
        if let Err(why) = self.spawn(work) {
            let now = self.now();
            self.machine().handle_input(input(Err(StoreError::new(StoreErrorKind::Io, "store", why))), now);
        }
    }

    /// Runs `work` on a session, for its own sake (its outcome comes through the
    /// session's link).
    fn on_session(&self, id: &SessionId, work: impl FnOnce(Session<C>) -> BoxedWork) {
        if let Some(session) = self.running.get(id).cloned() {
            let work = work(session);
            // A runtime shutting down stops the sessions too.
            let _ = self.spawn(async move {
                work.await;
                Done::Nothing
            });
        }
    }

    fn apply_message(&mut self, message: ManagerMessage<D, C>, now: Instant) {
        let request = self.request();
        let input = match message {
            ManagerMessage::Open { id, create, idle, agent, controller, reply } => {
                self.opens.insert(request, PendingOpen { id: id.clone(), reply, agent, controller, started: None });
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
                return reply(self.running.get(&id).filter(|_| running).cloned());
            }
            ManagerMessage::ListOpen(reply) => return reply(self.machine().open_sessions()),
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
        }
    }

    fn deliver_feed(&mut self) {
        while let Some(event) = self.hosted.0.poll_event() {
            self.feed.publish(event);
        }
    }

    fn carry_out(&mut self, effect: ManagerEffect) {
        match effect {
            ManagerEffect::Start { request, id, create } => self.start(request, id, create),
            ManagerEffect::Stop { id, reason } => {
                if self.running.contains_key(&id) {
                    // A lost lease stops it at once (it may not write any more); any other
                    // reason lets a turn that started meanwhile finish. Its end comes
                    // through its link.
                    let at_once = matches!(reason, CloseReason::LeaseLost(_));
                    self.on_session(&id, |session| {
                        Box::pin(async move {
                            let _ = if at_once { session.close().await } else { session.close_after_turn().await };
                        })
                    });
                } else {
                    let now = self.now();
                    self.machine().handle_input(ManagerInput::Ended { id, reason: None }, now);
                }
            }
            ManagerEffect::SetTitle { id, title } => self.on_session(&id, |session| {
                Box::pin(async move {
                    let _ = session.set_title(title).await;
                })
            }),
            ManagerEffect::MakeTitle { id, work, context, max_tokens } => {
                self.make_title(id, work, *context, max_tokens)
            }
            ManagerEffect::Rename { request, id, title } => self.store_call(
                move |store| {
                    let claim = store.claim(&id)?;
                    let saved = store.load(&id).and_then(|loaded| {
                        let mut state = loaded.state;
                        state.title = title;
                        store.save_state(&claim, &state)
                    });
                    let released = store.release(&claim);
                    saved.and(released).map(|()| true)
                },
                move |result| ManagerInput::StoreDone { request, result },
            ),
            ManagerEffect::Delete { request, id } => self
                .store_call(move |store| store.delete(&id), move |result| ManagerInput::StoreDone { request, result }),
            ManagerEffect::Renew { renewal, claims } => self.store_call(
                move |store| Ok(store.renew_many(&claims)),
                move |results: Result<Vec<_>, StoreError>| ManagerInput::Renewed {
                    renewal,
                    results: results.unwrap_or_else(|e| vec![Err(e)]),
                },
            ),
            ManagerEffect::Answer { request, answer } => self.answer(request, answer),
        }
    }
}

impl<D: Driver, C: AgentCallbacks + Send + 'static> ManagerSide<D, C> {
    /// Starts session `id` for the open `request`, with that open's agent (else the
    /// manager's) and its controller, on a task of its own.
    fn start(&mut self, request: RequestId, id: SessionId, create: bool) {
        let now = self.now();
        let Some(open) = self.opens.get_mut(&request) else {
            // Every `Start` names an open the loop holds; a machine that did not would be
            // told so rather than left waiting.
            let result = Err(ManagerError::Start("no open request for this start".into()));
            return self.machine().handle_input(ManagerInput::Started { id, result }, now);
        };
        let agent = match open.agent.take() {
            Some(agent) => *agent,
            None => (self.agent)(&self.client, &id),
        };
        let controller = open.controller;
        let builder = SessionBuilder::new(agent, self.store.clone());
        let inbox = self.inbox.clone();
        let task_id = id.clone();
        let work = async move {
            let how = if create { Open::Create(Some(task_id.clone())) } else { Open::Load(task_id.clone()) };
            let result = start_session(builder, how, inbox, controller).await.map_err(|e| start_error(&task_id, e));
            Done::Started { request, id: task_id, result }
        };
        if let Err(why) = self.spawn(work) {
            self.apply_done(Done::Started { request, id, result: Err(ManagerError::Start(why)) }, now);
        }
    }

    /// Asks the title model for session `id`'s title.
    fn make_title(&mut self, id: SessionId, work: omni_core::machines::manager::TitleId, context: Context, max: u32) {
        let report = move |result| Done::Input(ManagerInput::TitleMade { id: id.clone(), work, result });
        let now = self.now();
        let Some(model) = self.title_model.clone() else {
            return self.apply_done(report(Err("no title model was given to the manager".into())), now);
        };
        let options = Options { max_tokens: Some(max), ..Options::default() };
        let call = self.client.call(model, context).options(options);
        let made = report.clone();
        let work =
            async move { made(call.generate().await.map(|response| response.text()).map_err(|e| e.to_string())) };
        if let Err(why) = self.spawn(work) {
            self.apply_done(report(Err(why)), now);
        }
    }

    fn answer(&mut self, request: RequestId, answer: Result<Answer, ManagerError>) {
        if let Some(open) = self.opens.remove(&request) {
            let opened = match answer {
                Err(e) => Err(e),
                Ok(Answer::Opened(Opening::Started)) => match open.started {
                    Some(started) => Ok(OpenAnswer::Started(started)),
                    None => Err(ManagerError::Start("the session was not started".into())),
                },
                Ok(_) => match self.running.get(&open.id) {
                    Some(session) => Ok(OpenAnswer::Existing(session.clone())),
                    None => Err(ManagerError::Start("the session stopped".into())),
                },
            };
            return (open.reply)(opened);
        }
        match self.pending.remove(&request) {
            Some(PendingReply::Close(reply) | PendingReply::Rename(reply)) => reply(answer.map(|_| ())),
            Some(PendingReply::Delete(reply)) => {
                reply(answer.map(|answer| matches!(answer, Answer::Deleted(true))));
            }
            None => {}
        }
    }

    fn news(&mut self, now: Instant) {
        for input in self.inbox.take() {
            if let ManagerInput::Ended { id, .. } = &input {
                self.running.remove(id);
            }
            self.machine().handle_input(input, now);
        }
    }
}

/// Opens the session and puts it under the manager, its opener (if it asked) its first
/// controller.
async fn start_session<D: Driver, C: AgentCallbacks + Send + 'static>(
    builder: SessionBuilder<Client<D>, AsyncTool, C>,
    how: Open,
    inbox: Arc<Inbox>,
    controller: bool,
) -> Result<Box<StartedSession<C>>, Error> {
    let session = open_session(builder, how).await?;
    let (sink, events) = if controller {
        let (sink, events) = session.subscription();
        (Some(sink), Some(events))
    } else {
        (None, None)
    };
    let (started, snapshot) = session.manage(inbox, sink).await?;
    Ok(Box::new(StartedSession { session, started, snapshot, events }))
}

/// A start's failure as the manager tells it.
fn start_error(id: &SessionId, error: Error) -> ManagerError {
    match error {
        Error::Store(e) if e.kind == StoreErrorKind::Exists => ManagerError::Exists(id.clone()),
        Error::Store(e) => ManagerError::Store(e),
        Error::Manager(e) => e,
        other => ManagerError::Start(other.to_string()),
    }
}

fn panicked(message: &str) -> StoreError {
    StoreError::new(StoreErrorKind::Io, "store", format!("the store panicked: {message}"))
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
        future::or(application, future::or(done, news)).await
    }

    fn apply<RR: Runtime, T: Transport>(&mut self, wake: Wake<D, C>, _executor: &mut Executor<RR, T>, now: Instant) {
        match wake {
            Wake::Message(message) => self.apply_message(message, now),
            Wake::Done(done) => self.apply_done(done, now),
            Wake::News => self.news(now),
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
) -> Result<Sender<ManagerMessage<D, C>>, Error> {
    let (sender, messages) = async_channel::bounded(COMMAND_CAPACITY);
    let (inbox, pokes) = Inbox::new();
    let runtime = client.inner.runtime.clone();
    let executor = Executor::new(runtime.clone(), client.inner.transport.clone(), crate::handlers_by_name(&[]));
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
    };
    runtime.spawn(drive(side, executor))?.detach();
    Ok(sender)
}
