//! What the generate machine asks of its driver (effects), what the driver tells it
//! (inputs), and what the application observes (events).

use std::fmt;
use std::time::Duration;

use crate::data::error::{ProviderError, RequestError, StreamError};
use crate::data::event::StreamEvent;
use crate::data::message::{ToolResult, ToolUse};
// A tool run's end is data (a handler's output); it is reported to the machines here.
use crate::data::response::Response;
use crate::data::secret::Secrets;
pub use crate::data::tool::ToolOutcome;
use crate::wire::http::HttpRequest;

/// Identifies one HTTP request; answers for other ids are ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RequestId(pub u64);

/// Identifies one tool run; answers for other ids are ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ToolRunId(pub u64);

/// Something the driver must do.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Send this request and feed back its head, body and end (or a transport failure).
    SendRequest {
        /// Id to answer with.
        id: RequestId,
        /// The request.
        request: HttpRequest,
    },
    /// Abort this request and drop its connection; send no more input for it.
    CancelRequest {
        /// Which request.
        id: RequestId,
    },
    /// Run this tool's handler on the call's input and answer with [`Report::ToolFinished`].
    RunTool {
        /// Id to answer with.
        id: ToolRunId,
        /// The call (name and validated input).
        call: ToolUse,
    },
    /// Stop this tool run; its answer, if any, will be ignored.
    CancelTool {
        /// Which run.
        id: ToolRunId,
    },
}

/// A failure below HTTP: connecting, TLS, a reset connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransportError {
    /// What kind of failure.
    pub kind: TransportErrorKind,
    /// The client's message.
    pub message: String,
}

/// Kinds of transport failure. Drivers report what their client says; the machine
/// settles the kind by phase so that every driver agrees: a non-TLS failure before the
/// response head is `Connect`, one after it is `Reset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TransportErrorKind {
    /// Could not connect, or the connection broke before the response head.
    Connect,
    /// TLS handshake or certificate failure: not retried.
    Tls,
    /// The connection broke while the body was being read.
    Reset,
    /// Anything else.
    Other,
    /// The proxy wants credentials it was not given, or refused the ones given (HTTP 407
    /// to `CONNECT`): not retried, sending again cannot help.
    ProxyAuth,
}

impl fmt::Display for TransportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} error: {}", self.kind, self.message)
    }
}

/// What a request or a tool run reports to the machine that started it: the part of
/// every machine's input that drivers produce (fed by the drivers' shell, omni-shell).
#[derive(Debug, Clone, PartialEq)]
pub enum Report<'a> {
    /// The response status and headers arrived.
    ResponseHead {
        /// Which request.
        id: RequestId,
        /// HTTP status.
        status: u16,
        /// Headers (names in any case).
        headers: Vec<(String, String)>,
    },
    /// Body bytes arrived.
    Body {
        /// Which request.
        id: RequestId,
        /// The bytes (borrowed: the machine copies only what it must keep).
        bytes: &'a [u8],
    },
    /// The body ended.
    BodyEnd {
        /// Which request.
        id: RequestId,
    },
    /// The request failed below HTTP.
    TransportFailed {
        /// Which request.
        id: RequestId,
        /// What happened.
        error: TransportError,
    },
    /// A tool run ended.
    ToolFinished {
        /// Which run.
        id: ToolRunId,
        /// Its outcome.
        outcome: ToolOutcome,
    },
}

impl Report<'_> {
    /// The request this report is about (none for a tool run).
    pub fn request(&self) -> Option<RequestId> {
        match self {
            Report::ResponseHead { id, .. }
            | Report::Body { id, .. }
            | Report::BodyEnd { id }
            | Report::TransportFailed { id, .. } => Some(*id),
            Report::ToolFinished { .. } => None,
        }
    }
}

/// Something the driver tells the generate machine.
#[derive(Debug, Clone, PartialEq)]
pub enum Input<'a> {
    /// A request or a tool run reported progress.
    Report(Report<'a>),
    /// The caller cancels the whole call.
    Cancel,
}

/// Why the generate machine refused an input; nothing changed. (The agent's refusals
/// are its [`AgentError`](crate::machines::agent::AgentError)s: every machine refuses with a typed
/// error from `handle_input`.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum InputError {
    /// `Cancel` after the call ended: nothing to cancel.
    Finished,
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Finished => f.write_str("the call has ended: nothing to cancel"),
        }
    }
}

impl std::error::Error for InputError {}

