//! # omni-protocol
//!
//! The pure, sans-IO core of omni: the data model, five provider dialects, stream
//! framing and accumulation. No I/O, no clock, no async runtime: drivers
//! (`omni-tokio`, `omni-smol`, `omni-blocking`) execute what the core decides.
//!
//! Three groups of modules:
//! - [`data`]: what the application holds and sees (messages, models, options,
//!   responses, events, errors, tool outputs, schemas);
//! - [`wire`]: the five wire formats (requests out; framing, dialects, decoding and
//!   accumulation of the bodies back to data);
//! - [`machines`]: the generate and agent state machines a driver runs, on one contract;
//! - [`text_tools`]: tools for models without native tool calling (text protocols).
//!
//! The types an application names are re-exported here.
//!
//! The pipeline for one streamed response:
//!
//! ```text
//!  (Model, Context, Options) ─► Dialect::build_request ─► HttpRequest   (driver sends it)
//!  body bytes ─► StreamDecoder ─► StreamEvent … Done | Error, and a Response
//! ```
//!
//! ## Features
//!
//! - `jsonschema` (default): [`JsonSchemaValidator`](data::schema::JsonSchemaValidator)
//!   is backed by the `jsonschema` crate, every draft and keyword. Off, it is backed by
//!   the built-in [`BuiltinValidator`](data::schema::BuiltinValidator) (the subset schemars
//!   and typical tool schemas use), which refuses a schema with a keyword it cannot check
//!   (`pattern` …) with [`SchemaError::Unsupported`](data::schema::SchemaError::Unsupported);
//!   about 2.2 MB less binary.
//! - `schemars`: schemas from Rust types (`data::schema::for_type`) and the `schemars`
//!   re-export.

#![forbid(unsafe_code)]

pub mod data;
pub mod machines;
pub mod text_tools;
pub mod wire;

/// The schemars crate, for `JsonSchema` bounds and derives (feature `schemars`).
#[cfg(feature = "schemars")]
pub use schemars;

pub use data::catalogue::{Catalogue, CatalogueError, LookupError};
pub use data::error::{ProviderError, ProviderErrorKind, RequestError, StreamError};
pub use data::event::{Fragment, StreamEvent};
pub use data::hooks::{HookContext, ProviderHooks};
pub use data::message::{
    Attachment, Block, Context, InvalidCallInput, Message, Origin, Role, Source, Text, Thinking, ToolResult,
    ToolResultContent, ToolSpec, ToolUse,
};
pub use data::model::{Modality, Model, Prices};
pub use data::options::{CacheRetention, Effort, Options, OptionsError, OutputSchema, Reasoning, ToolChoice};
pub use data::provider::{ApiKey, Auth, Provider, Quirks};
pub use data::response::{Response, StopReason, Warning};
pub use data::usage::{Cost, Usage};
pub use text_tools::{TextProtocol, ToolProtocol};
pub use wire::accumulator::Accumulator;
pub use wire::decoder::{decode_body, Progress, StreamDecoder};
pub use wire::delta::{BlockDelta, BlockKind, Delta, MessageMeta, UsageUpdate};
pub use wire::dialect::{BuiltRequest, Dialect, RequestSpec};
pub use wire::http::{Header, HttpRequest, Method};
