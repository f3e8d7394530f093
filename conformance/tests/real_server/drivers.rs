//! One call, run through any of the three drivers, as a list of the events it produced.
//!
//! The cases are written once against this harness; each of them runs through tokio, smol
//! and blocking, with the same model, context, options and tool.

use std::fmt;
use std::sync::Arc;

use omni_protocol::agent::{AgentEvent, NoCallbacks};
use omni_protocol::generate::{GenerateError, GenerateEvent};
use omni_protocol::session::{SessionEvent, SessionSnapshot};
use omni_protocol::session::{SessionState, Store};
use omni_protocol::tool::ToolError;
use omni_protocol::{Context, Model, Options, Provider, Response, StopReason, StreamEvent};
use omni_shell::AsyncTool;
use omni_shell::{AgentBuilder, Launch};
use serde_json::Value;

/// A driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Driver {
    Tokio,
    Smol,
    Blocking,
}

impl Driver {
    /// Every driver, in the order the cases run them.
    pub(crate) const ALL: [Self; 3] = [Self::Tokio, Self::Smol, Self::Blocking];
}

impl fmt::Display for Driver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Tokio => "tokio",
            Self::Smol => "smol",
            Self::Blocking => "blocking",
        })
    }
}

/// A tool the handler of which is the same plain function under every driver.
#[derive(Clone)]
pub(crate) struct ToolDef {
    pub name: &'static str,
    pub description: &'static str,
    pub schema: Value,
    pub handler: Arc<dyn Fn(Value) -> Result<String, ToolError> + Send + Sync>,
}

/// What to ask.
#[derive(Clone)]
pub(crate) struct Request {
    pub model: Model,
    pub context: Context,
    pub options: Options,
    pub tool: Option<ToolDef>,
}

/// Everything a call produced, through its terminal event.
#[derive(Debug)]
pub(crate) struct Run {
    pub events: Vec<GenerateEvent>,
}

impl Run {
    /// The final response, or the error with the partial response.
    pub(crate) fn outcome(&self) -> Result<&Response, (&GenerateError, &Response)> {
        match self.events.last() {
            Some(GenerateEvent::Finished(response)) => Ok(response),
            Some(GenerateEvent::Failed { error, partial }) => Err((error, partial)),
            other => panic!("the call did not end with Finished or Failed: {other:?}"),
        }
    }

    /// The response of a call that must have succeeded.
    pub(crate) fn response(&self) -> &Response {
        match self.outcome() {
            Ok(response) => response,
            Err((error, partial)) => panic!("the call failed: {error} (partial: {partial:?})"),
        }
    }

    /// The stream events of one step.
    pub(crate) fn step_events(&self, step: u32) -> impl Iterator<Item = &StreamEvent> {
        self.events.iter().filter_map(move |e| match e {
            GenerateEvent::Stream { step: s, event } if *s == step => Some(event),
            _ => None,
        })
    }

    /// The text deltas of one step.
    pub(crate) fn text_deltas(&self, step: u32) -> Vec<&str> {
        self.step_events(step)
            .filter_map(|e| match e {
                StreamEvent::TextDelta { delta, .. } => Some(delta.as_str()),
                _ => None,
            })
            .collect()
    }

    /// The `Done` event of one step.
    pub(crate) fn done(&self, step: u32) -> Option<StopReason> {
        self.step_events(step).find_map(|e| match e {
            StreamEvent::Done { stop_reason, .. } => Some(*stop_reason),
            _ => None,
        })
    }

    /// Retries of any kind. llama-server closes the connection after every streamed
    /// response although it announces keep-alive; every driver keeps connections alive,
    /// and one that sends a request on such a connection must send it again at once on a
    /// fresh one, not through the core's retry: so none is expected, ever.
    pub(crate) fn retries(&self) -> usize {
        self.events.iter().filter(|e| matches!(e, GenerateEvent::Retry { .. })).count()
    }
}

/// A client of each driver, all knowing the same providers.
pub(crate) struct Clients {
    runtime: tokio::runtime::Runtime,
    tokio: omni_tokio::Client,
    smol: omni_smol::Client,
    blocking: omni_blocking::Client,
}

