//! Typed errors: provider errors (HTTP and in-stream), stream errors, request errors.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// What kind of failure a provider reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ProviderErrorKind {
    /// Too many requests (HTTP 429 or a rate-limit error type).
    RateLimited,
    /// The provider is overloaded (Anthropic 529 `overloaded_error`, Gemini 503 `UNAVAILABLE`).
    Overloaded,
    /// Missing or invalid API key (HTTP 401).
    Authentication,
    /// The key may not use this resource (HTTP 403).
    PermissionDenied,
    /// Unknown model or path (HTTP 404).
    NotFound,
    /// The prompt does not fit the model's context window.
    ContextTooLong,
    /// The request was malformed or refused as invalid (HTTP 400, 422).
    InvalidRequest,
    /// Request timeout (408) or conflict (409): worth a retry.
    Timeout,
    /// A 5xx or an internal error reported in the stream.
    Server,
    /// Anything else.
    Other,
}

/// An error reported by a provider, either as a non-2xx response or as an error event
/// inside a stream.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
pub struct ProviderError {
    /// Classification.
    pub kind: ProviderErrorKind,
    /// HTTP status, when the error came as a response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// The provider's error type or code, e.g. `overloaded_error` or `context_length_exceeded`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// The provider's message.
    pub message: String,
    /// How long the provider asked us to wait (`retry-after-ms` / `retry-after`), however
    /// long: a wait past the retry policy's `max_retry_after` (the machines' `RetryPolicy`)
    /// fails the call at once with this error, so the caller sees what was asked.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "opt_duration_ms")]
    pub retry_after: Option<Duration>,
    /// The raw body, kept so nothing is lost (bounded by the caller).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// Which provider, model and host answered with this error: set by the call that
    /// received it, so that a log line says where it came from. Boxed: it is rare, and
    /// the error travels in every `Result` of a call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub served_by: Option<Box<ServedBy>>,
}

/// Who answered a call with an error (see [`ProviderError::served_by`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServedBy {
    /// The provider's name, e.g. `anthropic`.
    pub provider: String,
    /// The model id the call asked for.
    pub model: String,
    /// The host (and port, when one is given) the request went to; never the URL's
    /// credentials, path or query.
    pub host: String,
}

impl ServedBy {
    /// The provider and model of a call, and the host of its `url`.
    pub fn new(provider: &str, model: &str, url: &str) -> Self {
        let after_scheme = url.split_once("://").map_or(url, |(_, rest)| rest);
        let authority = after_scheme.split(['/', '?', '#']).next().unwrap_or_default();
        // `user:password@host`: the credentials never reach an error.
        let host = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
        Self { provider: provider.to_owned(), model: model.to_owned(), host: host.to_owned() }
    }
}

impl fmt::Display for ServedBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} model {} at {}", self.provider, self.model, self.host)
    }
}

impl fmt::Debug for ProviderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProviderError")
            .field("kind", &self.kind)
            .field("status", &self.status)
            .field("code", &self.code)
            .field("message", &self.message)
            .field("retry_after", &self.retry_after)
            .field("served_by", &self.served_by)
            .finish_non_exhaustive()
    }
}

impl fmt::Display for ProviderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(served_by) = &self.served_by {
            write!(f, "{served_by}: ")?;
        }
        write!(f, "{:?}", self.kind)?;
        if let Some(status) = self.status {
            write!(f, " (HTTP {status})")?;
        }
        if let Some(code) = &self.code {
            write!(f, " [{code}]")?;
        }
        write!(f, ": {}", self.message)?;
        if let Some(wait) = self.retry_after {
            write!(f, " (retry after {wait:?})")?;
        }
        Ok(())
    }
}

impl std::error::Error for ProviderError {}

