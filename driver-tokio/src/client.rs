//! The client: configuration plus a shared HTTP client.

use std::fmt;
use std::sync::Arc;

use omni_core::client::{ClientConfig, ClientError, ModelRef};
use omni_core::proxy::ProxyRules;
use omni_core::{Context, Options, Response};
use omni_shell::{Built, Connect};

use omni_shell::Runtime;

use crate::call::{Call, TextStream};
use crate::runtime::Tokio;
use crate::Error;

pub(crate) struct Inner {
    pub(crate) config: ClientConfig,
    pub(crate) http: crate::http::Reqwest,
}

/// An omni client for tokio. Cheap to clone.
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

    /// Streams a reply. Must be called inside a tokio runtime.
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
}

/// Builds a [`Client`]; see [`omni_shell::ClientBuilder`].
pub type ClientBuilder = omni_shell::ClientBuilder<Client>;

impl Connect for Client {
    type Client = Client;

    fn random_seed() -> u64 {
        Tokio::random_seed()
    }

    fn connect(built: Built) -> Result<Client, Error> {
        let env = |name: &str| std::env::var(name).ok();
        let proxies =
            ProxyRules::resolve(&built.proxy, &env).map_err(|e| Error::Client(ClientError::InvalidProxy(e)))?;
        let http = crate::http::Reqwest(crate::http::client(&built.root_certificates, proxies).map_err(Error::Setup)?);
        Ok(Client { inner: Arc::new(Inner { config: built.config, http }) })
    }
}
