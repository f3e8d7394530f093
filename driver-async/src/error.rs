//! The async drivers' error type.

use std::fmt;

use omni_core::agent::AgentError;
use omni_core::client::ClientError;
use omni_core::generate::GenerateError;
use omni_core::Response;

/// Why a call failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The call could not be set up: unknown model, missing key, invalid options.
    Client(ClientError),
    /// The call failed; `partial` keeps everything received.
    Generate {
        /// What went wrong.
        error: GenerateError,
        /// Everything received until then.
        partial: Box<Response>,
    },
    /// The driver could not start (no runtime, bad certificate, TLS or HTTP client setup).
    Setup(String),
    /// An agent refused a command or a configuration (busy, idle, not paused, invalid
    /// history or tools, `init` refused, stopped).
    Agent(AgentError),
    /// The call ended without the structured output asked for: every correction failed,
    /// the reply was cut by the token limit, or the value does not decode as the type.
    Output {
        /// Why (for invalid replies, the last validation error).
        error: String,
        /// The final response, replies and corrections included.
        response: Box<Response>,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Client(e) => write!(f, "{e}"),
            Error::Generate { error, .. } => write!(f, "{error}"),
            Error::Setup(m) => write!(f, "{m}"),
            Error::Agent(e) => write!(f, "{e}"),
            Error::Output { error, .. } => write!(f, "no structured output: {error}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<ClientError> for Error {
    fn from(e: ClientError) -> Self {
        Error::Client(e)
    }
}

impl From<AgentError> for Error {
    fn from(e: AgentError) -> Self {
        Error::Agent(e)
    }
}
