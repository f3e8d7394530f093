//! The result of a request: the assistant message, stop reason, usage and warnings.

use serde::{Deserialize, Serialize};

use crate::data::message::{Message, Role};
use crate::data::usage::Usage;

/// Why the model stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// A natural end, or a stop sequence.
    Stop,
    /// The output token limit was reached.
    Length,
    /// The model called tools and waits for their results.
    ToolUse,
    /// The model or the provider refused (safety, content filter).
    Refusal,
    /// The stream failed.
    Error,
    /// The caller cancelled.
    Cancelled,
}

/// Something the request could not honour exactly, reported instead of silently dropped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Warning {
    /// Short machine-readable code, e.g. `unsupported_option`.
    pub code: String,
    /// Human-readable explanation.
    pub message: String,
}

impl Warning {
    /// An option or feature the dialect cannot send.
    pub fn unsupported(what: impl std::fmt::Display, dialect: &str) -> Self {
        Self {
            code: "unsupported_option".into(),
            message: format!("{what} is not supported by the {dialect} dialect and was not sent"),
        }
    }
}

/// The outcome of one request (or of a whole tool loop).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Response {
    /// Model id as the provider reported it (or as requested when it did not say).
    pub model: String,
    /// Provider response id, when it sent one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The final assistant message.
    pub message: Message,
    /// Every message this call added to the conversation (all steps of a tool loop).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub messages: Vec<Message>,
    /// Why the model stopped; `None` while streaming or when the stream was cut.
    pub stop_reason: Option<StopReason>,
    /// Tokens used (summed across steps).
    pub usage: Usage,
    /// Options that could not be honoured, and other non-fatal notes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<Warning>,
    /// Structured output: the reply parsed and validated against the `output` schema.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<serde_json::Value>,
    /// Why the reply is not valid structured output, after every allowed retry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_error: Option<String>,
}

impl Response {
    /// An empty response for the named model, as the accumulator starts it.
    pub fn empty(model: impl Into<String>) -> Self {
        Self {
            model: model.into(),
            id: None,
            message: Message::new(Role::Assistant, Vec::new()),
            messages: Vec::new(),
            stop_reason: None,
            usage: Usage::default(),
            warnings: Vec::new(),
            output: None,
            output_error: None,
        }
    }

    /// The text of the final message.
    pub fn text(&self) -> String {
        self.message.text()
    }
}
