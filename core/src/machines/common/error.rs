//! Why a call fails: the one error of the generate machine, the agent and the request
//! machine under both ([`GenerateError`]), and the failures below HTTP a driver reports
//! ([`TransportError`]).

use std::fmt;
use std::time::Duration;

use crate::data::error::{ProviderError, RequestError, StreamError};
use crate::data::secret::Secrets;

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
    /// [`RedirectError`](crate::wire::redirect::RedirectError)): not retried.
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::http::{Header, HttpRequest, Method};

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
        let error = crate::data::dialect::Dialect::OpenaiCompletions.parse_error(401, [], body);
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
