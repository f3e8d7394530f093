//! The vocabulary every machine and every driver shares: what a machine asks of its
//! driver ([`Effect`]), what the driver reports ([`Report`], [`TransportError`]), the ids
//! that tie them ([`RequestId`], [`ToolRunId`]), and why a call fails ([`GenerateError`],
//! the error of the generate machine and of the agent alike). It lives apart from any one
//! machine so that the request and tool-round sub-machines, the generate machine, the
//! agent, the session and the drivers all take it from here and none from another.

#![warn(clippy::wildcard_enum_match_arm)]

mod effect;
mod error;

pub use effect::{Effect, Report, RequestId, ToolOutcome, ToolRunId};
pub use error::{GenerateError, TransportError, TransportErrorKind};
