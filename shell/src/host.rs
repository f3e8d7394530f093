//! What every driver's agent handle does, decided once: the application's commands
//! applied to the machine, and every event fanned out to the subscribers.
//!
//! A driver owns a [`Host`] in its loop (a task or a thread), turns handle calls into
//! [`Command`]s whose replies are closures over its own channel type, and calls
//! [`Host::publish`] after every input. Because the loop applies one command at a time
//! and publishes every event before the next, a subscriber added by
//! [`Command::Subscribe`] gets a snapshot that, with the events it then receives, is the
//! whole story: nothing is missed and nothing is seen twice.

use std::fmt;
use std::time::Instant;

use omni_protocol::agent::ToolDecision;
use omni_protocol::agent::{
    Agent, AgentCallbacks, AgentError, AgentEvent, AgentInput, AgentState, Prompt, Snapshot, StatePatch,
};
use omni_protocol::generate::Effect;

/// Sends a command's answer back to the caller, over whatever channel the driver uses.
pub type Reply<T> = Box<dyn FnOnce(T) + Send>;

/// Sends a loop (an agent's or a session's) the message `message` makes around a reply,
/// and waits for the answer; a loop that is gone answers [`AgentError::Terminated`]. The
/// one request/answer of every async handle.
pub(crate) async fn ask_loop<M, T: Send + 'static>(
    messages: &async_channel::Sender<M>,
    message: impl FnOnce(Reply<T>) -> M,
) -> Result<T, crate::Error> {
    let (reply, answer) = async_channel::bounded(1);
    let reply: Reply<T> = Box::new(move |value| {
        let _ = reply.try_send(value);
    });
    let terminated = || crate::Error::Agent(AgentError::Terminated);
    messages.send(message(reply)).await.map_err(|_| terminated())?;
    answer.recv().await.map_err(|_| terminated())
}

/// Where a subscriber's events go: an agent's (`E` is [`AgentEvent`]) or a session's.
pub trait EventSink<E = AgentEvent>: Send {
    /// Offers one event, owned (the host clones an event only for the subscribers
    /// before the last); `false` drops the subscriber (it went away, or it fell too far
    /// behind and was told so).
    fn offer(&mut self, event: E) -> bool;

    /// Whether the subscriber went away (its end was dropped), so that it can be let go
    /// before the next event: a session counts its controllers by it.
    fn is_gone(&self) -> bool {
        false
    }
}

/// A closure is a subscriber: it sees each event as the agent publishes it (on the
/// agent's task or thread, so it should be quick) and returns `false` to unsubscribe.
impl<E, F: FnMut(&E) -> bool + Send> EventSink<E> for F {
    fn offer(&mut self, event: E) -> bool {
        self(&event)
    }
}

/// The subscribers of one agent or session, each event fanned out to all of them.
pub(crate) struct Subscribers<E> {
    sinks: Vec<Box<dyn EventSink<E>>>,
}

impl<E: Clone> Subscribers<E> {
    pub(crate) fn new(sinks: Vec<Box<dyn EventSink<E>>>) -> Self {
        Self { sinks }
    }

    pub(crate) fn add(&mut self, sink: Box<dyn EventSink<E>>) {
        self.sinks.push(sink);
    }

    pub(crate) fn len(&self) -> usize {
        self.sinks.len()
    }

    /// Lets go of the subscribers that went away.
    pub(crate) fn prune(&mut self) {
        self.sinks.retain(|sink| !sink.is_gone());
    }

    pub(crate) fn clear(&mut self) {
        self.sinks.clear();
    }

    /// Offers `event` to every subscriber, dropping those that are gone. Each but the last
    /// gets a clone; the last gets the event itself, so the usual single subscriber costs
    /// no copy of a delta.
    pub(crate) fn publish(&mut self, event: E) {
        let Some(last) = self.sinks.len().checked_sub(1) else { return };
        let mut index = 0;
        let mut event = Some(event);
        self.sinks.retain_mut(|sink| {
            let offered = if index == last { event.take() } else { event.clone() };
            index += 1;
            offered.is_some_and(|event| sink.offer(event))
        });
    }
}

/// An application call on an agent handle.
pub enum Command<C> {
    /// `prompt(text)`.
    Prompt(String, Reply<Result<(), AgentError>>),
    /// `prompt_with(prompt)`: content blocks and options for the turn.
    PromptWith(Box<Prompt>, Reply<Result<(), AgentError>>),
    /// `resume(decision)`.
    Resume(ToolDecision, Reply<Result<(), AgentError>>),
    /// `cancel()`.
    Cancel(Reply<Result<(), AgentError>>),
    /// `set_state(patch)`.
    SetState(Box<StatePatch>, Reply<Result<(), AgentError>>),
    /// `state()`.
    State(Reply<AgentState>),
    /// `snapshot()`.
    Snapshot(Reply<Snapshot>),
    /// `subscribe()`: the sink gets every event after the snapshot.
    Subscribe(Box<dyn EventSink>, Reply<Snapshot>),
    /// Runs a closure on the callbacks (the application's private state).
    Inspect(Box<dyn FnOnce(&mut C) + Send>),
}

