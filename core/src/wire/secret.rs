//! Credentials cut out of what a call shows: a server that echoes the key (or a secret
//! header) back in its error body must not put it in the error the application logs.
//!
//! The values come from the request's sensitive headers ([`crate::wire::http::is_secret_name`]
//! decides which those are) and its URL's secret query parameters (an `Auth::Query` key,
//! [`crate::wire::query::is_secret_query_name`]); every place a call's error is made passes through
//! [`Secrets::scrub_error`] once (the generate machine does it where an attempt fails).

use std::fmt;

use crate::machines::generate::GenerateError;
use crate::wire::http::HttpRequest;
use crate::wire::query::percent_decode;
use crate::StreamError;

/// What replaces a secret in text.
pub const REDACTED: &str = "<redacted>";

/// A whole header value shorter than this is not cut out of text: a three-letter
/// "secret" would blank out every word containing it and hide nothing worth hiding.
const MIN_WHOLE: usize = 4;
/// A part of a value (the token after `Bearer`, a cookie's value) is cut out from this
/// length on.
const MIN_PART: usize = 8;

/// The secret strings of one request. Its `Debug` shows only how many there are.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secrets(Vec<String>);

impl fmt::Debug for Secrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secrets({} redacted)", self.0.len())
    }
}

impl Secrets {
    /// The values of `request`'s sensitive headers, and their long parts (the token of
    /// `Bearer <token>`, each cookie's value), and of its URL's secret query parameters
    /// (as written and decoded), longest first.
    pub fn of_request(request: &HttpRequest) -> Self {
        let mut secrets: Vec<String> = Vec::new();
        for value in request.secret_values() {
            if value.len() >= MIN_WHOLE {
                secrets.push(value.to_string());
            }
            let parts = value.split([' ', '\t', ';', ',', '=']).map(str::trim).filter(|p| p.len() >= MIN_PART);
            secrets.extend(parts.map(str::to_string));
        }
        // A key in the query (`Auth::Query`): as written in the URL, and decoded.
        for value in request.secret_query_values() {
            for value in [value.to_string(), percent_decode(value).into_owned()] {
                if value.len() >= MIN_WHOLE {
                    secrets.push(value);
                }
            }
        }
        secrets.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        secrets.dedup();
        Self(secrets)
    }

    /// True when there is nothing to cut.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Replaces every secret in `text` with [`REDACTED`].
    pub fn scrub(&self, text: &mut String) {
        for secret in &self.0 {
            if text.contains(secret.as_str()) {
                *text = text.replace(secret.as_str(), REDACTED);
            }
        }
    }

    /// Scrubs every text a call's error carries: a provider's message, code and body, a
    /// stream error's payload, a transport message, a redirect's location.
    pub fn scrub_error(&self, error: &mut GenerateError) {
        if self.is_empty() {
            return;
        }
        match error {
            GenerateError::Provider(e) | GenerateError::Stream(StreamError::Provider(e)) => e.scrub(self),
            GenerateError::Stream(StreamError::Decode { message, payload }) => {
                self.scrub(message);
                self.scrub(payload);
            }
            GenerateError::Stream(StreamError::Framing { message }) => self.scrub(message),
            GenerateError::Stream(StreamError::WrongFormat { first_event, .. }) => self.scrub(first_event),
            GenerateError::Transport(e) => self.scrub(&mut e.message),
            GenerateError::Redirect(e) => {
                if let Some(location) = e.location_mut() {
                    self.scrub(location);
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::http::{Header, Method};
    use crate::ProviderError;

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
        secrets.scrub_error(&mut error);
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
        secrets.scrub_error(&mut in_stream);
        assert!(!format!("{in_stream:?} {in_stream}").contains("0123456789"));
        let mut decode = GenerateError::Stream(StreamError::decode("bad", "{\"key\":\"sk-live-0123456789\""));
        secrets.scrub_error(&mut decode);
        assert!(!format!("{decode:?}").contains("0123456789"));
        let mut redirect = GenerateError::Redirect(crate::wire::redirect::RedirectError::OtherOrigin {
            status: 307,
            location: "http://evil/?k=sk-live-0123456789".into(),
        });
        secrets.scrub_error(&mut redirect);
        assert!(!redirect.to_string().contains("0123456789"));
        assert!(!format!("{secrets:?}").contains("0123456789"));
    }

    #[test]
    fn a_key_in_the_query_is_cut_out_of_every_error() {
        let request = HttpRequest { url: "http://h/v1/x?alt=sse&key=AIza%2Fq-0123456789".into(), ..request() };
        let secrets = Secrets::of_request(&request);
        let url = request.url.clone();
        let mut transport = GenerateError::Transport(crate::machines::generate::TransportError {
            kind: crate::machines::generate::TransportErrorKind::Connect,
            message: format!("error sending request for url ({url})"),
        });
        let mut redirect = GenerateError::Redirect(crate::wire::redirect::RedirectError::OtherOrigin {
            status: 307,
            location: "http://evil/?key=AIza/q-0123456789".into(),
        });
        for error in [&mut transport, &mut redirect] {
            secrets.scrub_error(error);
            let shown = format!("{error} {error:?}");
            assert!(!shown.contains("q-0123456789"), "{shown}");
        }
    }
}
