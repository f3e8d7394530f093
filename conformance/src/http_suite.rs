//! The HTTP suites every driver runs (connection reuse, proxies, faults), over one small
//! interface: a driver builds a client from a [`Setup`] and makes a streaming call. Each
//! driver implements [`StreamingDriver`] once, in its `tests/http_suites.rs`.

use std::time::Duration;

use omni_protocol::agent::AgentEvent;
use omni_protocol::client::ModelRef;
use omni_protocol::generate::{GenerateEvent, RetryPolicy};
use omni_protocol::{Options, Provider};
use omni_shell::Error;
use omni_shell::{ClientBuilder, Connect};

/// What a suite needs of a client.
#[derive(Debug, Clone, Default)]
pub struct Setup {
    /// The Anthropic base URL (the suites' servers speak Anthropic Messages).
    pub base_url: String,
    /// The key.
    pub key: String,
    /// An extra trusted root (PEM), for HTTPS servers.
    pub root_certificate: Option<String>,
    /// A proxy URL.
    pub proxy: Option<String>,
    /// A stall limit.
    pub stall_timeout: Option<Duration>,
    /// No retries (a suite that expects failures does not wait for backoffs).
    pub no_retries: bool,
    /// Extra headers of the provider (and names it marks secret), for the secret-header
    /// suites: the provider is then [`crate::scenarios::provider`] with them.
    pub provider_headers: (Vec<(String, String)>, Vec<String>),
    /// Extra headers of the client's default options (and names they mark secret).
    pub option_headers: (Vec<(String, String)>, Vec<String>),
    /// A total timeout for every call (the client's default options).
    pub timeout: Option<Duration>,
    /// A response size limit, in bytes.
    pub max_response_bytes: Option<u64>,
    /// The client's retry policy (its seed then used by every call); ignored with
    /// `no_retries`.
    pub retry: Option<RetryPolicy>,
    /// A provider registered on the client besides the suites' own, with `key` as its key
    /// (for [`StreamingDriver::stream_model`] with one of its models).
    pub provider: Option<Provider>,
}

impl Setup {
    /// A setup for the server at `base_url` with `key`.
    pub fn new(base_url: impl Into<String>, key: impl Into<String>) -> Self {
        Self { base_url: base_url.into(), key: key.into(), ..Self::default() }
    }

    /// Applies the setup to a driver's client builder.
    pub fn apply<D: Connect>(&self, builder: ClientBuilder<D>) -> ClientBuilder<D> {
        let mut builder = builder.base_url("anthropic", self.base_url.clone()).api_key("anthropic", self.key.as_str());
        if let Some(pem) = &self.root_certificate {
            builder = builder.root_certificate(pem.as_bytes());
        }
        if let Some(proxy) = &self.proxy {
            builder = builder.proxy(proxy);
        }
        if let Some(limit) = self.stall_timeout {
            builder = builder.stall_timeout(limit);
        }
        if self.no_retries {
            builder = builder.retry(RetryPolicy::none());
        } else if let Some(policy) = self.retry {
            builder = builder.retry(policy);
        }
        if !self.provider_headers.0.is_empty() {
            let (headers, secret_headers) = self.provider_headers.clone();
            builder =
                builder.provider(Provider { headers, secret_headers, ..crate::scenarios::provider(&self.base_url) });
        }
        // One set of default options: the headers and the timeout together.
        if !self.option_headers.0.is_empty() || self.timeout.is_some() {
            let (headers, secret_headers) = self.option_headers.clone();
            builder = builder.default_options(Options {
                headers,
                secret_headers,
                timeout: self.timeout,
                ..Options::default()
            });
        }
        if let Some(limit) = self.max_response_bytes {
            builder = builder.max_response_size(limit);
        }
        if let Some(provider) = &self.provider {
            builder = builder.api_key(provider.id.clone(), self.key.as_str()).provider(provider.clone());
        }
        builder
    }
}

/// A driver as the suites drive it.
pub trait StreamingDriver: Send + Sync + 'static {
    /// The driver's client.
    type Client;
    /// A client built from `setup` (see [`Setup::apply`]).
    fn client(&self, setup: &Setup) -> Self::Client;
    /// The events of one streaming call of [`crate::scenarios::model`] with the prompt
    /// "hi" and default options, to its end.
    fn stream(&self, client: &Self::Client) -> Vec<GenerateEvent> {
        self.stream_model(client, crate::scenarios::model().into())
    }
    /// The same call to `model`: a model of the suites' provider or [`Setup::provider`],
    /// or a name the client's catalogue resolves.
    fn stream_model(&self, client: &Self::Client, model: ModelRef) -> Vec<GenerateEvent>;
    /// The same call, started, its events read one at a time as the caller asks (each
    /// `next` waits for the next event); dropping the iterator drops the stream.
    fn open(&self, client: &Self::Client) -> Events;
    /// The events of one turn of an agent on [`crate::scenarios::model`] (default
    /// settings) prompted "hi": from its subscription, up to the turn's end
    /// ([`turn_ended`]) or the subscription's.
    fn agent_turn(&self, client: &Self::Client) -> Vec<AgentEvent>;
    /// A call like [`StreamingDriver::stream`]'s with these options and tools, added
    /// one by one with the driver's `Call::tool`: the driver's refusal to start it, or
    /// its events to the end.
    fn try_stream(
        &self,
        client: &Self::Client,
        options: Options,
        tools: &[TestTool],
    ) -> Result<Vec<GenerateEvent>, Error>;
}