/// Why a call failed.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum GenerateError {
    /// The request could not be built.
    Request(RequestError),
    /// The provider answered with an error (HTTP status or in-stream error event).
    Provider(ProviderError),
    /// The stream could not be decoded to the end.
    Stream(StreamError),
    /// The connection failed.
    Transport(TransportError),
    /// The request took longer than the total timeout.
    Timeout(Duration),
    /// No progress (only keep-alives or nothing) for longer than the stall timeout.
    Stalled(Duration),
    /// A redirect that is not followed (to another origin, a loop ...; see
    /// [`crate::wire::redirect`]): not retried.
    Redirect(crate::wire::redirect::RedirectError),
    /// The response body went past the size limit (in bytes, comments and keep-alives
    /// included); the request was closed. Not retried: the same request would get the
    /// same answer. What arrived up to the limit is kept.
    ResponseTooLarge(u64),
}

impl GenerateError {
    /// True when the same request may succeed if sent again.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Request(_) => false,
            Self::Provider(e) => e.is_retryable(),
            Self::Stream(StreamError::Provider(e)) => e.is_retryable(),
            Self::Stream(StreamError::Incomplete) => true,
            Self::Stream(_) => false,
            Self::Transport(t) => !matches!(t.kind, TransportErrorKind::Tls | TransportErrorKind::ProxyAuth),
            Self::Timeout(_) | Self::Stalled(_) => true,
            Self::Redirect(_) => false,
            Self::ResponseTooLarge(_) => false,
        }
    }
}

impl GenerateEvent {
    /// The new text of a streamed text delta (of any step); `None` for any other event:
    /// `if let Some(text) = event.text_delta() { print!("{text}") }`.
    pub fn text_delta(&self) -> Option<&str> {
        self.stream_event().and_then(StreamEvent::text_delta)
    }

    /// The streamed event, for an event of a step's stream.
    pub fn stream_event(&self) -> Option<&StreamEvent> {
        if let Self::Stream { event, .. } = self {
            Some(event)
        } else {
            None
        }
    }

    /// Whether this event ends the call (`Finished` or `Failed`).
    pub fn is_terminal(&self) -> bool {
        matches!(self, Self::Finished(_) | Self::Failed { .. })
    }
}

impl fmt::Display for GenerateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Request(e) => write!(f, "{e}"),
            Self::Provider(e) => write!(f, "{e}"),
            Self::Stream(e) => write!(f, "{e}"),
            Self::Transport(e) => write!(f, "{e}"),
            Self::Timeout(d) => write!(f, "the request took longer than {d:?}"),
            Self::Stalled(d) => write!(f, "the stream made no progress for {d:?}"),
            Self::Redirect(e) => write!(f, "{e}"),
            Self::ResponseTooLarge(limit) => write!(f, "the response was larger than {limit} bytes"),
        }
    }
}

impl std::error::Error for GenerateError {}

impl GenerateError {
    /// Cuts `secrets` out of every text the error carries: a provider's message, code and
    /// body, a stream error's payload, a transport message, a redirect's location.
    pub fn scrub(&mut self, secrets: &Secrets) {
        if secrets.is_empty() {
            return;
        }
        match self {
            Self::Provider(e) | Self::Stream(StreamError::Provider(e)) => e.scrub(secrets),
            Self::Stream(StreamError::Decode { message, payload }) => {
                secrets.scrub(message);
                secrets.scrub(payload);
            }
            Self::Stream(StreamError::Framing { message }) => secrets.scrub(message),
            Self::Stream(StreamError::WrongFormat { first_event, .. }) => secrets.scrub(first_event),
            Self::Transport(e) => secrets.scrub(&mut e.message),
            Self::Redirect(e) => {
                if let Some(location) = e.location_mut() {
                    secrets.scrub(location);
                }
            }
            // No text of the server's in these.
            Self::Request(_) | Self::Stream(_) | Self::Timeout(_) | Self::Stalled(_) | Self::ResponseTooLarge(_) => {}
        }
    }
}

