//! The agent builder every driver hands out (`client.agent(model)`): the same setters in
//! every runtime, decided once. A client implements [`Launch`] (how to describe its
//! tools to the machine, and how to run an agent in its runtime: the shell's
//! [`Client`](crate::Client) for every async driver; omni-blocking's client, for its
//! blocking tools and handle, by handing on to it) and the driver names the builder with a
//! type alias.

use std::fmt;
use std::time::{Duration, Instant};

use crate::client_builder::Connect;
use omni_protocol::client::{ClientConfig, ClientError, ModelRef};
use omni_protocol::generate::{RetryPolicy, ToolDecl};
use omni_protocol::ApiKey;
use omni_protocol::Message;
use omni_protocol::Options;

use std::sync::Arc;

use crate::host::{EventSink, Host};
use crate::session_builder::{Open, SessionBuilder};
use omni_protocol::agent::AgentConfig;
use omni_protocol::observe::Observe;

use crate::telemetry::Telemetry;
use omni_protocol::agent::{Agent, AgentCallbacks, AgentError, NoCallbacks};
use omni_protocol::session::Store;

/// Events a subscriber may have queued before it is dropped as lagging.
pub const DEFAULT_SUBSCRIBER_CAPACITY: usize = 10_000;

/// A driver's side of [`AgentBuilder::start`]. `T` is the driver's tool type. (Its
/// [`Connect::random_seed`] gives each agent its own retry jitter.)
pub trait Launch<T>: Connect {
    /// The driver's agent handle.
    type Handle<C: AgentCallbacks + Send + 'static>;
    /// The driver's error type.
    type Error: From<ClientError> + From<AgentError>;

    /// The client's configuration (catalogue, keys, URLs, defaults).
    fn client_config(&self) -> &ClientConfig;
    /// The client's telemetry settings (content capture, metrics).
    fn telemetry(&self) -> &Telemetry;
    /// Reads an environment variable (the core reads nothing itself).
    fn env(&self, name: &str) -> Option<String>;
    /// The runtime's clock, for the agent's start (the core reads none itself).
    fn now(&self) -> Instant;
    /// What the machine is told about a tool.
    fn describe(tool: &T) -> ToolDecl;
    /// Runs the hosted agent in the driver's runtime, with the tools' handlers.
    fn launch<C: AgentCallbacks + Send + 'static>(
        &self,
        host: Host<C>,
        tools: Vec<T>,
        subscriber_capacity: usize,
    ) -> Result<Self::Handle<C>, Self::Error>;

    /// What a session builder's `create` and `load` give: a future of the driver's
    /// session handle (async drivers), or the handle (omni-blocking).
    type Opening<C: AgentCallbacks + Send + 'static>;

    /// Creates or loads the session `builder` describes and runs it in the driver's runtime.
    fn open<C: AgentCallbacks + Send + 'static>(builder: SessionBuilder<Self, T, C>, open: Open) -> Self::Opening<C>
    where
        Self: Sized;
}

/// Sets up an agent: model, system prompt, history, tools, options, limits, callbacks.
pub struct AgentBuilder<L, T, C = NoCallbacks> {
    pub(crate) launcher: L,
    pub(crate) model: ModelRef,
    api_key: Option<ApiKey>,
    pub(crate) system: Option<String>,
    messages: Vec<Message>,
    pub(crate) tools: Vec<T>,
    /// Tools with handlers not offered at first (`handler`).
    available: Vec<T>,
    pub(crate) options: Options,
    tool_timeout: Option<Duration>,
    error_backoff: Option<RetryPolicy>,
    output_retries: Option<u32>,
    output_validator: Option<std::sync::Arc<dyn omni_protocol::schema::Validator>>,
    pub(crate) capacity: usize,
    pub(crate) subscribers: Vec<Box<dyn EventSink>>,
    pub(crate) callbacks: C,
    /// MCP servers whose tools the agent offers too (`mcp`).
    pub(crate) mcp: Vec<crate::McpServer>,
}

impl<L, T: fmt::Debug, C> fmt::Debug for AgentBuilder<L, T, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgentBuilder")
            .field("model", &self.model)
            .field("tools", &self.tools)
            .field("messages", &self.messages.len())
            .field("subscribers", &self.subscribers.len())
            .finish_non_exhaustive()
    }
}

