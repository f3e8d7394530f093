//! Dialects: the five wire formats, as pure functions.
//!
//! A dialect builds a request from `(model, context, options)` and turns one decoded
//! stream event into zero or more [`Delta`]s, with its per-stream state passed in
//! explicitly. Everything that is the same for every dialect (URL assembly, auth
//! headers, extra headers, option validation) happens here, once.

mod anthropic;
mod common;
pub(crate) mod custom;
mod extra;
mod gemini;
mod hooks;
mod in_place;
mod ollama;
mod openai_completions;
mod openai_responses;

use crate::data::error::{ProviderError, RequestError, StreamError};
use crate::data::message::Context;
use crate::data::model::Model;
use crate::data::options::Options;
use crate::data::provider::{ApiKey, Auth, Provider};
use crate::data::response::Warning;
use crate::wire::delta::Delta;
use crate::wire::framing::{Frame, Framing};
use crate::wire::http::{Header, HttpRequest, Method};

#[cfg(test)]
mod near_json;
#[cfg(test)]
mod schema_tests;
#[cfg(test)]
mod shared_tests;

// The dialect's identity (its names, parsing, serde) is data, so that a model can name its
// wire format without data knowing the wire; what a dialect does is added here.
pub(crate) use crate::data::dialect::Dialect;

impl Dialect {
    /// How response bodies are framed.
    pub fn framing(self) -> Framing {
        match self {
            Self::OllamaChat => Framing::Ndjson,
            Self::Custom(custom) => custom.format().framing(),
            Self::AnthropicMessages | Self::OpenaiCompletions | Self::OpenaiResponses | Self::GoogleGemini => {
                Framing::Sse
            }
        }
    }

    /// Builds the HTTP request for a streaming call.
    ///
    /// Options are validated here too, so a hand-built request cannot skip the checks.
    pub fn build_request(self, spec: &RequestSpec<'_>) -> Result<BuiltRequest, RequestError> {
        spec.options.validate().map_err(RequestError::InvalidOptions)?;
        if let Some(what) = crate::data::depth::too_deep_in_request(spec.context, spec.options) {
            return Err(RequestError::TooDeep { what });
        }
        let key = match (&spec.provider.auth, spec.api_key) {
            (_, Some(key)) => Some(key),
            (Auth::None, None) => None,
            (_, None) => {
                return Err(RequestError::MissingApiKey {
                    provider: spec.provider.id.clone(),
                    env: spec.provider.api_key_env.clone(),
                })
            }
        };
        let mut warnings = Vec::new();
        let mut part = match self {
            Self::AnthropicMessages => anthropic::build_request(spec, &mut warnings)?,
            Self::OpenaiCompletions => openai_completions::build_request(spec, &mut warnings)?,
            Self::OpenaiResponses => openai_responses::build_request(spec, &mut warnings)?,
            Self::GoogleGemini => gemini::build_request(spec, &mut warnings)?,
            Self::OllamaChat => ollama::build_request(spec, &mut warnings)?,
            Self::Custom(custom) => custom.format().build_request(spec, &mut warnings)?,
        };
        extra::merge(self, spec, &mut part.body, &mut warnings)?;
        // The provider's body hook sees the body whole, extra options included.
        let part = hooks::apply_body(part, spec, self);
        let mut request = HttpRequest {
            method: Method::Post,
            url: hooks::url(spec, self, &part.path, key)?,
            headers: vec![Header::new("content-type", "application/json")],
            body: serde_json::to_vec(&part.body).map_err(|e| RequestError::Unsupported { message: e.to_string() })?,
        };
        request.set_header(Header::new("accept", accept_header(self.framing())));
        request.set_header(Header::new("user-agent", USER_AGENT));
        match (&spec.provider.auth, key) {
            // A key given for a provider that needs none (a keyless OpenAI-compatible
            // server) is still sent, the OpenAI-compatible way: a key is never dropped.
            (Auth::Bearer | Auth::None, Some(key)) => {
                request.set_header(Header::secret("authorization", format!("Bearer {}", key.expose())))
            }
            (Auth::Header { name }, Some(key)) => request.set_header(Header::secret(name.clone(), key.expose())),
            _ => {}
        }
        for header in part.headers {
            request.set_header(header);
        }
        // Headers carrying credentials are secrets like the key: the provider's and the
        // options' marks join the built-in rule (`Header::new`).
        for (name, value) in spec.provider.headers.iter().chain(&spec.options.headers) {
            let secret = spec.provider.is_secret_header(name) || spec.options.is_secret_header(name);
            request.set_header(if secret { Header::secret(name, value) } else { Header::new(name, value) });
        }
        // One check for every header, whoever set it: no line can be injected.
        if let Some(bad) = request.headers.iter().find(|h| !sendable(&h.name, &h.value)) {
            return Err(RequestError::InvalidHeader { name: bad.name.escape_debug().to_string() });
        }
        Ok(BuiltRequest { request, warnings })
    }

    /// Fresh per-stream parsing state.
    pub fn new_stream_state(self) -> DialectState {
        match self {
            Self::AnthropicMessages => DialectState::Anthropic(Default::default()),
            Self::OpenaiCompletions => DialectState::OpenaiCompletions(Default::default()),
            Self::OpenaiResponses => DialectState::OpenaiResponses(Default::default()),
            Self::GoogleGemini => DialectState::Gemini(Default::default()),
            Self::OllamaChat => DialectState::Ollama(Default::default()),
            Self::Custom(custom) => DialectState::Custom(custom.format().new_stream()),
        }
    }

