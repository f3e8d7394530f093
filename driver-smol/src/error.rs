//! The driver's error type.

use std::fmt;

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
    /// The driver could not start (bad certificate, TLS setup).
    Setup(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Client(e) => write!(f, "{e}"),
            Error::Generate { error, .. } => write!(f, "{error}"),
            Error::Setup(m) => write!(f, "{m}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<ClientError> for Error {
    fn from(e: ClientError) -> Self {
        Error::Client(e)
    }
}
