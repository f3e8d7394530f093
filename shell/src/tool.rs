//! Tools with async handlers, shared by the async drivers (omni-tokio and omni-smol
//! re-export [`AsyncTool`] as their `Tool`). A handler is a plain boxed future: no
//! runtime is involved until a driver runs it.
//!
//! A run is not a task of its own: the call's (or agent's) loop polls every run's future
//! itself, concurrently with the other runs of the step ([`crate::executor`]). So an
//! async handler must not block: CPU-heavy or blocking work belongs on the runtime's
//! blocking pool (`tokio::task::spawn_blocking`, smol's `blocking::unblock`), or it holds
//! up the loop, its deadlines and the other runs.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use omni_protocol::generate::ToolDecl;
use omni_protocol::schema::Validator;
use omni_protocol::tool::{typed_input, ToolError, ToolOutput};
use omni_protocol::ToolSpec;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// What an async handler returns.
pub type ToolFuture = Pin<Box<dyn Future<Output = Result<ToolOutput, ToolError>> + Send>>;
/// An async handler: JSON input in, a future of the output.
pub type AsyncHandler = Arc<dyn Fn(Value) -> ToolFuture + Send + Sync>;

/// A tool: what the model is told, and optionally an async handler. The handler's future
/// runs on the task that polls the call's tool runs (a call's watchdog, an agent's loop),
/// concurrently with the other runs (see the module doc): await, never block, in it.
#[derive(Clone)]
pub struct AsyncTool {
    spec: ToolSpec,
    handler: Option<AsyncHandler>,
    timeout: Option<Duration>,
    validator: Option<Arc<dyn Validator>>,
}

impl fmt::Debug for AsyncTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tool")
            .field("name", &self.spec.name)
            .field("has_handler", &self.handler.is_some())
            .field("timeout", &self.timeout)
            .field("validator", &self.validator)
            .finish()
    }
}

impl AsyncTool {
    /// A tool whose handler takes the raw JSON input.
    pub fn new<F, Fut, O>(
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: Value,
        handler: F,
    ) -> Self
    where
        F: Fn(Value) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, ToolError>> + Send + 'static,
        O: Into<ToolOutput>,
    {
        let handler: AsyncHandler = Arc::new(move |input| {
            let fut = handler(input);
            Box::pin(async move { fut.await.map(Into::into) })
        });
        Self { spec: spec(name, description, input_schema), handler: Some(handler), timeout: None, validator: None }
    }

    /// A tool whose handler takes a typed argument decoded from the input; a decoding
    /// failure goes back to the model as an error result.
    pub fn typed<T, F, Fut, O>(
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: Value,
        handler: F,
    ) -> Self
    where
        T: DeserializeOwned + Send + 'static,
        F: Fn(T) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, ToolError>> + Send + 'static,
        O: Into<ToolOutput>,
    {
        Self {
            spec: spec(name, description, input_schema),
            handler: Some(erase(handler)),
            timeout: None,
            validator: None,
        }
    }

    /// A tool whose input schema is `T`'s ([`omni_protocol::schema::for_type`]) and whose
    /// handler gets a `T`. The model's input is checked against the schema before the
    /// handler runs; what fails goes back to the model as an error result.
    ///
    /// ```
    /// use omni_shell::AsyncTool as Tool;
    /// use omni_protocol::tool::ToolError;
    ///
    /// #[derive(serde::Deserialize, schemars::JsonSchema)]
    /// struct Weather {
    ///     /// City name.
    ///     city: String,
    /// }
    ///
    /// let tool = Tool::from_type("get_weather", "The weather in a city", |w: Weather| async move {
    ///     Ok::<_, ToolError>(format!("sunny in {}", w.city))
    /// });
    /// assert_eq!(tool.name(), "get_weather");
    /// ```
    #[cfg(feature = "schemars")]
    pub fn from_type<T, F, Fut, O>(name: impl Into<String>, description: impl Into<String>, handler: F) -> Self
    where
        T: DeserializeOwned + omni_protocol::schemars::JsonSchema + Send + 'static,
        F: Fn(T) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, ToolError>> + Send + 'static,
        O: Into<ToolOutput>,
    {
        Self::typed(name, description, omni_protocol::schema::for_type::<T>(), handler)
    }

