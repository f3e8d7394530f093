//! # omni-core
//!
//! The pure, sans-IO core of omni: the data model, five provider dialects, stream
//! framing and accumulation. No I/O, no clock, no async runtime: drivers
//! (`omni-tokio`, `omni-smol`, `omni-blocking`) execute what the core decides.
//!
//! The pipeline for one streamed response:
//!
//! ```text
//!  (Model, Context, Options) ─► Dialect::build_request ─► HttpRequest   (driver sends it)
//!  body bytes ─► StreamDecoder ─► StreamEvent … Done | Error, and a Response
//! ```

#![forbid(unsafe_code)]

pub mod accumulator;
pub mod agent;
pub mod catalogue;
pub mod client;
pub mod decoder;
pub mod delta;
pub mod depth;
pub mod dialect;
pub mod error;
pub mod event;
pub mod framing;
pub mod generate;
pub mod http;
pub mod message;
pub mod model;
pub mod options;
pub mod provider;
pub mod proxy;
pub mod redirect;
mod request;
pub mod response;
pub mod schema;
pub mod secret;
pub mod timer;
pub mod tool;
mod tool_round;
pub mod usage;

/// The schemars crate, for `JsonSchema` bounds and derives (feature `schemars`).
#[cfg(feature = "schemars")]
pub use schemars;

pub use accumulator::Accumulator;
pub use catalogue::{Catalogue, CatalogueError, LookupError};
pub use decoder::{decode_body, Progress, StreamDecoder};
pub use delta::{BlockDelta, BlockKind, Delta, MessageMeta, UsageUpdate};
pub use dialect::{BuiltRequest, Dialect, RequestSpec};
pub use error::{ProviderError, ProviderErrorKind, RequestError, StreamError};
pub use event::StreamEvent;
pub use http::{Header, HttpRequest, Method};
pub use message::{
    Attachment, Block, Context, Message, Origin, Role, Source, Text, Thinking, ToolResult, ToolResultContent, ToolSpec,
    ToolUse,
};
pub use model::{Modality, Model, Prices};
pub use options::{CacheRetention, Effort, Options, OptionsError, OutputSchema, Reasoning, ToolChoice};
pub use provider::{ApiKey, Auth, Provider, Quirks};
pub use response::{Response, StopReason, Warning};
pub use usage::{Cost, Usage};
