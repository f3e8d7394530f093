//! # omni-shell
//!
//! Everything omni's drivers share, runtime-neutral: the client builder ([`ClientBuilder`],
//! [`Connect`]), the call builder and its event stream ([`Call`], [`TextStream`]), tools
//! with async handlers ([`AsyncTool`]), the agent builder and handle ([`AgentBuilder`],
//! [`Agent`], [`Subscription`]) with the agent's host ([`Host`]), the error type, and the
//! loop that drives a machine ([`machine`], [`drive_call`]). Applications use the drivers
//! (omni-tokio, omni-smol, omni-blocking), which re-export what they hand out.

mod agent;
mod agent_builder;
mod call;
mod client_builder;
pub mod delivery;
mod drive;
mod host;
pub mod machine;
mod subscription;
mod tool;

pub use agent::{Agent, LoopMessage, StateChange, WeakAgent};
pub use agent_builder::{AgentBuilder, Launch, DEFAULT_SUBSCRIBER_CAPACITY};
pub use call::{Call, Handlers, StartCall, TextStream};
pub use client_builder::{Built, ClientBuilder, Connect};
pub use drive::{drive_call, CallRuntime};
pub use host::{Command, EventSink, Host, Reply};
pub use omni_core::driver_error::Error;
pub use subscription::{Subscriber, Subscription};
pub use tool::{handlers_by_name, AsyncHandler, AsyncTool, ToolFuture};
