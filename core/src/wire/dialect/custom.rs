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

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{PoisonError, RwLock};

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

/// A registered [`WireFormat`], as [`Dialect::Custom`] holds it: compared, ordered and
/// hashed by name.
#[derive(Clone, Copy)]
pub struct CustomDialect(pub &'static dyn WireFormat);

impl CustomDialect {
    /// The format.
    pub fn format(self) -> &'static dyn WireFormat {
        self.0
    }
}

impl fmt::Debug for CustomDialect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Custom({})", self.0.name())
    }
}

impl PartialEq for CustomDialect {
    fn eq(&self, other: &Self) -> bool {
        self.0.name() == other.0.name()
    }
}

impl Eq for CustomDialect {}

impl PartialOrd for CustomDialect {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for CustomDialect {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.name().cmp(other.0.name())
    }
}

impl std::hash::Hash for CustomDialect {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.name().hash(state);
    }
}

/// Formats by name, for names read back.
static REGISTRY: RwLock<BTreeMap<&'static str, &'static dyn WireFormat>> = RwLock::new(BTreeMap::new());

/// Why a format could not be registered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RegisterError {
    /// The name is a built-in dialect's.
    BuiltIn(String),
    /// Another format has this name.
    Taken(String),
}

impl fmt::Display for RegisterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::BuiltIn(name) => write!(f, "{name:?} is a built-in dialect's name"),
            Self::Taken(name) => write!(f, "another wire format is registered as {name:?}"),
        }
    }
}

impl std::error::Error for RegisterError {}

/// Registers `format` under its name and gives the dialect to put in models. Registering
/// the same format again is fine; another format under a taken name is refused.
pub fn register(format: &'static dyn WireFormat) -> Result<Dialect, RegisterError> {
    let name = format.name();
    if Dialect::ALL.iter().any(|d| d.name() == name) {
        return Err(RegisterError::BuiltIn(name.into()));
    }
    let mut registry = REGISTRY.write().unwrap_or_else(PoisonError::into_inner);
    match registry.get(name) {
        Some(known) if !std::ptr::addr_eq(*known as *const dyn WireFormat, format as *const dyn WireFormat) => {
            Err(RegisterError::Taken(name.into()))
        }
        _ => {
            registry.insert(name, format);
            Ok(Dialect::Custom(CustomDialect(format)))
        }
    }
}

/// The registered format named `name`.
pub(super) fn lookup(name: &str) -> Option<Dialect> {
    let registry = REGISTRY.read().unwrap_or_else(PoisonError::into_inner);
    registry.get(name).map(|format| Dialect::Custom(CustomDialect(*format)))
}