    /// Parses the body of a non-2xx response into a typed error. `headers` supply
    /// `retry-after`; `body` is kept on the error (truncated).
    pub fn parse_error<'h>(
        self,
        status: u16,
        headers: impl IntoIterator<Item = (&'h str, &'h str)>,
        body: &[u8],
    ) -> ProviderError {
        if let Self::Custom(custom) = self {
            let headers: Vec<(&str, &str)> = headers.into_iter().collect();
            return custom.format().parse_error(status, &headers, body);
        }
        let (code, message) = common::error_code_and_message(body);
        let message = message.unwrap_or_else(|| common::fallback_error_message(status, body));
        ProviderError::new(Some(status), code, message).with_body(body).with_retry_after_from(headers)
    }
}

/// Sent with every request, the same from every driver.
pub(crate) const USER_AGENT: &str = concat!("omni/", env!("CARGO_PKG_VERSION"));

fn accept_header(framing: Framing) -> &'static str {
    match framing {
        Framing::Sse => "text/event-stream",
        Framing::Ndjson => "application/x-ndjson",
        Framing::Json => "application/json",
    }
}

/// Everything a dialect needs to build a request.
#[derive(Debug, Clone, Copy)]
pub struct RequestSpec<'a> {
    /// The model.
    pub model: &'a Model,
    /// Its provider.
    pub provider: &'a Provider,
    /// System prompt, history and tools.
    pub context: &'a Context,
    /// Options (validated by [`Dialect::build_request`]).
    pub options: &'a Options,
    /// The resolved key, if the provider needs one.
    pub api_key: Option<&'a ApiKey>,
}

/// True for a header HTTP/1.1 can carry as is: the name an RFC 9110 token, the value
/// visible characters, spaces and tabs only (no CR, LF, NUL or other control).
fn sendable(name: &str, value: &str) -> bool {
    let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    !name.is_empty() && name.bytes().all(token) && value.bytes().all(|b| b == b'\t' || !b.is_ascii_control())
}

/// A built request and what could not be honoured.
#[derive(Debug, Clone)]
pub struct BuiltRequest {
    /// The request to send.
    pub request: HttpRequest,
    /// Options or content the dialect could not express.
    pub warnings: Vec<Warning>,
}

/// The dialect-specific part of a request; [`Dialect::build_request`] adds the rest.
#[derive(Debug)]
pub struct DialectRequest {
    /// Path (and query) appended to the provider's base URL.
    pub path: String,
    /// Dialect headers (e.g. `anthropic-version`).
    pub headers: Vec<Header>,
    /// The JSON body.
    pub body: serde_json::Value,
}

/// Where a dialect's parser puts the deltas of a frame: a `Vec` ([`DialectState::parse`]),
/// or straight into the accumulator (the stream decoder), which saves moving every delta
/// through a buffer.
pub(crate) trait DeltaSink {
    /// One delta, in stream order.
    fn push(&mut self, delta: Delta);
}

impl DeltaSink for Vec<Delta> {
    #[inline]
    fn push(&mut self, delta: Delta) {
        Self::push(self, delta);
    }
}

/// Per-stream parsing state of one dialect.
#[derive(Debug)]
pub enum DialectState {
    /// `anthropic_messages`.
    Anthropic(anthropic::StreamState),
    /// `openai_completions`.
    OpenaiCompletions(openai_completions::StreamState),
    /// `openai_responses`.
    OpenaiResponses(openai_responses::StreamState),
    /// `google_gemini`.
    Gemini(gemini::StreamState),
    /// `ollama_chat`.
    Ollama(ollama::StreamState),
    /// An application's wire format.
    Custom(Box<dyn custom::WireStream>),
}

impl DialectState {
    /// Parses one frame into deltas. Unknown event types yield nothing; a payload that
    /// is not what the dialect documents is a [`StreamError::Decode`].
    pub fn parse(&mut self, frame: &Frame<'_>, out: &mut Vec<Delta>) -> Result<(), StreamError> {
        self.parse_to(frame, out)
    }

    /// [`parse`](Self::parse) into any sink.
    pub(crate) fn parse_to(&mut self, frame: &Frame<'_>, out: &mut impl DeltaSink) -> Result<(), StreamError> {
        match self {
            Self::Anthropic(s) => s.parse_to(frame, out),
            Self::OpenaiCompletions(s) => s.parse_to(frame, out),
            Self::OpenaiResponses(s) => s.parse_to(frame, out),
            Self::Gemini(s) => s.parse_to(frame, out),
            Self::Ollama(s) => s.parse_to(frame, out),
            Self::Custom(s) => {
                let mut deltas = Vec::new();
                let parsed = s.event(frame, &mut deltas);
                for delta in deltas {
                    out.push(delta);
                }
                parsed
            }
        }
    }

    /// The body ended: emit anything held back (e.g. a stop reason waiting for usage).
    pub fn finish(&mut self, out: &mut Vec<Delta>) {
        match self {
            Self::Anthropic(s) => s.finish(out),
            Self::OpenaiCompletions(s) => s.finish(out),
            Self::OpenaiResponses(s) => s.finish(out),
            Self::Gemini(s) => s.finish(out),
            Self::Ollama(s) => s.finish(out),
            Self::Custom(s) => s.finish(out),
        }
    }
}