/// Words providers use when a prompt is too long for the model.
const CONTEXT_TOO_LONG_MARKERS: &[&str] = &[
    "context_length_exceeded",
    "exceed_context_size",
    "context length",
    "context window",
    "maximum context",
    "prompt is too long",
    "too many tokens",
    "input token count",
    "exceeds the maximum number of tokens",
];

impl ProviderError {
    /// Classifies an error from its HTTP status (if any), the provider's error type or
    /// code, and its message. One place decides this for every dialect.
    pub fn classify(status: Option<u16>, code: Option<&str>, message: &str) -> ProviderErrorKind {
        let code_l = code.unwrap_or("").to_ascii_lowercase();
        let msg_l = message.to_ascii_lowercase();
        let mentions = |needle: &str| code_l.contains(needle) || msg_l.contains(needle);
        if CONTEXT_TOO_LONG_MARKERS.iter().any(|m| mentions(m)) {
            return ProviderErrorKind::ContextTooLong;
        }
        // Gemini answers a bad key with 400 INVALID_ARGUMENT and reason API_KEY_INVALID.
        if mentions("api_key_invalid") || mentions("api key not valid") || mentions("invalid api key") {
            return ProviderErrorKind::Authentication;
        }
        if mentions("overloaded") || code_l == "unavailable" {
            return ProviderErrorKind::Overloaded;
        }
        if mentions("rate_limit") || code_l == "resource_exhausted" || code_l == "rate_limited" {
            return ProviderErrorKind::RateLimited;
        }
        match status {
            Some(401) => ProviderErrorKind::Authentication,
            Some(403) => ProviderErrorKind::PermissionDenied,
            Some(404) => ProviderErrorKind::NotFound,
            Some(408) | Some(409) => ProviderErrorKind::Timeout,
            Some(429) => ProviderErrorKind::RateLimited,
            Some(529) => ProviderErrorKind::Overloaded,
            Some(503) if code_l.is_empty() => ProviderErrorKind::Overloaded,
            Some(s) if s >= 500 => ProviderErrorKind::Server,
            Some(400) | Some(413) | Some(422) => ProviderErrorKind::InvalidRequest,
            _ => match code_l.as_str() {
                "authentication_error" | "unauthenticated" | "invalid_api_key" => ProviderErrorKind::Authentication,
                "permission_error" | "permission_denied" => ProviderErrorKind::PermissionDenied,
                "not_found_error" | "not_found" | "model_not_found" => ProviderErrorKind::NotFound,
                "invalid_request_error" | "invalid_argument" | "failed_precondition" => {
                    ProviderErrorKind::InvalidRequest
                }
                "api_error" | "server_error" | "internal" | "internal_error" => ProviderErrorKind::Server,
                _ => ProviderErrorKind::Other,
            },
        }
    }

    /// Builds an error, classifying it with [`ProviderError::classify`].
    pub fn new(status: Option<u16>, code: Option<String>, message: impl Into<String>) -> Self {
        let message = message.into();
        Self {
            kind: Self::classify(status, code.as_deref(), &message),
            status,
            code,
            message,
            retry_after: None,
            body: None,
            served_by: None,
        }
    }

    /// Says who answered with this error (kept when already set).
    pub fn with_served_by(mut self, served_by: ServedBy) -> Self {
        self.served_by.get_or_insert_with(|| Box::new(served_by));
        self
    }

    /// Attaches the raw body (truncated to 64 KiB so a huge error page cannot grow memory).
    pub fn with_body(mut self, body: &[u8]) -> Self {
        const MAX: usize = 64 * 1024;
        let end = body.len().min(MAX);
        self.body = Some(String::from_utf8_lossy(&body[..end]).into_owned());
        self
    }

