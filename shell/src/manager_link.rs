//! How a managed session tells its manager what changed, without ever waiting for it: a
//! session's loop posts news into the session's own mailbox and, when the mailbox was
//! empty, puts it on the manager's list of mailboxes to read and pokes the manager. A
//! session is on that list at most once, so what waits for the manager is bounded by the
//! number of sessions, and a mailbox by [`MAILBOX_CAPACITY`] (beyond it the oldest status
//! news is dropped: a later status says where the agent is).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use async_channel::{Receiver, Sender};
use omni_protocol::manager::{CloseReason, ManagerInput};
use omni_protocol::session::SessionId;
use omni_protocol::Message;

/// News a session keeps for its manager before the oldest status news is dropped.
pub(crate) const MAILBOX_CAPACITY: usize = 64;

/// The manager's end: the mailboxes with news, and the poke that says there are some.
pub(crate) struct Inbox {
    ready: Mutex<Vec<Arc<Mailbox>>>,
    poke: Sender<()>,
}

impl Inbox {
    /// A new inbox and the receiver its pokes come on (at most one waits: a poke says
    /// "look", however many mailboxes have news).
    pub(crate) fn new() -> (Arc<Self>, Receiver<()>) {
        let (poke, pokes) = async_channel::bounded(1);
        (Arc::new(Self { ready: Mutex::new(Vec::new()), poke }), pokes)
    }

    /// Every piece of news posted since the last call, each session's in order.
    pub(crate) fn take(&self) -> Vec<ManagerInput> {
        let ready = std::mem::take(&mut *self.ready.lock().unwrap_or_else(PoisonError::into_inner));
        let mut news = Vec::new();
        for mailbox in ready {
            let mut state = mailbox.state.lock().unwrap_or_else(PoisonError::into_inner);
            state.queued = false;
            news.extend(state.news.drain(..));
        }
        news
    }
}

struct MailboxState {
    news: VecDeque<ManagerInput>,
    /// On the inbox's list already.
    queued: bool,
}

struct Mailbox {
    state: Mutex<MailboxState>,
}

/// A session's end of its manager: what its loop reports through.
pub(crate) struct ManagerLink {
    id: SessionId,
    mailbox: Arc<Mailbox>,
    inbox: Arc<Inbox>,
    /// The controller count last told.
    controllers: usize,
    /// Whether a committed turn is still worth telling (for a title).
    commits_wanted: bool,
    ended: bool,
}

impl ManagerLink {
    pub(crate) fn new(id: SessionId, inbox: Arc<Inbox>, controllers: usize) -> Self {
        let mailbox = Arc::new(Mailbox { state: Mutex::new(MailboxState { news: VecDeque::new(), queued: false }) });
        Self { id, mailbox, inbox, controllers, commits_wanted: true, ended: false }
    }

    fn post(&self, news: ManagerInput) {
        let mut state = self.mailbox.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state.news.len() >= MAILBOX_CAPACITY {
            let stale = state.news.iter().position(|n| matches!(n, ManagerInput::Status { .. }));
            if let Some(stale) = stale {
                state.news.remove(stale);
            }
        }
        state.news.push_back(news);
        if !state.queued {
            state.queued = true;
            drop(state);
            self.inbox.ready.lock().unwrap_or_else(PoisonError::into_inner).push(self.mailbox.clone());
            // Full: a poke waits already.
            let _ = self.inbox.poke.try_send(());
        }
    }

    pub(crate) fn status(&self, status: omni_protocol::agent::Status) {
        self.post(ManagerInput::Status { id: self.id.clone(), status });
    }

    pub(crate) fn title(&self, title: Option<String>) {
        self.post(ManagerInput::Titled { id: self.id.clone(), title });
    }

    /// A committed turn, told once (the manager wants only the first, for a title).
    pub(crate) fn committed(&mut self, first_messages: impl FnOnce() -> Vec<Message>) {
        if std::mem::take(&mut self.commits_wanted) {
            self.post(ManagerInput::Committed { id: self.id.clone(), first_messages: first_messages() });
        }
    }

    /// Tells the controller count when it changed.
    pub(crate) fn controllers(&mut self, count: usize) {
        if count != self.controllers {
            self.controllers = count;
            self.post(ManagerInput::Controllers { id: self.id.clone(), count });
        }
    }

    /// The session's loop ended (`reason`: as it saw it).
    pub(crate) fn ended(&mut self, reason: Option<CloseReason>) {
        if !std::mem::replace(&mut self.ended, true) {
            self.post(ManagerInput::Ended { id: self.id.clone(), reason });
        }
    }
}

impl Drop for ManagerLink {
    /// A loop that ends without saying so (its task dropped by a runtime that shut down)
    /// still tells its manager.
    fn drop(&mut self) {
        self.ended(Some(CloseReason::Failed("the session's task was dropped".into())));
    }
}