    /// [`AsyncTool::from_type`] for a handler that needs state (a store, a client): each call
    /// gets its own clone of `state` (share it through an `Arc`, or use a type that is
    /// cheap to clone). Build the description from the state first when it should tell
    /// the model what the state holds.
    ///
    /// ```
    /// use std::collections::BTreeMap;
    /// use std::sync::Arc;
    /// use omni_shell::AsyncTool as Tool;
    /// use omni_protocol::tool::ToolError;
    ///
    /// #[derive(serde::Deserialize, schemars::JsonSchema)]
    /// struct Lookup {
    ///     city: String,
    /// }
    ///
    /// let populations = Arc::new(BTreeMap::from([("Paris".to_string(), 2_102_650u64)]));
    /// let known: Vec<&str> = populations.keys().map(String::as_str).collect();
    /// let description = format!("The population of a city. Known cities: {}.", known.join(", "));
    /// let tool = Tool::from_type_with_state(
    ///     populations.clone(),
    ///     "city_population",
    ///     description,
    ///     |populations: Arc<BTreeMap<String, u64>>, query: Lookup| async move {
    ///         populations.get(&query.city).map(u64::to_string).ok_or(ToolError::from("unknown city"))
    ///     },
    /// );
    /// assert_eq!(tool.name(), "city_population");
    /// ```
    #[cfg(feature = "schemars")]
    pub fn from_type_with_state<S, T, F, Fut, O>(
        state: S,
        name: impl Into<String>,
        description: impl Into<String>,
        handler: F,
    ) -> Self
    where
        S: Clone + Send + Sync + 'static,
        T: DeserializeOwned + omni_protocol::schemars::JsonSchema + Send + 'static,
        F: Fn(S, T) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, ToolError>> + Send + 'static,
        O: Into<ToolOutput>,
    {
        Self::from_type(name, description, move |input: T| handler(state.clone(), input))
    }

    /// A tool checked by `validator` instead of a schema: its
    /// [`schema`](Validator::schema) is what the model is told, and its
    /// [`validate`](Validator::validate) decides (and may normalise) the input before
    /// the handler gets it, decoded as `T` (`serde_json::Value` for the raw input). A
    /// rejection goes back to the model as an error result naming the problem.
    pub fn with_validator<T, F, Fut, O>(
        name: impl Into<String>,
        description: impl Into<String>,
        validator: Arc<dyn Validator>,
        handler: F,
    ) -> Self
    where
        T: DeserializeOwned + Send + 'static,
        F: Fn(T) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, ToolError>> + Send + 'static,
        O: Into<ToolOutput>,
    {
        Self {
            spec: spec(name, description, validator.schema().clone()),
            handler: Some(erase(handler)),
            timeout: None,
            validator: Some(validator),
        }
    }

    /// A tool without a handler: when the model calls it, the loop stops and the call
    /// is returned to the caller.
    pub fn schema_only(name: impl Into<String>, description: impl Into<String>, input_schema: Value) -> Self {
        Self { spec: spec(name, description, input_schema), handler: None, timeout: None, validator: None }
    }

    /// Overrides the time limit of one call of this tool.
    pub fn timeout(mut self, limit: Duration) -> Self {
        self.timeout = Some(limit);
        self
    }

    /// The tool's name.
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// What the model is told.
    pub fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    /// The handler, if the tool has one.
    pub fn handler(&self) -> Option<&AsyncHandler> {
        self.handler.as_ref()
    }

    /// What the machines are told: the spec, whether a handler runs it, its limit and validator.
    pub fn decl(&self) -> ToolDecl {
        ToolDecl {
            timeout: self.timeout,
            validator: self.validator.clone(),
            ..ToolDecl::new(self.spec.clone(), self.handler.is_some())
        }
    }
}

/// A typed handler as the driver runs it: JSON in, decoded as `T` (a decoding failure is
/// an error result for the model).
fn erase<T, F, Fut, O>(handler: F) -> AsyncHandler
where
    T: DeserializeOwned + Send + 'static,
    F: Fn(T) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<O, ToolError>> + Send + 'static,
    O: Into<ToolOutput>,
{
    let handler = Arc::new(handler);
    Arc::new(move |input| {
        let handler = handler.clone();
        Box::pin(async move { handler(typed_input::<T>(input)?).await.map(Into::into) })
    })
}

fn spec(name: impl Into<String>, description: impl Into<String>, input_schema: Value) -> ToolSpec {
    ToolSpec { name: name.into(), description: description.into(), input_schema }
}

/// The handlers of `tools` by tool name (tools without one are left out): what a driver
/// looks up when the machine asks it to run a tool.
pub fn handlers_by_name(tools: &[AsyncTool]) -> BTreeMap<String, AsyncHandler> {
    tools.iter().filter_map(|t| Some((t.spec.name.clone(), t.handler.clone()?))).collect()
}
