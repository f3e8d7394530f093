//! One call: the builder, the event stream, and the task that drives the core machine.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};
use std::time::Instant;

use omni_core::async_tool::handlers_by_name;
use omni_core::client::{CallSpec, ModelRef};
use omni_core::generate::{Generate, GenerateEvent, Input};
use omni_core::schema::Validator;
use omni_core::{ApiKey, Context, Options, Response};
use tokio::sync::mpsc::{self, UnboundedReceiver, UnboundedSender};

use crate::client::Client;
use crate::error::Error;
use crate::executor::{sleep_until, Executor, Handlers};
use crate::tools::Tool;

/// A call being set up: model, context, options, tools, key.
#[derive(Debug)]
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
        Call {
            client,
            model,
            context,
            options: Options::default(),
            tools: Vec::new(),
            api_key: None,
            output_validator: None,
        }
    }

    /// Options for this call, over the client's defaults.
    pub fn options(mut self, options: Options) -> Self {
        self.options = options;
        self
    }

    /// Adds a tool.
    pub fn tool(mut self, tool: Tool) -> Self {
        self.tools.push(tool);
        self
    }

    /// Adds tools.
    pub fn tools(mut self, tools: impl IntoIterator<Item = Tool>) -> Self {
        self.tools.extend(tools);
        self
    }

    /// A key for this call only.
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

    /// Starts the call and returns its events. Must be called inside a tokio runtime;
    /// dropping the stream cancels the call.
    pub fn stream(self) -> Result<TextStream, Error> {
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|_| Error::Setup("omni-tokio needs a running tokio runtime".into()))?;
        let handlers: Handlers = handlers_by_name(&self.tools);
        let spec = CallSpec {
            model: self.model,
            context: self.context,
            options: self.options,
            tools: self.tools.iter().map(Tool::decl).collect(),
            api_key: self.api_key,
        };
        let inner = &self.client.inner;
        let mut config = inner.config.prepare(spec, &|name| std::env::var(name).ok())?;
        config.output_validator = self.output_validator;
        let machine = Generate::new(config, Instant::now())
            .map_err(|error| Error::Generate { error, partial: Box::new(Response::empty("")) })?;
        let (events_tx, events_rx) = mpsc::unbounded_channel();
        runtime.spawn(drive(machine, inner.http.clone(), handlers, events_tx));
        Ok(TextStream { events: events_rx, terminal: None })
    }

    /// Runs the call to the end and returns the final response.
    pub async fn generate(self) -> Result<Response, Error> {
        self.stream()?.response().await
    }

    /// Runs the call asking for a `T` (structured output with `T`'s schema, named after
    /// the type) and decodes it. Invalid replies are sent back for a correction (up to 3);
    /// when none is usable the error is [`Error::Output`] with the last problem.
    ///
    /// ```no_run
    /// # async fn demo(client: omni_tokio::Client) -> Result<(), omni_tokio::Error> {
    /// #[derive(serde::Deserialize, schemars::JsonSchema)]
    /// struct City {
    ///     name: String,
    ///     population: u64,
    /// }
    ///
    /// let city: City = client.call("anthropic:claude-sonnet-4-5", "The largest city of France").generate_object().await?;
    /// println!("{} has {} people", city.name, city.population);
    /// # Ok(()) }
    /// ```
    #[cfg(feature = "schemars")]
    pub async fn generate_object<T>(mut self) -> Result<T, Error>
    where
        T: serde::de::DeserializeOwned + omni_core::schemars::JsonSchema,
    {
        self.options.output = Some(omni_core::schema::output_for::<T>());
        let response = self.generate().await?;
        omni_core::schema::decode_output(&response)
            .map_err(|error| Error::Output { error, response: Box::new(response) })
    }
}

/// The events of a call, as an async stream. Dropping it cancels the call.
#[derive(Debug)]
pub struct TextStream {
    events: UnboundedReceiver<GenerateEvent>,
    terminal: Option<GenerateEvent>,
}

impl TextStream {
    /// Waits for the end of the call (consuming the remaining events).
    pub async fn response(mut self) -> Result<Response, Error> {
        while self.terminal.is_none() {
            match self.events.recv().await {
                Some(event) => self.observe(&event),
                None => break,
            }
        }
        match self.terminal.take() {
            Some(GenerateEvent::Finished(response)) => Ok(*response),
            Some(GenerateEvent::Failed { error, partial }) => Err(Error::Generate { error, partial }),
            _ => Err(Error::Setup("the call ended without a response".into())),
        }
    }

    fn observe(&mut self, event: &GenerateEvent) {
        if matches!(event, GenerateEvent::Finished(_) | GenerateEvent::Failed { .. }) {
            self.terminal = Some(event.clone());
        }
    }
}

impl futures_core::Stream for TextStream {
    type Item = GenerateEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Option<GenerateEvent>> {
        let polled = self.events.poll_recv(cx);
        if let Poll::Ready(Some(event)) = &polled {
            self.observe(event);
        }
        polled
    }
}

/// The driver loop: execute effects, feed inputs, deliver events, sleep until the next
/// deadline. No decisions are taken here.
async fn drive(
    mut machine: Generate,
    http: reqwest::Client,
    handlers: Handlers,
    events: UnboundedSender<GenerateEvent>,
) {
    let (mut executor, mut inputs) = Executor::new(http);
    loop {
        while let Some(effect) = machine.poll_effect() {
            executor.execute(effect, &handlers);
        }
        while let Some(event) = machine.poll_event() {
            let end = matches!(event, GenerateEvent::Finished(_) | GenerateEvent::Failed { .. });
            let _ = events.send(event);
            if end {
                return; // dropping the executor stops whatever still runs
            }
        }
        let deadline = machine.poll_timeout();
        tokio::select! {
            biased;
            _ = events.closed() => machine.handle_input(Input::Cancel, Instant::now()),
            Some(input) = inputs.recv() => executor.feed(&mut machine, input),
            _ = sleep_until(deadline), if deadline.is_some() => machine.handle_timeout(Instant::now()),
        }
    }
}
