//! Tools with synchronous handlers (plain closures), for a driver whose application code
//! blocks: omni-blocking's `Tool` is [`SyncTool`] over its pool of threads. The
//! constructors are written once, here, over [`AsyncTool`]'s: a synchronous handler
//! becomes an async one through the driver's [`RunSync`], which says where the closure
//! runs (never on the loop, which polls the run's future).

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use omni_protocol::generate::ToolDecl;
use omni_protocol::schema::Validator;
use omni_protocol::tool::{typed_input, ToolError, ToolOutput};
use omni_protocol::ToolSpec;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::{AsyncTool, ToolFuture};

/// A synchronous handler: the call's input as JSON in, the output out.
pub type SyncHandler = Arc<dyn Fn(Value) -> Result<ToolOutput, ToolError> + Send + Sync>;

/// Where a driver runs a synchronous handler: the future of one run, which the loop
/// polls. Dropping the future gives the run up (the driver tells the handler, if it can).
pub trait RunSync: 'static {
    /// The run of `handler` on `input`. A panic of the handler is raised again when the
    /// future is polled, so that the shell reports it as any handler's.
    fn run(handler: &SyncHandler, input: Value) -> ToolFuture;
}

/// A tool whose handler is a plain closure, run where `R` says (omni-blocking's `Tool`).
pub struct SyncTool<R> {
    tool: AsyncTool,
    runner: PhantomData<fn() -> R>,
}

impl<R> Clone for SyncTool<R> {
    fn clone(&self) -> Self {
        Self { tool: self.tool.clone(), runner: PhantomData }
    }
}

impl<R> fmt::Debug for SyncTool<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.tool.fmt(f)
    }
}

impl<R: RunSync> SyncTool<R> {
    /// A tool whose handler gets the call's input as JSON and returns anything that
    /// becomes a [`ToolOutput`] (a `String`, a `&str`, a JSON `Value`, a `ToolOutput`).
    pub fn new<O: Into<ToolOutput>>(
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: Value,
        handler: impl Fn(Value) -> Result<O, ToolError> + Send + Sync + 'static,
    ) -> Self {
        Self::wrap(AsyncTool::new(name, description, input_schema, on_runner::<R, _>(handler)))
    }

    /// A tool whose handler gets the input decoded as `T`; input that does not decode
    /// becomes an error result for the model naming the problem.
    pub fn typed<T: DeserializeOwned + 'static, O: Into<ToolOutput>>(
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: Value,
        handler: impl Fn(T) -> Result<O, ToolError> + Send + Sync + 'static,
    ) -> Self {
        Self::new(name, description, input_schema, move |input| handler(typed_input::<T>(input)?))
    }

    /// A tool whose input schema is `T`'s ([`omni_protocol::schema::for_type`]) and whose
    /// handler gets a `T`. The model's input is checked against the schema before the
    /// handler runs; what fails goes back to the model as an error result.
    #[cfg(feature = "schemars")]
    pub fn from_type<T: DeserializeOwned + omni_protocol::schemars::JsonSchema + 'static, O: Into<ToolOutput>>(
        name: impl Into<String>,
        description: impl Into<String>,
        handler: impl Fn(T) -> Result<O, ToolError> + Send + Sync + 'static,
    ) -> Self {
        Self::typed(name, description, omni_protocol::schema::for_type::<T>(), handler)
    }

    /// [`SyncTool::from_type`] for a handler that needs state (a store, a client): the
    /// tool keeps `state` and lends it to every call. Build the description from the
    /// state first when it should tell the model what the state holds.
    #[cfg(feature = "schemars")]
    pub fn from_type_with_state<S, T, O>(
        state: S,
        name: impl Into<String>,
        description: impl Into<String>,
        handler: impl Fn(&S, T) -> Result<O, ToolError> + Send + Sync + 'static,
    ) -> Self
    where
        S: Send + Sync + 'static,
        T: DeserializeOwned + omni_protocol::schemars::JsonSchema + 'static,
        O: Into<ToolOutput>,
    {
        Self::from_type(name, description, move |input: T| handler(&state, input))
    }

    /// A tool checked by `validator` instead of a schema: its
    /// [`schema`](Validator::schema) is what the model is told, and its
    /// [`validate`](Validator::validate) decides (and may normalise) the input before
    /// the handler gets it, decoded as `T` (`serde_json::Value` for the raw input). A
    /// rejection goes back to the model as an error result naming the problem.
    pub fn with_validator<T: DeserializeOwned + 'static, O: Into<ToolOutput>>(
        name: impl Into<String>,
        description: impl Into<String>,
        validator: Arc<dyn Validator>,
        handler: impl Fn(T) -> Result<O, ToolError> + Send + Sync + 'static,
    ) -> Self {
        let handler = on_runner::<R, _>(move |input| handler(typed_input::<T>(input)?));
        Self::wrap(AsyncTool::with_validator::<Value, _, _, _>(name, description, validator, handler))
    }
}

impl<R> SyncTool<R> {
    /// A tool whose handler is async already (an MCP server's tool, which only waits for
    /// the server's answer): it runs as it is, not on the runner.
    pub fn from_async(tool: AsyncTool) -> Self {
        Self::wrap(tool)
    }

    fn wrap(tool: AsyncTool) -> Self {
        Self { tool, runner: PhantomData }
    }

    /// A tool without a handler: when the model calls it, the loop stops and the calls
    /// are returned to the caller in the response.
    pub fn schema_only(name: impl Into<String>, description: impl Into<String>, input_schema: Value) -> Self {
        Self::wrap(AsyncTool::schema_only(name, description, input_schema))
    }

    /// Time limit for one call of this tool, overriding the `tool_timeout` option.
    pub fn timeout(self, limit: Duration) -> Self {
        Self::wrap(self.tool.timeout(limit))
    }

    /// The tool's name.
    pub fn name(&self) -> &str {
        self.tool.name()
    }

    /// Name, description and input schema.
    pub fn spec(&self) -> &ToolSpec {
        self.tool.spec()
    }

    /// What the machines are told: the spec, whether a handler runs it, its limit and validator.
    pub fn decl(&self) -> ToolDecl {
        self.tool.decl()
    }
}

impl<R> From<SyncTool<R>> for AsyncTool {
    fn from(tool: SyncTool<R>) -> Self {
        tool.tool
    }
}

/// A synchronous handler as an async one: each call a run on `R`.
fn on_runner<R: RunSync, O: Into<ToolOutput>>(
    handler: impl Fn(Value) -> Result<O, ToolError> + Send + Sync + 'static,
) -> impl Fn(Value) -> ToolFuture + Send + Sync + 'static {
    let handler: SyncHandler = Arc::new(move |input| handler(input).map(Into::into));
    move |input| {
        // Called inside the run's `execute_tool` span, when observed: the closure runs on
        // another thread, and takes the span there, so its own `tracing` output nests
        // under it as an async handler's does.
        let span = tracing::Span::current();
        if span.is_disabled() {
            return R::run(&handler, input);
        }
        let handler = handler.clone();
        let in_span: SyncHandler = Arc::new(move |input| span.in_scope(|| handler(input)));
        R::run(&in_span, input)
    }
}
