//! One call: the builder and the event stream handed to the application, the same on
//! every async driver. The call's machine runs in the driver's runtime (`drive_call`).

use std::collections::VecDeque;
use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};

use async_channel::Sender;
use omni_protocol::client::{CallSpec, ModelRef};
use omni_protocol::generate::{GenerateConfig, GenerateEvent};
use omni_protocol::observe::Observe;
use omni_protocol::schema::Validator;
use omni_protocol::{ApiKey, Context, Options, Response};

use crate::client::{Client, Driver};
use crate::drive_call::{lock, spawn_call, SharedCall};
use crate::runtime::Runtime;
use crate::{handlers_by_name, AsyncTool, Error};

/// A call being set up: model, context, options, tools, key.
#[derive(Debug)]
#[must_use = "a call does nothing until it is streamed or generated"]
pub struct Call<D: Driver> {
    client: Client<D>,
    model: ModelRef,
    context: Context,
    options: Options,
    tools: Vec<AsyncTool>,
    api_key: Option<ApiKey>,
    output_validator: Option<Arc<dyn Validator>>,
}

impl<D: Driver> Clone for Call<D> {
    fn clone(&self) -> Self {
        Self {
            client: self.client.clone(),
            model: self.model.clone(),
            context: self.context.clone(),
            options: self.options.clone(),
            tools: self.tools.clone(),
            api_key: self.api_key.clone(),
            output_validator: self.output_validator.clone(),
        }
    }
}

impl<D: Driver> Call<D> {
    /// A call on `client` (drivers: what `client.call(model, context)` returns).
    pub fn new(client: Client<D>, model: ModelRef, context: Context) -> Self {
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

    /// Options for this call, over the client's defaults.
    pub fn options(mut self, options: Options) -> Self {
        self.options = options;
        self
    }

    /// Adds a tool. Tool names must differ (the model calls a tool by its name): a call
    /// with two tools of one name is refused when it starts, with
    /// [`ClientError::DuplicateTool`](omni_protocol::client::ClientError::DuplicateTool),
    /// before anything is sent. (Every driver decides so, in
    /// [`ClientConfig::prepare`](omni_protocol::client::ClientConfig::prepare).)
    pub fn tool(mut self, tool: AsyncTool) -> Self {
        self.tools.push(tool);
        self
    }

    /// Adds tools (see [`Call::tool`] on names).
    pub fn tools(mut self, tools: impl IntoIterator<Item = AsyncTool>) -> Self {
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

    /// The generate machine's configuration this call resolves to (model, provider, key,
    /// merged options, tools, a retry seed of its own), as [`Call::stream`] would start it.
    pub fn config(&self) -> Result<GenerateConfig, Error> {
        let env = crate::client::environment;
        let (_, spec) = self.clone().into_spec();
        let seed = <D::Runtime as Runtime>::random_seed();
        Ok(self.client.inner.config.prepare(spec, &env, seed)?)
    }

    /// The client and what the core is told about the call.
    fn into_spec(self) -> (Client<D>, CallSpec) {
        let spec = CallSpec {
            model: self.model,
            context: self.context,
            options: self.options,
            tools: self.tools.iter().map(AsyncTool::decl).collect(),
            api_key: self.api_key,
            output_validator: self.output_validator,
            observe: Observe::Off,
        };
        (self.client, spec)
    }

    /// Starts the call and returns its events; dropping the stream cancels the call. The
    /// request goes out at once, in a task of its own (omni-tokio needs a running tokio
    /// runtime here; omni-smol works inside or outside an executor), and the response is
    /// decoded as the stream is read.
    pub fn stream(self) -> Result<TextStream, Error> {
        let handlers = handlers_by_name(&self.tools);
        let (client, mut spec) = self.into_spec();
        let env = crate::client::environment;
        let inner = &client.inner;
        // Spans go under the span current where the call starts.
        let observer = inner.telemetry.observer(None);
        spec.observe = observer.as_ref().map_or(Observe::Off, |observer| observer.level());
        // Each call draws its own retry jitter seed, so calls that fail together do not
        // retry together.
        let seed = <D::Runtime as Runtime>::random_seed();
        let machine = inner.config.start(spec, &env, seed, inner.runtime.now())?;
        // Never sent on: the stream's cancel closes it, which is how the loop learns of it.
        let (cancel, cancelled) = async_channel::bounded(1);
        let call = spawn_call(&inner.runtime, inner.transport.clone(), machine, handlers, cancelled, observer)?;
        Ok(TextStream { call, events: VecDeque::new(), ended: false, cancel, terminal: None })
    }

    /// Runs the call to the end and returns the final response.
    pub async fn generate(self) -> Result<Response, Error> {
        self.stream()?.response().await
    }

    /// Runs the call asking for a `T` (structured output with `T`'s schema, named after
    /// the type) and decodes it. Invalid replies are sent back for a correction (up to 3);
    /// when none is usable the error is [`Error::Output`] with the last problem.
    ///
    /// (See the README's structured output section for an example.)
    #[cfg(feature = "schemars")]
    pub async fn generate_object<T>(mut self) -> Result<T, Error>
    where
        T: serde::de::DeserializeOwned + omni_protocol::schemars::JsonSchema,
    {
        self.options.output = Some(omni_protocol::schema::output_for::<T>());
        let response = self.generate().await?;
        omni_protocol::schema::decode_output(&response)
            .map_err(|error| Error::Output { error, response: Box::new(response) })
    }
}

/// The events of a call, as an async stream. Dropping it (or [`TextStream::cancel`], or a
/// [`CancelHandle`] from elsewhere) cancels the call: the request in flight is aborted (its
/// connection closed) and running tools are stopped.
///
/// The call's events are made where they are read: polling the stream decodes the next
/// piece of the response on the polling thread. While the application does not read, the
/// call reads no further than a bounded amount ahead (the server is slowed by TCP), but
/// its deadlines still fire, a cancel still closes the connection at once, and its tools
/// run on; the last event (`Finished` or `Failed`) comes whenever the application reads
/// again. It may be polled from any thread: omni-tokio starts the call's work on the
/// runtime the client was built in when the polling thread has none.
pub struct TextStream {
    call: SharedCall,
    /// Events made and not yet read: those of one report at most.
    events: VecDeque<GenerateEvent>,
    /// The call is over: no more events.
    ended: bool,
    /// Never sent on: closing it cancels the call.
    cancel: Sender<()>,
    terminal: Option<GenerateEvent>,
}

impl fmt::Debug for TextStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TextStream")
            .field("waiting", &self.events.len())
            .field("ended", &self.ended)
            .finish_non_exhaustive()
    }
}

