//! Tools with async handlers.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use omni_core::generate::ToolDecl;
use omni_core::tool::{typed_input, ToolError, ToolOutput};
use omni_core::ToolSpec;
use serde::de::DeserializeOwned;
use serde_json::Value;

pub(crate) type ToolFuture = Pin<Box<dyn Future<Output = Result<ToolOutput, ToolError>> + Send>>;
pub(crate) type Handler = Arc<dyn Fn(Value) -> ToolFuture + Send + Sync>;

/// A tool: what the model is told, and optionally an async handler.
#[derive(Clone)]
pub struct Tool {
    pub(crate) spec: ToolSpec,
    pub(crate) handler: Option<Handler>,
    pub(crate) timeout: Option<Duration>,
}

impl fmt::Debug for Tool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tool")
            .field("name", &self.spec.name)
            .field("has_handler", &self.handler.is_some())
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl Tool {
    /// A tool whose handler takes the raw JSON input.
    pub fn new<F, Fut, O>(
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: Value,
        handler: F,
    ) -> Tool
    where
        F: Fn(Value) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, ToolError>> + Send + 'static,
        O: Into<ToolOutput>,
    {
        let handler: Handler = Arc::new(move |input| {
            let fut = handler(input);
            Box::pin(async move { fut.await.map(Into::into) })
        });
        Tool { spec: spec(name, description, input_schema), handler: Some(handler), timeout: None }
    }

    /// A tool whose handler takes a typed argument decoded from the input; a decoding
    /// failure goes back to the model as an error result.
    pub fn typed<T, F, Fut, O>(
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: Value,
        handler: F,
    ) -> Tool
    where
        T: DeserializeOwned + Send + 'static,
        F: Fn(T) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, ToolError>> + Send + 'static,
        O: Into<ToolOutput>,
    {
        let handler = Arc::new(handler);
        let erased: Handler = Arc::new(move |input| {
            let handler = handler.clone();
            Box::pin(async move { handler(typed_input::<T>(input)?).await.map(Into::into) })
        });
        Tool { spec: spec(name, description, input_schema), handler: Some(erased), timeout: None }
    }

    /// A tool without a handler: when the model calls it, the loop stops and the call
    /// is returned to the caller.
    pub fn schema_only(name: impl Into<String>, description: impl Into<String>, input_schema: Value) -> Tool {
        Tool { spec: spec(name, description, input_schema), handler: None, timeout: None }
    }

    /// Overrides the time limit of one call of this tool.
    pub fn timeout(mut self, limit: Duration) -> Tool {
        self.timeout = Some(limit);
        self
    }

    /// The tool's name.
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    pub(crate) fn decl(&self) -> ToolDecl {
        ToolDecl { timeout: self.timeout, ..ToolDecl::new(self.spec.clone(), self.handler.is_some()) }
    }
}

fn spec(name: impl Into<String>, description: impl Into<String>, input_schema: Value) -> ToolSpec {
    ToolSpec { name: name.into(), description: description.into(), input_schema }
}