/// What the application observes.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum GenerateEvent {
    /// A streaming event of step `step` (0-based). Each step ends with `Done`.
    Stream {
        /// Step number.
        step: u32,
        /// The event.
        event: StreamEvent,
    },
    /// A request failed and will be sent again after `delay`.
    Retry {
        /// Step number.
        step: u32,
        /// Retry number, 1-based.
        attempt: u32,
        /// Wait before sending.
        delay: Duration,
        /// What failed (boxed, as every rare large payload: an event stays small to move).
        error: Box<GenerateError>,
    },
    /// The reply is not valid structured output; the model is asked for a correction.
    OutputRetry {
        /// Step of the invalid reply.
        step: u32,
        /// Correction number, 1-based.
        attempt: u32,
        /// What is wrong with the reply (the message the model sees).
        error: String,
    },
    /// A tool call finished (or was refused); this is what the model will see.
    ToolResult {
        /// Step number of the call.
        step: u32,
        /// The result (boxed: see `Retry`).
        result: Box<ToolResult>,
    },
    /// The call finished: the final response (stop reason `cancelled` after a cancel).
    Finished(Box<Response>),
    /// The call failed; `partial` keeps everything received.
    Failed {
        /// What went wrong (boxed: see `Retry`).
        error: Box<GenerateError>,
        /// Everything received until then.
        partial: Box<Response>,
    },
}

#[cfg(test)]
mod scrub_tests {
    use super::*;
    use crate::wire::http::{Header, Method};

    fn request() -> HttpRequest {
        HttpRequest {
            method: Method::Post,
            url: "http://h/v1".into(),
            headers: vec![
                Header::secret("authorization", "Bearer sk-live-0123456789"),
                Header::new("cookie", "session=cookie-value-42; theme=dark"),
                Header::new("x-api-key", "abc"),
                Header::new("accept", "text/event-stream"),
            ],
            body: Vec::new(),
        }
    }

    #[test]
    fn an_echoed_key_is_cut_out_of_a_provider_error() {
        let secrets = Secrets::of_request(&request());
        let body = br#"{"error":{"message":"Incorrect API key provided: sk-live-0123456789 (cookie-value-42)"}}"#;
        let error = crate::Dialect::OpenaiCompletions.parse_error(401, [], body);
        let mut error = GenerateError::Provider(error);
        error.scrub(&secrets);
        let GenerateError::Provider(e) = &error else { unreachable!() };
        for shown in [e.message.as_str(), e.body.as_deref().unwrap_or_default(), &error.to_string(), &format!("{e:?}")]
        {
            assert!(!shown.contains("0123456789") && !shown.contains("cookie-value-42"), "{shown}");
        }
        assert!(e.message.contains("Incorrect API key provided: <redacted>"), "{}", e.message);
        // Short values and ordinary words stay.
        let mut text = "abc text/event-stream dark".to_string();
        secrets.scrub(&mut text);
        assert_eq!(text, "abc text/event-stream dark");
    }

    #[test]
    fn stream_errors_transport_messages_and_locations_are_scrubbed() {
        let secrets = Secrets::of_request(&request());
        let mut in_stream = GenerateError::Stream(StreamError::Provider(ProviderError::new(
            None,
            Some("sk-live-0123456789".into()),
            "bad key sk-live-0123456789",
        )));
        in_stream.scrub(&secrets);
        assert!(!format!("{in_stream:?} {in_stream}").contains("0123456789"));
        let mut decode = GenerateError::Stream(StreamError::decode("bad", "{\"key\":\"sk-live-0123456789\""));
        decode.scrub(&secrets);
        assert!(!format!("{decode:?}").contains("0123456789"));
        let mut redirect = GenerateError::Redirect(crate::wire::redirect::RedirectError::OtherOrigin {
            status: 307,
            location: "http://evil/?k=sk-live-0123456789".into(),
        });
        redirect.scrub(&secrets);
        assert!(!redirect.to_string().contains("0123456789"));
        assert!(!format!("{secrets:?}").contains("0123456789"));
    }

    #[test]
    fn a_key_in_the_query_is_cut_out_of_every_error() {
        let request = HttpRequest { url: "http://h/v1/x?alt=sse&key=AIza%2Fq-0123456789".into(), ..request() };
        let secrets = Secrets::of_request(&request);
        let url = request.url.clone();
        let mut transport = GenerateError::Transport(TransportError {
            kind: TransportErrorKind::Connect,
            message: format!("error sending request for url ({url})"),
        });
        let mut redirect = GenerateError::Redirect(crate::wire::redirect::RedirectError::OtherOrigin {
            status: 307,
            location: "http://evil/?key=AIza/q-0123456789".into(),
        });
        for error in [&mut transport, &mut redirect] {
            error.scrub(&secrets);
            let shown = format!("{error} {error:?}");
            assert!(!shown.contains("q-0123456789"), "{shown}");
        }
    }
}