impl TextStream {
    /// Cancels the call but keeps the stream: the remaining events end with `Finished`
    /// whose stop reason is `cancelled`.
    pub fn cancel(&self) {
        self.cancel.close();
    }

    /// A handle that cancels this call from elsewhere (another task or thread).
    pub fn cancel_handle(&self) -> CancelHandle {
        CancelHandle(self.cancel.clone())
    }

    /// The next event, waiting for it; `None` once the call is over (after its
    /// `Finished` or `Failed`). The same as the `Stream` implementation's, without an
    /// extension trait to import.
    pub async fn next(&mut self) -> Option<GenerateEvent> {
        let event = std::future::poll_fn(|cx| self.poll_event(cx)).await?;
        self.observe(&event);
        Some(event)
    }

    /// The next piece of the reply's text, waiting for it and passing over every other
    /// event; `None` once the call is over (its outcome is then [`response`](Self::response)'s).
    pub async fn next_text(&mut self) -> Option<String> {
        loop {
            let event = self.next().await?;
            if let Some(text) = event.text_delta() {
                return Some(text.to_owned());
            }
        }
    }

    /// Waits for the end of the call (consuming the remaining events).
    pub async fn response(mut self) -> Result<Response, Error> {
        // The rest of the events are read here, not handed out: the terminal one is taken
        // as it is, not copied as `poll_next` must (the application may ask for the
        // response after reading it).
        while self.terminal.is_none() {
            match std::future::poll_fn(|cx| self.poll_event(cx)).await {
                Some(event) if event.is_terminal() => self.terminal = Some(event),
                Some(_) => {}
                None => break,
            }
        }
        match self.terminal.take() {
            Some(GenerateEvent::Finished(response)) => Ok(*response),
            Some(GenerateEvent::Failed { error, partial }) => Err(Error::Generate { error: *error, partial }),
            _ => Err(Error::Stopped),
        }
    }

    /// The next event if one is already here (made by the last read), without waiting or
    /// decoding more; `None` when the next one has yet to be made (or the stream has
    /// ended). For an application that reads synchronously: omni-blocking's iterator
    /// takes what is there this way, and polls the stream only when nothing is.
    pub fn try_next(&mut self) -> Option<GenerateEvent> {
        let event = self.events.pop_front()?;
        self.observe(&event);
        Some(event)
    }

    /// The next event: one already made, or the next ones the loop makes.
    fn poll_event(&mut self, cx: &mut TaskContext<'_>) -> Poll<Option<GenerateEvent>> {
        loop {
            if let Some(event) = self.events.pop_front() {
                return Poll::Ready(Some(event));
            }
            if self.ended {
                return Poll::Ready(None);
            }
            let Self { call, events, .. } = self;
            match lock(call).poll_events(cx, events) {
                Poll::Ready(()) => self.ended = self.events.is_empty(),
                Poll::Pending => return Poll::Pending,
            }
        }
    }

    fn observe(&mut self, event: &GenerateEvent) {
        if event.is_terminal() {
            self.terminal = Some(event.clone());
        }
    }
}

impl Drop for TextStream {
    fn drop(&mut self) {
        // Closed even while a `CancelHandle` keeps a sender.
        self.cancel.close();
        // Every request and tool run stops now, on this thread.
        lock(&self.call).stop();
    }
}

/// Cancels a call from any task or thread; cheap to clone. Never waits; cancelling twice,
/// or a call already over, does nothing more.
#[derive(Debug, Clone)]
pub struct CancelHandle(Sender<()>);

impl CancelHandle {
    /// Cancels the call.
    pub fn cancel(&self) {
        self.0.close();
    }
}

impl futures_core::Stream for TextStream {
    type Item = GenerateEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Option<GenerateEvent>> {
        let polled = self.poll_event(cx);
        if let Poll::Ready(Some(event)) = &polled {
            self.observe(event);
        }
        polled
    }
}
