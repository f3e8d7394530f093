//! One call, described step by step (`client.call(model, context).tool(t).stream()`), and
//! its events as an [`Iterator`]: omni-shell's call and stream, waited for on the caller's
//! thread.

use std::sync::Arc;

use futures_lite::future::block_on;
use omni_protocol::generate::{GenerateConfig, GenerateEvent};
use omni_protocol::schema::Validator;
use omni_protocol::{ApiKey, Options, Response};
pub use omni_shell::CancelHandle;

use crate::blocking_client::Blocking;
use crate::{Error, Tool};

/// A call being described; nothing happens until [`Call::stream`] or [`Call::generate`].
#[derive(Debug, Clone)]
#[must_use = "a call does nothing until .stream() or .generate()"]
pub struct Call(pub(crate) omni_shell::Call<Blocking>);

impl Call {
    /// Options for this call, merged over the client's defaults.
    pub fn options(self, options: Options) -> Self {
        Self(self.0.options(options))
    }

    /// Adds a tool. Tool names must differ: see [`omni_shell::Call::tool`].
    pub fn tool(self, tool: Tool) -> Self {
        Self(self.0.tool(tool.into()))
    }

    /// Adds tools (see [`Call::tool`] on names).
    pub fn tools(self, tools: impl IntoIterator<Item = Tool>) -> Self {
        Self(self.0.tools(tools.into_iter().map(Into::into)))
    }

    /// A key for this call only (wins over the client's and the environment's).
    pub fn api_key(self, key: impl Into<ApiKey>) -> Self {
        Self(self.0.api_key(key))
    }

    /// Checks structured output with `validator`; see [`omni_shell::Call::output_validator`].
    pub fn output_validator(self, validator: Arc<dyn Validator>) -> Self {
        Self(self.0.output_validator(validator))
    }

    /// The generate machine's configuration this call resolves to, as [`Call::stream`]
    /// would start it.
    pub fn config(&self) -> Result<GenerateConfig, Error> {
        self.0.config()
    }

    /// Starts the call (the request goes out at once, on a thread of its own) and returns
    /// its events, decoded on the thread that reads them.
    pub fn stream(self) -> Result<TextStream, Error> {
        self.0.stream().map(TextStream)
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
    pub fn generate_object<T>(self) -> Result<T, Error>
    where
        T: serde::de::DeserializeOwned + omni_protocol::schemars::JsonSchema,
    {
        block_on(self.0.generate_object())
    }
}

/// The events of one call, as they happen: text and tool-call deltas of each step,
/// retries, tool results, then exactly one `Finished` or `Failed`, after which the
/// iterator ends. `next` blocks until the next event.
///
/// Dropping the stream (or [`TextStream::cancel`], or a [`CancelHandle`] from another
/// thread) cancels the call: the request in flight is aborted (its connection closed)
/// and running tools are cancelled. The response is decoded on the thread that calls
/// `next`, as it reads: while the application does not read, the call reads no further
/// than a bounded amount ahead, but its deadlines still fire, a cancel still closes the
/// connection at once, and its running tools go on.
#[derive(Debug)]
pub struct TextStream(omni_shell::TextStream);

impl TextStream {
    /// Cancels the call but keeps the stream: the remaining events end with
    /// `Finished` whose stop reason is `cancelled`.
    pub fn cancel(&self) {
        self.0.cancel();
    }

    /// A handle that cancels this call from another thread.
    pub fn cancel_handle(&self) -> CancelHandle {
        self.0.cancel_handle()
    }

    /// Reads the rest of the stream and returns the final response, or the error with
    /// everything received until then.
    pub fn response(self) -> Result<Response, Error> {
        block_on(self.0.response())
    }

    /// The next piece of the reply's text, waiting for it and passing over every other
    /// event; `None` once the call is over (its outcome is then [`response`](Self::response)'s).
    pub fn next_text(&mut self) -> Option<String> {
        self.find_map(|event| event.text_delta().map(str::to_owned))
    }
}

impl Iterator for TextStream {
    type Item = GenerateEvent;

    fn next(&mut self) -> Option<GenerateEvent> {
        // Most events are already here, made with the others of their network read.
        self.0.try_next().or_else(|| block_on(self.0.next()))
    }
}