impl<L: Launch<T>, T> AgentBuilder<L, T> {
    /// A builder on `launcher` (the driver's client) for `model`.
    pub fn new(launcher: L, model: ModelRef) -> Self {
        Self {
            launcher,
            model,
            api_key: None,
            system: None,
            messages: Vec::new(),
            tools: Vec::new(),
            available: Vec::new(),
            options: Options::default(),
            tool_timeout: None,
            error_backoff: None,
            output_retries: None,
            output_validator: None,
            capacity: DEFAULT_SUBSCRIBER_CAPACITY,
            subscribers: Vec::new(),
            callbacks: NoCallbacks,
            mcp: Vec::new(),
        }
    }
}

impl<L: Launch<T>, T, C: AgentCallbacks + Send + 'static> AgentBuilder<L, T, C> {
    /// Offers an MCP server's tools too ([`McpServer::tools`](crate::McpServer::tools)),
    /// and keeps them current: when the server's list changes, the agent (or session)
    /// offers the new list from its next step. Approval
    /// (`handle_tool_use`), validation and time limits apply to them as to any tool.
    pub fn mcp(mut self, server: impl AsRef<crate::McpServer>) -> Self {
        self.mcp.push(server.as_ref().clone());
        self
    }

    /// The system prompt.
    pub fn system(mut self, system: impl Into<String>) -> Self {
        self.system = Some(system.into());
        self
    }

    /// The initial history: empty, or ending with an assistant message without tool calls.
    pub fn messages(mut self, messages: Vec<Message>) -> Self {
        self.messages = messages;
        self
    }

    /// Adds a tool.
    pub fn tool(mut self, tool: T) -> Self {
        self.tools.push(tool);
        self
    }

    /// Adds tools.
    pub fn tools(mut self, tools: impl IntoIterator<Item = T>) -> Self {
        self.tools.extend(tools);
        self
    }

    /// A tool whose handler the agent holds without offering it to the model: the
    /// callbacks' `init` (from `config.available_tools`) or a later `set_state` may add it.
    pub fn handler(mut self, tool: T) -> Self {
        self.available.push(tool);
        self
    }

    /// Options of every step, over the client's defaults (`max_steps` caps a turn's requests).
    pub fn options(mut self, options: Options) -> Self {
        self.options = options;
        self
    }

    /// Time one tool call may take unless the tool says otherwise: the agent's
    /// `tool_timeout` option, set here over [`options`](Self::options) and the client's
    /// defaults (default [`DEFAULT_TOOL_TIMEOUT`](omni_protocol::generate::DEFAULT_TOOL_TIMEOUT), 60 s,
    /// as in a call).
    pub fn tool_timeout(mut self, limit: Duration) -> Self {
        self.tool_timeout = Some(limit);
        self
    }

    /// Waits between the step retries that `handle_error` asks for.
    pub fn error_backoff(mut self, policy: RetryPolicy) -> Self {
        self.error_backoff = Some(policy);
        self
    }

    /// Corrections asked for in a turn whose final reply is not valid structured output
    /// (with `options.output`; default 3).
    pub fn output_retries(mut self, corrections: u32) -> Self {
        self.output_retries = Some(corrections);
        self
    }

    /// Checks each turn's final structured output with the application's own validator
    /// instead of `options.output`'s schema, as a call's `output_validator` does (its
    /// schema is sent when the options name none).
    pub fn output_validator(mut self, validator: std::sync::Arc<dyn omni_protocol::schema::Validator>) -> Self {
        self.output_validator = Some(validator);
        self
    }

    /// A key for this agent only.
    pub fn api_key(mut self, key: impl Into<ApiKey>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// How many events a subscriber may leave unread before it is dropped (its
    /// subscription then ends and says it lagged). Default 10,000.
    pub fn subscriber_capacity(mut self, events: usize) -> Self {
        self.capacity = events.max(1);
        self
    }

    /// A subscriber from the start: it sees every event the agent publishes, from the
    /// first prompt on. Any [`EventSink`]: a driver's subscription channel
    /// (`Subscription::channel`), or a closure `|event: &AgentEvent| -> bool` that runs on
    /// the agent's task or thread between inputs and returns `false` to unsubscribe.
    /// Subscribers added later with the handle's `subscribe` get a snapshot instead.
    pub fn subscriber(mut self, sink: impl EventSink + 'static) -> Self {
        self.subscribers.push(Box::new(sink));
        self
    }

    /// The callbacks, which also hold the application's private state.
    pub fn callbacks<D: AgentCallbacks + Send + 'static>(self, callbacks: D) -> AgentBuilder<L, T, D> {
        self.rebuild(|launcher| launcher, |tool| tool, |_| callbacks)
    }

    /// Starts the agent: resolves the model as a call would, runs `init`, checks the
    /// history, options and tools, and runs it in the driver's runtime.
    pub fn start(self) -> Result<L::Handle<C>, L::Error> {
        let mut config = self.configure(&self.model)?;
        let mut start = self;
        // Turns' spans go under the span current where the agent is started.
        let observer = start.launcher.telemetry().observer(None);
        config.observe = observer.as_ref().map_or(Observe::Off, |observer| observer.level());
        let sources = start.mcp_sources(&mut config);
        let tools = start.take_handlers();
        let agent = Agent::new(config, start.callbacks, start.launcher.now())?;
        let host = Host::with_subscribers(agent, start.subscribers).with_tool_sources(sources).with_observer(observer);
        start.launcher.launch(host, tools, start.capacity)
    }

    /// A session over this agent, kept in `store`: then `create`, `create_with_id` or
    /// `load` (see [`SessionBuilder`]). The agent's setters are the session's start
    /// options; a subscriber set here sees the session's agent events.
    pub fn session(self, store: Arc<dyn Store>) -> SessionBuilder<L, T, C> {
        SessionBuilder::new(self, store)
    }

    /// The agent's configuration with `model` (the builder's own, or the one a loaded
    /// session persisted): the model resolved as a call's would be, the builder's
    /// settings over the client's.
    pub(crate) fn configure(&self, model: &ModelRef) -> Result<AgentConfig, L::Error> {
        let launcher = &self.launcher;
        let env = |name: &str| launcher.env(name);
        let mut config = launcher.client_config().agent(model, self.api_key.as_ref(), &env, L::random_seed())?;
        config.system.clone_from(&self.system);
        config.messages.clone_from(&self.messages);
        config.tools = self.tools.iter().map(L::describe).collect();
        config.available_tools = self.available.iter().map(L::describe).collect();
        config.options = self.options.clone().merged_over(&config.options);
        if let Some(limit) = self.tool_timeout {
            config.options.tool_timeout = Some(limit);
        }
        if let Some(policy) = self.error_backoff {
            config.error_backoff = policy;
        }
        if let Some(corrections) = self.output_retries {
            config.output_retries = corrections;
        }
        config.output_validator.clone_from(&self.output_validator);
        Ok(config)
    }

    /// Takes the MCP servers' tools now: added to `config`'s, and returned with the
    /// servers for the loop (their handlers, and the changes it follows).
    pub(crate) fn mcp_sources(&mut self, config: &mut AgentConfig) -> crate::mcp::ToolSources {
        let mut sources = crate::mcp::ToolSources::new(std::mem::take(&mut self.mcp));
        sources.set_own(config.tools.clone());
        config.tools = sources.take();
        sources
    }

    /// Every tool with a handler, offered or not: what the driver runs the agent's calls
    /// with (the machine decides which tools are offered).
    pub(crate) fn take_handlers(&mut self) -> Vec<T> {
        let mut tools = std::mem::take(&mut self.tools);
        tools.append(&mut self.available);
        tools
    }

    /// Whether an initial history was given ([`messages`](Self::messages)).
    pub fn has_history(&self) -> bool {
        !self.messages.is_empty()
    }

    /// The client the agent will run on.
    pub fn client(&self) -> &L {
        &self.launcher
    }

    /// The same builder on another driver's client, its tools converted: for a driver
    /// whose handles wrap the shell's (omni-blocking).
    pub fn with_launcher<M: Launch<U>, U>(self, launcher: M, tool: impl FnMut(T) -> U) -> AgentBuilder<M, U, C> {
        self.rebuild(|_| launcher, tool, |callbacks| callbacks)
    }
}

impl<L, T, C> AgentBuilder<L, T, C> {
    /// The same settings with the launcher, each tool and the callbacks passed through
    /// these functions: the one place every field is carried over.
    fn rebuild<M, U, D>(
        self,
        launcher: impl FnOnce(L) -> M,
        mut tool: impl FnMut(T) -> U,
        callbacks: impl FnOnce(C) -> D,
    ) -> AgentBuilder<M, U, D> {
        AgentBuilder {
            launcher: launcher(self.launcher),
            model: self.model,
            api_key: self.api_key,
            system: self.system,
            messages: self.messages,
            tools: self.tools.into_iter().map(&mut tool).collect(),
            available: self.available.into_iter().map(tool).collect(),
            options: self.options,
            tool_timeout: self.tool_timeout,
            error_backoff: self.error_backoff,
            output_retries: self.output_retries,
            output_validator: self.output_validator,
            capacity: self.capacity,
            subscribers: self.subscribers,
            callbacks: callbacks(self.callbacks),
            mcp: self.mcp,
        }
    }
}