    /// Reads `retry-after-ms` (milliseconds) or `retry-after` (seconds) from response headers.
    /// Every finite, non-negative wait is kept, however long (beyond 136 years it reads as
    /// `u32::MAX` seconds): whether to wait is the retry policy's decision, and a day-long
    /// wait dropped here would have been replaced by a short backoff, hammering a provider
    /// that asked for quiet. The HTTP-date form of `retry-after` needs a clock: it is not
    /// read, and the backoff applies.
    pub fn with_retry_after_from<'h>(mut self, headers: impl IntoIterator<Item = (&'h str, &'h str)>) -> Self {
        let mut ms = None;
        let mut secs = None;
        for (name, value) in headers {
            if name.eq_ignore_ascii_case("retry-after-ms") {
                ms = value.trim().parse::<f64>().ok();
            } else if name.eq_ignore_ascii_case("retry-after") {
                secs = value.trim().parse::<f64>().ok();
            }
        }
        let wait = ms.map(|m| m / 1000.0).or(secs);
        // Capped so that any wait converts, and serialises as milliseconds in a u64.
        let longest = Duration::from_secs(u32::MAX.into());
        if let Some(w) = wait.filter(|w| w.is_finite() && *w >= 0.0) {
            self.retry_after = Some(Duration::try_from_secs_f64(w).map_or(longest, |d| d.min(longest)));
        }
        self
    }

    /// Cuts `secrets` (the request's key and secret header values) out of the message,
    /// the code and the body: a server that echoes the key back must not put it in an
    /// error the application logs.
    pub fn scrub(&mut self, secrets: &crate::data::secret::Secrets) {
        secrets.scrub(&mut self.message);
        if let Some(code) = &mut self.code {
            secrets.scrub(code);
        }
        if let Some(body) = &mut self.body {
            secrets.scrub(body);
        }
    }

    /// True when retrying the same request may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self.kind,
            ProviderErrorKind::RateLimited
                | ProviderErrorKind::Overloaded
                | ProviderErrorKind::Server
                | ProviderErrorKind::Timeout
        )
    }
}

/// Why a stream could not be decoded to the end.
///
/// Serialised with a `type` tag (a provider error keeps its own `kind` beside it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum StreamError {
    /// The provider sent an error event in the stream.
    Provider(ProviderError),
    /// The byte stream broke the framing rules (an event over the size limit).
    Framing {
        /// What went wrong.
        message: String,
    },
    /// An event's payload was not what the dialect documents (malformed JSON).
    Decode {
        /// What went wrong.
        message: String,
        /// The start of the offending payload (at most 200 bytes).
        payload: String,
    },
    /// The stream ended before the provider said it was finished.
    Incomplete,
    /// None of the response's events is one of the dialect's: the server speaks another
    /// API (a Chat Completions server asked for OpenAI's Responses API, say). Not retried.
    WrongFormat {
        /// The dialect the events were read as.
        dialect: String,
        /// The response's content type, when known.
        content_type: Option<String>,
        /// The first event that arrived, its name and data (at most 200 bytes).
        first_event: String,
    },
    /// A tool call's accumulated input is not valid JSON; the raw text is kept on the block.
    InvalidToolInput {
        /// Block index in the message.
        index: usize,
        /// Tool call id.
        id: String,
        /// Tool name.
        name: String,
        /// The JSON parser's message.
        message: String,
    },
}

impl StreamError {
    /// A decode error quoting the start of the payload.
    pub fn decode(message: impl fmt::Display, payload: &str) -> Self {
        let mut end = payload.len().min(200);
        while !payload.is_char_boundary(end) {
            end -= 1;
        }
        Self::Decode { message: message.to_string(), payload: payload[..end].to_string() }
    }
}

impl fmt::Display for StreamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Provider(e) => write!(f, "provider error: {e}"),
            Self::Framing { message } => write!(f, "framing error: {message}"),
            Self::Decode { message, payload } => write!(f, "cannot decode event ({message}): {payload}"),
            Self::Incomplete => write!(f, "the stream ended before the provider finished the message"),
            Self::WrongFormat { dialect, content_type, first_event } => {
                write!(f, "the response is not a {dialect} stream: none of its events is one")?;
                if let Some(content_type) = content_type {
                    write!(f, " (content type {content_type})")?;
                }
                write!(f, "; the first was {first_event:?}. {}", wrong_format_hint(dialect))
            }
            Self::InvalidToolInput { id, name, message, .. } => {
                write!(f, "tool call {id} ({name}) has invalid JSON input: {message}")
            }
        }
    }
}

