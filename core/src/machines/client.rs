//! What every driver's `Client` decides, decided once: resolving a model name to a
//! model and provider, picking the key (call site > client > environment) and the base
//! URL (client override > environment for local servers > catalogue), merging options
//! over the client's defaults, and producing the generate machine's configuration.
//!
//! Drivers pass the environment in as a lookup function (`std::env::var`) and a fresh
//! random number per call (for retry jitter), so the core still reads nothing itself.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::data::catalogue::{Catalogue, CatalogueError, LookupError};
use crate::data::message::Context;
use crate::data::model::Model;
use crate::data::options::{Options, OptionsError};
use crate::data::provider::{ApiKey, Auth, Provider};
use crate::data::response::Response;
use crate::data::schema::Validator;
use crate::machines::agent::AgentConfig;
use crate::machines::generate::{
    duplicate_tool_name, Generate, GenerateConfig, ToolDecl, DEFAULT_MAX_RESPONSE_BYTES, DEFAULT_STALL_TIMEOUT,
};
use crate::machines::request::RetryPolicy;

/// A model by name (`"anthropic:claude-sonnet-4-5"`) or as a value.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelRef {
    /// `provider:id`; unknown ids on a known provider are accepted.
    Name(String),
    /// A model built by hand or taken from the catalogue.
    Model(Box<Model>),
}

impl From<&str> for ModelRef {
    fn from(s: &str) -> Self {
        Self::Name(s.to_string())
    }
}

impl From<String> for ModelRef {
    fn from(s: String) -> Self {
        Self::Name(s)
    }
}

impl From<Model> for ModelRef {
    fn from(m: Model) -> Self {
        Self::Model(Box::new(m))
    }
}

impl From<&Model> for ModelRef {
    fn from(m: &Model) -> Self {
        Self::Model(Box::new(m.clone()))
    }
}

/// One call as the application describes it.
#[derive(Debug, Clone)]
pub struct CallSpec {
    /// Which model.
    pub model: ModelRef,
    /// Prompt and history.
    pub context: Context,
    /// Options for this call (merged over the client's defaults).
    pub options: Options,
    /// Tools and whether each has a handler. Names must differ: a model calls a tool by
    /// its name, so a second tool of one name is refused ([`ClientError::DuplicateTool`])
    /// rather than silently dropped or replaced.
    pub tools: Vec<ToolDecl>,
    /// A key for this call only.
    pub api_key: Option<ApiKey>,
    /// Checks structured output instead of the schema of the `output` option.
    pub output_validator: Option<Arc<dyn Validator>>,
    /// What the call tells the application's telemetry (the shell decides, from whether
    /// anyone listens).
    pub observe: crate::machines::observe::Observe,
}

/// Why a call could not be prepared.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ClientError {
    /// The model name is unknown.
    Lookup(LookupError),
    /// The model names a provider the client does not know.
    UnknownProvider(String),
    /// The provider needs a key and none was found.
    MissingApiKey {
        /// Provider id.
        provider: String,
        /// The environment variable that was consulted.
        env: Option<String>,
    },
    /// The options are invalid.
    InvalidOptions(OptionsError),
    /// Catalogue data could not be loaded.
    Catalogue(CatalogueError),
    /// The proxy URL (given, or from the environment) cannot be used.
    InvalidProxy(crate::wire::proxy::ProxyError),
    /// Two tools of the call have this name.
    DuplicateTool(String),
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Lookup(e) => write!(f, "{e}"),
            Self::UnknownProvider(p) => write!(f, "unknown provider {p:?}; register it on the client"),
            Self::MissingApiKey { provider, env: Some(env) } => {
                write!(f, "no API key for {provider}: pass one to the client or set {env}")
            }
            Self::MissingApiKey { provider, env: None } => write!(f, "no API key for {provider}"),
            Self::InvalidOptions(e) => write!(f, "{e}"),
            Self::Catalogue(e) => write!(f, "{e}"),
            Self::InvalidProxy(e) => write!(f, "{e}"),
            Self::DuplicateTool(name) => write!(f, "two tools are named {name:?}"),
        }
    }
}

impl std::error::Error for ClientError {}

