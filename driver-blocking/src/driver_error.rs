//! The driver's error type.

use std::fmt;

use omni_core::client::ClientError;
use omni_core::generate::GenerateError;
use omni_core::Response;

/// Why a call failed. No variant ever carries an API key.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The call could not be set up: unknown model, missing key, invalid options.
    Client(ClientError),
    /// The call failed; `partial` keeps everything received until then.
    Generate {
        /// What went wrong.
        error: GenerateError,
        /// Everything received until then.
        partial: Box<Response>,
    },
    /// The driver could not start: the HTTP client could not be built, a bad
    /// certificate, a thread that could not be spawned.
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

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Client(e) => Some(e),
            Error::Generate { error, .. } => Some(error),
            Error::Setup(_) => None,
        }
    }
}

impl From<ClientError> for Error {
    fn from(e: ClientError) -> Self {
        Error::Client(e)
    }
}
