//! The client: omni-shell's client on this driver ([`Blocking`]: a runtime of threads,
//! ureq as the transport), with methods that wait for the answer on the caller's thread.

use futures_lite::future::block_on;
use omni_protocol::agent::AgentCallbacks;
use omni_protocol::client::{ClientConfig, ModelRef};
use omni_protocol::generate::ToolDecl;
use omni_protocol::transport::ProxyRules;
use omni_protocol::{Context, Response};
use omni_shell::{Built, Connect, Driver, Host, Launch, Open};

use crate::agent_handle::{Agent, AgentBuilder};
use crate::runtime::Threads;
use crate::session_handle::{Session, SessionBuilder};
use crate::transport::Http;
use crate::{Call, Error, SetupError, TextStream, Tool};

/// This driver, as the shell sees it: tasks on threads, requests over ureq.
#[derive(Debug)]
pub(crate) struct Blocking;

impl Driver for Blocking {
    type Runtime = Threads;
    type Transport = Http;

    fn transport(root_certificates: &[Vec<u8>], proxies: ProxyRules) -> Result<Http, Error> {
        Http::new(root_certificates, proxies).map_err(SetupError::http_client)
    }

    fn spawn_process(command: std::process::Command) -> std::io::Result<omni_shell::mcp::ChildProcess> {
        crate::process::spawn(command)
    }
}

/// An omni client. Clones share everything (an `Arc` inside). Its `Debug` never shows
/// keys.
#[derive(Debug, Clone)]
pub struct Client(pub(crate) omni_shell::Client<Blocking>);

/// Builds a [`Client`]; see [`omni_shell::ClientBuilder`].
pub type ClientBuilder = omni_shell::ClientBuilder<Client>;

impl Client {
    /// A builder.
    pub fn builder() -> ClientBuilder {
        ClientBuilder::default()
    }

    /// A client with the built-in catalogue and keys from the environment.
    pub fn new() -> Result<Self, Error> {
        Self::builder().build()
    }

    /// The configuration every call starts from.
    pub fn config(&self) -> &ClientConfig {
        self.0.config()
    }

    /// Describes a call; add options, tools or a key, then `.stream()` or `.generate()`.
    pub fn call(&self, model: impl Into<ModelRef>, context: impl Into<Context>) -> Call {
        Call(self.0.call(model, context))
    }

    /// Starts a call with the client's default options and returns its events (others:
    /// `client.call(model, context).options(..).stream()`).
    pub fn stream_text(&self, model: impl Into<ModelRef>, context: impl Into<Context>) -> Result<TextStream, Error> {
        self.call(model, context).stream()
    }

    /// Runs a call with the client's default options to the end (options, tools and a
    /// per-call key go through [`Client::call`]).
    pub fn generate_text(&self, model: impl Into<ModelRef>, context: impl Into<Context>) -> Result<Response, Error> {
        self.call(model, context).generate()
    }

    /// Generates a `T` as structured output; see [`Call::generate_object`].
    #[cfg(feature = "schemars")]
    pub fn generate_object<T>(&self, model: impl Into<ModelRef>, context: impl Into<Context>) -> Result<T, Error>
    where
        T: serde::de::DeserializeOwned + omni_protocol::schemars::JsonSchema,
    {
        self.call(model, context).generate_object()
    }

    /// Starts setting up an agent on this client's configuration (catalogue, keys,
    /// default options, retry policy, stall limit). `start()` runs it on its own thread.
    pub fn agent(&self, model: impl Into<ModelRef>) -> AgentBuilder {
        AgentBuilder::new(self.clone(), model.into())
    }
}

impl Connect for Client {
    type Client = Self;

    fn random_seed() -> u64 {
        omni_shell::Client::<Blocking>::random_seed()
    }

    fn connect(built: Built) -> Result<Self, Error> {
        omni_shell::Client::connect(built).map(Self)
    }
}

impl Launch<Tool> for Client {
    type Handle<C: AgentCallbacks + Send + 'static> = Agent<C>;
    type Error = Error;

    fn client_config(&self) -> &ClientConfig {
        self.0.client_config()
    }

    fn env(&self, name: &str) -> Option<String> {
        self.0.env(name)
    }

    fn telemetry(&self) -> &omni_shell::telemetry::Telemetry {
        self.0.telemetry()
    }

    fn now(&self) -> std::time::Instant {
        self.0.now()
    }

    fn describe(tool: &Tool) -> ToolDecl {
        tool.decl()
    }

    fn launch<C: AgentCallbacks + Send + 'static>(
        &self,
        host: Host<C>,
        tools: Vec<Tool>,
        capacity: usize,
    ) -> Result<Agent<C>, Error> {
        let agent = self.0.launch(host, tools.into_iter().map(Into::into).collect(), capacity)?;
        // The thread the callbacks run on: a handle called there refuses rather than waits
        // for itself.
        let thread = block_on(agent.with_callbacks(|_| std::thread::current().id()))?;
        Ok(Agent::new(agent, thread))
    }

    type Opening<C: AgentCallbacks + Send + 'static> = Result<Session<C>, Error>;

    fn open<C: AgentCallbacks + Send + 'static>(builder: SessionBuilder<C>, open: Open) -> Result<Session<C>, Error> {
        let client = builder.client().0.clone();
        let shell = builder.with_launcher(client, Into::into);
        block_on(<omni_shell::Client<Blocking> as Launch<omni_shell::AsyncTool>>::open(shell, open))
            .and_then(Session::new)
    }
}