/// Why [`ClientConfig::start`] made no machine. Exhaustive on purpose: the shell's
/// `Error` maps each case, and a new one must be mapped too.
#[derive(Debug)]
pub enum StartError {
    /// The call could not be set up: unknown model, missing key, invalid options, two
    /// tools of one name.
    Client(ClientError),
    /// The machine refused its configuration (an output schema that does not compile,
    /// say), as the call would have failed: the partial response names the model.
    Refused {
        /// What the machine refused.
        error: crate::machines::common::GenerateError,
        /// An empty response naming the model.
        partial: Box<Response>,
    },
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Client(e) => write!(f, "{e}"),
            Self::Refused { error, .. } => write!(f, "{error}"),
        }
    }
}

/// Transparent, as its message is the inner error's: the cause is the inner error's cause
/// (never the inner error itself, whose message a chain would then print twice).
impl std::error::Error for StartError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Client(e) => e.source(),
            Self::Refused { error, .. } => error.source(),
        }
    }
}

/// A client's configuration; every driver's `Client` wraps one.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// Models and providers.
    pub catalogue: Catalogue,
    /// Keys by provider id.
    pub api_keys: BTreeMap<String, ApiKey>,
    /// Base URL overrides by provider id.
    pub base_urls: BTreeMap<String, String>,
    /// Options every call starts from.
    pub default_options: Options,
    /// Retry policy.
    pub retry: RetryPolicy,
    /// True when every call draws its own jitter seed (the application set no retry
    /// policy), so that calls failing together do not retry together; false keeps
    /// `retry.seed` for every call (a policy set with its seed, a simulation).
    pub fresh_retry_seed: bool,
    /// No-progress limit for streams.
    pub stall_timeout: Duration,
    /// Largest response body, in bytes.
    pub max_response_bytes: u64,
}

impl ClientConfig {
    /// A configuration over the built-in catalogue.
    pub fn new() -> Result<Self, ClientError> {
        Ok(Self::with_catalogue(Catalogue::builtin().map_err(ClientError::Catalogue)?))
    }

    /// A configuration over the given catalogue.
    pub fn with_catalogue(catalogue: Catalogue) -> Self {
        Self {
            catalogue,
            api_keys: BTreeMap::new(),
            base_urls: BTreeMap::new(),
            default_options: Options::default(),
            retry: RetryPolicy::default(),
            fresh_retry_seed: false,
            stall_timeout: DEFAULT_STALL_TIMEOUT,
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
        }
    }

    /// Resolves a model reference.
    pub fn model(&self, model: &ModelRef) -> Result<Model, ClientError> {
        match model {
            ModelRef::Name(name) => self.catalogue.resolve(name).map_err(ClientError::Lookup),
            ModelRef::Model(m) => Ok((**m).clone()),
        }
    }

    /// The provider of `model` with the base URL this client uses for it.
    pub fn provider(&self, model: &Model, env: &dyn Fn(&str) -> Option<String>) -> Result<Provider, ClientError> {
        let mut provider = self
            .catalogue
            .provider(&model.provider)
            .cloned()
            .ok_or_else(|| ClientError::UnknownProvider(model.provider.clone()))?;
        if let Some(url) = self.base_urls.get(&provider.id) {
            provider.base_url.clone_from(url);
        } else if let Some(url) = local_server_url(&provider, env) {
            provider.base_url = url;
        }
        Ok(provider)
    }

