//! The client: configuration shared by every call (catalogue, keys, base URLs,
//! defaults, retry policy, TLS roots), cheap to clone.

use std::fmt;
use std::hash::{BuildHasher, RandomState};
use std::sync::Arc;
use std::time::Instant;

use omni_core::client::{ClientConfig, ClientError, ModelRef};
use omni_core::proxy::ProxyRules;
use omni_core::{Context, Options, Response};
use omni_shell::{Built, Connect};

use crate::call::Call;
use crate::stream::TextStream;
use crate::transport::Http;
use crate::Error;

/// An omni client. Clones share everything (an `Arc` inside). Its `Debug` never shows
/// keys.
#[derive(Clone)]
pub struct Client {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) config: ClientConfig,
    pub(crate) http: Http,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let config = &self.inner.config;
        f.debug_struct("Client")
            .field("api_keys_for", &config.api_keys.keys().collect::<Vec<_>>())
            .field("base_urls", &config.base_urls)
            .field("default_options", &config.default_options)
            .field("retry", &config.retry)
            .field("stall_timeout", &config.stall_timeout)
            .finish_non_exhaustive()
    }
}

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
        &self.inner.config
    }

    /// Describes a call; add options, tools or a key, then `.stream()` or `.generate()`.
    pub fn call(&self, model: impl Into<ModelRef>, context: impl Into<Context>) -> Call {
        Call::new(self.clone(), model.into(), context.into())
    }

    /// Starts a call and returns its events.
    pub fn stream_text(
        &self,
        model: impl Into<ModelRef>,
        context: impl Into<Context>,
        options: Options,
    ) -> Result<TextStream, Error> {
        self.call(model, context).options(options).stream()
    }

    /// Runs a call to the end.
    pub fn generate_text(
        &self,
        model: impl Into<ModelRef>,
        context: impl Into<Context>,
        options: Options,
    ) -> Result<Response, Error> {
        self.call(model, context).options(options).generate()
    }

    /// Generates a `T` as structured output; see [`Call::generate_object`].
    #[cfg(feature = "schemars")]
    pub fn generate_object<T>(
        &self,
        model: impl Into<ModelRef>,
        context: impl Into<Context>,
        options: Options,
    ) -> Result<T, Error>
    where
        T: serde::de::DeserializeOwned + omni_core::schemars::JsonSchema,
    {
        self.call(model, context).options(options).generate_object()
    }
}

/// Builds a [`Client`]; see [`omni_shell::ClientBuilder`].
pub type ClientBuilder = omni_shell::ClientBuilder<Client>;

impl Connect for Client {
    type Client = Self;

    fn random_seed() -> u64 {
        RandomState::new().hash_one(Instant::now())
    }

    fn connect(built: Built) -> Result<Self, Error> {
        let env = |name: &str| std::env::var(name).ok();
        let proxies =
            ProxyRules::resolve(&built.proxy, &env).map_err(|e| Error::Client(ClientError::InvalidProxy(e)))?;
        let http = Http::new(&built.root_certificates, proxies).map_err(Error::Setup)?;
        let inner = Inner { config: built.config, http };
        Ok(Self { inner: Arc::new(inner) })
    }
}