impl<C> fmt::Debug for Command<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Prompt(..) => "Prompt",
            Self::PromptWith(..) => "PromptWith",
            Self::Resume(..) => "Resume",
            Self::Cancel(..) => "Cancel",
            Self::SetState(..) => "SetState",
            Self::State(..) => "State",
            Self::Snapshot(..) => "Snapshot",
            Self::Subscribe(..) => "Subscribe",
            Self::Inspect(..) => "Inspect",
        })
    }
}

/// An agent with its subscribers.
pub struct Host<C: AgentCallbacks> {
    agent: Agent<C>,
    subscribers: Subscribers<AgentEvent>,
    /// The MCP servers whose tools the agent offers.
    tool_sources: crate::mcp::ToolSources,
    /// The agent's spans and metrics, for its loop's executor (taken when it starts).
    observer: Option<Box<crate::telemetry::Observer>>,
}

impl<C: AgentCallbacks> fmt::Debug for Host<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Host").field("agent", &self.agent).field("subscribers", &self.subscribers.len()).finish()
    }
}

impl<C: AgentCallbacks> Host<C> {
    /// Hosts an agent with no subscribers yet.
    pub fn new(agent: Agent<C>) -> Self {
        Self::with_subscribers(agent, Vec::new())
    }

    /// Hosts an agent whose first subscribers are there from the start (the builder's
    /// `subscriber`): they see every event the agent ever publishes.
    pub fn with_subscribers(agent: Agent<C>, subscribers: Vec<Box<dyn EventSink>>) -> Self {
        Self { agent, subscribers: Subscribers::new(subscribers), tool_sources: Default::default(), observer: None }
    }

    /// The MCP servers whose tools the agent offers (taken with its configuration).
    pub(crate) fn with_tool_sources(mut self, sources: crate::mcp::ToolSources) -> Self {
        self.tool_sources = sources;
        self
    }

    pub(crate) fn with_observer(mut self, observer: Option<Box<crate::telemetry::Observer>>) -> Self {
        self.observer = observer;
        self
    }

    /// The observer for the loop's executor.
    pub(crate) fn take_observer(&mut self) -> Option<Box<crate::telemetry::Observer>> {
        self.observer.take()
    }

    pub(crate) fn tool_sources(&mut self) -> &mut crate::mcp::ToolSources {
        &mut self.tool_sources
    }

    /// The agent, for the driver's effects, reports and deadlines.
    pub fn agent(&mut self) -> &mut Agent<C> {
        &mut self.agent
    }

    /// Applies a command and answers it.
    pub fn apply(&mut self, command: Command<C>, now: Instant) {
        match command {
            Command::Prompt(text, reply) => reply(self.agent.handle_input(AgentInput::Prompt(text), now)),
            Command::PromptWith(prompt, reply) => reply(self.agent.handle_input(AgentInput::PromptWith(prompt), now)),
            Command::Resume(decision, reply) => reply(self.agent.handle_input(AgentInput::Resume(decision), now)),
            Command::Cancel(reply) => reply(self.agent.handle_input(AgentInput::Cancel, now)),
            Command::SetState(patch, reply) => reply(self.agent.handle_input(AgentInput::SetState(patch), now)),
            Command::State(reply) => reply(self.agent.state()),
            Command::Snapshot(reply) => reply(self.agent.snapshot()),
            Command::Subscribe(sink, reply) => {
                // Events of earlier inputs were published already: the snapshot is current.
                self.publish();
                self.subscribers.add(sink);
                reply(self.agent.snapshot());
            }
            Command::Inspect(f) => f(self.agent.callbacks_mut()),
        }
    }

    /// Delivers the agent's new events to every subscriber, dropping those that are gone.
    pub fn publish(&mut self) {
        while let Some(event) = self.agent.poll_event() {
            self.subscribers.publish(event);
        }
    }

    /// The next effect to execute.
    pub fn poll_effect(&mut self) -> Option<Effect> {
        self.agent.poll_effect()
    }

    /// Stops the agent for good (the last handle went away): its work is cancelled
    /// through effects, `terminate` is called, and the subscribers are let go so that
    /// their streams end.
    pub fn terminate(&mut self, now: Instant) {
        self.agent.terminate(now);
        self.publish();
        self.subscribers.clear();
    }
}
