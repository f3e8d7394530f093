//! The error type every driver returns (each re-exports it as its `Error`): one type,
//! so code written against one driver moves to another unchanged.

use std::fmt;

use omni_protocol::machines::agent::AgentError;
use omni_protocol::machines::client::{ClientError, StartError};
use omni_protocol::machines::generate::GenerateError;
use omni_protocol::machines::session::machine::SessionError;
use omni_protocol::machines::session::store::StoreError;
use omni_protocol::Response;

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
    /// The driver could not start: no runtime, the HTTP client or TLS could not be
    /// set up, a bad certificate, a thread that could not be spawned.
    Setup(String),
    /// An agent refused a command or a configuration (busy, idle, not paused, invalid
    /// history or tools, `init` refused, stopped).
    Agent(AgentError),
    /// A session refused a command (busy, paused, no such node, not a user or an
    /// assistant message) or a store's contents could not make one.
    Session(SessionError),
    /// A session's store could not create, read or find it (a store write failing later
    /// is an event of the session's, never an error that stops it).
    Store(StoreError),
    /// A session manager refused a request (a session that exists already, the most
    /// sessions running, shutting down) or could not start a session.
    Manager(omni_protocol::machines::manager::ManagerError),
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
            Self::Client(e) => write!(f, "{e}"),
            Self::Generate { error, .. } => write!(f, "{error}"),
            Self::Setup(m) => write!(f, "{m}"),
            Self::Agent(e) => write!(f, "{e}"),
            Self::Session(e) => write!(f, "{e}"),
            Self::Store(e) => write!(f, "{e}"),
            Self::Manager(e) => write!(f, "{e}"),
            Self::Output { error, .. } => write!(f, "no structured output: {error}"),
        }
    }
}

/// Transparent: the message is the inner error's, and the cause is the inner error's
/// cause, so that a reporter walking the chain (`{:#}`, `anyhow`, `eyre`) prints each
/// message once (returning the inner error itself would print its message twice).
impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Client(e) => e.source(),
            Self::Generate { error, .. } => error.source(),
            Self::Agent(e) => e.source(),
            Self::Session(e) => e.source(),
            Self::Store(e) => e.source(),
            Self::Manager(e) => e.source(),
            Self::Setup(_) | Self::Output { .. } => None,
        }
    }
}

impl From<ClientError> for Error {
    fn from(e: ClientError) -> Self {
        Self::Client(e)
    }
}

impl From<StartError> for Error {
    fn from(e: StartError) -> Self {
        match e {
            StartError::Client(e) => Self::Client(e),
            StartError::Refused { error, partial } => Self::Generate { error, partial },
        }
    }
}

impl From<AgentError> for Error {
    fn from(e: AgentError) -> Self {
        Self::Agent(e)
    }
}

impl From<SessionError> for Error {
    fn from(e: SessionError) -> Self {
        match e {
            SessionError::Agent(e) => Self::Agent(e),
            other => Self::Session(other),
        }
    }
}

impl From<StoreError> for Error {
    fn from(e: StoreError) -> Self {
        Self::Store(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use omni_protocol::machines::manager::ManagerError;
    use omni_protocol::machines::session::store::StoreErrorKind;

    /// Every message of an error's chain, outermost first.
    fn chain(error: &dyn std::error::Error) -> Vec<String> {
        let mut messages = vec![error.to_string()];
        let mut cause = error.source();
        while let Some(e) = cause {
            messages.push(e.to_string());
            cause = e.source();
        }
        messages
    }

    #[test]
    fn a_chain_says_each_message_once() {
        let store = StoreError::new(StoreErrorKind::NotFound, "s1", "no such session");
        let errors = [
            Error::Store(store.clone()),
            Error::Manager(ManagerError::Store(store)),
            Error::Session(SessionError::ReadOnly),
            Error::Agent(AgentError::Terminated),
            Error::Setup("no runtime".into()),
        ];
        for error in &errors {
            let messages = chain(error);
            for pair in messages.windows(2) {
                assert!(!pair[1].contains(&pair[0]) && !pair[0].contains(&pair[1]), "{messages:?}");
            }
            assert!(!messages[0].is_empty());
        }
    }
}
