//! The client every driver hands out (omni-blocking inside its synchronous one), written once: its configuration, its
//! driver's runtime and transport, and the calls and agents started on it. A driver names
//! it with a type alias (`omni_tokio::Client` is `Client<Tokio>`).

use std::fmt;
use std::sync::Arc;
use std::time::Instant;

use omni_protocol::agent::AgentCallbacks;
use omni_protocol::client::{ClientConfig, ClientError, ModelRef};
use omni_protocol::generate::ToolDecl;
use omni_protocol::transport::ProxyRules;
use omni_protocol::{Context, Response};

use crate::drive_agent::spawn_agent;
use crate::runtime::{Runtime, Transport};
use crate::telemetry::Telemetry;
use crate::{AgentBuilder, AsyncTool, Built, Call, ClientBuilder, Connect, Error, Launch, TextStream};

/// What a driver is: the runtime its tasks run on and the transport its requests go
/// over. Its client is [`Client<Self>`].
pub trait Driver: Send + Sync + Sized + 'static {
    /// Where tasks run; its default is where a new client's tasks run.
    type Runtime: Runtime + Default;
    /// How requests go out.
    type Transport: Transport;

    /// Sets up HTTP and TLS for a new client: Mozilla's roots plus `root_certificates`
    /// (PEM), servers reached as `proxies` say.
    fn transport(root_certificates: &[Vec<u8>], proxies: ProxyRules) -> Result<Self::Transport, Error>;

    /// Starts `command` (an MCP server; its three pipes set to piped, on unix a process
    /// group of its own) with the runtime's process API, handing the shell its pipes and
    /// control. A driver that cannot start processes keeps this default, which refuses.
    fn spawn_process(command: std::process::Command) -> std::io::Result<crate::mcp::ChildProcess> {
        let _ = command;
        Err(std::io::Error::new(std::io::ErrorKind::Unsupported, "this driver does not start processes"))
    }
}

/// An omni client. Cheap to clone: clones share the configuration and the connections.
pub struct Client<D: Driver> {
    pub(crate) inner: Arc<Inner<D>>,
}

pub(crate) struct Inner<D: Driver> {
    pub(crate) config: ClientConfig,
    pub(crate) runtime: D::Runtime,
    pub(crate) transport: D::Transport,
    pub(crate) telemetry: Telemetry,
}

impl<D: Driver> Clone for Client<D> {
    fn clone(&self) -> Self {
        Self { inner: self.inner.clone() }
    }
}

impl<D: Driver> fmt::Debug for Client<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Keys are never printed: only which providers have one.
        let keyed: Vec<&String> = self.inner.config.api_keys.keys().collect();
        f.debug_struct("Client")
            .field("providers_with_keys", &keyed)
            .field("base_urls", &self.inner.config.base_urls)
            .field("runtime", &self.inner.runtime)
            .finish_non_exhaustive()
    }
}

impl<D: Driver> Client<D> {
    /// A builder.
    pub fn builder() -> ClientBuilder<Self> {
        ClientBuilder::default()
    }

    /// A client with the built-in catalogue and keys from the environment.
    pub fn new() -> Result<Self, Error> {
        Self::builder().build()
    }

    /// Starts a call with tools or a per-call key; see [`Call`].
    pub fn call(&self, model: impl Into<ModelRef>, context: impl Into<Context>) -> Call<D> {
        Call::new(self.clone(), model.into(), context.into())
    }

    /// Streams a reply with the client's default options (others:
    /// `client.call(model, context).options(..).stream()`); dropping the stream cancels the call. The call runs as a task of
    /// the driver's runtime (omni-tokio: call it inside a tokio runtime; omni-smol: inside
    /// or outside an executor).
    pub fn stream_text(&self, model: impl Into<ModelRef>, context: impl Into<Context>) -> Result<TextStream, Error> {
        self.call(model, context).stream()
    }

    /// Generates a reply with the client's default options; options, tools and a per-call
    /// key go through [`Client::call`].
    pub async fn generate_text(
        &self,
        model: impl Into<ModelRef>,
        context: impl Into<Context>,
    ) -> Result<Response, Error> {
        self.call(model, context).generate().await
    }

