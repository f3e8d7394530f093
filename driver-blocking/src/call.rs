//! One call, described step by step: `client.call(model, context).tool(t).stream()`.

use std::collections::BTreeMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::Arc;
use std::time::Instant;

use omni_core::client::{CallSpec, ModelRef};
use omni_core::generate::{Generate, GenerateConfig};
use omni_core::{ApiKey, Context, Options, Response};

use crate::blocking_client::Client;
use crate::event_loop;
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
}

impl Call {
    pub(crate) fn new(client: Client, model: ModelRef, context: Context) -> Call {
        Call { client, model, context, options: Options::default(), tools: Vec::new(), api_key: None }
    }

    /// Options for this call, merged over the client's defaults.
    pub fn options(mut self, options: Options) -> Call {
        self.options = options;
        self
    }

    /// Adds a tool; a tool with the same name as an earlier one replaces it.
    pub fn tool(mut self, tool: Tool) -> Call {
        match self.tools.iter_mut().find(|t| t.name() == tool.name()) {
            Some(existing) => *existing = tool,
            None => self.tools.push(tool),
        }
        self
    }

    /// Adds tools.
    pub fn tools(self, tools: impl IntoIterator<Item = Tool>) -> Call {
        tools.into_iter().fold(self, Call::tool)
    }

    /// A key for this call only (wins over the client's and the environment's).
    pub fn api_key(mut self, key: impl Into<ApiKey>) -> Call {
        self.api_key = Some(key.into());
        self
    }

    /// The generate machine's configuration this call resolves to (model, provider,
    /// key, merged options, tools), as [`Call::stream`] would start it.
    pub fn config(&self) -> Result<GenerateConfig, Error> {
        let spec = CallSpec {
            model: self.model.clone(),
            context: self.context.clone(),
            options: self.options.clone(),
            tools: self.tools.iter().map(Tool::decl).collect(),
            api_key: self.api_key.clone(),
        };
        let mut config = self.client.inner.config.prepare(spec, &|name| std::env::var(name).ok())?;
        if self.client.inner.random_retry_seed {
            // Jitter must differ between calls so that clients failing together do not
            // retry together; a policy set on the client keeps its seed.
            config.retry.seed = RandomState::new().hash_one(Instant::now());
        }
        Ok(config)
    }

    /// Starts the call and returns its events.
    pub fn stream(self) -> Result<TextStream, Error> {
        let config = self.config()?;
        let model_id = config.model.id.clone();
        let machine = Generate::new(config, Instant::now())
            .map_err(|error| Error::Generate { error, partial: Box::new(Response::empty(model_id)) })?;
        let tools: BTreeMap<String, Tool> = self.tools.into_iter().map(|t| (t.name().to_string(), t)).collect();
        let (events, control) = event_loop::spawn(machine, self.client.inner.http.clone(), Arc::new(tools))
            .map_err(|e| Error::Setup(format!("could not start the generate loop thread: {e}")))?;
        Ok(TextStream::new(events, control))
    }

    /// Runs the call to the end and returns the final response.
    pub fn generate(self) -> Result<Response, Error> {
        self.stream()?.response()
    }
}
