//! The client builder every driver hands out (`Client::builder()`): the same setters in
//! every runtime, and one place that assembles a [`ClientConfig`] from them. Its client
//! implements [`Connect`] (its randomness and its HTTP/TLS setup: the shell's [`Client`](crate::Client)
//! for every async driver, omni-blocking's own for now) and the driver names the builder
//! with a type alias.

use std::fmt;
use std::time::Duration;

use crate::telemetry::{Metrics, Telemetry};
use crate::Error;
use omni_protocol::client::{ClientConfig, ClientError};
use omni_protocol::generate::RetryPolicy;
use omni_protocol::transport::{Proxy, ProxySetting};
use omni_protocol::Catalogue;
use omni_protocol::Model;
use omni_protocol::Options;
use omni_protocol::{ApiKey, Provider};

/// What [`ClientBuilder::build`] hands the driver.
#[derive(Debug)]
pub struct Built {
    /// The configuration every call starts from.
    pub config: ClientConfig,
    /// PEM data of extra trusted roots, for the driver's TLS setup.
    pub root_certificates: Vec<Vec<u8>>,
    /// How requests reach servers; resolve it with
    /// [`ProxyRules::resolve`](omni_protocol::transport::ProxyRules::resolve).
    pub proxy: ProxySetting,
    /// Spans' content and metrics (see [`crate::telemetry`]).
    pub telemetry: Telemetry,
}

/// A driver's side of [`ClientBuilder::build`].
pub trait Connect {
    /// The driver's client.
    type Client;
    /// A fresh random number for retry jitter (the core has no randomness), drawn per
    /// client and per call, so that clients and calls do not retry in lockstep.
    fn random_seed() -> u64;
    /// Sets up HTTP and TLS and makes the client.
    fn connect(built: Built) -> Result<Self::Client, Error>;
}

/// Builds a driver's `Client`: catalogue, keys, base URLs, defaults, retries, TLS roots.
#[must_use = "call .build()"]
pub struct ClientBuilder<D> {
    catalogue: Option<Catalogue>,
    providers: Vec<Provider>,
    models: Vec<Model>,
    api_keys: Vec<(String, ApiKey)>,
    base_urls: Vec<(String, String)>,
    default_options: Option<Options>,
    retry: Option<RetryPolicy>,
    stall_timeout: Option<Duration>,
    max_response_bytes: Option<u64>,
    root_certificates: Vec<Vec<u8>>,
    /// `Err` holds a URL that did not parse, reported by `build`.
    proxy: Result<ProxySetting, omni_protocol::transport::ProxyError>,
    telemetry: Telemetry,
    driver: std::marker::PhantomData<fn() -> D>,
}

impl<D> Default for ClientBuilder<D> {
    fn default() -> Self {
        Self {
            catalogue: None,
            providers: Vec::new(),
            models: Vec::new(),
            api_keys: Vec::new(),
            base_urls: Vec::new(),
            default_options: None,
            retry: None,
            stall_timeout: None,
            max_response_bytes: None,
            root_certificates: Vec::new(),
            proxy: Ok(ProxySetting::Environment),
            telemetry: Telemetry::default(),
            driver: std::marker::PhantomData,
        }
    }
}

impl<D> fmt::Debug for ClientBuilder<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Keys are never printed: only which providers have one.
        let keyed: Vec<&String> = self.api_keys.iter().map(|(p, _)| p).collect();
        f.debug_struct("ClientBuilder")
            .field("api_keys_for", &keyed)
            .field("base_urls", &self.base_urls)
            .field("providers", &self.providers.len())
            .field("models", &self.models.len())
            .field("proxy", &self.proxy)
            .field("telemetry", &self.telemetry)
            .finish_non_exhaustive()
    }
}

impl<D: Connect> ClientBuilder<D> {
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

    /// Retry policy, its seed used as is by every call and agent (default: 2 retries with
    /// exponential backoff and a random seed for each call and agent).
    pub fn retry(mut self, policy: RetryPolicy) -> Self {
        self.retry = Some(policy);
        self
    }

    /// How long a stream may make no progress (keep-alives do not count).
    pub fn stall_timeout(mut self, limit: Duration) -> Self {
        self.stall_timeout = Some(limit);
        self
    }

    /// The largest response body a call accepts, in bytes (default
    /// [`DEFAULT_MAX_RESPONSE_BYTES`](omni_protocol::generate::DEFAULT_MAX_RESPONSE_BYTES), 256 MiB);
    /// past it the call fails with
    /// [`GenerateError::ResponseTooLarge`](omni_protocol::generate::GenerateError::ResponseTooLarge),
    /// keeping what arrived.
    pub fn max_response_size(mut self, bytes: u64) -> Self {
        self.max_response_bytes = Some(bytes);
        self
    }

    /// Registers (or replaces) a provider, e.g. [`Provider::openai_compatible`].
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

    /// Trusts the CA certificate(s) in this PEM data, on top of the Mozilla roots (a
    /// local proxy's, a test server's).
    pub fn root_certificate(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.root_certificates.push(pem.into());
        self
    }

    /// Sends every request through the HTTP proxy at `url`
    /// (`http://[user[:password]@]host[:port]`), tunnelled with `CONNECT`, whatever the
    /// environment says. A URL that cannot be used fails `build`.
    pub fn proxy(mut self, url: &str) -> Self {
        self.proxy = Proxy::parse(url).map(ProxySetting::Through);
        self
    }

    /// Connects straight to every server, ignoring `HTTPS_PROXY` and the like. By
    /// default a client follows them (see [`omni_protocol::transport`]).
    pub fn no_proxy(mut self) -> Self {
        self.proxy = Ok(ProxySetting::Direct);
        self
    }

    /// Records message content on the spans (`gen_ai.input.messages`,
    /// `gen_ai.output.messages`, `gen_ai.system_instructions`, `gen_ai.tool.definitions`,
    /// tool arguments and results). Off by default: conversations often hold what the
    /// application's logs should not. Keys and secret headers are never recorded, on or
    /// off. See [`crate::telemetry`].
    pub fn capture_content(mut self, capture: bool) -> Self {
        self.telemetry.capture_content = capture;
        self
    }

    /// Sends the conventions' client metrics (token usage, operation duration, time to
    /// first chunk) to `metrics`. None by default.
    pub fn metrics(mut self, metrics: impl Metrics + 'static) -> Self {
        self.telemetry.metrics = Some(std::sync::Arc::new(metrics));
        self
    }

    /// Builds the client: fails on catalogue data that does not fit, invalid default
    /// options, an unusable proxy, or a certificate the driver cannot use.
    pub fn build(self) -> Result<D::Client, Error> {
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
            options.validate().map_err(ClientError::InvalidOptions)?;
            config.default_options = options;
        }
        // Without a policy of the application's, every call and agent draws its own seed
        // (see `ClientConfig::prepare`); the client's is random too, for code that makes
        // machines from `config.retry` itself.
        config.fresh_retry_seed = self.retry.is_none();
        config.retry = self.retry.unwrap_or(RetryPolicy { seed: D::random_seed(), ..RetryPolicy::default() });
        if let Some(limit) = self.stall_timeout {
            config.stall_timeout = limit;
        }
        if let Some(limit) = self.max_response_bytes {
            config.max_response_bytes = limit;
        }
        let proxy = self.proxy.map_err(ClientError::InvalidProxy)?;
        D::connect(Built { config, root_certificates: self.root_certificates, proxy, telemetry: self.telemetry })
    }
}
