//! What a tool handler returns, shared by every driver: output or error, and how each
//! becomes what the model sees.

use std::fmt;

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::data::message::{Attachment, ToolResultContent};

/// How a tool run ended, as the driver saw it.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolOutcome {
    /// The handler returned content.
    Ok(Vec<ToolResultContent>),
    /// The handler returned an error; the model sees the message.
    Err(String),
    /// The handler panicked; the driver caught it.
    Panicked(String),
}

/// A handler's successful output.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput(pub Vec<ToolResultContent>);

impl ToolOutput {
    /// Text for the model.
    pub fn text(text: impl Into<String>) -> Self {
        Self(vec![ToolResultContent::Text { text: text.into() }])
    }

    /// A JSON value, serialised for the model.
    pub fn json(value: &Value) -> Self {
        Self::text(value.to_string())
    }

    /// Any content, e.g. text and images.
    pub fn content(content: Vec<ToolResultContent>) -> Self {
        Self(content)
    }

    /// An image or file.
    pub fn attachment(attachment: Attachment) -> Self {
        Self(vec![ToolResultContent::Attachment(attachment)])
    }
}

impl From<String> for ToolOutput {
    fn from(s: String) -> Self {
        Self::text(s)
    }
}

impl From<&str> for ToolOutput {
    fn from(s: &str) -> Self {
        Self::text(s)
    }
}

impl From<Value> for ToolOutput {
    fn from(v: Value) -> Self {
        Self::json(&v)
    }
}

/// A handler's failure: the message is what the model sees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolError(pub String);

impl ToolError {
    /// From any error.
    pub fn new(error: impl fmt::Display) -> Self {
        Self(error.to_string())
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ToolError {}

impl From<String> for ToolError {
    fn from(s: String) -> Self {
        Self(s)
    }
}

impl From<&str> for ToolError {
    fn from(s: &str) -> Self {
        Self(s.to_string())
    }
}

/// The outcome the generate machine expects, from a handler's result.
pub fn outcome(result: Result<ToolOutput, ToolError>) -> ToolOutcome {
    match result {
        Ok(ToolOutput(content)) => ToolOutcome::Ok(content),
        Err(ToolError(message)) => ToolOutcome::Err(message),
    }
}

/// The outcome of a run the machine asked for of a tool the driver has no handler for.
/// The machine runs only tools declared with a handler, so this means the declarations
/// and the handlers went apart (a driver's bug); the model gets an error result rather
/// than the call waiting for the tool's deadline. Every driver answers so.
pub fn no_handler(name: &str) -> ToolOutcome {
    ToolOutcome::Err(format!("tool {name:?} has no handler"))
}

/// The message of a caught panic payload.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}

/// Decodes a call's input into a handler's typed argument, with an error the model
/// can act on.
pub fn typed_input<T: DeserializeOwned>(input: Value) -> Result<T, ToolError> {
    serde_json::from_value(input).map_err(|e| ToolError(format!("invalid arguments: {e}")))
}