impl Clients {
    pub(crate) fn new(providers: &[Provider]) -> Self {
        let runtime =
            tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("tokio runtime");
        let mut tokio = omni_tokio::Client::builder();
        let mut smol = omni_smol::Client::builder();
        let mut blocking = omni_blocking::Client::builder();
        for p in providers {
            tokio = tokio.provider(p.clone());
            smol = smol.provider(p.clone());
            blocking = blocking.provider(p.clone());
        }
        Self {
            runtime,
            tokio: tokio.build().expect("tokio client"),
            smol: smol.build().expect("smol client"),
            blocking: blocking.build().expect("blocking client"),
        }
    }

    /// Runs a call to its end.
    pub(crate) fn run(&self, driver: Driver, request: &Request) -> Run {
        self.run_until(driver, request, |_| false)
    }

    /// Runs a call and drops its stream (which cancels it) as soon as `stop` says so, or
    /// runs it to its end. The events returned are those read before the drop.
    pub(crate) fn run_until(
        &self,
        driver: Driver,
        request: &Request,
        mut stop: impl FnMut(&[GenerateEvent]) -> bool,
    ) -> Run {
        let mut events = Vec::new();
        let req = request.clone();
        match driver {
            Driver::Tokio => self.runtime.block_on(async {
                let mut call = self.tokio.call(req.model, req.context).options(req.options);
                if let Some(tool) = req.tool {
                    let handler = tool.handler.clone();
                    call = call.tool(omni_tokio::Tool::new(tool.name, tool.description, tool.schema, move |input| {
                        let result = handler(input);
                        async move { result }
                    }));
                }
                let mut stream = call.stream().expect("tokio: start the call");
                while let Some(event) = stream.next().await {
                    events.push(event);
                    if stop(&events) {
                        break;
                    }
                }
            }),
            Driver::Smol => smol::block_on(async {
                let mut call = self.smol.call(req.model, req.context).options(req.options);
                if let Some(tool) = req.tool {
                    let handler = tool.handler.clone();
                    call = call.tool(omni_smol::Tool::new(tool.name, tool.description, tool.schema, move |input| {
                        let result = handler(input);
                        async move { result }
                    }));
                }
                let mut stream = call.stream().expect("smol: start the call");
                while let Some(event) = stream.next().await {
                    events.push(event);
                    if stop(&events) {
                        break;
                    }
                }
            }),
            Driver::Blocking => {
                let mut call = self.blocking.call(req.model, req.context).options(req.options);
                if let Some(tool) = req.tool {
                    let handler = tool.handler.clone();
                    call =
                        call.tool(omni_blocking::Tool::new(tool.name, tool.description, tool.schema, move |input| {
                            handler(input)
                        }));
                }
                let stream = call.stream().expect("blocking: start the call");
                for event in stream {
                    events.push(event);
                    if stop(&events) {
                        break;
                    }
                }
            }
        }
        Run { events }
    }
}

impl Clients {
    /// Runs one agent turn (prompt `text`) with the request's model, options and tool,
    /// and returns the agent's events through the turn's end and its committed history.
    pub(crate) fn run_agent_turn(&self, driver: Driver, request: &Request, text: &str) -> (Vec<AgentEvent>, usize) {
        let req = request.clone();
        match driver {
            Driver::Tokio => self.runtime.block_on(async_agent_turn(self.tokio.agent(req.model.clone()), req, text)),
            Driver::Smol => smol::block_on(async_agent_turn(self.smol.agent(req.model.clone()), req, text)),
            Driver::Blocking => {
                let mut builder = self.blocking.agent(req.model).options(req.options);
                if let Some(tool) = req.tool {
                    let handler = tool.handler.clone();
                    builder = builder.tool(omni_blocking::Tool::new(
                        tool.name,
                        tool.description,
                        tool.schema,
                        move |input| handler(input),
                    ));
                }
                let agent = builder.start().expect("blocking: start the agent");
                let (_, subscription) = agent.subscribe().expect("subscribe");
                agent.prompt(text).expect("prompt");
                let events = through(subscription, is_turn_end);
                (events, agent.messages().expect("messages").len())
            }
        }
    }
}

