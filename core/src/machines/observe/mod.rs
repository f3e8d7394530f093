//! What the machines tell an application's telemetry, as plain data: an inference (one
//! step's exchange, its retries and redirects inside it) begins, gets its first chunk,
//! is redirected or retried, and ends; an agent's turn begins and ends. They come out as
//! [`Effect::Observe`](crate::machines::common::Effect::Observe), in order with the
//! machine's other effects, only when the machine's configuration asks for them
//! ([`Observe`]): a call nobody watches builds none of this.
//!
//! Why here and not in the shell: the request sub-machine is the one place that knows an
//! attempt from a redirect from a retry, when the first chunk came, and what the step's
//! response said; the shell would otherwise have to guess it back from effects and
//! reports. What the core leaves to the shell is what needs a clock or a library: the
//! times, the `tracing` spans and the metrics (omni-shell's `telemetry`). The names here
//! are the OpenTelemetry GenAI semantic conventions' values (`chat`, `gcp.gemini`,
//! finish reasons, the message JSON), decided once for every driver.

mod content;

use std::time::Duration;

use serde_json::Value;

use crate::data::error::StreamError;
use crate::data::response::{Response, StopReason};
use crate::data::usage::Usage;
use crate::machines::common::{Effect, GenerateError, TransportErrorKind};
use crate::wire::dialect::RequestSpec;
use crate::wire::http::HttpRequest;

/// How much a machine tells its telemetry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Observe {
    /// Nothing (the default: no observation is built).
    #[default]
    Off,
    /// What the conventions call metadata: models, options, server, usage, finish
    /// reasons, errors. Never the messages.
    Metadata,
    /// Metadata and the messages, system instructions and tool definitions (the
    /// conventions' opt-in content), as the conventions' JSON.
    Content,
}

impl Observe {
    /// Whether anything is observed.
    pub fn is_on(self) -> bool {
        self != Self::Off
    }
}

/// One thing a machine tells its telemetry (see the module documentation).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Observation {
    /// An inference begins: its first attempt is being sent.
    InferenceStarted(Box<InferenceStart>),
    /// The first chunk of the inference's response stream arrived.
    FirstChunk,
    /// The attempt was redirected (same origin) and goes out again.
    Redirected {
        /// The redirect's status.
        status: u16,
    },
    /// The attempt failed and the inference is sent again after `delay`.
    Retrying {
        /// Retry number, 1-based.
        attempt: u32,
        /// Wait before sending.
        delay: Duration,
        /// What failed, as an [`error_type`].
        error_type: &'static str,
    },
    /// The inference ended.
    InferenceEnded(Box<InferenceEnd>),
    /// An agent's turn began.
    TurnStarted,
    /// An agent's turn ended; `error_type` when it failed or was cancelled.
    TurnEnded {
        /// Why it did not end well, as an [`error_type`] (or `cancelled`).
        error_type: Option<&'static str>,
    },
}

/// What is known when an inference begins: the conventions' request attributes.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct InferenceStart {
    /// `gen_ai.operation.name`: `chat`.
    pub operation_name: &'static str,
    /// `gen_ai.provider.name` ([`provider_name`]).
    pub provider_name: String,
    /// `gen_ai.request.model`.
    pub request_model: String,
    /// `gen_ai.request.max_tokens`.
    pub max_tokens: Option<u32>,
    /// `gen_ai.request.temperature`.
    pub temperature: Option<f64>,
    /// `gen_ai.request.top_p`.
    pub top_p: Option<f64>,
    /// `gen_ai.request.top_k` (from the `extra` options, when a number).
    pub top_k: Option<f64>,
    /// `gen_ai.request.frequency_penalty` (from `extra`).
    pub frequency_penalty: Option<f64>,
    /// `gen_ai.request.presence_penalty` (from `extra`).
    pub presence_penalty: Option<f64>,
    /// `gen_ai.request.seed` (from `extra`).
    pub seed: Option<i64>,
    /// `gen_ai.request.stop_sequences`.
    pub stop_sequences: Vec<String>,
    /// `server.address`: the host only, never credentials, path or query.
    pub server_address: Option<String>,
    /// `server.port`.
    pub server_port: Option<u16>,
    /// The messages, with [`Observe::Content`] only.
    pub content: Option<InferenceContent>,
}

/// An inference's input, as the conventions' JSON (opt-in).
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct InferenceContent {
    /// `gen_ai.input.messages`.
    pub input_messages: String,
    /// `gen_ai.system_instructions`, when there is a system prompt.
    pub system_instructions: Option<String>,
    /// `gen_ai.tool.definitions`, when tools are offered.
    pub tool_definitions: Option<String>,
}

