//! # omni-shell
//!
//! Everything omni's drivers share, runtime-neutral: the client builder ([`ClientBuilder`],
//! [`Connect`]), the call builder and its event stream ([`Call`], [`TextStream`]), tools
//! with async handlers ([`AsyncTool`]), the agent builder and handle ([`AgentBuilder`],
//! [`Agent`], [`Subscription`]) with the agent's host ([`Host`]), the error type, and the
//! loops that drive the machines, over a driver's [`Runtime`] and [`Transport`]. Applications use the drivers
//! (omni-tokio, omni-smol, omni-blocking), which re-export what they hand out.

#![allow(clippy::use_self)] // issue 11: lint hits here are fixed when this module's rewrite lands

mod agent;
mod agent_builder;
mod call;
mod client_builder;
pub mod delivery;
mod drive_agent;
mod drive_call;
mod executor;
mod host;
pub mod machine;
mod runtime;
mod subscription;
mod tool;

pub use agent::{Agent, LoopMessage, StateChange, WeakAgent};
pub use agent_builder::{AgentBuilder, Launch, DEFAULT_SUBSCRIBER_CAPACITY};
pub use call::{Call, StartCall, TextStream};
pub use client_builder::{Built, ClientBuilder, Connect};
pub use drive_agent::{spawn_agent, spawn_agent_loop};
pub use drive_call::spawn_call;
pub use executor::Handlers;
pub use host::{Command, EventSink, Host, Reply};
pub use omni_core::driver_error::Error;
pub use runtime::{ResponseSink, Runtime, Task, Transport};
pub use subscription::{Subscriber, Subscription};
pub use tool::{handlers_by_name, AsyncHandler, AsyncTool, ToolFuture};