/// A tool for [`StreamingDriver::try_stream`]: any input, answered with `answer`.
#[derive(Debug, Clone, Copy)]
pub struct TestTool {
    /// Its name.
    pub name: &'static str,
    /// Its description, and the text its handler answers.
    pub answer: &'static str,
    /// When set: the handler never answers (it waits an hour, cancellably), and the tool
    /// carries this as its own time limit (`Tool::timeout`).
    pub own_timeout: Option<Duration>,
}

impl TestTool {
    /// A tool answering `answer` at once.
    pub const fn answering(name: &'static str, answer: &'static str) -> Self {
        Self { name, answer, own_timeout: None }
    }

    /// The tool's input schema: an object.
    pub fn schema() -> serde_json::Value {
        serde_json::json!({"type": "object"})
    }
}

/// True for the event that ends an agent's turn (committed, failed or cancelled).
pub fn turn_ended(event: &AgentEvent) -> bool {
    matches!(event, AgentEvent::Turn { .. } | AgentEvent::Error(_) | AgentEvent::Cancelled(_))
}

/// A call's events as a suite reads them: see [`StreamingDriver::open`].
pub type Events = Box<dyn Iterator<Item = GenerateEvent> + Send>;

/// The text of a call's events when they end in `Finished`.
pub fn finished_text(events: &[GenerateEvent]) -> Option<String> {
    match events.last() {
        Some(GenerateEvent::Finished(response)) => Some(response.text()),
        _ => None,
    }
}

/// The `#[test]` functions of every shared HTTP suite, for a driver's test binary:
/// `omni_conformance::http_suite_tests!(Driver::new());`, where the expression builds the
/// driver's [`StreamingDriver`] (evaluated afresh for each test). One list for every
/// driver, so none can miss a suite.
#[macro_export]
macro_rules! http_suite_tests {
    ($driver:expr) => {
        #[test]
        fn connections_are_reused_and_stale_ones_cost_no_retry() {
            $crate::keepalive::reuse_suite(&$driver);
        }

        #[test]
        fn calls_go_through_a_connect_proxy() {
            $crate::connect_proxy::proxy_suite(&$driver);
        }

        #[test]
        fn every_fault_ends_in_a_typed_outcome() {
            $crate::faults::fault_suite($driver);
        }

        #[test]
        fn redirects_are_decided_by_the_core_and_credentials_never_leave_their_origin() {
            $crate::redirects::redirect_suite(&$driver);
        }

        #[test]
        fn provider_hooks_shape_the_request_and_a_query_key_stays_home() {
            $crate::hooks::hooks_suite(&$driver);
        }

        #[test]
        fn secret_headers_from_provider_and_options_are_sent_but_never_printed() {
            $crate::logs::secret_headers_are_sent_but_never_printed(&$driver);
        }

        // Decisions once made differently per driver (issue 11), now made once in the core.

        #[test]
        fn two_tools_of_one_name_are_refused_before_anything_is_sent() {
            $crate::divergences::two_tools_of_one_name_are_refused_before_anything_is_sent(&$driver);
        }

        #[test]
        fn each_call_draws_its_own_jitter_seed_unless_the_client_set_one() {
            $crate::divergences::each_call_draws_its_own_jitter_seed_unless_the_client_set_one(&$driver);
        }

        #[test]
        fn each_agent_draws_its_own_jitter_seed_unless_the_client_set_one() {
            $crate::divergences::each_agent_draws_its_own_jitter_seed_unless_the_client_set_one(&$driver);
        }

        #[test]
        fn a_call_refused_before_it_starts_names_the_model() {
            $crate::divergences::a_call_refused_before_it_starts_names_the_model(&$driver);
        }

        #[test]
        fn usage_carries_the_cost_from_the_catalogues_prices() {
            $crate::divergences::usage_carries_the_cost_from_the_catalogues_prices(&$driver);
        }

        #[test]
        fn warnings_reach_the_response() {
            $crate::divergences::warnings_reach_the_response(&$driver);
        }

        #[test]
        fn a_tools_own_timeout_overrides_the_calls() {
            $crate::divergences::a_tools_own_timeout_overrides_the_calls(&$driver);
        }

        #[test]
        fn a_mistyped_model_is_sent_with_a_warning() {
            $crate::divergences::a_mistyped_model_is_sent_with_a_warning(&$driver);
        }

        #[test]
        fn a_stream_of_another_format_fails_at_once() {
            $crate::divergences::a_stream_of_another_format_fails_at_once(&$driver);
        }

        #[test]
        fn a_provider_error_names_provider_model_and_host() {
            $crate::divergences::a_provider_error_names_provider_model_and_host(&$driver);
        }

        #[test]
        fn a_wire_format_of_the_applications_works_as_a_built_in_one() {
            $crate::custom_wire::through_a_driver(&$driver);
        }

        #[test]
        fn provider_specific_options_reach_the_body() {
            $crate::divergences::provider_specific_options_reach_the_body(&$driver);
        }

        #[test]
        fn a_key_given_for_a_keyless_provider_is_sent_not_dropped() {
            $crate::divergences::a_key_given_for_a_keyless_provider_is_sent_not_dropped(&$driver);
        }
    };
}