/// What is known when an inference ends.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct InferenceEnd {
    /// `gen_ai.response.id`.
    pub response_id: Option<String>,
    /// `gen_ai.response.model`.
    pub response_model: Option<String>,
    /// `gen_ai.response.finish_reasons`.
    pub finish_reasons: Vec<&'static str>,
    /// The step's usage, when the provider reported any.
    pub usage: Option<Usage>,
    /// `error.type`, when it failed.
    pub error_type: Option<&'static str>,
    /// `gen_ai.output.messages`, with [`Observe::Content`] only.
    pub output_messages: Option<String>,
}

impl InferenceEnd {
    /// `gen_ai.usage.input_tokens`: every input token, cached ones included, as the
    /// conventions ask (omni's own [`Usage::input_tokens`] counts the uncached ones).
    pub fn input_tokens(&self) -> Option<u64> {
        self.usage.map(|u| u.input_tokens.saturating_add(u.cache_read_tokens).saturating_add(u.cache_write_tokens))
    }
}

/// `gen_ai.provider.name` for a provider id: the conventions' well-known value where one
/// applies, else the id itself.
pub fn provider_name(provider_id: &str) -> &str {
    match provider_id {
        "google" | "gemini" => "gcp.gemini",
        "vertex" | "vertex_ai" | "vertexai" => "gcp.vertex_ai",
        "mistral" => "mistral_ai",
        "xai" => "x_ai",
        "bedrock" => "aws.bedrock",
        "azure" | "azure_openai" => "azure.ai.openai",
        "watsonx" => "ibm.watsonx.ai",
        other => other,
    }
}

/// `error.type` for a failure: low-cardinality names, never the message (which may
/// quote what the server said).
pub fn error_type(error: &GenerateError) -> &'static str {
    match error {
        GenerateError::Request(_) => "invalid_request",
        GenerateError::Provider(e) | GenerateError::Stream(StreamError::Provider(e)) => provider_kind(e.kind),
        GenerateError::Stream(StreamError::Incomplete) => "incomplete_stream",
        GenerateError::Stream(_) => "stream_decode",
        GenerateError::Transport(t) => match t.kind {
            TransportErrorKind::Connect => "connect",
            TransportErrorKind::Tls => "tls",
            TransportErrorKind::Reset => "connection_reset",
            TransportErrorKind::ProxyAuth => "proxy_auth",
            TransportErrorKind::Other => "transport",
        },
        GenerateError::Timeout(_) => "timeout",
        GenerateError::Stalled(_) => "stalled",
        GenerateError::Redirect(_) => "redirect",
        GenerateError::ResponseTooLarge(_) => "response_too_large",
    }
}

fn provider_kind(kind: crate::data::error::ProviderErrorKind) -> &'static str {
    use crate::data::error::ProviderErrorKind as K;
    match kind {
        K::RateLimited => "rate_limited",
        K::Overloaded => "overloaded",
        K::Authentication => "authentication",
        K::PermissionDenied => "permission_denied",
        K::NotFound => "not_found",
        K::ContextTooLong => "context_too_long",
        K::InvalidRequest => "invalid_request",
        K::Timeout => "provider_timeout",
        K::Server => "server_error",
        _ => "provider_error",
    }
}

/// The conventions' finish reason for omni's stop reason.
pub fn finish_reason(stop: StopReason) -> &'static str {
    match stop {
        StopReason::Stop => "stop",
        StopReason::Length => "length",
        StopReason::ToolUse => "tool_call",
        StopReason::Refusal => "content_filter",
        StopReason::Error => "error",
        StopReason::Cancelled => "cancelled",
    }
}

/// The observation of an inference about to be sent as `request`, built from what built
/// it; `None` when nothing is observed.
pub(crate) fn inference_started(observe: Observe, spec: &RequestSpec<'_>, request: &HttpRequest) -> Option<Effect> {
    if !observe.is_on() {
        return None;
    }
    let options = spec.options;
    let number = |name: &str| options.extra.get(name).and_then(Value::as_f64);
    let (server_address, server_port) = match crate::wire::redirect::host_and_port(&request.url) {
        Some((host, port)) => (Some(host), Some(port)),
        None => (None, None),
    };
    let content = (observe == Observe::Content).then(|| content::input(spec.context));
    let start = InferenceStart {
        operation_name: "chat",
        provider_name: provider_name(&spec.provider.id).to_string(),
        request_model: spec.model.id.clone(),
        max_tokens: options.max_tokens,
        temperature: options.temperature,
        top_p: options.top_p,
        top_k: number("top_k"),
        frequency_penalty: number("frequency_penalty"),
        presence_penalty: number("presence_penalty"),
        seed: options.extra.get("seed").and_then(Value::as_i64),
        stop_sequences: options.stop.clone(),
        server_address,
        server_port,
        content,
    };
    Some(Effect::Observe(Observation::InferenceStarted(Box::new(start))))
}

