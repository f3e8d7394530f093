//! # omni-tokio
//!
//! The tokio driver of omni: the shell (omni-shell) runs the pure core's machines on tokio
//! tasks and sends requests with reqwest (rustls); the application gets an async
//! [`Stream`](futures_core::Stream) of events plus a future of the final response. This
//! crate only says how to run a task and sleep on tokio ([`Tokio`]) and how to send a
//! request with reqwest ([`Reqwest`]).
//!
//! ```no_run
//! # async fn demo() -> Result<(), omni_tokio::Error> {
//! use omni_tokio::{Client, Options};
//!
//! let client = Client::builder().build()?; // keys from the environment
//! let response = client.generate_text("anthropic:claude-sonnet-4-5", "Say hi").await?;
//! println!("{}", response.text());
//! # Ok(()) }
//! ```
//!
//! With the `schemars` feature, types give the schemas: `Tool::from_type` (the handler
//! gets the decoded input) and `Call::generate_object` (structured output decoded into
//! the type, with corrections asked for invalid replies).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod runtime;
mod transport;

pub use omni_shell::exports::*;
pub use runtime::{Tokio, TokioTask};
pub use transport::Reqwest;

omni_shell::driver_types!(Tokio);
