//! Expectations for the upstream corpus, and the replay that checks them.
//!
//! `conformance/upstream-expectations.json` is our own oracle: for every recording (file and
//! interaction) what a correct decoder must make of it, written by reading the recording,
//! not by running omni. Each entry:
//!
//! ```json
//! { "file": "anthropic/x.sse", "interaction": 0,
//!   "outcome": "done",            // "done" | "error" | "http_error"
//!   "stop_reason": "stop",        // done only: stop | length | tool_use | refusal
//!   "error": "provider",          // error only, optional: provider | incomplete | decode | ...
//!   "error_kind": "overloaded",   // http_error (required) or a provider error (optional)
//!   "tools": ["get_weather"],     // tool call names in order; absent = not checked
//!   "text": "Hello",              // prefix of the final text; null = no text; absent = not checked
//!   "input_tokens": 91,           // optional: the response's input tokens
//!   "note": "why",                // optional
//!   "known_gap": "why" }          // optional: a mismatch is reported but does not fail
//! ```

use std::path::Path;

use omni_protocol::{dialect::decode_body, Block, ProviderErrorKind, StopReason, StreamError};
use serde::{Deserialize, Deserializer, Serialize};

use super::Recording;

/// The expectations file.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectationsFile {
    /// What the file is.
    #[serde(default)]
    pub about: String,
    /// One entry per recording.
    pub recordings: Vec<Expectation>,
}

/// How a recording must end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The stream completes with a `done` event.
    Done,
    /// The stream ends with an `error` event (in-stream error, cut stream, malformed data).
    Error,
    /// A non-2xx response, parsed with [`omni_protocol::Dialect::parse_error`].
    HttpError,
}

/// What one recording must decode to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expectation {
    /// Path relative to the corpus root (as in [`Recording::file`]).
    pub file: String,
    /// Interaction within the file.
    #[serde(default)]
    pub interaction: usize,
    /// How it ends.
    pub outcome: Outcome,
    /// For `done`: the stop reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<StopReason>,
    /// For `error`: the class of stream error (see [`error_class`]); absent = not checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// For `http_error`, or a `provider` stream error: the error kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_kind: Option<ProviderErrorKind>,
    /// Tool call names in order; `None` = not checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    /// `Some(Some(prefix))`: the text starts with it; `Some(None)` (JSON null): no text;
    /// `None` (absent): not checked.
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub text: Option<Option<String>>,
    /// The response's input tokens; `None` = not checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    /// Why the expectation is what it is, where that is not obvious.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// A known, accepted divergence: mismatches are reported, not failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub known_gap: Option<String>,
}

/// Distinguishes an explicit `null` from an absent field.
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(d).map(Some)
}

/// Reads an expectations file.
pub fn load_expectations(path: &Path) -> Result<ExpectationsFile, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// What omni made of a recording.
#[derive(Debug, Clone, PartialEq)]
pub struct Observed {
    /// How it ended.
    pub outcome: Outcome,
    /// The response's stop reason (`error` after a failed stream).
    pub stop_reason: Option<StopReason>,
    /// The stream error's class, for `error`.
    pub error: Option<String>,
    /// The provider error kind, for `http_error` and provider stream errors.
    pub error_kind: Option<ProviderErrorKind>,
    /// Tool call names in order.
    pub tools: Vec<String>,
    /// The final message text.
    pub text: String,
    /// The response's input tokens.
    pub input_tokens: u64,
    /// A one-line description of the error, if any.
    pub detail: Option<String>,
}

/// A short class name for a stream error: `provider`, `incomplete`, `decode`, `framing`,
/// `invalid_tool_input`, `wrong_format` or `other`.
pub fn error_class(error: &StreamError) -> &'static str {
    match error {
        StreamError::Provider(_) => "provider",
        StreamError::Incomplete => "incomplete",
        StreamError::Decode { .. } => "decode",
        StreamError::Framing { .. } => "framing",
        StreamError::InvalidToolInput { .. } => "invalid_tool_input",
        StreamError::WrongFormat { .. } => "wrong_format",
        _ => "other",
    }
}