/// The turn through either async driver: both hand out omni-shell's agent handle.
async fn async_agent_turn<L>(builder: AgentBuilder<L, AsyncTool>, req: Request, text: &str) -> (Vec<AgentEvent>, usize)
where
    L: Launch<AsyncTool, Handle<NoCallbacks> = omni_shell::Agent>,
    L::Error: fmt::Debug,
{
    let mut builder = builder.options(req.options);
    if let Some(tool) = req.tool {
        let handler = tool.handler.clone();
        builder = builder.tool(AsyncTool::new(tool.name, tool.description, tool.schema, move |input| {
            let result = handler(input);
            async move { result }
        }));
    }
    let agent = builder.start().expect("start the agent");
    let (_, mut subscription) = agent.subscribe().await.expect("subscribe");
    agent.prompt(text).await.expect("prompt");
    let events = through_async(&mut subscription, is_turn_end).await;
    (events, agent.messages().await.expect("messages").len())
}

impl Clients {
    /// One session turn (prompt `text`) with the request's model and options, kept in
    /// `store`; then the session is closed and loaded back. Returns the session's events
    /// through the saved state map, and the loaded session's snapshot and state.
    pub(crate) fn run_session_turn(
        &self,
        driver: Driver,
        request: &Request,
        text: &str,
        store: Arc<dyn Store>,
    ) -> (Vec<SessionEvent>, SessionSnapshot, SessionState) {
        let req = request.clone();
        match driver {
            Driver::Tokio => self.runtime.block_on(async_session_turn(self.tokio.clone(), req, text, store)),
            Driver::Smol => smol::block_on(async_session_turn(self.smol.clone(), req, text, store)),
            Driver::Blocking => {
                let builder =
                    || self.blocking.agent(req.model.clone()).options(req.options.clone()).session(store.clone());
                let session = builder().create().expect("blocking: create the session");
                let (_, subscription) = session.subscribe().expect("subscribe");
                session.prompt(text).expect("prompt");
                let events = through(subscription, is_saved);
                let id = session.id().clone();
                session.close().expect("blocking: close the session");
                let loaded = builder().load(id).expect("blocking: load the session");
                (events, loaded.snapshot().expect("snapshot"), loaded.state().expect("state"))
            }
        }
    }
}

/// The session turn through either async driver: both hand out omni-shell's session handle.
async fn async_session_turn<L>(
    client: L,
    req: Request,
    text: &str,
    store: Arc<dyn Store>,
) -> (Vec<SessionEvent>, SessionSnapshot, SessionState)
where
    L: Launch<AsyncTool, Opening<NoCallbacks> = omni_shell::Opening<NoCallbacks>> + Clone,
{
    let builder = || {
        AgentBuilder::new(client.clone(), req.model.clone().into()).options(req.options.clone()).session(store.clone())
    };
    let session = builder().create().await.expect("create the session");
    let (_, mut subscription) = session.subscribe().await.expect("subscribe");
    session.prompt(text).await.expect("prompt");
    let events = through_async(&mut subscription, is_saved).await;
    let id = session.id().clone();
    session.close().await.expect("close the session");
    let loaded = builder().load(id).await.expect("load the session");
    (events, loaded.snapshot().await.expect("snapshot"), loaded.state().await.expect("state"))
}

/// The end of a committed turn's writes: the state map saved, or a write failed.
fn is_saved(event: &SessionEvent) -> bool {
    omni_conformance::async_session::writes_done(event)
        || matches!(event, SessionEvent::Agent(AgentEvent::Error(_) | AgentEvent::Cancelled(_)))
}

fn is_turn_end(event: &AgentEvent) -> bool {
    matches!(event, AgentEvent::Turn { .. } | AgentEvent::Error(_) | AgentEvent::Cancelled(_))
}

/// The events up to and including the first for which `last` holds.
fn through<E>(events: impl IntoIterator<Item = E>, last: fn(&E) -> bool) -> Vec<E> {
    let mut seen = Vec::new();
    for event in events {
        let end = last(&event);
        seen.push(event);
        if end {
            break;
        }
    }
    seen
}

/// [`through`] for an async subscription.
async fn through_async<E>(events: &mut omni_shell::Subscription<E>, last: fn(&E) -> bool) -> Vec<E> {
    let mut seen = Vec::new();
    while let Some(event) = events.next_event().await {
        let end = last(&event);
        seen.push(event);
        if end {
            break;
        }
    }
    seen
}
