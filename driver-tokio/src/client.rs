//! The client: configuration plus a shared HTTP client.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use omni_core::client::{ClientConfig, ModelRef};
use omni_core::generate::RetryPolicy;
use omni_core::{ApiKey, Catalogue, Context, Model, Options, Provider, Response};

use crate::call::{Call, TextStream};
use crate::error::Error;

pub(crate) struct Inner {
    pub(crate) config: ClientConfig,
    pub(crate) http: reqwest::Client,
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
        Call::new(self.clone(), model.into(), context.into())
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

/// Builds a [`Client`].
#[derive(Debug, Default)]
pub struct ClientBuilder {
    api_keys: Vec<(String, ApiKey)>,
    base_urls: Vec<(String, String)>,
    default_options: Option<Options>,
    retry: Option<RetryPolicy>,
    stall_timeout: Option<Duration>,
    providers: Vec<Provider>,
    models: Vec<Model>,
    catalogue: Option<Catalogue>,
    roots: Vec<Vec<u8>>,
}

impl ClientBuilder {
    /// A key for a provider (wins over the environment).
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

    /// Retry policy (default: 2 retries with exponential backoff).
    pub fn retry(mut self, policy: RetryPolicy) -> Self {
        self.retry = Some(policy);
        self
    }

    /// How long a stream may go without progress (keep-alives do not count).
    pub fn stall_timeout(mut self, limit: Duration) -> Self {
        self.stall_timeout = Some(limit);
        self
    }

    /// Registers a provider (e.g. [`Provider::openai_compatible`]).
    pub fn provider(mut self, provider: Provider) -> Self {
        self.providers.push(provider);
        self
    }

    /// Registers a model.
    pub fn model(mut self, model: Model) -> Self {
        self.models.push(model);
        self
    }

    /// Replaces the built-in catalogue.
    pub fn catalogue(mut self, catalogue: Catalogue) -> Self {
        self.catalogue = Some(catalogue);
        self
    }

    /// Trusts an extra root certificate (PEM), e.g. a local proxy's.
    pub fn root_certificate(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.roots.push(pem.into());
        self
    }

    /// Builds the client.
    pub fn build(self) -> Result<Client, Error> {
        let mut config = match self.catalogue {
            Some(c) => ClientConfig::with_catalogue(c),
            None => ClientConfig::new()?,
        };
        for p in self.providers {
            config.catalogue.add_provider(p).map_err(|e| Error::Setup(e.to_string()))?;
        }
        for m in self.models {
            config.catalogue.add_model(m).map_err(|e| Error::Setup(e.to_string()))?;
        }
        config.api_keys.extend(self.api_keys);
        config.base_urls.extend(self.base_urls);
        if let Some(o) = self.default_options {
            o.validate().map_err(|e| Error::Client(omni_core::client::ClientError::InvalidOptions(e)))?;
            config.default_options = o;
        }
        config.retry = self.retry.unwrap_or_else(|| RetryPolicy { seed: random_seed(), ..RetryPolicy::default() });
        if let Some(s) = self.stall_timeout {
            config.stall_timeout = s;
        }
        let http = crate::http::client(&self.roots).map_err(Error::Setup)?;
        Ok(Client { inner: Arc::new(Inner { config, http }) })
    }
}

/// A seed for retry jitter, so that many clients do not retry in lockstep.
fn random_seed() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    RandomState::new().hash_one(0x6f6d6e69u64)
}
