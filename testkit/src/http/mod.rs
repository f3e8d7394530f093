//! The HTTP level of the mock: a loopback HTTP/1.1 server ([`MockServer`]) that answers
//! each request with the next scripted [`Reply`] (status, headers, body pieces with
//! waits between them, a cut, a hang) and records what it received ([`RecordedRequest`]).
//! [`crate::MockProvider`] writes these replies for you in a provider's format; use this
//! level for bytes of your own (a custom wire format, a malformed stream).

mod conn;
mod server;
#[cfg(feature = "tls")]
pub mod tls;

use std::fmt;
use std::time::Duration;

use omni_protocol::transport::{is_secret_name, redacted_url};

pub use server::MockServer;

/// One scripted piece of a response body.
#[derive(Debug, Clone, PartialEq)]
pub enum BodyStep {
    /// Send these bytes.
    Bytes(Vec<u8>),
    /// Wait before the next step.
    Wait(Duration),
    /// The connection breaks here.
    Reset,
    /// Nothing more is ever sent (the connection stays open).
    Hang,
}

/// What the scripted provider does with one request.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// An HTTP response.
    Http {
        /// Status.
        status: u16,
        /// Headers.
        headers: Vec<(String, String)>,
        /// Body script; the body ends after the last step unless it resets or hangs.
        body: Vec<BodyStep>,
    },
    /// The connection cannot be made.
    ConnectFail,
}

impl Reply {
    /// A 200 response with the body in chunks of `chunk` bytes, `gap` apart.
    pub fn stream(body: &[u8], chunk: usize, gap: Duration) -> Self {
        let mut steps = Vec::new();
        for (i, piece) in body.chunks(chunk.max(1)).enumerate() {
            if i > 0 && !gap.is_zero() {
                steps.push(BodyStep::Wait(gap));
            }
            steps.push(BodyStep::Bytes(piece.to_vec()));
        }
        Self::Http { status: 200, headers: vec![("content-type".into(), "text/event-stream".into())], body: steps }
    }

    /// An error response with a JSON body.
    pub fn error(status: u16, headers: &[(&str, &str)], body: &str) -> Self {
        Self::Http {
            status,
            headers: headers.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect(),
            body: vec![BodyStep::Bytes(body.as_bytes().to_vec())],
        }
    }
}

/// A request as the server received it.
///
/// Printing it (`Debug`) or listing [`headers`](Self::headers) shows the value of every
/// header that carries a credential (`authorization`, `x-api-key`, `cookie`, any name
/// omni treats as secret) as `<redacted>`, and a secret in the query likewise, so a
/// failing test's output holds no key; [`header`](Self::header) gives the value itself,
/// to assert that the right key was sent.
#[derive(Clone, PartialEq, Eq)]
pub struct RecordedRequest {
    /// Method.
    pub method: String,
    /// Path and query.
    pub path: String,
    /// Headers, names lower-cased, in order.
    headers: Vec<(String, String)>,
    /// Body bytes.
    pub body: Vec<u8>,
}

/// What a secret's value is shown as.
pub const REDACTED: &str = "<redacted>";

impl RecordedRequest {
    pub(crate) fn new(method: String, path: String, headers: Vec<(String, String)>, body: Vec<u8>) -> Self {
        Self { method, path, headers, body }
    }

    /// The value of the first header with this name (a secret's too: compare it, do
    /// not print it).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// Every header, names lower-cased, in order, secrets' values as [`REDACTED`].
    pub fn headers(&self) -> Vec<(&str, &str)> {
        self.headers.iter().map(|(n, v)| (n.as_str(), if is_secret_name(n) { REDACTED } else { v.as_str() })).collect()
    }

    /// The headers as they were sent, secrets' values included: to send the request again
    /// elsewhere, never to print.
    pub fn raw_headers(&self) -> &[(String, String)] {
        &self.headers
    }

    /// Whether any header's value contains `needle` (a secret's too), e.g. to check
    /// that a key went only where it belongs.
    pub fn any_header_contains(&self, needle: &str) -> bool {
        self.headers.iter().any(|(_, v)| v.contains(needle))
    }

    /// The body as JSON, or `None` when it is not JSON.
    pub fn json(&self) -> Option<serde_json::Value> {
        serde_json::from_slice(&self.body).ok()
    }
}

impl fmt::Debug for RecordedRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecordedRequest")
            .field("method", &self.method)
            .field("path", &redacted_url(&self.path))
            .field("headers", &self.headers())
            .field("body", &String::from_utf8_lossy(&self.body))
            .finish()
    }
}
