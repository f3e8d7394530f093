//! # omni-shell
//!
//! Everything omni's drivers share, runtime-neutral: the [`Client`] and its builder
//! ([`ClientBuilder`]), the call builder and its event stream ([`Call`], [`TextStream`]),
//! tools with async handlers ([`AsyncTool`]) or with plain closures run where a driver
//! says ([`SyncTool`] over a [`RunSync`]), the agent builder and handle
//! ([`AgentBuilder`], [`Agent`], [`Subscription`]) with the agent's host ([`Host`]), the
//! error type, and the loops that drive the machines. A driver only implements
//! [`Runtime`] (run a task, sleep, the clock) and [`Transport`] (send one request), names
//! them in a [`Driver`], and re-exports this crate under its own names (`omni_tokio::Client`
//! is `Client<Tokio>`). omni-blocking wraps these handles in synchronous ones that wait
//! for their futures on the caller's thread. Applications use the drivers.
//!
//! ```text
//!  Client ─► Call::stream ─► drive_call: run by the stream's poll, ──┐  one pass, drive.rs:
//!                            beside a watchdog task                  │  effects out, events
//!  Client ─► AgentBuilder::start ─► drive_agent: a task ─────────────┤  out, deadlines, then
//!     effects ─► Executor ─► Transport::send / tool runs             │  one input
//!     reports (bounded) ◄─ ResponseSink, tool outcomes ◄─────────────┘
//! ```
//!
//! Features: `jsonschema` (default), omni-protocol's feature of that name (the `jsonschema`
//! crate validates tool inputs and structured output; off, the built-in validator of the
//! common subset); `schemars`, `Call::generate_object` for `schemars::JsonSchema` types.

mod agent;
mod agent_builder;
mod call;
mod client;
mod client_builder;
pub mod delivery;
mod drive;
mod drive_agent;
mod drive_call;
mod drive_manager;
mod drive_session;
mod error;
mod executor;
pub mod exports;
mod host;
#[cfg(feature = "http1")]
pub mod http1;
pub mod machine;
mod manager;
mod manager_builder;
mod manager_link;
mod manager_presence;
pub mod mcp;
mod reports;
mod runtime;
mod session;
mod session_builder;
mod subscription;
mod sync_tool;
pub mod telemetry;
#[cfg(test)]
mod threads;
#[cfg(feature = "rustls")]
pub mod tls;
mod tool;
mod tool_runs;

pub use agent::{Agent, StateChange, WeakAgent};
pub use agent_builder::{AgentBuilder, Launch, DEFAULT_SUBSCRIBER_CAPACITY};
pub use call::{Call, CancelHandle, TextStream};
pub use client::{Client, Driver};
pub use client_builder::{Built, ClientBuilder, Connect};
pub use drive_manager::{AgentFactory, Whereabouts};
pub use drive_session::{SubscriberCount, SubscriberRole};
pub use error::{Error, SetupError};
pub use host::{Command, EventSink, Host, Reply};
pub use manager::{Opened, SessionManager, SessionOptions};
pub use manager_builder::ManagerBuilder;
pub use mcp::{McpFailure, McpServer, McpServerBuilder};
pub use runtime::{off_executor, run_on_a_thread, BlockingWork, BodyBuffers, ResponseSink, Runtime, Task, Transport};
pub use session::Session;
pub use session_builder::{Open, Opening, SessionBuilder};
pub use subscription::{Subscriber, Subscription};
pub use sync_tool::{RunSync, SyncHandler, SyncTool};
pub use telemetry::{MetricAttributes, Metrics, TokenType};
pub use tool::{handlers_by_name, AsyncHandler, AsyncTool, ToolFuture};
