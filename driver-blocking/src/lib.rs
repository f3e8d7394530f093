//! # omni-blocking
//!
//! The omni driver for plain threads: blocking HTTP/1.1 (omni-shell's exchange on
//! ureq-proto over std's sockets, rustls), std threads, and an [`Iterator`] of events. No
//! async runtime.
//!
//! The core ([`omni_protocol`], re-exported here) decides everything, and omni-shell's one
//! call loop and agent loop drive it; this crate gives that loop a runtime of threads
//! (`runtime.rs`: every task a thread running its future, async-io's timer for
//! deadlines) and a transport over std's sockets (`transport/`: the body streamed as it arrives,
//! connections kept alive between requests), runs tool handlers on a bounded pool of
//! threads with panics caught, and hands the events out through [`TextStream`], an
//! [`Iterator`].
//!
//! Threads: one for the loop of each call or agent, one per HTTP request (its exchange
//! blocks on it), four per stdio MCP server (its connection's loop, and one for each of
//! the child's pipes, which block), and the tool threads (the loop itself waits for their answers), bounded
//! for the whole process ([`MAX_RUNNING_TOOLS`] at once, queued beyond; at most
//! [`MAX_TOOL_THREADS`] alive counting handlers that ignored a cancel). Dropping a
//! [`TextStream`] (or [`TextStream::cancel`], or a [`CancelHandle`] from another
//! thread) cancels the call: the request's socket is shut down (a read blocked on a
//! silent server returns at once) and
//! running tools get their [`CancelToken`] tripped. A tool thread cannot be killed;
//! its late answer is ignored.
//!
//! ```no_run
//! use omni_blocking::{Client, Options, Tool, ToolOutput};
//! use omni_blocking::GenerateEvent;
//! use omni_blocking::StreamEvent;
//! use serde_json::json;
//!
//! let client = Client::new()?; // keys from ANTHROPIC_API_KEY, OPENAI_API_KEY, ...
//! let weather = Tool::new(
//!     "get_weather",
//!     "The weather in a city",
//!     json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
//!     |input| Ok(ToolOutput::text(format!("sunny in {}", input["city"]))),
//! );
//! let stream = client.call("anthropic:claude-sonnet-4-5", "Weather in Paris?").tool(weather).stream()?;
//! for event in stream {
//!     if let GenerateEvent::Stream { event: StreamEvent::TextDelta { delta, .. }, .. } = event {
//!         print!("{delta}");
//!     }
//! }
//! let answer = client.generate_text("anthropic:claude-sonnet-4-5", "Say hi")?;
//! println!("{}", answer.text());
//! # Ok::<(), omni_blocking::Error>(())
//! ```
//!
//! A stateful conversation is an [`Agent`]: `client.agent(model).start()?` runs the
//! core's agent on its own thread; its handle's methods ([`Agent::prompt`],
//! [`Agent::cancel`], [`Agent::set_state`], ...) block until the agent answers, and
//! [`Agent::subscribe`] gives a snapshot plus a blocking [`Iterator`] of every later
//! [`AgentEvent`]. Dropping the last handle stops the agent and its work.
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
//! | `rustls-webpki-roots` | yes | https through rustls (ring), trusting Mozilla's roots |
//! | `rustls-native-roots` | no | https through rustls, trusting the operating system's roots (rustls-native-certs, read once per process); with `rustls-webpki-roots`, both |
//! | `native-tls` | no | https through the platform's TLS (the `native-tls` crate: OpenSSL on Linux) and its roots; root certificates added to the client replace the system's there; a rustls feature, when on too, wins |
//! | `schemars` | yes | `Tool::from_type` and `Call::generate_object` |
//!
//! With no TLS feature the driver speaks plain http only: an https request fails with a
//! `Tls` transport error saying which features to enable. The smallest build:
//! `default-features = false, features = ["rustls-webpki-roots"]`.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

/// Methods that wait (the handle's own `wait`) for the shell handle's method of the same
/// name, given the same arguments: the agent's and the session's blocking handles.
macro_rules! waiting {
    ($($(#[$doc:meta])* fn $name:ident($($arg:ident: $ty:ty),*) -> $out:ty;)*) => {$(
        $(#[$doc])*
        pub fn $name(&self, $($arg: $ty),*) -> Result<$out, Error> {
            self.wait(self.inner.$name($($arg),*))
        }
    )*};
}

/// Waits for a handle's answer on this thread; refused on `own`, the thread of the agent
/// or session itself (a callback's), where waiting for the answer would wait for itself.
/// The agent's and the session's handles wait through this.
fn wait_unless_on<T>(
    own: std::thread::ThreadId,
    answer: impl std::future::Future<Output = Result<T, Error>>,
) -> Result<T, Error> {
    if std::thread::current().id() == own {
        return Err(Error::Agent(AgentError::CalledFromAgent));
    }
    futures_lite::future::block_on(answer)
}

mod agent_handle;
mod blocking_client;
mod call;
mod manager_handle;
mod mcp_handle;
mod process;
mod runtime;
mod session_handle;
mod sleep;
mod subscription;
mod tool_pool;
mod tools;
mod transport;

// The names every driver re-exports (omni-shell's one list); this crate's own waiting
// handles below take the place of the async ones under the same names.
pub use omni_shell::exports::*;

pub use agent_handle::{Agent, AgentBuilder, StateChange, WeakAgent};
pub use blocking_client::{Client, ClientBuilder};
pub use call::{Call, CancelHandle, TextStream};
pub use manager_handle::{ManagerBuilder, Opened, SessionManager, SessionOptions, Whereabouts};
pub use mcp_handle::{McpServer, McpServerBuilder};
pub use session_handle::{Session, SessionBuilder};
pub use subscription::{Subscriber, Subscription};
pub use tool_pool::{live_tool_threads, MAX_RUNNING_TOOLS, MAX_TOOL_THREADS};
pub use tools::{CancelToken, Tool, ToolPool};

/// Longest a name resolution, and then a TCP connect, may take; everything else is timed
/// by the core.
pub const CONNECT_TIMEOUT: std::time::Duration = transport::CONNECT_TIMEOUT;
