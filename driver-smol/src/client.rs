//! The client: configuration, the TLS setup every connection shares, and where tasks run.

use std::fmt;
use std::sync::Arc;

use omni_core::client::{ClientConfig, ClientError, ModelRef};
use omni_core::proxy::ProxyRules;
use omni_core::{Context, Options, Response};
use omni_shell::{Built, Connect};

use smol::Executor;

use crate::call::{Call, TextStream};
use omni_shell::Runtime;

use crate::http::{Connections, Http1};
use crate::runtime::Smol;
use crate::Error;

pub(crate) struct Inner {
    pub(crate) config: ClientConfig,
    pub(crate) http: Http1,
    pub(crate) spawner: Smol,
}

/// An omni client for smol. Cheap to clone.
#[derive(Clone)]
pub struct Client {
    pub(crate) inner: Arc<Inner>,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Keys are never printed: only which providers have one.
        let keyed: Vec<&String> = self.inner.config.api_keys.keys().collect();
        f.debug_struct("Client")
            .field("providers_with_keys", &keyed)
            .field("base_urls", &self.inner.config.base_urls)
            .field("executor", &self.inner.spawner)
            .finish_non_exhaustive()
    }
}

impl Client {
    /// A builder.
    pub fn builder() -> ClientBuilder {
        ClientBuilder::default()
    }

    /// Starts a call with tools or a per-call key; see [`Call`].
    pub fn call(&self, model: impl Into<ModelRef>, context: impl Into<Context>) -> Call {
        omni_shell::Call::new(self.clone(), model.into(), context.into())
    }

    /// Streams a reply. Works inside or outside an executor; dropping the stream cancels.
    pub fn stream_text(
        &self,
        model: impl Into<ModelRef>,
        context: impl Into<Context>,
        options: Options,
    ) -> Result<TextStream, Error> {
        self.call(model, context).options(options).stream()
    }

    /// Generates a reply (running the tool loop when tools are given through [`Client::call`]).
    pub async fn generate_text(
        &self,
        model: impl Into<ModelRef>,
        context: impl Into<Context>,
        options: Options,
    ) -> Result<Response, Error> {
        self.call(model, context).options(options).generate().await
    }

    /// Generates a `T` as structured output; see [`Call::generate_object`].
    #[cfg(feature = "schemars")]
    pub async fn generate_object<T>(
        &self,
        model: impl Into<ModelRef>,
        context: impl Into<Context>,
        options: Options,
    ) -> Result<T, Error>
    where
        T: serde::de::DeserializeOwned + omni_core::schemars::JsonSchema,
    {
        self.call(model, context).options(options).generate_object().await
    }

    /// The client's configuration (catalogue, defaults).
    pub fn config(&self) -> &ClientConfig {
        &self.inner.config
    }

    /// The same client with every task of its calls and agents (driver loop, HTTP
    /// exchanges, tool handlers) on `executor` instead of smol's global one. The
    /// application must keep driving it (e.g. `executor.run(..)`), or nothing progresses.
    pub fn on_executor(&self, executor: Arc<Executor<'static>>) -> Client {
        let inner = &self.inner;
        let spawner = Smol::Executor(executor);
        Client { inner: Arc::new(Inner { config: inner.config.clone(), http: inner.http.clone(), spawner }) }
    }
}

/// Builds a [`Client`]; see [`omni_shell::ClientBuilder`]. Its tasks run on
/// smol's global executor; [`Client::on_executor`] moves them to one the application drives.
pub type ClientBuilder = omni_shell::ClientBuilder<Client>;

impl Connect for Client {
    type Client = Client;

    fn random_seed() -> u64 {
        Smol::random_seed()
    }

    fn connect(built: Built) -> Result<Client, Error> {
        let env = |name: &str| std::env::var(name).ok();
        let proxies =
            ProxyRules::resolve(&built.proxy, &env).map_err(|e| Error::Client(ClientError::InvalidProxy(e)))?;
        let http = Http1(Connections::new(&built.root_certificates, proxies).map_err(Error::Setup)?);
        Ok(Client { inner: Arc::new(Inner { config: built.config, http, spawner: Smol::Global }) })
    }
}
