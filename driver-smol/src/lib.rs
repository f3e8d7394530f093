//! # omni-smol
//!
//! The smol driver of omni: the shell (omni-shell) runs the pure core's machines on smol
//! tasks and sends requests with a small HTTP/1.1 client (ureq-proto's sans-IO framing
//! over smol's TCP, futures-rustls for https, connections kept alive per client); the
//! application gets an async [`Stream`](futures_core::Stream) of events plus a future of
//! the final response. This crate only says how to run a task and sleep on smol
//! ([`Smol`]) and how to send a request ([`Http1`]). No tokio crate is involved.
//!
//! ```no_run
//! # fn demo() -> Result<(), omni_smol::Error> {
//! use omni_smol::{Client, Options};
//!
//! let client = Client::builder().build()?; // keys from the environment
//! let response = smol::block_on(client.generate_text("anthropic:claude-sonnet-4-5", "Say hi"))?;
//! println!("{}", response.text());
//! # Ok(()) }
//! ```
//!
//! Its tasks run on smol's global executor; `client.on_executor(executor)` moves them to
//! an `Arc<smol::Executor>` the application drives. With the `schemars` feature, types
//! give the schemas: `Tool::from_type` (the handler gets the decoded input) and
//! `Call::generate_object` (structured output decoded into the type, with corrections
//! asked for invalid replies).
//!
//! ## Features
//!
//! The same names as in the other drivers, except `native-tls`: this driver's own HTTP/1.1
//! client speaks TLS through futures-rustls only, so it has no `native-tls`.
//!
//! | feature | default | what it does |
//! |---|---|---|
//! | `jsonschema` | yes | tools' and structured output's schemas checked by the `jsonschema` crate; off, by omni-protocol's built-in validator of the common subset (a schema using another keyword, such as `pattern`, is refused when the call starts) |
//! | `rustls-webpki-roots` | yes | https through rustls (ring), trusting Mozilla's roots |
//! | `rustls-native-roots` | no | https through rustls, trusting the operating system's roots (rustls-native-certs, read once per process); with `rustls-webpki-roots`, both |
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
pub use runtime::{Smol, SmolTask};
pub use transport::Http1;

omni_shell::driver_types!(Smol);
