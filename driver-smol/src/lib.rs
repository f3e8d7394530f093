//! # omni-smol
//!
//! The smol driver of omni: it executes the pure core's effects with smol tasks and a
//! small HTTP/1.1 client (ureq-proto's sans-IO framing over smol's TCP, futures-rustls
//! for https, connections kept alive per client), and hands the application an async [`Stream`](futures_core::Stream) of
//! events plus a future of the final response. No tokio crate is involved.
//!
//! ```no_run
//! # fn demo() -> Result<(), omni_smol::Error> {
//! use omni_smol::{Client, Options};
//!
//! let client = Client::builder().build()?; // keys from the environment
//! let response = smol::block_on(client.generate_text("anthropic:claude-sonnet-4-5", "Say hi", Options::default()))?;
//! println!("{}", response.text());
//! # Ok(()) }
//! ```
//!
//! With the `schemars` feature, types give the schemas: `Tool::from_type` (the handler
//! gets the decoded input) and `Call::generate_object` (structured output decoded into
//! the type, with corrections asked for invalid replies).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]
#![allow(clippy::use_self, unreachable_pub)] // issue 11: lint hits here are fixed when this module's rewrite lands

mod agent;
mod call;
mod client;
mod http;
mod runtime;

pub use agent::{Agent, AgentBuilder, StateChange, Subscriber, Subscription, WeakAgent};
pub use call::{Call, TextStream};
pub use client::{Client, ClientBuilder};
pub use omni_core::driver_error::Error;
pub use omni_shell::AsyncTool as Tool;

pub use omni_core as core;
pub use omni_core::agent::{
    AgentCallbacks, AgentError, AgentEvent, AgentState, ErrorDecision, NoCallbacks, RetryKind, Snapshot, Status,
    ToolDecision, TurnDecision, TurnEnd,
};
pub use omni_core::client::{ClientError, ModelRef};
pub use omni_core::generate::{GenerateError, GenerateEvent, RetryPolicy};
pub use omni_core::tool::{ToolError, ToolOutput};
pub use omni_core::{
    ApiKey, Attachment, Block, CacheRetention, Catalogue, Context, Effort, Message, Model, Options, OutputSchema,
    Provider, Reasoning, Response, Role, StopReason, StreamEvent, ToolChoice, ToolResult, ToolResultContent, ToolUse,
    Usage,
};
pub use omni_shell::DEFAULT_SUBSCRIBER_CAPACITY;