impl std::error::Error for StreamError {}

/// What to do about a stream of another format, by the dialect that was expected.
fn wrong_format_hint(dialect: &str) -> &'static str {
    match dialect {
        "openai_responses" => {
            "`openai:` models speak OpenAI's Responses API; for a server of the Chat Completions API \
             (vLLM, LM Studio, llama.cpp, Ollama's /v1, most gateways) use \
             `Provider::openai_compatible` (dialect `openai_completions`)"
        }
        "openai_completions" => {
            "the server may speak another API: OpenAI's Responses API (an `openai:` model), \
             Anthropic's Messages API, or Ollama's own (`/api/chat`, dialect `ollama_chat`)"
        }
        _ => {
            "check that the provider's dialect is the API the server speaks (its base URL may point at another server)"
        }
    }
}

/// Why a request could not be built.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RequestError {
    /// The provider needs a key and none was found.
    MissingApiKey {
        /// Provider id.
        provider: String,
        /// Environment variable that was consulted.
        env: Option<String>,
    },
    /// The context cannot be expressed in this dialect.
    Unsupported {
        /// What and why.
        message: String,
    },
    /// An option is out of range or inconsistent.
    InvalidOptions(crate::data::options::OptionsError),
    /// A header (from the options, the provider or the key) cannot be sent: its name is
    /// not an HTTP token, or its value holds a line break or another control character.
    /// Names the header only: the value may be a key.
    InvalidHeader {
        /// The header's name (as given).
        name: String,
    },
    /// A value in the request (a tool input, a schema) is nested deeper than
    /// [`MAX_DEPTH`](crate::data::depth::MAX_DEPTH) levels, past what omni writes out.
    TooDeep {
        /// Which value.
        what: String,
    },
    /// An extra option ([`Options::extra`](crate::data::options::Options::extra)) the dialect does not
    /// know, or of the wrong JSON type, with `strict_extra` on (else it is a warning).
    InvalidExtraOption {
        /// The key as given.
        key: String,
        /// What is wrong, with the closest known key or the expected type.
        reason: String,
    },
    /// An extra option names a field of the request body that omni sets itself: it is
    /// never overwritten, whatever the mode.
    ExtraOptionCollides {
        /// The key as given.
        key: String,
        /// What to do instead, when omni has a way (e.g. "use the `max_tokens` option").
        instead: Option<String>,
    },
}

impl fmt::Display for RequestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::MissingApiKey { provider, env: Some(env) } => {
                write!(f, "no API key for provider {provider}: pass one or set {env}")
            }
            Self::MissingApiKey { provider, env: None } => write!(f, "no API key for provider {provider}"),
            Self::Unsupported { message } => write!(f, "unsupported request: {message}"),
            Self::InvalidOptions(e) => write!(f, "invalid options: {e}"),
            Self::InvalidHeader { name } => {
                write!(f, "header {name:?} cannot be sent: a bad name, or a control character in its value")
            }
            Self::TooDeep { what } => {
                write!(f, "{what} is nested deeper than {} levels", crate::data::depth::MAX_DEPTH)
            }
            Self::InvalidExtraOption { key, reason } => write!(f, "extra option `{key}`: {reason}"),
            Self::ExtraOptionCollides { key, instead } => {
                write!(f, "extra option `{key}` names a field omni sets itself")?;
                match instead {
                    Some(instead) => write!(f, ": {instead}"),
                    None => write!(f, " in this request"),
                }
            }
        }
    }
}

impl std::error::Error for RequestError {}

