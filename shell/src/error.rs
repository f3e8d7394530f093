//! The error type every driver returns (each re-exports it as its `Error`): one type,
//! so code written against one driver moves to another unchanged.

use std::fmt;

use omni_protocol::agent::AgentError;
use omni_protocol::client::{ClientError, StartError};
use omni_protocol::generate::GenerateError;
use omni_protocol::session::SessionError;
use omni_protocol::session::StoreError;
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
    Setup(SetupError),
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
    Manager(omni_protocol::manager::ManagerError),
    /// An MCP server could not be started or reached, or an operation on it failed.
    Mcp(crate::mcp::McpFailure),
    /// The call's task stopped before it gave its result: its runtime shut down, or the
    /// task was dropped.
    Stopped,
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
            Self::Setup(e) => write!(f, "{e}"),
            Self::Stopped => f.write_str("the call stopped before it gave a response (its runtime shut down?)"),
            Self::Agent(e) => write!(f, "{e}"),
            Self::Session(e) => write!(f, "{e}"),
            Self::Store(e) => write!(f, "{e}"),
            Self::Manager(e) => write!(f, "{e}"),
            Self::Mcp(e) => write!(f, "{e}"),
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
            Self::Setup(e) => e.source(),
            Self::Mcp(e) => std::error::Error::source(e),
            Self::Stopped | Self::Output { .. } => None,
        }
    }
}

/// Why a driver could not start (see [`Error::Setup`]).
#[derive(Debug)]
#[non_exhaustive]
pub enum SetupError {
    /// The driver's runtime is not running where it was called (omni-tokio outside a
    /// tokio runtime).
    NoRuntime {
        /// The driver, e.g. `omni-tokio`.
        driver: &'static str,
        /// The runtime it needs, e.g. `tokio`.
        runtime: &'static str,
    },
    /// A thread could not be started (the process is out of threads or memory).
    Thread(std::io::Error),
    /// The HTTP client could not be built: a root certificate that is not valid PEM or
    /// not usable, a TLS or proxy setting its HTTP stack refused.
    HttpClient {
        /// What the HTTP stack said.
        message: String,
    },
}

impl fmt::Display for SetupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoRuntime { driver, runtime } => {
                write!(f, "{driver} needs a running {runtime} runtime where it is called")
            }
            Self::Thread(_) => f.write_str("could not start a thread"),
            Self::HttpClient { message } => write!(f, "the HTTP client could not be set up: {message}"),
        }
    }
}

impl std::error::Error for SetupError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Thread(e) => Some(e),
            Self::NoRuntime { .. } | Self::HttpClient { .. } => None,
        }
    }
}

impl SetupError {
    /// An HTTP stack's refusal to build a client, as an [`Error`].
    pub fn http_client(message: impl Into<String>) -> Error {
        Error::Setup(Self::HttpClient { message: message.into() })
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
    use omni_protocol::manager::ManagerError;
    use omni_protocol::session::StoreErrorKind;

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

    /// What a call returns is moved at every `?` and await: the rare big parts are boxed
    /// (a response's message origin, an error's partial response), so that it stays
    /// within these sizes on 64-bit targets.
    #[test]
    #[cfg(target_pointer_width = "64")]
    fn a_calls_result_stays_small() {
        use std::mem::size_of;
        assert!(size_of::<omni_protocol::Message>() <= 64, "{}", size_of::<omni_protocol::Message>());
        assert!(size_of::<Error>() <= 128, "{}", size_of::<Error>());
        let result = size_of::<Result<Response, Error>>();
        assert!(result <= 320, "{result}");
    }

    #[test]
    fn a_chain_says_each_message_once() {
        let store = StoreError::new(StoreErrorKind::NotFound, "s1", "no such session");
        let errors = [
            Error::Store(store.clone()),
            Error::Manager(ManagerError::Store(store)),
            Error::Session(SessionError::ReadOnly),
            Error::Agent(AgentError::Terminated),
            Error::Setup(SetupError::NoRuntime { driver: "omni-tokio", runtime: "tokio" }),
            Error::Setup(SetupError::Thread(std::io::Error::other("out of threads"))),
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