/// The observation of an inference that ended with `response` (a step's), or failed
/// (`error_type`, an [`error_type`] or `cancelled`) with what had arrived.
pub(crate) fn inference_ended(
    observe: Observe,
    response: Option<&Response>,
    error_type: Option<&'static str>,
) -> Option<Effect> {
    if !observe.is_on() {
        return None;
    }
    let stop = match error_type {
        Some(_) => None,
        None => response.and_then(|r| r.stop_reason),
    };
    let end = InferenceEnd {
        response_id: response.and_then(|r| r.id.clone()),
        response_model: response.map(|r| r.model.clone()).filter(|m| !m.is_empty()),
        finish_reasons: stop.map(finish_reason).into_iter().collect(),
        usage: response.map(|r| r.usage).filter(|u| *u != Usage::default()),
        error_type,
        output_messages: match (observe, response) {
            (Observe::Content, Some(r)) if !r.message.content.is_empty() => {
                Some(content::messages(std::slice::from_ref(&r.message), stop))
            }
            _ => None,
        },
    };
    Some(Effect::Observe(Observation::InferenceEnded(Box::new(end))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::message::{Attachment, Block, Message, Role, Source, ToolResult, ToolUse};
    use serde_json::json;

    #[test]
    fn the_server_is_its_host_and_port_never_its_credentials_path_or_query() {
        use crate::wire::redirect::host_and_port;
        assert_eq!(host_and_port("https://user:pw@API.example.com/v1?key=k"), Some(("api.example.com".into(), 443)));
        assert_eq!(host_and_port("http://127.0.0.1:8080/v1"), Some(("127.0.0.1".into(), 8080)));
        assert_eq!(host_and_port("http://[::1]:9/x"), Some(("[::1]".into(), 9)));
        assert_eq!(host_and_port("not a url"), None);
    }

    #[test]
    fn providers_take_the_conventions_names_where_they_have_one() {
        assert_eq!(provider_name("google"), "gcp.gemini");
        assert_eq!(provider_name("mistral"), "mistral_ai");
        assert_eq!(provider_name("xai"), "x_ai");
        assert_eq!(provider_name("openai"), "openai");
        assert_eq!(provider_name("anthropic"), "anthropic");
        assert_eq!(provider_name("my-gateway"), "my-gateway");
    }

    #[test]
    fn messages_take_the_conventions_shape() {
        let call = ToolUse::new("call_1", "lookup", serde_json::json!({"city": "Paris"}));
        let image = Attachment {
            source: Source::Url { url: "https://example.com/a.png".into() },
            media_type: "image/png".into(),
            name: None,
        };
        let messages = [
            Message::new(Role::User, vec![Block::text("Hi"), Block::Attachment(image)]),
            Message::new(Role::Assistant, vec![Block::ToolUse(call)]),
            Message::new(Role::User, vec![Block::ToolResult(ToolResult::text("call_1", "lookup", "sunny"))]),
        ];
        let json: Value = serde_json::from_str(&content::messages(&messages, None)).expect("JSON");
        assert_eq!(
            json,
            json!([
                {"role": "user", "parts": [{"type": "text", "content": "Hi"},
                    {"type": "uri", "modality": "image", "mime_type": "image/png", "uri": "https://example.com/a.png"}]},
                {"role": "assistant", "parts": [{"type": "tool_call", "id": "call_1", "name": "lookup",
                    "arguments": {"city": "Paris"}}]},
                {"role": "tool", "parts": [{"type": "tool_call_response", "id": "call_1",
                    "response": [{"type": "text", "content": "sunny"}]}]},
            ])
        );
        let output: Value =
            serde_json::from_str(&content::messages(&messages[1..2], Some(StopReason::ToolUse))).expect("JSON");
        assert_eq!(output[0]["finish_reason"], "tool_call");
    }

    #[test]
    fn input_tokens_include_the_cached_ones() {
        let usage = Usage { input_tokens: 10, cache_read_tokens: 30, cache_write_tokens: 5, ..Usage::default() };
        let end = InferenceEnd { usage: Some(usage), ..InferenceEnd::default() };
        assert_eq!(end.input_tokens(), Some(45));
        assert_eq!(InferenceEnd::default().input_tokens(), None);
    }

    #[test]
    fn nothing_is_built_when_nothing_is_observed() {
        assert_eq!(inference_ended(Observe::Off, None, Some("timeout")), None);
        let response = Response::empty("m");
        let Some(Effect::Observe(Observation::InferenceEnded(end))) =
            inference_ended(Observe::Metadata, Some(&response), None)
        else {
            panic!("an end when observed");
        };
        assert_eq!(end.output_messages, None, "no content without Observe::Content");
        assert_eq!(end.usage, None, "no usage when the provider reported none");
    }
}
