//! The async session handle: methods that send the session's task a message and await its
//! answer, subscriptions as streams. The task (the agent's work, the store's writes) is
//! the shell's session loop (`drive_session`). Dropping the last handle stops the agent;
//! the task ends once the store holds what was committed.

use std::fmt;
use std::sync::Arc;

use async_channel::Sender;
use omni_protocol::agent::{NoCallbacks, Prompt, ToolDecision};
use omni_protocol::session::{NodeId, Tree};
use omni_protocol::session::{SessionEvent, SessionInput, SessionSnapshot};
use omni_protocol::session::{SessionId, SessionState, StoreWarning};

use crate::drive_session::{SessionMessage, SubscriberCount, SubscriberRole};
use crate::host::{ask_loop, EventSink, Reply};
use crate::manager_link::Inbox;
use crate::subscription::Subscription;
use crate::Error;
use omni_protocol::manager::Started;

struct Shared<C> {
    id: SessionId,
    messages: Sender<SessionMessage<C>>,
    /// Poked by a dropped subscription, so that the session counts its controllers again.
    unsubscribe: Sender<()>,
    capacity: usize,
    warnings: Vec<StoreWarning>,
}

/// A running session: an agent with a branching message tree, kept in a store. Clones are
/// handles on the same session; dropping the last one stops its agent (a turn in flight
/// is abandoned and rolled back), and its task ends once the store holds every committed
/// turn.
///
/// The tree-changing methods (`prompt`, `navigate`, `regenerate`, `edit`) work only while
/// the session is idle: otherwise they answer [`SessionError::Busy`] or
/// [`SessionError::Paused`](omni_protocol::session::SessionError::Paused)
/// inside [`Error::Session`].
///
/// [`SessionError::Busy`]: omni_protocol::session::SessionError::Busy
pub struct Session<C = NoCallbacks> {
    shared: Arc<Shared<C>>,
}

impl<C> Clone for Session<C> {
    fn clone(&self) -> Self {
        Self { shared: self.shared.clone() }
    }
}

impl<C> fmt::Debug for Session<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Session")
            .field("id", &self.shared.id)
            .field("running", &!self.shared.messages.is_closed())
            .finish()
    }
}

impl<C> Session<C> {
    pub(crate) fn new(
        id: SessionId,
        messages: Sender<SessionMessage<C>>,
        unsubscribe: Sender<()>,
        capacity: usize,
        warnings: Vec<StoreWarning>,
    ) -> Self {
        Self { shared: Arc::new(Shared { id, messages, unsubscribe, capacity, warnings }) }
    }

    /// The session's id, for loading it again.
    pub fn id(&self) -> &SessionId {
        &self.shared.id
    }

    /// What was got past while loading the session: a torn last record (a crash in the
    /// middle of a write) left out, a saved path that ended inside a turn repaired; empty
    /// for a new session.
    pub fn load_warnings(&self) -> &[StoreWarning] {
        &self.shared.warnings
    }

    /// Sends a user message as a new turn under the head of the active path.
    pub async fn prompt(&self, text: impl Into<String>) -> Result<(), Error> {
        self.input(SessionInput::Prompt(text.into())).await
    }

    /// Sends a user message of content blocks (attachments, results of tools the
    /// application ran itself), with options for its turn only, as a new turn under the
    /// head.
    pub async fn prompt_with(&self, prompt: impl Into<Prompt>) -> Result<(), Error> {
        self.input(SessionInput::PromptWith(Box::new(prompt.into()))).await
    }

    /// Moves the active path through `node` and on to a tip (following the child last
    /// active under each node, else the newest); `None` clears it, so that the next prompt
    /// starts a new root. The agent's history follows the path.
    pub async fn navigate(&self, node: Option<NodeId>) -> Result<(), Error> {
        self.input(SessionInput::Navigate(node)).await
    }

    /// Asks again for the reply to the user message `node`: the new reply becomes another
    /// child of it.
    pub async fn regenerate(&self, node: NodeId) -> Result<(), Error> {
        self.input(SessionInput::Regenerate(node)).await
    }

    /// A new user message `text` (and its reply) as a new child of the assistant message
    /// `parent`, or as a new root with `None`: the way to edit a user message, whose
    /// original stays on its own branch.
    pub async fn edit(&self, parent: Option<NodeId>, text: impl Into<String>) -> Result<(), Error> {
        self.input(SessionInput::Edit(parent, text.into())).await
    }

    /// Sets (or clears) the title, which the store keeps.
    pub async fn set_title(&self, title: Option<String>) -> Result<(), Error> {
        self.input(SessionInput::Title(title)).await
    }

    /// Stops the turn in flight; the tree and the agent's history go back to where the turn
    /// found them.
    pub async fn cancel(&self) -> Result<(), Error> {
        self.input(SessionInput::Cancel).await
    }

