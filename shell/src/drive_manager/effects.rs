//! The manager machine's effects, carried out: a session started on a task of its own, a
//! stop, a title asked of a model, a store call off the executor, an answer; each reports
//! back as a [`Done`].

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use omni_protocol::agent::AgentCallbacks;
use omni_protocol::manager::{
    Answer, CloseReason, ManagerEffect, ManagerError, ManagerInput, Opening, RequestId, TitleId,
};
use omni_protocol::session::{SessionId, Store, StoreError, StoreErrorKind};
use omni_protocol::{Context, Options};

use super::{BoxedWork, Done, ManagerSide, OpenAnswer, PendingReply, StartedSession};
use crate::manager_link::Inbox;
use crate::runtime::{store_call, Runtime, Task};
use crate::session_builder::{open as open_session, Open};
use crate::{AsyncTool, Client, Driver, Error, Session, SessionBuilder};

impl<D: Driver, C: AgentCallbacks + Send + 'static> ManagerSide<D, C> {
    /// Runs `work` as a task; what it reports comes back as [`Done`]. `Err` when the
    /// runtime could not take it (it is shutting down): the caller reports the failure.
    pub(super) fn spawn(&self, work: impl Future<Output = Done<C>> + Send + 'static) -> Result<(), String> {
        let done = self.done.0.clone();
        let task = self.client.inner.runtime.spawn(async move {
            let _ = done.send(work.await).await;
        });
        task.map(Task::detach).map_err(|e| e.to_string())
    }

    /// Runs a store call off the executor; its result comes back as a manager input.
    pub(super) fn store_call<T: Send + 'static>(
        &mut self,
        call: impl FnOnce(&dyn Store) -> Result<T, StoreError> + Send + 'static,
        input: impl Fn(Result<T, StoreError>) -> ManagerInput + Send + Sync + 'static,
    ) {
        let store = self.store.clone();
        let runtime = self.client.inner.runtime.clone();
        let input = Arc::new(input);
        let report = input.clone();
        let work = async move { Done::Input(report(store_call(&runtime, move || call(&*store)).await)) };
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

    pub(super) fn carry_out(&mut self, effect: ManagerEffect) {
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
        if agent.has_history() {
            // A managed session's history is the store's: given here it would be dropped
            // without a word when the tree's path becomes the agent's history.
            let result = Err(ManagerError::OwnedOption { option: "messages" });
            return self.machine().handle_input(ManagerInput::Started { id, result }, now);
        }
        let (controller, wait) = (open.controller, open.wait);
        let builder = SessionBuilder::new(agent, self.store.clone());
        let inbox = self.inbox.clone();
        let task_id = id.clone();
        let runtime = self.client.inner.runtime.clone();
        let work = async move {
            let how = if create { Open::Create(Some(task_id.clone())) } else { Open::Load(task_id.clone()) };
            let deadline = wait.map(|wait| runtime.now() + wait);
            let result = start_session(builder, how, inbox, controller, &runtime, deadline).await;
            Done::Started { request, id: task_id.clone(), result: result.map_err(|e| start_error(&task_id, e)) }
        };
        if let Err(why) = self.spawn(work) {
            self.apply_done(Done::Started { request, id, result: Err(ManagerError::Start(why)) }, now);
        }
    }

    /// Asks the title model for session `id`'s title.
    fn make_title(&mut self, id: SessionId, work: TitleId, context: Context, max: u32) {
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

    pub(super) fn news(&mut self, now: Instant) {
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
///
/// A session another owner holds is tried again until `deadline` (when there is one):
/// every tenth of a second, a lease's lapse is caught soon after it comes.
async fn start_session<D: Driver, C: AgentCallbacks + Send + 'static>(
    builder: SessionBuilder<Client<D>, AsyncTool, C>,
    how: Open,
    inbox: Arc<Inbox>,
    controller: bool,
    runtime: &D::Runtime,
    deadline: Option<std::time::Instant>,
) -> Result<Box<StartedSession<C>>, Error> {
    if let (Open::Load(id), Some(deadline)) = (&how, deadline) {
        wait_for_the_owner(builder.store(), id, runtime, deadline).await?;
    }
    let claimed_at = runtime.now();
    let session = open_session(builder, how).await?;
    let (sink, events) = if controller {
        let (sink, events) = session.subscription();
        (Some(sink), Some(events))
    } else {
        (None, None)
    };
    let (mut started, snapshot) = session.manage(inbox, sink).await?;
    started.claimed_at = Some(claimed_at);
    Ok(Box::new(StartedSession { session, started, snapshot, events }))
}

/// A start's failure as the manager tells it.
fn start_error(id: &SessionId, error: Error) -> ManagerError {
    match error {
        Error::Store(e) if e.kind == StoreErrorKind::Exists => ManagerError::Exists(id.clone()),
        Error::Store(e) if e.kind == StoreErrorKind::OwnedElsewhere => ManagerError::OwnedElsewhere { node: e.owner },
        Error::Store(e) => ManagerError::Store(e),
        Error::Manager(e) => e,
        other => ManagerError::Start(other.to_string()),
    }
}

/// Waits until session `id` can be claimed (another owner released it, or its lease
/// lapsed), trying again every [`OWNER_POLL`] until `deadline`; the claim taken to see is
/// given back at once, for the start to take.
async fn wait_for_the_owner<R: Runtime>(
    store: &Arc<dyn Store>,
    id: &SessionId,
    runtime: &R,
    deadline: std::time::Instant,
) -> Result<(), Error> {
    loop {
        let (store, id) = (store.clone(), id.clone());
        match store_call(runtime, move || store.claim(&id).and_then(|claim| store.release(&claim))).await {
            Err(e) if e.kind == StoreErrorKind::OwnedElsewhere => {
                let retry_at = runtime.now() + OWNER_POLL;
                if retry_at > deadline {
                    return Err(Error::Store(e));
                }
                runtime.sleep_until(retry_at).await;
            }
            // Free (or gone, or failing: the start says so).
            _ => return Ok(()),
        }
    }
}

/// How often a start that waits for another owner tries again.
const OWNER_POLL: std::time::Duration = std::time::Duration::from_millis(100);
