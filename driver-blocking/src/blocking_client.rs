//! The client: configuration shared by every call (catalogue, keys, base URLs,
//! defaults, retry policy, TLS roots), cheap to clone.

use std::fmt;
use std::hash::{BuildHasher, RandomState};
use std::sync::Arc;
use std::time::{Duration, Instant};

use omni_core::client::{ClientConfig, ClientError, ModelRef};
use omni_core::generate::RetryPolicy;
use omni_core::{ApiKey, Catalogue, Context, Model, Options, Provider, Response};

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
    /// True unless the application set a retry policy: each call then gets a fresh
    /// jitter seed (and the client's policy a random one, for agents).
    pub(crate) random_retry_seed: bool,
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
    pub fn new() -> Result<Client, Error> {
        Client::builder().build()
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

/// Builds a [`Client`].
#[derive(Debug, Default)]
#[must_use = "call .build()"]
pub struct ClientBuilder {
    catalogue: Option<Catalogue>,
    providers: Vec<Provider>,
    models: Vec<Model>,
    api_keys: Vec<(String, ApiKey)>,
    base_urls: Vec<(String, String)>,
    default_options: Option<Options>,
    retry: Option<RetryPolicy>,
    stall_timeout: Option<Duration>,
    root_certificates: Vec<Vec<u8>>,
}

impl ClientBuilder {
    /// The key for a provider (wins over its environment variable).
    pub fn api_key(mut self, provider: impl Into<String>, key: impl Into<ApiKey>) -> Self {
        self.api_keys.push((provider.into(), key.into()));
        self
    }

    /// Sends a provider's requests to another base URL (a proxy, a local server).
    pub fn base_url(mut self, provider: impl Into<String>, url: impl Into<String>) -> Self {
        self.base_urls.push((provider.into(), url.into()));
        self
    }

    /// Options every call starts from.
    pub fn default_options(mut self, options: Options) -> Self {
        self.default_options = Some(options);
        self
    }

    /// Retry policy (its seed is then used as is; otherwise every call gets a random one).
    pub fn retry(mut self, policy: RetryPolicy) -> Self {
        self.retry = Some(policy);
        self
    }

    /// How long a stream may make no progress (keep-alives do not count).
    pub fn stall_timeout(mut self, limit: Duration) -> Self {
        self.stall_timeout = Some(limit);
        self
    }

    /// Registers (or replaces) a provider in the catalogue.
    pub fn provider(mut self, provider: Provider) -> Self {
        self.providers.push(provider);
        self
    }

    /// Registers (or replaces) a model; its provider must be known.
    pub fn model(mut self, model: Model) -> Self {
        self.models.push(model);
        self
    }

    /// Starts from this catalogue instead of the built-in one.
    pub fn catalogue(mut self, catalogue: Catalogue) -> Self {
        self.catalogue = Some(catalogue);
        self
    }

    /// Trusts the CA certificate(s) in this PEM data, on top of the Mozilla roots.
    pub fn root_certificate(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.root_certificates.push(pem.into());
        self
    }

    /// Builds the client: fails on catalogue data that does not fit or a certificate
    /// that does not parse.
    pub fn build(self) -> Result<Client, Error> {
        let mut catalogue = match self.catalogue {
            Some(c) => c,
            None => Catalogue::builtin().map_err(ClientError::Catalogue)?,
        };
        for provider in self.providers {
            catalogue.add_provider(provider).map_err(ClientError::Catalogue)?;
        }
        for model in self.models {
            catalogue.add_model(model).map_err(ClientError::Catalogue)?;
        }
        let mut config = ClientConfig::with_catalogue(catalogue);
        config.api_keys.extend(self.api_keys);
        config.base_urls.extend(self.base_urls);
        if let Some(options) = self.default_options {
            config.default_options = options;
        }
        match self.retry {
            Some(policy) => config.retry = policy,
            // Agents take the client's policy as is: its seed must differ between
            // clients too (calls get a fresh one each, see `Call::config`).
            None => config.retry.seed = RandomState::new().hash_one(Instant::now()),
        }
        if let Some(limit) = self.stall_timeout {
            config.stall_timeout = limit;
        }
        let http = Http::new(&self.root_certificates).map_err(Error::Setup)?;
        Ok(Client { inner: Arc::new(Inner { config, http, random_retry_seed: self.retry.is_none() }) })
    }
}