mod opt_duration_ms {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_u64(d.as_millis() as u64),
            None => s.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        Ok(Option::<u64>::deserialize(d)?.map(Duration::from_millis))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn served_by_keeps_the_host_and_drops_credentials_path_and_query() {
        let cases = [
            ("https://api.anthropic.com/v1/messages", "api.anthropic.com"),
            ("http://user:secret@10.0.0.1:8080/v1?key=k", "10.0.0.1:8080"),
            ("https://[::1]:443#frag", "[::1]:443"),
            ("localhost:11434/api/chat", "localhost:11434"),
        ];
        for (url, host) in cases {
            let by = ServedBy::new("p", "m", url);
            assert_eq!(by.host, host, "{url}");
        }
        let error = ProviderError::new(Some(401), None, "bad key").with_served_by(ServedBy::new(
            "anthropic",
            "claude-x",
            "https://api.anthropic.com/v1",
        ));
        assert!(error.to_string().starts_with("anthropic model claude-x at api.anthropic.com: "), "{error}");
        let kept = error.clone().with_served_by(ServedBy::new("other", "m", "https://h"));
        assert_eq!(kept, error, "the first who answered is kept");
    }

    #[test]
    fn classifies_common_errors() {
        use ProviderErrorKind::*;
        assert_eq!(ProviderError::classify(Some(429), None, "slow down"), RateLimited);
        assert_eq!(ProviderError::classify(Some(529), Some("overloaded_error"), "Overloaded"), Overloaded);
        assert_eq!(ProviderError::classify(None, Some("overloaded_error"), "Overloaded"), Overloaded);
        assert_eq!(ProviderError::classify(Some(401), Some("authentication_error"), "bad key"), Authentication);
        assert_eq!(
            ProviderError::classify(Some(400), Some("invalid_request_error"), "prompt is too long: 210000 tokens"),
            ContextTooLong
        );
        assert_eq!(ProviderError::classify(Some(400), None, "bad"), InvalidRequest);
        assert_eq!(
            ProviderError::classify(
                Some(400),
                Some("INVALID_ARGUMENT"),
                "API key not valid. Please pass a valid API key."
            ),
            Authentication
        );
        assert_eq!(ProviderError::classify(Some(502), None, "bad gateway"), Server);
        assert!(ProviderError::new(Some(500), None, "x").is_retryable());
        assert!(!ProviderError::new(Some(401), None, "x").is_retryable());
    }

    #[test]
    fn reads_retry_after_headers() {
        let e = ProviderError::new(Some(429), None, "x").with_retry_after_from([("Retry-After", "2")]);
        assert_eq!(e.retry_after, Some(Duration::from_secs(2)));
        let e = ProviderError::new(Some(429), None, "x")
            .with_retry_after_from([("retry-after", "2"), ("retry-after-ms", "1500")]);
        assert_eq!(e.retry_after, Some(Duration::from_millis(1500)));
        let e = ProviderError::new(Some(429), None, "x").with_retry_after_from([("retry-after", "Wed, 21 Oct 2015")]);
        assert_eq!(e.retry_after, None);
        // A day or more is kept (the policy decides), an absurd value is capped.
        let e = ProviderError::new(Some(429), None, "x").with_retry_after_from([("retry-after", "86400")]);
        assert_eq!(e.retry_after, Some(Duration::from_secs(86_400)));
        assert!(e.to_string().ends_with("(retry after 86400s)"), "{e}");
        let e = ProviderError::new(Some(429), None, "x").with_retry_after_from([("retry-after", "1e300")]);
        assert_eq!(e.retry_after, Some(Duration::from_secs(u32::MAX.into())));
        for bad in ["-1", "NaN", "inf"] {
            let e = ProviderError::new(Some(429), None, "x").with_retry_after_from([("retry-after", bad)]);
            assert_eq!(e.retry_after, None, "{bad}");
        }
    }
}