    /// Resolves a model, its provider (with this client's base URL) and the key to use
    /// (call site > client > environment); a provider that needs a key and has none is
    /// an error.
    pub fn resolve(
        &self,
        model: &ModelRef,
        api_key: Option<&ApiKey>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<(Model, Provider, Option<ApiKey>), ClientError> {
        let model = self.model(model)?;
        let provider = self.provider(&model, env)?;
        let api_key = provider.resolve_key(api_key, self.api_keys.get(&provider.id), env);
        if api_key.is_none() && provider.auth != Auth::None {
            return Err(ClientError::MissingApiKey {
                provider: provider.id.clone(),
                env: provider.api_key_env.clone(),
            });
        }
        Ok((model, provider, api_key))
    }

    /// Turns a call into the generate machine's configuration. `fresh_seed` is a random
    /// number the driver draws for this call: the call's retry jitter seed unless the
    /// client's policy keeps its own ([`ClientConfig::fresh_retry_seed`]).
    pub fn prepare(
        &self,
        call: CallSpec,
        env: &dyn Fn(&str) -> Option<String>,
        fresh_seed: u64,
    ) -> Result<GenerateConfig, ClientError> {
        if let Some(name) = duplicate_tool_name(call.tools.iter().map(|t| t.spec.name.as_str())) {
            return Err(ClientError::DuplicateTool(name.to_string()));
        }
        let (model, provider, api_key) = self.resolve(&call.model, call.api_key.as_ref(), env)?;
        let options = call.options.merged_over(&self.default_options);
        options.validate().map_err(ClientError::InvalidOptions)?;
        let mut config = GenerateConfig::new(model, provider, call.context, options);
        config.api_key = api_key;
        config.tools = call.tools;
        config.output_validator = call.output_validator;
        config.observe = call.observe;
        if let ModelRef::Name(name) = &call.model {
            config.warnings.extend(self.catalogue.unknown_model_warning(name));
        }
        config.retry = self.retry_policy(fresh_seed);
        config.stall_timeout = self.stall_timeout;
        config.max_response_bytes = self.max_response_bytes;
        Ok(config)
    }

    /// Prepares a call ([`ClientConfig::prepare`]) and makes its generate machine: what
    /// every driver's `Call::stream` runs. A machine that refuses its configuration (an
    /// output schema that does not compile, say) fails as the call would, its partial
    /// response naming the model.
    pub fn start(
        &self,
        call: CallSpec,
        env: &dyn Fn(&str) -> Option<String>,
        fresh_seed: u64,
        now: Instant,
    ) -> Result<Generate, StartError> {
        let config = self.prepare(call, env, fresh_seed).map_err(StartError::Client)?;
        let model_id = config.model.id.clone();
        Generate::new(config, now)
            .map_err(|error| StartError::Refused { error, partial: Box::new(Response::empty(model_id)) })
    }

    /// An agent's configuration on this client: the model resolved as for a call, the
    /// client's default options, retry policy (with `fresh_seed`, the driver's random
    /// number for this agent, as for a call) and stall limit; no history, no tools.
    pub fn agent(
        &self,
        model: &ModelRef,
        api_key: Option<&ApiKey>,
        env: &dyn Fn(&str) -> Option<String>,
        fresh_seed: u64,
    ) -> Result<AgentConfig, ClientError> {
        let (model, provider, api_key) = self.resolve(model, api_key, env)?;
        let mut config = AgentConfig::new(model, provider);
        config.api_key = api_key;
        config.options = self.default_options.clone();
        config.retry = self.retry_policy(fresh_seed);
        config.stall_timeout = self.stall_timeout;
        config.max_response_bytes = self.max_response_bytes;
        Ok(config)
    }
}

impl ClientConfig {
    /// The retry policy of one call or agent: the client's, with the seed the driver drew
    /// for it unless the application chose the seed. Jitter exists so that calls failing
    /// together do not retry together; one seed per client would undo that.
    fn retry_policy(&self, fresh_seed: u64) -> RetryPolicy {
        let seed = if self.fresh_retry_seed { fresh_seed } else { self.retry.seed };
        RetryPolicy { seed, ..self.retry }
    }
}

/// `OLLAMA_HOST` points the local Ollama provider elsewhere (`host:port` or a URL).
fn local_server_url(provider: &Provider, env: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    if provider.id != "ollama" {
        return None;
    }
    let host = env("OLLAMA_HOST").filter(|h| !h.trim().is_empty())?;
    let host = host.trim().trim_end_matches('/');
    Some(if host.contains("://") { host.to_string() } else { format!("http://{host}") })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn missing_key_names_the_variable() {
        let config = ClientConfig::new().unwrap();
        let call = CallSpec {
            model: "anthropic:claude-sonnet-4-5".into(),
            context: Context::from_prompt("hi"),
            options: Options::default(),
            tools: vec![],
            api_key: None,
            output_validator: None,
            observe: Default::default(),
        };
        let err = config.prepare(call, &no_env, 1).unwrap_err();
        assert_eq!(err.to_string(), "no API key for anthropic: pass one to the client or set ANTHROPIC_API_KEY");
    }

    #[test]
    fn keys_and_urls_resolve_in_order() {
        let mut config = ClientConfig::new().unwrap();
        config.base_urls.insert("anthropic".into(), "http://127.0.0.1:9/v1".into());
        let env = |name: &str| (name == "ANTHROPIC_API_KEY").then(|| "from-env".to_string());
        let call = |key: Option<&str>| CallSpec {
            model: "anthropic:claude-sonnet-4-5".into(),
            context: Context::from_prompt("hi"),
            options: Options::default(),
            tools: vec![],
            api_key: key.map(ApiKey::from),
            output_validator: None,
            observe: Default::default(),
        };
        let g = config.prepare(call(None), &env, 1).unwrap();
        assert_eq!(g.api_key.unwrap().expose(), "from-env");
        assert_eq!(g.provider.base_url, "http://127.0.0.1:9/v1");
        let g = config.prepare(call(Some("at-call")), &env, 1).unwrap();
        assert_eq!(g.api_key.unwrap().expose(), "at-call");
    }

    #[test]
    fn ollama_needs_no_key_and_follows_ollama_host() {
        let config = ClientConfig::new().unwrap();
        let env = |name: &str| (name == "OLLAMA_HOST").then(|| "10.1.2.3:11434".to_string());
        let call = CallSpec {
            model: "ollama:llama3.2:3b".into(),
            context: Context::from_prompt("hi"),
            options: Options::default(),
            tools: vec![],
            api_key: None,
            output_validator: None,
            observe: Default::default(),
        };
        let g = config.prepare(call, &env, 1).unwrap();
        assert_eq!(g.provider.base_url, "http://10.1.2.3:11434");
        assert!(g.api_key.is_none());
    }

    fn local_call(tools: Vec<ToolDecl>, options: Options) -> CallSpec {
        CallSpec {
            model: "ollama:llama3.2:3b".into(),
            context: Context::from_prompt("hi"),
            options,
            tools,
            api_key: None,
            output_validator: None,
            observe: Default::default(),
        }
    }

    #[test]
    fn each_call_takes_the_fresh_seed_unless_the_policy_keeps_its_own() {
        let mut config = ClientConfig::new().unwrap();
        config.retry.seed = 7;
        config.fresh_retry_seed = true;
        assert_eq!(config.prepare(local_call(vec![], Options::default()), &no_env, 42).unwrap().retry.seed, 42);
        config.fresh_retry_seed = false;
        assert_eq!(config.prepare(local_call(vec![], Options::default()), &no_env, 42).unwrap().retry.seed, 7);
    }

    #[test]
    fn two_tools_of_one_name_are_refused_before_anything_else() {
        let config = ClientConfig::new().unwrap();
        let tool = |description: &str| {
            let spec = crate::data::message::ToolSpec {
                name: "get_weather".into(),
                description: description.into(),
                input_schema: serde_json::json!({"type": "object"}),
            };
            ToolDecl::new(spec, true)
        };
        let err = config.prepare(local_call(vec![tool("one"), tool("two")], Options::default()), &no_env, 1);
        assert_eq!(err.unwrap_err(), ClientError::DuplicateTool("get_weather".into()));
    }

    // The catalogue parses built-in data lazily (data/catalogue/tests_lazy.rs); here a
    // client, which resolves through it, is shown to parse no more than it calls.
    #[test]
    fn a_client_parses_only_the_provider_it_calls() {
        crate::data::catalogue::with_fresh_builtin(|parsed| {
            let Ok(config) = ClientConfig::new() else { panic!("no client config") };
            assert_eq!(parsed(), (0, vec![]), "building a client parses nothing");

            let key = ApiKey::new("sk-test");
            let resolved = config.resolve(&ModelRef::from("openai:gpt-5"), Some(&key), &|_| None);
            let Ok((model, provider, _)) = resolved else { panic!("{resolved:?}") };
            assert_eq!(
                (model.id.as_str(), model.dialect, provider.id.as_str()),
                ("gpt-5", crate::data::dialect::Dialect::OpenaiResponses, "openai")
            );
            assert_eq!(parsed(), (1, vec!["openai"]));

            // Copies of the catalogue and later calls reuse the parsed provider.
            let copy = config.clone();
            assert!(copy.catalogue.resolve("openai:gpt-5-mini").is_ok());
            assert!(config.catalogue.model("openai:gpt-4.1").is_ok());
            assert_eq!(parsed().0, 1);

            // A model of another provider parses that provider's file, and no third.
            assert_eq!(config.catalogue.model("anthropic:claude-sonnet-4-5").map(|m| m.context_window), Ok(200_000));
            assert_eq!(parsed(), (2, vec!["anthropic", "openai"]));
        });
    }
}
