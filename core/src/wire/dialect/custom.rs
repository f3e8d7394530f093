//! User dialects: a wire format omni does not know, written by the application and used
//! wherever a built-in dialect is (a model's `dialect`, the catalogue by name, the generate
//! loop, the agent, sessions): [`Dialect::Custom`].
//!
//! A format is a [`WireFormat`]: it builds the dialect part of a request (path, headers,
//! JSON body; URL assembly, keys, extra headers, option checks, extra options and
//! provider hooks are omni's, as for every dialect), names its framing (SSE, NDJSON or a
//! whole JSON body),
//! and makes one [`WireStream`] per response: explicit per-stream state that turns one
//! decoded frame into [`Delta`]s. A stream is complete once it has given a stop reason
//! (`Delta::stop`); one that ends without is incomplete, as with every dialect.
//!
//! Formats are `&'static` (a `static`, or `Box::leak` once at start-up) and registered by
//! name ([`register`]), so that a name read back (a catalogue file, a session's stored
//! model) finds the same format. The five built-ins keep their own dispatch: nothing here
//! is on their path.

use std::any::Any;
use std::fmt;

use super::{common, Dialect, DialectRequest, RequestSpec};
use crate::data::error::{ProviderError, RequestError, StreamError};
use crate::data::response::Warning;
use crate::wire::delta::Delta;
use crate::wire::framing::{Frame, Framing};

/// A wire format of the application's (see the module's doc).
pub trait WireFormat: Send + Sync + fmt::Debug {
    /// Its name: what catalogue files and stored models call it. Must not be a built-in
    /// dialect's.
    fn name(&self) -> &'static str;

    /// How response bodies are framed: SSE, NDJSON, or one whole JSON document
    /// ([`Framing::Json`], for a server that does not stream: its one frame comes when the
    /// body ends).
    fn framing(&self) -> Framing;

    /// The dialect part of the request for `spec` (path under the provider's base URL,
    /// headers of the format's own, the JSON body); what it cannot send goes to
    /// `warnings`.
    fn build_request(
        &self,
        spec: &RequestSpec<'_>,
        warnings: &mut Vec<Warning>,
    ) -> Result<DialectRequest, RequestError>;

    /// Fresh state for one response's stream.
    fn new_stream(&self) -> Box<dyn WireStream>;

    /// The typed error of a non-2xx response. The default reads the common shapes
    /// (`{"error": {"message", "type"|"code"}}`, `{"error": "..."}`, `{"message"}`).
    fn parse_error(&self, status: u16, headers: &[(&str, &str)], body: &[u8]) -> ProviderError {
        let (code, message) = common::error_code_and_message(body);
        let message = message.unwrap_or_else(|| common::fallback_error_message(status, body));
        ProviderError::new(Some(status), code, message).with_body(body).with_retry_after_from(headers.iter().copied())
    }
}

/// One response's stream state of a [`WireFormat`].
pub trait WireStream: Send + fmt::Debug {
    /// One decoded frame: its deltas go to `out`. An event the format does not know
    /// yields nothing; a payload that is not what the format documents is a
    /// [`StreamError::Decode`].
    fn event(&mut self, frame: &Frame<'_>, out: &mut Vec<Delta>) -> Result<(), StreamError>;

    /// The body ended: anything held back.
    fn finish(&mut self, out: &mut Vec<Delta>) {
        let _ = out;
    }
}

// The custom dialect's identity, its registry and its refusals are data (a model names its
// format); the format itself is opened here.
pub(crate) use crate::data::dialect::{CustomDialect, RegisterError};

impl CustomDialect {
    /// The format.
    pub fn format(self) -> &'static dyn WireFormat {
        // Only `register` below makes a custom dialect, from a `&'static dyn WireFormat`.
        match self.erased().downcast_ref::<&'static dyn WireFormat>() {
            Some(format) => *format,
            None => unreachable!("a custom dialect holds a wire format"),
        }
    }
}

/// Registers `format` under its name and gives the dialect to put in models. Registering
/// the same format again is fine; another format under a taken name is refused.
pub fn register(format: &'static dyn WireFormat) -> Result<Dialect, RegisterError> {
    let same = |known: &'static (dyn Any + Send + Sync)| {
        known
            .downcast_ref::<&'static dyn WireFormat>()
            .is_some_and(|known| std::ptr::addr_eq(*known as *const dyn WireFormat, format as *const dyn WireFormat))
    };
    // Data holds the format without knowing its type: the reference itself is kept once,
    // for the life of the process, as the format is.
    let erased = || -> &'static (dyn Any + Send + Sync) { Box::leak(Box::new(format)) };
    crate::data::dialect::register(format.name(), same, erased)
}