    /// Answers the paused tool call.
    pub async fn resume(&self, decision: ToolDecision) -> Result<(), Error> {
        self.input(SessionInput::Resume(decision)).await
    }

    /// Stops the session and waits until it is over: a turn in flight is abandoned and
    /// rolled back (as a cancel does), everything committed is written, and the session's
    /// ownership in the store is released, so that it can be loaded again at once, here
    /// or in another process. Every handle on the session is closed with it. Dropping the
    /// last handle does the same without waiting.
    pub async fn close(&self) -> Result<(), Error> {
        match self.ask(SessionMessage::Close).await {
            // Over already.
            Err(Error::Agent(omni_protocol::agent::AgentError::Terminated)) => Ok(()),
            done => done,
        }
    }

    /// As [`close`](Self::close), once the turn in flight (if any) has finished: how a
    /// manager closes a session.
    pub(crate) async fn close_after_turn(&self) -> Result<(), Error> {
        match self.ask(SessionMessage::CloseAfterTurn).await {
            Err(Error::Agent(omni_protocol::agent::AgentError::Terminated)) => Ok(()),
            done => done,
        }
    }

    /// The tree, the agent's snapshot and the title.
    pub async fn snapshot(&self) -> Result<SessionSnapshot, Error> {
        self.ask(SessionMessage::Snapshot).await
    }

    /// The message tree, with its active path.
    pub async fn tree(&self) -> Result<Tree, Error> {
        Ok(self.snapshot().await?.tree)
    }

    /// Whether the store holds everything the session does (false while a write is in
    /// flight, or after one failed until the next succeeds).
    pub async fn is_saved(&self) -> Result<bool, Error> {
        self.ask(SessionMessage::Saved).await
    }

    /// The state map as the store keeps it: the model (`provider:id`), system prompt,
    /// options, title, and the tree's position and size.
    pub async fn state(&self) -> Result<SessionState, Error> {
        self.ask(SessionMessage::State).await
    }

    /// Subscribes as a controller to every later event. The snapshot is taken at the same
    /// moment, so together they miss nothing. Dropping the subscription unsubscribes.
    pub async fn subscribe(&self) -> Result<(SessionSnapshot, Subscription<SessionEvent>), Error> {
        self.join(SubscriberRole::Controller).await
    }

    /// Subscribes as an observer: the same events as [`subscribe`](Self::subscribe), but
    /// the subscription does not count as using the session.
    pub async fn observe(&self) -> Result<(SessionSnapshot, Subscription<SessionEvent>), Error> {
        self.join(SubscriberRole::Observer).await
    }

    /// The session's subscribers, by role.
    pub async fn subscribers(&self) -> Result<SubscriberCount, Error> {
        self.ask(SessionMessage::Subscribers).await
    }

    /// Runs `f` on the agent's callbacks (the application's private state) inside the
    /// session, between inputs, and returns what it returns.
    pub async fn with_callbacks<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut C) -> R + Send + 'static,
    ) -> Result<R, Error>
    where
        C: 'static,
    {
        self.ask(|reply| SessionMessage::Inspect(Box::new(move |callbacks: &mut C| reply(f(callbacks))))).await
    }

    async fn join(&self, role: SubscriberRole) -> Result<(SessionSnapshot, Subscription<SessionEvent>), Error> {
        let (sink, subscription) = self.subscription();
        let snapshot = self.ask(|reply| SessionMessage::Subscribe(role, sink, reply)).await?;
        Ok((snapshot, subscription))
    }

    /// A new subscription on this session (its end dropped, the session counts its
    /// subscribers again), and the session's end of it.
    pub(crate) fn subscription(&self) -> (Box<dyn EventSink<SessionEvent>>, Subscription<SessionEvent>) {
        let (sink, subscription) = Subscription::channel(self.shared.capacity);
        (Box::new(sink), subscription.poking(self.shared.unsubscribe.clone()))
    }

    /// Puts the session under a manager, `controller` (if any) its first controller.
    pub(crate) async fn manage(
        &self,
        inbox: Arc<Inbox>,
        controller: Option<Box<dyn EventSink<SessionEvent>>>,
    ) -> Result<(Started, SessionSnapshot), Error> {
        self.ask(|reply| SessionMessage::Manage(inbox, controller, reply)).await
    }

    async fn input(&self, input: SessionInput<'static>) -> Result<(), Error> {
        let parent = tracing::Span::current();
        Ok(self.ask(|reply| SessionMessage::Input(input, reply, parent)).await??)
    }

    /// Sends a message and waits for its answer.
    async fn ask<T: Send + 'static>(&self, message: impl FnOnce(Reply<T>) -> SessionMessage<C>) -> Result<T, Error> {
        ask_loop(&self.shared.messages, message).await
    }
}
