//! One call, described step by step: `client.call(model, context).tool(t).stream()`.

use std::sync::Arc;
use std::time::Instant;

use omni_core::client::{CallSpec, ModelRef};
use omni_core::generate::GenerateConfig;
use omni_core::schema::Validator;
use omni_core::{ApiKey, Context, Options, Response};
use omni_shell::machine::EVENT_CAPACITY;
use omni_shell::{handlers_by_name, AsyncTool, Connect};

use crate::blocking_client::Client;
use crate::runtime::Threads;
use crate::stream::TextStream;
use crate::tools::Tool;
use crate::Error;

/// A call being described; nothing happens until [`Call::stream`] or [`Call::generate`].
#[derive(Debug, Clone)]
#[must_use = "a call does nothing until .stream() or .generate()"]
pub struct Call {
    client: Client,
    model: ModelRef,
    context: Context,
    options: Options,
    tools: Vec<Tool>,
    api_key: Option<ApiKey>,
    output_validator: Option<Arc<dyn Validator>>,
}

impl Call {
    pub(crate) fn new(client: Client, model: ModelRef, context: Context) -> Self {
        Self {
            client,
            model,
            context,
            options: Options::default(),
            tools: Vec::new(),
            api_key: None,
            output_validator: None,
        }
    }

    /// Options for this call, merged over the client's defaults.
    pub fn options(mut self, options: Options) -> Self {
        self.options = options;
        self
    }

    /// Adds a tool. Tool names must differ (the model calls a tool by its name): a call
    /// with two tools of one name is refused when it starts, with
    /// [`ClientError::DuplicateTool`](omni_core::client::ClientError::DuplicateTool),
    /// before anything is sent. (Every driver decides so, in
    /// [`ClientConfig::prepare`](omni_core::client::ClientConfig::prepare).)
    pub fn tool(mut self, tool: Tool) -> Self {
        self.tools.push(tool);
        self
    }

    /// Adds tools (see [`Call::tool`] on names).
    pub fn tools(mut self, tools: impl IntoIterator<Item = Tool>) -> Self {
        self.tools.extend(tools);
        self
    }

    /// A key for this call only (wins over the client's and the environment's).
    pub fn api_key(mut self, key: impl Into<ApiKey>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// Checks structured output with `validator` instead of the schema of the `output`
    /// option (without one, the validator's schema is sent as the output schema). An
    /// invalid reply is sent back to the model for a correction, as usual.
    pub fn output_validator(mut self, validator: Arc<dyn Validator>) -> Self {
        self.output_validator = Some(validator);
        self
    }

    /// The generate machine's configuration this call resolves to (model, provider,
    /// key, merged options, tools, a retry seed of its own), as [`Call::stream`] would
    /// start it.
    pub fn config(&self) -> Result<GenerateConfig, Error> {
        let env = |name: &str| std::env::var(name).ok();
        Ok(self.client.inner.config.prepare(self.spec(), &env, Client::random_seed())?)
    }

    /// Starts the call and returns its events.
    pub fn stream(self) -> Result<TextStream, Error> {
        let env = |name: &str| std::env::var(name).ok();
        let machine = self.client.inner.config.start(self.spec(), &env, Client::random_seed(), Instant::now())?;
        let tools: Vec<AsyncTool> = self.tools.iter().map(|tool| tool.as_async().clone()).collect();
        let (sender, events) = async_channel::bounded(EVENT_CAPACITY);
        // Nothing is ever sent: closing it cancels the call.
        let (cancel, cancelled) = async_channel::bounded(1);
        let http = self.client.inner.http.clone();
        omni_shell::spawn_call(&Threads::default(), http, machine, handlers_by_name(&tools), sender, cancelled)?;
        Ok(TextStream::new(events, cancel))
    }

    fn spec(&self) -> CallSpec {
        CallSpec {
            model: self.model.clone(),
            context: self.context.clone(),
            options: self.options.clone(),
            tools: self.tools.iter().map(Tool::decl).collect(),
            api_key: self.api_key.clone(),
            output_validator: self.output_validator.clone(),
        }
    }

    /// Runs the call to the end and returns the final response.
    pub fn generate(self) -> Result<Response, Error> {
        self.stream()?.response()
    }

    /// Runs the call asking for a `T` (structured output with `T`'s schema, named after
    /// the type) and decodes it. Invalid replies are sent back for a correction (up to 3);
    /// when none is usable the error is [`Error::Output`] with the last problem.
    ///
    /// ```no_run
    /// # fn demo(client: omni_blocking::Client) -> Result<(), omni_blocking::Error> {
    /// #[derive(serde::Deserialize, schemars::JsonSchema)]
    /// struct City {
    ///     name: String,
    ///     population: u64,
    /// }
    ///
    /// let city: City = client.call("anthropic:claude-sonnet-4-5", "The largest city of France").generate_object()?;
    /// println!("{} has {} people", city.name, city.population);
    /// # Ok(()) }
    /// ```
    #[cfg(feature = "schemars")]
    pub fn generate_object<T>(mut self) -> Result<T, Error>
    where
        T: serde::de::DeserializeOwned + omni_core::schemars::JsonSchema,
    {
        self.options.output = Some(omni_core::schema::output_for::<T>());
        let response = self.generate()?;
        omni_core::schema::decode_output(&response)
            .map_err(|error| Error::Output { error, response: Box::new(response) })
    }
}