/// Replays a recording: a 2xx body through [`decode_body`], anything else through the
/// dialect's error parser.
pub fn replay(recording: &Recording) -> Observed {
    if !recording.is_success() {
        let headers = recording.headers.iter().map(|(n, v)| (n.as_str(), v.as_str()));
        let error = recording.dialect.parse_error(recording.status, headers, &recording.body);
        return Observed {
            outcome: Outcome::HttpError,
            stop_reason: None,
            error: None,
            error_kind: Some(error.kind),
            tools: Vec::new(),
            text: String::new(),
            input_tokens: 0,
            detail: Some(error.to_string()),
        };
    }
    let (events, response) = decode_body(recording.dialect, "model", &recording.body);
    let stream_error = events.iter().rev().find_map(|e| match e {
        omni_protocol::StreamEvent::Error { error } => Some(&**error),
        _ => None,
    });
    let done = events.iter().any(|e| matches!(e, omni_protocol::StreamEvent::Done { .. }));
    let tools = response
        .message
        .content
        .iter()
        .filter_map(|b| match b {
            Block::ToolUse(t) => Some(t.name.clone()),
            _ => None,
        })
        .collect();
    Observed {
        outcome: if done && stream_error.is_none() { Outcome::Done } else { Outcome::Error },
        stop_reason: response.stop_reason,
        error: stream_error.map(|e| error_class(e).to_string()),
        error_kind: stream_error.and_then(|e| match e {
            StreamError::Provider(p) => Some(p.kind),
            _ => None,
        }),
        tools,
        text: response.text(),
        input_tokens: response.usage.input_tokens,
        detail: stream_error.map(|e| e.to_string()),
    }
}

/// Compares an observation with its expectation; each mismatch is one line.
pub fn mismatches(expected: &Expectation, observed: &Observed) -> Vec<String> {
    let mut out = Vec::new();
    if expected.outcome != observed.outcome {
        let detail = observed.detail.as_deref().map(|d| format!(" ({d})")).unwrap_or_default();
        out.push(format!("outcome: expected {:?}, got {:?}{detail}", expected.outcome, observed.outcome));
    }
    if expected.outcome == Outcome::Done && expected.stop_reason != observed.stop_reason {
        out.push(format!("stop_reason: expected {:?}, got {:?}", expected.stop_reason, observed.stop_reason));
    }
    if let Some(class) = &expected.error {
        if observed.error.as_ref() != Some(class) {
            out.push(format!("error: expected {class}, got {:?} ({:?})", observed.error, observed.detail));
        }
    }
    if let Some(kind) = expected.error_kind {
        if observed.error_kind != Some(kind) {
            out.push(format!("error_kind: expected {kind:?}, got {:?} ({:?})", observed.error_kind, observed.detail));
        }
    }
    if let Some(tools) = &expected.tools {
        if *tools != observed.tools {
            out.push(format!("tools: expected {tools:?}, got {:?}", observed.tools));
        }
    }
    if let Some(tokens) = expected.input_tokens {
        if tokens != observed.input_tokens {
            out.push(format!("input_tokens: expected {tokens}, got {}", observed.input_tokens));
        }
    }
    match &expected.text {
        Some(Some(prefix)) if !observed.text.starts_with(prefix.as_str()) => {
            out.push(format!("text: expected to start with {prefix:?}, got {:?}", preview(&observed.text)));
        }
        Some(None) if !observed.text.is_empty() => {
            out.push(format!("text: expected none, got {:?}", preview(&observed.text)));
        }
        _ => {}
    }
    out
}

fn preview(text: &str) -> String {
    let mut end = text.len().min(80);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let ellipsis = if end < text.len() { "…" } else { "" };
    format!("{}{ellipsis}", &text[..end])
}