    /// Generates a `T` as structured output; see [`Call::generate_object`].
    #[cfg(feature = "schemars")]
    pub async fn generate_object<T>(&self, model: impl Into<ModelRef>, context: impl Into<Context>) -> Result<T, Error>
    where
        T: serde::de::DeserializeOwned + omni_protocol::schemars::JsonSchema,
    {
        self.call(model, context).generate_object().await
    }

    /// Starts setting up a session manager over `store`: `agent` builds each session's
    /// agent (it is given this client and the session's id); `start()` runs the manager.
    pub fn session_manager<C: omni_protocol::agent::AgentCallbacks + Send + 'static>(
        &self,
        store: std::sync::Arc<dyn omni_protocol::session::Store>,
        agent: impl Fn(&Self, &omni_protocol::session::SessionId) -> AgentBuilder<Self, AsyncTool, C>
            + Send
            + Sync
            + 'static,
    ) -> crate::ManagerBuilder<D, C> {
        crate::ManagerBuilder::new(self.clone(), store, std::sync::Arc::new(agent))
    }

    /// Starts setting up an agent on this client's configuration; `start()` runs it as a
    /// task of the driver's runtime.
    pub fn agent(&self, model: impl Into<ModelRef>) -> AgentBuilder<Self, AsyncTool> {
        AgentBuilder::new(self.clone(), model.into())
    }

    /// The client's configuration (catalogue, defaults).
    pub fn config(&self) -> &ClientConfig {
        &self.inner.config
    }

    /// The same client with every task of its calls and agents (loops, HTTP exchanges,
    /// tool handlers) on `executor` (omni-smol: an `Arc<smol::Executor>` the application
    /// keeps driving, e.g. with `executor.run(..)`, or nothing progresses).
    pub fn on_executor<E>(&self, executor: E) -> Self
    where
        D::Runtime: From<E>,
    {
        let inner = &self.inner;
        let (config, transport, telemetry) = (inner.config.clone(), inner.transport.clone(), inner.telemetry.clone());
        Self { inner: Arc::new(Inner { config, runtime: executor.into(), transport, telemetry }) }
    }
}

impl<D: Driver> Connect for Client<D> {
    type Client = Self;

    fn random_seed() -> u64 {
        D::Runtime::random_seed()
    }

    fn connect(built: Built) -> Result<Self, Error> {
        let proxies =
            ProxyRules::resolve(&built.proxy, &environment).map_err(|e| Error::Client(ClientError::InvalidProxy(e)))?;
        let transport = D::transport(&built.root_certificates, proxies)?;
        let runtime = D::Runtime::default();
        Ok(Self { inner: Arc::new(Inner { config: built.config, runtime, transport, telemetry: built.telemetry }) })
    }
}

impl<D: Driver> Launch<AsyncTool> for Client<D> {
    type Handle<C: AgentCallbacks + Send + 'static> = crate::Agent<C>;
    type Error = Error;

    fn client_config(&self) -> &ClientConfig {
        &self.inner.config
    }

    fn env(&self, name: &str) -> Option<String> {
        environment(name)
    }

    fn now(&self) -> Instant {
        self.inner.runtime.now()
    }

    fn telemetry(&self) -> &Telemetry {
        &self.inner.telemetry
    }

    fn describe(tool: &AsyncTool) -> ToolDecl {
        tool.decl()
    }

    fn launch<C: AgentCallbacks + Send + 'static>(
        &self,
        host: crate::Host<C>,
        tools: Vec<AsyncTool>,
        capacity: usize,
    ) -> Result<crate::Agent<C>, Error> {
        let inner = &self.inner;
        spawn_agent(&inner.runtime, inner.transport.clone(), host, &tools, inner.config.clone(), capacity)
    }

    type Opening<C: AgentCallbacks + Send + 'static> = crate::session_builder::Opening<C>;

    fn open<C: AgentCallbacks + Send + 'static>(
        builder: crate::SessionBuilder<Self, AsyncTool, C>,
        open: crate::session_builder::Open,
    ) -> Self::Opening<C> {
        // The session's spans go under the span current where it is opened, not where the
        // opening is first polled.
        let parent = tracing::Span::current();
        Box::pin(tracing::Instrument::instrument(crate::session_builder::open(builder, open), parent))
    }
}

/// Reads an environment variable: the one place the shell does (keys, base URLs and
/// proxies fall back to the environment; the core reads none, it is handed this).
#[allow(clippy::disallowed_methods)]
pub(crate) fn environment(name: &str) -> Option<String> {
    std::env::var(name).ok()
}
