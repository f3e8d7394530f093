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
//!
//! ## Features
//!
//! The same names in every driver:
//!
//! | feature | default | what it does |
//! |---|---|---|
//! | `jsonschema` | yes | tools' and structured output's schemas checked by the `jsonschema` crate; off, by omni-protocol's built-in validator of the common subset (a schema using another keyword, such as `pattern`, is refused when the call starts) |
//! | `rustls-webpki-roots` | yes | https through rustls (ring), trusting Mozilla's roots (webpki-roots) |
//! | `rustls-native-roots` | no | https through rustls, trusting the operating system's roots (rustls-native-certs, read once per process); with `rustls-webpki-roots`, both |
//! | `native-tls` | no | https through the platform's TLS (reqwest's `native-tls`: OpenSSL on Linux) and its roots; a rustls feature, when on too, wins |
//! | `schemars` | yes | `Tool::from_type` and `Call::generate_object` |
//!
//! With no TLS feature the driver speaks plain http only: an https request fails with a
//! `Tls` transport error saying which features to enable. The smallest build:
//! `default-features = false, features = ["rustls-webpki-roots"]`.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod process;
mod runtime;
mod transport;

pub use omni_shell::exports::*;
pub use runtime::{Tokio, TokioTask};
pub use transport::Reqwest;

omni_shell::driver_types!(Tokio);
